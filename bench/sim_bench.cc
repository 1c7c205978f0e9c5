// bench_sim — pods placed per second per policy: one run of the paper's experiment (seed 42,
// tune 1.3, 1,213 nodes / 6,212 GPUs, ≈10,800 arriving pods) on the bundled default trace.
// items_per_second = arriving pods scheduled (placed or failed) per second, single-threaded.
// BM_PackingBound: one LP of the packing upper bound (sim/bound.h) for seed 42's arrivals cut
// at 100 % or 130 % of capacity (the arrived % is the argument), and BM_OfflinePacking the
// offline packing of the same pods. BM_ForcedPods: ForcedPods over all of seed 42's arrivals
// (130 %); BM_PlacingBound: PackingUpperBound with those pods forced and the order rows at
// 100 % or 130 % (ArrivalBounds' placing bound): the LP without them, again with the forced
// pods unless its optimum already holds them, then the cutting-plane rounds of order rows.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "sim/bound.h"
#include "sim/simulator.h"

namespace {

using fracgpu::core::PlacementPolicy;

struct Inputs {
  fracgpu::sim::SimCluster cluster;
  fracgpu::sim::SimWorkload workload;
};

const Inputs& LoadInputs() {
  static const Inputs* inputs = [] {
    const std::string dir = FRACGPU_DATA_DIR;
    auto nodes = fracgpu::sim::LoadNodeCsv(dir + "/csv/openb_node_list_gpu_node.csv");
    auto pods = fracgpu::sim::LoadPodCsv(dir + "/csv/openb_pod_list_default.csv");
    if (!nodes.ok() || !pods.ok()) {
      std::fprintf(stderr, "bench_sim: cannot load the trace under %s\n", dir.c_str());
      std::exit(1);
    }
    auto cluster = fracgpu::sim::BuildCluster(*nodes, "nodes");
    auto workload = fracgpu::sim::PrepareWorkload(std::move(pods).value(), *cluster, 95, "pods");
    if (!cluster.ok() || !workload.ok()) std::exit(1);
    return new Inputs{std::move(cluster).value(), std::move(workload).value()};
  }();
  return *inputs;
}

void BM_SimulateRun(benchmark::State& state) {
  const auto policy = static_cast<PlacementPolicy>(state.range(0));
  const Inputs& in = LoadInputs();
  int64_t pods = 0;
  for (auto _ : state) {
    auto r = fracgpu::sim::RunExperiment(in.cluster, in.workload, policy, 42);
    if (!r.ok()) {
      state.SkipWithError(r.status().message().c_str());
      return;
    }
    pods += r->pods;
    benchmark::DoNotOptimize(r->used_milli);
  }
  state.SetItemsProcessed(pods);
  state.SetLabel(fracgpu::core::PlacementPolicyName(policy));
}

void AllPolicies(benchmark::internal::Benchmark* b) {
  for (PlacementPolicy p : fracgpu::core::AllPlacementPolicies()) b->Arg(static_cast<int>(p));
}

BENCHMARK(BM_SimulateRun)->Apply(AllPolicies)->Unit(benchmark::kMillisecond)->Iterations(1);

// Seed 42's arrivals up to `pct` % of capacity (the cut ArrivalBounds makes, CutArrivals).
std::vector<fracgpu::core::FragDemand> ArrivedPods(const Inputs& in, int pct) {
  fracgpu::core::SeededRng rng(42, 0);
  std::vector<fracgpu::core::FragDemand> out;
  for (int32_t idx :
       fracgpu::sim::BuildArrivals(in.workload.pods, in.cluster.CapacityMilli(), 1.3, rng))
    out.push_back(in.workload.demand[idx]);
  out.resize(fracgpu::sim::CutArrivals(out, in.cluster.CapacityMilli(), pct).pods);
  return out;
}

void BM_PackingBound(benchmark::State& state) {
  const Inputs& in = LoadInputs();
  const auto pods = ArrivedPods(in, static_cast<int>(state.range(0)));
  double milli = 0;
  for (auto _ : state) {
    auto b = fracgpu::sim::PackingUpperBound(in.cluster, pods);
    if (!b.ok()) {
      state.SkipWithError(b.status().message().c_str());
      return;
    }
    milli = b->gpu_milli;
  }
  state.counters["bound_pct"] = 100.0 * milli / static_cast<double>(in.cluster.CapacityMilli());
}

void BM_OfflinePacking(benchmark::State& state) {
  const Inputs& in = LoadInputs();
  const auto pods = ArrivedPods(in, static_cast<int>(state.range(0)));
  int64_t milli = 0;
  for (auto _ : state) milli = fracgpu::sim::OfflinePacking(in.cluster, in.workload, pods);
  state.counters["packed_pct"] =
      100.0 * static_cast<double>(milli) / static_cast<double>(in.cluster.CapacityMilli());
}

void BM_ForcedPods(benchmark::State& state) {
  const Inputs& in = LoadInputs();
  const auto pods = ArrivedPods(in, 130);
  int64_t forced = 0;
  for (auto _ : state) {
    const auto f = fracgpu::sim::ForcedPods(in.cluster, pods);
    forced = 0;
    for (uint8_t x : f) forced += x;
  }
  state.counters["forced"] = static_cast<double>(forced);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(pods.size()));
}

void BM_PlacingBound(benchmark::State& state) {
  const Inputs& in = LoadInputs();
  const auto all = ArrivedPods(in, 130);
  const auto forced_all = fracgpu::sim::ForcedPods(in.cluster, all);
  const size_t cut =
      fracgpu::sim::CutArrivals(all, in.cluster.CapacityMilli(), static_cast<int>(state.range(0)))
          .pods;
  const std::vector<fracgpu::core::FragDemand> pods(all.begin(), all.begin() + cut);
  const std::vector<uint8_t> forced(forced_all.begin(), forced_all.begin() + cut);
  double milli = 0;
  int32_t rows = 0;
  for (auto _ : state) {
    auto b = fracgpu::sim::PackingUpperBound(in.cluster, pods,
                                             {.forced = forced, .arrival_order = true});
    if (!b.ok()) {
      state.SkipWithError(b.status().message().c_str());
      return;
    }
    milli = b->gpu_milli;
    rows = b->order_rows;
  }
  state.counters["bound_pct"] = 100.0 * milli / static_cast<double>(in.cluster.CapacityMilli());
  state.counters["order_rows"] = static_cast<double>(rows);
}

BENCHMARK(BM_PackingBound)->Arg(100)->Arg(130)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ForcedPods)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PlacingBound)->Arg(100)->Arg(130)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_OfflinePacking)->Arg(100)->Arg(130)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
