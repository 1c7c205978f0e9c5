#pragma once
// The node agent's schedule (`fracgpu monitor`): metrics polls every `metrics_period`, driver-
// truth enforcement every `enforce_period`, in one thread, until stopped. Shared by the command
// and bench/kill_latency_bench.cc, so the benchmark measures the schedule the node runs.

#include <chrono>
#include <cstdint>

#include "base/clock.h"
#include "monitor/enforcement.h"
#include "monitor/monitor.h"

namespace fracgpu::monitor {

/// Defaults of the agent's flags (docs/monitor.md; the kill-latency table in docs/monitor.md
/// was measured at these).
inline constexpr double kDefaultIntervalS = 5;           ///< --interval
inline constexpr double kDefaultEnforceIntervalS = 0.2;  ///< --enforce-interval
inline constexpr int kDefaultConfirmPolls = 2;           ///< --enforce-confirm-polls
/// --enforce-memory-slack, MiB: driver memory libvgpu.so cannot charge (lazily loaded kernel
/// code, cuCtxSetLimit heap/stack/printf growth) allowed above a limit or a claim.
inline constexpr double kDefaultMemorySlackMiB = 64;

/// When each poll runs.
struct AgentSchedule {
  std::chrono::nanoseconds metrics_period{static_cast<int64_t>(kDefaultIntervalS * 1e9)};
  std::chrono::nanoseconds enforce_period{static_cast<int64_t>(kDefaultEnforceIntervalS * 1e9)};
};

/// Polls `monitor` (metrics) and `enforcer` (may be null) on `schedule` until `stop` is set;
/// each poll reads CLOCK_MONOTONIC (MonotonicNowNs). A poll that overruns its period delays the
/// next one of either kind (one thread).
void RunAgentLoop(Monitor* monitor, NodeEnforcer* enforcer, const AgentSchedule& schedule,
                  base::StopSignal* stop);

}  // namespace fracgpu::monitor
