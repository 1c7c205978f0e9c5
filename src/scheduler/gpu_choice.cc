#include "scheduler/gpu_choice.h"

#include "core/frag_choice.h"

namespace fracgpu::scheduler {

std::vector<core::WeightedShape> BindWorkload(const core::PodRequest& req,
                                              const ClusterState& state,
                                              core::GpuPolicy default_policy) {
  if (req.gpu_policy.value_or(default_policy) != core::GpuPolicy::kFragmentationAware) return {};
  return state.Read([&](const core::ClusterState& model) {
    return core::BindWorkload(req, model, default_policy);
  });
}

core::FitResult FitForBind(const core::PodRequest& req, const core::NodeState& node,
                           const ClusterState& state, core::GpuPolicy default_policy) {
  return core::FitFragmentationAware(req, node, BindWorkload(req, state, default_policy),
                                     default_policy);
}

}  // namespace fracgpu::scheduler
