#include "monitor/monitor.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <set>

#include "api/limits.h"
#include "metrics/hami.h"
#include "monitor/priority.h"

namespace fracgpu::monitor {
namespace {

double Ratio(uint32_t percent) { return percent / 100.0; }

}  // namespace

uint64_t MonotonicNowNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

Monitor::Monitor(MonitorOptions options, GpuStatsSource* gpus, PodLister* pods)
    : options_(std::move(options)), gpus_(gpus), pods_(pods), reaper_(options_.orphan_grace) {
  using metrics::Type;
  auto& r = registry_;
  r.Describe("fracgpu_build_info", Type::kGauge,
             "Build of the fracgpu component serving these metrics (always 1).");
  r.Describe("fracgpu_gpu_memory_used_bytes", Type::kGauge,
             "Device memory in use on a GPU as NVML reports it, bytes.");
  r.Describe("fracgpu_gpu_memory_total_bytes", Type::kGauge,
             "Device memory of a GPU as NVML reports it, bytes.");
  r.Describe("fracgpu_gpu_utilization_ratio", Type::kGauge,
             "Share of the last NVML sample period a kernel ran on the GPU (0..1).");
  r.Describe("fracgpu_gpu_memory_controller_utilization_ratio", Type::kGauge,
             "Share of the last NVML sample period device memory was read or written (0..1).");
  r.Describe("fracgpu_gpu_slices", Type::kGauge, "Container slices with a region on this GPU.");
  r.Describe("fracgpu_gpu_priority_launch_age_seconds", Type::kGauge,
             "Seconds since the last priority-0 kernel launch on the GPU (the node file the agent "
             "publishes for priority-1 containers).");
  r.Describe("fracgpu_container_memory_used_bytes", Type::kGauge,
             "Device memory charged to a container slice on a GPU (all its processes), bytes.");
  r.Describe("fracgpu_container_memory_limit_bytes", Type::kGauge,
             "Device memory limit of a container slice on a GPU, bytes (0 = unlimited).");
  r.Describe("fracgpu_container_memory_context_bytes", Type::kGauge,
             "Of the slice's memory: CUDA context overhead, bytes.");
  r.Describe("fracgpu_container_memory_module_bytes", Type::kGauge,
             "Of the slice's memory: loaded modules and libraries, bytes.");
  r.Describe("fracgpu_container_memory_data_bytes", Type::kGauge,
             "Of the slice's memory: allocations (cuMemAlloc*, pools, arrays, VMM), bytes.");
  r.Describe("fracgpu_container_sm_utilization_ratio", Type::kGauge,
             "SM utilisation of the slice's processes on the GPU since the previous poll (NVML per "
             "process, 0..1).");
  r.Describe("fracgpu_container_sm_limit_ratio", Type::kGauge,
             "SM limit of the slice on the GPU (1 = unlimited).");
  r.Describe("fracgpu_container_last_kernel_age_seconds", Type::kGauge,
             "Seconds since the slice's last kernel launch on the GPU (absent: none yet).");
  r.Describe("fracgpu_container_processes", Type::kGauge,
             "Processes of the container holding a region slot.");
  r.Describe("fracgpu_monitor_polls_total", Type::kCounter,
             "Polls of the region directory and NVML.");
  r.Describe("fracgpu_monitor_region_skipped_total", Type::kCounter,
             "Region files skipped by a poll, by reason (untrusted input that did not validate).");
  r.Describe("fracgpu_monitor_errors_total", Type::kCounter,
             "Polls in which a source failed, by source.");
  r.Describe("fracgpu_monitor_directories_removed_total", Type::kCounter,
             "Region directories removed because their pod left the node.");
  if (options_.hami_metric_names) {
    // HAMi v2.10 vGPUmonitor's names, help texts and labels (cmd/vGPUmonitor/metrics.go;
    // docs/design/hami-behaviour.md §6.1), with its constant zone="vGPU"; values in HAMi's
    // units (utilisation in percent 0..100, as HAMi reports NVML's figures).
    r.Describe("hami_host_gpu_memory_used_bytes", Type::kGauge,
               "HAMi-compatible: memory in use on the GPU (NVML), bytes.");
    r.Describe("hami_host_gpu_utilization_ratio", Type::kGauge,
               "HAMi-compatible: SM utilisation of the GPU (NVML), percent 0..100.");
    r.Describe("hami_host_gpu_memory_controller_utilization_ratio", Type::kGauge,
               "HAMi-compatible: memory-controller utilisation of the GPU (NVML), percent 0..100.");
    r.Describe("hami_vgpu_memory_used_bytes", Type::kGauge,
               "HAMi-compatible: memory a container uses on a GPU (its region), bytes.");
    r.Describe("hami_vgpu_memory_limit_bytes", Type::kGauge,
               "HAMi-compatible: a container's memory limit on a GPU, bytes.");
    r.Describe("hami_container_device_memory_bytes", Type::kGauge,
               "HAMi-compatible: a container's device memory in use, bytes.");
    r.Describe("hami_vgpu_memory_context_bytes", Type::kGauge,
               "HAMi-compatible: a container's context memory, bytes.");
    r.Describe("hami_vgpu_memory_module_bytes", Type::kGauge,
               "HAMi-compatible: a container's module (code) memory, bytes.");
    r.Describe("hami_vgpu_memory_buffer_bytes", Type::kGauge,
               "HAMi-compatible: a container's buffer (allocation) memory, bytes.");
    r.Describe("hami_container_device_utilization_ratio", Type::kGauge,
               "HAMi-compatible: a container's SM utilisation, percent 0..100.");
    r.Describe("hami_container_last_kernel_elapsed_seconds", Type::kGauge,
               "HAMi-compatible: seconds since the container last launched a kernel.");
    metrics::DescribeHamiBuildInfo(r);
    if (options_.legacy_metric_names) {
      // HAMi's pre-v2.10 names (initLegacyDescriptors, emitted with HAMi's --legacy-metrics).
      r.Describe("HostGPUMemoryUsage", Type::kGauge,
                 "HAMi legacy name: memory in use on the GPU, bytes.");
      r.Describe("HostCoreUtilization", Type::kGauge,
                 "HAMi legacy name: SM utilisation of the GPU, percent.");
      r.Describe("vGPU_device_memory_usage_in_bytes", Type::kGauge,
                 "HAMi legacy name: memory a container uses on a GPU, bytes.");
      r.Describe("vGPU_device_memory_limit_in_bytes", Type::kGauge,
                 "HAMi legacy name: a container's memory limit on a GPU, bytes.");
      r.Describe("Device_memory_desc_of_container", Type::kGauge,
                 "HAMi legacy name: a container's memory by kind, bytes.");
      r.Describe("Device_utilization_desc_of_container", Type::kGauge,
                 "HAMi legacy name: a container's SM utilisation, percent.");
      r.Describe("Device_last_kernel_of_container", Type::kGauge,
                 "HAMi legacy name: seconds since the container's last kernel.");
    }
  }
  registry_.AddCollector([this](metrics::Registry::Scrape& s) { Collect(s); });
}

void Monitor::ReadPriorityFiles(const std::vector<GpuStats>& gpus, uint64_t now_ns,
                                Snapshot* snap) const {
  if (options_.node_dir.empty()) return;
  for (const auto& g : gpus) {
    if (g.uuid.empty() || g.uuid.find('/') != std::string::npos) continue;
    auto stamp = ReadNodeGpuFile(options_.node_dir + "/" + g.uuid);
    if (!stamp || *stamp == 0 || *stamp > now_ns) continue;
    snap->priority_launch_age_s[g.uuid] = static_cast<double>(now_ns - *stamp) / 1e9;
  }
}

void Monitor::Poll(uint64_t now_ns) {
  Snapshot snap;

  // GPUs.
  if (gpus_ != nullptr) {
    auto list = gpus_->ListGpus();
    if (list.ok()) {
      snap.gpus = std::move(*list);
    } else {
      registry_.Add("fracgpu_monitor_errors_total", {{"source", "nvml"}});
      spdlog::warn("NVML: {}", list.status().ToString());
    }
  }
  ReadPriorityFiles(snap.gpus, now_ns, &snap);

  // Region directories.
  auto scan = ScanContainerDirs(containers_root());
  if (!scan.ok()) {
    registry_.Add("fracgpu_monitor_errors_total", {{"source", "regions"}});
    spdlog::warn("{}", scan.status().ToString());
    scan = DirScan{};
  }

  // Pods of this node.
  std::optional<std::vector<std::string>> live_uids;
  if (pods_ != nullptr) {
    auto pods = pods_->ListNodePods(options_.node_name);
    if (pods.ok()) {
      live_uids.emplace();
      for (auto& p : *pods) {
        live_uids->push_back(p.uid);
        known_pods_[p.uid] = p;
      }
    } else {
      registry_.Add("fracgpu_monitor_errors_total", {{"source", "apiserver"}});
      spdlog::warn("pod list: {}", pods.status().ToString());
    }
  }

  // Removal of directories whose pod left the node (never while the list is unknown).
  std::set<std::string> removed;
  if (pods_ != nullptr && options_.remove_orphans) {
    for (const auto& d : reaper_.Due(scan->dirs, live_uids ? &*live_uids : nullptr,
                                     std::chrono::nanoseconds(now_ns))) {
      if (Status st = RemoveContainerDir(d); !st.ok()) {
        spdlog::warn("{}", st.ToString());
        continue;
      }
      spdlog::info("removed {}: pod {} is no longer on node {}", d.path, d.pod_uid,
                   options_.node_name);
      registry_.Add("fracgpu_monitor_directories_removed_total", {});
      reaper_.Forget(d.name);
      removed.insert(d.name);
    }
  }

  // Regions.
  std::set<std::string> present_uids;
  std::map<std::string, std::map<uint32_t, double>> util_by_gpu;  // fetched once per GPU per poll
  std::set<std::string> util_failed;
  for (const auto& d : scan->dirs) {
    if (removed.count(d.name)) continue;
    present_uids.insert(d.pod_uid);
    std::string reason;
    auto contents = ReadRegionFile(api::JoinHostPath(d.path, api::kRegionFileName), &reason);
    if (!contents.ok()) {
      registry_.Add("fracgpu_monitor_region_skipped_total", {{"reason", reason}});
      snap.skipped.push_back({d.name, reason + ": " + contents.status().message()});
      // Logged when the verdict changes, not at every poll (a file may stay bad for days).
      std::string& last = last_skip_[d.name];
      if (reason != "missing" && last != contents.status().message())
        spdlog::warn("skipped region of {}: {}", d.name, contents.status().ToString());
      last = contents.status().message();
      continue;
    }
    last_skip_.erase(d.name);
    auto known = known_pods_.find(d.pod_uid);
    for (const SliceDevice& dev : contents->devices) {
      SliceSample s;
      s.pod_uid = d.pod_uid;
      s.container = d.container;
      if (known != known_pods_.end()) {
        s.namespace_name = known->second.namespace_name;
        s.pod = known->second.name;
      } else {
        s.pod = d.pod_uid;
      }
      s.device = dev;
      s.processes = contents->active_slots;
      if (dev.last_launch_ns != 0 && dev.last_launch_ns <= now_ns)
        s.last_kernel_age_s = static_cast<double>(now_ns - dev.last_launch_ns) / 1e9;
      if (gpus_ != nullptr && !dev.uuid.empty() && !util_failed.count(dev.uuid)) {
        auto it = util_by_gpu.find(dev.uuid);
        if (it == util_by_gpu.end()) {
          auto u = gpus_->ProcessSmUtilization(dev.uuid);
          if (!u.ok()) {
            util_failed.insert(dev.uuid);
            spdlog::debug("process utilisation of {}: {}", dev.uuid, u.status().ToString());
          } else {
            it = util_by_gpu.emplace(dev.uuid, std::move(*u)).first;
          }
        }
        if (it != util_by_gpu.end()) {
          double sum = 0;
          for (int32_t pid : contents->host_pids) {
            auto p = it->second.find(static_cast<uint32_t>(pid));
            if (p != it->second.end()) sum += p->second;
          }
          s.sm_utilization = sum > 1.0 ? 1.0 : sum;
        }
      }
      snap.slices.push_back(std::move(s));
    }
  }
  for (auto it = known_pods_.begin(); it != known_pods_.end();) {
    it = present_uids.count(it->first) ? std::next(it) : known_pods_.erase(it);
  }
  std::set<std::string> present_dirs;
  for (const auto& d : scan->dirs) present_dirs.insert(d.name);
  for (auto it = last_skip_.begin(); it != last_skip_.end();) {
    it = present_dirs.count(it->first) ? std::next(it) : last_skip_.erase(it);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    snapshot_ = std::move(snap);
    polled_ = true;
  }
  // Counted once the snapshot is published: a scrape that shows N polls shows the N-th one's
  // GPUs and slices (the HTTP server starts before the first poll ends).
  registry_.Add("fracgpu_monitor_polls_total", {});
}

Snapshot Monitor::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return snapshot_;
}

