#pragma once
// How /bind chooses a pod's GPUs on the chosen node: core/bind_choice.h (the one code path, also
// the UI's fit preview's) over the scheduler's ClusterState, under its shared lock.

#include <vector>

#include "core/bind_choice.h"
#include "core/fit.h"
#include "core/frag.h"
#include "core/node.h"
#include "core/request.h"
#include "scheduler/state.h"

namespace fracgpu::scheduler {

/// core::TargetWorkload (core/bind_choice.h): the target workload M of `allocations` plus
/// `incoming`.
using core::TargetWorkload;

/// core::BindWorkload over the allocations `state` records, counted under its shared lock.
std::vector<core::WeightedShape> BindWorkload(const core::PodRequest& req,
                                              const ClusterState& state,
                                              core::GpuPolicy default_policy);

/// core::FitForBind over `state`'s allocations (the workload counted under its shared lock),
/// with the pod's CPU request and the extender's fixed M, if any (core::FragmentationInputs).
core::FitResult FitForBind(const core::PodRequest& req, const core::NodeState& node,
                           const ClusterState& state, core::GpuPolicy default_policy,
                           const core::FragmentationInputs& inputs = {});

}  // namespace fracgpu::scheduler
