#pragma once
// GpuStatsSource over the real NVML, loaded with dlopen (default "libnvidia-ml.so.1").
// src/nvml/ (the device plugin's wrapper) covers discovery and Xid events only; the monitor
// needs utilisation entry points that wrapper does not load, so this file loads them, with
// our own prototypes (docs/design/wire-apis.md §8.2–8.3), no NVIDIA header at build time.

#include <memory>
#include <string>

#include "monitor/gpu_stats.h"

namespace fracgpu::monitor {

/// The NVML-backed source. Thread-compatible: one caller at a time (the monitor's poll loop).
class NvmlGpuStats final : public GpuStatsSource {
 public:
  /// dlopens `library` and calls nvmlInit_v2. Errors: kUnavailable naming the library and
  /// dlerror() or the NVML error, or the missing entry point.
  static Result<std::unique_ptr<NvmlGpuStats>> Open(
      const std::string& library = "libnvidia-ml.so.1");
  ~NvmlGpuStats() override;
  NvmlGpuStats(const NvmlGpuStats&) = delete;
  NvmlGpuStats& operator=(const NvmlGpuStats&) = delete;

  Result<std::vector<GpuStats>> ListGpus() override;
  Result<std::map<uint32_t, double>> ProcessSmUtilization(const std::string& uuid) override;

 private:
  struct Impl;
  explicit NvmlGpuStats(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fracgpu::monitor
