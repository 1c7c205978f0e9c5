#pragma once
// Upper bounds on the GPU a policy could allocate for one arrival sequence of the experiment
// (docs/simulate.md, "The distance to the optimum" and "A bound for placing policies"): for any
// policy (online or offline, clairvoyant, free to refuse pods), and for placing policies, which
// place every pod that fits as the simulator's do (ForcedPods). Each is the optimum of a linear
// relaxation of the packing, solved with GLPK.

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
  /// LP optimum with the forced pods held (= gpu_milli_any_policy when none is forced): an
  /// upper bound on the milli-GPU a packing of these pods that holds the forced ones places.
  double gpu_milli = 0;
  double gpu_milli_any_policy = 0;  ///< LP optimum without forcing: bounds any packing of them
  int32_t pod_classes = 0;          ///< distinct pod shapes in the LP
  int32_t order_rows = 0;           ///< order rows in the LP (PlacingFacts): added, or carried in
  int32_t node_classes = 0;         ///< distinct node shapes in the LP
};

/// What a bound may assume about the policies it covers, beyond packing the pods at all.
struct PlacingFacts {
  /// Empty, or one flag per pod: pods every policy of interest holds (ForcedPods' for placing
  /// policies).
  std::span<const uint8_t> forced;
  /// The pods are an arrival sequence in order, from the cluster's state, and the policies are
  /// placing ones (each pod that fits somewhere when it arrives is placed, pods never leave):
  /// adds the order rows (bound.cc) that follow from that, as cutting planes.
  bool arrival_order = false;
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
///  - cards (the configuration LP of bin packing over one card, by column generation): per
///    node class and allowed set S, the pieces (a k-GPU pod is k pieces of its share) of the
///    classes restricted to S are covered by ≤ N_t × |S| card patterns, multisets of shares
///    summing to ≤ 1000 milli-GPU with at most as many pieces of a share as there are pods of
///    it; the patterns are priced exactly (a bounded knapsack over the shares), so the LP is
///    over every pattern (bound.cc, CardBlock; over 100 distinct shares in a block they are
///    rounded down to tens of milli-GPU there, which only loosens it);
///  - node granularity (dual feasible functions f of Fekete & Schepers 2001 and Martello &
///    Toth: Σ x ≤ 1 ⇒ Σ f(x) ≤ 1): per node class, Σ f(CPU / CPU_t) · y ≤ N_t and the same for
///    memory (each node is a bin);
/// maximising Σ num_gpus × gpu_milli × y. What it relaxes: pod counts are fractional, and a
/// pod's CPU, memory and GPU may come from different nodes of its class, subject only to the
/// rows above; arrival order and the policy's obligation to place a pod that fits are ignored
/// (it bounds clairvoyant policies that may refuse pods, too). CPU-only pods add nothing to the
/// objective and are left out (which only loosens it).
/// `placing.forced`: its pods' classes get that many as a lower bound, so gpu_milli covers only
/// policies that place them (gpu_milli_any_policy is the LP without). `placing.arrival_order`:
/// gpu_milli also satisfies the order rows (bound.cc: a pod that a placing run places implies
/// that the pods it dominates, arrived before it, were placed), added while the optimum
/// violates one (at most 50 rounds of 20 rows; fewer rows only loosen it).
/// The nodes are taken at their CPU and memory left and with every GPU whole (gpu_left is not
/// read): on partly used GPUs the bound stays valid, only looser.
/// Errors: kInvalidArgument when `forced` has another size, or the forced pods cannot all be
/// held: one fits no node, or the LP with them (and the order rows) is infeasible (flags no
/// real packing honours but the relaxation accepts pass unnoticed; with ForcedPods' flags and
/// a real arrival sequence either would be a defect);
/// kInternal when GLPK fails.
Result<PackingBound> PackingUpperBound(const SimCluster& cluster,
                                       std::span<const core::FragDemand> pods,
                                       const PlacingFacts& placing = {});

/// For each pod of an arrival sequence (in order), 1 only if every *placing* policy — one that
/// puts each arriving pod on some node where it fits (core::Fits), whenever one exists, as
/// every policy of the simulator does, pods never leaving — places it: no placement of the pods
/// arrived before it, however chosen, can leave every node without room for it, from the nodes'
/// state in `cluster.frag` (partly used nodes included). A sufficient test, not an exact one: 0
/// says nothing. A pod of shape p fails only when each node is blocked by its CPU, its memory
/// or its GPUs, and the pods before it would have to pay for that within their CPU (millicores),
/// memory (MiB) and cards; a weighting λ of the three under which they cannot is the proof
/// (the argument is in bound.cc). λ ranges over a grid of the simplex; per shape, the first
/// index where no λ of the grid proves the pod fits is found on prefix sums (they only grow).
/// GPU pods only (CPU-only pods are 0: the bound leaves them out). All 0 when the cluster has
/// no CPU, memory or GPU.
std::vector<uint8_t> ForcedPods(const SimCluster& cluster,
                                std::span<const core::FragDemand> arrivals);

/// A prefix of an arrival sequence: its pod count and their total GPU request (milli-GPU).
struct ArrivalCut {
  size_t pods = 0;
  int64_t gpu_milli = 0;
};

/// The longest prefix of `arrivals` whose cumulative GPU request is ≤ (pct + ½) % of
/// `capacity_milli`: every pod arrived by the last sample of the table's bucket pct (Bucketize
/// rounds arrived % to the nearest bucket). CPU-only pods before the first pod that crosses are
/// in it.
ArrivalCut CutArrivals(std::span<const core::FragDemand> arrivals, int64_t capacity_milli, int pct);

/// The placing-policy bound (PackingUpperBound with `forced` and the order rows) of each prefix
/// of `arrivals` whose length is given in `prefix_pods`, one result per entry in that order.
/// Solved from the longest prefix down: the order rows that bind in a longer prefix start the
/// LP of the next shorter one (they hold for every prefix of it), so a shorter prefix's figure
/// may be tighter than PackingUpperBound's for it alone, and its LP may hold more than the 50
/// rounds' rows. `forced`: empty, or one flag
/// per arrival (ForcedPods' over the whole sequence). Errors: kInvalidArgument for flags of
/// another length or a prefix longer than the arrivals; then as PackingUpperBound.
Result<std::vector<PackingBound>> PrefixBounds(const SimCluster& cluster,
                                               std::span<const core::FragDemand> arrivals,
                                               std::span<const uint8_t> forced,
                                               std::span<const size_t> prefix_pods);

/// The bounds of one arrival sequence, % of capacity, one entry per arrived % asked for.
struct ArrivalBoundSeries {
  /// placing policies (forced pods and order rows), the simulator's kind
  std::vector<double> placing;
  std::vector<double> any_policy;  ///< any policy, free to refuse pods
};

/// The bound as a GPU allocation ratio (% of capacity) for the arrivals of one run (the same
/// sequence RunExperiment builds for `seed` and `tune`) cut at each of `arrived_pct`: the pods
/// whose cumulative GPU request is ≤ (b + ½) % of capacity, the last arrived that the table's
/// bucket b (Bucketize) averages over, so it bounds every sample of that bucket. A bucket with
/// no sample of its own takes its neighbours' mean (Bucketize), whose b + 1 side may exceed it:
/// on the bundled traces every bucket from 80 % on holds samples (one pod is < 0.2 % of 6,212
/// GPUs), on a cluster of a few GPUs not always. Also capped by that request itself and by
/// capacity. `placing` forces, in each cut, the pods ForcedPods marks in the whole sequence (a
/// placing policy has placed them by then), with the order rows of the cut's arrivals;
/// `any_policy` has neither.
/// Errors: as PackingUpperBound.
Result<ArrivalBoundSeries> ArrivalBounds(const SimCluster& cluster, const SimWorkload& workload,
                                         uint64_t seed, double tune,
                                         std::span<const int> arrived_pct);

/// A lower bound on the same optimum: the GPU milli of one real packing of `pods` on the
/// cluster's empty nodes, built offline (all pods known): GPU pods sorted by (GPUs, share)
/// descending, each placed by core::ChooseNode with FGD over `workload`'s M where it fits,
/// refused otherwise; CPU-only pods are left out. The best possible allocation for these pods
/// lies between this and PackingUpperBound.
int64_t OfflinePacking(const SimCluster& cluster, const SimWorkload& workload,
                       std::span<const core::FragDemand> pods);

}  // namespace fracgpu::sim
