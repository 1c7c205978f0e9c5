#pragma once
// The cluster as the UI shows it: nodes, their GPUs with usage and the slices placed on each,
// read from the API server (nodes and pods) and turned into core::NodeState through
// core::ClusterState (core/cluster_state.h, fed by k8s/gpu_objects.h: the same model and decoding
// of register, cordon and allocation annotations the scheduler uses, docs/design/CONTRACT.md §2).

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/cluster_state.h"
#include "core/fit.h"
#include "core/idle_holders.h"
#include "core/request.h"
#include "k8s/client.h"

namespace fracgpu::ui {

struct DraCluster;

/// One consistent view of the cluster.
struct ClusterSnapshot {
  std::shared_ptr<const core::ClusterState> state;  ///< GPUs and usage per node (empty in DRA mode)
  std::vector<nlohmann::json> nodes;                ///< the Node objects as listed
  /// DRA mode only (ui/dra_cluster.h): fracgpu's devices from ResourceSlices and what
  /// allocated ResourceClaims consume; null in extender mode.
  std::shared_ptr<const DraCluster> dra;
  /// Unix seconds (this process's clock) when the lists were read: a GPU's lent memory
  /// (`fracgpu.io/lent-memory`, docs/reclaim.md "Lending") is shown only while its node's
  /// record was fresh then (core::LentFresh); 0 = never shown.
  int64_t listed_unix = 0;
  /// Extender mode: each node's idle-holder record (`fracgpu.io/idle-holders`,
  /// core/idle_holders.h; docs/ui.md "Idle holders"), by node name, as read (a record that does
  /// not parse is left out and logged); shown only while fresh at listed_unix.
  std::map<std::string, core::IdleHolders> idle_holders;
  /// Extender mode: the listed pods' (namespace, name) by metadata.uid, to name an idle holder
  /// to a viewer allowed to see its namespace.
  std::map<std::string, std::pair<std::string, std::string>> pods_by_uid;
};

/// Lists nodes and pods (extender mode) or nodes, ResourceSlices of fracgpu's driver and
/// ResourceClaims (DRA mode) and builds a ClusterSnapshot, at most once per `ttl` (a UI
/// refresh or a burst of previews reuse the same snapshot). Thread-safe.
class ClusterSource {
 public:
  /// `client` is not owned and must outlive this. `ttl` 0 = list on every Get(). `dra_mode`:
  /// read resource.k8s.io/v1 ResourceSlices and ResourceClaims instead of pods' annotations.
  ClusterSource(k8s::Client* client, std::chrono::milliseconds ttl,
                std::string gpu_resource = "nvidia.com/gpu", bool dra_mode = false);
  bool dra_mode() const { return dra_mode_; }
  /// The current snapshot. Errors: those of the list calls (kUnavailable, kPermissionDenied…)
  /// when no snapshot could be made.
  Result<ClusterSnapshot> Get();

