#include <cstdio>
#include <cstdlib>

#include "base/status.h"

namespace fracgpu::internal {

void CheckFailed(const char* cond, const char* file, int line) {
  std::fprintf(stderr, "FRACGPU_CHECK failed: %s at %s:%d\n", cond, file, line);
  std::abort();
}

}  // namespace fracgpu::internal
