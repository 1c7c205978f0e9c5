#include "monitor/agent_loop.h"

#include <algorithm>

namespace fracgpu::monitor {

void RunAgentLoop(Monitor* mon, NodeEnforcer* enforcer, const AgentSchedule& schedule,
                  base::StopSignal* stop) {
  const uint64_t period = static_cast<uint64_t>(schedule.metrics_period.count());
  const uint64_t enforce_period = static_cast<uint64_t>(schedule.enforce_period.count());
  uint64_t next_metrics = 0, next_enforce = 0;
  while (!stop->stopped()) {
    uint64_t now = MonotonicNowNs();
    if (now >= next_metrics) {
      mon->Poll(now);
      next_metrics = now + period;
    }
    if (enforcer && now >= next_enforce) {
      enforcer->Poll(MonotonicNowNs(), mon->known_pods());
      next_enforce = now + enforce_period;
    }
    uint64_t wake = enforcer ? std::min(next_metrics, next_enforce) : next_metrics;
    uint64_t after = MonotonicNowNs();
    if (wake > after) stop->WaitFor(std::chrono::nanoseconds(wake - after));
  }
}

}  // namespace fracgpu::monitor
