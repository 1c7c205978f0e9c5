#include "sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>

#include "core/fit.h"
#include "core/frag_choice.h"

namespace fracgpu::sim {
namespace {

// Puts the policy's chosen GPUs first, then every other GPU in index order, so that core fit
// examines exactly the policy's choice before anything else.
class PickOrderer : public core::GpuOrderer {
 public:
  explicit PickOrderer(const core::GpuPick& pick) : pick_(pick) {}
  void Order(const core::ContainerRequest&, const core::PodRequest&, const core::NodeState& node,
             std::span<const core::GpuUsage>, std::span<uint16_t> order) const override {
    size_t k = 0;
    bool first[core::kMaxFragGpus] = {};
    for (int i = 0; i < pick_.count; ++i) {
      order[k++] = static_cast<uint16_t>(pick_.index[i]);
      first[pick_.index[i]] = true;
    }
    for (size_t g = 0; g < node.gpus.size(); ++g) {
      if (g >= static_cast<size_t>(core::kMaxFragGpus) || !first[g])
        order[k++] = static_cast<uint16_t>(g);
    }
  }

 private:
  core::GpuPick pick_;
};

// Memo of ScoreNode for the FGD family (the authors' simulator memoises node states the same
// way): a node's score for a demand depends only on the node's state and the demand's CPU, GPU
// count, share and allowed types, and one placement changes one node. Entries are stamped with
// the node's version; a node's version moves on every placement there. Decisions are exactly
// those of core::ChooseNode (same feasibility, same scores, first best in node order).
class ScoreMemo {
 public:
  explicit ScoreMemo(size_t nodes) : version_(nodes, 1) {}
  void Touch(size_t node) { ++version_[node]; }

  core::Placement Choose(core::PlacementPolicy policy, std::span<const core::FragNode> nodes,
                         std::span<const double> frag, const core::FragDemand& d,
                         const core::FragWorkload& w) {
    const Key key{d.cpu_milli, d.num_gpus, d.gpu_milli, d.type_mask};
    auto [it, fresh] = ids_.try_emplace(key, table_.size());
    if (fresh) table_.emplace_back(nodes.size());
    std::vector<Entry>& row = table_[it->second];
    core::Placement best;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!core::Fits(nodes[i], d)) continue;
      Entry& e = row[i];
      if (e.version != version_[i]) {
        e.score = core::ScoreNode(policy, nodes[i], d, w, frag[i]);
        e.version = version_[i];
      }
      if (best.node < 0 || e.score.score > best.score) {
        best.node = static_cast<int32_t>(i);
        best.score = e.score.score;
        best.pick = e.score.pick;
      }
    }
    return best;
  }

 private:
  using Key = std::tuple<int64_t, int32_t, int32_t, uint64_t>;
  struct Entry {
    uint64_t version = 0;
    core::PlacementScore score;
  };
  std::vector<uint64_t> version_;
  std::map<Key, size_t> ids_;
  std::vector<std::vector<Entry>> table_;
};

}  // namespace

std::vector<int32_t> TieBreakOrder(const SimCluster& cluster, uint64_t seed,
                                   const RunOptions& options) {
  core::SeededRng order_rng(seed, 1);
  // The fixed tie-break order: a seeded permutation of the name-sorted nodes.
  std::vector<int32_t> perm(cluster.frag.size());
  std::iota(perm.begin(), perm.end(), 0);
  order_rng.Shuffle(perm);
  if (options.node_order == RunOptions::NodeOrder::kByName) {
    std::iota(perm.begin(), perm.end(), 0);  // cluster.frag is sorted by name
  } else if (options.node_order != RunOptions::NodeOrder::kSeeded) {
    const bool desc = options.node_order == RunOptions::NodeOrder::kCpuPerGpuDesc;
    auto ratio = [&](int32_t i) {  // millicores per GPU, compared exactly by cross-multiplying
      return std::pair<int64_t, int64_t>(cluster.frag[i].cpu_left, cluster.frag[i].num_gpus);
    };
    std::stable_sort(perm.begin(), perm.end(), [&](int32_t a, int32_t b) {
      const auto [ca, ga] = ratio(a);
      const auto [cb, gb] = ratio(b);
      return desc ? ca * gb > cb * ga : ca * gb < cb * ga;
    });
  }
  return perm;
}

