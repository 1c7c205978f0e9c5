#include "core/frag_choice.h"

#include "core/frag_scheduler.h"

namespace fracgpu::core {

void ShapeCounter::Count(int32_t cores_percent, int32_t num_gpus) {
  if (cores_percent <= 0 || num_gpus <= 0) return;
  TaskShape shape;
  shape.gpu_milli = cores_percent * 10;
  shape.num_gpus = num_gpus;
  ++counts_[shape];
}

void ShapeCounter::AddGrants(const PodGrants& grants) {
  for (const auto& container : grants) {
    if (container.empty()) continue;
    Count(container.front().cores_percent, static_cast<int32_t>(container.size()));
  }
}

void ShapeCounter::AddRequest(const PodRequest& pod) {
  for (const auto& c : pod.containers) Count(c.cores_percent, c.num_gpus);
}

std::vector<WeightedShape> ShapeCounter::Workload() const {
  if (counts_.empty()) return {};
  std::vector<ShapeCount> list;
  list.reserve(counts_.size());
  for (const auto& [shape, count] : counts_) list.push_back({shape, count});
  return SelectTargetWorkload(std::move(list), kFragmentationCoveragePercent);
}

FitResult FitFragmentationAware(const PodRequest& req, const NodeState& node,
                                std::vector<WeightedShape> workload, GpuPolicy default_policy) {
  FitOptions options;
  options.want_reasons = true;
  options.default_gpu_policy = req.gpu_policy.value_or(default_policy);
  if (options.default_gpu_policy != GpuPolicy::kFragmentationAware || workload.empty()) {
    return Fit(req, node, options);
  }
  const FragmentationModel model(std::move(workload), kFragmentationAwarePolicy);
  const FragmentationModel::Orderer orderer(model, /*pod_cpu_milli=*/0);
  options.orderer = &orderer;
  return Fit(req, node, options);
}

}  // namespace fracgpu::core
