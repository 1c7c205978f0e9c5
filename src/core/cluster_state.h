#pragma once
// The cluster model the scheduler, and the UI's fit preview, decide on: per node, the GPUs it
// registered and the usage promised on each, rebuilt from the pods' allocation annotations
// (docs/design/hami-behaviour.md §3.8), so a restart loses nothing: the decision written on the
// pod is the source of truth.
//
// Rules (docs/design/CONTRACT.md §2):
//  * a node's GPUs count while `hami.io/node-nvidia-register` decodes to ≥ 1 GPU and
//    status.allocatable[nvidia.com/gpu] > 0; `hami.io/device-cordon` cordons GPUs by UUID;
//  * a pod holds usage while it carries `hami.io/vgpu-node` and a decodable
//    `hami.io/vgpu-devices-allocated`, and is neither Succeeded nor Failed nor deleted; its
//    init containers' reservation collapses (core::CollapsePodUsage) and shrinks to the app
//    containers once every init container terminated with exit code 0;
//  * a bind records its decision at once (Assume), before the watch shows the annotations;
//    an older version of the pod arriving later does not erase it;
//  * accounting is never lower than what pods hold: a GPU that leaves a node's registration
//    while a pod holds usage on it stays as a ghost (GpuState::ghost: unhealthy, cordoned,
//    never chosen) until its last pod ends, and the rest of the pod's allocation stays counted
//    on the GPUs still registered; a restart rebuilding from pods makes the same ghosts;
//  * host CPU and memory (issue 34 item 7): a node's NodeState::cpu_milli_total / mem_mib_total
//    are its status.allocatable cpu (millicores) and memory (MiB), and cpu_milli_used /
//    mem_mib_used the effective requests (PodObject::cpu_milli / mem_mib) of every pod bound
//    there (spec.nodeName, or a bind's Assume until the watch shows it) that is neither
//    Succeeded nor Failed nor deleted, GPU pods or not: what kube-scheduler's NodeResourcesFit
//    counts, so the fragmentation-aware policy (FGD+CpuRoute) reads the CPU the simulator reads.
//
// Pure: it reads the few fields of Node and Pod objects it needs as plain structs (NodeObject,
// PodObject; k8s/gpu_objects.h fills them from the API objects) and reports what it cannot
// count through a log callback. Not thread-safe: scheduler/state.h wraps it in a lock.

#include <cstdint>
#include <functional>
#include <map>
#include <new>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "core/device.h"
#include "core/fit.h"
#include "core/node.h"