Result<RunResult> RunExperiment(const SimCluster& cluster, const SimWorkload& workload,
                                core::PlacementPolicy policy, uint64_t seed,
                                const RunOptions& options) {
  RunResult out;
  out.policy = policy;
  out.seed = seed;
  core::SeededRng arrivals_rng(seed, 0), policy_rng(seed, 2);
  const std::vector<int32_t> arrivals =
      BuildArrivals(workload.pods, cluster.CapacityMilli(), options.tune, arrivals_rng);

  const std::vector<int32_t> perm = TieBreakOrder(cluster, seed, options);
  std::vector<core::FragNode> nodes;
  std::vector<core::NodeState> states;
  nodes.reserve(perm.size());
  states.reserve(perm.size());
  for (int32_t i : perm) {
    nodes.push_back(cluster.frag[i]);
    states.push_back(cluster.states[i]);
  }
  // F_n(M) for the metric, and F_n under the workload the policy reads when it differs.
  std::vector<double> node_frag(nodes.size());
  double cluster_frag = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    node_frag[i] = core::NodeFragment(nodes[i], workload.compiled);
    cluster_frag += node_frag[i];
  }
  const bool gpu_weighted = policy == core::PlacementPolicy::kFgdGpuWeighted;
  const core::FragWorkload& policy_workload =
      gpu_weighted ? workload.compiled_gpu_weighted : workload.compiled;
  // The policy reads its own F when its workload or its measure differs from the metric's.
  const bool own_workload = core::UsesFragment(policy);
  std::vector<double> policy_frag;
  if (own_workload) {
    for (const auto& n : nodes)
      policy_frag.push_back(core::PolicyFragment(policy, n, policy_workload));
  }

  std::optional<ScoreMemo> memo;
  if (own_workload && options.memoize) memo.emplace(nodes.size());

  // The FGD-ordered policies place through core/frag_choice — the fit /bind and the UI preview
  // run — over the trace's M and with the pod's CPU; the policy's own pick is the cross-check.
  std::optional<core::FragmentationModel> frag_model;
  if (core::HasFgdGpuOrder(policy)) {
    frag_model.emplace(gpu_weighted ? workload.target_gpu_weighted : workload.target, policy);
  }

  std::vector<Sample> samples;
  samples.reserve(arrivals.size());
  core::FitOptions fit_options;
  fit_options.want_reasons = true;
  for (int32_t idx : arrivals) {
    const core::FragDemand& d = workload.demand[idx];
    const core::PodRequest& request = workload.requests[workload.request_of[idx]];
    const TracePod& pod = workload.pods[idx];
    ++out.pods;
    out.arrived_milli += d.TotalGpuMilli();
    const core::Placement p =
        memo ? memo->Choose(policy, nodes, policy_frag, d, policy_workload)
             : core::ChooseNode(policy, nodes, own_workload ? policy_frag : node_frag, d,
                                policy_workload, policy_rng);
    if (options.keep_placements) out.placements.push_back({idx, "", {}});
    if (p.node < 0) {
      ++out.failed;
      if (options.verify_failures) {
        for (size_t i = 0; i < states.size(); ++i) {
          const auto& s = states[i];
          if (s.cpu_milli_total - s.cpu_milli_used < d.cpu_milli ||
              s.mem_mib_total - s.mem_mib_used < d.mem_mib) {
            continue;
          }
          core::FitOptions quick;
          quick.want_reasons = false;
          if (core::Fits(request, s, quick)) {
            return Internal("pod " + pod.name + " failed everywhere, but core fit accepts node " +
                            s.name);
          }
        }
      }
    } else {
      core::NodeState& s = states[p.node];
      core::FitResult fit;
      if (frag_model) {
        fit = core::FitFragmentationAware(request, s, *frag_model, d.cpu_milli);
      } else {
        const PickOrderer orderer(p.pick);
        fit_options.orderer = &orderer;
        fit = core::Fit(request, s, fit_options);
      }
      bool same = fit.fits;
      if (same && d.num_gpus > 0) {
        std::vector<uint16_t> want(p.pick.index.begin(), p.pick.index.begin() + p.pick.count);
        std::vector<uint16_t> got;
        for (const auto& c : fit.gpu_positions) got.insert(got.end(), c.begin(), c.end());
        std::sort(want.begin(), want.end());
        std::sort(got.begin(), got.end());
        same = want == got;
      }
      if (!same) {
        return Internal("pod " + pod.name + " on node " + s.name + ": " +
                        core::PlacementPolicyName(policy) + " chose GPUs " +
                        (frag_model ? "core/frag_choice" : "core fit") + " does not grant (" +
                        (fit.fits ? std::string("different GPUs") : fit.summary) + ")");
      }
      FRACGPU_RETURN_IF_ERROR(
          core::AddPodGrants(s, fit.grants, core::CountInitContainers(request)));
      if (options.keep_placements) {
        out.placements.back().node = s.name;
        for (const auto& c : fit.grants)
          for (const auto& g : c) out.placements.back().gpus.push_back(g.uuid);
      }
      s.cpu_milli_used += d.cpu_milli;
      s.mem_mib_used += d.mem_mib;
      core::Apply(nodes[p.node], d, p.pick);
      const double f = core::NodeFragment(nodes[p.node], workload.compiled);
      cluster_frag += f - node_frag[p.node];
      node_frag[p.node] = f;
      if (own_workload)
        policy_frag[p.node] = core::PolicyFragment(policy, nodes[p.node], policy_workload);
      if (memo) memo->Touch(static_cast<size_t>(p.node));
      out.used_milli += d.TotalGpuMilli();
    }
    samples.push_back({out.arrived_milli, out.used_milli, cluster_frag});
  }
  const int max_bucket = std::max(130, static_cast<int>(std::ceil(options.tune * 100)));
  out.buckets = Bucketize(samples, cluster.CapacityMilli(), max_bucket);
  if (options.keep_samples) out.samples = std::move(samples);
  return out;
}

}  // namespace fracgpu::sim
