#include "node/inventory.h"

#include <algorithm>
#include <cmath>

namespace fracgpu::node {

std::string GpuTypeName(const std::string& nvml_name) {
  if (nvml_name.rfind("NVIDIA", 0) == 0) return nvml_name;
  return "NVIDIA-" + nvml_name;
}

std::vector<core::DeviceInfo> BuildDeviceInfos(const std::vector<nvml::GpuInfo>& gpus,
                                               const DeviceConfig& config,
                                               const std::set<std::string>& unhealthy) {
  constexpr uint64_t kMiB = 1024 * 1024;
  std::vector<core::DeviceInfo> out;
  for (const auto& gpu : gpus) {
    if (std::find(config.filter_uuids.begin(), config.filter_uuids.end(), gpu.uuid) !=
        config.filter_uuids.end())
      continue;
    if (std::find(config.filter_indices.begin(), config.filter_indices.end(), gpu.index) !=
        config.filter_indices.end()) {
      continue;
    }
    int64_t total_mib = static_cast<int64_t>(gpu.total_memory_bytes / kMiB);
    if (total_mib == 0) total_mib = config.preconfigured_memory_mib;
    if (total_mib == 0) continue;
    core::DeviceInfo d;
    d.uuid = gpu.uuid;
    d.index = static_cast<int32_t>(gpu.index);
    d.count = config.split_count;
    d.devmem_mib =
        static_cast<int64_t>(std::floor(static_cast<double>(total_mib) * config.memory_scaling));
    d.devcore = static_cast<int32_t>(std::lround(100.0 * config.core_scaling));
    d.type = GpuTypeName(gpu.name);
    d.numa = gpu.numa_node;
    d.health = unhealthy.count(gpu.uuid) == 0;
    d.mode = "hami-core";
    out.push_back(std::move(d));
  }
  return out;
}

std::string ReplicaId(const std::string& uuid, int32_t replica) {
  return uuid + "-" + std::to_string(replica);
}

Result<std::string> ReplicaUuid(const std::string& replica_id) {
  size_t dash = replica_id.rfind('-');
  if (dash == std::string::npos || dash == 0 || dash + 1 == replica_id.size() ||
      !std::all_of(replica_id.begin() + static_cast<std::ptrdiff_t>(dash) + 1, replica_id.end(),
                   [](char c) { return c >= '0' && c <= '9'; })) {
    return InvalidArgument("device ID \"" + replica_id.substr(0, 80) +
                           "\" is not of the form <GPU UUID>-<replica>");
  }
  return replica_id.substr(0, dash);
}

}  // namespace fracgpu::node
