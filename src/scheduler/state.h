#pragma once
// The scheduler's cluster state: core::ClusterState (core/cluster_state.h: the node and pod
// accounting, its rules and docs/design/CONTRACT.md §2) fed with the API objects the informers
// deliver (read by k8s/gpu_objects.h), behind a lock, its log lines sent to spdlog.
// Thread-safe: readers take a shared lock, writers an exclusive one.

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/annotations.h"
#include "core/cluster_state.h"
#include "core/device.h"
#include "core/fit.h"
#include "core/node.h"

namespace fracgpu::scheduler {

using core::kAnnotationCordon;
using core::kAnnotationTopology;

/// One pod's recorded allocation (core/cluster_state.h).
using PodAllocation = core::PodAllocation;

/// The cluster state cache. See the file comment and core::ClusterState for the rules.
class ClusterState {
 public:
  explicit ClusterState(std::string gpu_resource = "nvidia.com/gpu");

  /// The HMAC key of `fracgpu.io/allocation-signature` (core::ClusterState::SetSigningKey).
  /// Call before the first UpsertPod and never after: UpsertPod reads it without the lock
  /// (core::ClusterState::CheckPod).
  void SetSigningKey(std::string key) { model_.SetSigningKey(std::move(key)); }
  /// Adopts the unsigned allocations of pods HAMi placed before `created_before`
  /// (core::ClusterState::SetAdoptUnsigned; docs/hami-migration.md). Call before the first
  /// UpsertPod.
  void SetAdoptUnsigned(bool on, std::string created_before) {
    model_.SetAdoptUnsigned(on, std::move(created_before));
  }
  /// Pods counted conservatively since start (unsigned or altered allocations).
  int64_t unverified_allocations() const { return unverified_.load(); }
  /// Pods HAMi placed that were verified and adopted since start.
  int64_t adopted_allocations() const {
    auto lock = ReadLock();
    return model_.adopted_allocations();
  }

  /// Node added or changed (core::ClusterState::UpsertNode over k8s::NodeObjectOf). An
  /// object that cannot be read (an exception while reading it) is kInvalidArgument, never
  /// thrown: the informer threads call these.
  Status UpsertNode(const nlohmann::json& node);
  void RemoveNode(const std::string& name);
  /// Pod added or changed (core::ClusterState::UpsertPod over k8s::PodObjectOf).
  Status UpsertPod(const nlohmann::json& pod);
  void RemovePod(const nlohmann::json& pod);

  /// Records a bind decision at once (core::ClusterState::Assume). Errors: kNotFound for an
  /// unknown node or GPU (nothing recorded).
  Status Assume(const PodAllocation& allocation);
  /// Assume, unless the pod (allocation.uid) has an allocation already: then kConflict
  /// and nothing changes. The check and the record are one exclusive section (the
  /// extender's reservation, which never moves an allocation).
  Status AssumeIfAbsent(const PodAllocation& allocation);
  /// A pod without GPUs being bound: its CPU and memory counted at once
  /// (core::ClusterState::AssumeHostUse).
  void AssumeHostUse(const std::string& uid, const std::string& node, int64_t cpu_milli,
                     int64_t mem_mib);
  /// Drops a pod's allocation by UID (a failed bind); no-op when absent.
  void Forget(const std::string& uid);
  /// Drops a pod's allocation only while it is still an Assume of `node` that the watch has
  /// not shown (PodAllocation::assumed): the extender's tentative reservation, never an
  /// allocation the pod's annotations carry. Returns whether one was dropped.
  bool ForgetAssumed(const std::string& uid, const std::string& node);

