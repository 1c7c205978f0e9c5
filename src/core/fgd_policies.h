#pragma once
// Node + GPU placement policies of the FGD paper (Weng et al., USENIX ATC '23) — FGD and the
// baselines Random, DotProduct, GpuClustering, GpuPacking, BestFit — with exactly the semantics
// of the authors' simulator (docs/design/fgd-evaluation.md §2.3 and §3 points 7–9), plus
// fracgpu's own refinements of FGD. Pure functions: no I/O, no clock; randomness only through
// the SeededRng the caller passes.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "core/frag.h"
#include "core/seeded_rng.h"

namespace fracgpu::core {

/// A node+GPU placement policy.
enum class PlacementPolicy {
  kRandom,         ///< uniform among feasible nodes per pod; uniform among fitting GPUs
  kDotProduct,     ///< Tetris-style alignment of free CPU/GPU with the request (lowest wins)
  kGpuClustering,  ///< keep pods with the same GPU-request affinity together
  kGpuPacking,     ///< prefer partially used GPUs, then used nodes, then idle nodes
  kBestFit,        ///< least weighted CPU+GPU leftover after placement
  kFgd,            ///< fragmentation gradient descent, integer scores (the paper's FGD)
  /// fracgpu: FGD, ties between nodes broken by the BestFit score instead of node order.
  kFgdBestFit,
  /// fracgpu: FGD comparing the exact ΔF (no integer truncation of sigmoid(ΔF)·100).
  kFgdExact,
  /// fracgpu: FGD with coarser scores, int(sigmoid(ΔF / 1000) × 20): more ties, so more pods
  /// follow the fixed node order (packing).
  kFgdCoarse,
  /// fracgpu: FGD, ties between nodes broken by the GpuPacking score.
  kFgdPacking,
  /// fracgpu: FGD over a target workload selected from shape counts scaled by the GPUs a
  /// shape needs (GpuWeightedCounts): protects whole free cards for multi-GPU pods. Scored like
  /// kFgd; the caller passes the GPU-weighted FragWorkload.
  kFgdGpuWeighted,
  /// fracgpu: FGD over the CPU-aware measure NodeFragmentCpuAware (GPU that a shape's CPU
  /// cannot reach counts as fragment, gradually, not only at the cliff). Integer scores as kFgd.
  kFgdCpu,
  /// fracgpu: kFgdCpu, ties between nodes broken by the BestFit score.
  kFgdCpuBestFit,
  /// fracgpu: FGD with finer scores, int(sigmoid(ΔF / 1000) × 1000): fewer ties.
  kFgdFine,
  /// fracgpu: exact ΔF for GPU pods, the paper's integer score for CPU-only pods (which then
  /// still tie and follow the node order).
  kFgdHybrid,
  /// fracgpu: FGD; ties of a CPU-only pod go first to nodes whose GPUs are all allocated (its
  /// CPU strands no GPU there), ties of a GPU pod first to nodes already using a GPU (keeps
  /// whole nodes free for multi-GPU pods); then node order.
  kFgdKeepFree,
  /// fracgpu: FGD; ties of a CPU-only pod go first to nodes whose CPU surplus after the
  /// placement — CPU left minus the CPU their GPU left would need at the workload's CPU per GPU,
  /// r = Σ p·cpu / Σ p·GPU over M's GPU shapes — stays ≥ 0 (CPU to spare), then node order.
  kFgdCpuBalance,
  /// fracgpu: FGD with CPU routing, at the paper's score scale (int(sigmoid(ΔF / 1000) × 100)).
  /// A pod that is CPU-only or CPU-heavy — more CPU per milli-GPU than the workload's r (as
  /// kFgdCpuBalance) — goes first, before any FGD score, to a node whose CPU surplus after the
  /// placement stays ≥ 0 (CpuRouteFirst); then the FGD score; then node order. CPU-light GPU
  /// pods are placed by FGD alone.
  kFgdCpuRoute100,
  /// fracgpu: kFgdCpuRoute100 with the FGD score at scale 70, int(sigmoid(ΔF / 1000) × 70)
  /// (FgdScoreScale), both between nodes and for the GPU of a sharing pod within a node. The
  /// best variant of "Beyond FGD" (docs/simulate.md); kFragmentationAwarePolicy until
  /// 2026-12-05.
  kFgdCpuRoute,
  /// fracgpu: kFgdCpuRoute with a crumb key between the route and the FGD score: a sharing pod
  /// goes first to a node where its GPU (FGD's choice there, unchanged) is not left with a crumb,
  /// a leftover in (kCrumbFloorMilli, CrumbCeilingMilli(M)) that is too large to count as full
  /// and too small for all but 1 % of M's GPU pods (LeavesCrumb). Keys: route, no crumb, FGD
  /// score at scale 70, node order (docs/simulate.md "Beyond FGD+CpuRoute").
  kFgdCpuRouteCrumb,
  /// Not a policy of the extender: kube-scheduler's DRA structured allocator as the baseline
  /// (docs/dra.md "The same core"): the first feasible node in node order, on it the first
  /// GPUs in index (slice) order whose remaining capacity fits (core::DraFirstFitPick).
  kDraFirstFit,
};

/// The FGD variant that `fragmentation-aware` selects in the scheduler and the simulator
/// (docs/simulate.md, "Beyond FGD+CpuRoute"): FGD+CpuRoute+Crumb, FGD at score scale 70 whose
/// CPU-only and CPU-heavy pods go first to nodes with CPU to spare, then sharing pods to a GPU
/// not left with a crumb. 96.32 % on the default trace at 130 % arrived (held-out seeds
/// 5000–5009; FGD+CpuRoute 95.99) and above FGD+CpuRoute on all six variant traces. Where node
/// CPU is not tracked (a node without allocatable CPU) every node has CPU to spare; the extender
/// reads allocatable CPU and the pods' requests (core/cluster_state.h, issue 34 item 7).
inline constexpr PlacementPolicy kFragmentationAwarePolicy = PlacementPolicy::kFgdCpuRouteCrumb;

/// The six policies of the paper, in its order (01-Random … 06-FGD).
std::vector<PlacementPolicy> PaperPolicies();
/// Every policy this file implements.
std::vector<PlacementPolicy> AllPlacementPolicies();
/// Display name: "Random", "DotProduct", "GpuClustering", "GpuPacking", "BestFit", "FGD",
/// "FGD+BestFit", "FGD-exact", "FGD-coarse", "FGD+GpuPacking", "FGD-gpuweighted", …,
/// "DRA-FirstFit".
const char* PlacementPolicyName(PlacementPolicy policy);
/// Parses a display name, case-insensitively; also accepts the paper's "DotProd" and the
/// scheduler name "fragmentation-aware" (kFragmentationAwarePolicy). Errors: kInvalidArgument
/// naming the value and listing the valid names.
Result<PlacementPolicy> ParsePlacementPolicy(std::string_view name);

/// A node's score under a policy and the GPUs the policy would give the pod there.
struct PlacementScore {
  double score = 0;  ///< higher is better; integral for every policy except kFgdExact
  GpuPick pick;
};

/// Scores a node on which `demand` fits (Fits() is true), docs/design/fgd-evaluation.md §3 point 7:
///  - FGD: ΔF = F_n(M) before − after the hypothetical placement (CPU included);
///    score = int(sigmoid(ΔF / 1000) × 100); a sharing pod tries each fitting GPU in index
///    order and keeps the first with the strictly highest score (that GPU is used); other pods
///    take the tightest fitting GPUs.
///  - BestFit: int((1 − [0.5·(cpuLeft−cpu)/128000 + 0.5·(gpuLeft−gpuReq)/8000]) × 100).
///  - DotProduct: int(100 × (1 − (cpuLeft/128000·cpu/128000 + gpuLeft/8000·gpuReq/8000) / 2)).
///  - GpuPacking, GpuClustering: as the authors' plugins (see the .cc).
///  - Random: score 0 (ChooseNode picks uniformly instead).
///  - DRA-FirstFit: score 0, the GPUs of DraFirstFitPick (ChooseNode takes the first feasible
///  node).
/// `frag_before` is PolicyFragment(policy, node, workload) (only FGD variants read it and
/// `workload`).
PlacementScore ScoreNode(PlacementPolicy policy, const FragNode& node, const FragDemand& demand,
                         const FragWorkload& workload, double frag_before);

/// Where one pod goes.
struct Placement {
  int32_t node = -1;  ///< index into the node list; -1 when the pod fits nowhere
  GpuPick pick;
  double score = 0;
};

/// Chooses a node and GPUs for `demand` among `nodes` (§3 points 7–9): the feasible node with
/// the highest score; equal scores go to the node that comes first in `nodes`, so the caller's
/// node order is the (fixed, seeded) tie-break order. Random draws one feasible node and, for a
/// sharing pod, one fitting GPU uniformly from `rng`. `node_frag[i]` must equal
/// NodeFragment(nodes[i], workload) for the FGD variants (may be empty otherwise).
Placement ChooseNode(PlacementPolicy policy, std::span<const FragNode> nodes,
                     std::span<const double> node_frag, const FragDemand& demand,
                     const FragWorkload& workload, SeededRng& rng);

/// True for the policies that read F_n(M) (the FGD family).
bool UsesFragment(PlacementPolicy policy);

/// True for the policies whose GPU choice within a node is the paper's FGD one over their
/// workload: a sharing pod takes the first GPU in index order with the highest
/// int(sigmoid(ΔF / 1000) × FgdScoreScale(policy)) of NodeFragment, other pods the tightest
/// GPUs; they differ from FGD only between nodes (and in the scale). That is the order of
/// FragmentationModel::Orderer (frag_scheduler.h), so core/frag_choice can place their pods:
/// kFgd, kFgdGpuWeighted, kFgdBestFit, kFgdPacking, kFgdKeepFree, kFgdCpuBalance,
/// kFgdCpuRoute100, kFgdCpuRoute (kFragmentationAwarePolicy) and kFgdCpuRouteCrumb.
bool HasFgdGpuOrder(PlacementPolicy policy);

/// The integer scale of a HasFgdGpuOrder policy's FGD score, int(sigmoid(ΔF / 1000) × scale):
/// 100 (kube-scheduler's framework.MaxNodeScore, the paper's) except 70 for kFgdCpuRoute and
/// kFgdCpuRouteCrumb.
int32_t FgdScoreScale(PlacementPolicy policy);

/// True for the policies that route CPU-only and CPU-heavy pods by CpuRouteFirst before the
/// FGD score: kFgdCpuRoute100, kFgdCpuRoute and kFgdCpuRouteCrumb.
bool RoutesCpu(PlacementPolicy policy);

/// M's CPU per milli-GPU over its GPU shapes, r = Σ p·cpu_milli / Σ p·gpu_milli·num_gpus (p the
/// popularity); 0 when M has no GPU shape (then no pod is CPU-heavy).
double WorkloadCpuPerGpuMilli(const FragWorkload& workload);

/// The CPU route of kFgdCpuRoute: true when `demand` is CPU-only or CPU-heavy (cpu_milli >
/// r × its total milli-GPU, r = `cpu_per_gpu_milli`) and the node's CPU surplus after the
/// placement, (cpu_left − cpu) − r × (GPU left − GPU asked), milli-CPU, stays ≥ 0: the node keeps
/// the CPU its remaining GPUs need at the workload's ratio. False for a CPU-light GPU pod (FGD
/// alone places it) and on nodes the placement would leave short. A node whose CPU is not
/// tracked (cpu_left "unlimited", ToFragNode) always has a surplus.
bool CpuRouteFirst(const FragNode& node, const FragDemand& demand, double cpu_per_gpu_milli);

/// Leftovers of a GPU up to this many milli-GPU (a tenth of a card) count as a full card for
/// kFgdCpuRouteCrumb, not as a crumb (chosen on tuning seeds 1000–1019 of the default trace,
/// docs/simulate.md "Beyond FGD+CpuRoute").
inline constexpr int32_t kCrumbFloorMilli = 100;

/// The crumb ceiling of kFgdCpuRouteCrumb, milli-GPU: the 1 % quantile of M's per-GPU share,
/// popularity-weighted over M's GPU shapes (the smallest share s such that the shapes asking
/// ≤ s per GPU hold ≥ 1 % of the GPU shapes' popularity). A leftover below it fits fewer than
/// 1 % of the GPU pods M expects. 0 when M has no GPU shape (then nothing is a crumb).
int32_t CrumbCeilingMilli(const FragWorkload& workload);

/// True when `demand` is a sharing pod (FragDemand::Sharing) and `pick` (one GPU of `node`)
/// would be left with a crumb: kCrumbFloorMilli < gpu_left − gpu_milli < `ceiling`. False for
/// whole-card, multi-GPU and CPU-only pods.
bool LeavesCrumb(const FragNode& node, const FragDemand& demand, const GpuPick& pick,
                 int32_t ceiling);

/// The fragment measure the policy reads, milli-GPU: NodeFragmentCpuAware for the CPU-aware
/// variants, NodeFragment otherwise. ChooseNode's `node_frag[i]` must equal this.
double PolicyFragment(PlacementPolicy policy, const FragNode& node, const FragWorkload& workload);

/// Shape counts scaled by max(1, num_gpus), for selecting the target workload of
/// kFgdGpuWeighted with SelectTargetWorkload: an 8-GPU shape weighs as much as 8 one-GPU pods,
/// so multi-GPU shapes enter M and their need for whole free cards counts.
std::vector<ShapeCount> GpuWeightedCounts(std::vector<ShapeCount> counts);

}  // namespace fracgpu::core
