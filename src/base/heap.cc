#include "base/heap.h"

#include <dlfcn.h>

#include <cstddef>

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace fracgpu::base {
namespace {

constexpr bool kSanitizer = FRACGPU_HEAP_SANITIZER != 0;

// jemalloc's control entry point, int mallctl(const char* name, void* oldp, size_t* oldlenp,
// void* newp, size_t newlen) (jemalloc(3)); looked up at run time so that this library needs
// neither jemalloc's header nor the library itself (only the executables that want it link it).
using MallctlFn = int (*)(const char*, void*, size_t*, void*, size_t);

MallctlFn Mallctl() {
  static const MallctlFn fn = [] {
    if (kSanitizer) return MallctlFn{nullptr};
    return reinterpret_cast<MallctlFn>(::dlsym(RTLD_DEFAULT, "mallctl"));
  }();
  return fn;
}

}  // namespace

const char* HeapAllocatorName() {
  if (kSanitizer) return "sanitizer";
  return Mallctl() != nullptr ? "jemalloc" : "glibc";
}

bool HeapIsGlibc() {
#ifdef __GLIBC__
  return !kSanitizer && Mallctl() == nullptr;
#else
  return false;
#endif
}

bool ReleaseFreeHeap() {
  if (MallctlFn mallctl = Mallctl()) {
    // "arena.4096.purge": 4096 is MALLCTL_ARENAS_ALL of jemalloc 5 (jemalloc/jemalloc.h), every
    // arena at once.
    return mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0) == 0;
  }
  // Under AddressSanitizer or ThreadSanitizer the heap is the sanitizer's, not glibc's: its
  // malloc_trim is not intercepted and walks glibc's unused arena (an ASan run crashed in mtrim).
#ifdef __GLIBC__
  if (HeapIsGlibc()) {
    (void)malloc_trim(0);  // 1 when it released memory, 0 when there was none to release
    return true;
  }
#endif
  return false;
}

}  // namespace fracgpu::base
