#include "monitor/idle_holders.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "core/annotations.h"
#include "k8s/objects.h"
#include "monitor/park_host.h"

namespace fracgpu::monitor {
namespace {

constexpr uint64_t kMiBytes = uint64_t{1} << 20;

struct PodOnGpu {
  uint64_t bytes = 0;
  uint64_t idle_ns = std::numeric_limits<uint64_t>::max();  // least over its slices
  bool all_idle = true;
};

bool SameSet(const std::vector<core::IdleHolder>& a, const std::vector<core::IdleHolder>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].pod_uid != b[i].pod_uid || a[i].gpu_uuid != b[i].gpu_uuid) return false;
  }
  return true;
}

bool SameMib(const std::vector<core::IdleHolder>& a, const std::vector<core::IdleHolder>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].mib != b[i].mib) return false;
  }
  return true;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

uint64_t NonNegative(std::chrono::nanoseconds d) {
  return static_cast<uint64_t>(std::max<int64_t>(0, d.count()));
}

}  // namespace

IdleHolderSources MakeIdleHolderSources(enforce::ProcessSource* processes, std::string proc_root,
                                        std::string limits_dir, PodLister* lister,
                                        std::string node) {
  // The same adapters as the idle-lending fallback's (MakeParkHost); its NVML facts, the only
  // users of the null NvmlParkFacts, are not kept.
  ParkHost host =
      MakeParkHost({}, nullptr, processes, std::move(proc_root), "", std::move(limits_dir));
  IdleHolderSources s;
  s.grant = std::move(host.grant);
  s.gpu_processes = std::move(host.gpu_processes);
  s.verify_process = std::move(host.verify_process);
  s.pods = [lister, node = std::move(node)]() -> Result<std::map<std::string, PodRef>> {
    if (lister == nullptr) return Unavailable("no pod list");
    auto list = lister->ListNodePods(node);
    if (!list.ok()) return list.status();
    std::map<std::string, PodRef> out;
    for (PodRef& p : *list) out[p.uid] = std::move(p);
    return out;
  };
  return s;
}

