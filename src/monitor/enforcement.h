#pragma once
// The node side of driver-truth enforcement (docs/enforcement.md): every poll, the driver's
// per-process memory (NVML, host PIDs; the DaemonSet runs with hostPID) is matched to pods
// through /proc/<pid>/cgroup, each fracgpu container's limits come from its read-only limits
// file (<hook>/vgpu/limits/<pod UID>_<container>.env) and its claims from its region, and the
// enforcement core (src/enforce/enforce.h) decides. Actions: `report` (an Event on the pod
// with the numbers, fracgpu_enforcement_violations_total{reason}, a log line; once per
// episode) and `kill` (SIGKILL the process that took the container over its memory limit,
// PID-reuse checked). Never touches a process on a GPU no fracgpu limits file names, nor one
// of a container without fracgpu limits.
//
// Thread-compatible: Poll() from the monitor's poll loop only.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "enforce/enforce.h"
#include "enforce/nvml_processes.h"
#include "enforce/proc.h"
#include "metrics/registry.h"
#include "monitor/pods.h"

namespace fracgpu::monitor {

/// Where pod Events go (the API server; tests record them).
class EventSink {
 public:
  virtual ~EventSink() = default;
  /// A Warning Event about `pod` (reason CamelCase, e.g. "GPUMemoryOverLimit").
  virtual void PodWarning(const PodRef& pod, const std::string& reason,
                          const std::string& message) = 0;
};

/// EventSink over the API server (core/v1 Events, component "fracgpu-monitor").
class K8sEventSink final : public EventSink {
 public:
  explicit K8sEventSink(k8s::Client* client) : client_(client) {}
  void PodWarning(const PodRef& pod, const std::string& reason,
                  const std::string& message) override;

 private:
  k8s::Client* client_;
};

/// The container name of a process whose cgroup says `id`, as the enforcement maps it: the pod
/// of that UID among `pods` and its container_names entry for the cgroup's container ID (the API
/// server's status). nullopt when the pod is unknown or does not name the container. The
/// parking loop verifies the PIDs a region names with it (monitor/park_host.h).
std::optional<std::string> NamedContainer(const enforce::CgroupIdentity& id,
                                          const std::map<std::string, PodRef>& pods);

/// Settings (the monitor's --enforce-* flags).
struct EnforcementOptions {
  std::string hook_path =
      "/usr/local";  ///< limits under <hook>/vgpu/limits, regions under <hook>/vgpu/containers
  std::string proc_root = "/proc";  ///< the host's /proc (hostPID)
  enforce::Policy policy;  ///< actions per reason, confirm polls (default: kill memory after 2)
};

/// One poll's enforcement on this node.
class NodeEnforcer {
 public:
  /// `processes` (NVML), `events` (may be null: log and metric only) and `registry` are not
  /// owned and must outlive the enforcer. Describes its metrics in `registry`.
  NodeEnforcer(EnforcementOptions options, enforce::ProcessSource* processes, EventSink* events,
               metrics::Registry* registry);
  /// Checks every managed GPU at CLOCK_MONOTONIC `now_ns`. `pods`: this node's pods by UID
  /// (names, container IDs, the fracgpu.io/enforcement annotation; empty when the API server
  /// is unknown). `sm_utilization`: per GPU UUID, per host PID, when the caller has it.
  /// Never fails: NVML errors are logged once per change and counted
  /// (fracgpu_monitor_errors_total{source="nvml_processes"}); the next poll tries again.
  std::vector<enforce::Finding> Poll(
      uint64_t now_ns, const std::map<std::string, PodRef>& pods,
      const std::map<std::string, std::map<uint32_t, double>>& sm_utilization = {});

 private:
  void Act(const enforce::Finding& f, const std::map<std::string, PodRef>& pods);

  EnforcementOptions options_;
  enforce::ProcessSource* processes_;
  EventSink* events_;
  metrics::Registry* registry_;
  enforce::ProcReader reader_;
  enforce::ProcResolver resolver_;
  enforce::Enforcer enforcer_;
  std::string last_nvml_error_;
  std::map<std::string, std::string> last_limits_error_;  // container dir name → error (log once)
};

}  // namespace fracgpu::monitor
