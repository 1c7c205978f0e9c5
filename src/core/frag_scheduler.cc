#include "core/frag_scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace fracgpu::core {
namespace {

// Type id no task shape allows: a GPU whose slices are exhausted (its leftover is fragment
// for every shape). Type tables are capped below it.
constexpr uint8_t kUnusableType = kMaxFragTypes - 1;
constexpr int64_t kUntracked = std::numeric_limits<int64_t>::max() / 2;

uint8_t TypeId(const std::string& type, std::vector<std::string>& table) {
  for (size_t i = 0; i < table.size(); ++i) {
    if (table[i] == type) return static_cast<uint8_t>(i);
  }
  if (table.size() >= static_cast<size_t>(kUnusableType)) return kUnusableType;
  table.push_back(type);
  return static_cast<uint8_t>(table.size() - 1);
}

// int(sigmoid(ΔF / 1000) × scale), ΔF = before − after (FgdScoreScale: 100 for the paper's FGD).
int32_t FgdIntScore(double before, double after, int32_t scale) {
  return static_cast<int32_t>(1.0 / (1.0 + std::exp(-(before - after) / 1000.0)) *
                              static_cast<double>(scale));
}

uint64_t PodTypeMask(const PodRequest& pod, const std::vector<std::string>& table) {
  uint64_t mask = 0;
  for (size_t t = 0; t < table.size(); ++t) {
    if (GpuTypeAllowed(pod, table[t])) mask |= 1ULL << t;
  }
  return mask;
}

}  // namespace

FragNode ToFragNode(const NodeState& node, std::vector<std::string>& type_table,
                    std::span<const GpuUsage> usage) {
  FragNode f;
  f.cpu_left = node.cpu_milli_total > 0 ? node.cpu_milli_total - node.cpu_milli_used : kUntracked;
  f.mem_left = node.mem_mib_total > 0 ? node.mem_mib_total - node.mem_mib_used : kUntracked;
  f.num_gpus = static_cast<int32_t>(std::min<size_t>(node.gpus.size(), kMaxFragGpus));
  for (int g = 0; g < f.num_gpus; ++g) {
    const GpuState& gpu = node.gpus[g];
    const GpuUsage u = usage.empty() ? GpuUsage::Of(gpu) : usage[g];
    int32_t left = std::max(0, gpu.info.devcore - u.used_cores) * 10;
    uint8_t type = TypeId(gpu.info.type, type_table);
    if (!gpu.info.health || gpu.cordoned) {
      left = 0;
    } else if (u.used >= gpu.info.count) {
      type = kUnusableType;
    }
    f.gpu_left[g] = left;
    f.gpu_type[g] = type;
  }
  return f;
}

FragmentationModel::FragmentationModel(std::vector<WeightedShape> workload, PlacementPolicy policy)
    : workload_(std::move(workload)),
      policy_(UsesFragment(policy) ? policy : PlacementPolicy::kFgd) {}

FragWorkload FragmentationModel::Compile(const std::vector<std::string>& type_table) const {
  return FragWorkload::Compile(workload_, type_table);
}

double FragmentationModel::NodeFragment(const NodeState& node) const {
  std::vector<std::string> types;
  const FragNode f = ToFragNode(node, types);
  return core::NodeFragment(f, Compile(types));
}

