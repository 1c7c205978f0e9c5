#include "sim/workload.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>

#include "base/strings.h"

namespace fracgpu::sim {

nlohmann::json TracePodSpec(const TracePod& pod) {
  nlohmann::json requests = {{"cpu", std::to_string(pod.cpu_milli) + "m"},
                             {"memory", std::to_string(pod.memory_mib) + "Mi"}};
  nlohmann::json limits = nlohmann::json::object();
  if (pod.num_gpus > 0) {
    const std::string pct = std::to_string(pod.gpu_milli / 10);
    limits["nvidia.com/gpu"] = std::to_string(pod.num_gpus);
    limits["nvidia.com/gpucores"] = pct;
    limits["nvidia.com/gpumem-percentage"] = pct;
  }
  nlohmann::json spec = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", pod.name}, {"annotations", nlohmann::json::object()}}},
      {"spec",
       {{"containers",
         nlohmann::json::array(
             {{{"name", "main"}, {"resources", {{"requests", requests}, {"limits", limits}}}}})}}}};
  if (!pod.gpu_spec.empty()) {
    spec["metadata"]["annotations"]["nvidia.com/use-gputype"] =
        base::Join(core::SplitGpuSpec(pod.gpu_spec), ",");
  }
  return spec;
}

Result<SimWorkload> PrepareWorkload(std::vector<TracePod> pods, const SimCluster& cluster,
                                    double coverage_percent, const std::string& file) {
  if (pods.empty()) return InvalidArgument(file + ": no pods");
  SimWorkload w;
  std::sort(pods.begin(), pods.end(),
            [](const TracePod& a, const TracePod& b) { return a.name < b.name; });
  w.pods = std::move(pods);
  std::map<std::tuple<int32_t, int32_t, std::string>, int32_t> classes;
  std::vector<core::FragDemand> class_demand;
  std::map<core::TaskShape, int64_t> shape_counts;
  for (const TracePod& p : w.pods) {
    const auto key = std::make_tuple(p.num_gpus, p.gpu_milli, p.gpu_spec);
    auto it = classes.find(key);
    if (it == classes.end()) {
      auto req = core::ParsePodRequest(TracePodSpec(p));
      if (!req.ok()) {
        return InvalidArgument(file + ":" + std::to_string(p.line) +
                               ": pod spec: " + req.status().message());
      }
      core::FragDemand d;
      for (const auto& c : req->containers) {
        if (!c.UsesGpu()) continue;
        d.num_gpus = c.num_gpus;
        d.gpu_milli = c.cores_percent * 10;
      }
      d.type_mask = 0;
      for (size_t t = 0; t < cluster.type_table.size(); ++t) {
        if (core::GpuTypeAllowed(*req, cluster.type_table[t])) d.type_mask |= 1ULL << t;
      }
      it = classes.emplace(key, static_cast<int32_t>(w.requests.size())).first;
      w.requests.push_back(std::move(req).value());
      class_demand.push_back(d);
    }
    core::FragDemand d = class_demand[it->second];
    d.cpu_milli = p.cpu_milli;
    d.mem_mib = p.memory_mib;
    w.request_of.push_back(it->second);
    w.demand.push_back(d);
    w.total_gpu_milli += p.TotalGpuMilli();
    ++shape_counts[core::TaskShape{p.cpu_milli, p.gpu_milli, p.num_gpus, p.gpu_spec}];
  }
  std::vector<core::ShapeCount> counts;
  for (const auto& [shape, n] : shape_counts) counts.push_back({shape, n});
  w.target = core::SelectTargetWorkload(counts, coverage_percent);
  w.compiled = core::FragWorkload::Compile(w.target, cluster.type_table);
  w.target_gpu_weighted =
      core::SelectTargetWorkload(core::GpuWeightedCounts(std::move(counts)), coverage_percent);
  w.compiled_gpu_weighted = core::FragWorkload::Compile(w.target_gpu_weighted, cluster.type_table);
  return w;
}

std::vector<int32_t> BuildArrivals(const std::vector<TracePod>& pods, int64_t capacity_milli,
                                   double tune, core::SeededRng& rng) {
  std::vector<int32_t> order(pods.size());
  std::iota(order.begin(), order.end(), 0);
  rng.Shuffle(order);
  if (tune <= 0 || pods.empty()) return order;
  int64_t total = 0;
  for (const auto& p : pods) total += p.TotalGpuMilli();
  const double target = tune * static_cast<double>(capacity_milli);
  bool any_gpu = false;
  for (const auto& p : pods) any_gpu |= p.gpu_milli > 0;
  if (!any_gpu) return order;  // CPU-only draws never stop the authors' rule
  if (static_cast<double>(total) > target) {
    while (static_cast<double>(total) > target && !order.empty()) {
      const size_t idx = rng.Uniform(order.size());
      total -= pods[order[idx]].TotalGpuMilli();
      order.erase(order.begin() + static_cast<std::ptrdiff_t>(idx));
    }
    return order;
  }
  while (true) {
    const auto idx = static_cast<int32_t>(rng.Uniform(pods.size()));
    if (static_cast<double>(total + pods[idx].gpu_milli) > target) break;
    total += pods[idx].TotalGpuMilli();
    order.push_back(idx);
  }
  return order;
}

}  // namespace fracgpu::sim