  /// When the node lock `hami.io/mutex.lock` of `node` was taken, as its Node object last
  /// seen (UpsertNode) says; nullopt when not held (or unreadable).
  std::optional<std::chrono::system_clock::time_point> NodeLockTime(const std::string& node) const;
  /// NodeLockTime, or else the time of a lock noted (NoteNodeLock) less than `kLockNoteTtl`
  /// before `now` that the watch has not caught up with yet.
  std::optional<std::chrono::system_clock::time_point> NodeLockTime(
      const std::string& node, std::chrono::system_clock::time_point now) const;
  /// Notes a node lock the API server reported before the watch shows it: the lock a bind
  /// just took, or the one it met (kConflict). `lock_time`: the time in the lock's value. The
  /// note lasts until the node is seen (UpsertNode) holding a lock, or kLockNoteTtl: under a
  /// lagging watch, kube-scheduler was otherwise sent to a locked node again and again
  /// (issue 37 item 1: 40 binds refused on one node in 20 s, its lock unseen).
  void NoteNodeLock(const std::string& node, std::chrono::system_clock::time_point lock_time,
                    std::chrono::system_clock::time_point now);
  /// Drops the note of `node` (the bind that took the lock released it again).
  void ForgetNodeLockNote(const std::string& node);
  /// How long a noted lock counts without the watch showing it (`now` and the note: the
  /// extender's clock).
  static constexpr std::chrono::seconds kLockNoteTtl{5};

  /// A pod that holds its node under the bind-phase node lock (ExtenderConfig::node_lock,
  /// docs/scheduler.md "Node lock"): bound with `hami.io/bind-phase: allocating` and not yet
  /// served by the device plugin's Allocate.
  struct PodLock {
    std::string node;                             ///< `hami.io/vgpu-node`
    std::string key;                              ///< namespace/name
    std::chrono::system_clock::time_point since;  ///< `hami.io/bind-time` (epoch if unreadable)
    bool seen = false;      ///< shown by the watch (else a bind's note, HoldNode)
    std::string created{};  ///< the pod's metadata.creationTimestamp (RFC 3339, UTC seconds)
  };
  /// The pod other than `except_uid` that holds `node` under the bind-phase lock, if any.
  std::optional<PodLock> PodLockOf(const std::string& node, const std::string& except_uid) const;
  /// The nodes some pod holds under the bind-phase lock (few: the pods between their Binding
  /// and their Allocate).
  std::set<std::string> PodLockedNodes() const;
  /// Outcome of HoldNode.
  enum class Hold {
    kTaken,           ///< the note is recorded: `uid` holds the node
    kHeldByOther,     ///< another pod holds the node (`*other`); nothing recorded
    kAlreadyHolding,  ///< `uid` holds a node already; nothing changed
  };
  /// Checks and records, under one lock, that pod `uid` holds `lock.node` from now on, before
  /// the watch shows it (a bind about to write its Binding, under the extender's per-node
  /// mutex). When another pod holds the node: kHeldByOther. When `uid` holds a node already
  /// (the watch shows it being allocated, or an earlier bind of it succeeded and the watch has
  /// not caught up: a repeated bind): kAlreadyHolding. A hold ends when the watch shows the
  /// pod with another bind-phase, in a phase other than Pending, or terminating, when a newer
  /// pod of its name is seen (deleted and created again while the watch was away), when the
  /// pod is removed, or (a note only) at ForgetPodLockNote. A pod seen without any bind-phase
  /// (an event older than its Binding) changes nothing. Holds are taken only from pods bound
  /// to the node they name whose allocation verifies (a pod whose annotations the state does
  /// not trust holds nothing).
  Hold HoldNode(const std::string& uid, PodLock lock, PodLock* other);
  /// Drops `uid`'s hold if it is still a note of `node` the watch has not shown (the bind that
  /// wrote it failed); a hold the watch shows stays.
  void ForgetPodLockNote(const std::string& uid, const std::string& node);

