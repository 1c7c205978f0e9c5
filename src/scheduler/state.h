#pragma once
// The scheduler's cluster state: per node, the GPUs it registered and the usage promised on
// each, rebuilt from the pods' allocation annotations (docs/design/hami-behaviour.md §3.8), so a
// restart loses nothing: the decision written on the pod is the source of truth.
//
// Rules (docs/design/CONTRACT.md §2):
//  * a node's GPUs count while `hami.io/node-nvidia-register` decodes to ≥ 1 GPU and
//    status.allocatable[nvidia.com/gpu] > 0; `hami.io/device-cordon` cordons GPUs by UUID;
//  * a pod holds usage while it carries `hami.io/vgpu-node` and a decodable
//    `hami.io/vgpu-devices-allocated`, and is neither Succeeded nor Failed nor deleted; its
//    init containers' reservation collapses (core::CollapsePodUsage) and shrinks to the app
//    containers once every init container terminated with exit code 0;
//  * a bind records its decision at once (Assume), before the watch shows the annotations;
//    an older version of the pod arriving later does not erase it.
// Thread-safe: readers take a shared lock, writers an exclusive one.

#include <atomic>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "core/annotations.h"
#include "core/device.h"
#include "core/fit.h"
#include "core/node.h"

namespace fracgpu::scheduler {

/// Node annotations the state reads besides docs/design/CONTRACT.md §2's (core/annotations.h):
/// HAMi's topology scores, and the device cordon of docs/design/CONTRACT.md §1 (UUIDs,
/// comma-separated).
inline constexpr char kAnnotationTopology[] = "hami.io/node-nvidia-score";
inline constexpr char kAnnotationCordon[] = "hami.io/device-cordon";

/// One pod's recorded allocation.
struct PodAllocation {
  std::string key;  ///< "<namespace>/<name>"
  std::string uid;
  std::string node;
  core::PodGrants grants;
  size_t num_init = 0;
  bool init_finished = false;
  bool assumed = false;   ///< recorded by Bind, not yet seen with annotations through the watch
  bool verified = false;  ///< its signature verified (or Bind decided it): the grants are fracgpu's
  bool whole_node =
      false;  ///< unverifiable and nothing verified known: reserves every GPU of `node`
};

/// The cluster state cache. See the file comment.
class ClusterState {
 public:
  explicit ClusterState(std::string gpu_resource = "nvidia.com/gpu");

  /// The HMAC key of `fracgpu.io/allocation-signature` (core/signature.h). With a key, only
  /// allocations whose signature verifies are counted as written; an unsigned, altered or
  /// undecodable one — or a bound pod that asks for `gpu_resource` and carries none — is
  /// counted conservatively (docs/scheduler.md "Accounting only from verified signatures"):
  /// the last verified allocation of the same UID when the state holds one, else every GPU
  /// of the pod's node in full (spec.nodeName when bound). Without a key (unsigned mode)
  /// annotations are trusted. Call before the first UpsertPod.
  void SetSigningKey(std::string key) { signing_key_ = std::move(key); }
  /// Pods counted conservatively since start (unsigned or altered allocations).
  int64_t unverified_allocations() const { return unverified_.load(); }

  /// Node added or changed: decodes its devices (a bad register annotation makes the node
  /// GPU-less and is returned as kInvalidArgument naming the node), cordon list, topology
  /// and allocatable count, then re-applies the usage of its pods.
  Status UpsertNode(const nlohmann::json& node);
  void RemoveNode(const std::string& name);
  /// Pod added or changed (see the rules above). Returns kInvalidArgument for a pod whose
  /// allocation annotation does not decode (ignored in unsigned mode), kPermissionDenied
  /// naming the pod when its allocation does not verify (then counted conservatively; the
  /// caller logs it and records an Event).
  Status UpsertPod(const nlohmann::json& pod);
  void RemovePod(const nlohmann::json& pod);

  /// Records a bind decision at once (see the rules). Errors: kNotFound for an unknown node
  /// or GPU (nothing recorded).
  Status Assume(const PodAllocation& allocation);
  /// Drops a pod's allocation by UID (a failed bind); no-op when absent.
  void Forget(const std::string& uid);

  /// A copy of the node (GPUs with usage) when its GPUs count, else nullopt.
  std::optional<core::NodeState> Node(const std::string& name) const;
  /// Calls fn(name, node) for each named node, in order, under one shared lock (node is
  /// nullptr for a node whose GPUs do not count). For the filter hot path: one hash look-up
  /// per name, no copies; fn must not call back into the state.
  template <typename Fn>
  void ForEachNode(const std::vector<std::string>& names, Fn&& fn) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    for (const auto& name : names) {
      auto it = nodes_.find(name);
      fn(name, it != nodes_.end() && it->second.usable ? &it->second.state : nullptr);
    }
  }
  /// The allocation of a pod, by UID.
  std::optional<PodAllocation> Allocation(const std::string& uid) const;
  /// Every allocation (for metrics and tests).
  std::vector<PodAllocation> Allocations() const;
  /// Calls fn(allocation) for every allocation under one shared lock, without copies (the
  /// fragmentation-aware bind counts their shapes); fn must not call back into the state.
  template <typename Fn>
  void ForEachAllocation(Fn&& fn) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    for (const auto& [uid, a] : pods_) fn(a);
  }
  /// Every usable node (for metrics and tests), sorted by name.
  std::vector<core::NodeState> Nodes() const;
  /// Number of pods whose usage could not be applied (GPU gone from the node).
  int64_t orphaned_allocations() const;

 private:
  struct NodeEntry {
    core::NodeState state;  // GPUs as registered (cordon applied) + usage
    bool usable = false;
  };
  void RebuildNodeLocked(const std::string& name);
  void ApplyLocked(PodAllocation& a, bool add);

  std::string gpu_resource_;
  mutable std::shared_mutex mu_;
  // Hashed: /filter looks up every candidate node (thousands) per request.
  std::unordered_map<std::string, NodeEntry> nodes_;
  std::map<std::string, PodAllocation> pods_;                  // uid → allocation
  std::map<std::string, std::set<std::string>> pods_by_node_;  // node → uids
  std::set<std::string> applied_;                              // uids whose usage is on their node
  int64_t orphaned_ = 0;
  std::string signing_key_;
  std::atomic<int64_t> unverified_{0};
};

/// Decodes a pod's allocation from its annotations; nullopt when it has none (no
/// `hami.io/vgpu-node` or no allocated value). Errors: the allocation does not decode.
Result<std::optional<PodAllocation>> AllocationFromPod(const nlohmann::json& pod);

}  // namespace fracgpu::scheduler
