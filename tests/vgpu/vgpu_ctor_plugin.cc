// A library whose constructor calls the driver (vgpu_app's ctorrace op, issue 36 review of the
// wake trampolines): the constructor runs inside the dynamic loader's lock, sleeps 300 ms so that
// another thread's first CUDA call starts resolving libcuda.so.1 meanwhile, then calls
// cuDriverGetVersion as the process finds it (dlsym(RTLD_DEFAULT): libvgpu.so's export when it is
// preloaded). Not linked against the driver.
#include <dlfcn.h>
#include <unistd.h>

namespace {

int g_rc = -1;

__attribute__((constructor)) void CallTheDriverFromAConstructor() {
  usleep(300 * 1000);
  using Fn = int (*)(int*);
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "cuDriverGetVersion"));
  int version = 0;
  g_rc = fn ? fn(&version) : -2;
  if (g_rc == 0 && version <= 0) g_rc = -3;
}

}  // namespace

/// CUresult of the constructor's cuDriverGetVersion (-2: no such symbol; -3: no version).
extern "C" __attribute__((visibility("default"))) int vgpuCtorPluginRc() { return g_rc; }