namespace fracgpu::core {

/// Node annotations the model reads besides docs/design/CONTRACT.md §2's (core/annotations.h):
/// HAMi's topology scores, and the device cordon of docs/design/CONTRACT.md §1 (UUIDs,
/// comma-separated).
inline constexpr char kAnnotationTopology[] = "hami.io/node-nvidia-score";
inline constexpr char kAnnotationCordon[] = "hami.io/device-cordon";

/// The fields of a Node object the model reads.
struct NodeObject {
  std::string name;                          ///< metadata.name
  std::optional<std::string> node_register;  ///< kAnnotationNodeRegister
  std::optional<std::string> cordon;         ///< kAnnotationCordon
  std::optional<std::string> topology;       ///< kAnnotationTopology
  /// kAnnotationLentMemory (core/lent.h): what the node agent lends to borrowers.
  std::optional<std::string> lent_memory;
  int64_t allocatable_gpus = 0;  ///< status.allocatable[<gpu resource>]
  /// status.allocatable.cpu in millicores (rounded down); 0 when absent or unreadable (the
  /// node's CPU is then not tracked: NodeState::cpu_milli_total 0).
  int64_t allocatable_cpu_milli = 0;
  /// status.allocatable.memory in MiB (bytes / 2^20, rounded down); 0 when absent or unreadable.
  int64_t allocatable_mem_mib = 0;
};

/// The fields of a Pod object the model reads.
struct PodObject {
  std::string key;                       ///< "<namespace>/<name>"
  std::string uid;                       ///< metadata.uid
  std::string phase;                     ///< status.phase
  std::string node_name;                 ///< spec.nodeName; empty when not bound
  std::optional<std::string> vgpu_node;  ///< kAnnotationVgpuNode
  std::optional<std::string> allocated;  ///< kAnnotationVgpuDevicesAllocated
  std::optional<std::string> signature;  ///< kAnnotationAllocationSignature
  size_t num_init_containers = 0;        ///< size of spec.initContainers
  size_t init_statuses = 0;              ///< size of status.initContainerStatuses
  /// Every entry of status.initContainerStatuses has state.terminated.exitCode 0 (an integer).
  bool init_statuses_succeeded = false;
  bool asks_for_gpu = false;  ///< a container lists the GPU resource in its limits or requests
  /// Annotated `fracgpu.io/borrower: "true"` (core::kAnnotationBorrower): its grants are
  /// ordinary usage, reported as borrowed memory (ClusterState::BorrowedMib).
  bool borrower = false;
  /// metadata.creationTimestamp as the API server writes it (RFC 3339 in UTC, seconds,
  /// "2026-12-04T10:00:00Z"); "" when absent.
  std::string created;
  /// The pod's effective CPU request in millicores, as kube-scheduler counts it
  /// (k8s::PodHostRequests: max(app containers + sidecars, each init container) + overhead),
  /// rounded up.
  int64_t cpu_milli = 0;
  /// Its effective memory request in MiB (bytes / 2^20, rounded up).
  int64_t mem_mib = 0;
};

/// One pod's recorded allocation.
struct PodAllocation {
  std::string key;  ///< "<namespace>/<name>"
  std::string uid;
  std::string node;
  PodGrants grants;
  size_t num_init = 0;
  bool init_finished = false;
  bool assumed = false;  ///< recorded by Assume, not yet seen with annotations through the watch
  bool verified =
      false;  ///< its signature verified (or Assume decided it): the grants are fracgpu's
  bool whole_node =
      false;  ///< unverifiable and nothing verified known: reserves every GPU of `node`
  /// The pod's effective CPU request, millicores (PodObject::cpu_milli): the CPU of its shape
  /// in the fragmentation-aware target workload (core/bind_choice.h), and what Assume counts
  /// on the node's CPU until the watch shows the pod bound.
  int64_t cpu_milli = 0;
  int64_t mem_mib = 0;    ///< its effective memory request, MiB (PodObject::mem_mib)
  bool borrower = false;  ///< a borrower pod (PodObject::borrower, PodRequest::borrower)
};

/// Severity of a ClusterState log line.
enum class LogSeverity { kWarning, kError };
/// Receives the lines the model cannot return as a Status (usage not counted or not released).
using LogFn = std::function<void(LogSeverity, std::string_view)>;

/// The cluster model. See the file comment.
class ClusterState {
 public:
  ClusterState() = default;
  /// Copies rebuild the name index (it points into the copied node map).
  ClusterState(const ClusterState& other);
  ClusterState& operator=(const ClusterState& other);
  ClusterState(ClusterState&&) noexcept = default;
  ClusterState& operator=(ClusterState&&) noexcept = default;

  /// The HMAC key of `fracgpu.io/allocation-signature` (core/signature.h). With a key, only
  /// allocations whose signature verifies are counted as written; an unsigned, altered or
  /// undecodable one — or a bound pod that asks for the GPU resource and carries none — is
  /// counted conservatively (docs/scheduler.md "Accounting only from verified signatures"):
  /// the last verified allocation of the same UID when the state holds one, else every GPU
  /// of the pod's node in full (spec.nodeName when bound). Without a key (unsigned mode)
  /// annotations are trusted. Call before the first UpsertPod.
  void SetSigningKey(std::string key) { signing_key_ = std::move(key); }
  /// Migration from HAMi without a drain (docs/hami-migration.md, issue 34 item 3): with a
  /// key and `on`, a pod HAMi placed — an allocation with no signature at all — is adopted
  /// once, when first seen, if CheckHamiAdoption passes against its node as the model holds it
  /// (the device plugin's registration, the usage of every other pod): it is then counted as
  /// written, and the adoption is recorded by UID with the node and the exact annotation, so
  /// the same pod is counted as it is from then on; a later change of its annotations is not
  /// adopted (the adopted allocation keeps counting). A pod that fails the check is counted as
  /// before (its whole node); one whose node is not known yet is checked again when the node
  /// arrives. An allocation carrying a signature that does not verify is never adopted, nor a
  /// pod created at or after `created_before` (RFC 3339 UTC, "2026-12-04T10:00:00Z": the moment
  /// fracgpu's scheduler took over; every pod created since was placed, and signed, by it, so a
  /// tenant who strips the signature of a later pod gains nothing). Off by default. Call
  /// before the first UpsertPod.
  void SetAdoptUnsigned(bool on, std::string created_before) {
    adopt_unsigned_ = on;
    adopt_created_before_ = std::move(created_before);
  }
  /// Pods adopted since start (see SetAdoptUnsigned).
  int64_t adopted_allocations() const { return adopted_count_; }
  /// Where lines about usage that cannot be counted or released go (none by default).
  void SetLogger(LogFn log) { log_ = std::move(log); }
  /// Pods counted conservatively since start (unsigned or altered allocations).
  int64_t unverified_allocations() const { return unverified_; }

