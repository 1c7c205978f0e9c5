#include "core/bind_choice.h"

#include "core/frag_choice.h"

namespace fracgpu::core {

std::vector<WeightedShape> TargetWorkload(const std::vector<PodAllocation>& allocations,
                                          const PodRequest& incoming) {
  ShapeCounter counter;
  for (const auto& a : allocations) counter.AddGrants(a.grants);
  counter.AddRequest(incoming);
  return counter.Workload();
}

std::vector<WeightedShape> BindWorkload(const PodRequest& req, const ClusterState& state,
                                        GpuPolicy default_policy) {
  if (req.gpu_policy.value_or(default_policy) != GpuPolicy::kFragmentationAware) return {};
  // Counted in place: copying every allocation cost 20 ms at 5,000 nodes (bench_frag_bind).
  ShapeCounter counter;
  state.ForEachAllocation([&](const PodAllocation& a) { counter.AddGrants(a.grants); });
  counter.AddRequest(req);
  return counter.Workload();
}

FitResult FitForBind(const PodRequest& req, const NodeState& node, const ClusterState& state,
                     GpuPolicy default_policy) {
  return FitFragmentationAware(req, node, BindWorkload(req, state, default_policy), default_policy);
}

std::optional<std::vector<int64_t>> FragmentationAwarePriorities(
    const PodRequest& req, const std::vector<std::string>& names, const ClusterState& state,
    GpuPolicy default_policy) {
  std::vector<WeightedShape> workload = BindWorkload(req, state, default_policy);
  if (workload.empty()) return std::nullopt;
  std::vector<const NodeState*> nodes;
  nodes.reserve(names.size());
  for (const auto& name : names) nodes.push_back(state.FindNode(name));
  return FragmentationPriorities(req, nodes, std::move(workload));
}

}  // namespace fracgpu::core
