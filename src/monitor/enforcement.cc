#include "monitor/enforcement.h"

#include <dirent.h>
#include <spdlog/spdlog.h>

#include <set>

#include "api/limits.h"
#include "base/file.h"
#include "base/strings.h"
#include "enforce/region_claims.h"
#include "k8s/client.h"
#include "monitor/container_dirs.h"
#include "vgpu/limits.h"

namespace fracgpu::monitor {
namespace {

constexpr size_t kMaxLimitsFileBytes = 64 * 1024;
// A DRA claim's slot is claim_<claim UID> (dra/cdi.cc ClaimSlot): "claim" where a pod UID is.
constexpr char kDraClaimSlot[] = "claim";

const char* EventReason(enforce::Reason r, bool killed) {
  if (killed) return "GPUProcessKilled";
  switch (r) {
    case enforce::Reason::kMemoryOverLimit:
      return "GPUMemoryOverLimit";
    case enforce::Reason::kRegionMismatch:
      return "GPURegionMismatch";
    case enforce::Reason::kUnmanagedProcess:
      return "GPUUnmanagedProcess";
    case enforce::Reason::kSmOverLimit:
      return "GPUSMOverLimit";
    case enforce::Reason::kLimitsUnreadable:
      return "GPULimitsUnreadable";
  }
  return "GPUEnforcement";
}

// Reads a limits file (written by the device plugin, mode 0444, outside the tenant's reach):
// bounded, no symlink followed, never blocking on a FIFO. Errors name the path.
Result<std::string> ReadLimitsText(const std::string& path) {
  return base::ReadFile(path, kMaxLimitsFileBytes, {.follow_symlinks = false, .nonblocking = true});
}

}  // namespace

std::optional<std::string> NamedContainer(const enforce::CgroupIdentity& id,
                                          const std::map<std::string, PodRef>& pods) {
  auto pod = pods.find(id.pod_uid);
  if (pod == pods.end()) return std::nullopt;
  auto n = pod->second.container_names.find(id.container_id);
  if (n == pod->second.container_names.end()) return std::nullopt;
  return n->second;
}

void K8sEventSink::PodWarning(const PodRef& pod, const std::string& reason,
                              const std::string& message) {
  nlohmann::json involved = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"namespace", pod.namespace_name}, {"name", pod.name}, {"uid", pod.uid}}}};
  Status st = client_->CreateEvent(involved, "Warning", reason, message, "fracgpu-monitor");
  if (!st.ok())
    spdlog::warn("event {} on pod {}/{} not recorded: {}", reason, pod.namespace_name, pod.name,
                 st.ToString());
}

NodeEnforcer::NodeEnforcer(EnforcementOptions options, enforce::ProcessSource* processes,
                           EventSink* events, metrics::Registry* registry)
    : options_(std::move(options)),
      processes_(processes),
      events_(events),
      registry_(registry),
      reader_(options_.proc_root),
      resolver_(&reader_),
      enforcer_(options_.policy) {
  using metrics::Type;
  registry_->Describe(
      "fracgpu_enforcement_violations_total", Type::kCounter,
      "Confirmed enforcement findings (episodes, not polls), by reason (docs/enforcement.md).");
  registry_->Describe("fracgpu_enforcement_kills_total", Type::kCounter,
                      "Processes SIGKILLed by the enforcement, by reason.");
  registry_->Describe("fracgpu_enforcement_polls_total", Type::kCounter,
                      "Enforcement polls of the driver's account.");
}

