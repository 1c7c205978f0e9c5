#pragma once
// How a bind chooses a pod's GPUs on the chosen node: core fit with the pod's GPU policy.
// For `fragmentation-aware` (FGD, Weng et al., USENIX ATC '23) the GPUs are ordered by the
// fragmentation the placement adds, measured against a target workload built from the pods
// the cluster already holds (the real scheduler has no trace: what is running now is the best
// estimate of what will arrive next). The scheduler's /bind (scheduler/gpu_choice.h, under its
// state's lock) and the UI's fit preview (ui/cluster.h) both call this, so they pick the same GPUs.

#include <optional>
#include <string>
#include <vector>

#include "core/cluster_state.h"
#include "core/fit.h"
#include "core/frag.h"
#include "core/node.h"
#include "core/request.h"

namespace fracgpu::core {

/// Target workload M for the fragmentation measure (core::ShapeCounter, core/frag_choice.h): one
/// task shape per GPU-using container of every allocation in `allocations` plus the `incoming`
/// pod's containers — per-GPU share in milli-GPU (cores % × 10), number of GPUs, the pod's CPU
/// request (PodAllocation::cpu_milli, `incoming_cpu_milli`) on its first shape, any GPU type —
/// weighted by count, the most popular covering
/// ≥ 95 % kept (docs/design/fgd-evaluation.md §3 point 4). Containers without an SM share (cores
/// 0, memory-only slices) are not shapes of the measure. Empty when no container has an SM share.
std::vector<WeightedShape> TargetWorkload(const std::vector<PodAllocation>& allocations,
                                          const PodRequest& incoming,
                                          int64_t incoming_cpu_milli = 0);

/// The target workload a bind measures fragmentation against for `req` (CPU request
/// `req_cpu_milli`): every allocation `state` records plus `req`'s containers (as
/// TargetWorkload, counted in place without copies).
/// Empty when `req`'s GPU policy (else `default_policy`) is not kFragmentationAware: no other
/// policy reads it. The UI's fit preview calls this once per preview and then
/// FitFragmentationAware per node, so it picks the GPUs /bind would pick.
std::vector<WeightedShape> BindWorkload(const PodRequest& req, const ClusterState& state,
                                        GpuPolicy default_policy, int64_t req_cpu_milli = 0);

/// Where the fragmentation-aware policy of the scheduler gets its target workload M and the
/// pod's CPU (issue 34 item 7).
struct FragmentationInputs {
  /// The pod's effective CPU request, millicores (k8s::PodHostRequests): subtracted from the
  /// node's CPU left in the hypothetical placement, and the CPU of its shape in M.
  int64_t pod_cpu_milli = 0;
  /// A fixed M (e.g. the simulator's, selected from a trace by sim::PrepareWorkload) used
  /// instead of BindWorkload when not null and not empty: the same M gives the same placements
  /// as `fracgpu simulate` (tests/scheduler/fragmentation_replay_test.cc).
  const std::vector<WeightedShape>* fixed_workload = nullptr;
  /// Unix seconds now (FitOptions::now_unix): a borrower may use lent memory while the node's
  /// record is fresh (docs/reclaim.md "Lending"); 0 = lent memory never counts.
  int64_t now_unix = 0;
};

/// Fits `req` on `node` for a bind, with reasons. The GPU policy is the pod's, else
/// `default_policy`; for kFragmentationAware FitFragmentationAware over
/// BindWorkload(req, state, default_policy) (spread order when that workload is empty), or
/// `inputs.fixed_workload`, with the pod's CPU `inputs.pod_cpu_milli`.
FitResult FitForBind(const PodRequest& req, const NodeState& node, const ClusterState& state,
                     GpuPolicy default_policy, const FragmentationInputs& inputs = {});

/// /prioritize for `req` over the nodes `names` (in order): when its GPU policy (else
/// `default_policy`) is kFragmentationAware and BindWorkload is not empty, the
/// FragmentationPriorities (0–10) of those nodes in `state` (unknown or GPU-less names score
/// 0), so the one node /prioritize gives 10 is the one FGD would choose and /bind then picks
/// the GPUs on it by the same model; nullopt otherwise (the caller scores by the node policy).
/// With `inputs`, the pod's CPU request and a fixed M as in FitForBind.
std::optional<std::vector<int64_t>> FragmentationAwarePriorities(
    const PodRequest& req, const std::vector<std::string>& names, const ClusterState& state,
    GpuPolicy default_policy, const FragmentationInputs& inputs = {});

}  // namespace fracgpu::core
