#pragma once
// The scheduler extender (docs/design/CONTRACT.md §5; docs/design/wire-apis.md §4): /filter,
// /prioritize, /bind over the cluster state, calling the same request parser (core/request.h) and
// fit (core/fit.h) as the webhook and the simulator.
//
//  * Filter: the candidate nodes on which the pod fits now, in the form the request came in
//    (NodeNames or full Nodes); FailedNodes gives a reason per node that does not fit (HAMi's
//    "<cnt>/<total> <Reason>" summary), FailedAndUnresolvableNodes one per node with no GPUs.
//    Of the nodes where a GPU pod fits, only the one Prioritize would score highest (when one
//    node alone has the top score) is answered, and the pod reserved there
//    (ExtenderConfig::filter_returns_every_fitting_node). A pod that uses no fracgpu resource
//    passes with every node.
//  * Prioritize: core::PriorityScores of the pod's node policy (0–10); for a
//    fragmentation-aware pod (its GPU policy, else the default) the node score of FGD+CpuRoute
//    normalised the same way (core::FragmentationAwarePriorities), so the node FGD+CpuRoute
//    would choose scores 10: with the pod's CPU request (k8s::PodHostRequests) and each node's
//    allocatable CPU less its pods' requests (the state's NodeState::cpu_milli_*), the inputs
//    the simulator's run of the policy reads.
//  * Bind: one bind per pod at a time (a second call for a pod whose bind is in flight is a
//    conflict and changes nothing). The pod is read from kube-apiserver's watch cache, never
//    taken from a caller (/filter and /prioritize bodies are not trusted for the grant). Bind
//    refuses a pod of another scheduler (spec.schedulerName), and a node that does not exist or
//    fails the pod's own node predicates (spec.nodeSelector, required node affinity); then node
//    lock (in-process mutex + the node lock of ExtenderConfig::node_lock), re-check the fit against
//    the current state, choose GPUs by the pod's GPU policy, record the decision in the state, and
//    create the Binding carrying the decision annotations and their signature, with the pod's UID
//    and resourceVersion as read as preconditions: the API server binds that version of the pod or
//    nothing. A 409 there for the cache's copy (the cache was behind) undoes the attempt and runs
//    it once more on a quorum read. On any failure the state and the lock are rolled back and
//    {"Error": …} returned.
//  * Reservations (issue 37 item 1): kube-scheduler binds asynchronously, so its next
//    scheduling cycle runs /filter and /prioritize before the previous pod's /bind has
//    recorded anything. /prioritize (and /filter when it answers one node) therefore counts a
//    GPU pod at once, tentatively, on the
//    node it scores highest when that node is the only one with the top score (the extender's
//    weight makes it kube-scheduler's choice, deploy/kube-scheduler.yaml): the GPUs /bind would
//    choose there are Assumed in the state, so the next /filter and /prioritize see them, as
//    kube-scheduler's own assume does for native resources. /bind replaces the reservation
//    with its own decision, on whatever node it names; a failed bind drops it; otherwise it
//    lapses after `reservation_ttl`, or once the watch shows the pod bound or deleted.
//    Accounting may so be higher than the pods hold for a while, never lower. No reservation
//    for a pod that already has an allocation, nor in a namespace with a GPU quota (another
//    pod's reservation must not refuse a bind there).
//  * Busy nodes: under the spread policy (and binpack only with
//    ExtenderConfig::binpack_avoids_busy_nodes), a node that holds a reservation, a bind in
//    flight, or a node lock that has not expired scores 0 and every other node at least 1
//    (nothing is filtered out, though /filter then answers only the top node), so consecutive
//    pods go to the next-best node instead of
//    queuing on one node's lock (binds of one node are serialised: the per-node mutex, then
//    `hami.io/mutex.lock` until the device plugin's Allocate). Binpack with it fills nodes only
//    a few at a time: three pods created together land on two nodes, so by default binpack
//    scores as its policy says and a bind that meets a held lock fails and is retried. Nodes still
//    tied at the top are split (the highest raw score, then the request's order, keeps it; the
//    others one less): kube-scheduler picks at random among equal totals, and so takes the node
//    reserved. The fragmentation-aware policy's scores are left as they are (its placements are
//    compared with the simulator's, bench/cluster/trace.py).

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/bind_choice.h"
#include "core/frag.h"
#include "core/request.h"
#include "k8s/client.h"
#include "metrics/registry.h"
#include "scheduler/events.h"
#include "scheduler/extender_args.h"
#include "scheduler/node_lock.h"
#include "scheduler/quota.h"
#include "scheduler/state.h"

