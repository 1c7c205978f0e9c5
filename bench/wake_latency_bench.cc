// bench_wake_latency — issue 36's wake latency on the fake cluster: the time from a parked
// notebook's first CUDA call after idle to its return, while a borrower holds the memory it
// needs (so the wake evicts the borrower first). Each run is the journey test's whole journey
// (tests/e2e/park_journey.h: notebook idle → parked → borrower placed on the lent memory and
// allocating → the notebook's read wakes it → borrower evicted → bytes restored) on one
// cluster: the fake API server, `fracgpu scheduler`, a node of one 256 MiB fake GPU whose
// `fracgpu monitor --park` polls every 100 ms; the notebook holds 192 MiB, the borrower 128 MiB.
// After each run the notebook is deleted and its memory awaited. Prints one line per run and
// p50 / max in ms.
//
//   build/release/bench/bench_wake_latency [runs=10]
//
// What the figure holds: the wake request seen at the agent's next poll (≤ 100 ms), the
// Eviction API call and the fake kubelet killing the borrower, NVML showing the memory free at a
// later poll, Restore (copy time 0 on the fake: FAKE_CUDA_CHECKPOINT_MIB_PER_S unset) and
// Unlock. A real borrower's graceful termination (up to 30 s) is not in it: the fake API server
// deletes an evicted pod at once.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cluster.h"
#include "park_journey.h"

int main(int argc, char** argv) {
  using namespace fracgpu::e2e;
  const int runs = argc > 1 ? std::atoi(argv[1]) : 10;
  if (runs < 1 || runs > 1000) {
    std::fprintf(stderr, "usage: bench_wake_latency [runs 1..1000]\n");
    return 2;
  }
  constexpr const char* kGpu = "GPU-e0000000-0000-4000-8000-00000000e000";
  ClusterOptions options{{{"node-a", {{kGpu, 256}}}}, "binpack", "binpack"};
  options.park_idle_s = 1;
  Cluster cluster(options);
  std::string error;
  if (!cluster.Start(&error)) {
    std::fprintf(stderr, "bench_wake_latency: the cluster did not start: %s\n", error.c_str());
    return 1;
  }
  NodeAgent& node = cluster.node("node-a");
  const auto empty = node.Nvml(0);
  if (!empty) {
    std::fprintf(stderr, "bench_wake_latency: the fake NVML does not answer\n");
    return 1;
  }
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    ParkJourneyOptions o;
    o.node = "node-a";
    o.notebook = "nb-" + std::to_string(i);
    o.borrower = "borrower-" + std::to_string(i);
    const ParkJourney j = RunParkJourney(cluster, o);
    if (!j.failed.empty() || !j.bytes_intact || !j.borrower_gone) {
      std::fprintf(stderr,
                   "bench_wake_latency: run %d failed: %s (bytes intact %d, borrower gone %d)\n", i,
                   j.failed.c_str(), j.bytes_intact, j.borrower_gone);
      return 1;
    }
    ms.push_back(j.wake_ms);
    std::printf("run %d: wake %.1f ms\n", i, j.wake_ms);
    // The next run needs the GPU empty: the notebook deleted, its memory released.
    if (cluster.DeletePod("ml", o.notebook).status != 200 || !PollUntil(
                                                                 [&] {
                                                                   auto m = node.Nvml(0);
                                                                   return m &&
                                                                          m->used == empty->used;
                                                                 },
                                                                 kWait)) {
      std::fprintf(stderr, "bench_wake_latency: run %d: the notebook's memory was not freed\n", i);
      return 1;
    }
  }
  std::sort(ms.begin(), ms.end());
  std::printf("| wake latency on the fake (ms), %d runs | p50 %.1f | max %.1f |\n", runs,
              ms[(ms.size() - 1) / 2], ms.back());
  return 0;
}
