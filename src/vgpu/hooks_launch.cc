// Kernel launch hooks. Without an SM limit a launch costs one relaxed load of
// g_sm_limit_active, the launch stamp check (one CLOCK_MONOTONIC_COARSE read through the vDSO
// and one relaxed load; the stamp itself, RegionDevice::last_launch_ns, is written at most every
// kLaunchStampPeriodNs per process) and one indirect call to the driver: no lock, no
// allocation. With an SM limit, PaceLaunch (sm_limiter.h) paces the launch first. A graph
// launch adds one relaxed load (graph memory, below).
#include <time.h>

#include "vgpu/accounting.h"
#include "vgpu/interpose.h"
#include "vgpu/sm_limiter.h"
#include "vgpu/state.h"

using namespace fracgpu::vgpu;

namespace {

std::atomic<uint64_t> g_next_stamp_ns{0};  // coarse ns after which this process stamps again

uint64_t ClockNs(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Writes last_launch_ns of the current context's device (slow path, every 10 ms at most).
__attribute__((noinline)) void StampLaunch(uint64_t coarse_now, uint64_t due) {
  if (!g_next_stamp_ns.compare_exchange_strong(due, coarse_now + kLaunchStampPeriodNs,
                                               std::memory_order_relaxed)) {
    return;  // another thread of this process stamps
  }
  Region* r = SharedRegion();
  if (!r) return;
  CUdevice ordinal = -1;
  int dev = CurrentDeviceIndex(&ordinal);
  if (dev < 0 || dev >= static_cast<int>(r->device_count)) return;
  uint64_t now = ClockNs(CLOCK_MONOTONIC);  // exact: readers compare with their own clock
  std::atomic<uint64_t>& last = r->devices[dev].last_launch_ns;
  uint64_t prev = last.load(std::memory_order_relaxed);
  while (prev < now && !last.compare_exchange_weak(prev, now, std::memory_order_relaxed)) {
  }
}

// `blocks` (grid size) is not needed by the limiter: it learns the device time a launch costs
// from measured utilisation, whatever the grid (graphs pass 0).
inline void MaybePace(unsigned long long /*blocks*/) {
  uint64_t coarse = ClockNs(CLOCK_MONOTONIC_COARSE);
  uint64_t due = g_next_stamp_ns.load(std::memory_order_relaxed);
  if (__builtin_expect(coarse >= due, false)) StampLaunch(coarse, due);
  if (__builtin_expect(g_sm_limit_active.load(std::memory_order_relaxed), false)) PaceLaunch();
}
}  // namespace

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
