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
  // Counted in place under the state's lock: copying every allocation cost 20 ms at 5,000
  // nodes (bench_frag_bind).
  core::ShapeCounter counter;
  state.ForEachAllocation([&](const PodAllocation& a) { counter.AddGrants(a.grants); });
  counter.AddRequest(req);
  return core::FitFragmentationAware(req, node, counter.Workload(), default_policy);
}

}  // namespace fracgpu::scheduler
