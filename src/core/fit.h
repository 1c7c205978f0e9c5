#pragma once
// Fit: which GPUs of a node can host each container of a pod (docs/design/hami-behaviour.md
// §3.5–3.6, §3.8; docs/design/CONTRACT.md §1). No I/O, no clock, no threads; every function here is
// thread-safe on distinct arguments (a TypeVerdictCache must not be shared between threads).
//
// API in one paragraph (for the scheduler, the simulator and the fragmentation code):
//   * CheckGpu(container, pod, gpu)  — the per-GPU checks of §3.6 (all but the NUMA grouping),
//     cheap, allocation-free: returns FitReason::kFits or the first failed check.
//   * Fits(pod, node, options)       — allocation-free yes/no predicate for the hot path
//     (simulator, extender /filter without reasons); always agrees with Fit().fits.
//   * Fit(pod, node, options)        — the full answer: the PodGrants to write in
//     `hami.io/vgpu-devices-allocated`, the chosen GPU positions, and on failure a reason per
//     GPU plus HAMi's "<cnt>/<totalCards> <Reason>" summary (strings only when want_reasons).
//     Cheapest /filter: Fits() on every node, Fit() with reasons only on those that fail,
//     Fit() with grants only on the node chosen (bench/fit_bench.cc measures each).
//   * The GPU order: by default the pod's GPU policy (binpack / spread / topology-aware, see
//     score.h). A fragmentation-aware policy plugs in through FitOptions::orderer (a
//     GpuOrderer that ranks the node's GPUs for one container); fit then still applies every
//     check, NUMA binding, distinct cards and multi-container accounting in that order.
//   * CollapsePodUsage / AddPodUsage / RemovePodUsage — the node usage a placed pod takes
//     (init containers collapsed as §3.8 says), for the scheduler cache and the simulator.

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "core/device.h"
#include "core/node.h"
#include "core/request.h"

namespace fracgpu::core {

/// Why a GPU (or a node) cannot host a container. The names are HAMi's reason strings
/// (docs/design/hami-behaviour.md §3.6); the enumerators are in the order the checks run.
enum class FitReason : uint8_t {
  kFits = 0,                           ///< not rejected (accepted, or never examined)
  kCardNotHealth,                      ///< device registered unhealthy
  kCardCordoned,                       ///< UUID in the node's `hami.io/device-cordon`
  kCardTypeMismatch,                   ///< nvidia.com/use-gputype / nouse-gputype
  kNumaNotFit,                         ///< accepted, then dropped: its NUMA group was too small
  kCardUuidMismatch,                   ///< nvidia.com/use-gpuuuid / nouse-gpuuuid
  kCardTimeSlicingExhausted,           ///< every slice (split count) taken
  kCardInsufficientMemory,             ///< free MiB < requested MiB
  kCardInsufficientCore,               ///< free SM % < requested SM %
  kExclusiveDeviceAllocateConflict,    ///< cores 100 on a card someone already uses
  kCardComputeUnitsExhausted,          ///< cores-0 request on a card whose SMs are all booked
  kAllocatedCardsInsufficientRequest,  ///< accepted, but fewer such GPUs than requested
  kNodeInsufficientDevice,             ///< node has fewer GPUs than nvidia.com/gpu (node-level)
};
/// Number of FitReason values (for counting arrays).
inline constexpr int kFitReasonCount = 13;

/// HAMi's reason string, e.g. "CardInsufficientMemory"; "Fits" for kFits.
const char* FitReasonName(FitReason reason);

/// GPU usage as fit sees it while placing a pod: the node's usage plus what earlier
/// containers of the same pod took. Units as GpuState.
struct GpuUsage {
  int32_t used = 0;          ///< slices placed
  int64_t used_mem_mib = 0;  ///< MiB promised
  int32_t used_cores = 0;    ///< SM % promised (out of DeviceInfo::devcore)
  /// MiB this pod may use beyond the card's memory: the GPU's lent memory
  /// (NodeState::lent_mib) for a borrower pod while the node's record is fresh, else 0.
  /// Of() leaves it 0; Fit and Fits set it (FitOptions::now_unix). int32 (core/lent.h bounds
  /// it so): it fills used_cores' padding, GpuUsage stays 24 bytes.
  int32_t lent_mib = 0;

