// Kernel launch hooks. Without an SM limit a launch costs two relaxed loads (the stamp flag
// and g_sm_limit_active) and one indirect call to the driver: no clock read, no lock, no
// allocation, no system call. With an SM limit, PaceLaunch (sm_limiter.h) paces the launch
// first. A graph launch adds one relaxed load (graph memory, below).
//
// The launch stamp, RegionDevice::last_launch_ns (what the monitor reports as the last kernel's
// age), is written by the first launch of each kLaunchStampPeriodNs window of a process: the
// launch finds g_stamped clear, sets it, reads CLOCK_MONOTONIC and stamps. A timer thread of
// libvgpu.so's own (started by the process's first launch, so processes that never launch have
// none) clears g_stamped every period; a launch thus never reads a clock to learn whether a
// stamp is due. Should the thread fail to start, the old gate (a CLOCK_MONOTONIC_COARSE read per
// launch) takes over. After fork the child starts its own thread at its first launch.
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "vgpu/accounting.h"
#include "vgpu/glibc_compat.h"  // pins old glibc versions of the timer thread's pthread calls
#include "vgpu/interpose.h"
#include "vgpu/sm_limiter.h"
#include "vgpu/state.h"

using namespace fracgpu::vgpu;

namespace {

std::atomic<bool> g_stamped{false};  // this period's stamp is written (cleared by the timer)
enum : int { kTimerNone = 0, kTimerRunning = 1, kTimerFailed = 2 };
std::atomic<int> g_timer{kTimerNone};
std::atomic<uint64_t> g_next_stamp_ns{0};  // kTimerFailed only: coarse ns of the next stamp

uint64_t ClockNs(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void* StampTimer(void*) {
  const timespec period{0, static_cast<long>(kLaunchStampPeriodNs)};
  for (;;) {
    nanosleep(&period, nullptr);
    g_stamped.store(false, std::memory_order_relaxed);
  }
  return nullptr;
}

// Starts the timer thread once per process (slow path: the process's first launch). It blocks
// every signal, so the application's handlers never run on it.
void StartStampTimer() {
  int none = kTimerNone;
  if (!g_timer.compare_exchange_strong(none, kTimerRunning, std::memory_order_acq_rel)) return;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_t tid;
  bool ok = pthread_attr_init(&attr) == 0;
  ok = ok && pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0 &&
       pthread_attr_setstacksize(&attr, 64 * 1024) == 0 &&
       pthread_create(&tid, &attr, StampTimer, nullptr) == 0;
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (ok) {
    pthread_setname_np(tid, "fracgpu-stamp");
  } else {
    Log(kLogWarning, "cannot start the launch-stamp thread: stamping by the coarse clock instead");
    g_timer.store(kTimerFailed, std::memory_order_release);
  }
}

// Writes last_launch_ns of the current context's device (slow path: once per period).
__attribute__((noinline)) void StampLaunch() {
  if (g_timer.load(std::memory_order_acquire) == kTimerFailed) {
    uint64_t coarse = ClockNs(CLOCK_MONOTONIC_COARSE);
    uint64_t due = g_next_stamp_ns.load(std::memory_order_relaxed);
    if (coarse < due || !g_next_stamp_ns.compare_exchange_strong(due, coarse + kLaunchStampPeriodNs,
                                                                 std::memory_order_relaxed))
      return;  // not due, or another thread of this process stamps
  } else {
    if (g_stamped.exchange(true, std::memory_order_relaxed)) return;  // another thread stamps
    StartStampTimer();
    if (g_timer.load(std::memory_order_acquire) == kTimerFailed)
      g_stamped.store(false, std::memory_order_relaxed);  // every launch comes here from now on
  }
  Region* r = SharedRegion();
  if (!r) return;
  CUdevice ordinal = -1;
  int dev = CurrentDeviceIndex(&ordinal);
  if (dev < 0 || dev >= static_cast<int>(r->device_count)) return;
  // A launch of a parked container asks the agent to wake it (docs/reclaim.md "Wake"): the
  // first launch after an idle spell always comes here, as the stamp is then due.
  RequestWakeIfParked(r->devices[dev]);
  uint64_t now = ClockNs(CLOCK_MONOTONIC);  // exact: readers compare with their own clock
  std::atomic<uint64_t>& last = r->devices[dev].last_launch_ns;
  uint64_t prev = last.load(std::memory_order_relaxed);
  while (prev < now && !last.compare_exchange_weak(prev, now, std::memory_order_relaxed)) {
  }
}

// `blocks` (grid size) is not needed by the limiter: it learns the device time a launch costs
// from measured utilisation, whatever the grid (graphs pass 0).
inline void MaybePace(unsigned long long /*blocks*/) {
  if (__builtin_expect(!g_stamped.load(std::memory_order_relaxed), false)) StampLaunch();
  if (__builtin_expect(g_sm_limit_active.load(std::memory_order_relaxed), false)) PaceLaunch();
}
}  // namespace

void fracgpu::vgpu::LaunchStampResetAfterFork() noexcept {
  g_timer.store(kTimerNone, std::memory_order_relaxed);  // the thread did not survive the fork
  g_stamped.store(false, std::memory_order_relaxed);
}

#define FRACGPU_LAUNCH_ARGS                                                         \
  CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, \
      unsigned int by, unsigned int bz, unsigned int shared, CUstream stream, void **params

FRACGPU_EXPORT CUresult cuLaunchKernel(FRACGPU_LAUNCH_ARGS, void** extra) noexcept {
  MaybePace(1ull * gx * gy * gz);
  return REAL(cuLaunchKernel)(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}
FRACGPU_EXPORT CUresult cuLaunchKernel_ptsz(FRACGPU_LAUNCH_ARGS, void** extra) noexcept {
  MaybePace(1ull * gx * gy * gz);
  return REAL(cuLaunchKernel_ptsz)(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}
FRACGPU_EXPORT CUresult cuLaunchCooperativeKernel(FRACGPU_LAUNCH_ARGS) noexcept {
  MaybePace(1ull * gx * gy * gz);
  return REAL(cuLaunchCooperativeKernel)(f, gx, gy, gz, bx, by, bz, shared, stream, params);
}
FRACGPU_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(FRACGPU_LAUNCH_ARGS) noexcept {
  MaybePace(1ull * gx * gy * gz);
  return REAL(cuLaunchCooperativeKernel_ptsz)(f, gx, gy, gz, bx, by, bz, shared, stream, params);
}
FRACGPU_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* cfg, CUfunction f, void** params,
                                         void** extra) noexcept {
  if (cfg) MaybePace(1ull * cfg->gridDimX * cfg->gridDimY * cfg->gridDimZ);
  return REAL(cuLaunchKernelEx)(cfg, f, params, extra);
}
FRACGPU_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* cfg, CUfunction f,
                                              void** params, void** extra) noexcept {
  if (cfg) MaybePace(1ull * cfg->gridDimX * cfg->gridDimY * cfg->gridDimZ);
  return REAL(cuLaunchKernelEx_ptsz)(cfg, f, params, extra);
}
// Legacy launches (deprecated, still exported by CUDA 13: cuda.h; PFN_cuLaunch_v2000,
// PFN_cuLaunchGrid_v2000, PFN_cuLaunchGridAsync_v2000, PFN_cuLaunchCooperativeKernelMultiDevice
// _v9000) are paced like cuLaunchKernel (issue 32 item 7): before, they reached the driver
// unpaced. A multi-device launch is paced as one launch of the current context's device (the
// limiter paces that device; the list's other devices are each another context's).
FRACGPU_EXPORT CUresult cuLaunch(CUfunction f) noexcept {
  MaybePace(1);
  return REAL(cuLaunch)(f);
}
FRACGPU_EXPORT CUresult cuLaunchGrid(CUfunction f, int grid_width, int grid_height) noexcept {
  MaybePace(1ull * static_cast<unsigned>(grid_width) * static_cast<unsigned>(grid_height));
  return REAL(cuLaunchGrid)(f, grid_width, grid_height);
}
FRACGPU_EXPORT CUresult cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height,
                                          CUstream stream) noexcept {
  MaybePace(1ull * static_cast<unsigned>(grid_width) * static_cast<unsigned>(grid_height));
  return REAL(cuLaunchGridAsync)(f, grid_width, grid_height, stream);
}
FRACGPU_EXPORT CUresult cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS* list,
                                                             unsigned int num_devices,
                                                             unsigned int flags) noexcept {
  MaybePace(list && num_devices > 0 ? 1ull * list[0].gridDimX * list[0].gridDimY * list[0].gridDimZ
                                    : 0);
  return REAL(cuLaunchCooperativeKernelMultiDevice)(list, num_devices, flags);
}

// A graph launch is also where the driver reserves graph memory for an executable graph that
// was never uploaded (hooks_graph.cc): while no such graph exists (g_graph_pending is 0) that
// costs one more relaxed load, and no lock.
FRACGPU_EXPORT CUresult cuGraphLaunch(CUgraphExec graph, CUstream stream) noexcept {
  MaybePace(0);
  if (__builtin_expect(g_graph_pending.load(std::memory_order_relaxed) != 0, false))
    return GraphLaunchReserving(graph, stream, false);
  return REAL(cuGraphLaunch)(graph, stream);
}
FRACGPU_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec graph, CUstream stream) noexcept {
  MaybePace(0);
  if (__builtin_expect(g_graph_pending.load(std::memory_order_relaxed) != 0, false))
    return GraphLaunchReserving(graph, stream, true);
  return REAL(cuGraphLaunch_ptsz)(graph, stream);
}
