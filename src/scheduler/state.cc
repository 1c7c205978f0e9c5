#include "scheduler/state.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/strings.h"
#include "core/codec.h"
#include "core/signature.h"
#include "k8s/objects.h"

namespace fracgpu::scheduler {
namespace {

using nlohmann::json;

// The cordon annotation: comma-separated UUIDs, spaces around each trimmed, empty entries dropped.
std::set<std::string> SplitList(const std::string& s) {
  std::vector<std::string> items = base::SplitComma(s, {.trim = " ", .skip_empty = true});
  return {std::make_move_iterator(items.begin()), std::make_move_iterator(items.end())};
}

size_t ListSize(const json& pod, const char* list) {
  if (!pod.contains("spec") || !pod["spec"].is_object()) return 0;
  auto it = pod["spec"].find(list);
  return it != pod["spec"].end() && it->is_array() ? it->size() : 0;
}

// Every init container terminated with exit code 0 (docs/design/hami-behaviour.md §3.8).
bool InitFinished(const json& pod, size_t num_init) {
  if (num_init == 0) return false;
  if (!pod.contains("status") || !pod["status"].is_object()) return false;
  auto it = pod["status"].find("initContainerStatuses");
  if (it == pod["status"].end() || !it->is_array() || it->size() < num_init) return false;
  for (const auto& s : *it) {
    if (!s.is_object() || !s.contains("state") || !s["state"].is_object()) return false;
    auto t = s["state"].find("terminated");
    if (t == s["state"].end() || !t->is_object()) return false;
    auto code = t->find("exitCode");
    if (code == t->end() || !code->is_number_integer() || code->get<int64_t>() != 0) return false;
  }
  return true;
}

// Every GPU of the node in full: all memory and cores on the first container, and one slot
// per split on each (count containers), so nothing else fits on any of them.
core::PodGrants WholeNodeGrants(const core::NodeState& node) {
  int32_t slots = 1;
  for (const auto& g : node.gpus) slots = std::max(slots, g.info.count);
  core::PodGrants grants(static_cast<size_t>(slots));
  for (const auto& g : node.gpus) {
    for (int32_t c = 0; c < std::max(1, g.info.count); ++c) {
      core::DeviceGrant grant;
      grant.uuid = g.info.uuid;
      grant.mem_mib = c == 0 ? g.info.devmem_mib : 0;
      grant.cores_percent = c == 0 ? g.info.devcore : 0;
      grants[static_cast<size_t>(c)].push_back(grant);
    }
  }
  return grants;
}

// A container of the pod lists `resource` in its limits or requests.
bool AsksFor(const json& pod, const std::string& resource) {
  auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->is_object()) return false;
  for (const char* list : {"initContainers", "containers"}) {
    auto cs = spec->find(list);
    if (cs == spec->end() || !cs->is_array()) continue;
    for (const auto& c : *cs) {
      auto res = c.is_object() ? c.find("resources") : c.end();
      if (!c.is_object() || res == c.end() || !res->is_object()) continue;
      for (const char* kind : {"limits", "requests"}) {
        auto m = res->find(kind);
        if (m != res->end() && m->is_object() && m->contains(resource)) return true;
      }
    }
  }
  return false;
}

}  // namespace

Result<std::optional<PodAllocation>> AllocationFromPod(const json& pod) {
  auto node = k8s::Annotation(pod, core::kAnnotationVgpuNode);
  auto allocated = k8s::Annotation(pod, core::kAnnotationVgpuDevicesAllocated);
  if (!node || node->empty() || !allocated) return std::optional<PodAllocation>();
  auto grants = core::DecodePodGrants(*allocated);
  if (!grants.ok()) {
    return grants.status().WithPrefix("pod " + k8s::Key(pod) + ": annotation " +
                                      core::kAnnotationVgpuDevicesAllocated);
  }
  PodAllocation a;
  a.key = k8s::Key(pod);
  a.uid = k8s::Uid(pod);
  a.node = *node;
  a.grants = std::move(*grants);
  a.num_init = std::min(ListSize(pod, "initContainers"), a.grants.size());
  a.init_finished = InitFinished(pod, a.num_init);
  return std::optional<PodAllocation>(std::move(a));
}

ClusterState::ClusterState(std::string gpu_resource) : gpu_resource_(std::move(gpu_resource)) {}

