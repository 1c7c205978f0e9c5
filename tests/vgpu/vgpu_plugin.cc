// A plugin as a framework loads one (issue 32: RTLD_DEEPBIND): a shared library linked against
// libcuda.so.1 that allocates through the driver's own symbols. vgpu_app's deepbind op opens it
// with dlopen(RTLD_NOW | RTLD_DEEPBIND), which makes its references bind to its own
// dependencies (the driver) before the global scope (where libvgpu.so is preloaded).
#include "vgpu/cuda_api.h"

extern "C" __attribute__((visibility("default"))) int vgpu_plugin_alloc(unsigned long long bytes) {
  CUdeviceptr p = 0;
  return cuMemAlloc_v2(&p, bytes);
}
