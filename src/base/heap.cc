#include "base/heap.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace fracgpu::base {

void ReleaseFreeHeap() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

}  // namespace fracgpu::base
