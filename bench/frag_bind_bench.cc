// bench_frag_bind — the fragmentation-aware part of /bind (issue 18): scheduler::FitForBind
// (core::FitFragmentationAware over the target workload of every running pod) at 1,000 and
// 5,000 nodes × 8 GPUs, half loaded as in bench_filter, p50 / p99 in milliseconds, in process:
// the node copy and FitForBind that Extender::BindLocked runs (no HTTP, no node lock, no
// Binding call to the API server: those are the same for every policy). Compared
// with the spread policy's fit on the same node. A CLI that prints a table; cpu_* is the
// thread's CPU time per bind, which a loaded machine inflates far less than wall time.
//
// A second table times Extender::Prioritize (in process, decoded args) for the same pod with
// the spread node policy and with fragmentation-aware (FGD's node score per candidate,
// core::FragmentationAwarePriorities), for as many candidates as kube-scheduler sends after
// filtering — numFeasibleNodesToFind: max(100, nodes × max(5, 50 − nodes / 125) %), 500 at
// 5,000 nodes (kube-scheduler schedule_one.go) — and for every node.
//
//   bench_frag_bind [binds per size, default 300]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/clock.h"
#include "bench_cluster.h"
#include "core/annotations.h"
#include "core/codec.h"
#include "core/fgd_policies.h"
#include "scheduler/extender.h"
#include "scheduler/gpu_choice.h"
#include "scheduler/state.h"

namespace {

using nlohmann::json;
using namespace fracgpu;

double ThreadCpuMs() {
  return std::chrono::duration<double, std::milli>(base::ThreadCpuTime()).count();
}

double Pct(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty()
             ? 0.0
             : v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  const int binds = argc > 1 ? std::max(50, std::atoi(argv[1])) : 300;
  double load[1] = {0};
  if (getloadavg(load, 1) != 1) load[0] = -1;
  std::printf("load average (1 min) at start: %.2f; %d binds per size; fragmentation-aware = %s\n",
              load[0], binds, core::PlacementPolicyName(core::kFragmentationAwarePolicy));
  std::printf("%-6s %-6s %-20s %8s %8s %8s %10s %10s\n", "nodes", "gpus", "policy", "p50_ms",
              "p99_ms", "max_ms", "cpu_p50_ms", "cpu_p99_ms");
  core::PodRequest req;
  core::ContainerRequest c;
  c.name = "main";
  c.num_gpus = 1;
  c.mem_mib = 30000;
  c.cores_percent = 30;
  req.containers.push_back(c);
  for (int nodes : {1000, 5000}) {
    scheduler::ClusterState state;
    bench::Populate(state, nodes);
    for (const core::GpuPolicy policy :
         {core::GpuPolicy::kSpread, core::GpuPolicy::kFragmentationAware}) {
      std::vector<double> ms, cpu_ms;
      size_t fits = 0;
      for (int i = 0; i < binds + 20; ++i) {
        const std::string name = "node-" + std::to_string((i * 7919) % nodes);
        core::FitResult fit;
        const double c0 = ThreadCpuMs();
        const auto t0 = std::chrono::steady_clock::now();
        // As Extender::BindLocked: a copy of the node, then FitForBind.
        const auto node = state.Node(name);
        if (node) fit = scheduler::FitForBind(req, *node, state, policy);
        const auto t1 = std::chrono::steady_clock::now();
        const double c1 = ThreadCpuMs();
        fits += fit.fits;
        if (i >= 20) {
          ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
          cpu_ms.push_back(c1 - c0);
        }
      }
      std::printf("%-6d %-6d %-20s %8.3f %8.3f %8.3f %10.3f %10.3f   (%zu of %d fit)\n", nodes,
                  nodes * 8, policy == core::GpuPolicy::kSpread ? "spread" : "fragmentation-aware",
                  Pct(ms, 0.5), Pct(ms, 0.99), Pct(ms, 1.0), Pct(cpu_ms, 0.5), Pct(cpu_ms, 0.99),
                  fits, binds + 20);
    }
  }
  std::printf("\n/prioritize, in process (%d calls per row)\n", binds / 5);
  std::printf("%-6s %-10s %-20s %8s %8s %10s\n", "nodes", "candidates", "policy", "p50_ms",
              "p99_ms", "cpu_p99_ms");
  for (int nodes : {1000, 5000}) {
    scheduler::ClusterState state;
    bench::Populate(state, nodes);
    scheduler::Extender extender({}, &state, nullptr, nullptr, nullptr, nullptr);
    const int feasible = std::max(100, nodes * std::max(5, 50 - nodes / 125) / 100);
    for (int candidates : {feasible, nodes}) {
      for (const char* policy : {"spread", "fragmentation-aware"}) {
        scheduler::ExtenderArgs args;
        args.pod = bench::BenchPod(std::string(policy) == "spread"
                                       ? json{{core::kAnnotationNodePolicy, "spread"}}
                                       : json{{core::kAnnotationGpuPolicy, "fragmentation-aware"}});
        for (int n = 0; n < candidates; ++n) args.node_names.push_back("node-" + std::to_string(n));
        std::vector<double> ms, cpu_ms;
        for (int i = 0; i < binds / 5 + 5; ++i) {
          const double c0 = ThreadCpuMs();
          const auto t0 = std::chrono::steady_clock::now();
          const json scores = extender.Prioritize(args);
          const auto t1 = std::chrono::steady_clock::now();
          const double c1 = ThreadCpuMs();
          if (scores.size() != args.node_names.size()) return 1;
          if (i >= 5) {
            ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
            cpu_ms.push_back(c1 - c0);
          }
        }
        std::printf("%-6d %-10d %-20s %8.3f %8.3f %10.3f\n", nodes, candidates, policy,
                    Pct(ms, 0.5), Pct(ms, 0.99), Pct(cpu_ms, 0.99));
      }
    }
  }
  return 0;
}