std::vector<enforce::Finding> NodeEnforcer::Poll(
    uint64_t now_ns, const std::map<std::string, PodRef>& pods,
    const std::map<std::string, std::map<uint32_t, double>>& sm) {
  registry_->Add("fracgpu_enforcement_polls_total", {});
  enforce::Observation obs;
  obs.now_ns = now_ns;
  std::set<std::string> managed;
  std::map<std::string, std::string> dir_of;  // "<uid>/<container>" → dir name
  std::map<std::string, std::vector<std::string>> containers_of_pod;
  bool dra_claims = false;  // a DRA claim's limits file (claim_<claim UID>: no pod UID in it)

  // Containers with fracgpu limits.
  const std::string limits_dir = api::HostLimitsDir(options_.hook_path);
  if (DIR* d = ::opendir(limits_dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string file = e->d_name;
      const std::string_view slot = api::SlotFromLimitsFileName(file);
      if (slot.empty()) continue;
      auto parsed = ParseContainerDirName(std::string(slot));
      if (!parsed.ok()) continue;
      enforce::ContainerState c;
      c.id = {parsed->pod_uid, parsed->container};
      std::vector<std::string> uuids;
      auto text = ReadLimitsText(api::JoinHostPath(limits_dir, file));
      if (!text.ok()) {
        c.limits_ok = false;
        c.limits_error = text.status().message();
      } else {
        auto config = std::make_unique<vgpu::Config>();
        vgpu::ParseLimitsFile(config.get(), text->data(), text->size());
        vgpu::FinishConfig(config.get());
        // Inner empty entries keep their index (a device's position); a trailing comma adds none.
        uuids = base::SplitComma(config->visible_devices, {.drop_trailing_empty = true});
        if (config->error_count > 0) {
          c.limits_ok = false;
          c.limits_error = config->error;
        } else if (uuids.empty()) {
          c.limits_ok = false;
          c.limits_error = "NVIDIA_VISIBLE_DEVICES names no GPU";
        }
        for (size_t i = 0; i < uuids.size() && i < static_cast<size_t>(vgpu::kMaxDevices); ++i) {
          bool fail_closed = false;
          c.memory_limit_bytes[uuids[i]] =
              vgpu::EffectiveMemoryLimit(*config, static_cast<int>(i), &fail_closed);
          c.sm_limit_percent[uuids[i]] = vgpu::EffectiveSmLimit(*config, static_cast<int>(i));
          managed.insert(uuids[i]);
        }
      }
      std::string& last = last_limits_error_[parsed->name];
      if (!c.limits_ok && last != c.limits_error)
        spdlog::warn("limits of {}: {}", parsed->name, c.limits_error);
      last = c.limits_ok ? "" : c.limits_error;
      auto claims =
          enforce::ReadRegionClaims(api::HostRegionFile(options_.hook_path, parsed->name), uuids);
      if (claims.ok()) {
        c.claims = std::move(*claims);
        for (const auto& [uuid, _] : c.claims) managed.insert(uuid);
      } else if (claims.status().code() != StatusCode::kNotFound) {
        c.region_ok = false;  // zeroed, truncated, foreign: the tenant's region cannot be trusted
        c.region_error = claims.status().message();
      }
      auto pod = pods.find(c.id.pod_uid);
      enforce::Action a;
      if (pod != pods.end() && !pod->second.enforcement.empty() &&
          enforce::ParseAction(pod->second.enforcement, &a))
        c.memory_action = a;
      containers_of_pod[c.id.pod_uid].push_back(c.id.container);
      if (c.id.pod_uid == kDraClaimSlot) dra_claims = true;
      obs.containers.push_back(std::move(c));
    }
    ::closedir(d);
  }

  // The driver's account.
  std::vector<std::string> errors;
  auto gpus = processes_->Sample(&errors);
  std::string nvml_error = gpus.ok() ? "" : gpus.status().message();
  for (const auto& e : errors) nvml_error += (nvml_error.empty() ? "" : "; ") + e;
  if (!nvml_error.empty()) {
    registry_->Add("fracgpu_monitor_errors_total", {{"source", "nvml_processes"}});
    if (nvml_error != last_nvml_error_)
      spdlog::warn("enforcement: NVML: {} (still polling)", nvml_error);
  } else if (!last_nvml_error_.empty()) {
    spdlog::info("enforcement: NVML answers again");
  }
  last_nvml_error_ = nvml_error;
  if (!gpus.ok()) return {};
  obs.gpus = std::move(*gpus);

  // Host PID → container, for processes on managed GPUs only.
  std::set<enforce::ContainerId> known;
  for (const auto& c : obs.containers) known.insert(c.id);
  for (auto& g : obs.gpus) {
    g.managed = managed.count(g.uuid) > 0;
    if (!g.managed) continue;
    if (auto u = sm.find(g.uuid); u != sm.end()) g.sm_utilization = u->second;
    for (const auto& p : g.processes) {
      if (obs.owners.count(p.host_pid) || obs.exited.count(p.host_pid)) continue;
      auto id = resolver_.Resolve(p.host_pid);
      if (!id.ok()) {
        // Gone between NVML and /proc (exited mid-poll), or not a Kubernetes container.
        if (!reader_.StartTime(p.host_pid).ok()) obs.exited.insert(p.host_pid);
        continue;
      }
      const std::optional<std::string> name = NamedContainer(id->cgroup, pods);
      std::string container = name.value_or("");
      const bool named = name.has_value();  // the API server named the container
      // A pod container fracgpu gave no GPU, for sure: its pod has no fracgpu container at all,
      // or the API server names it and it has no limits file. DRA claims' limits files do not
      // name their pod, so with any on the node only the second case is sure.
      const bool pod_has_slices = containers_of_pod.count(id->cgroup.pod_uid) > 0;
      if ((!pod_has_slices && !dra_claims) ||
          (named && !known.count(enforce::ContainerId{id->cgroup.pod_uid, container}))) {
        obs.foreign_pod_processes[p.host_pid] = id->start_time;
        continue;
      }
      if (container.empty()) {
        // Without the pod's status: a pod with a single fracgpu container is unambiguous.
        auto c = containers_of_pod.find(id->cgroup.pod_uid);
        if (c != containers_of_pod.end() && c->second.size() == 1) container = c->second.front();
      }
      if (container.empty()) continue;
      enforce::ContainerId cid{id->cgroup.pod_uid, container};
      if (!known.count(cid)) continue;
      obs.owners[p.host_pid] = enforce::ProcessOwner{cid, id->start_time};
    }
  }
  resolver_.Sweep();

  std::vector<enforce::Finding> findings = enforcer_.Evaluate(obs);
  for (const auto& f : findings)
    if (f.new_episode || f.action == enforce::Action::kKill) Act(f, pods);
  return findings;
}