namespace fracgpu::scheduler {

/// Where /bind holds a node from its Binding until the device plugin's Allocate has served the
/// pod, so that the device plugin, which kubelet's Allocate does not tell which pod it is for
/// (v1beta1 AllocateRequest carries device IDs only), finds exactly one pod being bound on its
/// node (docs/scheduler.md "Node lock", docs/design/CONTRACT.md §2).
enum class NodeLockMode {
  /// HAMi's `hami.io/mutex.lock` annotation on the Node, set by /bind and released by the
  /// device plugin: two Node writes a GPU pod, each sent to every watcher of Nodes.
  kAnnotation,
  /// The pod's own `hami.io/bind-phase: allocating`, which the Binding writes anyway and the
  /// device plugin ends (success / failed): a node is held while one of its pods is in that
  /// state (ClusterState::HoldNode), no Node write. Both device plugins, fracgpu's and
  /// HAMi's, find such a pod without a node lock (the only pending pod of the node being
  /// allocated). A `hami.io/mutex.lock` still on the node (HAMi's scheduler, or set before
  /// the switch) is honoured and taken over through kAnnotation's protocol.
  kBindPhase,
};

/// Extender settings.
struct ExtenderConfig {
  core::ResourceNames names;
  core::NodePolicy default_node_policy = core::NodePolicy::kBinpack;
  core::GpuPolicy default_gpu_policy = core::GpuPolicy::kSpread;
  std::string signing_key;  ///< HMAC key of the allocation signature (empty = unsigned)
  /// Expiry of a `hami.io/mutex.lock` (kAnnotation). A pod that holds its node under
  /// kBindPhase holds it until it is served, fails, or ends, never by expiry: another pod bound
  /// next to it could be served the first pod's allocation.
  std::chrono::seconds lock_expiry{300};
  /// Where /bind holds a node until Allocate (NodeLockMode; `--node-lock`).
  NodeLockMode node_lock = NodeLockMode::kAnnotation;
  /// How long a reservation made at /prioritize lasts without a /bind of its pod (see the
  /// file comment). kube-scheduler's bind follows its prioritize within milliseconds unless a
  /// later plugin fails the pod.
  std::chrono::seconds reservation_ttl{30};
  /// Under the binpack node policy, whether busy nodes score 0 as under spread (the file
  /// comment, "Busy nodes"): more pods per second in a burst, but a burst is then spread over
  /// several nodes, not packed. Off by default: binpack packs (`--binpack-avoid-busy-nodes`).
  bool binpack_avoids_busy_nodes = false;
  /// Whether /filter answers every node where a GPU pod fits. Off (the default), it answers
  /// only the node /prioritize would score highest, alone at the top (every fitting node when
  /// none is), and reserves the pod there: kube-scheduler takes a single feasible node without
  /// running its score plugins or calling /prioritize (schedulePod, pkg/scheduler/
  /// schedule_one.go of v1.37.2), and with the extender's weight in deploy/kube-scheduler.yaml
  /// that node is the one it would choose anyway. HAMi's /filter answers one node too. Turn it
  /// on (`--filter-returns-every-fitting-node`) where kube-scheduler's own scores should
  /// weigh, with a lower extender weight.
  bool filter_returns_every_fitting_node = false;
  /// spec.schedulerName of the pods /bind accepts (the profile kube-scheduler runs this
  /// extender in; the webhook sets it on GPU pods).
  std::string scheduler_name = "fracgpu-scheduler";
  /// The Node object /bind checks the pod's node predicates against (an informer's cache);
  /// kNotFound when there is no such node. Empty = GET it from the API server.
  std::function<Result<nlohmann::json>(const std::string& node)> node_lookup;
  /// Asked before every write of /bind (lock, annotations, Binding): an error (e.g. "not the
  /// leader", LeaderElector::CheckLeader) refuses the bind with it. Empty = always allowed.
  std::function<Status()> write_guard;
  /// The namespaces' GPU quotas (scheduler/quota.h; the service's ResourceQuota informer):
  /// /filter fails a node where the pod would pass one (ResourceQuotaNotFit), /bind refuses.
  /// Null = no quotas.
  const QuotaTracker* quotas = nullptr;
  /// Whether a borrower may be placed on lent memory now (docs/reclaim.md "Lending"): the
  /// service's BorrowerGuard::Enforced (scheduler/borrower_guard.h). Empty = never: a borrower
  /// is then placed as an ordinary pod (fail closed).
  std::function<bool()> lending_enforced;
  /// The target workload M of the fragmentation-aware policy (FGD+CpuRoute): empty (the
  /// default) = the shapes of the pods the cluster holds plus the incoming pod
  /// (core::BindWorkload); else this fixed M, e.g. the simulator's from a trace
  /// (sim::PrepareWorkload), so that /prioritize and /bind make the simulator's decisions
  /// (tests/scheduler/fragmentation_replay_test.cc). Not a flag: set by the embedding code.
  std::vector<core::WeightedShape> fragmentation_workload;
};

/// Filter/prioritize/bind. Thread-safe.
class Extender {
 public:
  /// `state` must outlive the extender; `client`, `events`, `metrics` may be null (no bind,
  /// no events, no metrics); `clock` null = real clock.
  Extender(ExtenderConfig config, ClusterState* state, k8s::Client* client, EventRecorder* events,
           metrics::Registry* metrics, base::Clock* clock);