Status ClusterState::UpsertNode(const json& node) {
  std::string name = k8s::Name(node);
  NodeEntry entry;
  entry.state.name = name;
  Status result;
  std::vector<core::DeviceInfo> devices;
  auto reg = k8s::Annotation(node, core::kAnnotationNodeRegister);
  if (reg) {
    auto decoded = core::DecodeNodeRegister(*reg);
    if (decoded.ok()) {
      devices = std::move(*decoded);
    } else {
      result = decoded.status().WithPrefix("node " + name + ": annotation " +
                                           core::kAnnotationNodeRegister);
    }
  }
  std::set<std::string> cordon;
  if (auto c = k8s::Annotation(node, kAnnotationCordon)) cordon = SplitList(*c);
  // One copy of each GPU's registration: the GPU state itself (usage is reset and re-applied
  // by RebuildNodeLocked).
  entry.state.gpus.reserve(devices.size());
  for (auto& d : devices) {
    core::GpuState g;
    g.cordoned = cordon.count(d.uuid) > 0;
    g.info = std::move(d);
    entry.state.gpus.push_back(std::move(g));
  }
  if (auto topo = k8s::Annotation(node, kAnnotationTopology)) {
    auto scores = core::DecodeTopologyScores(*topo);
    if (scores.ok()) entry.state.topology = std::move(*scores);
  }
  entry.usable = !entry.state.gpus.empty() && k8s::NodeAllocatable(node, gpu_resource_) > 0;
  {
    std::unique_lock<std::shared_mutex> lock(mu_);
    nodes_[name] = std::move(entry);
    RebuildNodeLocked(name);
  }
  return result;
}

void ClusterState::RemoveNode(const std::string& name) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  nodes_.erase(name);
  for (const auto& uid : pods_by_node_[name]) applied_.erase(uid);
}

void ClusterState::RebuildNodeLocked(const std::string& name) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return;
  NodeEntry& e = it->second;
  for (auto& g : e.state.gpus) {
    g.used = 0;
    g.used_mem_mib = 0;
    g.used_cores = 0;
  }
  for (const auto& uid : pods_by_node_[name]) {
    applied_.erase(uid);
    auto p = pods_.find(uid);
    if (p != pods_.end()) ApplyLocked(p->second, true);
  }
}

// Adds (or removes) a pod's collapsed usage on its node; tracks which pods are applied so
// add and remove always pair up.
void ClusterState::ApplyLocked(PodAllocation& a, bool add) {
  auto it = nodes_.find(a.node);
  if (add) {
    if (applied_.count(a.uid) || it == nodes_.end()) return;
    if (a.whole_node) {
      a.grants = WholeNodeGrants(it->second.state);  // the node's GPUs as they are now
      a.num_init = 0;
      a.init_finished = false;
    }
    Status st = core::AddPodGrants(it->second.state, a.grants, a.num_init, a.init_finished);
    if (st.ok()) {
      applied_.insert(a.uid);
    } else {
      ++orphaned_;
      spdlog::warn("pod {}: allocation not counted on node {}: {}", a.key, a.node, st.ToString());
    }
  } else {
    if (!applied_.count(a.uid) || it == nodes_.end()) {
      applied_.erase(a.uid);
      return;
    }
    Status st = core::RemovePodGrants(it->second.state, a.grants, a.num_init, a.init_finished);
    if (!st.ok())
      spdlog::error("pod {}: cannot release usage on {}: {}", a.key, a.node, st.ToString());
    applied_.erase(a.uid);
  }
}

