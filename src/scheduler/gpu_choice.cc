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

std::vector<core::WeightedShape> BindWorkload(const core::PodRequest& req,
                                              const ClusterState& state,
                                              core::GpuPolicy default_policy) {
  if (req.gpu_policy.value_or(default_policy) != core::GpuPolicy::kFragmentationAware) return {};
  // Counted in place under the state's lock: copying every allocation cost 20 ms at 5,000
  // nodes (bench_frag_bind).
  core::ShapeCounter counter;
  state.ForEachAllocation([&](const PodAllocation& a) { counter.AddGrants(a.grants); });
  counter.AddRequest(req);
  return counter.Workload();
}

core::FitResult FitForBind(const core::PodRequest& req, const core::NodeState& node,
                           const ClusterState& state, core::GpuPolicy default_policy) {
  return core::FitFragmentationAware(req, node, BindWorkload(req, state, default_policy),
                                     default_policy);
}

}  // namespace fracgpu::scheduler
