#pragma once
// One run of the paper's experiment: one policy, one seed (docs/design/fgd-evaluation.md §2.4, §3).
// Single-threaded and deterministic: the same inputs give the same output on every machine.

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/fgd_policies.h"
#include "sim/cluster.h"
#include "sim/metrics.h"
#include "sim/workload.h"

namespace fracgpu::sim {

/// Options of a run.
struct RunOptions {
  double tune = 1.3;  ///< arrived GPU request as a multiple of capacity (the paper: 1.3)
  /// Cross-check every decision with the scheduler's core fit (core::Fit on the NodeState):
  /// placements always (cheap); with verify_failures also that no node fits a failed pod.
  bool verify_failures = false;
  bool keep_samples = false;     ///< keep the per-pod samples in RunResult::samples
  bool keep_placements = false;  ///< keep each pod's node and GPUs in RunResult::placements
  /// Tie-break order of the nodes: the seeded permutation (the paper), or that permutation
  /// stably sorted by CPU capacity per GPU (descending: CPU-rich nodes first; ascending), or
  /// the nodes by name (kByName: the scheduler extender's order, core::FragmentationPriorities
  /// gives 10 to the first node by name among the best, so a replay through /prioritize and
  /// /bind can be compared pod by pod; tests/scheduler/fragmentation_replay_test.cc).
  enum class NodeOrder { kSeeded, kCpuPerGpuDesc, kCpuPerGpuAsc, kByName };
  NodeOrder node_order = NodeOrder::kSeeded;
  /// FGD family: reuse a node's score for a demand shape until the node changes (same
  /// decisions as without, several times faster). Off only to cross-check that claim.
  bool memoize = true;
};

/// Where one arriving pod went (RunOptions::keep_placements).
struct PodPlacement {
  int32_t pod = -1;               ///< index into SimWorkload::pods
  std::string node;               ///< "" when it fit nowhere
  std::vector<std::string> gpus;  ///< UUIDs of the GPUs granted, in grant order
};

/// What one run produced.
struct RunResult {
  core::PlacementPolicy policy = core::PlacementPolicy::kRandom;
  uint64_t seed = 0;
  int64_t pods = 0;                      ///< pods that arrived
  int64_t failed = 0;                    ///< pods that fit nowhere
  int64_t arrived_milli = 0;             ///< at the end
  int64_t used_milli = 0;                ///< at the end
  BucketedRun buckets;                   ///< buckets 0..max(130, ⌈tune·100⌉)
  std::vector<Sample> samples;           ///< only with keep_samples
  std::vector<PodPlacement> placements;  ///< in arrival order, only with keep_placements
};

/// The fixed tie-break order of the nodes of a run with `seed` under `options.node_order`: indices
/// into cluster.frag / cluster.states (name-sorted), first = preferred among equal scores. For
/// kSeeded a permutation from stream 1 of the seed. RunExperiment orders its nodes by it; a
/// replay through kube-scheduler names its nodes so that their name order is this order
/// (bench/cluster/trace.py).
std::vector<int32_t> TieBreakOrder(const SimCluster& cluster, uint64_t seed,
                                   const RunOptions& options = {});

/// Runs `policy` with `seed`: arrivals from BuildArrivals (stream 0 of the seed), the node
/// tie-break order a seeded permutation of the name-sorted nodes (stream 1), Random's draws
/// from stream 2. Each pod: core::ChooseNode on the compact nodes chooses the node; on it, the
/// policies with core::HasFgdGpuOrder (fragmentation-aware among them) are placed by
/// core::FitFragmentationAware over the trace's M with the pod's CPU (core/frag_choice, the
/// fit /bind and the UI preview run), every other policy by core::Fit with the policy's GPUs
/// first; either must grant exactly the GPUs the policy picked. The grant is recorded with
/// core::AddPodGrants. Errors: kInternal when the fit disagrees with the policy's feasibility or
/// GPUs (a bug), naming pod, node and fit's summary.
Result<RunResult> RunExperiment(const SimCluster& cluster, const SimWorkload& workload,
                                core::PlacementPolicy policy, uint64_t seed,
                                const RunOptions& options = {});

}  // namespace fracgpu::sim
