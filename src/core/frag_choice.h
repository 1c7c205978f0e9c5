#pragma once
// The one code path of the fragmentation-aware GPU choice (`hami.io/gpu-scheduler-policy:
// fragmentation-aware`, GpuPolicy::kFragmentationAware): the scheduler's /bind
// (core/bind_choice.h over ClusterState, under a lock in scheduler/gpu_choice.h), the simulator's
// policy and the UI's policy list all name the same variant, kFragmentationAwarePolicy
// (fgd_policies.h), and this fit.

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "core/fgd_policies.h"
#include "core/fit.h"
#include "core/frag.h"
#include "core/frag_scheduler.h"
#include "core/node.h"
#include "core/request.h"

namespace fracgpu::core {

/// Coverage of the target workload, as in the paper's experiments
/// (--pod-popularity-threshold 95, docs/design/fgd-evaluation.md §3 point 4).
inline constexpr double kFragmentationCoveragePercent = 95.0;

/// Counts the task shapes of what a cluster runs, for the target workload M: one shape per
/// GPU-using container — per-GPU share in milli-GPU (cores % × 10), number of GPUs, any GPU
/// type, and CPU: the pod's effective CPU request (millicores) on its first GPU-using
/// container's shape, 0 on the others (a trace pod has one container, so its shape is the
/// simulator's; issue 34 item 7: before, every shape had CPU 0, the workload's CPU per GPU was
/// 0 and CpuRouteFirst could not tell heavy pods from light ones). Containers without an SM
/// share (cores 0, memory-only slices) are not shapes of the measure.
class ShapeCounter {
 public:
  /// Adds the containers of a recorded allocation (each container's first grant gives the
  /// share), the pod's CPU request `cpu_milli` on the first.
  void AddGrants(const PodGrants& grants, int64_t cpu_milli = 0);
  /// Adds the containers of a request (the incoming pod) with its CPU request.
  void AddRequest(const PodRequest& pod, int64_t cpu_milli = 0);
  /// M: the most popular shapes covering ≥ kFragmentationCoveragePercent % (SelectTargetWorkload);
  /// empty when no container had an SM share.
  std::vector<WeightedShape> Workload() const;

 private:
  // Counts one container's shape; true when it was one (an SM share on ≥ 1 GPU).
  bool Count(int32_t cores_percent, int32_t num_gpus, int64_t cpu_milli);
  std::map<TaskShape, int64_t> counts_;
};

/// Fits `req` on `node` for a bind, with reasons. The GPU policy is the pod's, else
/// `default_policy`; for kFragmentationAware the GPU order comes from a FragmentationModel of
/// kFragmentationAwarePolicy over `workload` (the spread order when `workload` is empty).
/// `pod_cpu_milli` is the pod's CPU request, subtracted from the node's CPU left in the
/// hypothetical placements (0 = not counted). `now_unix`: FitOptions::now_unix (lent memory
/// for a borrower).
FitResult FitFragmentationAware(const PodRequest& req, const NodeState& node,
                                std::vector<WeightedShape> workload, GpuPolicy default_policy,
                                int64_t pod_cpu_milli = 0, int64_t now_unix = 0);

/// The same fit with a prepared model (built once, e.g. the simulator's M from the trace) and
/// the pod's CPU request in milli-CPU, subtracted from the node's CPU left in the hypothetical
/// placements as the paper does. Always uses the fragmentation-aware GPU order, whatever the
/// pod's own policy. `now_unix`: FitOptions::now_unix (lent memory for a borrower).
FitResult FitFragmentationAware(const PodRequest& req, const NodeState& node,
                                const FragmentationModel& model, int64_t pod_cpu_milli,
                                int64_t now_unix = 0);

/// The extender's /prioritize scores (0–10, docs/design/CONTRACT.md §5) of a
/// fragmentation-aware pod, one per entry of `nodes` (nullptr: not a GPU node). On each node
/// where `req` fits, FragmentationModel(workload, kFragmentationAwarePolicy)::ScoreNode gives
/// the policy's node score s (FGD+CpuRoute: int(sigmoid(ΔF / 1000) × 70), ΔF the fragmentation
/// the placement of the pod with its CPU request `pod_cpu_milli` removes, plus 71 on nodes
/// CpuRouteFirst prefers: the node keeps the CPU its free GPUs need, read from the node's
/// allocatable CPU minus its pods' requests — every node where CPU is not tracked); the
/// priority is round(9 × (s − min) / (max − min)) over the fitting
/// nodes (9 when all are equal), except that the first node by name among those with the best s
/// gets 10: FGD breaks ties by a fixed node order (docs/design/fgd-evaluation.md §3 point 9:
/// random tie-breaking, what kube-scheduler does among equal totals, costs FGD ~5 points).
/// 0 where the pod does not fit. `workload` must not be empty (with no shape in M every ΔF is
/// 0; the caller then scores by the node policy).
std::vector<int64_t> FragmentationPriorities(const PodRequest& req,
                                             std::span<const NodeState* const> nodes,
                                             std::vector<WeightedShape> workload,
                                             int64_t pod_cpu_milli = 0);

}  // namespace fracgpu::core