std::vector<core::IdleHolder> IdleHoldersOf(const Snapshot& snap, uint64_t now_ns,
                                            const IdleHolderOptions& options,
                                            const IdleHolderSources& sources,
                                            std::map<std::string, uint64_t>* first_seen_ns) {
  const uint64_t idle_after = NonNegative(options.idle_after);
  // The node's GPUs (NVML's list at this poll), by lower-case UUID → the node's spelling.
  std::map<std::string, std::string> node_gpus;
  for (const GpuStats& g : snap.gpus) node_gpus.emplace(Lower(g.uuid), g.uuid);
  // The slices by container: the region's devices (tenant-written: only the grant's GPU is read).
  std::map<std::string, std::vector<const SliceSample*>> containers;  // dir name → its devices
  for (const SliceSample& s : snap.slices) containers[s.pod_uid + "_" + s.container].push_back(&s);
  std::optional<Result<std::vector<enforce::GpuSample>>> gpus;   // read on first use
  std::optional<Result<std::map<std::string, PodRef>>> pods;     // listed on first use
  std::map<std::pair<std::string, std::string>, PodOnGpu> held;  // (uuid, uid) → sums
  std::set<std::string> present;
  for (const auto& [name, devices] : containers) {
    if (!sources.grant) break;
    auto dir = ParseContainerDirName(name);
    if (!dir.ok()) continue;
    auto grant = sources.grant(name);
    if (!grant.ok()) {
      spdlog::debug("idle holders: {} is not counted: {}", name, grant.status().ToString());
      continue;
    }
    auto node_gpu = node_gpus.find(Lower(grant->uuid));
    if (node_gpu == node_gpus.end()) continue;  // not one of the node's GPUs
    const std::string& uuid = node_gpu->second;
    // The region's figures for the grant's GPU; a device naming any other is not read.
    bool named = false;
    uint64_t region_bytes = 0, launch_ns = 0;
    for (const SliceSample* s : devices) {
      if (Lower(s->device.uuid) != node_gpu->first) continue;
      named = true;
      region_bytes = std::max(region_bytes, s->device.used_bytes);
      launch_ns = std::max(launch_ns, s->device.last_launch_ns);
    }
    if (!named) continue;
    const std::string key = name + "\n" + uuid;
    present.insert(key);
    const uint64_t first = first_seen_ns->emplace(key, now_ns).first->second;
    // The last launch clamped into [first seen, now]: never idle for longer than this agent saw
    // the slice, and a launch in the future is a launch now (not idle).
    const uint64_t since = std::clamp(launch_ns, std::min(first, now_ns), now_ns);
    const uint64_t idle_ns = now_ns - since;
    PodOnGpu& p = held[{uuid, dir->pod_uid}];
    p.idle_ns = std::min(p.idle_ns, idle_ns);
    if (idle_ns < idle_after) {
      p.all_idle = false;
      continue;  // the pod is not listed on this GPU: its bytes do not matter
    }
    // The driver's figure: NVML's usedGpuMemory of the container's own processes on the GPU.
    std::optional<uint64_t> driver;
    if (sources.gpu_processes && sources.verify_process) {
      if (!gpus) gpus = sources.gpu_processes();
      const enforce::GpuSample* gpu = nullptr;
      if (gpus->ok()) {
        for (const enforce::GpuSample& g : **gpus)
          if (Lower(g.uuid) == node_gpu->first) gpu = &g;
      }
      if (gpu != nullptr && gpu->processes_ok) {
        driver = 0;
        for (const enforce::DriverProcess& proc : gpu->processes) {
          if (proc.host_pid == 0 || proc.host_pid > static_cast<uint32_t>(INT32_MAX)) continue;
          if (!pods) pods = sources.pods ? sources.pods() : Unavailable("no pod list");
          const PodRef* pod = nullptr;
          if (pods->ok()) {
            auto it = (*pods)->find(dir->pod_uid);
            if (it != (*pods)->end()) pod = &it->second;
          }
          auto v = sources.verify_process(static_cast<int>(proc.host_pid), *dir, pod, uuid,
                                          /*on_gpu=*/false);
          if (v.ok()) {
            *driver =
                *driver > UINT64_MAX - proc.used_bytes ? UINT64_MAX : *driver + proc.used_bytes;
          } else if (v.status().code() != StatusCode::kPermissionDenied &&
                     v.status().code() != StatusCode::kNotFound) {
            driver.reset();  // a process that cannot be told: the driver's figure is unknown
            break;
          }
        }
      }
    }
    const uint64_t live = driver ? std::max(region_bytes, *driver) : region_bytes;
    const uint64_t bytes = std::min(grant->bytes, live);
    p.bytes = bytes > UINT64_MAX - p.bytes ? UINT64_MAX : p.bytes + bytes;
  }
  for (auto it = first_seen_ns->begin(); it != first_seen_ns->end();) {
    it = present.count(it->first) ? std::next(it) : first_seen_ns->erase(it);
  }
  std::vector<core::IdleHolder> out;
  for (const auto& [key, p] : held) {
    if (!p.all_idle) continue;
    const uint64_t mib = p.bytes / kMiBytes;
    if (mib < static_cast<uint64_t>(std::max<int64_t>(0, options.min_mib))) continue;
    core::IdleHolder h;
    h.gpu_uuid = key.first;
    h.pod_uid = key.second;
    h.mib = static_cast<int64_t>(std::min<uint64_t>(mib, core::kIdleHoldersMaxMib));
    h.idle_s = static_cast<int64_t>(
        std::min<uint64_t>(p.idle_ns / 1'000'000'000ull, core::kIdleHoldersMaxIdleSeconds));
    if (core::IdleHolderWritable(h)) out.push_back(std::move(h));
  }
  if (out.size() > core::kIdleHoldersMaxEntries) {
    // The largest holders are the ones worth showing; ties by the (GPU, pod) order.
    std::stable_sort(
        out.begin(), out.end(),
        [](const core::IdleHolder& a, const core::IdleHolder& b) { return a.mib > b.mib; });
    out.resize(core::kIdleHoldersMaxEntries);
    std::sort(out.begin(), out.end(), [](const core::IdleHolder& a, const core::IdleHolder& b) {
      return std::tie(a.gpu_uuid, a.pod_uid) < std::tie(b.gpu_uuid, b.pod_uid);
    });
  }
  return out;
}

IdleHolderPublisher::IdleHolderPublisher(IdleHolderOptions options, IdleHolderSources sources,
                                         Write write)
    : options_(std::move(options)), sources_(std::move(sources)), write_(std::move(write)) {}

bool IdleHolderPublisher::Send(const std::string& value, uint64_t now_ns) {
  attempted_ = true;
  last_write_ns_ = now_ns;
  ++writes_;
  Status st = write_(value);
  if (!st.ok()) {
    published_.reset();  // unknown until a write succeeds
    if (st.message() != last_error_) {
      spdlog::warn("idle holders: writing {}: {}", core::kAnnotationIdleHolders, st.ToString());
      last_error_ = st.message();
    }
    return false;
  }
  last_error_.clear();
  return true;
}

void IdleHolderPublisher::Poll(const Snapshot& snap, uint64_t now_ns, int64_t now_unix) {
  holders_ = IdleHoldersOf(snap, now_ns, options_, sources_, &first_seen_ns_);
  const uint64_t since = attempted_ && now_ns >= last_write_ns_ ? now_ns - last_write_ns_ : 0;
  const bool gap_ok = !attempted_ || since >= NonNegative(options_.min_gap);
  bool due = false;
  if (!published_) {
    due = gap_ok;  // unknown: the first poll, or after a failed write
  } else if (holders_.empty()) {
    due = !published_->empty() && gap_ok;
  } else if (!SameSet(*published_, holders_)) {
    due = gap_ok;
  } else if (!SameMib(*published_, holders_)) {
    due = since >= NonNegative(options_.change_gap);
  } else {
    due = since >= NonNegative(options_.refresh);
  }
  if (!due) return;
  const std::string value =
      holders_.empty() ? std::string() : core::FormatIdleHolders({now_unix, holders_});
  if (Send(value, now_ns)) published_ = holders_;
}

void IdleHolderPublisher::Remove() {
  if (published_ && published_->empty()) return;
  if (Send("", last_write_ns_)) published_ = std::vector<core::IdleHolder>{};
}

Status PatchIdleHolders(k8s::Client* client, const std::string& node, const std::string& value) {
  nlohmann::json v = value.empty() ? nlohmann::json(nullptr) : nlohmann::json(value);
  nlohmann::json patch = {{"metadata", {{"annotations", {{core::kAnnotationIdleHolders, v}}}}}};
  auto r = client->MergePatch(k8s::NodePath(node), patch);
  return r.ok() ? Status::Ok() : r.status();
}

}  // namespace fracgpu::monitor
