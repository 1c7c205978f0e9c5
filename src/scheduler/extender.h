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
//    fragmentation-aware pod (its GPU policy, else the default) FGD's node score normalised the
//    same way (core::FragmentationAwarePriorities), so the node FGD would choose scores 10.
//  * Bind: node lock (in-process mutex + `hami.io/mutex.lock`), re-check the fit against the
//    current state, choose GPUs by the pod's GPU policy, write the decision annotations and
//    their signature, record the decision in the state, create the Binding. On any failure the
//    annotations, the state and the lock are rolled back and {"Error": …} returned.

#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/request.h"
#include "k8s/client.h"
#include "metrics/registry.h"
#include "scheduler/events.h"
#include "scheduler/extender_args.h"
#include "scheduler/node_lock.h"
#include "scheduler/state.h"

namespace fracgpu::scheduler {

/// Extender settings.
struct ExtenderConfig {
  core::ResourceNames names;
  core::NodePolicy default_node_policy = core::NodePolicy::kBinpack;
  core::GpuPolicy default_gpu_policy = core::GpuPolicy::kSpread;
  std::string signing_key;  ///< HMAC key of the allocation signature (empty = unsigned)
  std::chrono::seconds lock_expiry{300};
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
  /// ExtenderBindingResult ({"Error": ""} on success).
  nlohmann::json Bind(const ExtenderBindingArgs& args);

 private:
  Status BindLocked(const ExtenderBindingArgs& args, const nlohmann::json& pod,
                    const core::PodRequest& req);
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
};

}  // namespace fracgpu::scheduler