  /// ExtenderFilterResult for decoded args, as JSON text with Go's field names:
  /// {"Nodes": …, "NodeNames": …, "FailedNodes": {name: reason},
  /// "FailedAndUnresolvableNodes": {name: reason}, "Error": ""}. A request that carried
  /// NodeNames (nodeCacheCapable: true) gets NodeNames and Nodes null; one that carried Nodes
  /// gets Nodes — the request's NodeList with only the passing items, each as received — and
  /// NodeNames null. Nodes with no fracgpu GPUs are FailedAndUnresolvableNodes (preemption
  /// cannot help), nodes that are too full FailedNodes. Both lists null and Error set when the
  /// pod's request does not parse. Written straight into a string (no DOM) for NodeNames: at
  /// 5,000 candidate nodes the reply is ~80 KB. Nodes keep the request's order; a node listed
  /// twice is answered twice (the same answer).
  std::string Filter(const ExtenderArgs& args) const;
  /// HostPriorityList for decoded args; reserves the pod on its unique top node and scores
  /// busy nodes low (see the file comment).
  nlohmann::json Prioritize(const ExtenderArgs& args) const;
  /// The node a pod (by UID) is reserved on by /prioritize, or "" (for tests and logs).
  std::string ReservedNode(const std::string& uid) const;
  /// ExtenderBindingResult ({"Error": ""} on success). Counted in fracgpu_binds_total by
  /// result: ok, conflict (bind in flight, already bound, node locked, stale pod), unfit,
  /// refused (another scheduler's pod, a node failing the pod's predicates or missing), error.
  nlohmann::json Bind(const ExtenderBindingArgs& args);

