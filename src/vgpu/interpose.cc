// Symbol interception: the real-function tables, their resolution, the dlsym hook and the
// cuGetProcAddress(_v2) hooks (docs/design/wire-apis.md §7.8 describes why all three are needed).
#include "vgpu/interpose.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <string_view>

#include "vgpu/cuda_variants.def"
#include "vgpu/glibc_compat.h"
#include "vgpu/wake.h"

namespace fracgpu::vgpu {

// ---- Real tables: each slot starts as a resolving trampoline ----
#define FRACGPU_DEFINE_CUDA_REAL(elf, ...)                                       \
  std::atomic<decltype(&::elf)> real_##elf{                                      \
      &Forward<decltype(&::elf)>::template Trampoline<&real_##elf, &ResolveCuda, \
                                                      CUDA_ERROR_NOT_INITIALIZED>};
#define FRACGPU_DEFINE_NVML_REAL(elf, ...)                                       \
  std::atomic<decltype(&::elf)> real_##elf{                                      \
      &Forward<decltype(&::elf)>::template Trampoline<&real_##elf, &ResolveNvml, \
                                                      NVML_ERROR_UNINITIALIZED>};
FRACGPU_CUDA_HOOKS(FRACGPU_DEFINE_CUDA_REAL)
FRACGPU_CUDA_REAL_ONLY(FRACGPU_DEFINE_CUDA_REAL)
FRACGPU_NVML_HOOKS(FRACGPU_DEFINE_NVML_REAL)
FRACGPU_NVML_REAL_ONLY(FRACGPU_DEFINE_NVML_REAL)
#undef FRACGPU_DEFINE_CUDA_REAL
#undef FRACGPU_DEFINE_NVML_REAL

