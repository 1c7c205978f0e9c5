#pragma once
// What the device plugin needs from the GPUs of its node: discovery and Xid events. NVML
// implements it (nvml.h); tests implement it in memory (docs/design/STYLE.md: every OS access
// behind one seam).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace fracgpu::nvml {

/// One physical GPU as discovered.
struct GpuInfo {
  std::string uuid;    ///< "GPU-…"
  uint32_t index = 0;  ///< NVML index
  std::string name;    ///< NVML product name, e.g. "Tesla V100-PCIE-32GB"
  uint64_t total_memory_bytes = 0;
  std::string pci_bus_id;  ///< sysfs form "0000:3b:00.0"; empty when unknown
  int32_t numa_node = 0;   ///< from sysfs; 0 when unknown or negative

  bool operator==(const GpuInfo&) const = default;
};

/// Facts of a GPU beyond GpuInfo that a driver may not report (older drivers lack the entry
/// points, some products answer NVML_ERROR_NOT_SUPPORTED); "" = unknown. Published as
/// ResourceSlice attributes (dra/slices.h).
struct GpuFacts {
  std::string architecture;        ///< e.g. "Hopper" (nvml::ArchitectureName)
  std::string compute_capability;  ///< CUDA compute capability "major.minor", e.g. "9.0"
  std::string driver_version;      ///< the driver's version as NVML prints it, e.g. "580.95.05"

  bool operator==(const GpuFacts&) const = default;
};

/// One Xid event: `uuid` is empty when NVML did not name a device (all devices affected).
struct XidEvent {
  std::string uuid;
  uint64_t xid = 0;
};

/// Discovery and health events of a node's GPUs.
class GpuSource {
 public:
  virtual ~GpuSource() = default;
  /// Every GPU of the node in index order. Errors: kUnavailable when the driver cannot be
  /// queried, kInternal for an answer that makes no sense (named).
  virtual Result<std::vector<GpuInfo>> ListGpus() = 0;
  /// Waits up to `timeout` for the next Xid critical error. Returns nullopt on timeout.
  /// Errors: kUnavailable when events are not supported (the caller stops watching).
  /// Called from one thread at a time.
  virtual Result<std::optional<XidEvent>> WaitXid(std::chrono::milliseconds timeout) = 0;
};

}  // namespace fracgpu::nvml
