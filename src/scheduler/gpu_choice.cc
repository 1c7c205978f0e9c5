#include "scheduler/gpu_choice.h"

#include <map>

#include "core/frag_scheduler.h"

namespace fracgpu::scheduler {
namespace {

// Coverage of the target workload, as in the paper's experiments (--pod-popularity-threshold 95).
constexpr double kCoveragePercent = 95.0;

void CountShape(int32_t cores_percent, int32_t num_gpus, std::map<core::TaskShape, int64_t>& counts) {
  if (cores_percent <= 0 || num_gpus <= 0) return;
  core::TaskShape shape;
  shape.gpu_milli = cores_percent * 10;
  shape.num_gpus = num_gpus;
  ++counts[shape];
}

}  // namespace

std::vector<core::WeightedShape> TargetWorkload(const std::vector<PodAllocation>& allocations,
                                                const core::PodRequest& incoming) {
  std::map<core::TaskShape, int64_t> counts;
  for (const auto& a : allocations) {
    for (const auto& container : a.grants) {
      if (container.empty()) continue;
      CountShape(container.front().cores_percent, static_cast<int32_t>(container.size()), counts);
    }
  }
  for (const auto& c : incoming.containers) CountShape(c.cores_percent, c.num_gpus, counts);
  if (counts.empty()) return {};
  std::vector<core::ShapeCount> list;
  list.reserve(counts.size());
  for (const auto& [shape, count] : counts) list.push_back({shape, count});
  return core::SelectTargetWorkload(std::move(list), kCoveragePercent);
}

core::FitResult FitForBind(const core::PodRequest& req, const core::NodeState& node,
                           const ClusterState& state, core::GpuPolicy default_policy) {
  core::FitOptions options;
  options.want_reasons = true;
  options.default_gpu_policy = req.gpu_policy.value_or(default_policy);
  if (options.default_gpu_policy != core::GpuPolicy::kFragmentationAware) {
    return core::Fit(req, node, options);
  }
  std::vector<core::WeightedShape> workload = TargetWorkload(state.Allocations(), req);
  if (workload.empty()) return core::Fit(req, node, options);
  core::FragmentationModel model(std::move(workload));
  core::FragmentationModel::Orderer orderer(model, /*pod_cpu_milli=*/0);
  options.orderer = &orderer;
  return core::Fit(req, node, options);
}

}  // namespace fracgpu::scheduler