 private:
  // `node_obj`: the Node as the bind just read it from the API server, or null (the node
  // lock's first attempt patches against it).
  // `stale`, when given, is set when the API server refused the Binding with 409 (the pod
  // changed since `pod` was read, or is bound already).
  Status BindLocked(const ExtenderBindingArgs& args, const nlohmann::json& pod,
                    const core::PodRequest& req, const nlohmann::json* node_obj,
                    bool* stale = nullptr);
  // /prioritize's scores of `names` (0–10, in their order; 0 for a node the state does not
  // know, and everywhere for `req` null, a pod that does not parse) and the position in
  // `names` of the node that alone has the top score (none when no node does). Drops the pod's
  // own earlier reservation and, for a GPU pod, reserves it on that node (file comment,
  // "Reservations").
  struct Ranking {
    std::vector<int64_t> scores;
    std::optional<size_t> top;
  };
  Ranking Rank(const nlohmann::json& pod, const core::PodRequest* req,
               const std::vector<std::string>& names) const;
  // Rank's parts, so that the ranking reads the state in one shared section and the
  // reservations' books (pending_mu_, which is never taken inside the state's lock) are read
  // around it. BeginRank, before the state's lock: expired reservations and the pod's own
  // dropped, the nodes of reservations and binds in flight read.
  struct RankStart {
    bool ranks = false;      // a pod that is scored at all (uses GPUs, or FGD)
    bool reserving = false;  // a GPU pod with a UID and an API client: reserved at the top
    bool avoid_busy = false;
    core::NodePolicy policy = core::NodePolicy::kBinpack;
    std::string uid;
    std::chrono::system_clock::time_point now;
    core::FragmentationInputs inputs;
    std::set<std::string> pending_busy;  // nodes of reservations and binds in flight
  };
  RankStart BeginRank(const nlohmann::json& pod, const core::PodRequest* req) const;
  // RankIn: the ranking, inside the state's shared section `v`; when reserving, the top node
  // copied into *reserve_on unless the pod has an allocation already (Rank reserves the pod
  // there after the section).
  Ranking RankIn(const ClusterState::View& v, const RankStart& s, const core::PodRequest* req,
                 const std::vector<std::string>& names,
                 std::optional<core::NodeState>* reserve_on) const;
  // Claims pod `key` (and its UID, when given) for one bind; false when a bind of it is in
  // flight.
  bool ClaimPod(const std::string& key, const std::string& uid);
  void ReleasePod(const std::string& key, const std::string& uid);
  // Whether a bind of the pod with this UID is in flight.
  bool BeingBound(const std::string& uid) const;
  Status WriteAllowed() const;
  bool LendingEnforced() const { return config_.lending_enforced && config_.lending_enforced(); }
  std::mutex& NodeMutex(const std::string& node);
  void Count(const std::string& result) const;
  // Reservations (file comment). All under pending_mu_. At most kMaxReservations at once (a
  // caller posting /filter bodies of made-up pods cannot grow the books, or the walk every
  // /filter makes of them, without bound); past it a pod is answered but not reserved.
  static constexpr size_t kMaxReservations = 4096;
  struct Reservation {
    std::string node;
    std::chrono::system_clock::time_point at;
  };
  // Drops reservations past their TTL or no longer in the state as Assumed on their node.
  void ExpireReservations(std::chrono::system_clock::time_point now) const;
  // Removes pod `uid`'s reservation from the books; its node when it had one. `forget`: drop
  // its Assume from the state too.
  std::optional<std::string> TakeReservation(const std::string& uid, bool forget) const;
  // Reserves `req` (pod `pod`) on node `node_name` when it fits there now; `node`: that node
  // as RankIn copied it (nothing is reserved without it).
  void Reserve(const nlohmann::json& pod, const core::PodRequest& req, const std::string& node_name,
               std::chrono::system_clock::time_point now,
               std::optional<core::NodeState> node) const;
  // The nodes that hold a reservation or a bind in flight (RankStart::pending_busy), a node
  // lock younger than the expiry, or a bind-phase lock (only under that lock mode), the last
  // two read in RankIn's shared section `v`. Rank drops the asking pod's own reservation first.
  std::set<std::string> BusyNodes(const RankStart& s, const ClusterState::View& v) const;
  void AddBusy(const std::string& node, int delta) const;

  ExtenderConfig config_;
  ClusterState* state_;
  k8s::Client* client_;
  EventRecorder* events_;
  metrics::Registry* metrics_;
  base::Clock* clock_;
  std::unique_ptr<NodeLocker> locker_;
  std::mutex mutexes_mu_;
  std::map<std::string, std::unique_ptr<std::mutex>> node_mutexes_;
  mutable std::mutex binding_mu_;       // taken inside pending_mu_ (Reserve), never around it
  std::mutex quota_mu_;                 // a quota check and the Assume it allows, across nodes
  std::set<std::string> binding_;       // "<namespace>/<name>" of the pods being bound
  std::set<std::string> binding_uids_;  // and their UIDs, as the binds were asked
  mutable std::mutex pending_mu_;
  mutable std::map<std::string, Reservation> reservations_;  // by pod UID
  mutable std::map<std::string, int> busy_;  // node → reservations + binds in flight there
};

}  // namespace fracgpu::scheduler