  /// Node added or changed: decodes its devices (a bad register annotation makes the node
  /// GPU-less and is returned as kInvalidArgument naming the node), cordon list, topology,
  /// lent-memory record (core/lent.h: NodeState::lent_mib of the registered GPUs it names,
  /// NodeState::lent_at_unix; a record that does not decode lends nothing and is returned as
  /// kInvalidArgument naming the node, the node otherwise counting as usual) and allocatable
  /// count, then re-applies the usage of its pods.
  Status UpsertNode(const NodeObject& node);
  void RemoveNode(const std::string& name);
  /// Pod added or changed (see the rules above). Returns kInvalidArgument for a pod whose
  /// allocation annotation does not decode (ignored in unsigned mode), kPermissionDenied
  /// naming the pod when its allocation does not verify (then counted conservatively; the
  /// caller logs it and records an Event).
  Status UpsertPod(const PodObject& pod) { return UpsertPod(pod, CheckPod(pod)); }
  /// What UpsertPod reads from the pod alone: its allocation decoded (AllocationFromPod) and,
  /// with a signing key, whether its `fracgpu.io/allocation-signature` verifies for the node
  /// it names and that node is the one it is bound to (if bound). Reads only the signing key,
  /// so a caller that guards the state with a lock computes it before taking the lock (the
  /// decode and the HMAC are most of an update's time).
  struct PodCheck {
    Result<std::optional<PodAllocation>> alloc;
    bool verified = false;
  };
  PodCheck CheckPod(const PodObject& pod) const;
  /// UpsertPod with the pod's CheckPod computed beforehand (the same pod, the same key).
  Status UpsertPod(const PodObject& pod, PodCheck check);

  /// Records a bind decision at once (see the rules). Errors: kNotFound for an unknown node
  /// or GPU (nothing recorded).
  Status Assume(const PodAllocation& allocation);
  /// Records at once the CPU and memory of a pod without GPUs that is being bound to `node` (a
  /// GPU pod's come with Assume), so the next decision reads them before the pod's watch event
  /// arrives; the event then finds them in place. Forget undoes it.
  void AssumeHostUse(const std::string& uid, const std::string& node, int64_t cpu_milli,
                     int64_t mem_mib);
  /// Drops a pod's allocation by UID (a deleted pod, a failed bind); no-op when absent.
  void Forget(const std::string& uid);

  /// A copy of the node (GPUs with usage) when its GPUs count, else nullopt.
  std::optional<NodeState> Node(const std::string& name) const;
  /// The node when its GPUs count, else nullptr; valid until the next change of the model.
  const NodeState* FindNode(const std::string& name) const {
    auto it = nodes_.find(name);
    return it != nodes_.end() && it->second.usable ? &it->second.state : nullptr;
  }
  /// Calls fn(names[i], FindNode(names[i])) for every i in order, for thousands of names at
  /// once (/filter, /prioritize): the same answers as FindNode, but the look-ups of a batch of
  /// names are interleaved and each node's record and GPU usage are fetched from memory
  /// before fn reads them. At 15,000 nodes the state (~39 MiB) does not fit the caches and a
  /// look-up one after another waits on 3–4 dependent cache misses per name (bench_filter).
  /// fn must not change the model.
  template <typename Fn>
  void ForEachNode(std::span<const std::string> names, Fn&& fn) const {
    RunPipeline<false>(names, [&](const std::string& name, const NodeEntry* e) {
      fn(name, e != nullptr ? &e->state : nullptr);
    });
  }
  /// ForEachNode for /filter: calls fn(names[i], FindNode(names[i]), summary) where summary is
  /// the node's NodeFitSummary (core/fit.h; nullptr exactly when the node is), kept equal to
  /// SummarizeForFit(*FindNode(names[i])) by every change of the model. Fetches each node's
  /// summary ahead instead of its GPUs: about 3 cache lines a node instead of about 16.
  template <typename Fn>
  void ForEachNodeSummary(std::span<const std::string> names, Fn&& fn) const {
    RunPipeline<true>(names, [&](const std::string& name, const NodeEntry* e) {
      fn(name, e != nullptr ? &e->state : nullptr, e != nullptr ? &e->summary : nullptr);
    });
  }
  /// The allocation of a pod, by UID.
  std::optional<PodAllocation> Allocation(const std::string& uid) const;
  /// The allocation of a pod, by UID, without a copy: nullptr when it has none. Valid until
  /// the state changes.
  const PodAllocation* FindAllocation(const std::string& uid) const;
  /// Every allocation, by UID.
  std::vector<PodAllocation> Allocations() const;
  /// Calls fn(allocation) for every allocation, by UID, without copies.
  template <typename Fn>
  void ForEachAllocation(Fn&& fn) const {
    for (const auto& [uid, a] : pods_) fn(a);
  }
  /// Every usable node, sorted by name.
  std::vector<NodeState> Nodes() const;
  /// MiB borrower pods (PodAllocation::borrower) hold on each GPU, by UUID (their collapsed
  /// usage, core::CollapsePodUsage); GPUs without borrowers are absent. For metrics and the
  /// UI: walks every allocation.
  std::map<std::string, int64_t> BorrowedMib() const;
  /// Times a pod's usage was applied with a ghost GPU (a GPU of its allocation the node does
  /// not register) or could not be applied at all (its allocation does not collapse), since
  /// start; each is logged.
  int64_t orphaned_allocations() const { return orphaned_; }

