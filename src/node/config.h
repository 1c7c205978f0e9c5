#pragma once
// The node plugins' configuration (device plugin and DRA driver): the cluster device config
// (YAML, the `nvidia:` section HAMi's chart ships as device-config.yaml, shared with the scheduler
// and the webhook, which link it alone as fracgpu_device_config) and the per-node overrides
// (JSON `{"nodeconfig":[{"name":…}]}`), docs/design/hami-behaviour.md §4.1. Both are outside input:
// parsed in one place, validated, fuzzed (tests/fuzz/deviceplugin_config_fuzz.cc).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/request.h"

namespace fracgpu::node {

/// Everything the device plugin, the DRA driver, the webhook and the scheduler read from the
/// cluster device config and the per-node overrides.
struct DeviceConfig {
  /// resourceCountName, resourceMemoryName, …, and the request defaults every component applies
  /// (resources.defaults: defaultMemory, defaultCores, defaultGPUNum, memoryFactor).
  core::ResourceNames resources;
  int32_t split_count = 10;     ///< deviceSplitCount: slices per GPU, 1..1000
  double memory_scaling = 1.0;  ///< deviceMemoryScaling (> 0; > 1 oversubscribes)
  double core_scaling = 1.0;    ///< deviceCoreScaling (> 0)
  /// defaultMemory, MiB (0 = whole card); the same value as resources.defaults.
  int64_t default_memory_mib = 0;
  int32_t default_cores = 0;  ///< defaultCores, percent 0..100 (= resources.defaults)
  /// overwriteEnv: NVIDIA_VISIBLE_DEVICES=none for containers without a GPU (webhook);
  /// nullopt = not in the file (the webhook's own default, on).
  std::optional<bool> overwrite_env;
  /// runtimeClassName: set on GPU pods that name none ("" = leave pods alone).
  std::string runtime_class_name;
  bool disable_core_limit = false;  ///< disableCoreLimit → GPU_CORE_UTILIZATION_POLICY=disable
  /// gpuCorePolicy (HAMi's `devices.nvidia.gpuCorePolicy`): "default", "force" or "disable",
  /// stored lower case. Not "default": every container gets GPU_CORE_UTILIZATION_POLICY=<it>,
  /// over the container's own value (HAMi's webhook appends it after the user's env).
  std::string core_policy = "default";
  std::string libcuda_log_level;      ///< libCudaLogLevel ("" = not set), "0".."4"
  bool enable_numa_topology = false;  ///< enableNumaTopology: report NUMA to kubelet
  int64_t preconfigured_memory_mib =
      0;                             ///< preConfiguredDeviceMemory, MiB, for GPUs NVML cannot size
  bool preferred_allocation = true;  ///< enablegetpreferredallocation (per node)
  std::vector<std::string> filter_uuids;  ///< filterdevices.uuid: GPUs left out
  std::vector<uint32_t> filter_indices;   ///< filterdevices.index: GPUs left out
  /// Keys accepted without an effect here, each with the reason (e.g. the MIG lists: no GPU
  /// runs in MIG mode under fracgpu); the commands log them at start. Not compared by ==.
  std::vector<std::string> notes;

  /// Field-wise equality (core::ResourceNames has no operator==, so not defaulted).
  bool operator==(const DeviceConfig& other) const;
};

/// Parses the cluster device config YAML (HAMi v2.10's `hami-scheduler-device` ConfigMap
/// format); keys absent keep DeviceConfig's defaults, other vendors' sections are ignored.
/// Every key of the `nvidia:` section must be one of KnownNvidiaKeys(). Errors:
/// kInvalidArgument naming the key and the value (e.g. `nvidia.deviceSplitCount must be an
/// integer 1..1000, got "0"`, `nvidia.migStrategy is not a key fracgpu knows …`).
Result<DeviceConfig> ParseDeviceConfigYaml(const std::string& text);

/// The keys of the `nvidia:` section ParseDeviceConfigYaml accepts, in HAMi's spelling
/// (docs/hami-migration.md "Device config" lists each with its effect; a test checks the two
/// agree). Any other key is refused.
const std::vector<std::string>& KnownNvidiaKeys();

/// Applies the entry of the per-node overrides JSON whose `name` is `node_name` to `base` and
/// returns the result; `base` unchanged when no entry names the node. Errors: kInvalidArgument
/// naming the entry, the field and the value (the input config is never partly changed).
Result<DeviceConfig> ApplyNodeOverrides(const DeviceConfig& base, const std::string& json_text,
                                        const std::string& node_name);

}  // namespace fracgpu::node
