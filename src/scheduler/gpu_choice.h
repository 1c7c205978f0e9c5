#pragma once
// How /bind chooses a pod's GPUs on the chosen node: core fit with the pod's GPU policy.
// For `fragmentation-aware` (FGD, Weng et al., USENIX ATC '23) the GPUs are ordered by the
// fragmentation the placement adds, measured against a target workload built from the pods
// the cluster already holds (the real scheduler has no trace: what is running now is the best
// estimate of what will arrive next).

#include <vector>

#include "core/fit.h"
#include "core/frag.h"
#include "core/node.h"
#include "core/request.h"
#include "scheduler/state.h"

namespace fracgpu::scheduler {

/// Adapter of core/frag_choice.h (the one code path of the fragmentation-aware choice) over the
/// scheduler's ClusterState.
///
/// Target workload M for the fragmentation measure (core::ShapeCounter): one task shape per
/// GPU-using container of every recorded allocation plus the `incoming` pod's containers — per-GPU
/// share in milli-GPU (cores % × 10), number of GPUs, CPU 0 (the scheduler does not track CPU) and
/// any GPU type — weighted by count, the most popular covering ≥ 95 % kept
/// (docs/design/fgd-evaluation.md §3 point 4). Containers without an SM share (cores 0, memory-only
/// slices) are not shapes of the measure. Empty when no container has an SM share.
std::vector<core::WeightedShape> TargetWorkload(const std::vector<PodAllocation>& allocations,
                                                const core::PodRequest& incoming);

/// The target workload /bind measures fragmentation against for `req`: every allocation `state`
/// records plus `req`'s containers (as TargetWorkload, counted in place under the state's lock).
/// Empty when `req`'s GPU policy (else `default_policy`) is not kFragmentationAware: no other
/// policy reads it. The UI's fit preview calls this once per preview and then
/// core::FitFragmentationAware per node, so it picks the GPUs /bind would pick.
std::vector<core::WeightedShape> BindWorkload(const core::PodRequest& req,
                                              const ClusterState& state,
                                              core::GpuPolicy default_policy);

/// Fits `req` on `node` for a bind, with reasons. The GPU policy is the pod's, else
/// `default_policy`; for kFragmentationAware core::FitFragmentationAware over
/// BindWorkload(req, state, default_policy) (spread order when that workload is empty).
core::FitResult FitForBind(const core::PodRequest& req, const core::NodeState& node,
                           const ClusterState& state, core::GpuPolicy default_policy);

}  // namespace fracgpu::scheduler
