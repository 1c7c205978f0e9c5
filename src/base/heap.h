#pragma once
// Handing freed heap memory back to the kernel after a burst of large temporaries (a LIST of
// every node, a /metrics page of every GPU). glibc keeps freed chunks in the arena of the thread
// that freed them (malloc(3), mallopt(3) M_TRIM_THRESHOLD), one arena per busy thread: a burst
// that ran on a different worker thread each time left its whole size resident in each arena.

namespace fracgpu::base {

/// Returns the free pages of every malloc arena to the kernel (glibc malloc_trim(0), which
/// since glibc 2.8 also releases free pages inside an arena, not only at its top). Costs a walk
/// of the arenas' free lists (milliseconds at hundreds of MiB): call it after a burst, not per
/// request. No-op without glibc, and under ASan or TSan (their heap is not glibc's).
void ReleaseFreeHeap();

}  // namespace fracgpu::base
