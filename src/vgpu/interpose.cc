// Symbol interception: the real-function tables, their resolution, the dlsym hook and the
// cuGetProcAddress(_v2) hooks (wire-apis.md §7.8 describes why all three are needed).
#include "vgpu/glibc_compat.h"
#include "vgpu/interpose.h"

#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace fracgpu::vgpu {

// ---- Real tables: each slot starts as a resolving trampoline ----
#define FRACGPU_DEFINE_CUDA_REAL(elf, ...)                                                  \
  std::atomic<decltype(&::elf)> real_##elf{                                                 \
      &Forward<decltype(&::elf)>::template Trampoline<&real_##elf, &ResolveCuda, CUDA_ERROR_NOT_INITIALIZED>};
#define FRACGPU_DEFINE_NVML_REAL(elf, ...)                                                  \
  std::atomic<decltype(&::elf)> real_##elf{                                                 \
      &Forward<decltype(&::elf)>::template Trampoline<&real_##elf, &ResolveNvml, NVML_ERROR_UNINITIALIZED>};
FRACGPU_CUDA_HOOKS(FRACGPU_DEFINE_CUDA_REAL)
FRACGPU_CUDA_REAL_ONLY(FRACGPU_DEFINE_CUDA_REAL)
FRACGPU_NVML_HOOKS(FRACGPU_DEFINE_NVML_REAL)
FRACGPU_NVML_REAL_ONLY(FRACGPU_DEFINE_NVML_REAL)
#undef FRACGPU_DEFINE_CUDA_REAL
#undef FRACGPU_DEFINE_NVML_REAL