void Monitor::Collect(metrics::Registry::Scrape& s) const {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string& node = options_.node_name;
  s.Set("fracgpu_build_info", {{"component", "monitor"}, {"version", options_.version}}, 1);
  if (options_.hami_metric_names) metrics::SetHamiBuildInfo(s, options_.version);
  if (!polled_) return;
  std::map<std::string, int> slices_per_gpu;
  for (const auto& sl : snapshot_.slices) ++slices_per_gpu[sl.device.uuid];
  for (const auto& g : snapshot_.gpus) {
    metrics::Labels l = {{"node", node},
                         {"device_uuid", g.uuid},
                         {"device_index", std::to_string(g.index)},
                         {"model", g.name}};
    s.Set("fracgpu_gpu_memory_used_bytes", l, static_cast<double>(g.memory_used_bytes));
    s.Set("fracgpu_gpu_memory_total_bytes", l, static_cast<double>(g.memory_total_bytes));
    if (g.utilization) s.Set("fracgpu_gpu_utilization_ratio", l, *g.utilization);
    if (g.memory_utilization)
      s.Set("fracgpu_gpu_memory_controller_utilization_ratio", l, *g.memory_utilization);
    auto n = slices_per_gpu.find(g.uuid);
    s.Set("fracgpu_gpu_slices", l, n == slices_per_gpu.end() ? 0 : n->second);
    if (options_.hami_metric_names) {
      const std::string type =
          "NVIDIA-" + g.name;  // HAMi's device_type: "NVIDIA-" + nvmlDeviceGetName
      metrics::Labels h = {{"node", node},
                           {"device_index", std::to_string(g.index)},
                           {"device_uuid", g.uuid},
                           {"device_type", type},
                           {"zone", metrics::kHamiZone}};
      s.Set("hami_host_gpu_memory_used_bytes", h, static_cast<double>(g.memory_used_bytes));
      if (g.utilization) s.Set("hami_host_gpu_utilization_ratio", h, *g.utilization * 100);
      if (options_.legacy_metric_names) {
        metrics::Labels o = {{"nodeid", node},
                             {"deviceidx", std::to_string(g.index)},
                             {"deviceuuid", g.uuid},
                             {"devicetype", type},
                             {"zone", metrics::kHamiZone}};
        s.Set("HostGPUMemoryUsage", o, static_cast<double>(g.memory_used_bytes));
        if (g.utilization) s.Set("HostCoreUtilization", o, *g.utilization * 100);
      }
      if (g.memory_utilization)
        s.Set("hami_host_gpu_memory_controller_utilization_ratio",
              {{"device_index", std::to_string(g.index)},
               {"device_uuid", g.uuid},
               {"device_type", type},
               {"zone", metrics::kHamiZone}},
              *g.memory_utilization * 100);
    }
  }
  for (const auto& [uuid, age] : snapshot_.priority_launch_age_s)
    s.Set("fracgpu_gpu_priority_launch_age_seconds", {{"node", node}, {"device_uuid", uuid}}, age);
  for (const auto& sl : snapshot_.slices) {
    const SliceDevice& d = sl.device;
    metrics::Labels l = {{"node", node},
                         {"namespace", sl.namespace_name},
                         {"pod", sl.pod},
                         {"container", sl.container},
                         {"device_uuid", d.uuid}};
    s.Set("fracgpu_container_memory_used_bytes", l, static_cast<double>(d.used_bytes));
    s.Set("fracgpu_container_memory_limit_bytes", l, static_cast<double>(d.memory_limit_bytes));
    s.Set("fracgpu_container_memory_context_bytes", l, static_cast<double>(d.context_bytes));
    s.Set("fracgpu_container_memory_module_bytes", l, static_cast<double>(d.module_bytes));
    s.Set("fracgpu_container_memory_data_bytes", l, static_cast<double>(d.data_bytes));
    s.Set("fracgpu_container_sm_limit_ratio", l,
          d.sm_limit_percent == 0 ? 1.0 : Ratio(d.sm_limit_percent));
    if (sl.sm_utilization) s.Set("fracgpu_container_sm_utilization_ratio", l, *sl.sm_utilization);
    if (sl.last_kernel_age_s)
      s.Set("fracgpu_container_last_kernel_age_seconds", l, *sl.last_kernel_age_s);
    s.Set("fracgpu_container_processes", l, sl.processes);
    if (options_.hami_metric_names) {
      metrics::Labels h = {
          {"namespace", sl.namespace_name}, {"pod", sl.pod},
          {"container", sl.container},      {"vdevice_index", std::to_string(d.index)},
          {"device_uuid", d.uuid},          {"zone", metrics::kHamiZone}};
      s.Set("hami_vgpu_memory_used_bytes", h, static_cast<double>(d.used_bytes));
      s.Set("hami_vgpu_memory_limit_bytes", h, static_cast<double>(d.memory_limit_bytes));
      s.Set("hami_container_device_memory_bytes", h, static_cast<double>(d.used_bytes));
      s.Set("hami_vgpu_memory_context_bytes", h, static_cast<double>(d.context_bytes));
      s.Set("hami_vgpu_memory_module_bytes", h, static_cast<double>(d.module_bytes));
      s.Set("hami_vgpu_memory_buffer_bytes", h, static_cast<double>(d.data_bytes));
      if (sl.sm_utilization)
        s.Set("hami_container_device_utilization_ratio", h, *sl.sm_utilization * 100);
      if (sl.last_kernel_age_s)
        s.Set("hami_container_last_kernel_elapsed_seconds", h, *sl.last_kernel_age_s);
      if (options_.legacy_metric_names) {
        metrics::Labels o = {{"podnamespace", sl.namespace_name},
                             {"podname", sl.pod},
                             {"ctrname", sl.container},
                             {"vdeviceid", std::to_string(d.index)},
                             {"deviceuuid", d.uuid},
                             {"zone", metrics::kHamiZone}};
        s.Set("vGPU_device_memory_usage_in_bytes", o, static_cast<double>(d.used_bytes));
        s.Set("vGPU_device_memory_limit_in_bytes", o, static_cast<double>(d.memory_limit_bytes));
        if (sl.sm_utilization)
          s.Set("Device_utilization_desc_of_container", o, *sl.sm_utilization * 100);
        if (sl.last_kernel_age_s)
          s.Set("Device_last_kernel_of_container", o, *sl.last_kernel_age_s);
        // HAMi puts the breakdown in labels; offset = total − context − module − data.
        const int64_t offset =
            static_cast<int64_t>(d.used_bytes) - static_cast<int64_t>(d.context_bytes) -
            static_cast<int64_t>(d.module_bytes) - static_cast<int64_t>(d.data_bytes);
        metrics::Labels m = o;
        m.pop_back();  // zone goes last, after HAMi's four extra labels
        m.insert(m.end(), {{"context", std::to_string(d.context_bytes)},
                           {"module", std::to_string(d.module_bytes)},
                           {"data", std::to_string(d.data_bytes)},
                           {"offset", std::to_string(offset)},
                           {"zone", metrics::kHamiZone}});
        s.Set("Device_memory_desc_of_container", m, static_cast<double>(d.used_bytes));
      }
    }
  }
}

std::string MissingContainersWarning(const std::string& hook_path) {
  const std::string layout = api::JoinHostPath(api::kHostVgpuDir, api::kHostContainersDir);
  const std::string dir = api::HostContainersDir(hook_path);
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return "";
  return dir +
         " is missing: no container's region can be read, so no slice is measured or enforced "
         "until it appears (the device plugin creates it when it starts). If the device plugin "
         "uses "
         "another folder, point --hook-path (env HOOK_PATH) at the one holding " +
         layout;
}

}  // namespace fracgpu::monitor
