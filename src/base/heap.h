#pragma once
// Handing freed heap memory back to the kernel after a burst of large temporaries (a LIST of
// every node, a /metrics page of every GPU), and which allocator serves malloc in this process.
// glibc keeps freed chunks in the arena of the thread that freed them (malloc(3), mallopt(3)
// M_TRIM_THRESHOLD), one arena per busy thread: a burst that ran on a different worker thread
// each time left its whole size resident in each arena. The release `fracgpu` binary links
// jemalloc instead (CMake option FRACGPU_JEMALLOC, docs/performance.md "Run 9"), which returns
// an arena's dirty pages after its decay time (10 s by default) when that arena is next used
// (background_thread is off), and at once through ReleaseFreeHeap.

// FRACGPU_HEAP_SANITIZER: 1 when ASan or TSan brings its own heap. gcc defines
// __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__; clang 14 defines neither and answers
// __has_feature(address_sanitizer) / __has_feature(thread_sanitizer) instead.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FRACGPU_HEAP_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FRACGPU_HEAP_SANITIZER 1
#endif
#endif
#ifndef FRACGPU_HEAP_SANITIZER
#define FRACGPU_HEAP_SANITIZER 0
#endif

namespace fracgpu::base {

/// The allocator that serves malloc in this process, found at run time: "jemalloc" when
/// jemalloc's `mallctl` is linked in (the release `fracgpu` and bench_filter), "sanitizer"
/// under AddressSanitizer or ThreadSanitizer, else "glibc". Never null.
const char* HeapAllocatorName();

/// True when glibc's allocator serves malloc (a glibc system, neither jemalloc nor a
/// sanitizer): glibc's mallopt(3) and malloc_trim(3) act on the heap in use.
bool HeapIsGlibc();

/// Returns the free pages of the heap to the kernel: glibc malloc_trim(0) (since glibc 2.8 it
/// also releases free pages inside an arena, not only at its top), or jemalloc's
/// `arena.<MALLCTL_ARENAS_ALL>.purge` of every arena. Costs a walk of the free lists
/// (milliseconds at hundreds of MiB): call it after a burst, not per request. No-op under ASan
/// or TSan (their heap is neither). Returns false when nothing was asked of the allocator (a
/// sanitizer, no glibc) or jemalloc refused the purge; true otherwise.
bool ReleaseFreeHeap();

}  // namespace fracgpu::base