  static GpuUsage Of(const GpuState& gpu) {
    return {gpu.used, gpu.used_mem_mib, gpu.used_cores, 0};
  }
};

/// The per-GPU checks of docs/design/hami-behaviour.md §3.6, rows 1–3, 5–6, 9–12 (NUMA binding is a
/// property of a set of GPUs and is applied by Fit/Fits; quota, mutex and MIG rows do not
/// exist in fracgpu). Returns kFits or the first failing check's reason. `usage` overrides
/// the GPU's own usage (pass GpuUsage::Of(gpu) for the node as it is). Memory is
/// container.MemOn(devmem) MiB and fits when devmem + usage.lent_mib - used ≥ it; cores above
/// 100 are clamped to 100 as HAMi does.
/// Allocation-free when the pod has no type lists; with type lists it calls GpuTypeAllowed
/// (request.h), which a TypeVerdictCache can memoise (see FitOptions).
FitReason CheckGpu(const ContainerRequest& container, const PodRequest& pod, const DeviceInfo& info,
                   bool cordoned, const GpuUsage& usage);
/// CheckGpu on a GpuState as it is.
inline FitReason CheckGpu(const ContainerRequest& container, const PodRequest& pod,
                          const GpuState& gpu) {
  return CheckGpu(container, pod, gpu.info, gpu.cordoned, GpuUsage::Of(gpu));
}

/// Memoises GpuTypeAllowed(pod, type) for one pod across many nodes (the type tokenizer is
/// the costly part of CheckGpu when use/nouse-gputype is set). Create one per pod, per
/// thread; not thread-safe. Allocates only when it meets a type string for the first time.
class TypeVerdictCache {
 public:
  explicit TypeVerdictCache(const PodRequest& pod) : pod_(&pod) {}
  /// GpuTypeAllowed(pod, type), memoised.
  bool Allowed(const std::string& type);