#define FRACGPU_CUDA_ENTRY(elf, base, ver, ptsz) \
  {#elf,                                         \
   #base,                                        \
   ver,                                          \
   ptsz != 0,                                    \
   reinterpret_cast<void*>(&::elf),              \
   reinterpret_cast<void**>(&real_##elf)},
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

// One-time resolution without pthread_once (no libpthread version dependency) and without
// waiting for another thread: 0 = not done, 2 = done. A thread that finds it not done resolves
// on its own, even while another does (the bindings are the same values, stored atomically), so
// no thread ever waits for another: a thread inside the dynamic loader (its lock held: a
// library's constructor calling the driver while another thread's first CUDA call is in
// dlopen("libcuda.so.1")) cannot deadlock against the resolving one. A call made re-entrantly
// while this thread resolves (libcuda.so.1's own initialisation calling back into a hook)
// resolves again only from a driver already mapped (RTLD_NOLOAD: `nested`), and one level deep.
thread_local int tls_resolving = 0;
template <typename Fn>
void Once(std::atomic<int>& state, Fn fn) {
  if (state.load(std::memory_order_acquire) == 2 || tls_resolving > 1) return;
  const bool nested = tls_resolving == 1;
  ++tls_resolving;
  const bool bound = fn(nested);
  --tls_resolving;
  if (bound || !nested) state.store(2, std::memory_order_release);
}

template <typename T, T kMissing>
void Bind(std::atomic<T>& slot, void* lib, const char* name) {
  void* p = lib ? RealDlsym(lib, name) : nullptr;
  slot.store(p ? reinterpret_cast<T>(p) : kMissing, std::memory_order_relaxed);
}

std::atomic<int> g_cuda_once{0};
// libcuda.so.1's handle once ResolveCuda or the dlsym hook found it loaded (null before).
std::atomic<void*> g_driver_handle{nullptr};
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
  Once(g_cuda_once, [](bool nested) {
    // Nested: inside this thread's own dlopen of the driver (its constructor calling a hook);
    // the driver is mapped and relocated by then, so RTLD_NOLOAD finds it without loading or
    // initialising anything again. Not found: nothing is bound, and the call answers
    // CUDA_ERROR_NOT_INITIALIZED (Forward::Trampoline), as a call before cuInit would.
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NODELETE | (nested ? RTLD_NOLOAD : 0));
    if (!lib && nested) return false;
    if (!lib) Log(kLogError, "cannot load libcuda.so.1: every CUDA call will fail");
    if (lib) g_driver_handle.store(lib, std::memory_order_release);
#define FRACGPU_BIND(elf, ...)                                                                \
  Bind<decltype(&::elf), &Forward<decltype(&::elf)>::template Missing<CUDA_ERROR_NOT_FOUND>>( \
      real_##elf, lib, #elf);
    FRACGPU_CUDA_HOOKS(FRACGPU_BIND)
    FRACGPU_CUDA_REAL_ONLY(FRACGPU_BIND)
#undef FRACGPU_BIND
    BindDriverExports(lib);  // the exported stubs of unhooked names (wake.h)
    return true;
  });
}

void ResolveNvml() noexcept {
  Once(g_nvml_once, [](bool nested) {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NODELETE | (nested ? RTLD_NOLOAD : 0));
    if (!lib && nested) return false;
#define FRACGPU_BIND(elf, ...)                                                                  \
  Bind<decltype(&::elf),                                                                        \
       &Forward<decltype(&::elf)>::template Missing<NVML_ERROR_FUNCTION_NOT_FOUND>>(real_##elf, \
                                                                                    lib, #elf);
    FRACGPU_NVML_HOOKS(FRACGPU_BIND)
    FRACGPU_NVML_REAL_ONLY(FRACGPU_BIND)
#undef FRACGPU_BIND
    return true;
  });
}

void SetLogLevel(int level) noexcept { g_log_level.store(level, std::memory_order_relaxed); }

bool LogEnabled(int level) noexcept { return level <= g_log_level.load(std::memory_order_relaxed); }

void Log(int level, const char* format, ...) noexcept {
  if (level > g_log_level.load(std::memory_order_relaxed)) return;
  static const char* kNames[] = {"error", "warning", "warning", "info", "debug"};
  char buf[768];
  int n = std::snprintf(buf, sizeof(buf), "[fracgpu-vgpu %s %d] ",
                        kNames[level < 0   ? 0
                               : level > 4 ? 4
                                           : level],
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

// True when `path` names the driver: its last component starts with "libcuda.so" (libcuda.so,
// libcuda.so.1, libcuda.so.<driver version>); libcudart.so and libcublas.so do not.
bool IsDriverFile(const char* path) noexcept {
  const char* slash = std::strrchr(path, '/');
  return std::strncmp(slash ? slash + 1 : path, "libcuda.so", 10) == 0;
}

// kCudaHooks' rows in byte order of their ELF names, sorted at compile time, so that the dlsym
// hook finds a name in about 7 comparisons instead of one per hook.
#define FRACGPU_HOOK_NAME(elf, ...) std::string_view(#elf),
constexpr std::string_view kCudaHookNames[] = {FRACGPU_CUDA_HOOKS(FRACGPU_HOOK_NAME)};
#undef FRACGPU_HOOK_NAME
constexpr int kCudaHookNameCount = static_cast<int>(std::size(kCudaHookNames));
constexpr auto kCudaHooksByName = [] {
  std::array<int, kCudaHookNameCount> order{};
  for (int i = 0; i < kCudaHookNameCount; ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [](int a, int b) { return kCudaHookNames[a] < kCudaHookNames[b]; });
  return order;
}();

const HookEntry* FindCudaHook(const char* name) {
  const std::string_view n(name);
  int lo = 0, hi = kCudaHookNameCount;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    const int row = kCudaHooksByName[static_cast<size_t>(mid)];
    const int c = kCudaHookNames[row].compare(n);
    if (c == 0) return &kCudaHooks[row];
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return nullptr;
}

// libcuda.so.1's handle when it is loaded (RTLD_NOLOAD: never loads it), else null; cached.
void* DriverHandle() noexcept {
  void* h = g_driver_handle.load(std::memory_order_acquire);
  if (h) return h;
  h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (h) g_driver_handle.store(h, std::memory_order_release);
  return h;
}

// What the dlsym hook hands out for `real`, the driver's answer for an unhooked `cu*` name: a wake
// trampoline only for a function symbol of the driver's own file (dladdr1: the symbol found
// at exactly `real`, of type STT_FUNC or STT_GNU_IFUNC); a data object (STT_OBJECT, STT_TLS,
// STT_COMMON), or anything outside the driver, as it is: a trampoline in place of data would
// hand its reader our code bytes. A driver symbol whose kind cannot be told is handed out as it
// is too, and the process records that it holds an unguarded driver pointer (RecordUnwakeable:
// the agent will not park it).
void* WrapDriverSymbol(void* real) noexcept {
  Dl_info info{};
  void* extra = nullptr;  // RTLD_DL_SYMENT: the const ElfW(Sym)* of the symbol found
  if (!dladdr1(real, &info, &extra, RTLD_DL_SYMENT) || !info.dli_fname ||
      !IsDriverFile(info.dli_fname))
    return real;
  const auto* sym = static_cast<const ElfW(Sym)*>(extra);
  const unsigned type = sym ? ELF64_ST_TYPE(sym->st_info) : STT_NOTYPE;
  const bool exact = sym && info.dli_saddr == real;
  if (exact && (type == STT_FUNC || type == STT_GNU_IFUNC)) return WakeWrap(real);
  if (exact && (type == STT_OBJECT || type == STT_TLS || type == STT_COMMON)) return real;
  RecordUnwakeable();
  return real;
}

// ---- The driver's variant table (cuda_variants.def, generated from the CUDA 13.0 toolkit) ----
struct Variant {
  const char* base;
  int version;      // CUDA version that introduced it (PFN_<base>_v<version>)
  uint8_t flavour;  // 0 plain, 1 _ptsz, 2 _ptds
  const char* elf;
};
#define FRACGPU_VARIANT_ROW(base, ver, fl, elf) {#base, ver, fl, #elf},
constexpr Variant kVariants[] = {FRACGPU_CUDA_VARIANTS(FRACGPU_VARIANT_ROW)};
#undef FRACGPU_VARIANT_ROW
constexpr int kVariantCount = sizeof(kVariants) / sizeof(kVariants[0]);
constexpr int NewestVersion() {
  int v = 0;
  for (const Variant& e : kVariants) v = e.version > v ? e.version : v;
  return v;
}

static_assert(NewestVersion() == kVariantTableVersion,
              "regenerated table: update kVariantTableVersion");

// First row of `base` (rows are sorted by base name, byte order), or kVariantCount.
int FirstRow(const char* base) {
  int lo = 0, hi = kVariantCount;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (std::strcmp(kVariants[mid].base, base) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

bool HookedBase(const char* base) {
  for (int i = 0; i < kCudaHookCount; ++i)
    if (std::strcmp(kCudaHooks[i].base_name, base) == 0) return true;
  return false;
}

}  // namespace

const char* DriverVariantElf(const char* base, int version, cuuint64_t flags) noexcept {
  const bool want_pt = flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  const Variant* best = nullptr;
  for (int i = FirstRow(base); i < kVariantCount && std::strcmp(kVariants[i].base, base) == 0;
       ++i) {
    const Variant& v = kVariants[i];
    if (v.version > version || (v.flavour != 0 && !want_pt)) continue;
    bool better = !best || (v.flavour != 0) > (best->flavour != 0) ||
                  ((v.flavour != 0) == (best->flavour != 0) && v.version >= best->version);
    if (better) best = &v;
  }
  return best ? best->elf : nullptr;
}

int VariantTableVersion() noexcept { return kVariantTableVersion; }
int VariantTableSize() noexcept { return kVariantCount; }

namespace {

// Our answer for what the driver returned for (symbol, version, flags) — ABI-exact
// (docs/vgpu.md "Which hook a cuGetProcAddress answer gets"):
//  1. the driver's pointer is the real function of one of our hooked ELF names: that name's
//     hook (pointer identity, whatever the base: a driver may answer a base with another
//     base's function, e.g. cuGraphInstantiate with cuGraphInstantiateWithFlags);
//  2. otherwise the table names the variant a CUDA 13.0 driver returns (the newest introduced
//     at or before `version`, the per-thread one when asked with PER_THREAD_DEFAULT_STREAM):
//     its hook if we have one, else the driver's pointer (passed through);
//  3. a version above the table's (13000) for a hooked base: the driver is asked again at
//     13000; the same pointer means no newer variant, and rule 2 applies; a different one is
//     a variant of a signature we do not know: refused (null, CUDA_ERROR_NOT_SUPPORTED, an
//     error logged), never answered with a hook of another signature and never unaccounted.
// Names the table does not know, and unhooked variants, are passed through behind a wake
// trampoline (wake.h): the driver's function, called with the same registers.
CUresult MatchProc(const char* symbol, void** pfn, int version, cuuint64_t flags, bool v2,
                   CUdriverProcAddressQueryResult* status) {
  for (int i = 0; i < kCudaHookCount; ++i) {
    const HookEntry& e = kCudaHooks[i];
    if (__atomic_load_n(e.real, __ATOMIC_RELAXED) == *pfn) {
      *pfn = e.hook;
      return CUDA_SUCCESS;
    }
  }
  if (version > kVariantTableVersion && HookedBase(symbol)) {
    void* at_table = nullptr;
    CUresult r =
        v2 ? REAL(cuGetProcAddress_v2)(symbol, &at_table, kVariantTableVersion, flags, nullptr)
           : REAL(cuGetProcAddress)(symbol, &at_table, kVariantTableVersion, flags);
    if (r != CUDA_SUCCESS || at_table != *pfn) {
      Log(kLogError,
          "%s at CUDA %d is a variant newer than libvgpu knows (table: CUDA %d): refused", symbol,
          version, kVariantTableVersion);
      *pfn = nullptr;
      if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
      return CUDA_ERROR_NOT_SUPPORTED;
    }
  }
  const char* elf = DriverVariantElf(
      symbol, version < kVariantTableVersion ? version : kVariantTableVersion, flags);
  const HookEntry* e = elf ? FindCudaHook(elf) : nullptr;
  // Passed through: behind a wake trampoline (wake.h), so that a parked container's call of an
  // entry point we do not hook still asks the agent to wake it.
  *pfn = e ? e->hook : WakeWrap(*pfn);
  return CUDA_SUCCESS;
}

CUresult WrapProc(CUresult r, const char* symbol, void** pfn, int version, cuuint64_t flags,
                  bool v2, CUdriverProcAddressQueryResult* status) {
  if (r != CUDA_SUCCESS || !symbol || !pfn || !*pfn) return r;
  if (std::strcmp(symbol, "cuGetProcAddress") == 0) {
    // Later look-ups go through the pointer returned here: keep them intercepted.
    *pfn = version >= 12000 ? reinterpret_cast<void*>(&::cuGetProcAddress_v2)
                            : reinterpret_cast<void*>(&::cuGetProcAddress);
    return r;
  }
  return MatchProc(symbol, pfn, version, flags, v2, status);
}

}  // namespace
}  // namespace fracgpu::vgpu

using namespace fracgpu::vgpu;

FRACGPU_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version,
                                         cuuint64_t flags) noexcept {
  ResolveCuda();
  CUresult r = REAL(cuGetProcAddress)(symbol, pfn, cuda_version, flags);
  return WrapProc(r, symbol, pfn, cuda_version, flags, false, nullptr);
}

FRACGPU_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version,
                                            cuuint64_t flags,
                                            CUdriverProcAddressQueryResult* status) noexcept {
  ResolveCuda();
  CUresult r = REAL(cuGetProcAddress_v2)(symbol, pfn, cuda_version, flags, status);
  return WrapProc(r, symbol, pfn, cuda_version, flags, true, status);
}

/// dlsym hook: libraries that dlopen libcuda.so.1 / libnvidia-ml.so.1 and dlsym from the
/// handle (cudart, Triton, NCCL) get our wrappers. Only names the handle really defines are
/// replaced, so another library's own cu* symbols are untouched. RTLD_NEXT look-ups are
/// answered relative to libvgpu.so (documented limitation, as in HAMi-core).
FRACGPU_EXPORT void* dlsym(void* __restrict handle, const char* __restrict name) noexcept {
  void* real = RealDlsym(handle, name);
  if (!real) return real;  // name is non-null by contract (and checked by the real dlsym)
  if (name[0] == 'c' && name[1] == 'u') {
    if (const HookEntry* e = FindCudaHook(name)) return e->hook;
    // An unhooked function of the driver itself (not cuBLAS' or the runtime's own cu* names):
    // behind a wake trampoline, as cuGetProcAddress answers it; its data as it is. Cheap when
    // the name is a known driver function: the handle is the driver's, or the real dlsym of
    // the driver's handle gives the same pointer (a pointer compare, no dladdr); otherwise the
    // symbol's file and kind are read with dladdr1.
    if (KnownDriverFunction(name)) {
      void* driver = DriverHandle();
      if (driver && (handle == driver || RealDlsym(driver, name) == real)) return WakeWrap(real);
    }
    return WrapDriverSymbol(real);
  } else if (name[0] == 'n' && std::strncmp(name, "nvml", 4) == 0) {
    if (const HookEntry* e = FindHook(kNvmlHooks, kNvmlHookCount, name)) return e->hook;
  }
  return real;
}