 private:
  k8s::Client* client_;
  std::chrono::milliseconds ttl_;
  std::string gpu_resource_;
  bool dra_mode_;
  std::mutex mu_;
  std::chrono::steady_clock::time_point taken_{};
  std::optional<ClusterSnapshot> cached_;
  std::set<std::string> logged_problems_;  ///< DRA problems of the last listing (logged once)
  std::set<std::string> logged_idle_;      ///< unreadable idle-holder records (logged once)
};

/// True when the Node object has spec.unschedulable: true (cordoned).
bool NodeUnschedulable(const nlohmann::json& node);

/// The preview's summary line: "fits now: takes G GPU(s) on one node; M node(s) of T can take
/// it (N candidate GPU(s))", or "fits on no node" (": the cluster has no GPU nodes" when T is 0).
std::string FitMessage(int64_t takes, int64_t fit_nodes, int64_t fit_gpus, size_t total_nodes);

/// The snapshot's Node objects ordered by metadata.name (the dashboard's order in both modes).
/// The pointers point into `snapshot.nodes`.
std::vector<const nlohmann::json*> NodesByName(const ClusterSnapshot& snapshot);

/// Whether the viewer may see the names of the pods of a namespace (UiService decides it with a
/// SubjectAccessReview; docs/ui.md "What a viewer sees of other namespaces"). Null: no namespace.
using NamespaceFilter = std::function<bool(const std::string& ns)>;

/// The dashboard's JSON (GET /api/cluster; DraClusterJson in DRA mode): {"nodes": [{name,
/// unschedulable, gpu_ready, gpus: [{uuid, index, type, numa, health, cordoned, count, used,
/// devmem_mib, used_mem_mib, devcore, used_cores, slices: [{pod, namespace, mem_mib, cores}]}]}],
/// "totals": {nodes, gpus, devmem_mib, used_mem_mib}}. Nodes sorted by name; gpu_ready false
/// (and gpus empty) for nodes whose GPUs do not count. Memory in MiB, cores in %.
///
/// A slice names its pod and namespace only when `visible` allows its namespace (null: none);
/// any other slice is anonymous, {"pod": null, "namespace": null, mem_mib, cores}. Named slices
/// come first, by namespace and pod, then the anonymous ones, largest first
/// (AppendAnonymousSlices): usage figures stay whole and exact, a pod's name is its tenant's.
///
/// Per GPU also "idle_holders": {count, held_mib, longest_idle_s, pods: [{pod, namespace, mib,
/// idle_s}]}: the pods its node's fresh idle-holder record lists on that GPU (none when the
/// record is stale, absent or unreadable; a pod the listing does not hold, deleted since, is left
/// out), idle seconds as of listed_unix. `pods` names only the holders whose namespace `visible`
/// allows (null: none; the count, MiB and longest idle time cover them all).
nlohmann::json ClusterJson(const ClusterSnapshot& snapshot,
                           const NamespaceFilter& visible = nullptr);

/// Appends `anonymous` (slices without pod and namespace) to the array `slices`, ordered by
/// mem_mib then cores, largest first: an order that says nothing of the hidden names.
void AppendAnonymousSlices(nlohmann::json* slices, std::vector<nlohmann::json> anonymous);

/// The namespaces whose pods ClusterJson could name: those of every slice (in DRA mode, of
/// every allocated claim and of every claim a DRA problem names) and of the pods the fresh
/// idle-holder records list; sorted, no "".
std::vector<std::string> NamedNamespaces(const ClusterSnapshot& snapshot);

/// The options the form offers (part of GET /api/options): the GPU types present (sorted,
/// distinct) and every GPU {uuid, node, type, index} (DraGpuOptionsJson in DRA mode).
nlohmann::json GpuOptionsJson(const ClusterSnapshot& snapshot);

/// The per-node reason of FitPreviewJson for a cordoned node (spec.unschedulable).
inline constexpr char kCordonedNodeReason[] =
    "node is cordoned (spec.unschedulable): no new pods are scheduled there";

/// Where the request fits now: {"fits": bool, "gpus": N, "nodes": M, "total_nodes": T,
/// "message": "fits now: takes G GPU(s) on one node; M nodes of T can take it (N candidate GPUs)" |
/// "fits on no node", "per_node": [{node, fits, gpus: [uuid...] (the GPUs /bind would pick on that
/// node: core::BindWorkload, /bind's workload, and core::FitFragmentationAware, with
/// options.default_gpu_policy as the cluster default), eligible: [uuid...],
/// reason: HAMi summary, or kCordonedNodeReason, and for a fragmentation-aware pod priority:
/// the /prioritize score 0–10 of core::FragmentationPriorities over the same workload}]}. N counts
/// the GPUs that pass every per-GPU check for the first GPU-using container on the nodes where the
/// whole pod fits; M those nodes. A cordoned node (spec.unschedulable) never fits: Kubernetes
/// schedules no new pod there. A pod that uses no GPU gives {"fits": true, "message": "uses no
/// GPU"}. Extender mode only: in DRA mode the preview is DraFitPreviewJson. `pod_cpu_milli` is
/// the pod's effective CPU request in millicores (k8s::PodHostRequests), read as the extender's
/// /prioritize and /bind read it (core::FragmentationInputs): the fragmentation-aware policy
/// (FGD+CpuRoute) weighs it against each node's allocatable CPU minus its pods' requests.
nlohmann::json FitPreviewJson(const core::PodRequest& request, const ClusterSnapshot& snapshot,
                              const core::FitOptions& options = {}, int64_t pod_cpu_milli = 0);

}  // namespace fracgpu::ui
