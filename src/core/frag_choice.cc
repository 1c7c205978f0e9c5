#include "core/frag_choice.h"

#include <algorithm>
#include <cmath>

namespace fracgpu::core {

bool ShapeCounter::Count(int32_t cores_percent, int32_t num_gpus, int64_t cpu_milli) {
  if (cores_percent <= 0 || num_gpus <= 0) return false;
  TaskShape shape;
  shape.cpu_milli = cpu_milli;
  shape.gpu_milli = cores_percent * 10;
  shape.num_gpus = num_gpus;
  ++counts_[shape];
  return true;
}

void ShapeCounter::AddGrants(const PodGrants& grants, int64_t cpu_milli) {
  for (const auto& container : grants) {
    if (container.empty()) continue;
    if (Count(container.front().cores_percent, static_cast<int32_t>(container.size()), cpu_milli))
      cpu_milli = 0;  // the pod's CPU on its first shape only
  }
}

void ShapeCounter::AddRequest(const PodRequest& pod, int64_t cpu_milli) {
  for (const auto& c : pod.containers) {
    if (Count(c.cores_percent, c.num_gpus, cpu_milli)) cpu_milli = 0;
  }
}

std::vector<WeightedShape> ShapeCounter::Workload() const {
  if (counts_.empty()) return {};
  std::vector<ShapeCount> list;
  list.reserve(counts_.size());
  for (const auto& [shape, count] : counts_) list.push_back({shape, count});
  return SelectTargetWorkload(std::move(list), kFragmentationCoveragePercent);
}

FitResult FitFragmentationAware(const PodRequest& req, const NodeState& node,
                                std::vector<WeightedShape> workload, GpuPolicy default_policy,
                                int64_t pod_cpu_milli, int64_t now_unix) {
  FitOptions options;
  options.want_reasons = true;
  options.default_gpu_policy = req.gpu_policy.value_or(default_policy);
  options.now_unix = now_unix;
  if (options.default_gpu_policy != GpuPolicy::kFragmentationAware || workload.empty()) {
    return Fit(req, node, options);
  }
  const FragmentationModel model(std::move(workload), kFragmentationAwarePolicy);
  return FitFragmentationAware(req, node, model, pod_cpu_milli, now_unix);
}

FitResult FitFragmentationAware(const PodRequest& req, const NodeState& node,
                                const FragmentationModel& model, int64_t pod_cpu_milli,
                                int64_t now_unix) {
  FitOptions options;
  options.want_reasons = true;
  options.default_gpu_policy = GpuPolicy::kFragmentationAware;
  options.now_unix = now_unix;
  const FragmentationModel::Orderer orderer(model, pod_cpu_milli);
  options.orderer = &orderer;
  return Fit(req, node, options);
}

std::vector<int64_t> FragmentationPriorities(const PodRequest& req,
                                             std::span<const NodeState* const> nodes,
                                             std::vector<WeightedShape> workload,
                                             int64_t pod_cpu_milli) {
  std::vector<int64_t> out(nodes.size(), 0);
  const FragmentationModel model(std::move(workload), kFragmentationAwarePolicy);
  std::vector<size_t> fitting;
  std::vector<float> scores;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i] == nullptr) continue;
    auto score = model.ScoreNode(req, pod_cpu_milli, *nodes[i]);
    if (!score.ok()) continue;  // does not fit: priority 0
    fitting.push_back(i);
    scores.push_back(static_cast<float>(score->score));
  }
  if (scores.empty()) return out;
  const auto [lo, hi] = std::minmax_element(scores.begin(), scores.end());
  const float min = *lo, max = *hi;
  // One node of the best score, the first by name, gets 10 (FGD's ties go to a fixed node order,
  // docs/design/fgd-evaluation.md §3 point 9, where kube-scheduler would pick among equals at
  // random); the rest 0–9 by min–max normalisation.
  size_t winner = fitting.size();
  for (size_t k = 0; k < fitting.size(); ++k) {
    out[fitting[k]] =
        max == min ? 9 : std::lround(9.0 * (scores[k] - min) / static_cast<double>(max - min));
    if (scores[k] == max &&
        (winner == fitting.size() || nodes[fitting[k]]->name < nodes[fitting[winner]]->name)) {
      winner = k;
    }
  }
  out[fitting[winner]] = 10;
  return out;
}

}  // namespace fracgpu::core