  /// A copy of the node (GPUs with usage) when its GPUs count, else nullopt.
  std::optional<core::NodeState> Node(const std::string& name) const;
  /// The allocation of a pod, by UID.
  std::optional<PodAllocation> Allocation(const std::string& uid) const;
  /// Every allocation (for metrics and tests).
  std::vector<PodAllocation> Allocations() const;
  /// Calls fn(allocation) for every allocation under one shared lock, without copies (the
  /// fragmentation-aware bind counts their shapes); fn must not call back into the state.
  template <typename Fn>
  void ForEachAllocation(Fn&& fn) const {
    auto lock = ReadLock();
    model_.ForEachAllocation(fn);
  }
  /// What a reader sees inside Locked: the core model and the node locks, without taking the
  /// lock again. Each query is the method of the same name of ClusterState.
  class View {
   public:
    const core::ClusterState& model() const { return s_.model_; }
    /// The pod's allocation, or nullptr; valid only inside Locked.
    const PodAllocation* FindAllocation(const std::string& uid) const {
      return s_.model_.FindAllocation(uid);
    }
    /// NodeLockTime(node, now) of every node that has one (for a ranking of many nodes; the
    /// locked nodes are few: the binds in flight).
    std::map<std::string, std::chrono::system_clock::time_point> NodeLockTimes(
        std::chrono::system_clock::time_point now) const;
    std::set<std::string> PodLockedNodes() const;

   private:
    friend class ClusterState;
    explicit View(const ClusterState& s) : s_(s) {}
    const ClusterState& s_;
  };
  /// Returns fn(view) under one shared lock: several reads that see one version of the state
  /// and take the lock once (the /filter path: every acquisition is a chance to wait behind a
  /// writer that was preempted while holding it, docs/performance.md run 15). fn must not call
  /// back into the state.
  template <typename Fn>
  auto Locked(Fn&& fn) const {
    auto lock = ReadLock();
    return fn(static_cast<const View&>(View(*this)));
  }
  /// How often the state's lock was taken, and how often it was already held so that the
  /// caller waited (a reader behind a writer, a writer behind either), since start: the
  /// metrics `fracgpu_state_lock_acquisitions_total` and `fracgpu_state_lock_waits_total`.
  struct LockCounts {
    int64_t shared = 0;
    int64_t shared_waited = 0;
    int64_t exclusive = 0;
    int64_t exclusive_waited = 0;
  };
  LockCounts lock_counts() const;
  /// Every usable node (for metrics and tests), sorted by name.
  std::vector<core::NodeState> Nodes() const;
  /// Number of pods whose usage could not be applied (GPU gone from the node).
  int64_t orphaned_allocations() const;

 private:
  std::string gpu_resource_;
  mutable std::shared_mutex mu_;
  core::ClusterState model_;
  // Node name → when its node lock was taken (only nodes whose lock is held), under mu_.
  std::map<std::string, std::chrono::system_clock::time_point> node_locks_;
  // Node name → a lock noted by NoteNodeLock (its time, when noted), until the watch shows a
  // lock on the node or kLockNoteTtl passes, under mu_.
  struct LockNote {
    std::chrono::system_clock::time_point lock_time;
    std::chrono::system_clock::time_point noted;
  };
  std::map<std::string, LockNote> lock_notes_;
  // Pod UID → the node it holds under the bind-phase lock (PodLock), under mu_.
  std::map<std::string, PodLock> pod_locks_;
  std::atomic<int64_t> unverified_{0};  // model_'s count, readable without the lock
  // mu_ taken, shared or exclusive, and counted (lock_counts): an attempt first, and a wait
  // when it fails.
  std::shared_lock<std::shared_mutex> ReadLock() const;
  std::unique_lock<std::shared_mutex> WriteLock() const;
  mutable std::atomic<int64_t> shared_{0}, shared_waited_{0}, exclusive_{0}, exclusive_waited_{0};
};

/// Decodes a pod's allocation from its annotations (core::AllocationFromPod over
/// k8s::PodObjectOf); nullopt when it has none (no `hami.io/vgpu-node` or no allocated value).
/// Errors: the allocation does not decode.
Result<std::optional<PodAllocation>> AllocationFromPod(const nlohmann::json& pod);

}  // namespace fracgpu::scheduler
