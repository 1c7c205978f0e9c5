#pragma once
// What this node's GPUs offer: the register annotation's entries (docs/design/CONTRACT.md §2) and
// the replica device IDs the device plugin advertises to kubelet (docs/design/hami-behaviour.md
// §4.3: each GPU as `count` devices `<UUID>-<i>`). The DRA driver publishes the same entries.

#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/device.h"
#include "node/config.h"
#include "nvml/gpu_source.h"

namespace fracgpu::node {

/// NVML's product name as the register annotation's `type`: prefixed with "NVIDIA-" unless it
/// already starts with "NVIDIA" (docs/design/CONTRACT.md §2).
std::string GpuTypeName(const std::string& nvml_name);

/// Builds the register entries of `gpus` under `config`: GPUs left out by filterdevices are
/// dropped; `count` = split count; `devmem` = floor(total MiB × memory scaling) (a GPU NVML
/// reports 0 bytes for takes preConfiguredDeviceMemory, or is dropped when that is 0);
/// `devcore` = round(100 × core scaling); `health` false for UUIDs in `unhealthy`.
std::vector<core::DeviceInfo> BuildDeviceInfos(const std::vector<nvml::GpuInfo>& gpus,
                                               const DeviceConfig& config,
                                               const std::set<std::string>& unhealthy);

/// The kubelet device ID of replica `replica` of GPU `uuid`: "<uuid>-<replica>".
std::string ReplicaId(const std::string& uuid, int32_t replica);

/// The GPU UUID of a replica ID made by ReplicaId (strips the last "-<digits>").
/// Errors: kInvalidArgument naming the ID when it has no numeric suffix.
Result<std::string> ReplicaUuid(const std::string& replica_id);

}  // namespace fracgpu::node