Status ClusterState::UpsertPod(const json& pod) {
  std::string uid = k8s::Uid(pod);
  std::string phase = k8s::PodPhase(pod);
  if (phase == "Succeeded" || phase == "Failed") {
    RemovePod(pod);
    return Status::Ok();
  }
  auto alloc = AllocationFromPod(pod);
  std::unique_lock<std::shared_mutex> lock(mu_);
  auto existing = pods_.find(uid);
  Status unverified;
  if (!signing_key_.empty()) {
    // Accounting only from verified signatures (docs/scheduler.md).
    auto node = k8s::Annotation(pod, core::kAnnotationVgpuNode);
    auto allocated = k8s::Annotation(pod, core::kAnnotationVgpuDevicesAllocated);
    auto signature = k8s::Annotation(pod, core::kAnnotationAllocationSignature);
    const std::string bound = k8s::PodNodeName(pod);
    bool claims = node.has_value() || allocated.has_value() || signature.has_value();
    bool verified = alloc.ok() && alloc->has_value() && signature &&
                    core::VerifyAllocation(signing_key_, uid, *node, *allocated, *signature) &&
                    (bound.empty() || bound == *node);
    if (verified) {
      (*alloc)->verified = true;
    } else if (claims || (!bound.empty() && AsksFor(pod, gpu_resource_))) {
      ++unverified_;
      std::string what = !signature ? "carries no valid fracgpu.io/allocation-signature"
                                    : "has an allocation whose signature does not verify";
      if (existing != pods_.end() && (existing->second.verified || existing->second.assumed) &&
          !existing->second.whole_node) {
        // An edit cannot lower the accounting: the last verified allocation stays.
        return PermissionDenied("pod " + k8s::Key(pod) + " " + what +
                                "; still counting its last verified allocation on node " +
                                existing->second.node);
      }
      PodAllocation whole;
      whole.key = k8s::Key(pod);
      whole.uid = uid;
      whole.node = bound;  // spec.nodeName: immutable once bound, unlike the annotations
      whole.whole_node = true;
      if (whole.node.empty()) {
        // Not bound: no kubelet runs it, so no device plugin served it anything.
        if (existing != pods_.end()) {
          ApplyLocked(existing->second, false);
          pods_by_node_[existing->second.node].erase(uid);
          pods_.erase(existing);
        }
        return PermissionDenied("pod " + k8s::Key(pod) + " " + what +
                                " and is not bound to a node; not counted");
      }
      alloc = std::optional<PodAllocation>(std::move(whole));
      unverified = PermissionDenied("pod " + k8s::Key(pod) + " " + what +
                                    "; counted as holding every GPU of node " + (*alloc)->node);
    }
  }
  if (!alloc.ok() || !alloc->has_value()) {
    // An assumed decision survives older versions of the pod that do not show it yet.
    if (existing != pods_.end() && !existing->second.assumed) {
      ApplyLocked(existing->second, false);
      pods_by_node_[existing->second.node].erase(uid);
      pods_.erase(existing);
    }
    return alloc.ok() ? Status::Ok() : alloc.status();
  }
  PodAllocation a = std::move(**alloc);
  if (existing != pods_.end()) {
    PodAllocation& old = existing->second;
    if (a.whole_node && old.whole_node && old.node == a.node) return unverified;
    if (!a.whole_node && !old.whole_node && old.node == a.node && old.grants == a.grants &&
        old.init_finished == a.init_finished && old.num_init == a.num_init) {
      existing->second.assumed = false;
      existing->second.verified = existing->second.verified || a.verified;
      return Status::Ok();
    }
    ApplyLocked(old, false);
    pods_by_node_[old.node].erase(uid);
  }
  pods_by_node_[a.node].insert(uid);
  pods_[uid] = a;
  ApplyLocked(pods_[uid], true);
  return unverified;
}

void ClusterState::RemovePod(const json& pod) { Forget(k8s::Uid(pod)); }

Status ClusterState::Assume(const PodAllocation& allocation) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  auto it = nodes_.find(allocation.node);
  if (it == nodes_.end()) return NotFound("node " + allocation.node + " is not in the cache");
  if (auto old = pods_.find(allocation.uid); old != pods_.end()) {
    ApplyLocked(old->second, false);
    pods_by_node_[old->second.node].erase(allocation.uid);
    pods_.erase(old);
  }
  core::NodeState trial = it->second.state;
  FRACGPU_RETURN_IF_ERROR(
      core::AddPodGrants(trial, allocation.grants, allocation.num_init, allocation.init_finished));
  PodAllocation a = allocation;
  a.assumed = true;
  a.verified = true;  // this scheduler's own decision
  pods_by_node_[a.node].insert(a.uid);
  pods_[a.uid] = a;
  it->second.state = std::move(trial);
  applied_.insert(a.uid);
  return Status::Ok();
}

void ClusterState::Forget(const std::string& uid) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end()) return;
  ApplyLocked(it->second, false);
  pods_by_node_[it->second.node].erase(uid);
  pods_.erase(it);
}

std::optional<core::NodeState> ClusterState::Node(const std::string& name) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end() || !it->second.usable) return std::nullopt;
  return it->second.state;
}

std::optional<PodAllocation> ClusterState::Allocation(const std::string& uid) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end()) return std::nullopt;
  return it->second;
}

std::vector<PodAllocation> ClusterState::Allocations() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  std::vector<PodAllocation> out;
  for (const auto& [uid, a] : pods_) out.push_back(a);
  return out;
}

std::vector<core::NodeState> ClusterState::Nodes() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  std::vector<core::NodeState> out;
  for (const auto& [name, e] : nodes_) {
    if (e.usable) out.push_back(e.state);
  }
  std::sort(out.begin(), out.end(),
            [](const core::NodeState& a, const core::NodeState& b) { return a.name < b.name; });
  return out;
}

int64_t ClusterState::orphaned_allocations() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return orphaned_;
}

}  // namespace fracgpu::scheduler
