#include "scheduler/state.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <exception>

#include "core/node_lock_codec.h"
#include "k8s/gpu_objects.h"
#include "k8s/objects.h"

namespace fracgpu::scheduler {

using nlohmann::json;

Result<std::optional<PodAllocation>> AllocationFromPod(const json& pod) {
  // The GPU resource only decides PodObject::asks_for_gpu, which AllocationFromPod ignores.
  return core::AllocationFromPod(k8s::PodObjectOf(pod, "nvidia.com/gpu"));
}

ClusterState::ClusterState(std::string gpu_resource) : gpu_resource_(std::move(gpu_resource)) {
  model_.SetLogger([](core::LogSeverity severity, std::string_view line) {
    if (severity == core::LogSeverity::kError) {
      spdlog::error("{}", line);
    } else {
      spdlog::warn("{}", line);
    }
  });
}

Status ClusterState::UpsertNode(const json& node) {
  core::NodeObject object;
  try {
    object = k8s::NodeObjectOf(node, gpu_resource_);
  } catch (const std::exception& e) {
    return InvalidArgument("node " + k8s::Name(node) + " not read: " + e.what());
  }
  std::optional<std::chrono::system_clock::time_point> locked;
  if (auto held = k8s::Annotation(node, core::kAnnotationNodeLock); held && !held->empty()) {
    if (auto v = core::DecodeNodeLock(*held); v.ok()) locked = v->time;
  }
  const std::string name = k8s::Name(node);
  std::unique_lock<std::shared_mutex> lock(mu_);
  if (locked) {
    node_locks_[name] = *locked;
    lock_notes_.erase(name);  // the watch shows a lock: it rules from here on
  } else {
    node_locks_.erase(name);  // a note stays: this event may predate the lock it notes
  }
  return model_.UpsertNode(object);
}

void ClusterState::RemoveNode(const std::string& name) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  node_locks_.erase(name);
  lock_notes_.erase(name);
  model_.RemoveNode(name);
}

std::optional<std::chrono::system_clock::time_point> ClusterState::NodeLockTime(
    const std::string& node) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = node_locks_.find(node);
  if (it == node_locks_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::chrono::system_clock::time_point> ClusterState::NodeLockTime(
    const std::string& node, std::chrono::system_clock::time_point now) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  if (auto it = node_locks_.find(node); it != node_locks_.end()) return it->second;
  auto note = lock_notes_.find(node);
  if (note == lock_notes_.end() || now - note->second.noted >= kLockNoteTtl) return std::nullopt;
  return note->second.lock_time;
}

std::map<std::string, std::chrono::system_clock::time_point> ClusterState::NodeLockTimes(
    std::chrono::system_clock::time_point now) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  std::map<std::string, std::chrono::system_clock::time_point> out = node_locks_;
  for (const auto& [node, note] : lock_notes_) {
    if (now - note.noted < kLockNoteTtl) out.emplace(node, note.lock_time);  // the watch's first
  }
  return out;
}

void ClusterState::NoteNodeLock(const std::string& node,
                                std::chrono::system_clock::time_point lock_time,
                                std::chrono::system_clock::time_point now) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  // Expired notes go here, so the map holds at most the nodes noted within the TTL.
  for (auto it = lock_notes_.begin(); it != lock_notes_.end();) {
    it = now - it->second.noted >= kLockNoteTtl ? lock_notes_.erase(it) : std::next(it);
  }
  if (node_locks_.count(node) != 0) return;  // the watch already shows a lock
  lock_notes_[node] = LockNote{lock_time, now};
}

void ClusterState::ForgetNodeLockNote(const std::string& node) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  lock_notes_.erase(node);
}

