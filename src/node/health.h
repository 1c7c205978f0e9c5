#pragma once
// GPU health from NVML Xid critical-error events (docs/design/hami-behaviour.md §4.7): an Xid
// outside the ignored list marks the GPU unhealthy; the device plugin's ListAndWatch and register
// annotation, and the DRA driver's ResourceSlice, follow.

#include <chrono>
#include <functional>
#include <set>
#include <string>

#include "base/clock.h"
#include "base/status.h"
#include "node/device_state.h"
#include "nvml/gpu_source.h"

namespace fracgpu::node {

/// Which Xids count. Default: every Xid except 13, 31, 43, 45, 68 and 109, which are
/// application errors rather than GPU faults (the list HAMi and NVIDIA's plugin use).
struct XidPolicy {
  bool enabled = true;
  std::set<uint64_t> ignored = {13, 31, 43, 45, 68, 109};
  bool Counts(uint64_t xid) const { return enabled && ignored.count(xid) == 0; }
};

/// Builds the policy from DP_DISABLE_HEALTHCHECKS (`all` or `xids` turn checks off; a comma
/// list of Xids adds to the ignored list) and DP_ENABLE_HEALTHCHECKS (a comma list of Xids
/// that count even if ignored by default). Errors: kInvalidArgument naming the variable and
/// the entry.
Result<XidPolicy> ParseXidPolicy(const std::string& disable_env, const std::string& enable_env);

/// Applies one event: returns true when it changed health.
bool ApplyXidEvent(const nvml::XidEvent& event, const XidPolicy& policy, DeviceState* state);

/// Waits for Xid events (`wait_step` per NVML wait) until `stop` fires, applying each and
/// calling `on_change` after a change. Returns when stopped, or when `source` cannot report
/// events (that error is returned).
Status WatchHealth(nvml::GpuSource* source, const XidPolicy& policy, DeviceState* state,
                   base::StopSignal* stop, const std::function<void()>& on_change,
                   std::chrono::milliseconds wait_step = std::chrono::milliseconds(1000));

}  // namespace fracgpu::node
