#include "monitor/nvml_stats.h"

#include <vector>

#include "api/nvml.h"
#include "nvml/library.h"

namespace fracgpu::monitor {
namespace {

// Types and prototypes: the one NVML declaration set (src/api/nvml.h).
constexpr nvmlReturn_t kSuccess = NVML_SUCCESS;
constexpr nvmlReturn_t kNotFound = NVML_ERROR_NOT_FOUND;
constexpr nvmlReturn_t kInsufficientSize = NVML_ERROR_INSUFFICIENT_SIZE;

using CountFn = decltype(&::nvmlDeviceGetCount_v2);
using HandleByIndexFn = decltype(&::nvmlDeviceGetHandleByIndex_v2);
using HandleByUuidFn = decltype(&::nvmlDeviceGetHandleByUUID);
using StringFn = decltype(&::nvmlDeviceGetUUID);
using MemoryFn = decltype(&::nvmlDeviceGetMemoryInfo);
using UtilizationFn = decltype(&::nvmlDeviceGetUtilizationRates);
using ProcessUtilizationFn = decltype(&::nvmlDeviceGetProcessUtilization);

}  // namespace

struct NvmlGpuStats::Impl {
  std::unique_ptr<nvml::Library> lib;  // shuts NVML down at destruction, keeps it mapped
  CountFn count = nullptr;
  HandleByIndexFn by_index = nullptr;
  HandleByUuidFn by_uuid = nullptr;
  StringFn uuid = nullptr;
  StringFn name = nullptr;
  MemoryFn memory = nullptr;
  UtilizationFn utilization = nullptr;                  // optional
  ProcessUtilizationFn process_utilization = nullptr;   // optional
  std::map<std::string, unsigned long long> last_seen;  // uuid → newest sample timestamp (µs)

  std::string Error(const std::string& what, nvmlReturn_t rc) const { return lib->Error(what, rc); }
};

NvmlGpuStats::NvmlGpuStats(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

NvmlGpuStats::~NvmlGpuStats() = default;

Result<std::unique_ptr<NvmlGpuStats>> NvmlGpuStats::Open(const std::string& library) {
  auto impl = std::make_unique<Impl>();
  auto lib = nvml::Library::Open(library, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2",
                                           "nvmlDeviceGetHandleByUUID", "nvmlDeviceGetUUID",
                                           "nvmlDeviceGetName", "nvmlDeviceGetMemoryInfo"});
  if (!lib.ok()) return lib.status();
  impl->lib = std::move(lib).value();
  const nvml::Library& l = *impl->lib;
  impl->count = l.Get<CountFn>("nvmlDeviceGetCount_v2");
  impl->by_index = l.Get<HandleByIndexFn>("nvmlDeviceGetHandleByIndex_v2");
  impl->by_uuid = l.Get<HandleByUuidFn>("nvmlDeviceGetHandleByUUID");
  impl->uuid = l.Get<StringFn>("nvmlDeviceGetUUID");
  impl->name = l.Get<StringFn>("nvmlDeviceGetName");
  impl->memory = l.Get<MemoryFn>("nvmlDeviceGetMemoryInfo");
  // Optional capabilities: device and per-process utilisation.
  impl->utilization = l.Get<UtilizationFn>("nvmlDeviceGetUtilizationRates");
  impl->process_utilization = l.Get<ProcessUtilizationFn>("nvmlDeviceGetProcessUtilization");
  return std::unique_ptr<NvmlGpuStats>(new NvmlGpuStats(std::move(impl)));
}

Result<std::vector<GpuStats>> NvmlGpuStats::ListGpus() {
  unsigned int n = 0;
  if (nvmlReturn_t rc = impl_->count(&n); rc != kSuccess)
    return Unavailable(impl_->Error("nvmlDeviceGetCount_v2", rc));
  std::vector<GpuStats> out;
  for (unsigned int i = 0; i < n; ++i) {
    nvmlDevice_t dev = nullptr;
    if (nvmlReturn_t rc = impl_->by_index(i, &dev); rc != kSuccess)
      return Unavailable(
          impl_->Error(("nvmlDeviceGetHandleByIndex_v2(" + std::to_string(i) + ")"), rc));
    GpuStats g;
    g.index = i;
    char buf[96] = {};
    if (nvmlReturn_t rc = impl_->uuid(dev, buf, sizeof buf); rc != kSuccess)
      return Unavailable(impl_->Error(("nvmlDeviceGetUUID(" + std::to_string(i) + ")"), rc));
    buf[sizeof buf - 1] = '\0';
    g.uuid = buf;
    char name[96] = {};
    if (impl_->name(dev, name, sizeof name) == kSuccess) {
      name[sizeof name - 1] = '\0';
      g.name = name;
    }
    nvmlMemory_t mem{};
    if (nvmlReturn_t rc = impl_->memory(dev, &mem); rc != kSuccess)
      return Unavailable(impl_->Error(("nvmlDeviceGetMemoryInfo(" + g.uuid + ")"), rc));
    g.memory_total_bytes = mem.total;
    g.memory_used_bytes = mem.used;
    nvmlUtilization_t util{};
    if (impl_->utilization && impl_->utilization(dev, &util) == kSuccess) {
      g.utilization = (util.gpu > 100 ? 100 : util.gpu) / 100.0;
      g.memory_utilization = (util.memory > 100 ? 100 : util.memory) / 100.0;
    }
    out.push_back(std::move(g));
  }
  return out;
}

Result<std::map<uint32_t, double>> NvmlGpuStats::ProcessSmUtilization(const std::string& uuid) {
  if (!impl_->process_utilization)
    return Unavailable("nvmlDeviceGetProcessUtilization is not available");
  nvmlDevice_t dev = nullptr;
  if (nvmlReturn_t rc = impl_->by_uuid(uuid.c_str(), &dev); rc != kSuccess) {
    std::string msg = impl_->Error(("nvmlDeviceGetHandleByUUID(" + uuid + ")"), rc);
    return rc == kNotFound ? NotFound(msg) : Unavailable(msg);
  }
  unsigned long long last = impl_->last_seen[uuid];
  std::vector<nvmlProcessUtilizationSample_t> samples;
  unsigned int count = 0;
  nvmlReturn_t rc = impl_->process_utilization(dev, nullptr, &count, last);
  // The buffer may grow between the two calls: retry a few times with the new count.
  for (int attempt = 0; attempt < 3 && rc == kInsufficientSize; ++attempt) {
    samples.resize(count + 4);
    count = static_cast<unsigned int>(samples.size());
    rc = impl_->process_utilization(dev, samples.data(), &count, last);
  }
  std::map<uint32_t, double> out;
  if (rc == kNotFound || (rc == kSuccess && samples.empty())) return out;  // no samples
  if (rc != kSuccess)
    return Unavailable(impl_->Error(("nvmlDeviceGetProcessUtilization(" + uuid + ")"), rc));
  std::map<uint32_t, std::pair<double, int>> sums;
  for (unsigned int k = 0; k < count && k < samples.size(); ++k) {
    const auto& s = samples[k];
    auto& [sum, n] = sums[s.pid];
    sum += (s.smUtil > 100 ? 100 : s.smUtil) / 100.0;
    ++n;
    if (s.timeStamp > impl_->last_seen[uuid]) impl_->last_seen[uuid] = s.timeStamp;
  }
  for (const auto& [pid, sn] : sums) out[pid] = sn.first / sn.second;
  return out;
}

}  // namespace fracgpu::monitor
