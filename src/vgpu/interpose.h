#pragma once
// The real-function tables generated from hooks.def, their lazy resolution, and logging.
// Every entry starts as a trampoline that resolves the whole table and then forwards, so a
// hook calls its real function with one relaxed load and one indirect call, and never has to
// test "resolved yet?" itself.
#include <atomic>
#include <cstdarg>
#include <type_traits>

#include "api/nvml.h"
#include "vgpu/cuda_api.h"
#include "vgpu/hooks.def"
#include "vgpu/wake.h"

#define FRACGPU_EXPORT extern "C" __attribute__((visibility("default")))

namespace fracgpu::vgpu {

/// Resolves every real CUDA entry point from libcuda.so.1 (thread-safe, idempotent). Entries
/// the driver lacks become stubs returning CUDA_ERROR_NOT_FOUND. Allocates nothing; takes no
/// lock (a CAS-guarded one-time initialisation).
void ResolveCuda() noexcept;
/// The same for libnvidia-ml.so.1 (stubs return NVML_ERROR_FUNCTION_NOT_FOUND).
void ResolveNvml() noexcept;

template <typename F>
struct Forward;

/// Trampoline and missing-symbol stub for a function type, per table slot.
template <typename R, typename... A>
struct Forward<R (*)(A...) noexcept> {
  template <std::atomic<R (*)(A...) noexcept>* Slot, void (*Resolve)() noexcept, R kError>
  static R Trampoline(A... a) noexcept {
    Resolve();
    auto fn = Slot->load(std::memory_order_relaxed);
    // Still ourselves: called re-entrantly while the table is being resolved.
    if (fn == &Trampoline<Slot, Resolve, kError>) return kError;
    return fn(a...);
  }
  template <R kError>
  static R Missing(A...) noexcept {
    return kError;
  }
};

#define FRACGPU_DECLARE_REAL(elf, ...) extern std::atomic<decltype(&::elf)> real_##elf;
FRACGPU_CUDA_HOOKS(FRACGPU_DECLARE_REAL)
FRACGPU_CUDA_REAL_ONLY(FRACGPU_DECLARE_REAL)
FRACGPU_NVML_HOOKS(FRACGPU_DECLARE_REAL)
FRACGPU_NVML_REAL_ONLY(FRACGPU_DECLARE_REAL)
#undef FRACGPU_DECLARE_REAL

/// The real function of `elf`. For a CUDA entry point, first WakeCheck (wake.h): every driver
/// call a hook makes asks for a wake when the container is parked (docs/reclaim.md "Wake").
#define REAL(elf) (::fracgpu::vgpu::RealOf(::fracgpu::vgpu::real_##elf))

/// REAL's function: NVML calls (nvmlReturn_t) do not wake a container, CUDA calls do.
template <typename R, typename... A>
inline auto RealOf(const std::atomic<R (*)(A...) noexcept>& slot) noexcept {
  if constexpr (std::is_same_v<R, CUresult>) WakeCheck();
  return slot.load(std::memory_order_relaxed);
}

/// The real dlsym of glibc (found with dlvsym, never our hook).
void* RealDlsym(void* handle, const char* name) noexcept;

/// One hooked symbol, for dlsym and cuGetProcAddress.
struct HookEntry {
  const char* elf_name;
  const char* base_name;  ///< cuGetProcAddress name (no version suffix)
  int introduced;         ///< CUDA version that introduced this variant
  bool per_thread;        ///< _ptsz/_ptds variant
  void* hook;             ///< our exported function
  void** real;            ///< address of the real pointer (reinterpreted atomic slot)
};
/// Every CUDA hook (hooks.def order) and its count.
extern const HookEntry kCudaHooks[];
extern const int kCudaHookCount;
/// Every NVML hook.
extern const HookEntry kNvmlHooks[];
extern const int kNvmlHookCount;

/// Newest CUDA version in the variant table (src/vgpu/cuda_variants.def): 13000.
inline constexpr int kVariantTableVersion = 13000;
/// ELF name of the variant a CUDA 13.0 driver's cuGetProcAddress returns for (base, version,
/// flags) per the variant table: the newest introduced at or before `version`, the per-thread
/// one (_ptsz/_ptds) when flags is CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM and one
/// exists. nullptr when the base is unknown or every variant is newer than `version`.
const char* DriverVariantElf(const char* base, int version, cuuint64_t flags) noexcept;
/// Rows of the variant table (for tests).
int VariantTableSize() noexcept;
int VariantTableVersion() noexcept;

/// Log levels of LIBCUDA_LOG_LEVEL (docs/design/CONTRACT.md §4): 0 errors … 4 debug.
enum LogLevel { kLogError = 0, kLogWarning = 1, kLogInfo = 3, kLogDebug = 4 };
/// Writes one line "[fracgpu-vgpu <level> <pid>] <message>" to stderr with write(2) if
/// `level` <= the configured level. Never allocates; safe in any hook.
void Log(int level, const char* format, ...) noexcept __attribute__((format(printf, 2, 3)));
/// Sets the level (from the configuration).
void SetLogLevel(int level) noexcept;
/// True when a line of `level` is written (level <= the configured level).
bool LogEnabled(int level) noexcept;

}  // namespace fracgpu::vgpu
