// Kernel launch hooks. Without an SM limit a launch costs one relaxed load of
// g_sm_limit_active and one indirect call to the driver: no lock, no allocation. With one,
// PaceLaunch (sm_limiter.h) paces the launch first.
#include "vgpu/interpose.h"
#include "vgpu/sm_limiter.h"
#include "vgpu/state.h"

using namespace fracgpu::vgpu;

namespace {
// `blocks` (grid size) is not needed by the limiter: it learns the device time a launch costs
// from measured utilisation, whatever the grid (graphs pass 0).
inline void MaybePace(unsigned long long /*blocks*/) {
  if (__builtin_expect(g_sm_limit_active.load(std::memory_order_relaxed), false)) PaceLaunch();
}
}  // namespace

#define FRACGPU_LAUNCH_ARGS                                                                   \
  CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,             \
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
FRACGPU_EXPORT CUresult cuGraphLaunch(CUgraphExec graph, CUstream stream) noexcept {
  MaybePace(0);
  return REAL(cuGraphLaunch)(graph, stream);
}
FRACGPU_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec graph, CUstream stream) noexcept {
  MaybePace(0);
  return REAL(cuGraphLaunch_ptsz)(graph, stream);
}
