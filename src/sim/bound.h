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
///  - per t: Σ y over classes with num_gpus > GPUs_t / 2 and a share > 500 milli ≤ N_t (two
///    such pods would need one card for both);
///  - granularity (dual feasible functions f of Fekete & Schepers 2001 and Martello & Toth:
///    Σ x ≤ 1 ⇒ Σ f(x) ≤ 1): per node class and allowed set S, Σ num_gpus · f(share) · y ≤
///    N_t × |S| over the classes restricted to S (each card is a bin); per node class,
///    Σ f(CPU / CPU_t) · y ≤ N_t and the same for memory (each node is a bin);
/// maximising Σ num_gpus × gpu_milli × y. What it relaxes: pod counts are fractional, and a
/// pod's CPU, memory and GPU may come from different nodes of its class, subject only to the
/// rows above; arrival order and the policy's obligation to place a pod that fits are ignored
/// (it bounds clairvoyant policies that may refuse pods, too). CPU-only pods add nothing to the
/// objective and are left out (which only loosens it). Errors: kInternal when GLPK fails.
/// `forced` (empty, or one flag per pod of `pods`): pods every policy of interest holds, e.g.
/// ForcedPods' for a placing policy; their classes' rows get that many as a lower bound, so the
/// bound covers only policies that place them. Errors: kInvalidArgument when `forced` has
/// another size; kInternal when no packing holds the forced pods (a defect, never the input's).
Result<PackingBound> PackingUpperBound(const SimCluster& cluster,
                                       std::span<const core::FragDemand> pods,
                                       std::span<const uint8_t> forced = {});

/// For each pod of an arrival sequence (in order), 1 when every *placing* policy — one that
/// puts each arriving pod on some node where it fits (core::Fits), whenever one exists, as
/// every policy of the simulator does — has placed it: no placement of the pods arrived before
/// it, however chosen, can leave every node without room for it. A pod of shape p can fail only
/// when each node is blocked by its CPU, its memory or its GPUs (see CanBlock in bound.cc), and
/// the pods before it pay for that within their total CPU, memory and card use; the first
/// index where an LP over node classes finds that affordable is found by binary search (the
/// budgets only grow). GPU pods only (CPU-only pods are 0: the bound leaves them out).
std::vector<uint8_t> ForcedPods(const SimCluster& cluster,
                                std::span<const core::FragDemand> arrivals);

/// Which policies a bound covers: every policy (online or offline, free to refuse pods), or
/// only placing ones (ForcedPods), as the simulator's are.
enum class BoundScope { kAnyPolicy, kPlacingPolicy };

/// The bound as a GPU allocation ratio (% of capacity) for the arrivals of one run (the same
/// sequence RunExperiment builds for `seed` and `tune`) cut at each of `arrived_pct`: the pods
/// whose cumulative GPU request is ≤ (b + ½) % of capacity, the last arrived that the table's
/// bucket b (Bucketize) averages over, so it bounds every sample of that bucket. Also capped by
/// that request itself and by capacity. With kPlacingPolicy, the pods ForcedPods marks among
/// the whole sequence are forced in each cut (a placing policy has placed them by then).
/// Errors: as PackingUpperBound.
Result<std::vector<double>> ArrivalBounds(const SimCluster& cluster, const SimWorkload& workload,
                                          uint64_t seed, double tune,
                                          std::span<const int> arrived_pct,
                                          BoundScope scope = BoundScope::kAnyPolicy);

/// A lower bound on the same optimum: the GPU milli of one real packing of `pods` on the
/// cluster's empty nodes, built offline (all pods known): GPU pods sorted by (GPUs, share)
/// descending, each placed by core::ChooseNode with FGD over `workload`'s M where it fits,
/// refused otherwise; CPU-only pods are left out. The best possible allocation for these pods
/// lies between this and PackingUpperBound.
int64_t OfflinePacking(const SimCluster& cluster, const SimWorkload& workload,
                       std::span<const core::FragDemand> pods);

}  // namespace fracgpu::sim
