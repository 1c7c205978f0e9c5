#pragma once
// Scoring policies as the HAMi scheduler applies them (docs/design/hami-behaviour.md §3.5 steps 4–5
// and §3.6 "GPU sort order"): the per-GPU score and GPU order for one container (GPU policies
// binpack / spread), the link-score choice (topology-aware), the node score and node choice
// (node policies binpack / spread), and the mapping of node scores to the extender's 0–10
// /prioritize range (docs/design/CONTRACT.md §5). Pure functions; thread-safe.

#include <cstdint>
#include <span>
#include <vector>

#include "core/fit.h"
#include "core/node.h"
#include "core/request.h"

namespace fracgpu::core {

/// HAMi's per-GPU score for a container (`ComputeScore`, weights slot = core = memory = 1):
///   10 × ((num_gpus + used) / count + (cores + used_cores) / devcore
///         + (mem + used_mem_mib) / devmem_mib)
/// computed in 32-bit float as HAMi does, where mem = container.MemOn(devmem_mib) MiB.
/// A term whose denominator is 0 counts 0 (HAMi would produce Inf/NaN).
/// (fixed) HAMi converts a memory percentage with integer division (pct / 100 == 0 below
/// 100 %); we use the MiB the container would really take.
float DeviceScore(const ContainerRequest& container, const DeviceInfo& info, const GpuUsage& usage);

/// HAMi's node score (`ComputeDefaultScore`), on the node before the pod:
///   10 × (Σused / Σcount + Σused_cores / Σdevcore + Σused_mem / Σdevmem), range 0..30
/// (32-bit float). A term whose denominator is 0 counts 0; a node without GPUs scores 0.
float NodeScore(const NodeState& node);

/// Writes into `order` (size node.gpus.size()) the positions of the node's GPUs in the order
/// fit tries them, first at order[0]. This is HAMi's `DeviceUsageList` sort read from the end:
///   spread (and topology-aware, and fragmentation-aware without an orderer):
///       DeviceScore ascending (least-used first), then NUMA ascending, then position;
///   binpack: DeviceScore descending (most-used first), then NUMA ascending, then position;
///   numa_bind + binpack: NUMA ascending, then DeviceScore descending, then position;
///   numa_bind + spread:  NUMA descending, then DeviceScore ascending, then position.
/// The final position tie-break is fracgpu's (HAMi's sort.Sort is unstable).
/// `usage` (same size) is the usage to score against. Allocation-free up to 16 GPUs.
void OrderGpus(GpuPolicy policy, bool numa_bind, const ContainerRequest& container,
               const NodeState& node, std::span<const GpuUsage> usage, std::span<uint16_t> order);

/// DeviceScore with HAMi v2.10.0's per-pod weights (`ComputeScore`):
///   10 × (slot × slots term + core × cores term + memory × memory term).
/// Equal to DeviceScore when `weights` is 1/1/1.
float WeightedDeviceScore(const ContainerRequest& container, const DeviceInfo& info,
                          const GpuUsage& usage, const ScoringWeights& weights);

/// The GPU order for `container` of `pod` under `policy`: OrderGpus, unless the pod's
/// `hami.io/gpu-scheduler-policy` or `hami.io/device-scoring-weights` asks for one of
/// HAMi v2.10.0's other orders (`DeviceUsageList.Less`, read from the end):
///   chain (comma list or bare "numa"): the keys in written order (binpack = score descending,
///       spread = score ascending, numa = NUMA descending), numa forced first under numa-bind,
///       spread when the chain names no key, then position descending (HAMi's index tiebreak);
///   single "mutex": slices in use ascending (idle GPUs first), then NUMA descending, then
///       position;
///   otherwise OrderGpus's order with the weighted score.
void OrderGpusFor(const PodRequest& pod, GpuPolicy policy, const ContainerRequest& container,
                  const NodeState& node, std::span<const GpuUsage> usage,
                  std::span<uint16_t> order);

/// Link score between two GPUs of the node from `hami.io/node-nvidia-score`
/// (topology[a][b], else topology[b][a], else 0).
int32_t LinkScore(const NodeState& node, uint16_t a, uint16_t b);

/// topology-aware choice among the GPUs that fit (docs/design/hami-behaviour.md §3.6): `candidates`
/// (positions, in scan order) all passed fit; choose `n` of them.
///   n == 1: the candidate with the lowest sum of link scores to the other candidates
///           (keeps well-connected GPUs free); ties → earlier candidate.
///   n > 1:  the n-combination with the highest sum of pairwise link scores; ties → the
///           lexicographically first combination in candidate order. With numa_bind only
///           combinations within one NUMA node count (fracgpu's rule; HAMi mixes them).
///           Above 200,000 combinations a greedy choice is made instead (start from the
///           best pair, add the GPU adding the most), documented as an approximation.
/// Returns the chosen positions (in candidate order), or empty if no valid choice exists
/// (fewer than n candidates, or no NUMA node with n of them under numa_bind).
std::vector<uint16_t> ChooseByTopology(const NodeState& node, std::span<const uint16_t> candidates,
                                       int32_t n, bool numa_bind);

/// Index into `scores` (NodeScore of each fitting node) of the node HAMi picks: binpack →
/// the highest score (most used), spread → the lowest. HAMi sorts and takes the last
/// element; on ties fracgpu takes the earliest node (deterministic). Precondition: non-empty.
size_t ChooseNode(NodePolicy policy, std::span<const float> scores);

/// Maps the NodeScores of the candidate nodes to the extender's /prioritize scores 0–10
/// (docs/design/CONTRACT.md §5), preserving the policy's preference as far as integers allow:
/// min–max normalisation over the candidates, rounded to nearest:
///   binpack: round(10 × (s − min) / (max − min));  spread: round(10 × (max − s) / (max − min));
/// all candidates equal (or only one) → 10 each. So the node ChooseNode picks always gets 10.
std::vector<int64_t> PriorityScores(NodePolicy policy, std::span<const float> scores);

}  // namespace fracgpu::core
