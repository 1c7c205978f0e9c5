#pragma once
// What the monitor reads from the node's GPUs: per-GPU memory and utilisation, and per-process
// SM utilisation (for per-container utilisation). NvmlGpuStats (nvml_stats.h) implements it
// over libnvidia-ml.so.1; tests implement it in memory (docs/design/STYLE.md: every OS access
// behind one seam).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace fracgpu::monitor {

/// One physical GPU as NVML reports it at one poll.
struct GpuStats {
  std::string uuid;    ///< "GPU-…"
  uint32_t index = 0;  ///< NVML index
  std::string name;    ///< product name, e.g. "NVIDIA A100-SXM4-40GB"
  uint64_t memory_total_bytes = 0;
  uint64_t memory_used_bytes = 0;
  std::optional<double> utilization;         ///< GPU busy ratio 0..1 (nvmlUtilization_t.gpu / 100)
  std::optional<double> memory_utilization;  ///< memory-controller busy ratio 0..1

  bool operator==(const GpuStats&) const = default;
};

/// Per-GPU statistics and per-process SM utilisation.
class GpuStatsSource {
 public:
  virtual ~GpuStatsSource() = default;
  /// Every GPU of the node in NVML index order. A GPU whose utilisation cannot be read is still
  /// listed (utilization empty). Errors: kUnavailable when NVML cannot be queried.
  virtual Result<std::vector<GpuStats>> ListGpus() = 0;
  /// SM utilisation ratio (0..1) per host PID on GPU `uuid` since the previous call for that GPU
  /// (the first call: whatever the driver still holds, at most its buffer of a few seconds);
  /// a PID with several samples gets their mean. Empty when no process ran kernels.
  /// Errors: kNotFound (unknown uuid), kUnavailable (NVML error, e.g. not supported on MIG).
  virtual Result<std::map<uint32_t, double>> ProcessSmUtilization(const std::string& uuid) = 0;
};

}  // namespace fracgpu::monitor
