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
  auto lock = WriteLock();
  if (locked) {
    node_locks_[name] = *locked;
    lock_notes_.erase(name);  // the watch shows a lock: it rules from here on
  } else {
    node_locks_.erase(name);  // a note stays: this event may predate the lock it notes
  }
  return model_.UpsertNode(object);
}

void ClusterState::RemoveNode(const std::string& name) {
  auto lock = WriteLock();
  node_locks_.erase(name);
  lock_notes_.erase(name);
  model_.RemoveNode(name);
}

namespace {
// `Lock` of `mu` taken: tried first, and counted in `taken`, and in `waited` when it was held.
template <typename Lock>
Lock Counted(std::shared_mutex& mu, std::atomic<int64_t>& taken, std::atomic<int64_t>& waited) {
  Lock lock(mu, std::try_to_lock);
  taken.fetch_add(1, std::memory_order_relaxed);
  if (!lock.owns_lock()) {
    waited.fetch_add(1, std::memory_order_relaxed);
    lock.lock();
  }
  return lock;
}
}  // namespace

std::shared_lock<std::shared_mutex> ClusterState::ReadLock() const {
  return Counted<std::shared_lock<std::shared_mutex>>(mu_, shared_, shared_waited_);
}

std::unique_lock<std::shared_mutex> ClusterState::WriteLock() const {
  return Counted<std::unique_lock<std::shared_mutex>>(mu_, exclusive_, exclusive_waited_);
}

ClusterState::LockCounts ClusterState::lock_counts() const {
  return {shared_.load(std::memory_order_relaxed), shared_waited_.load(std::memory_order_relaxed),
          exclusive_.load(std::memory_order_relaxed),
          exclusive_waited_.load(std::memory_order_relaxed)};
}

std::optional<std::chrono::system_clock::time_point> ClusterState::NodeLockTime(
    const std::string& node) const {
  auto lock = ReadLock();
  auto it = node_locks_.find(node);
  if (it == node_locks_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::chrono::system_clock::time_point> ClusterState::NodeLockTime(
    const std::string& node, std::chrono::system_clock::time_point now) const {
  auto lock = ReadLock();
  if (auto it = node_locks_.find(node); it != node_locks_.end()) return it->second;
  auto note = lock_notes_.find(node);
  if (note == lock_notes_.end() || now - note->second.noted >= kLockNoteTtl) return std::nullopt;
  return note->second.lock_time;
}

std::map<std::string, std::chrono::system_clock::time_point> ClusterState::View::NodeLockTimes(
    std::chrono::system_clock::time_point now) const {
  std::map<std::string, std::chrono::system_clock::time_point> out = s_.node_locks_;
  for (const auto& [node, note] : s_.lock_notes_) {
    if (now - note.noted < kLockNoteTtl) out.emplace(node, note.lock_time);  // the watch's first
  }
  return out;
}

void ClusterState::NoteNodeLock(const std::string& node,
                                std::chrono::system_clock::time_point lock_time,
                                std::chrono::system_clock::time_point now) {
  auto lock = WriteLock();
  // Expired notes go here, so the map holds at most the nodes noted within the TTL.
  for (auto it = lock_notes_.begin(); it != lock_notes_.end();) {
    it = now - it->second.noted >= kLockNoteTtl ? lock_notes_.erase(it) : std::next(it);
  }
  if (node_locks_.count(node) != 0) return;  // the watch already shows a lock
  lock_notes_[node] = LockNote{lock_time, now};
}

void ClusterState::ForgetNodeLockNote(const std::string& node) {
  auto lock = WriteLock();
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
  // The decode and the signature check before the lock: they read only the pod and the signing
  // key (set before the first UpsertPod), and a writer preempted while holding the lock stalls
  // every reader (docs/performance.md run 15).
  core::ClusterState::PodCheck check = model_.CheckPod(object);
  auto lock = WriteLock();
  Status st = model_.UpsertPod(object, std::move(check));
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
  auto lock = WriteLock();
  pod_locks_.erase(uid);
  model_.Forget(uid);
}

Status ClusterState::Assume(const PodAllocation& allocation) {
  auto lock = WriteLock();
  return model_.Assume(allocation);
}

Status ClusterState::AssumeIfAbsent(const PodAllocation& allocation) {
  auto lock = WriteLock();
  if (model_.FindAllocation(allocation.uid) != nullptr) {
    return Conflict("pod " + allocation.key + " has an allocation already");
  }
  return model_.Assume(allocation);
}

void ClusterState::AssumeHostUse(const std::string& uid, const std::string& node, int64_t cpu_milli,
                                 int64_t mem_mib) {
  auto lock = WriteLock();
  model_.AssumeHostUse(uid, node, cpu_milli, mem_mib);
}

void ClusterState::Forget(const std::string& uid) {
  auto lock = WriteLock();
  model_.Forget(uid);
}

std::optional<ClusterState::PodLock> ClusterState::PodLockOf(const std::string& node,
                                                             const std::string& except_uid) const {
  auto lock = ReadLock();
  for (const auto& [uid, held] : pod_locks_) {
    if (held.node == node && uid != except_uid) return held;
  }
  return std::nullopt;
}

std::set<std::string> ClusterState::PodLockedNodes() const {
  return Locked([](const View& v) { return v.PodLockedNodes(); });
}

std::set<std::string> ClusterState::View::PodLockedNodes() const {
  std::set<std::string> out;
  for (const auto& [uid, held] : s_.pod_locks_) out.insert(held.node);
  return out;
}

ClusterState::Hold ClusterState::HoldNode(const std::string& uid, PodLock held, PodLock* other) {
  auto lock = WriteLock();
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
  auto lock = WriteLock();
  auto it = pod_locks_.find(uid);
  if (it != pod_locks_.end() && !it->second.seen && it->second.node == node) pod_locks_.erase(it);
}
bool ClusterState::ForgetAssumed(const std::string& uid, const std::string& node) {
  auto lock = WriteLock();
  auto a = model_.Allocation(uid);
  if (!a || !a->assumed || a->node != node) return false;
  model_.Forget(uid);
  return true;
}

std::optional<core::NodeState> ClusterState::Node(const std::string& name) const {
  auto lock = ReadLock();
  return model_.Node(name);
}

std::optional<PodAllocation> ClusterState::Allocation(const std::string& uid) const {
  auto lock = ReadLock();
  return model_.Allocation(uid);
}

std::vector<PodAllocation> ClusterState::Allocations() const {
  auto lock = ReadLock();
  return model_.Allocations();
}

std::vector<core::NodeState> ClusterState::Nodes() const {
  auto lock = ReadLock();
  return model_.Nodes();
}

int64_t ClusterState::orphaned_allocations() const {
  auto lock = ReadLock();
  return model_.orphaned_allocations();
}

}  // namespace fracgpu::scheduler
