#include "scheduler/gpu_choice.h"

#include "core/frag_choice.h"

namespace fracgpu::scheduler {

std::vector<core::WeightedShape> TargetWorkload(const std::vector<PodAllocation>& allocations,
                                                const core::PodRequest& incoming) {
  core::ShapeCounter counter;
  for (const auto& a : allocations) counter.AddGrants(a.grants);
  counter.AddRequest(incoming);
  return counter.Workload();
}

core::FitResult FitForBind(const core::PodRequest& req, const core::NodeState& node,
                           const ClusterState& state, core::GpuPolicy default_policy) {
  const core::GpuPolicy policy = req.gpu_policy.value_or(default_policy);
  if (policy != core::GpuPolicy::kFragmentationAware) {
    return core::FitFragmentationAware(req, node, {}, default_policy);
  }
  return core::FitFragmentationAware(req, node, TargetWorkload(state.Allocations(), req),
                                     default_policy);
}

}  // namespace fracgpu::scheduler
