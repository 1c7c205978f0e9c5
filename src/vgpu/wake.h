#pragma once
// The wake trampolines (issue 36 item 3, docs/reclaim.md "Wake: calls libvgpu.so does not
// hook"): every CUDA driver entry point libvgpu.so hands out without a hook of its own — a
// cuGetProcAddress answer or a dlsym of libcuda.so.1 — is handed out as a trampoline that
// raises the container's wake request when the node agent has parked it, then jumps to the
// driver's function with every argument register untouched. A locked process's every CUDA
// call blocks inside the driver (cuda.h, cuCheckpointProcessLock), so without it a memory copy,
// a synchronize or a stream query of a parked notebook would wait until something else woke it.
//
// Hand-written (x86-64 assembly in wake.cc): a forwarder for a function of unknown signature
// needs the argument registers preserved exactly, which no library and no C++ construct gives.
// The fast path is two loads, a compare and the indirect jump; no lock, no system call.
#include <cstdint>

/// Number of trampoline slots (kWakeSlots), a macro so that wake.cc's assembler `.rept` takes the
/// same number (a power of two: WakeWrap's probe sequence masks with it).
#define FRACGPU_WAKE_SLOTS 2048

extern "C" {
/// What the trampolines and WakeCheck compare with zero (wake.cc): RegionDevice::park_state of
/// the container's first device once WakeWatch ran, before that a word that is always zero.
__attribute__((visibility("hidden"))) extern const void* fracgpu_wake_word;
/// The slow path: asks for a wake on every parked device of the container's region.
__attribute__((visibility("hidden"))) void fracgpu_wake_slow() noexcept;
}

namespace fracgpu::vgpu {

/// Asks the agent for a wake when the container is parked: one relaxed load of the watched
/// word's address, one of the word, a branch not taken while running. Called before every
/// CUDA driver call a hook makes (REAL, interpose.h), so a hooked entry point of a parked
/// container wakes it as the trampolines do for unhooked ones.
inline void WakeCheck() noexcept {
  const auto* w =
      static_cast<const uint64_t*>(__atomic_load_n(&fracgpu_wake_word, __ATOMIC_RELAXED));
  if (__builtin_expect(__atomic_load_n(w, __ATOMIC_RELAXED) != 0, 0)) fracgpu_wake_slow();
}

/// True where this build has the trampolines and the exported stubs (x86-64 only). Elsewhere
/// every unhooked driver function is handed out as the driver gives it, so each process records
/// kSlotUnwakeable at claim and the agent never parks it (docs/reclaim.md "Calls libvgpu.so
/// does not hook").
#if defined(__x86_64__)
inline constexpr bool kHaveWakeTrampolines = true;
#else
inline constexpr bool kHaveWakeTrampolines = false;
#endif

/// The trampoline for the driver's function `real`, or `real` itself when it is null, when
/// this build has no trampolines (not x86-64), or when every slot (kWakeSlots) is taken (an
/// error is logged once and the process records kSlotUnwakeable: the agent will not park it).
/// One slot per function: the same `real` gives the same trampoline, from any thread, however
/// often it is asked (a compare-and-swap claims a free slot; a probe that finds `real` reuses
/// it). Lock-free, allocates nothing, no system call; fork-safe (the table is inherited).
void* WakeWrap(void* real) noexcept;

/// Records in the process's region slot that it holds a driver function without a trampoline
/// (api::kSlotUnwakeable): its call while parked would wait with no wake request, so the agent
/// must not park it. Idempotent; a relaxed fetch_or once.
void RecordUnwakeable() noexcept;

/// The driver's function behind `p` when `p` is one of WakeWrap's trampolines, else `p`.
void* WakeTarget(void* p) noexcept;

/// Points the trampolines' check at `word` (the region's RegionDevice::park_state of the
/// container's first device: the agent parks only one-GPU containers, DecideParking). Until
/// called they check a word that is always kParkRunning.
void WakeWatch(const void* word) noexcept;

/// Binds every exported driver stub (the weak `cu*` functions of wake.cc, one per name of
/// data/cuda/libcuda_exports.txt that no hook defines: src/vgpu/CMakeLists.txt leaves the hooked
/// ones out) to `lib`'s function of that name (the real dlsym); a name `lib` lacks stays null and
/// its stub answers CUDA_ERROR_NOT_FOUND. Called by ResolveCuda, with the handle of libcuda.so.1
/// (null when it failed to load); idempotent, so concurrent resolutions store the same values.
void BindDriverExports(void* lib) noexcept;
/// Number of exported driver stubs (the unhooked names).
int DriverExportCount() noexcept;
/// True when `name` is one of those unhooked names: a function of NVIDIA's CUDA 13.0 libcuda.so
/// (data/cuda/libcuda_exports.txt is `nm -D --defined-only` of its functions). A binary search of
/// the sorted list, no allocation.
bool KnownDriverFunction(const char* name) noexcept;

/// Number of trampoline slots (FRACGPU_WAKE_SLOTS).
inline constexpr int kWakeSlots = FRACGPU_WAKE_SLOTS;
static_assert(kWakeSlots > 0 && (kWakeSlots & (kWakeSlots - 1)) == 0, "a power of two");
/// Bytes per trampoline (wake.cc's `.balign 16`).
inline constexpr int kWakeStubBytes = 16;

}  // namespace fracgpu::vgpu
