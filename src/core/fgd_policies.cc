#include "core/fgd_policies.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>

#include "core/dra.h"

namespace fracgpu::core {
namespace {

// Normalisers of the authors' BestFit and DotProduct plugins: the largest node shape of the
// openb cluster (128 vCPU, 8 GPUs), docs/design/fgd-evaluation.md §3 point 7.
constexpr double kCpuNorm = 128000.0;
constexpr double kGpuNorm = 8000.0;
constexpr int64_t kMaxNodeScore = 100;  // kube-scheduler framework.MaxNodeScore

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Go's int64(float64) truncates toward zero.
double Trunc(double x) { return static_cast<double>(static_cast<int64_t>(x)); }

// `scale`: the score is int(sigmoid(ΔF / 1000) × scale); 0 = the exact ΔF.
using Measure = double (*)(const FragNode&, const FragWorkload&);

PlacementScore FgdScore(const FragNode& node, const FragDemand& d, const FragWorkload& w,
                        double before, double scale, Measure measure = &NodeFragment) {
  auto score_of = [&](double after) {
    const double delta = before - after;
    return scale == 0 ? delta : Trunc(Sigmoid(delta / 1000.0) * scale);
  };
  PlacementScore best;
  if (d.Sharing()) {
    bool have = false;
    // GPUs with the same leftover and type give the same after-state; only the first can win.
    int32_t seen_left[kMaxFragGpus];
    uint8_t seen_type[kMaxFragGpus];
    int seen = 0;
    for (int g = 0; g < node.num_gpus; ++g) {
      if (!d.GpuFits(node, g)) continue;
      bool dup = false;
      for (int s = 0; s < seen && !dup; ++s) {
        dup = seen_left[s] == node.gpu_left[g] && seen_type[s] == node.gpu_type[g];
      }
      if (dup) continue;
      seen_left[seen] = node.gpu_left[g];
      seen_type[seen] = node.gpu_type[g];
      ++seen;
      FragNode after = node;
      after.cpu_left -= d.cpu_milli;
      after.gpu_left[g] -= d.gpu_milli;
      const double s = score_of(measure(after, w));
      if (!have || s > best.score) {
        have = true;
        best.score = s;
        best.pick.count = 1;
        best.pick.index[0] = static_cast<int8_t>(g);
      }
    }
    return best;
  }
  best.pick = PickTightestGpus(node, d);
  FragNode after = node;
  Apply(after, d, best.pick);
  best.score = score_of(measure(after, w));
  return best;
}

double BestFitScore(const FragNode& node, const FragDemand& d) {
  const double cpu = 0.5 * static_cast<double>(node.cpu_left - d.cpu_milli) / kCpuNorm;
  const double gpu = 0.5 * static_cast<double>(node.TotalGpuLeft() - d.TotalGpuMilli()) / kGpuNorm;
  return Trunc((1.0 - (cpu + gpu)) * static_cast<double>(kMaxNodeScore));
}

double DotProductScore(const FragNode& node, const FragDemand& d) {
  const double dot = (static_cast<double>(node.cpu_left) / kCpuNorm) *
                         (static_cast<double>(d.cpu_milli) / kCpuNorm) +
                     (static_cast<double>(node.TotalGpuLeft()) / kGpuNorm) *
                         (static_cast<double>(d.TotalGpuMilli()) / kGpuNorm);
  return Trunc(static_cast<double>(kMaxNodeScore) * (1.0 - dot / 2.0));
}

// The authors' gpu_packing_score.go rules, from high to low:
//  1. fits on partially used GPUs: 100 − (Σ leftover·100/1000)/10, at least 50;
//  2. must open k fully free GPUs on a used node: 50 − k, at least 33;
//  3. every GPU of the node is free: 33 − (free GPUs), at least the free GPU count.
// CPU-only pods score 0 everywhere.
double GpuPackingScore(const FragNode& node, const FragDemand& d) {
  if (d.num_gpus == 0) return 0;
  int64_t fully_free = 0;
  for (int g = 0; g < node.num_gpus; ++g) fully_free += node.gpu_left[g] == kMilliPerGpu;
  if (fully_free == node.num_gpus) {
    return static_cast<double>(std::max(kMaxNodeScore / 3 - fully_free, fully_free));
  }
  const GpuPick pick = PickTightestGpus(node, d);
  int64_t opened = 0;
  int64_t free_ratio = 0;
  for (int i = 0; i < pick.count; ++i) {
    const int32_t left = node.gpu_left[pick.index[i]];
    opened += left == kMilliPerGpu;
    free_ratio += static_cast<int64_t>(left) * 100 / kMilliPerGpu;
  }
  if (opened > 0)
    return static_cast<double>(std::max(kMaxNodeScore / 2 - opened, kMaxNodeScore / 3));
  return static_cast<double>(std::max(kMaxNodeScore - free_ratio / 10, kMaxNodeScore / 2));
}

// The authors' gpu_clustering_score.go: base 25·(8000 − gpuLeft)/8000 (integer arithmetic,
// always over 8 GPUs), plus 75 when the node holds only this pod's affinity tag, 50 when its
// tags include it, 25 when it holds no GPU pod, else 0. CPU-only pods score 0.
double GpuClusteringScore(const FragNode& node, const FragDemand& d) {
  if (d.num_gpus == 0) return 0;
  const int64_t base = kMaxNodeScore / 4 * (8000 - node.TotalGpuLeft()) / 8000;
  const uint64_t tag = 1ULL << (d.Sharing() ? 0 : std::min(d.num_gpus, 63));
  int64_t bonus = 0;
  if (node.gpu_tags & tag) {
    bonus = std::popcount(node.gpu_tags) == 1 ? kMaxNodeScore * 3 / 4 : kMaxNodeScore * 2 / 4;
  } else if (node.gpu_tags == 0) {
    bonus = kMaxNodeScore / 4;
  }
  return static_cast<double>(base + bonus);
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::vector<PlacementPolicy> PaperPolicies() {
  return {PlacementPolicy::kRandom,        PlacementPolicy::kDotProduct,
          PlacementPolicy::kGpuClustering, PlacementPolicy::kGpuPacking,
          PlacementPolicy::kBestFit,       PlacementPolicy::kFgd};
}

std::vector<PlacementPolicy> AllPlacementPolicies() {
  auto all = PaperPolicies();
  all.push_back(PlacementPolicy::kFgdBestFit);
  all.push_back(PlacementPolicy::kFgdExact);
  all.push_back(PlacementPolicy::kFgdCoarse);
  all.push_back(PlacementPolicy::kFgdPacking);
  all.push_back(PlacementPolicy::kFgdGpuWeighted);
  all.push_back(PlacementPolicy::kFgdCpu);
  all.push_back(PlacementPolicy::kFgdCpuBestFit);
  all.push_back(PlacementPolicy::kFgdFine);
  all.push_back(PlacementPolicy::kFgdHybrid);
  all.push_back(PlacementPolicy::kFgdKeepFree);
  all.push_back(PlacementPolicy::kFgdCpuBalance);
  all.push_back(PlacementPolicy::kFgdCpuRoute100);
  all.push_back(PlacementPolicy::kFgdCpuRoute);
  all.push_back(PlacementPolicy::kFgdCpuRouteCrumb);
  all.push_back(PlacementPolicy::kDraFirstFit);
  return all;
}

const char* PlacementPolicyName(PlacementPolicy policy) {
  switch (policy) {
    case PlacementPolicy::kRandom:
      return "Random";
    case PlacementPolicy::kDotProduct:
      return "DotProduct";
    case PlacementPolicy::kGpuClustering:
      return "GpuClustering";
    case PlacementPolicy::kGpuPacking:
      return "GpuPacking";
    case PlacementPolicy::kBestFit:
      return "BestFit";
    case PlacementPolicy::kFgd:
      return "FGD";
    case PlacementPolicy::kFgdBestFit:
      return "FGD+BestFit";
    case PlacementPolicy::kFgdExact:
      return "FGD-exact";
    case PlacementPolicy::kFgdCoarse:
      return "FGD-coarse";
    case PlacementPolicy::kFgdPacking:
      return "FGD+GpuPacking";
    case PlacementPolicy::kFgdGpuWeighted:
      return "FGD-gpuweighted";
    case PlacementPolicy::kFgdCpu:
      return "FGD-cpu";
    case PlacementPolicy::kFgdCpuBestFit:
      return "FGD-cpu+BestFit";
    case PlacementPolicy::kFgdFine:
      return "FGD-fine";
    case PlacementPolicy::kFgdHybrid:
      return "FGD-hybrid";
    case PlacementPolicy::kFgdKeepFree:
      return "FGD+KeepFree";
    case PlacementPolicy::kFgdCpuBalance:
      return "FGD+CpuBalance";
    case PlacementPolicy::kFgdCpuRoute100:
      return "FGD+CpuRoute-s100";
    case PlacementPolicy::kFgdCpuRoute:
      return "FGD+CpuRoute";
    case PlacementPolicy::kFgdCpuRouteCrumb:
      return "FGD+CpuRoute+Crumb";
    case PlacementPolicy::kDraFirstFit:
      return "DRA-FirstFit";
  }
  return "?";
}

Result<PlacementPolicy> ParsePlacementPolicy(std::string_view name) {
  const std::string lower = Lower(name);
  if (lower == "dotprod") return PlacementPolicy::kDotProduct;
  if (lower == "fragmentation-aware") return kFragmentationAwarePolicy;
  std::string valid;
  for (PlacementPolicy p : AllPlacementPolicies()) {
    if (Lower(PlacementPolicyName(p)) == lower) return p;
    if (!valid.empty()) valid += ", ";
    valid += PlacementPolicyName(p);
  }
  return InvalidArgument("unknown placement policy \"" + std::string(name) + "\" (valid: " + valid +
                         ")");
}

bool UsesFragment(PlacementPolicy policy) {
  return policy == PlacementPolicy::kFgd || policy == PlacementPolicy::kFgdBestFit ||
         policy == PlacementPolicy::kFgdExact || policy == PlacementPolicy::kFgdCoarse ||
         policy == PlacementPolicy::kFgdPacking || policy == PlacementPolicy::kFgdGpuWeighted ||
         policy == PlacementPolicy::kFgdCpu || policy == PlacementPolicy::kFgdCpuBestFit ||
         policy == PlacementPolicy::kFgdFine || policy == PlacementPolicy::kFgdHybrid ||
         policy == PlacementPolicy::kFgdKeepFree || policy == PlacementPolicy::kFgdCpuBalance ||
         RoutesCpu(policy);
}

double PolicyFragment(PlacementPolicy policy, const FragNode& node, const FragWorkload& workload) {
  switch (policy) {
    case PlacementPolicy::kFgdCpu:
    case PlacementPolicy::kFgdCpuBestFit:
      return NodeFragmentCpuAware(node, workload);
    default:
      return NodeFragment(node, workload);
  }
}

bool HasFgdGpuOrder(PlacementPolicy policy) {
  switch (policy) {
    case PlacementPolicy::kFgd:
    case PlacementPolicy::kFgdGpuWeighted:
    case PlacementPolicy::kFgdBestFit:
    case PlacementPolicy::kFgdPacking:
    case PlacementPolicy::kFgdKeepFree:
    case PlacementPolicy::kFgdCpuBalance:
    case PlacementPolicy::kFgdCpuRoute100:
    case PlacementPolicy::kFgdCpuRoute:
    case PlacementPolicy::kFgdCpuRouteCrumb:
      return true;
    default:
      return false;
  }
}

int32_t FgdScoreScale(PlacementPolicy policy) {
  // 70 was chosen on tuning seeds 1000–1019 of the default trace (scales 25–200 tried,
  // docs/simulate.md "Beyond FGD"); the coarser integer makes more ties between nodes, which
  // then follow the node order (FGD's packing), without the loss of FGD-coarse's 20.
  return policy == PlacementPolicy::kFgdCpuRoute || policy == PlacementPolicy::kFgdCpuRouteCrumb
             ? 70
             : static_cast<int32_t>(kMaxNodeScore);
}

bool RoutesCpu(PlacementPolicy policy) {
  return policy == PlacementPolicy::kFgdCpuRoute100 || policy == PlacementPolicy::kFgdCpuRoute ||
         policy == PlacementPolicy::kFgdCpuRouteCrumb;
}

double WorkloadCpuPerGpuMilli(const FragWorkload& workload) {
  double cpu = 0, gpu = 0;
  for (size_t m = 0; m < workload.shapes.size(); ++m) {
    if (workload.shapes[m].num_gpus == 0) continue;
    cpu += workload.popularity[m] * static_cast<double>(workload.shapes[m].cpu_milli);
    gpu += workload.popularity[m] * static_cast<double>(workload.shapes[m].TotalGpuMilli());
  }
  return gpu > 0 ? cpu / gpu : 0;
}

bool CpuRouteFirst(const FragNode& node, const FragDemand& demand, double cpu_per_gpu_milli) {
  const double gpu_asked = static_cast<double>(demand.TotalGpuMilli());
  const bool heavy =
      demand.num_gpus == 0 || static_cast<double>(demand.cpu_milli) > cpu_per_gpu_milli * gpu_asked;
  if (!heavy) return false;
  const double surplus = static_cast<double>(node.cpu_left - demand.cpu_milli) -
                         cpu_per_gpu_milli * (static_cast<double>(node.TotalGpuLeft()) - gpu_asked);
  return surplus >= 0;
}

int32_t CrumbCeilingMilli(const FragWorkload& workload) {
  // Popularity-weighted 1 % quantile of the per-GPU share over M's GPU shapes (≈ 35 shapes: a
  // quadratic scan is cheaper than sorting a copy).
  constexpr double kQuantile = 0.01;
  double gpu_total = 0;
  for (size_t m = 0; m < workload.shapes.size(); ++m) {
    if (workload.shapes[m].num_gpus > 0) gpu_total += workload.popularity[m];
  }
  if (gpu_total <= 0) return 0;
  int32_t ceiling = kMilliPerGpu;
  for (size_t m = 0; m < workload.shapes.size(); ++m) {
    const FragDemand& s = workload.shapes[m];
    if (s.num_gpus == 0 || s.gpu_milli >= ceiling) continue;
    double at_most = 0;
    for (size_t k = 0; k < workload.shapes.size(); ++k) {
      const FragDemand& o = workload.shapes[k];
      if (o.num_gpus > 0 && o.gpu_milli <= s.gpu_milli) at_most += workload.popularity[k];
    }
    if (at_most >= kQuantile * gpu_total) ceiling = s.gpu_milli;
  }
  return ceiling;
}

bool LeavesCrumb(const FragNode& node, const FragDemand& demand, const GpuPick& pick,
                 int32_t ceiling) {
  if (!demand.Sharing() || pick.count != 1) return false;
  const int32_t left = node.gpu_left[pick.index[0]] - demand.gpu_milli;
  return left > kCrumbFloorMilli && left < ceiling;
}

std::vector<ShapeCount> GpuWeightedCounts(std::vector<ShapeCount> counts) {
  for (auto& c : counts) c.count *= std::max(1, c.shape.num_gpus);
  return counts;
}

PlacementScore ScoreNode(PlacementPolicy policy, const FragNode& node, const FragDemand& demand,
                         const FragWorkload& workload, double frag_before) {
  switch (policy) {
    case PlacementPolicy::kFgd:
    case PlacementPolicy::kFgdGpuWeighted:
      return FgdScore(node, demand, workload, frag_before, kMaxNodeScore);
    case PlacementPolicy::kFgdExact:
      return FgdScore(node, demand, workload, frag_before, 0);
    case PlacementPolicy::kFgdCoarse:
      return FgdScore(node, demand, workload, frag_before, 20);
    case PlacementPolicy::kFgdBestFit: {
      PlacementScore s = FgdScore(node, demand, workload, frag_before, kMaxNodeScore);
      s.score = s.score * 1000.0 + BestFitScore(node, demand);
      return s;
    }
    case PlacementPolicy::kFgdCpu:
      return FgdScore(node, demand, workload, frag_before, kMaxNodeScore, &NodeFragmentCpuAware);
    case PlacementPolicy::kFgdCpuBestFit: {
      PlacementScore s =
          FgdScore(node, demand, workload, frag_before, kMaxNodeScore, &NodeFragmentCpuAware);
      s.score = s.score * 1000.0 + BestFitScore(node, demand);
      return s;
    }
    case PlacementPolicy::kFgdFine:
      return FgdScore(node, demand, workload, frag_before, 10 * kMaxNodeScore);
    case PlacementPolicy::kFgdHybrid:
      return FgdScore(node, demand, workload, frag_before, demand.num_gpus > 0 ? 0 : kMaxNodeScore);
    case PlacementPolicy::kFgdKeepFree: {
      PlacementScore s = FgdScore(node, demand, workload, frag_before, kMaxNodeScore);
      const int64_t left = node.TotalGpuLeft();
      const bool keeps = demand.num_gpus == 0
                             ? left == 0
                             : left < static_cast<int64_t>(node.num_gpus) * kMilliPerGpu;
      s.score = s.score * 10.0 + (keeps ? 1.0 : 0.0);
      return s;
    }
    case PlacementPolicy::kFgdCpuBalance: {
      PlacementScore s = FgdScore(node, demand, workload, frag_before, kMaxNodeScore);
      double cpu = 0, gpu = 0;  // M's CPU per milli-GPU over its GPU shapes
      for (size_t m = 0; m < workload.shapes.size(); ++m) {
        if (workload.shapes[m].num_gpus == 0) continue;
        cpu += workload.popularity[m] * static_cast<double>(workload.shapes[m].cpu_milli);
        gpu += workload.popularity[m] * static_cast<double>(workload.shapes[m].TotalGpuMilli());
      }
      const double ratio = gpu > 0 ? cpu / gpu : 0;
      const double surplus =
          static_cast<double>(node.cpu_left - demand.cpu_milli) -
          ratio * static_cast<double>(node.TotalGpuLeft() - demand.TotalGpuMilli());
      s.score = s.score * 10.0 + (demand.num_gpus == 0 && surplus >= 0 ? 1.0 : 0.0);
      return s;
    }
    case PlacementPolicy::kFgdCpuRoute100:
    case PlacementPolicy::kFgdCpuRoute: {
      // The route is the first key: (route + 1) × (scale + 1) exceeds every FGD score (0..scale).
      const int32_t scale = FgdScoreScale(policy);
      PlacementScore s = FgdScore(node, demand, workload, frag_before, scale);
      if (CpuRouteFirst(node, demand, WorkloadCpuPerGpuMilli(workload))) s.score += scale + 1;
      return s;
    }
    case PlacementPolicy::kFgdCpuRouteCrumb: {
      // Keys, each outranking the next: route (2 × (scale + 1)), no crumb (scale + 1), FGD score
      // (0..scale). The GPU within the node is FGD's at scale 70, as kFgdCpuRoute's.
      const int32_t scale = FgdScoreScale(policy);
      PlacementScore s = FgdScore(node, demand, workload, frag_before, scale);
      if (!LeavesCrumb(node, demand, s.pick, CrumbCeilingMilli(workload))) s.score += scale + 1;
      if (CpuRouteFirst(node, demand, WorkloadCpuPerGpuMilli(workload))) s.score += 2 * (scale + 1);
      return s;
    }
    case PlacementPolicy::kFgdPacking: {
      PlacementScore s = FgdScore(node, demand, workload, frag_before, kMaxNodeScore);
      s.score = s.score * 1000.0 + GpuPackingScore(node, demand);
      return s;
    }
    default:
      break;
  }
  PlacementScore s;
  if (policy == PlacementPolicy::kDraFirstFit) {
    s.pick = DraFirstFitPick(node, demand);
    return s;
  }
  s.pick = PickTightestGpus(node, demand);
  switch (policy) {
    case PlacementPolicy::kDotProduct:
      s.score = DotProductScore(node, demand);
      break;
    case PlacementPolicy::kGpuClustering:
      s.score = GpuClusteringScore(node, demand);
      break;
    case PlacementPolicy::kGpuPacking:
      s.score = GpuPackingScore(node, demand);
      break;
    case PlacementPolicy::kBestFit:
      s.score = BestFitScore(node, demand);
      break;
    default:
      s.score = 0;
      break;
  }
  return s;
}

Placement ChooseNode(PlacementPolicy policy, std::span<const FragNode> nodes,
                     std::span<const double> node_frag, const FragDemand& demand,
                     const FragWorkload& workload, SeededRng& rng) {
  Placement best;
  if (policy == PlacementPolicy::kRandom) {
    std::vector<int32_t> feasible;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (Fits(nodes[i], demand)) feasible.push_back(static_cast<int32_t>(i));
    }
    if (feasible.empty()) return best;
    best.node = feasible[rng.Uniform(feasible.size())];
    const FragNode& node = nodes[best.node];
    if (demand.Sharing()) {
      int8_t fitting[kMaxFragGpus];
      int n = 0;
      for (int g = 0; g < node.num_gpus; ++g) {
        if (demand.GpuFits(node, g)) fitting[n++] = static_cast<int8_t>(g);
      }
      best.pick.count = 1;
      best.pick.index[0] = fitting[rng.Uniform(static_cast<uint64_t>(n))];
    } else {
      best.pick = PickTightestGpus(node, demand);
    }
    return best;
  }
  if (policy == PlacementPolicy::kDraFirstFit) {
    // kube-scheduler's DRA allocator: the first node whose devices fit, no scoring.
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!Fits(nodes[i], demand)) continue;
      const GpuPick pick = DraFirstFitPick(nodes[i], demand);
      if (pick.count != std::max(demand.num_gpus, 0)) continue;
      best.node = static_cast<int32_t>(i);
      best.pick = pick;
      return best;
    }
    return best;
  }
  const bool frag = UsesFragment(policy);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!Fits(nodes[i], demand)) continue;
    const PlacementScore s =
        ScoreNode(policy, nodes[i], demand, workload, frag ? node_frag[i] : 0.0);
    if (best.node < 0 || s.score > best.score) {
      best.node = static_cast<int32_t>(i);
      best.score = s.score;
      best.pick = s.pick;
    }
  }
  return best;
}

}  // namespace fracgpu::core
