#pragma once
// The SM (core) limiter: paces kernel launches so that a container's measured SM utilisation
// follows CUDA_DEVICE_SM_LIMIT_<i> (docs/sm-limiter.md).
//
// Per device, shared by every process of the container through RegionDevice (api/region.h):
//   next_ns     pacing horizon: the earliest time the next launch may be issued
//   gap_ns      device time to leave between two launches (cost per launch / limit)
//   period_ns   start of the current control period
//   launches    launches issued in the current period (all processes)
//   busy_ema    EMA of busy ns per period (container, from NVML), x1
//   count_ema   EMA of launches per period, x1024
// Launch path under budget: two relaxed loads, one CAS on next_ns, one fetch_add: no lock,
// no allocation. Every kControlPeriodNs one launching process (whoever wins a CAS on
// period_ns) reads nvmlDeviceGetProcessUtilization for the container's processes and sets
// gap_ns = (busy_ema / count_ema) / limit — a feedback controller on measured utilisation.
// That control step (one NVML call, whatever NVML does inside) is the only slow work, once per
// period in one process; a paced launch sleeps (clock_nanosleep) until its slot.
#include <cstdint>

#include "api/node_gpu.h"

namespace fracgpu::vgpu {

/// Control period of the limiter (ns): how often measured utilisation is fed back.
inline constexpr uint64_t kControlPeriodNs = 100'000'000;
/// How far (ns) a container that was idle may run ahead of its pace (burst allowance).
inline constexpr uint64_t kBurstNs = 20'000'000;

/// Priority (CUDA_TASK_PRIORITY, docs/design/CONTRACT.md §3): the node agent (`fracgpu
/// monitor`) publishes, per GPU, the latest launch of the node's priority-0 containers in a
/// read-only node file <kNodeDirPath>/<GPU UUID> (api::NodeGpu); a priority-1 process holds each
/// launch back while that launch is less than kPriorityIdleNs old. No container writes it.
inline constexpr uint64_t kPriorityIdleNs = 50'000'000;
/// How often (ns, limiter clock) a priority-1 process re-reads a GPU's node file.
inline constexpr uint64_t kNodeFileRefreshNs = 5'000'000;

/// The per-GPU node file's layout: api/node_gpu.h.
using api::kNodeGpuMagic;
using api::kNodeGpuVersion;
using api::NodeGpu;

/// Set once at initialisation (state.cc), before g_sm_limit_active: enforce SM limits (some
/// device limited and policy not `disable`), and apply priority (the node directory exists).
extern bool g_sm_enforce;
extern bool g_node_dir;
/// Set once at initialisation (state.cc): false under GPU_CORE_UTILIZATION_POLICY=default, where
/// the SM cap applies only while the GPU is contended (the node agent's file, api::NodeGpu::
/// contended_until_ns; no node directory or no valid word = contended); true under `force`.
extern bool g_sm_cap_when_alone;

/// True when the node directory can be read (then the launch hooks take the slow path for
/// priority).
bool NodeDirPresent() noexcept;

/// Paces one launch on the calling thread's current device: returns at once when the device
/// has no SM limit or the container is under budget, else sleeps until its turn. Never fails.
void PaceLaunch() noexcept;

/// The limiter's time source (ns, CLOCK_MONOTONIC; the test copy of libvgpu.so uses the fake
/// driver's virtual clock, tests/fakes/cuda/fake_clock.h).
uint64_t LimiterNowNs() noexcept;

/// fork child (state.cc AtForkChild): the launch-stamp timer thread (hooks_launch.cc) did not
/// survive the fork; the child's first launch stamps and starts its own.
void LaunchStampResetAfterFork() noexcept;

}  // namespace fracgpu::vgpu
