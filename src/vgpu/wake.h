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

/// The trampoline for the driver's function `real`, or `real` itself when it is null, when
/// this build has no trampolines (not x86-64), or when every slot (kWakeSlots) is taken (an
/// error is logged once: calls to it will not wake a parked container). The same `real`
/// gives the same trampoline. Lock-free, allocates nothing; fork-safe.
void* WakeWrap(void* real) noexcept;

/// The driver's function behind `p` when `p` is one of WakeWrap's trampolines, else `p`.
void* WakeTarget(void* p) noexcept;

/// Points the trampolines' check at `word` (the region's RegionDevice::park_state of the
/// container's first device: the agent parks only one-GPU containers, DecideParking). Until
/// called they check a word that is always kParkRunning.
void WakeWatch(const void* word) noexcept;

/// Binds every exported driver stub (the weak `cu*` functions of wake.cc, one per name of
/// data/cuda/libcuda_exports.txt that no hook defines) to `lib`'s function of that name (the
/// real dlsym); a name `lib` lacks stays null and its stub answers CUDA_ERROR_NOT_FOUND.
/// Called by ResolveCuda, with the handle of libcuda.so.1 (null when it failed to load).
void BindDriverExports(void* lib) noexcept;
/// Number of driver exports with a stub (hooked names included, whose stubs are not linked in).
int DriverExportCount() noexcept;

/// Number of trampoline slots.
inline constexpr int kWakeSlots = 2048;

}  // namespace fracgpu::vgpu
