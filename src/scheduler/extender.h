#pragma once
// The scheduler extender (docs/design/CONTRACT.md §5; docs/design/wire-apis.md §4): /filter,
// /prioritize, /bind over the cluster state, calling the same request parser (core/request.h) and
// fit (core/fit.h) as the webhook and the simulator.
//
//  * Filter: every candidate node on which the pod fits now, in the form the request came in
//    (NodeNames or full Nodes); FailedNodes gives a reason per node that does not fit (HAMi's
//    "<cnt>/<total> <Reason>" summary), FailedAndUnresolvableNodes one per node with no GPUs.
//    A pod that uses no fracgpu resource passes with every node.
//  * Prioritize: core::PriorityScores of the pod's node policy (0–10); for a
//    fragmentation-aware pod (its GPU policy, else the default) the node score of FGD+CpuRoute
//    normalised the same way (core::FragmentationAwarePriorities), so the node FGD+CpuRoute
//    would choose scores 10: with the pod's CPU request (k8s::PodHostRequests) and each node's
//    allocatable CPU less its pods' requests (the state's NodeState::cpu_milli_*), the inputs
//    the simulator's run of the policy reads.
//  * Bind: one bind per pod at a time (a second call for a pod whose bind is in flight is a
//    conflict and changes nothing); refuses a pod of another scheduler (spec.schedulerName),
//    and a node that does not exist or fails the pod's own node predicates (spec.nodeSelector,
//    required node affinity); then node lock (in-process mutex + `hami.io/mutex.lock`),
//    re-check the fit against the current state, choose GPUs by the pod's GPU policy, write the
//    decision annotations and their signature (a merge patch carrying the pod's
//    resourceVersion as read), record the decision in the state, create the Binding with the
//    pod's UID as precondition (Binding metadata.uid). On any failure the annotations (only
//    while the pod is still as this bind left it), the state and the lock are rolled back and
//    {"Error": …} returned.

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>

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

/// Extender settings.
struct ExtenderConfig {
  core::ResourceNames names;
  core::NodePolicy default_node_policy = core::NodePolicy::kBinpack;
  core::GpuPolicy default_gpu_policy = core::GpuPolicy::kSpread;
  std::string signing_key;  ///< HMAC key of the allocation signature (empty = unsigned)
  std::chrono::seconds lock_expiry{300};
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
  /// HostPriorityList for decoded args.
  nlohmann::json Prioritize(const ExtenderArgs& args) const;
  /// ExtenderBindingResult ({"Error": ""} on success). Counted in fracgpu_binds_total by
  /// result: ok, conflict (bind in flight, already bound, node locked, stale pod), unfit,
  /// refused (another scheduler's pod, a node failing the pod's predicates or missing), error.
  nlohmann::json Bind(const ExtenderBindingArgs& args);

 private:
  Status BindLocked(const ExtenderBindingArgs& args, const nlohmann::json& pod,
                    const core::PodRequest& req);
  // Claims pod `key` for one bind; false when a bind of it is in flight.
  bool ClaimPod(const std::string& key);
  void ReleasePod(const std::string& key);
  Status WriteAllowed() const;
  std::mutex& NodeMutex(const std::string& node);
  void Count(const std::string& result) const;

  ExtenderConfig config_;
  ClusterState* state_;
  k8s::Client* client_;
  EventRecorder* events_;
  metrics::Registry* metrics_;
  base::Clock* clock_;
  std::unique_ptr<NodeLocker> locker_;
  std::mutex mutexes_mu_;
  std::map<std::string, std::unique_ptr<std::mutex>> node_mutexes_;
  std::mutex binding_mu_;
  std::mutex quota_mu_;            // a quota check and the Assume it allows, across nodes
  std::set<std::string> binding_;  // "<namespace>/<name>" of the pods being bound
};

}  // namespace fracgpu::scheduler
