// bench_fit: what one scheduling decision costs in src/core — fitting one pod against every
// node of a 1,000- or 5,000-node cluster of 8-GPU nodes (the extender's /filter, the
// simulator's inner loop), with and without reasons, and scoring the nodes that fit
// (/prioritize). Nodes are partially used in a realistic mix (seeded, so runs compare).
//
// Run: build/<dir>/bench/bench_fit  (or `make bench`). Per-node cost = time / nodes; the
// "nodes/s" counter is the throughput.

#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "core/fit.h"
#include "core/score.h"

namespace fracgpu::core {
namespace {

constexpr int64_t kA100Mem = 81920;  // MiB, NVIDIA A100-SXM4-80GB

// A cluster of `n` nodes × 8 A100s: per GPU 30 % idle, 15 % one exclusive whole-card tenant,
// 55 % one to three fractional tenants (memory 4–20 GiB, cores 10–40 % each, capped by what is
// left). NUMA 0 for GPUs 0–3, 1 for 4–7.
std::vector<NodeState> MakeCluster(int n) {
  std::mt19937 rng(20240601);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<NodeState> nodes(n);
  for (int i = 0; i < n; ++i) {
    NodeState& node = nodes[i];
    node.name = "node-";  // built by append: GCC 12 -O3 warns falsely on "literal" + string
    node.name += std::to_string(i);
    for (int g = 0; g < 8; ++g) {
      GpuState gpu;
      gpu.info.uuid = "GPU-";
      gpu.info.uuid += std::to_string(i);
      gpu.info.uuid += '-';
      gpu.info.uuid += std::to_string(g);
      gpu.info.index = g;
      gpu.info.count = 10;
      gpu.info.devmem_mib = kA100Mem;
      gpu.info.devcore = 100;
      gpu.info.type = "NVIDIA A100-SXM4-80GB";
      gpu.info.numa = g / 4;
      const int kind = uni(0, 99);
      if (kind < 30) {
        // idle
      } else if (kind < 45) {
        gpu.used = 1;
        gpu.used_mem_mib = kA100Mem;
        gpu.used_cores = 100;
      } else {
        const int tenants = uni(1, 3);
        for (int t = 0; t < tenants; ++t) {
          const int64_t mem = 1024 * uni(4, 20);
          const int32_t cores = 10 * uni(1, 4);
          if (gpu.used_mem_mib + mem > kA100Mem || gpu.used_cores + cores > 100) break;
          gpu.used += 1;
          gpu.used_mem_mib += mem;
          gpu.used_cores += cores;
        }
      }
      node.gpus.push_back(gpu);
    }
  }
  return nodes;
}

const std::vector<NodeState>& Cluster(int n) {
  static const std::vector<NodeState> k1000 = MakeCluster(1000);
  static const std::vector<NodeState> k5000 = MakeCluster(5000);
  return n == 1000 ? k1000 : k5000;
}

ContainerRequest Ctr(int32_t gpus, int64_t mem, int32_t cores) {
  ContainerRequest c;
  c.name = "app";
  c.num_gpus = gpus;
  c.mem_mib = mem;
  c.cores_percent = cores;
  return c;
}

enum PodKind { kFractional = 0, kFourGpus = 1, kTwoContainers = 2, kTypedFractional = 3 };

PodRequest MakePod(int kind) {
  PodRequest pod;
  switch (kind) {
    case kFractional:  // the common notebook: 10 GiB and 30 % of one card
      pod.containers = {Ctr(1, 10240, 30)};
      break;
    case kFourGpus:  // nvidia.com/gpu: 4 → four whole, exclusive cards
      pod.containers = {Ctr(4, 0, 100)};
      break;
    case kTwoContainers:  // two app containers sharing: the ordered (sorting) path
      pod.containers = {Ctr(1, 8192, 20), Ctr(1, 8192, 20)};
      break;
    case kTypedFractional:  // fractional with nvidia.com/use-gputype: A100,H100
      pod.containers = {Ctr(1, 10240, 30)};
      pod.use_types = {"A100", "H100"};
      break;
  }
  return pod;
}

const char* KindName(int kind) {
  static const char* names[] = {"fractional", "4gpu", "2containers", "typed-fractional"};
  return names[kind];
}

// Items and the nodes/s rate for one pass over `nodes` nodes per iteration.
void CountNodes(benchmark::State& state, int64_t nodes) {
  state.SetItemsProcessed(state.iterations() * nodes);
  state.counters["nodes/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * static_cast<double>(nodes),
                         benchmark::Counter::kIsRate);
}

// What every pod family starts from, built from the benchmark's arguments (range(0) = nodes,
// range(1) = PodKind): the cluster, the pod, its type-verdict cache and the fit options.
// Not copyable: `options.type_cache` points at `cache`, which points at `pod`.
struct PodSetup {
  PodSetup(const benchmark::State& state, bool want_reasons)
      : nodes(Cluster(static_cast<int>(state.range(0)))),
        pod(MakePod(static_cast<int>(state.range(1)))),
        cache(pod) {
    options.want_reasons = want_reasons;
    options.type_cache = &cache;
  }
  PodSetup(const PodSetup&) = delete;
  PodSetup& operator=(const PodSetup&) = delete;