 private:
  // In this order so that a map node's first lines hold its key, `usable` and the summary's
  // first GPUs (ForEachNodeSummary reads only those).
  struct NodeEntry {
    bool usable = false;
    NodeFitSummary summary;  // SummarizeForFit(state), refreshed by Touch after every change
    NodeState state;         // GPUs as registered (cordon applied) + usage
  };
  // Allocates on 64-byte boundaries, so that a map node's key, `usable` and the summary's
  // first 8 GPUs (bytes 8–176 of the node) take 3 cache lines, not 3 or 4 by where malloc's
  // 16-byte-aligned block falls. Stateless.
  template <typename T>
  struct LineAligned {
    using value_type = T;
    LineAligned() = default;
    template <typename U>
    LineAligned(const LineAligned<U>&) {}  // NOLINT(google-explicit-constructor): rebinding
    T* allocate(size_t n) {
      return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64}));
    }
    void deallocate(T* p, size_t n) { ::operator delete (p, n * sizeof(T), std::align_val_t{64}); }
    template <typename U>
    bool operator==(const LineAligned<U>&) const {
      return true;
    }
  };
  using NodeMap =
      std::unordered_map<std::string, NodeEntry, std::hash<std::string>, std::equal_to<std::string>,
                         LineAligned<std::pair<const std::string, NodeEntry>>>;
  // The flat name index ForEachNode probes: open addressing, linear probing, a power-of-two
  // number of slots at most half full. std::unordered_map (which owns the nodes and keeps
  // their addresses stable) is a linked list per bucket and cannot be probed ahead of use.
  // Hand-written, not absl::node_hash_map (Debian's libabsl-dev 20220623): its prefetch(key)
  // brings only the control bytes and the slot, and its find() must then read the key out of
  // the node, a dependent miss the probe cannot run ahead of. Keeping the full 64-bit hash in
  // the slot lets the probe end in the slot and the node be fetched before the key compare:
  // three stages in flight, not two. The map stays the owner; the index is grown before it is
  // half full and a removal shifts back the rest of its run.
  struct IndexSlot {
    uint64_t hash = 0;
    const NodeMap::value_type* entry = nullptr;  // nullptr: empty slot
  };
  static constexpr size_t kLag = 8;          // names between pipeline stages (ForEachNode)
  static constexpr size_t kRing = 4 * kLag;  // names in flight (a power of two)
  struct Pipeline {
    uint64_t hash[kRing];
    const NodeMap::value_type* candidate[kRing];
    const NodeEntry* entry[kRing];  // nullptr: no such node, or its GPUs do not count
  };
  // A software pipeline, kLag names between stages: name i+3·kLag is hashed and its slot asked
  // for, i+2·kLag probed and its node's record asked for (with the summary's lines when
  // kSummary), i+kLag confirmed and (unless kSummary) its GPUs asked for, and fn(name, entry)
  // runs on name i.
  template <bool kSummary, typename Fn>
  void RunPipeline(std::span<const std::string> names, Fn&& fn) const {
    Pipeline p;
    const size_t n = names.size();
    for (size_t i = 0; i < n + 3 * kLag; ++i) {
      if (i < n) StageHash(p, names[i], i);
      if (i >= kLag && i - kLag < n) StageProbe(p, i - kLag, kSummary);
      if (i >= 2 * kLag && i - 2 * kLag < n) {
        StageConfirm(p, names[i - 2 * kLag], i - 2 * kLag, !kSummary);
      }
      if (i >= 3 * kLag) fn(names[i - 3 * kLag], p.entry[(i - 3 * kLag) % kRing]);
    }
  }
  static uint64_t HashName(std::string_view name) { return std::hash<std::string_view>{}(name); }
  void ReserveIndex(size_t nodes);
  void IndexInsert(const NodeMap::value_type* entry);  // a free slot exists (ReserveIndex)
  void IndexErase(const NodeMap::value_type* entry);   // entry is indexed
  void RebuildIndex(size_t nodes);                     // sized for `nodes`, every map node in
  // The stages of ForEachNode for the name at position i.
  void StageHash(Pipeline& p, const std::string& name, size_t i) const;
  void StageProbe(Pipeline& p, size_t i, bool summary) const;
  void StageConfirm(Pipeline& p, const std::string& name, size_t i, bool gpus) const;
  // Refreshes the entry's summary after its state changed.
  static void Touch(NodeEntry& e) { e.summary = SummarizeForFit(e.state); }
  // Resets the node's usage and re-applies its pods; `previous` = its GPUs before an update.
  void RebuildNode(const std::string& name, const std::vector<GpuState>* previous);
  void Apply(PodAllocation& a, bool add, const std::vector<GpuState>* previous = nullptr);
  void Log(LogSeverity severity, const std::string& line) const {
    if (log_) log_(severity, line);
  }

  // Hashed: /filter looks up every candidate node (thousands) per request.
  NodeMap nodes_;
  std::vector<IndexSlot> index_;               // see IndexSlot; empty or a power of two in size
  std::map<std::string, PodAllocation> pods_;  // uid → allocation
  std::map<std::string, std::set<std::string>> pods_by_node_;  // node → uids
  std::set<std::string> applied_;                              // uids whose usage is on their node
  // Host CPU and memory (see the rules): the request each bound pod holds, by UID, and their
  // sums per node name (kept for nodes not known yet, so a node arriving later starts right).
  struct HostUse {
    std::string node;
    int64_t cpu_milli = 0;
    int64_t mem_mib = 0;
  };
  std::unordered_map<std::string, HostUse> host_;                           // uid → request
  std::unordered_map<std::string, std::pair<int64_t, int64_t>> host_used_;  // node → Σ cpu, mem
  void SetHostUse(const std::string& uid, const std::string& node, int64_t cpu_milli,
                  int64_t mem_mib);
  void DropHostUse(const std::string& uid);
  void AddHostUsed(const std::string& node, int64_t cpu_milli, int64_t mem_mib);
  int64_t orphaned_ = 0;
  std::string signing_key_;
  int64_t unverified_ = 0;
  // Adoption of unsigned (HAMi) allocations, see SetAdoptUnsigned.
  struct Adoption {
    std::string node;
    std::string allocated;  // the annotation as verified
  };
  bool adopt_unsigned_ = false;
  std::string adopt_created_before_;
  int64_t adopted_count_ = 0;
  std::map<std::string, Adoption> adopted_;             // uid → what was verified
  std::map<std::string, PodObject> awaiting_adoption_;  // uid → pod whose node was unknown
  // True when the pod's unsigned allocation `a` is (or now becomes) adopted.
  bool Adopt(const PodObject& pod, const PodAllocation& a);
  LogFn log_;
};

/// The adoption check of an unsigned allocation (ClusterState::SetAdoptUnsigned): OK when the
/// pod carries no signature, was created before `created_before` (see
/// ClusterState::SetAdoptUnsigned), is Running (its kubelet started it, so a device plugin
/// served it), is bound (spec.nodeName) to the node its `hami.io/vgpu-node` names, and `node` (that
/// node as the model holds it, without this pod's usage; nullptr when unknown) registers every
/// GPU the allocation names (not as a ghost) with room for it next to the usage already
/// counted: slots within `count`, memory within the GPU's MiB, cores within `devcore`.
/// Errors: kPermissionDenied naming the pod and the first check that fails (kNotFound when
/// `node` is nullptr).
Status CheckHamiAdoption(const PodObject& pod, const PodAllocation& allocation,
                         const NodeState* node, const std::string& created_before);

/// Decodes a pod's allocation from its annotations; nullopt when it has none (no
/// `hami.io/vgpu-node` or no allocated value). Errors: the allocation does not decode.
Result<std::optional<PodAllocation>> AllocationFromPod(const PodObject& pod);

}  // namespace fracgpu::core
