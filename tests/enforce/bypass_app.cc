// The bypass recipe of issue 14, as a tenant would write it: fetch glibc's own dlsym with
// dlvsym (version GLIBC_2.34 on glibc >= 2.34, e.g. Debian 12's 2.36; GLIBC_2.2.5 is the
// x86-64 base version, still exported), resolve cuGetProcAddress from the driver's handle
// with it, and allocate through the driver's own entry points: libvgpu.so (preloaded) never
// sees a call. Not sanitized (it hosts libvgpu.so in the tests).
//
// Ops, in order: bypass:<MiB> (context + allocation around libvgpu.so; prints
// "over <CLOCK_MONOTONIC ns>" once allocated) | hold:<ms> | zero:<file> (overwrite a file
// with zeros: the tenant's "edit my region") | pid (prints "pid <pid>").
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "vgpu/cuda_api.h"

namespace {

using DlsymFn = void* (*)(void*, const char*);
using GetProcFn = CUresult (*)(const char*, void**, int, cuuint64_t,
                               CUdriverProcAddressQueryResult*);
using InitFn = CUresult (*)(unsigned int);
using DeviceGetFn = CUresult (*)(CUdevice*, int);
using RetainFn = CUresult (*)(CUcontext*, CUdevice);
using SetCurrentFn = CUresult (*)(CUcontext);
using AllocFn = CUresult (*)(CUdeviceptr*, size_t);

uint64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

int Bypass(unsigned long long mib) {
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  auto real_dlsym = libc ? reinterpret_cast<DlsymFn>(dlvsym(libc, "dlsym", "GLIBC_2.34")) : nullptr;
  if (!real_dlsym && libc)
    real_dlsym = reinterpret_cast<DlsymFn>(dlvsym(libc, "dlsym", "GLIBC_2.2.5"));
  if (!real_dlsym) {
    std::printf("bypass no-dlsym\n");
    return 1;
  }
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!cuda) {
    std::printf("bypass no-driver %s\n", dlerror());
    return 1;
  }
  auto gpa = reinterpret_cast<GetProcFn>(real_dlsym(cuda, "cuGetProcAddress_v2"));
  if (!gpa) {
    std::printf("bypass no-gpa\n");
    return 1;
  }
  auto get = [&](const char* name) {
    void* p = nullptr;
    CUdriverProcAddressQueryResult st{};
    gpa(name, &p, 12000, 0, &st);
    return p;
  };
  auto init = reinterpret_cast<InitFn>(get("cuInit"));
  auto device_get = reinterpret_cast<DeviceGetFn>(get("cuDeviceGet"));
  auto retain = reinterpret_cast<RetainFn>(get("cuDevicePrimaryCtxRetain"));
  auto set_current = reinterpret_cast<SetCurrentFn>(get("cuCtxSetCurrent"));
  auto alloc = reinterpret_cast<AllocFn>(get("cuMemAlloc"));
  if (!init || !device_get || !retain || !set_current || !alloc) {
    std::printf("bypass missing-entry\n");
    return 1;
  }
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CUdeviceptr ptr = 0;
  CUresult rc = init(0);
  if (rc == CUDA_SUCCESS) rc = device_get(&dev, 0);
  if (rc == CUDA_SUCCESS) rc = retain(&ctx, dev);
  if (rc == CUDA_SUCCESS) rc = set_current(ctx);
  if (rc == CUDA_SUCCESS) rc = alloc(&ptr, static_cast<size_t>(mib) << 20);
  if (rc != CUDA_SUCCESS) {
    std::printf("bypass rc %d\n", static_cast<int>(rc));
    return 1;
  }
  std::printf("over %llu\n", static_cast<unsigned long long>(NowNs()));
  std::fflush(stdout);
  return 0;
}

int Zero(const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY);
  if (fd < 0) {
    std::printf("zero cannot-open\n");
    return 1;
  }
  struct stat st {};
  fstat(fd, &st);
  std::vector<char> zeros(static_cast<size_t>(st.st_size), 0);
  ssize_t n = pwrite(fd, zeros.data(), zeros.size(), 0);
  close(fd);
  std::printf("zero %zd\n", n);
  std::fflush(stdout);
  return n == static_cast<ssize_t>(zeros.size()) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string op = argv[i];
    int rc = 0;
    if (op.rfind("bypass:", 0) == 0) {
      rc = Bypass(std::strtoull(op.c_str() + 7, nullptr, 10));
    } else if (op.rfind("hold:", 0) == 0) {
      usleep(static_cast<useconds_t>(std::strtoul(op.c_str() + 5, nullptr, 10) * 1000));
    } else if (op.rfind("zero:", 0) == 0) {
      rc = Zero(op.substr(5));
    } else if (op == "pid") {
      std::printf("pid %d\n", getpid());
      std::fflush(stdout);
    } else {
      std::printf("unknown op %s\n", op.c_str());
      return 2;
    }
    if (rc != 0) return rc;
  }
  std::printf("done\n");
  return 0;
}