void FragmentationModel::Orderer::Order(const ContainerRequest& container, const PodRequest& pod,
                                        const NodeState& node, std::span<const GpuUsage> usage,
                                        std::span<uint16_t> order) const {
  std::vector<std::string> types;
  const FragNode f = ToFragNode(node, types, usage);
  FragDemand d;
  d.cpu_milli = pod_cpu_milli_;
  d.num_gpus = container.num_gpus;
  d.gpu_milli = container.cores_percent * 10;
  d.type_mask = PodTypeMask(pod, types);
  // Rank key per GPU: (class, key, index); class 0 = can host the share, 1 = cannot, 2 = beyond
  // the FragNode view. Sharing: key = −score (higher score first); otherwise key = leftover.
  struct Rank {
    int cls;
    double key;
    uint16_t index;
  };
  std::vector<Rank> ranks(node.gpus.size());
  const bool sharing = d.Sharing();
  double before = 0;
  FragWorkload w;
  if (sharing) {
    w = model_->Compile(types);
    before = core::NodeFragment(f, w);
  }
  for (size_t g = 0; g < node.gpus.size(); ++g) {
    Rank& r = ranks[g];
    r.index = static_cast<uint16_t>(g);
    if (g >= static_cast<size_t>(f.num_gpus)) {
      r.cls = 2;
      r.key = 0;
    } else if (!d.GpuFits(f, static_cast<int>(g))) {
      r.cls = 1;
      r.key = 0;
    } else if (sharing) {
      FragNode after = f;
      after.cpu_left -= d.cpu_milli;
      after.gpu_left[g] -= d.gpu_milli;
      const double a = core::NodeFragment(after, w);
      r.cls = 0;
      r.key = model_->policy_ == PlacementPolicy::kFgdExact
                  ? -(before - a)
                  : -static_cast<double>(FgdIntScore(before, a, FgdScoreScale(model_->policy_)));
    } else {
      r.cls = 0;
      r.key = f.gpu_left[g];
    }
  }
  std::stable_sort(ranks.begin(), ranks.end(), [](const Rank& a, const Rank& b) {
    if (a.cls != b.cls) return a.cls < b.cls;
    return a.key < b.key;
  });
  for (size_t i = 0; i < ranks.size() && i < order.size(); ++i) order[i] = ranks[i].index;
}

Result<FragmentationModel::Score> FragmentationModel::ScoreNode(const PodRequest& pod,
                                                                int64_t pod_cpu_milli,
                                                                const NodeState& node) const {
  const Orderer orderer(*this, pod_cpu_milli);
  FitOptions options;
  options.orderer = &orderer;
  Score out;
  out.fit = Fit(pod, node, options);
  if (!out.fit.fits) {
    return ResourceExhausted("node " + node.name + ": " + out.fit.summary);
  }
  std::vector<std::string> types;
  const FragNode before_node = ToFragNode(node, types);
  const FragWorkload w = Compile(types);
  FragNode after = before_node;
  after.cpu_left -= pod_cpu_milli;
  auto usage = CollapsePodUsage(out.fit.grants, CountInitContainers(pod));
  if (!usage.ok()) return usage.status();
  int touched = 0;       // GPUs the pod's SM shares land on
  int touched_gpu = -1;  // the last of them
  for (const GpuUsageDelta& delta : *usage) {
    for (int g = 0; g < after.num_gpus; ++g) {
      if (node.gpus[g].info.uuid == delta.uuid) {
        after.gpu_left[g] = std::max(0, after.gpu_left[g] - delta.cores * 10);
        if (delta.cores > 0) {
          ++touched;
          touched_gpu = g;
        }
        break;
      }
    }
  }
  const int32_t scale = FgdScoreScale(policy_);
  out.score = FgdIntScore(core::NodeFragment(before_node, w), core::NodeFragment(after, w), scale);
  if (RoutesCpu(policy_)) {
    // The whole pod as one demand: the route reads only its CPU and its total milli-GPU.
    const int64_t gpu_milli = before_node.TotalGpuLeft() - after.TotalGpuLeft();
    FragDemand d;
    d.cpu_milli = pod_cpu_milli;
    d.num_gpus = gpu_milli > 0 ? 1 : 0;
    d.gpu_milli = static_cast<int32_t>(gpu_milli);
    const bool route = CpuRouteFirst(before_node, d, WorkloadCpuPerGpuMilli(w));
    if (policy_ == PlacementPolicy::kFgdCpuRouteCrumb) {
      // Keys as the simulator's ScoreNode: route (2 × (scale + 1)), no crumb (scale + 1), FGD.
      // A sharing pod — its share on one GPU, less than a card — leaves a crumb there when
      // kCrumbFloorMilli < what is left < CrumbCeilingMilli(M) (LeavesCrumb's rule).
      bool crumb = false;
      if (touched == 1 && gpu_milli > 0 && gpu_milli < kMilliPerGpu) {
        const int64_t left = before_node.gpu_left[touched_gpu] - gpu_milli;
        crumb = left > kCrumbFloorMilli && left < CrumbCeilingMilli(w);
      }
      if (!crumb) out.score += scale + 1;
      if (route) out.score += 2 * (scale + 1);
    } else if (route) {
      out.score += scale + 1;
    }
  }
  return out;
}

}  // namespace fracgpu::core
