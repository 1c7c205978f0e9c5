#pragma once
// The per-node exporter behind `fracgpu monitor` (docs/design/ARCHITECTURE.md "monitor/"): each
// Poll() scans the region directories, reads every region as untrusted input (region_reader.h),
// names each directory after its pod (pods.h), reads NVML (gpu_stats.h) and the SM limiter's
// per-GPU priority files, removes directories of pods gone for longer than the grace period, and
// keeps the result as a snapshot that /metrics renders (docs/monitor.md lists every metric).
//
//   monitor::Monitor m(options, &nvml, &pods);
//   m.Poll(MonotonicNow());          // every --interval
//   std::string text = m.registry().Render();
//
// Thread-safe: Poll() from one thread, Render() (the registry) from any.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "api/limits.h"
#include "metrics/registry.h"
#include "monitor/container_dirs.h"
#include "monitor/gpu_stats.h"
#include "monitor/pods.h"
#include "monitor/region_reader.h"

namespace fracgpu::monitor {

/// Settings (the command's flags).
struct MonitorOptions {
  std::string node_name;                 ///< this node (the `node` label, the pod list)
  std::string hook_path = "/usr/local";  ///< regions under <hook>/vgpu/containers
  std::string node_dir =
      "/usr/local/vgpu/node";  ///< host dir of the SM limiter's per-GPU priority files (device
                               ///< plugin: <hook>/vgpu/node); "" = off
  std::chrono::nanoseconds orphan_grace =
      std::chrono::minutes(5);  ///< before removing a gone pod's dir
  bool remove_orphans = true;   ///< false: never remove anything
  bool hami_metric_names =
      true;  ///< also emit HAMi's metric names (docs/design/hami-behaviour.md §6.1)
  bool legacy_metric_names =
      false;                      ///< with them, HAMi's pre-v2.10 names (HAMi's --legacy-metrics)
  std::string version = "0.0.0";  ///< for fracgpu_build_info
};

/// One container slice on one GPU, as last polled.
struct SliceSample {
  std::string namespace_name;  ///< "" when the pod is unknown
  std::string pod;             ///< the pod's name; its UID when the pod is unknown
  std::string pod_uid;
  std::string container;
  SliceDevice device;
  int processes = 0;                     ///< active region slots of the container
  std::optional<double> sm_utilization;  ///< Σ NVML per-process SM ratio over the slots' host PIDs
  std::optional<double>
      last_kernel_age_s;  ///< now − last_launch_ns, seconds; empty = never / in the future
};

/// What a poll saw (also for tests).
struct Snapshot {
  std::vector<GpuStats> gpus;
  std::vector<SliceSample> slices;
  std::map<std::string, double>
      priority_launch_age_s;  ///< GPU UUID → age of the last priority-0 launch
  std::vector<std::pair<std::string, std::string>> skipped;  ///< (directory, reason: message)
};

/// The exporter. `gpus` and `pods` (not owned; either may be null: no NVML / no API server)
/// must outlive it.
class Monitor {
 public:
  Monitor(MonitorOptions options, GpuStatsSource* gpus, PodLister* pods);

  /// One scan at CLOCK_MONOTONIC time `now` (ns; the clock libvgpu stamps last_launch_ns with).
  /// Never fails: a source that errs is logged and counted
  /// (fracgpu_monitor_errors_total{source}), the rest is still exported.
  void Poll(uint64_t now_ns);
  /// The last poll's result.
  Snapshot snapshot() const;
  /// The metrics (Prometheus text via Render()).
  metrics::Registry& registry() { return registry_; }

  /// This node's pods seen by the last polls, by UID (kept while the API server is down); for
  /// the enforcement (monitor/enforcement.h). Same thread as Poll().
  const std::map<std::string, PodRef>& known_pods() const { return known_pods_; }

  /// The region directory root: <hook_path>/vgpu/containers.
  std::string containers_root() const { return api::HostContainersDir(options_.hook_path); }

 private:
  void Collect(metrics::Registry::Scrape& s) const;
  void ReadPriorityFiles(const std::vector<GpuStats>& gpus, uint64_t now_ns, Snapshot* snap) const;

  MonitorOptions options_;
  GpuStatsSource* gpus_;
  PodLister* pods_;
  OrphanReaper reaper_;
  std::map<std::string, PodRef> known_pods_;      // uid → pod (kept while the API server is down)
  std::map<std::string, std::string> last_skip_;  // directory → last refusal message (log once)
  metrics::Registry registry_;
  mutable std::mutex mu_;
  Snapshot snapshot_;
  bool polled_ = false;
};

/// CLOCK_MONOTONIC now, ns.
uint64_t MonotonicNowNs();

/// "" when <hook_path>/vgpu/containers is a directory; otherwise the warning the monitor logs
/// at start, naming that path and --hook-path (the device plugin creates it when it starts).
std::string MissingContainersWarning(const std::string& hook_path);

}  // namespace fracgpu::monitor
