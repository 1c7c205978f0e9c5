#include "scheduler/gpu_choice.h"

#include "core/frag_choice.h"

namespace fracgpu::scheduler {

std::vector<core::WeightedShape> BindWorkload(const core::PodRequest& req,
                                              const ClusterState& state,
                                              core::GpuPolicy default_policy) {
  if (req.gpu_policy.value_or(default_policy) != core::GpuPolicy::kFragmentationAware) return {};
  return state.Locked([&](const ClusterState::View& v) {
    return core::BindWorkload(req, v.model(), default_policy);
  });
}

core::FitResult FitForBind(const core::PodRequest& req, const core::NodeState& node,
                           const ClusterState& state, core::GpuPolicy default_policy,
                           const core::FragmentationInputs& inputs) {
  // The workload is counted under the state's shared lock; the fit runs on the node copy.
  std::vector<core::WeightedShape> workload;
  if (req.gpu_policy.value_or(default_policy) == core::GpuPolicy::kFragmentationAware) {
    if (inputs.fixed_workload != nullptr && !inputs.fixed_workload->empty()) {
      workload = *inputs.fixed_workload;
    } else {
      workload = state.Locked([&](const ClusterState::View& v) {
        return core::BindWorkload(req, v.model(), default_policy, inputs.pod_cpu_milli);
      });
    }
  }
  return core::FitFragmentationAware(req, node, std::move(workload), default_policy,
                                     inputs.pod_cpu_milli, inputs.now_unix);
}

}  // namespace fracgpu::scheduler
