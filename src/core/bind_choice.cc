#include "core/bind_choice.h"

#include "core/frag_choice.h"

namespace fracgpu::core {
namespace {

// The M a fragmentation-aware decision for `req` reads: the fixed one when given, else the
// allocations' (empty when `req` is not fragmentation-aware).
std::vector<WeightedShape> WorkloadFor(const PodRequest& req, const ClusterState& state,
                                       GpuPolicy default_policy,
                                       const FragmentationInputs& inputs) {
  if (req.gpu_policy.value_or(default_policy) != GpuPolicy::kFragmentationAware) return {};
  if (inputs.fixed_workload != nullptr && !inputs.fixed_workload->empty()) {
    return *inputs.fixed_workload;
  }
  return BindWorkload(req, state, default_policy, inputs.pod_cpu_milli);
}

}  // namespace

std::vector<WeightedShape> TargetWorkload(const std::vector<PodAllocation>& allocations,
                                          const PodRequest& incoming, int64_t incoming_cpu_milli) {
  ShapeCounter counter;
  for (const auto& a : allocations) counter.AddGrants(a.grants, a.cpu_milli);
  counter.AddRequest(incoming, incoming_cpu_milli);
  return counter.Workload();
}

std::vector<WeightedShape> BindWorkload(const PodRequest& req, const ClusterState& state,
                                        GpuPolicy default_policy, int64_t req_cpu_milli) {
  if (req.gpu_policy.value_or(default_policy) != GpuPolicy::kFragmentationAware) return {};
  // Counted in place: copying every allocation cost 20 ms at 5,000 nodes (bench_frag_bind).
  ShapeCounter counter;
  state.ForEachAllocation(
      [&](const PodAllocation& a) { counter.AddGrants(a.grants, a.cpu_milli); });
  counter.AddRequest(req, req_cpu_milli);
  return counter.Workload();
}

FitResult FitForBind(const PodRequest& req, const NodeState& node, const ClusterState& state,
                     GpuPolicy default_policy, const FragmentationInputs& inputs) {
  return FitFragmentationAware(req, node, WorkloadFor(req, state, default_policy, inputs),
                               default_policy, inputs.pod_cpu_milli, inputs.now_unix);
}

std::optional<std::vector<int64_t>> FragmentationAwarePriorities(
    const PodRequest& req, const std::vector<std::string>& names, const ClusterState& state,
    GpuPolicy default_policy, const FragmentationInputs& inputs) {
  std::vector<WeightedShape> workload = WorkloadFor(req, state, default_policy, inputs);
  if (workload.empty()) return std::nullopt;
  std::vector<const NodeState*> nodes;
  nodes.reserve(names.size());
  for (const auto& name : names) nodes.push_back(state.FindNode(name));
  return FragmentationPriorities(req, nodes, std::move(workload), inputs.pod_cpu_milli);
}

}  // namespace fracgpu::core
