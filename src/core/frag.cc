#include "core/frag.h"

#include <algorithm>

#include "core/request.h"

namespace fracgpu::core {

std::vector<WeightedShape> SelectTargetWorkload(std::vector<ShapeCount> counts,
                                                double coverage_percent) {
  int64_t total = 0;
  for (const auto& c : counts) total += c.count;
  std::vector<WeightedShape> out;
  if (total <= 0) return out;
  std::sort(counts.begin(), counts.end(), [](const ShapeCount& a, const ShapeCount& b) {
    if (a.count != b.count) return a.count > b.count;
    return a.shape > b.shape;
  });
  int64_t covered = 0;
  for (const auto& c : counts) {
    if (c.count <= 0) continue;
    out.push_back({c.shape, static_cast<double>(c.count) / static_cast<double>(total)});
    covered += c.count;
    if (static_cast<double>(covered) * 100.0 >= coverage_percent * static_cast<double>(total)) {
      break;
    }
  }
  double sum = 0;
  for (const auto& w : out) sum += w.popularity;
  for (auto& w : out) w.popularity /= sum;
  return out;
}

std::vector<std::string> SplitGpuSpec(const std::string& gpu_spec) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= gpu_spec.size()) {
    size_t end = gpu_spec.find('|', start);
    if (end == std::string::npos) end = gpu_spec.size();
    if (end > start) out.push_back(gpu_spec.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

uint64_t TypeMaskForSpec(const std::string& gpu_spec, const std::vector<std::string>& type_table) {
  PodRequest probe;
  probe.use_types = SplitGpuSpec(gpu_spec);
  uint64_t mask = 0;
  const size_t n = std::min<size_t>(type_table.size(), kMaxFragTypes);
  for (size_t t = 0; t < n; ++t) {
    if (probe.use_types.empty() || GpuTypeAllowed(probe, type_table[t])) mask |= 1ULL << t;
  }
  return mask;
}

FragWorkload FragWorkload::Compile(const std::vector<WeightedShape>& workload,
                                   const std::vector<std::string>& type_table) {
  FragWorkload out;
  for (const auto& w : workload) {
    FragDemand d;
    d.cpu_milli = w.shape.cpu_milli;
    d.gpu_milli = w.shape.gpu_milli;
    d.num_gpus = w.shape.num_gpus;
    d.type_mask = TypeMaskForSpec(w.shape.gpu_spec, type_table);
    out.shapes.push_back(d);
    out.popularity.push_back(w.popularity);
  }
  return out;
}

int64_t ShapeFragment(const FragNode& node, const FragDemand& shape) {
  int64_t total = 0;
  int64_t unusable = 0;
  int32_t usable = 0;
  for (int g = 0; g < node.num_gpus; ++g) {
    const int32_t left = node.gpu_left[g];
    total += left;
    if (shape.GpuFits(node, g)) {
      ++usable;
    } else {
      unusable += left;
    }
  }
  if (shape.num_gpus == 0 || node.cpu_left < shape.cpu_milli || usable < shape.num_gpus) {
    return total;
  }
  return unusable;
}

double NodeFragment(const FragNode& node, const FragWorkload& workload) {
  // Summed in workload order so that equal terms give bit-identical sums (a ΔF of exactly 0
  // must stay 0: FGD truncates sigmoid(ΔF)·100 to an integer, and 49 vs 50 changes decisions).
  double f = 0;
  const size_t n = workload.shapes.size();
  for (size_t i = 0; i < n; ++i) {
    f += workload.popularity[i] * static_cast<double>(ShapeFragment(node, workload.shapes[i]));
  }
  return f;
}

int64_t ShapeFragmentCpuAware(const FragNode& node, const FragDemand& shape) {
  int64_t total = 0;
  int64_t unusable = 0;
  int32_t usable = 0;
  for (int g = 0; g < node.num_gpus; ++g) {
    const int32_t left = node.gpu_left[g];
    total += left;
    if (shape.GpuFits(node, g)) {
      ++usable;
    } else {
      unusable += left;
    }
  }
  if (shape.num_gpus == 0 || node.cpu_left < shape.cpu_milli || usable < shape.num_gpus) {
    return total;
  }
  if (shape.cpu_milli <= 0) return unusable;
  const int64_t reachable_left = total - unusable;
  const int64_t per_copy = static_cast<int64_t>(shape.num_gpus) * shape.gpu_milli;
  const int64_t copies = node.cpu_left / shape.cpu_milli;
  // copies can be huge (untracked CPU): compare by division, never multiply past the leftover.
  if (per_copy <= 0 || copies >= (reachable_left + per_copy - 1) / per_copy) return unusable;
  return unusable + (reachable_left - copies * per_copy);
}

double NodeFragmentCpuAware(const FragNode& node, const FragWorkload& workload) {
  double f = 0;
  const size_t n = workload.shapes.size();
  for (size_t i = 0; i < n; ++i) {
    f += workload.popularity[i] *
         static_cast<double>(ShapeFragmentCpuAware(node, workload.shapes[i]));
  }
  return f;
}

bool Fits(const FragNode& node, const FragDemand& demand) {
  if (node.cpu_left < demand.cpu_milli || node.mem_left < demand.mem_mib) return false;
  if (demand.num_gpus == 0) return true;
  int32_t usable = 0;
  for (int g = 0; g < node.num_gpus; ++g) {
    if (demand.GpuFits(node, g) && ++usable >= demand.num_gpus) return true;
  }
  return false;
}

void Apply(FragNode& node, const FragDemand& demand, const GpuPick& pick) {
  node.cpu_left -= demand.cpu_milli;
  node.mem_left -= demand.mem_mib;
  for (int i = 0; i < pick.count; ++i) node.gpu_left[pick.index[i]] -= demand.gpu_milli;
  if (demand.num_gpus > 0) {
    const int tag = demand.Sharing() ? 0 : std::min(demand.num_gpus, 63);
    node.gpu_tags |= 1ULL << tag;
  }
}

GpuPick PickTightestGpus(const FragNode& node, const FragDemand& demand) {
  GpuPick pick;
  if (demand.num_gpus == 0) return pick;
  // Selection of the num_gpus smallest fitting leftovers, stable by index (≤ 16 GPUs).
  bool taken[kMaxFragGpus] = {};
  for (int k = 0; k < demand.num_gpus; ++k) {
    int best = -1;
    for (int g = 0; g < node.num_gpus; ++g) {
      if (taken[g] || !demand.GpuFits(node, g)) continue;
      if (best < 0 || node.gpu_left[g] < node.gpu_left[best]) best = g;
    }
    if (best < 0) break;
    taken[best] = true;
    pick.index[pick.count++] = static_cast<int8_t>(best);
  }
  return pick;
}

}  // namespace fracgpu::core
