// bench_sim — pods placed per second per policy: one run of the paper's experiment (seed 42,
// tune 1.3, 1,213 nodes / 6,212 GPUs, ≈10,800 arriving pods) on the bundled default trace.
// items_per_second = arriving pods scheduled (placed or failed) per second, single-threaded.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>

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

}  // namespace