#define FRACGPU_CUDA_ENTRY(elf, base, ver, ptsz) \
  {#elf, #base, ver, ptsz != 0, reinterpret_cast<void*>(&::elf), reinterpret_cast<void**>(&real_##elf)},
#define FRACGPU_NVML_ENTRY(elf) \
  {#elf, #elf, 0, false, reinterpret_cast<void*>(&::elf), reinterpret_cast<void**>(&real_##elf)},
const HookEntry kCudaHooks[] = {FRACGPU_CUDA_HOOKS(FRACGPU_CUDA_ENTRY)};
const int kCudaHookCount = sizeof(kCudaHooks) / sizeof(kCudaHooks[0]);
const HookEntry kNvmlHooks[] = {FRACGPU_NVML_HOOKS(FRACGPU_NVML_ENTRY)};
const int kNvmlHookCount = sizeof(kNvmlHooks) / sizeof(kNvmlHooks[0]);
#undef FRACGPU_CUDA_ENTRY
#undef FRACGPU_NVML_ENTRY

namespace {

using DlsymFn = void* (*)(void*, const char*);
std::atomic<DlsymFn> g_real_dlsym{nullptr};
std::atomic<int> g_log_level{2};

// One-time initialisation without pthread_once (no libpthread version dependency):
// 0 = not started, 1 = running, 2 = done. A re-entrant call from the initialising thread
// returns at once (the trampolines then answer with an error instead of recursing).
thread_local bool tls_resolving = false;
template <typename Fn>
void Once(std::atomic<int>& state, Fn fn) {
  if (state.load(std::memory_order_acquire) == 2 || tls_resolving) return;
  int expected = 0;
  if (state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
    tls_resolving = true;
    fn();
    tls_resolving = false;
    state.store(2, std::memory_order_release);
    return;
  }
  while (state.load(std::memory_order_acquire) != 2) sched_yield();
}

template <typename T, T kMissing>
void Bind(std::atomic<T>& slot, void* lib, const char* name) {
  void* p = lib ? RealDlsym(lib, name) : nullptr;
  slot.store(p ? reinterpret_cast<T>(p) : kMissing, std::memory_order_relaxed);
}

std::atomic<int> g_cuda_once{0};
std::atomic<int> g_nvml_once{0};

}  // namespace

void* RealDlsym(void* handle, const char* name) noexcept {
  DlsymFn fn = g_real_dlsym.load(std::memory_order_acquire);
  if (!fn) {
    // dlsym's versions: GLIBC_2.2.5 (x86-64), GLIBC_2.17 (arm64), GLIBC_2.34 (moved to libc).
    for (const char* ver : {"GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.34"}) {
      fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", ver));
      if (fn) break;
    }
    if (!fn) return nullptr;
    g_real_dlsym.store(fn, std::memory_order_release);
  }
  return fn(handle, name);
}

void ResolveCuda() noexcept {
  Once(g_cuda_once, [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NODELETE);
    if (!lib) Log(kLogError, "cannot load libcuda.so.1: every CUDA call will fail");
#define FRACGPU_BIND(elf, ...) \
  Bind<decltype(&::elf), &Forward<decltype(&::elf)>::template Missing<CUDA_ERROR_NOT_FOUND>>(real_##elf, lib, #elf);
    FRACGPU_CUDA_HOOKS(FRACGPU_BIND)
    FRACGPU_CUDA_REAL_ONLY(FRACGPU_BIND)
#undef FRACGPU_BIND
  });
}

void ResolveNvml() noexcept {
  Once(g_nvml_once, [] {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NODELETE);
#define FRACGPU_BIND(elf, ...)                                                                  \
  Bind<decltype(&::elf), &Forward<decltype(&::elf)>::template Missing<NVML_ERROR_FUNCTION_NOT_FOUND>>( \
      real_##elf, lib, #elf);
    FRACGPU_NVML_HOOKS(FRACGPU_BIND)
    FRACGPU_NVML_REAL_ONLY(FRACGPU_BIND)
#undef FRACGPU_BIND
  });
}

void SetLogLevel(int level) noexcept { g_log_level.store(level, std::memory_order_relaxed); }

void Log(int level, const char* format, ...) noexcept {
  if (level > g_log_level.load(std::memory_order_relaxed)) return;
  static const char* kNames[] = {"error", "warning", "warning", "info", "debug"};
  char buf[768];
  int n = std::snprintf(buf, sizeof(buf), "[fracgpu-vgpu %s %d] ", kNames[level < 0 ? 0 : level > 4 ? 4 : level],
                        static_cast<int>(getpid()));
  va_list ap;
  va_start(ap, format);
  int m = std::vsnprintf(buf + n, sizeof(buf) - static_cast<size_t>(n) - 1, format, ap);
  va_end(ap);
  size_t len = static_cast<size_t>(n) + (m < 0 ? 0 : static_cast<size_t>(m));
  if (len > sizeof(buf) - 2) len = sizeof(buf) - 2;
  buf[len++] = '\n';
  ssize_t ignored = ::write(2, buf, len);
  (void)ignored;
}

namespace {

const HookEntry* FindHook(const HookEntry* table, int count, const char* name) {
  for (int i = 0; i < count; ++i) {
    if (std::strcmp(table[i].elf_name, name) == 0) return &table[i];
  }
  return nullptr;
}

// Picks our wrapper for what the driver returned for `symbol` (wire-apis.md §7.8): the entry
// whose real pointer is exactly *pfn; otherwise the newest variant introduced at or before
// `version`, the per-thread one when asked for with PER_THREAD_DEFAULT_STREAM.
const HookEntry* MatchProc(const char* symbol, void* real, int version, cuuint64_t flags) {
  const HookEntry* best = nullptr;
  for (int i = 0; i < kCudaHookCount; ++i) {
    const HookEntry& e = kCudaHooks[i];
    if (std::strcmp(e.base_name, symbol) != 0) continue;
    if (__atomic_load_n(e.real, __ATOMIC_RELAXED) == real) return &e;
    if (e.introduced > version) continue;
    if (e.per_thread && flags != CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) continue;
    if (!best || e.per_thread > best->per_thread ||
        (e.per_thread == best->per_thread && e.introduced > best->introduced)) {
      best = &e;
    }
  }
  return best;
}

CUresult WrapProc(CUresult r, const char* symbol, void** pfn, int version, cuuint64_t flags) {
  if (r != CUDA_SUCCESS || !symbol || !pfn || !*pfn) return r;
  if (std::strcmp(symbol, "cuGetProcAddress") == 0) {
    // Later look-ups go through the pointer returned here: keep them intercepted.
    *pfn = version >= 12000 ? reinterpret_cast<void*>(&::cuGetProcAddress_v2)
                            : reinterpret_cast<void*>(&::cuGetProcAddress);
    return r;
  }
  if (const HookEntry* e = MatchProc(symbol, *pfn, version, flags)) *pfn = e->hook;
  return r;
}

}  // namespace
}  // namespace fracgpu::vgpu

using namespace fracgpu::vgpu;

FRACGPU_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version,
                                         cuuint64_t flags) noexcept {
  ResolveCuda();
  CUresult r = REAL(cuGetProcAddress)(symbol, pfn, cuda_version, flags);
  return WrapProc(r, symbol, pfn, cuda_version, flags);
}

FRACGPU_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version,
                                            cuuint64_t flags,
                                            CUdriverProcAddressQueryResult* status) noexcept {
  ResolveCuda();
  CUresult r = REAL(cuGetProcAddress_v2)(symbol, pfn, cuda_version, flags, status);
  return WrapProc(r, symbol, pfn, cuda_version, flags);
}

/// dlsym hook: libraries that dlopen libcuda.so.1 / libnvidia-ml.so.1 and dlsym from the
/// handle (cudart, Triton, NCCL) get our wrappers. Only names the handle really defines are
/// replaced, so another library's own cu* symbols are untouched. RTLD_NEXT look-ups are
/// answered relative to libvgpu.so (documented limitation, as in HAMi-core).
FRACGPU_EXPORT void* dlsym(void* __restrict handle, const char* __restrict name) noexcept {
  void* real = RealDlsym(handle, name);
  if (!real) return real;  // name is non-null by contract (and checked by the real dlsym)
  if (name[0] == 'c' && name[1] == 'u') {
    if (const HookEntry* e = FindHook(kCudaHooks, kCudaHookCount, name)) return e->hook;
  } else if (name[0] == 'n' && std::strncmp(name, "nvml", 4) == 0) {
    if (const HookEntry* e = FindHook(kNvmlHooks, kNvmlHookCount, name)) return e->hook;
  }
  return real;
}
