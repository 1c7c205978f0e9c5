#pragma once
// An upper bound on the GPU any policy — online or offline, clairvoyant, free to refuse pods —
// could allocate for one arrival sequence of the experiment (docs/simulate.md, "The distance to
// the optimum"). It is the optimum of a linear relaxation of the packing, solved with GLPK.

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "core/frag.h"
#include "sim/cluster.h"
#include "sim/workload.h"

namespace fracgpu::sim {

/// The bound for one multiset of pods.
struct PackingBound {
  double gpu_milli = 0;      ///< LP optimum: most milli-GPU any packing of these pods can place
  int32_t pod_classes = 0;   ///< distinct pod shapes in the LP
  int32_t node_classes = 0;  ///< distinct node shapes in the LP
};

/// Upper bound on Σ num_gpus × gpu_milli of the pods of `pods` that any assignment to the
/// cluster's (empty) nodes can hold. Pods are grouped into classes (CPU, memory, GPUs,
/// per-GPU share, allowed types) and nodes into classes (CPU, memory, GPUs and their types);
/// y[c][t] ≥ 0 is the number of class-c pods on class-t nodes, allowed only where a c pod fits
/// an empty t node. Each is an aggregated constraint that every integral packing satisfies:
///  - Σ_t y[c][t] ≤ pods of class c;
///  - per t: Σ CPU ≤ N_t × CPU_t, Σ memory ≤ N_t × memory_t, Σ GPU milli over the GPUs a class
///    may use ≤ N_t × (those GPUs) × 1000 (one row per distinct allowed-type set);
///  - per t: Σ num_gpus · y over classes with a share > 500 milli ≤ N_t × GPUs_t (no card holds
///    two such shares);
///  - per t: Σ y over classes with num_gpus > GPUs_t / 2, or CPU > CPU_t / 2, or memory >
///    memory_t / 2, ≤ N_t (at most one such pod per node);
/// maximising Σ num_gpus × gpu_milli × y. What it relaxes: a pod's CPU, memory and GPU may come
/// from different nodes of its class, and shares ≤ 500 milli pack a card perfectly. CPU-only
/// pods add nothing to the objective and are left out. Errors: kInternal when GLPK fails.
Result<PackingBound> PackingUpperBound(const SimCluster& cluster,
                                       std::span<const core::FragDemand> pods);

/// The bound as a GPU allocation ratio (% of capacity) for the arrivals of one run (the same
/// sequence RunExperiment builds for `seed` and `tune`) cut at each of `arrived_pct`: the pods
/// whose cumulative GPU request is ≤ b % of capacity. Also capped by that request itself.
/// Errors: as PackingUpperBound.
Result<std::vector<double>> ArrivalBounds(const SimCluster& cluster, const SimWorkload& workload,
                                          uint64_t seed, double tune,
                                          std::span<const int> arrived_pct);

}  // namespace fracgpu::sim
