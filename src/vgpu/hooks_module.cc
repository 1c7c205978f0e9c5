// Module and library hooks: cuModuleLoad, cuModuleLoadData, cuModuleLoadDataEx,
// cuModuleLoadFatBinary, cuLibraryLoadData, cuLibraryLoadFromFile and their unloads. Loading
// code takes device memory (code, constants, globals, per-module runtime data) that no
// allocation call shows, so it is measured around the load and charged to the slot's
// module_bytes on the current context's device:
//   with the host PID known: the growth of this process's usage in NVML
//     (nvmlDeviceGetComputeRunningProcesses_v3) minus what this process charged meanwhile
//     (other threads' allocations), so other processes' activity never counts;
//   otherwise: the growth of the device's used memory (cuMemGetInfo_v2 total - free, the
//     driver's own figure) minus this process's charges meanwhile; another process
//     allocating at the same moment can then be counted too (docs/vgpu.md).
// A load that would take the container above its limit is undone (unloaded) and answered
// CUDA_ERROR_OUT_OF_MEMORY. A load with no current context (cuLibraryLoad* before any
// context; the driver loads lazily later) is charged 0 bytes.
#include "vgpu/accounting.h"
#include "vgpu/host_pid.h"
#include "vgpu/interpose.h"
#include "vgpu/state.h"
#include "vgpu/table.h"

using namespace fracgpu::vgpu;

namespace {

/// One reading: the process's (or the device's) physical usage and this process's charges.
struct Reading {
  bool ok = false;
  bool nvml = false;  // usage is this process's, from NVML (else the device's, from the driver)
  uint64_t usage = 0;
  uint64_t charged = 0;
};

Reading Read(int dev) {
  Reading r;
  r.charged = ProcessCharged(dev);
  int32_t host_pid = OwnHostPid();
  if (host_pid > 0) {
    NvmlProcs procs;
    ListNvmlProcesses(dev, &procs);
    if (procs.ok) {
      r.ok = r.nvml = true;
      for (unsigned i = 0; i < procs.count; ++i) {
        if (procs.pid[i] != static_cast<unsigned>(host_pid)) continue;
        if (procs.used[i] == ~0ull)
          r.ok = false;  // NVML_VALUE_NOT_AVAILABLE
        else
          r.usage = procs.used[i];
      }
      if (r.ok) return r;
    }
  }
  size_t free_bytes = 0, total_bytes = 0;
  if (REAL(cuMemGetInfo_v2)(&free_bytes, &total_bytes) == CUDA_SUCCESS) {
    r.ok = true;
    r.nvml = false;
    r.usage = total_bytes > free_bytes ? total_bytes - free_bytes : 0;
  }
  return r;
}

/// Bytes the load took: growth of usage minus growth of our own charges, never negative.
uint64_t Delta(const Reading& before, const Reading& after) {
  if (!before.ok || !after.ok || before.nvml != after.nvml) return 0;
  uint64_t grown = after.usage > before.usage ? after.usage - before.usage : 0;
  uint64_t charged = after.charged > before.charged ? after.charged - before.charged : 0;
  return grown > charged ? grown - charged : 0;
}

/// Loads through `load`, measures and charges; `unload` undoes the load on a refused charge.
template <typename Handle, typename Load, typename Unload>
CUresult ChargedLoad(Handle* handle, bool library, Load load, Unload unload) {
  CUdevice ordinal = -1;
  int dev = CurrentDeviceIndex(&ordinal);
  if (dev < 0 || !handle) return load();  // unmanaged, denied, or no current context
  Reading before = Read(dev);
  CUresult r = load();
  if (r != CUDA_SUCCESS) return r;
  uint64_t bytes = Delta(before, Read(dev));
  if (bytes > 0 && Charge(dev, bytes, ChargeKind::kModule, "a module load") != CUDA_SUCCESS) {
    unload(*handle);
    *handle = nullptr;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Entry e;
  e.kind = Kind::kModule;
  e.key = reinterpret_cast<uint64_t>(*handle);
  e.dev = static_cast<int8_t>(dev);
  e.size = bytes;
  e.aux = library ? 1 : 0;
  if (!TableInsert(e)) {
    Log(kLogError, "allocation table full: module of %llu bytes stays charged until exit",
        static_cast<unsigned long long>(bytes));
  }
  return r;
}

template <typename Handle, typename Unload>
CUresult ChargedUnload(Handle handle, Unload unload) {
  Entry e;
  bool known = TableRemove(Kind::kModule, reinterpret_cast<uint64_t>(handle), &e);
  CUresult r = unload(handle);
  if (known) {
    if (r == CUDA_SUCCESS)
      Uncharge(e.dev, e.size, ChargeKind::kModule);
    else
      TableInsert(e);
  }
  return r;
}

CUresult UnloadModule(CUmodule m) { return REAL(cuModuleUnload)(m); }
CUresult UnloadLibrary(CUlibrary l) { return REAL(cuLibraryUnload)(l); }

}  // namespace

FRACGPU_EXPORT CUresult cuModuleLoad(CUmodule* module, const char* fname) noexcept {
  return ChargedLoad(
      module, false, [&] { return REAL(cuModuleLoad)(module, fname); }, UnloadModule);
}
FRACGPU_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) noexcept {
  return ChargedLoad(
      module, false, [&] { return REAL(cuModuleLoadData)(module, image); }, UnloadModule);
}
FRACGPU_EXPORT CUresult cuModuleLoadDataEx(CUmodule* module, const void* image,
                                           unsigned int num_options, CUjit_option* options,
                                           void** option_values) noexcept {
  return ChargedLoad(
      module, false,
      [&] { return REAL(cuModuleLoadDataEx)(module, image, num_options, options, option_values); },
      UnloadModule);
}
FRACGPU_EXPORT CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fat_cubin) noexcept {
  return ChargedLoad(
      module, false, [&] { return REAL(cuModuleLoadFatBinary)(module, fat_cubin); }, UnloadModule);
}
FRACGPU_EXPORT CUresult cuModuleUnload(CUmodule module) noexcept {
  return ChargedUnload(module, UnloadModule);
}

FRACGPU_EXPORT CUresult cuLibraryLoadData(CUlibrary* library, const void* code,
                                          CUjit_option* jit_options, void** jit_option_values,
                                          unsigned int num_jit_options,
                                          CUlibraryOption* library_options,
                                          void** library_option_values,
                                          unsigned int num_library_options) noexcept {
  return ChargedLoad(
      library, true,
      [&] {
        return REAL(cuLibraryLoadData)(library, code, jit_options, jit_option_values,
                                       num_jit_options, library_options, library_option_values,
                                       num_library_options);
      },
      UnloadLibrary);
}
FRACGPU_EXPORT CUresult cuLibraryLoadFromFile(CUlibrary* library, const char* file_name,
                                              CUjit_option* jit_options, void** jit_option_values,
                                              unsigned int num_jit_options,
                                              CUlibraryOption* library_options,
                                              void** library_option_values,
                                              unsigned int num_library_options) noexcept {
  return ChargedLoad(
      library, true,
      [&] {
        return REAL(cuLibraryLoadFromFile)(library, file_name, jit_options, jit_option_values,
                                           num_jit_options, library_options, library_option_values,
                                           num_library_options);
      },
      UnloadLibrary);
}
FRACGPU_EXPORT CUresult cuLibraryUnload(CUlibrary library) noexcept {
  return ChargedUnload(library, UnloadLibrary);
}
