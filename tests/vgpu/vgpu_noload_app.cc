// A program not linked to the driver (vgpu_app is), run with libvgpu.so preloaded and the fake
// driver's FAKE_CUDA_CTOR_CALL=1: its first CUDA call (cuInit, libvgpu.so's hook) makes libvgpu.so
// load libcuda.so.1 itself, and the driver's constructor calls cuDriverGetVersion back through
// libvgpu.so's exported stub while that resolution is under way (park_wake_test, issue 36 review
// of the wake trampolines). Prints "noload <cuInit rc> <the constructor's rc>" (-2: no symbol, -3:
// the fake's record not found).
#include <dlfcn.h>

#include <cstdio>

int main() {
  using InitFn = int (*)(unsigned);
  auto init = reinterpret_cast<InitFn>(dlsym(RTLD_DEFAULT, "cuInit"));
  const int rc = init ? init(0) : -2;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  const int* ctor = lib ? static_cast<const int*>(dlsym(lib, "fakeCudaCtorRc")) : nullptr;
  std::printf("noload %d %d\n", rc, ctor ? *ctor : -3);
  return 0;
}