  // Counters and label of a finished run; `fit` = nodes that fit in the last iteration.
  void Finish(benchmark::State& state, int fit) const {
    const int n = static_cast<int>(nodes.size());
    CountNodes(state, n);
    state.counters["fit%"] = 100.0 * fit / n;
    state.SetLabel(KindName(static_cast<int>(state.range(1))));
  }

  const std::vector<NodeState>& nodes;
  const PodRequest pod;
  TypeVerdictCache cache;
  FitOptions options;
};

// Fits(): the allocation-free predicate (simulator, /filter without reasons).
void BM_Fits(benchmark::State& state) {
  PodSetup s(state, /*want_reasons=*/false);
  int fit = 0;
  for (auto _ : state) {
    fit = 0;
    for (const NodeState& node : s.nodes) fit += Fits(s.pod, node, s.options);
    benchmark::DoNotOptimize(fit);
  }
  s.Finish(state, fit);
}

// Fit() with grants on every node; with `want_reasons`, also per-GPU reasons and the summary
// string for every node that does not fit (the extender's /filter with FailedNodes).
void RunFit(benchmark::State& state, bool want_reasons) {
  PodSetup s(state, want_reasons);
  int fit = 0;
  for (auto _ : state) {
    fit = 0;
    for (const NodeState& node : s.nodes) {
      FitResult r = Fit(s.pod, node, s.options);
      fit += r.fits;
      benchmark::DoNotOptimize(r);
    }
  }
  s.Finish(state, fit);
}
void BM_FitNoReasons(benchmark::State& state) { RunFit(state, false); }
void BM_FitWithReasons(benchmark::State& state) { RunFit(state, true); }

// /filter + /prioritize as the extender would run them: Fits() on every node, NodeScore on
// those that fit, PriorityScores to 0–10, ChooseNode, then Fit() with grants on the chosen one.
void BM_FilterScoreChoose(benchmark::State& state) {
  PodSetup s(state, /*want_reasons=*/false);
  std::vector<const NodeState*> fitting;
  std::vector<float> scores;
  fitting.reserve(s.nodes.size());
  scores.reserve(s.nodes.size());
  int fit = 0;
  for (auto _ : state) {
    fitting.clear();
    scores.clear();
    for (const NodeState& node : s.nodes) {
      if (Fits(s.pod, node, s.options)) {
        fitting.push_back(&node);
        scores.push_back(NodeScore(node));
      }
    }
    std::vector<int64_t> priorities = PriorityScores(NodePolicy::kBinpack, scores);
    benchmark::DoNotOptimize(priorities);
    if (!fitting.empty()) {
      FitResult r = Fit(s.pod, *fitting[ChooseNode(NodePolicy::kBinpack, scores)], s.options);
      benchmark::DoNotOptimize(r);
    }
    fit = static_cast<int>(fitting.size());
  }
  s.Finish(state, fit);
}

// NodeScore alone over every node (the /prioritize scoring cost).
void BM_NodeScore(benchmark::State& state) {
  const auto& nodes = Cluster(static_cast<int>(state.range(0)));
  std::vector<float> scores(nodes.size());
  for (auto _ : state) {
    for (size_t i = 0; i < nodes.size(); ++i) scores[i] = NodeScore(nodes[i]);
    benchmark::DoNotOptimize(scores.data());
  }
  CountNodes(state, static_cast<int64_t>(nodes.size()));
}

void PodArgs(benchmark::internal::Benchmark* b) {
  for (int nodes : {1000, 5000}) {
    for (int kind : {kFractional, kFourGpus, kTwoContainers, kTypedFractional}) {
      b->Args({nodes, kind});
    }
  }
  b->ArgNames({"nodes", "pod"})->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_Fits)->Apply(PodArgs);
BENCHMARK(BM_FitNoReasons)->Apply(PodArgs);
BENCHMARK(BM_FitWithReasons)->Apply(PodArgs);
BENCHMARK(BM_FilterScoreChoose)->Apply(PodArgs);
BENCHMARK(BM_NodeScore)->Arg(1000)->Arg(5000)->ArgName("nodes")->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace fracgpu::core
