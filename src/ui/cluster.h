#pragma once
// The cluster as the UI shows it: nodes, their GPUs with usage and the slices placed on each,
// read from the API server (nodes and pods) and turned into core::NodeState through the
// scheduler's ClusterState (the same decoding of register, cordon and allocation
// annotations the scheduler uses, docs/design/CONTRACT.md §2).

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/fit.h"
#include "core/request.h"
#include "core/status.h"
#include "k8s/client.h"
#include "scheduler/state.h"

namespace fracgpu::ui {

/// One consistent view of the cluster.
struct ClusterSnapshot {
  std::shared_ptr<const scheduler::ClusterState> state;  ///< GPUs and usage per node
  std::vector<nlohmann::json> nodes;                     ///< the Node objects as listed
};

/// Lists nodes and pods and builds a ClusterSnapshot, at most once per `ttl` (a UI refresh
/// or a burst of previews reuse the same snapshot). Thread-safe.
class ClusterSource {
 public:
  /// `client` is not owned and must outlive this. `ttl` 0 = list on every Get().
  ClusterSource(k8s::Client* client, std::chrono::milliseconds ttl, std::string gpu_resource = "nvidia.com/gpu");
  /// The current snapshot. Errors: those of the list calls (kUnavailable, kPermissionDenied…)
  /// when no snapshot could be made.
  Result<ClusterSnapshot> Get();

 private:
  k8s::Client* client_;
  std::chrono::milliseconds ttl_;
  std::string gpu_resource_;
  std::mutex mu_;
  std::chrono::steady_clock::time_point taken_{};
  std::optional<ClusterSnapshot> cached_;
};

/// The dashboard's JSON (GET /api/cluster): {"nodes": [{name, unschedulable, gpu_ready,
/// gpus: [{uuid, index, type, numa, health, cordoned, count, used, devmem_mib,
/// used_mem_mib, devcore, used_cores, slices: [{pod, namespace, mem_mib, cores}]}]}],
/// "totals": {nodes, gpus, devmem_mib, used_mem_mib}}. Nodes sorted by name; gpu_ready false
/// (and gpus empty) for nodes whose GPUs do not count. Memory in MiB, cores in %.
nlohmann::json ClusterJson(const ClusterSnapshot& snapshot);

/// The options the form offers (part of GET /api/options): the GPU types present (sorted,
/// distinct) and every GPU {uuid, node, type, index}.
nlohmann::json GpuOptionsJson(const ClusterSnapshot& snapshot);

/// The per-node reason of FitPreviewJson for a cordoned node (spec.unschedulable).
inline constexpr char kCordonedNodeReason[] =
    "node is cordoned (spec.unschedulable): no new pods are scheduled there";

/// Where the request fits now: {"fits": bool, "gpus": N, "nodes": M, "total_nodes": T,
/// "message": "fits now: takes G GPU(s) on one node; M nodes of T can take it (N candidate GPUs)" | "fits on no node",
/// "per_node": [{node, fits, gpus: [uuid...] (the GPUs Fit would pick), eligible: [uuid...],
/// reason: HAMi summary, or kCordonedNodeReason}]}. N counts the GPUs that pass every per-GPU
/// check for the first GPU-using container on the nodes where the whole pod fits; M those
/// nodes. A cordoned node (spec.unschedulable) never fits: Kubernetes schedules no new pod
/// there. A pod that uses no GPU gives {"fits": true, "message": "uses no GPU"}.
nlohmann::json FitPreviewJson(const core::PodRequest& request, const ClusterSnapshot& snapshot,
                              const core::FitOptions& options = {});

}  // namespace fracgpu::ui