Status ClusterState::UpsertPod(const json& pod) {
  core::PodObject object;
  try {
    object = k8s::PodObjectOf(pod, gpu_resource_);
  } catch (const std::exception& e) {
    return InvalidArgument("pod " + k8s::Key(pod) + " not read: " + e.what());
  }
  // The bind-phase node lock (PodLock): decided from the pod's annotations, node and phase,
  // as PodObjectOf read them (bind-phase and bind-time are not in it).
  const std::string& uid = object.uid;
  const std::string& key = object.key;
  const std::string& created = object.created;
  const std::optional<std::string> bind_phase = k8s::Annotation(pod, core::kAnnotationBindPhase);
  const bool pending =
      (object.phase.empty() || object.phase == "Pending") && !k8s::IsTerminating(pod);
  std::optional<PodLock> holds;
  bool ends = !pending;
  if (bind_phase) {
    std::string node = object.vgpu_node.value_or("");
    if (pending && *bind_phase == core::kBindPhaseAllocating && !node.empty() &&
        object.node_name == node) {
      int64_t secs = 0;
      const std::string t = k8s::Annotation(pod, core::kAnnotationBindTime).value_or("");
      if (std::from_chars(t.data(), t.data() + t.size(), secs).ec != std::errc()) secs = 0;
      holds =
          PodLock{std::move(node), key,
                  std::chrono::system_clock::time_point(std::chrono::seconds(secs)), true, created};
    } else {
      ends = true;
    }
  }
  std::unique_lock<std::shared_mutex> lock(mu_);
  Status st = model_.UpsertPod(object);
  if (!uid.empty()) {
    // A newer pod of this name (the old one deleted and created again while the watch was
    // away, so no delete event came for it): the old one holds nothing any more. Only newer:
    // a late event of the old pod must not end the new one's hold. (creationTimestamp is
    // RFC 3339 UTC in whole seconds, so the strings order as the times.)
    for (auto it = pod_locks_.begin(); it != pod_locks_.end();) {
      const bool replaced = it->second.key == key && it->first != uid && !created.empty() &&
                            !it->second.created.empty() && it->second.created < created;
      it = replaced ? pod_locks_.erase(it) : std::next(it);
    }
    // An allocation the state does not trust (unsigned, altered) holds no node: a pod's own
    // annotations must not let it keep others off a node.
    if (holds && st.code() != StatusCode::kPermissionDenied) {
      pod_locks_[uid] = std::move(*holds);
    } else if (holds || ends) {
      pod_locks_.erase(uid);
    }
  }
  unverified_.store(model_.unverified_allocations());
  return st;
}

void ClusterState::RemovePod(const json& pod) {
  const std::string uid = k8s::Uid(pod);
  std::unique_lock<std::shared_mutex> lock(mu_);
  pod_locks_.erase(uid);
  model_.Forget(uid);
}

Status ClusterState::Assume(const PodAllocation& allocation) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  return model_.Assume(allocation);
}

void ClusterState::AssumeHostUse(const std::string& uid, const std::string& node, int64_t cpu_milli,
                                 int64_t mem_mib) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  model_.AssumeHostUse(uid, node, cpu_milli, mem_mib);
}

void ClusterState::Forget(const std::string& uid) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  model_.Forget(uid);
}

std::optional<ClusterState::PodLock> ClusterState::PodLockOf(const std::string& node,
                                                             const std::string& except_uid) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  for (const auto& [uid, held] : pod_locks_) {
    if (held.node == node && uid != except_uid) return held;
  }
  return std::nullopt;
}

std::set<std::string> ClusterState::PodLockedNodes() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  std::set<std::string> out;
  for (const auto& [uid, held] : pod_locks_) out.insert(held.node);
  return out;
}

ClusterState::Hold ClusterState::HoldNode(const std::string& uid, PodLock held, PodLock* other) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  if (pod_locks_.count(uid) != 0) return Hold::kAlreadyHolding;
  for (const auto& [holder, h] : pod_locks_) {
    if (h.node == held.node) {
      if (other != nullptr) *other = h;
      return Hold::kHeldByOther;
    }
  }
  held.seen = false;
  pod_locks_.emplace(uid, std::move(held));
  return Hold::kTaken;
}

void ClusterState::ForgetPodLockNote(const std::string& uid, const std::string& node) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  auto it = pod_locks_.find(uid);
  if (it != pod_locks_.end() && !it->second.seen && it->second.node == node) pod_locks_.erase(it);
}
bool ClusterState::ForgetAssumed(const std::string& uid, const std::string& node) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  auto a = model_.Allocation(uid);
  if (!a || !a->assumed || a->node != node) return false;
  model_.Forget(uid);
  return true;
}

std::optional<core::NodeState> ClusterState::Node(const std::string& name) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return model_.Node(name);
}

std::optional<PodAllocation> ClusterState::Allocation(const std::string& uid) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return model_.Allocation(uid);
}

std::vector<PodAllocation> ClusterState::Allocations() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return model_.Allocations();
}

std::vector<core::NodeState> ClusterState::Nodes() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return model_.Nodes();
}

int64_t ClusterState::orphaned_allocations() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return model_.orphaned_allocations();
}

}  // namespace fracgpu::scheduler
