#include "enforce/nvml_processes.h"

#include <map>

#include "api/nvml.h"
#include "nvml/library.h"

namespace fracgpu::enforce {
namespace {

using CountFn = decltype(&::nvmlDeviceGetCount_v2);
using HandleByIndexFn = decltype(&::nvmlDeviceGetHandleByIndex_v2);
using UuidFn = decltype(&::nvmlDeviceGetUUID);
using ProcessesFn = decltype(&::nvmlDeviceGetComputeRunningProcesses_v3);

// usedGpuMemory is kNvmlValueNotAvailable when the driver cannot tell (e.g. under some
// virtualisation); such a process is listed with 0 bytes.

}  // namespace

struct NvmlProcesses::Impl {
  std::unique_ptr<nvml::Library> lib;  // shuts NVML down at destruction, keeps it mapped
  CountFn count = nullptr;
  HandleByIndexFn by_index = nullptr;
  UuidFn uuid = nullptr;
  ProcessesFn processes = nullptr;
  ProcessesFn graphics = nullptr;  // optional: nullptr where this NVML lacks it
  std::vector<nvmlProcessInfo_t> buffer;

  // One process list into `out` (host PID → bytes, the larger where a PID is listed twice:
  // a process with compute and graphics contexts is in both lists, with one figure).
  nvmlReturn_t List(ProcessesFn fn, nvmlDevice_t dev, std::map<uint32_t, uint64_t>* out) {
    // The list may grow between calls: a few attempts with the count the driver asked for.
    unsigned int count = static_cast<unsigned int>(buffer.size());
    nvmlReturn_t rc = fn(dev, &count, buffer.empty() ? nullptr : buffer.data());
    for (int attempt = 0; attempt < 4 && rc == NVML_ERROR_INSUFFICIENT_SIZE; ++attempt) {
      buffer.resize(count + 16);
      count = static_cast<unsigned int>(buffer.size());
      rc = fn(dev, &count, buffer.data());
    }
    if (rc != NVML_SUCCESS) return rc;
    for (unsigned int k = 0; k < count && k < buffer.size(); ++k) {
      const nvmlProcessInfo_t& p = buffer[k];
      uint64_t bytes = p.usedGpuMemory == kNvmlValueNotAvailable ? 0 : p.usedGpuMemory;
      uint64_t& have = (*out)[p.pid];
      if (bytes > have) have = bytes;
    }
    return NVML_SUCCESS;
  }

  std::string Error(const std::string& what, nvmlReturn_t rc) const { return lib->Error(what, rc); }
};

NvmlProcesses::NvmlProcesses(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

NvmlProcesses::~NvmlProcesses() = default;

Result<std::unique_ptr<NvmlProcesses>> NvmlProcesses::Open(const std::string& library) {
  auto impl = std::make_unique<Impl>();
  auto lib = nvml::Library::Open(
      library, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetUUID",
                "nvmlDeviceGetComputeRunningProcesses_v3"});
  if (!lib.ok()) return lib.status();
  impl->lib = std::move(lib).value();
  const nvml::Library& l = *impl->lib;
  impl->count = l.Get<CountFn>("nvmlDeviceGetCount_v2");
  impl->by_index = l.Get<HandleByIndexFn>("nvmlDeviceGetHandleByIndex_v2");
  impl->uuid = l.Get<UuidFn>("nvmlDeviceGetUUID");
  impl->processes = l.Get<ProcessesFn>("nvmlDeviceGetComputeRunningProcesses_v3");
  impl->graphics = l.Get<ProcessesFn>("nvmlDeviceGetGraphicsRunningProcesses_v3");
  return std::unique_ptr<NvmlProcesses>(new NvmlProcesses(std::move(impl)));
}

Result<std::vector<GpuSample>> NvmlProcesses::Sample(std::vector<std::string>* errors) {
  unsigned int n = 0;
  if (nvmlReturn_t rc = impl_->count(&n); rc != NVML_SUCCESS)
    return Unavailable(impl_->Error("nvmlDeviceGetCount_v2", rc));
  std::vector<GpuSample> out;
  for (unsigned int i = 0; i < n && i < 64; ++i) {
    GpuSample g;
    g.index = i;
    nvmlDevice_t dev = nullptr;
    char uuid[96] = {};
    if (nvmlReturn_t rc = impl_->by_index(i, &dev); rc != NVML_SUCCESS) {
      if (errors)
        errors->push_back(
            impl_->Error("nvmlDeviceGetHandleByIndex_v2(" + std::to_string(i) + ")", rc));
      continue;  // no UUID: cannot even be matched to a slice
    }
    if (nvmlReturn_t rc = impl_->uuid(dev, uuid, sizeof uuid); rc != NVML_SUCCESS) {
      if (errors)
        errors->push_back(impl_->Error("nvmlDeviceGetUUID(" + std::to_string(i) + ")", rc));
      continue;
    }
    uuid[sizeof uuid - 1] = '\0';
    g.uuid = uuid;
    // Compute and graphics (OpenGL / Vulkan) processes: both hold device memory.
    std::map<uint32_t, uint64_t> procs;
    nvmlReturn_t rc = impl_->List(impl_->processes, dev, &procs);
    if (rc != NVML_SUCCESS) {
      g.processes_ok = false;
      if (errors)
        errors->push_back(
            impl_->Error("nvmlDeviceGetComputeRunningProcesses_v3(" + g.uuid + ")", rc));
    } else if (impl_->graphics != nullptr &&
               (rc = impl_->List(impl_->graphics, dev, &procs)) != NVML_SUCCESS &&
               rc != NVML_ERROR_NOT_SUPPORTED) {
      g.processes_ok = false;
      if (errors)
        errors->push_back(
            impl_->Error("nvmlDeviceGetGraphicsRunningProcesses_v3(" + g.uuid + ")", rc));
    }
    if (g.processes_ok)
      for (const auto& [pid, bytes] : procs) g.processes.push_back({pid, bytes});
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace fracgpu::enforce
