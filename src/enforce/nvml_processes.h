#pragma once
// The driver's per-process account: nvmlDeviceGetComputeRunningProcesses_v3 and, where this NVML
// has it, nvmlDeviceGetGraphicsRunningProcesses_v3 (OpenGL / Vulkan memory) on every GPU,
// over libnvidia-ml.so.1 loaded with dlopen (prototypes from src/api/nvml.h, NVML API
// version 13; docs/design/wire-apis.md §8). Used by `fracgpu run` and the node agent.

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "enforce/enforce.h"

namespace fracgpu::enforce {

/// Where the enforcement loop gets GPUs and their processes (tests implement it in memory).
class ProcessSource {
 public:
  virtual ~ProcessSource() = default;
  /// Every GPU in NVML index order with its compute and graphics processes (host PIDs, bytes;
  /// one entry per PID, the larger figure where a PID is in both lists). A GPU whose
  /// processes cannot be listed has processes_ok false (its error in `errors`). `managed` is
  /// left true (the caller decides). Errors: kUnavailable when no GPU can be listed.
  virtual Result<std::vector<GpuSample>> Sample(std::vector<std::string>* errors) = 0;
};

/// ProcessSource over the real (or fake) NVML. One caller at a time.
class NvmlProcesses final : public ProcessSource {
 public:
  /// dlopens `library`, calls nvmlInit_v2. Errors: kUnavailable naming the library and why.
  static Result<std::unique_ptr<NvmlProcesses>> Open(
      const std::string& library = "libnvidia-ml.so.1");
  ~NvmlProcesses() override;
  NvmlProcesses(const NvmlProcesses&) = delete;
  NvmlProcesses& operator=(const NvmlProcesses&) = delete;
  Result<std::vector<GpuSample>> Sample(std::vector<std::string>* errors) override;

 private:
  struct Impl;
  explicit NvmlProcesses(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fracgpu::enforce