void NodeEnforcer::Act(const enforce::Finding& f, const std::map<std::string, PodRef>& pods) {
  const char* reason = enforce::ReasonName(f.reason);
  std::string outcome;
  bool killed = false;
  if (f.action == enforce::Action::kKill) {
    Status st = enforce::KillIfSame(reader_, f.pid, f.start_time);
    if (st.ok()) {
      killed = true;
      registry_->Add("fracgpu_enforcement_kills_total", {{"reason", reason}});
      outcome = "; killed pid " + std::to_string(f.pid);
      spdlog::warn("enforcement: killed pid {}: {}", f.pid, f.Describe());
    } else if (st.code() != StatusCode::kNotFound) {
      outcome = "; kill failed: " + st.message();
      spdlog::error("enforcement: cannot kill pid {}: {}", f.pid, st.ToString());
    }
  }
  if (!f.new_episode) return;
  registry_->Add("fracgpu_enforcement_violations_total", {{"reason", reason}});
  std::string message = f.Describe() + outcome;
  spdlog::warn("enforcement: {}", message);
  if (events_ == nullptr || !f.container) return;
  auto pod = pods.find(f.container->pod_uid);
  if (pod == pods.end()) return;  // no API server: log and metric only
  events_->PodWarning(pod->second, EventReason(f.reason, killed), message);
}

}  // namespace fracgpu::monitor
