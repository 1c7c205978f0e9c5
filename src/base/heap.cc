#include "base/heap.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace fracgpu::base {

void ReleaseFreeHeap() {
  // Under AddressSanitizer or ThreadSanitizer the heap is the sanitizer's, not glibc's: its
  // malloc_trim is not intercepted and walks glibc's unused arena (an ASan run crashed in mtrim).
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  malloc_trim(0);
#endif
}

}  // namespace fracgpu::base