 private:
  const PodRequest* pod_;
  std::vector<std::pair<std::string, bool>> verdicts_;
};

/// Ranks a node's GPUs for one container: the hook for policies fit does not know
/// (fragmentation-aware, src/core/frag.*). Implementations write into `order` every GPU
/// position 0..node.gpus.size()-1 exactly once, the GPU to try first at order[0]. `usage`
/// is the usage fit will check against (node usage plus earlier containers of this pod).
/// Must not allocate if the caller wants an allocation-free Fits().
class GpuOrderer {
 public:
  virtual ~GpuOrderer() = default;
  virtual void Order(const ContainerRequest& container, const PodRequest& pod,
                     const NodeState& node, std::span<const GpuUsage> usage,
                     std::span<uint16_t> order) const = 0;
};

/// How to fit.
struct FitOptions {
  /// Build FitResult::gpu_reasons and FitResult::summary on failure. Off: no strings at all.
  bool want_reasons = true;
  /// GPU policy when the pod sets none (`hami.io/gpu-scheduler-policy`; cluster default spread).
  GpuPolicy default_gpu_policy = GpuPolicy::kSpread;
  /// Overrides the policy's GPU order when set (e.g. the fragmentation-aware orderer).
  /// kFragmentationAware without an orderer falls back to the spread order.
  const GpuOrderer* orderer = nullptr;
  /// Optional memo of type verdicts for this pod (see TypeVerdictCache); not owned.
  TypeVerdictCache* type_cache = nullptr;
  /// Unix seconds now (the caller's clock). A borrower pod (PodRequest::borrower) may use a
  /// GPU's lent memory (NodeState::lent_mib) beyond its capacity only while the node's
  /// lent-memory record is fresh at this time (core::LentFresh, docs/reclaim.md "Lending").
  /// 0 (the default): lent memory never counts.
  int64_t now_unix = 0;
};

/// The answer of Fit.
struct FitResult {
  bool fits = false;
  /// When fits: one entry per container of the pod, in pod order (init first), each GPU as
  /// {uuid, "NVIDIA", mem MiB, cores %}; a container without GPU has an empty entry. This is
  /// what `hami.io/vgpu-devices-allocated` encodes (docs/design/CONTRACT.md §2).
  PodGrants grants;
  /// When fits: per container, the positions in NodeState::gpus of its GPUs (same order as
  /// grants). Lets the simulator apply usage without UUID look-ups.
  std::vector<std::vector<uint16_t>> gpu_positions;
  /// When !fits: index in pod.containers of the first container that does not fit.
  int32_t failed_container = -1;
  /// When !fits: kNodeInsufficientDevice when the node has fewer GPUs than the container
  /// asks; otherwise kAllocatedCardsInsufficientRequest (not enough GPUs passed the checks).
  FitReason node_reason = FitReason::kFits;
  /// When !fits and want_reasons: per GPU position, why it was rejected for the failing
  /// container (kFits = not examined). Every GPU gets a reason except on
  /// kNodeInsufficientDevice, where none is examined.
  std::vector<FitReason> gpu_reasons;
  /// When !fits and want_reasons: HAMi's summary "<cnt>/<totalCards> <Reason>" per reason,
  /// joined by ", ", reasons in FitReason order (HAMi's order is a Go map's: random), e.g.
  /// "1/4 CardNotHealth, 2/4 CardInsufficientMemory, 1/4 AllocatedCardsInsufficientRequest".
  /// For kNodeInsufficientDevice: "<asked>/<totalCards>
  /// NodeInsufficientDevice" (asked GPUs over GPUs on the node).
  std::string summary;
};

/// Fits `pod` on `node` as the HAMi scheduler would (docs/design/hami-behaviour.md §3.5 step 4,
/// §3.6): containers in pod order; each GPU-using container gets num_gpus distinct GPUs chosen by
/// the GPU policy's order (score.h OrderGpus, or options.orderer); init containers are each
/// fitted alone against the node as it is (they run one after another); app containers
/// are fitted cumulatively (each sees the usage of the earlier app containers), so several
/// containers may share a card. With pod.numa_bind all GPUs of one container share a NUMA
/// node. GpuPolicy::kTopologyAware picks among all fitting GPUs by the node's link scores
/// (score.h ChooseByTopology). A pod that uses no GPU fits with empty grants.
/// Allocates (grants, strings); use Fits() on the hot path.
FitResult Fit(const PodRequest& pod, const NodeState& node, const FitOptions& options = {});

/// Fit(pod, node, options).fits, without building grants or reasons. Allocation-free for
/// nodes of up to 16 GPUs (given an allocation-free orderer and a warmed type cache), except
/// for topology-aware pods with several GPU-using app containers (the link-score choice).
/// A pod with at most one GPU-using app container is decided by counting eligible GPUs
/// (the order cannot matter); otherwise the same ordered greedy as Fit runs.
bool Fits(const PodRequest& pod, const NodeState& node, const FitOptions& options = {});

/// The numbers of one GPU that fit's checks read for a pod without type, mode or UUID lists,
/// packed: 16 bytes instead of a GpuState's 152 (whose strings sit in the same cache lines).
/// Units as GpuState and DeviceInfo: MiB, SM % (out of devcore). Of the slices only what the
/// checks ask is kept: whether one is free (count > used) and whether any is taken (used > 0).
struct PackedGpu {
  int32_t devmem_mib = 0;
  int32_t used_mem_mib = 0;
  int16_t devcore = 0;     ///< 100 × core scaling
  int16_t used_cores = 0;  ///< SM % promised
  int8_t numa = 0;
  uint8_t flags = 0;  ///< kHealth | kCordoned | kSliceFree | kInUse
  static constexpr uint8_t kHealth = 1, kCordoned = 2, kSliceFree = 4, kInUse = 8;
  bool operator==(const PackedGpu&) const = default;
};

/// A node's GPUs as PackedGpu, kept beside the node by core::ClusterState so that /filter
/// reads about 3 cache lines per node instead of about 16 (docs/scheduler.md "Fit summary").
/// `exact` is false when the node has more than kMaxGpus GPUs or a value does not fit its
/// packed width; FitsBySummary must not be asked then.
struct NodeFitSummary {
  static constexpr size_t kMaxGpus = 16;
  uint8_t gpus = 0;    ///< GPUs in use of `gpu`, in NodeState::gpus order
  bool exact = false;  ///< every GPU packed without loss
  PackedGpu gpu[kMaxGpus];
  bool operator==(const NodeFitSummary&) const = default;
};

/// Packs the node's GPUs (see NodeFitSummary::exact for when it cannot).
NodeFitSummary SummarizeForFit(const NodeState& node);

/// Whether Fits(pod, node) is a function of SummarizeForFit(node) alone: at most one GPU-using
/// app container (so fit counts GPUs and the order cannot matter), and no nvidia.com/vgpu-mode,
/// use/nouse-gputype or use/nouse-gpuuuid (checks that read strings, which the summary does not
/// carry), and not a borrower (lent memory is not in the summary).
bool SummaryDecides(const PodRequest& pod);

/// Fits(pod, node, options) for any options, from the node's summary: the same checks (one
/// code path in fit.cc), read from PackedGpu. Requires SummaryDecides(pod) and summary.exact;
/// otherwise returns false. Allocation-free.
bool FitsBySummary(const PodRequest& pod, const NodeFitSummary& summary);

/// Usage one placed pod takes on one GPU (docs/design/hami-behaviour.md §3.8 "collapsed").
struct GpuUsageDelta {
  std::string uuid;
  int32_t slots = 0;    ///< max(1 if an init container uses it, number of app containers)
  int64_t mem_mib = 0;  ///< max(peak of init containers, sum of app containers), MiB
  int32_t cores = 0;    ///< same rule, SM %
};

/// Collapses a pod's grants into per-GPU usage (§3.8): containers 0..num_init-1 are init
/// containers (init first, docs/design/CONTRACT.md §2). With init_finished (every init container
/// terminated with exit 0) only app containers count. GPUs in first-seen order.
/// Errors: kInvalidArgument if num_init > grants.size().
Result<std::vector<GpuUsageDelta>> CollapsePodUsage(const PodGrants& grants, size_t num_init,
                                                    bool init_finished = false);

/// Adds a pod's collapsed usage to the node. All or nothing: kNotFound naming the UUID when
/// a GPU is not on the node (nothing changed). Does not check capacity: a cache must
/// record what was decided even if the node shrank since.
Status AddPodUsage(NodeState& node, std::span<const GpuUsageDelta> usage);
/// Subtracts a pod's collapsed usage (the inverse of AddPodUsage). All or nothing:
/// kNotFound for an unknown UUID; kInvalidArgument naming GPU and field when it would make
/// a usage negative (the usage was never added).
Status RemovePodUsage(NodeState& node, std::span<const GpuUsageDelta> usage);

/// Convenience: CollapsePodUsage then AddPodUsage.
Status AddPodGrants(NodeState& node, const PodGrants& grants, size_t num_init,
                    bool init_finished = false);
/// Convenience: CollapsePodUsage then RemovePodUsage.
Status RemovePodGrants(NodeState& node, const PodGrants& grants, size_t num_init,
                       bool init_finished = false);

/// Number of init containers at the front of pod.containers (they come first, request.h).
size_t CountInitContainers(const PodRequest& pod);

}  // namespace fracgpu::core
