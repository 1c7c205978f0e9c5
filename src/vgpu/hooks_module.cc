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
#include <dlfcn.h>

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

// The bytes cuda.h says a limit's value reserves on the current context's device `ordinal`
// (issue 32 item 3): the malloc heap and the printf FIFO are sizes in bytes; the stack is per
// thread, reserved for every thread the device can hold resident (value x SMs x
// MAX_THREADS_PER_MULTIPROCESSOR). 0 for the other limits (sync depth, pending launches, ...):
// those are charged only as measured.
uint64_t DeclaredLimitBytes(CUlimit limit, uint64_t value, CUdevice ordinal) {
  if (limit == CU_LIMIT_PRINTF_FIFO_SIZE || limit == CU_LIMIT_MALLOC_HEAP_SIZE) return value;
  if (limit != CU_LIMIT_STACK_SIZE) return 0;
  int sms = 0, threads = 0;
  if (REAL(cuDeviceGetAttribute)(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, ordinal) !=
          CUDA_SUCCESS ||
      REAL(cuDeviceGetAttribute)(&threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
                                 ordinal) != CUDA_SUCCESS ||
      sms <= 0 || threads <= 0)
    return 0;
  uint64_t per = static_cast<uint64_t>(sms) * static_cast<uint64_t>(threads);
  return value > UINT64_MAX / per ? UINT64_MAX : value * per;
}

}  // namespace

// cuCtxSetLimit (issue 32 item 3; listed as pass-through before): the driver grows per-context
// reservations (thread stacks, printf FIFO, malloc heap, device-runtime launch buffers) after the
// context's size was measured at creation. The growth is charged as context_bytes on the current
// context's device: the larger of what was measured around the call (as for a module load) and
// what cuda.h says the new value reserves beyond the old one (DeclaredLimitBytes; a driver that
// reserves lazily is charged up front). Over the limit: the old value is set back and the call
// answered CUDA_ERROR_OUT_OF_MEMORY. A smaller value gives back what this context's limit was
// charged, down to 0. The charge stays (table kind kCtxLimit, keyed by context and limit) until
// a smaller value or until the device's last context goes (DropDeviceCharges); a created
// context destroyed before then leaves it charged (over-counted, never under-).
FRACGPU_EXPORT CUresult cuCtxSetLimit(CUlimit limit, size_t value) noexcept {
  CUdevice ordinal = -1;
  int dev = CurrentDeviceIndex(&ordinal);
  CUcontext ctx = nullptr;
  if (dev < 0 || REAL(cuCtxGetCurrent)(&ctx) != CUDA_SUCCESS || !ctx)
    return REAL(cuCtxSetLimit)(limit, value);  // unmanaged, denied (nothing to charge), no context
  size_t old_value = 0;
  bool have_old = REAL(cuCtxGetLimit)(&old_value, limit) == CUDA_SUCCESS;
  Reading before = Read(dev);
  CUresult r = REAL(cuCtxSetLimit)(limit, value);
  if (r != CUDA_SUCCESS) return r;
  Reading after = Read(dev);
  uint64_t measured = Delta(before, after);
  const uint64_t charged_meanwhile =
      after.charged > before.charged ? after.charged - before.charged : 0;
  const bool shrank = before.ok && after.ok && before.nvml == after.nvml &&
                      after.usage + charged_meanwhile < before.usage;
  uint64_t declared_new = DeclaredLimitBytes(limit, value, ordinal);
  uint64_t declared_old = have_old ? DeclaredLimitBytes(limit, old_value, ordinal) : 0;
  uint64_t declared = declared_new > declared_old ? declared_new - declared_old : 0;
  uint64_t grow = measured > declared ? measured : declared;
  Entry e;
  const uint64_t key = reinterpret_cast<uint64_t>(ctx) ^ (static_cast<uint64_t>(limit + 1) << 56);
  bool known = TableFind(Kind::kCtxLimit, key, &e);
  if (!known) {
    e.kind = Kind::kCtxLimit;
    e.key = key;
    e.dev = static_cast<int8_t>(dev);
    e.size = 0;
  }
  if (grow > 0) {
    if (Charge(dev, grow, ChargeKind::kContext, "cuCtxSetLimit's growth") != CUDA_SUCCESS) {
      if (have_old) (void)REAL(cuCtxSetLimit)(limit, old_value);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    e.size += grow;
  } else if (known && (shrank || declared_new < declared_old)) {
    uint64_t back = declared_old - declared_new;
    if (shrank) {
      uint64_t m = before.usage - after.usage - charged_meanwhile;
      if (m > back) back = m;
    }
    if (back > e.size) back = e.size;
    Uncharge(dev, back, ChargeKind::kContext);
    e.size -= back;
  }
  if (e.size > 0 || known) TableInsert(e);
  return r;
}

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

// ---- dlopen with RTLD_DEEPBIND (issue 32 item 3): a library opened so looks its symbols up in
// its own dependencies before the global scope, where LD_PRELOAD put libvgpu.so, so a plugin
// linked against libcuda.so.1 called the driver directly (1,500 MiB allocated against 1,000).
// In a process with a limit, RTLD_DEEPBIND is dropped from the mode: the plugin's cu* then bind
// to the hooks like everyone else's. (Its other symbols also resolve global-first: the price of
// the limit; a process without a limit keeps RTLD_DEEPBIND.) Every other dlopen is forwarded
// as is, by a tail call, so glibc still sees the original caller (its RUNPATH and $ORIGIN
// decide where a bare name is searched); no lock, no allocation. The real dlopen is the next one
// after libvgpu.so (glibc's default version), found through the real dlsym.
namespace {
using DlopenFn = void* (*)(const char*, int);
std::atomic<DlopenFn> g_real_dlopen{nullptr};
std::atomic<bool> g_deepbind_logged{false};

__attribute__((noinline)) DlopenFn ResolveDlopen() {
  auto fn = reinterpret_cast<DlopenFn>(RealDlsym(RTLD_NEXT, "dlopen"));
  g_real_dlopen.store(fn, std::memory_order_release);
  return fn;
}

__attribute__((noinline)) int DropDeepbind(const char* file, int mode) {
  if (!ProcessManaged()) return mode;
  if (!g_deepbind_logged.exchange(true, std::memory_order_relaxed)) {
    Log(kLogWarning,
        "dlopen(%s, RTLD_DEEPBIND): opened without RTLD_DEEPBIND so its CUDA calls "
        "stay within the limit",
        file ? file : "NULL");
  }
  return mode & ~RTLD_DEEPBIND;
}
}  // namespace

FRACGPU_EXPORT void* dlopen(const char* file, int mode) noexcept {
  DlopenFn fn = g_real_dlopen.load(std::memory_order_acquire);
  if (__builtin_expect(!fn, false)) fn = ResolveDlopen();
  if (__builtin_expect((mode & RTLD_DEEPBIND) != 0, false)) mode = DropDeepbind(file, mode);
  if (__builtin_expect(!fn, false)) return nullptr;  // no dlopen after us: cannot happen
  return fn(file, mode);                             // a sibling call: the caller stays glibc's
}
