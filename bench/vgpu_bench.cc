// bench_vgpu: what libvgpu.so adds to the CUDA driver calls it intercepts, on the fake driver.
// Prints a table: ns per cuMemAlloc_v2 + cuMemFree_v2 pair and per cuLaunchKernel (no SM
// limit, SM limit 100 %, SM limit 90 % while under budget), without and with libvgpu.so
// preloaded (a 1 GiB limit, so accounting is on), and the difference. The process re-executes itself once per configuration; each child takes the
// best of 5 timed runs of N iterations (best-of filters scheduler noise on a shared machine).
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "vgpu/cuda_api.h"

namespace {

double NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int Child() {
  CUcontext ctx;
  if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
      cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
    return 1;
  }
  const int kAllocs = 200000, kLaunches = 20000000;
  double best_pair = 1e18, best_launch = 1e18;
  auto f = reinterpret_cast<CUfunction>(0x1);
  for (int run = 0; run < 5; ++run) {
    double t0 = NowNs();
    for (int i = 0; i < kAllocs; ++i) {
      CUdeviceptr p;
      if (cuMemAlloc_v2(&p, 4096) != CUDA_SUCCESS || cuMemFree_v2(p) != CUDA_SUCCESS) return 2;
    }
    double t1 = NowNs();
    for (int i = 0; i < kLaunches; ++i) cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr);
    double t2 = NowNs();
    best_pair = std::min(best_pair, (t1 - t0) / kAllocs);
    best_launch = std::min(best_launch, (t2 - t1) / kLaunches);
  }
  std::printf("%.2f %.3f\n", best_pair, best_launch);
  return 0;
}

// sm_limit: "" = none; else CUDA_DEVICE_SM_LIMIT for the preloaded child.
bool RunChild(const char* self, bool preload, double* pair, double* launch, const char* sm_limit = "") {
  int fds[2];
  if (pipe(fds) != 0) return false;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    setenv("FRACGPU_BENCH_CHILD", "1", 1);
    setenv("LD_LIBRARY_PATH", FRACGPU_FAKES_LIB, 1);
    setenv("FAKE_GPU_DEVICES", "GPU-11111111-1111-1111-1111-111111111111:81920", 1);
    if (preload) {
      std::string region = std::string("/tmp/fracgpu-bench-") + std::to_string(getpid()) + ".cache";
      setenv("LD_PRELOAD", FRACGPU_LIBVGPU, 1);
      setenv("CUDA_DEVICE_MEMORY_LIMIT_0", "1g", 1);
      setenv("CUDA_DEVICE_MEMORY_SHARED_CACHE", region.c_str(), 1);
      if (sm_limit[0]) setenv("CUDA_DEVICE_SM_LIMIT", sm_limit, 1);
    } else {
      unsetenv("LD_PRELOAD");
    }
    execl(self, self, static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  char buf[128] = {};
  ssize_t n = read(fds[0], buf, sizeof(buf) - 1);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (preload) unlink((std::string("/tmp/fracgpu-bench-") + std::to_string(pid) + ".cache").c_str());
  return n > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 && std::sscanf(buf, "%lf %lf", pair, launch) == 2;
}

}  // namespace

int main() {
  if (getenv("FRACGPU_BENCH_CHILD")) return Child();
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return 1;
  self[n] = '\0';
  double p0, l0, p1, l1, p2, l2, p3, l3;
  // SM limit 90 %: the fake's kernels take no device time, so the container stays under
  // budget and every launch takes the limiter's fast path (clock read, one CAS, one add).
  if (!RunChild(self, false, &p0, &l0) || !RunChild(self, true, &p1, &l1) ||
      !RunChild(self, true, &p2, &l2, "100") || !RunChild(self, true, &p3, &l3, "90")) {
    std::fprintf(stderr, "bench_vgpu: a child run failed\n");
    return 1;
  }
  std::printf("%-34s %12s %12s %12s %10s\n", "operation (fake driver)", "plain ns", "preloaded ns", "added ns",
              "target");
  std::printf("%-34s %12.1f %12.1f %12.1f %10s\n", "cuMemAlloc_v2 + cuMemFree_v2 pair", p0, p1, p1 - p0, "<= 250");
  std::printf("%-34s %12.2f %12.2f %12.2f %10s\n", "cuLaunchKernel, no SM limit", l0, l1, l1 - l0, "<= 5");
  std::printf("%-34s %12.2f %12.2f %12.2f %10s\n", "cuLaunchKernel, SM limit 100 %", l0, l2, l2 - l0, "<= 5");
  std::printf("%-34s %12.2f %12.2f %12.2f %10s\n", "cuLaunchKernel, SM 90 %, under budget", l0, l3, l3 - l0, "-");
  return 0;
}
