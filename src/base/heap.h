#pragma once
// Handing freed heap memory back to the kernel after a burst of large temporaries (a LIST of
// every node, a /metrics page of every GPU), and which allocator serves malloc in this process.
// glibc keeps freed chunks in the arena of the thread that freed them (malloc(3), mallopt(3)
// M_TRIM_THRESHOLD), one arena per busy thread: a burst that ran on a different worker thread
// each time left its whole size resident in each arena. The release `fracgpu` binary links
// jemalloc instead (CMake option FRACGPU_JEMALLOC, docs/performance.md "Run 9"), which returns
// dirty pages on its own after its decay time (10 s by default).

namespace fracgpu::base {

/// The allocator that serves malloc in this process, found at run time: "jemalloc" when
/// jemalloc's `mallctl` is linked in (the release `fracgpu` and bench_filter), "sanitizer"
/// under AddressSanitizer or ThreadSanitizer, else "glibc". Never null.
const char* HeapAllocatorName();

/// True when HeapAllocatorName() is "glibc": glibc's mallopt(3) and malloc_trim(3) act on the
/// heap in use.
bool HeapIsGlibc();

/// Returns the free pages of the heap to the kernel: glibc malloc_trim(0) (since glibc 2.8 it
/// also releases free pages inside an arena, not only at its top), or jemalloc's
/// `arena.<MALLCTL_ARENAS_ALL>.purge` of every arena. Costs a walk of the free lists
/// (milliseconds at hundreds of MiB): call it after a burst, not per request. No-op under ASan
/// or TSan (their heap is neither). Returns false when nothing was asked of the allocator (a
/// sanitizer, no glibc) or jemalloc refused the purge; true otherwise.
bool ReleaseFreeHeap();

}  // namespace fracgpu::base
