#include "core/fit.h"

#include <algorithm>
#include <array>
#include <limits>
#include <string>

#include "core/lent.h"
#include "core/score.h"
#include "core/small_buffer.h"

namespace fracgpu::core {

const char* FitReasonName(FitReason reason) {
  switch (reason) {
    case FitReason::kFits:
      return "Fits";
    case FitReason::kCardNotHealth:
      return "CardNotHealth";
    case FitReason::kCardCordoned:
      return "CardCordoned";
    case FitReason::kCardTypeMismatch:
      return "CardTypeMismatch";
    case FitReason::kNumaNotFit:
      return "NumaNotFit";
    case FitReason::kCardUuidMismatch:
      return "CardUuidMismatch";
    case FitReason::kCardTimeSlicingExhausted:
      return "CardTimeSlicingExhausted";
    case FitReason::kCardInsufficientMemory:
      return "CardInsufficientMemory";
    case FitReason::kCardInsufficientCore:
      return "CardInsufficientCore";
    case FitReason::kExclusiveDeviceAllocateConflict:
      return "ExclusiveDeviceAllocateConflict";
    case FitReason::kCardComputeUnitsExhausted:
      return "CardComputeUnitsExhausted";
    case FitReason::kAllocatedCardsInsufficientRequest:
      return "AllocatedCardsInsufficientRequest";
    case FitReason::kNodeInsufficientDevice:
      return "NodeInsufficientDevice";
  }
  return "Unknown";
}

bool TypeVerdictCache::Allowed(const std::string& type) {
  for (const auto& [t, verdict] : verdicts_) {
    if (t == type) return verdict;
  }
  const bool verdict = GpuTypeAllowed(*pod_, type);
  verdicts_.emplace_back(type, verdict);
  return verdict;
}

namespace {

int32_t CoresOf(const ContainerRequest& c) { return std::min(c.cores_percent, 100); }

// The checks before HAMi's NUMA grouping step (§3.6 rows 1–3). `last_type`/`last_verdict`
// memoise the type verdict across the GPUs of one scan (a node's GPUs usually share a type).
struct TypeMemo {
  const std::string* last_type = nullptr;
  bool last_verdict = false;
};

// §3.6 rows 1–2, the ones a NodeFitSummary carries (the rest read strings).
FitReason StateChecks(bool health, bool cordoned) {
  if (!health) return FitReason::kCardNotHealth;
  if (cordoned) return FitReason::kCardCordoned;
  return FitReason::kFits;
}

FitReason PreNumaChecks(const PodRequest& pod, const DeviceInfo& info, bool cordoned,
                        TypeVerdictCache* cache, TypeMemo* memo) {
  if (FitReason r = StateChecks(info.health, cordoned); r != FitReason::kFits) return r;
  // nvidia.com/vgpu-mode: the value must contain the GPU's mode (HAMi v2.10.0 `checkType`).
  if (!pod.vgpu_mode.empty() && pod.vgpu_mode.find(info.mode) == std::string::npos) {
    return FitReason::kCardTypeMismatch;
  }
  if (!pod.use_types.empty() || !pod.nouse_types.empty()) {
    bool allowed;
    if (memo != nullptr && memo->last_type != nullptr && *memo->last_type == info.type) {
      allowed = memo->last_verdict;
    } else {
      allowed = cache != nullptr ? cache->Allowed(info.type) : GpuTypeAllowed(pod, info.type);
      if (memo != nullptr) *memo = {&info.type, allowed};
    }
    if (!allowed) return FitReason::kCardTypeMismatch;
  }
  return FitReason::kFits;
}

// The numbers of one GPU the capacity checks read, from a GpuState or a PackedGpu. Of the
// slices, only what the checks ask: count > used, and used > 0.
struct GpuNumbers {
  int64_t devmem_mib;
  int64_t used_mem_mib;
  int32_t devcore;
  int32_t used_cores;
  bool slice_free;
  bool in_use;
  int64_t lent_mib;  // GpuUsage::lent_mib: 0 but for a borrower on a fresh lent record
};

// §3.6 rows 6, 7 and 9–12: every check after the UUID lists, on numbers only. The one copy of
// these checks: PostNumaChecks (GpuState) and FitsBySummary (PackedGpu) both call it.
FitReason CapacityChecks(const ContainerRequest& c, const PodRequest& pod, const GpuNumbers& g) {
  if (!g.slice_free) return FitReason::kCardTimeSlicingExhausted;
  // hami.io/gpu-scheduler-policy "mutex" (alone or in a chain): idle GPUs only (§3.6 row 7).
  if (pod.gpu_policy_spec && pod.gpu_policy_spec->mutex && g.in_use) {
    return FitReason::kExclusiveDeviceAllocateConflict;
  }
  const int32_t cores = CoresOf(c);
  // A percentage of the card is of its own memory, never of what it lends.
  if (g.devmem_mib + g.lent_mib - g.used_mem_mib < c.MemOn(g.devmem_mib)) {
    return FitReason::kCardInsufficientMemory;
  }
  if (g.devcore - g.used_cores < cores) return FitReason::kCardInsufficientCore;
  if (g.devcore == 100 && cores == 100 && g.in_use) {
    return FitReason::kExclusiveDeviceAllocateConflict;
  }
  if (g.devcore != 0 && g.used_cores == g.devcore && cores == 0) {
    return FitReason::kCardComputeUnitsExhausted;
  }
  return FitReason::kFits;
}

// The checks after HAMi's NUMA grouping step (§3.6 rows 5–6, 9–12).
FitReason PostNumaChecks(const ContainerRequest& c, const PodRequest& pod, const DeviceInfo& info,
                         const GpuUsage& usage) {
  if ((!pod.use_uuids.empty() || !pod.nouse_uuids.empty()) && !GpuUuidAllowed(pod, info.uuid)) {
    return FitReason::kCardUuidMismatch;
  }
  return CapacityChecks(c, pod,
                        {info.devmem_mib, usage.used_mem_mib, info.devcore, usage.used_cores,
                         info.count > usage.used, usage.used > 0, usage.lent_mib});
}

FitReason CheckOne(const ContainerRequest& c, const PodRequest& pod, const GpuState& g,
                   const GpuUsage& usage, TypeVerdictCache* cache, TypeMemo* memo) {
  FitReason r = PreNumaChecks(pod, g.info, g.cordoned, cache, memo);
  if (r != FitReason::kFits) return r;
  return PostNumaChecks(c, pod, g.info, usage);
}

// Whether the node's lent memory counts for this pod: a borrower, and the node's record fresh
// at options.now_unix (docs/reclaim.md "Lending").
bool LentCounts(const PodRequest& pod, const NodeState& node, const FitOptions& options) {
  return pod.borrower && LentFresh(node.lent_at_unix, options.now_unix);
}

GpuPolicy EffectivePolicy(const PodRequest& pod, const FitOptions& options) {
  return pod.gpu_policy.value_or(options.default_gpu_policy);
}

// Makes GPUs of one NUMA node contiguous in `order`, keeping the order within a NUMA node
// and ordering the NUMA nodes by their first appearance. Needed when an external orderer
// ranks GPUs under numa-bind, because HAMi's scan restarts on every NUMA change.
void GroupByNuma(const NodeState& node, std::span<uint16_t> order) {
  const size_t n = order.size();
  internal::SmallBuffer<uint16_t> out(n);
  internal::SmallBuffer<uint8_t> taken(n);
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    if (taken[i]) continue;
    const int32_t numa = node.gpus[order[i]].info.numa;
    for (size_t j = i; j < n; ++j) {
      if (!taken[j] && node.gpus[order[j]].info.numa == numa) {
        taken[j] = 1;
        out[k++] = order[j];
      }
    }
  }
  std::copy(out.data(), out.data() + n, order.begin());
}

// Outcome of placing one container: accepted positions (picks[0..count)) or a failure.
struct ContainerOutcome {
  bool fits = false;
  FitReason node_reason = FitReason::kFits;
};

// HAMi's per-container scan (§3.6) over `order`, against `usage`. On success picks[0..n)
// hold the chosen positions in scan order. With `reasons` (size = GPUs) it records why each
// GPU was rejected when the container does not fit.
ContainerOutcome ScanContainer(const ContainerRequest& c, const PodRequest& pod,
                               const NodeState& node, std::span<const GpuUsage> usage,
                               std::span<const uint16_t> order, TypeVerdictCache* cache,
                               uint16_t* picks, FitReason* reasons) {
  const int32_t want = c.num_gpus;
  int32_t accepted = 0;
  bool have_numa = false;
  int32_t prev_numa = 0;
  TypeMemo memo;
  for (uint16_t p : order) {
    const GpuState& g = node.gpus[p];
    FitReason r = PreNumaChecks(pod, g.info, g.cordoned, cache, &memo);
    if (r != FitReason::kFits) {
      if (reasons != nullptr) reasons[p] = r;
      continue;
    }
    if (pod.numa_bind && (!have_numa || g.info.numa != prev_numa)) {
      // A new NUMA node: what was accepted on the previous one is not enough; start over.
      if (reasons != nullptr) {
        for (int32_t i = 0; i < accepted; ++i) reasons[picks[i]] = FitReason::kNumaNotFit;
      }
      accepted = 0;
      have_numa = true;
      prev_numa = g.info.numa;
    }
    r = PostNumaChecks(c, pod, g.info, usage[p]);
    if (r != FitReason::kFits) {
      if (reasons != nullptr) reasons[p] = r;
      continue;
    }
    picks[accepted++] = p;
    if (accepted == want) return {true, FitReason::kFits};
  }
  if (reasons != nullptr) {
    for (int32_t i = 0; i < accepted; ++i) {
      reasons[picks[i]] = FitReason::kAllocatedCardsInsufficientRequest;
    }
  }
  return {false, FitReason::kAllocatedCardsInsufficientRequest};
}

std::string Summarize(std::span<const FitReason> reasons) {
  std::array<int32_t, kFitReasonCount> counts{};
  for (FitReason r : reasons) ++counts[static_cast<size_t>(r)];
  std::string out;
  for (int i = 1; i < kFitReasonCount; ++i) {
    if (counts[i] == 0) continue;
    if (!out.empty()) out += ", ";
    out += std::to_string(counts[i]) + "/" + std::to_string(reasons.size()) + " " +
           FitReasonName(static_cast<FitReason>(i));
  }
  return out;
}

// The ordered greedy shared by Fit and the general case of Fits. `out` null = predicate only.
bool FitOrdered(const PodRequest& pod, const NodeState& node, const FitOptions& options,
                FitResult* out) {
  const size_t n_gpus = node.gpus.size();
  const GpuPolicy policy = EffectivePolicy(pod, options);
  const bool record = out != nullptr;
  const bool want_reasons = record && options.want_reasons;
  internal::SmallBuffer<GpuUsage> base(n_gpus);
  internal::SmallBuffer<GpuUsage> app(n_gpus);
  const bool lent = LentCounts(pod, node, options);
  for (size_t i = 0; i < n_gpus; ++i) {
    base[i] = app[i] = GpuUsage::Of(node.gpus[i]);
    if (lent) base[i].lent_mib = app[i].lent_mib = static_cast<int32_t>(node.LentMib(i));
  }
  internal::SmallBuffer<uint16_t> order(n_gpus);
  internal::SmallBuffer<uint16_t> picks(n_gpus);
  if (record) {
    out->grants.assign(pod.containers.size(), {});
    out->gpu_positions.assign(pod.containers.size(), {});
  }

  for (size_t ci = 0; ci < pod.containers.size(); ++ci) {
    const ContainerRequest& c = pod.containers[ci];
    if (!c.UsesGpu()) continue;
    auto fail = [&](FitReason node_reason) {
      if (record) {
        out->fits = false;
        out->grants.clear();
        out->gpu_positions.clear();
        out->failed_container = static_cast<int32_t>(ci);
        out->node_reason = node_reason;
      }
      return false;
    };
    if (static_cast<size_t>(c.num_gpus) > n_gpus) {
      if (want_reasons) {
        out->gpu_reasons.assign(n_gpus, FitReason::kFits);
        out->summary = std::to_string(c.num_gpus) + "/" + std::to_string(n_gpus) + " " +
                       FitReasonName(FitReason::kNodeInsufficientDevice);
      }
      return fail(FitReason::kNodeInsufficientDevice);
    }
    // Init containers run one at a time before the app containers: each is checked against
    // the node as it is. App containers run together: each sees the earlier ones' usage.
    std::span<const GpuUsage> usage = c.init ? base.span() : app.span();
    if (options.orderer != nullptr) {
      options.orderer->Order(c, pod, node, usage, order.span());
      if (pod.numa_bind) GroupByNuma(node, order.span());
    } else {
      OrderGpusFor(pod, policy, c, node, usage, order.span());
    }
    FitReason* reasons = nullptr;
    if (want_reasons) {
      out->gpu_reasons.assign(n_gpus, FitReason::kFits);
      reasons = out->gpu_reasons.data();
    }
    ContainerOutcome outcome =
        ScanContainer(c, pod, node, usage, order.span(), options.type_cache, picks.data(), reasons);
    if (!outcome.fits) {
      if (want_reasons) out->summary = Summarize(out->gpu_reasons);
      return fail(outcome.node_reason);
    }
    std::span<const uint16_t> chosen(picks.data(), static_cast<size_t>(c.num_gpus));
    std::vector<uint16_t> topo;
    if (policy == GpuPolicy::kTopologyAware && options.orderer == nullptr && c.num_gpus > 0 &&
        (record || !c.init)) {
      // Topology-aware chooses among every GPU that passes, not the first n (§3.6). Fits()
      // needs the same choice for app containers, since it changes what later ones see.
      std::vector<uint16_t> candidates;
      TypeMemo memo;
      for (uint16_t p : order.span()) {
        if (CheckOne(c, pod, node.gpus[p], usage[p], options.type_cache, &memo) ==
            FitReason::kFits) {
          candidates.push_back(p);
        }
      }
      topo = ChooseByTopology(node, candidates, c.num_gpus, pod.numa_bind);
      // Non-empty: the scan found n GPUs on one NUMA node, so a valid choice exists.
      if (topo.size() == static_cast<size_t>(c.num_gpus)) chosen = topo;
    }
    for (uint16_t p : chosen) {
      const GpuState& g = node.gpus[p];
      const int64_t mem = c.MemOn(g.info.devmem_mib);
      const int32_t cores = CoresOf(c);
      if (record) {
        out->grants[ci].push_back(DeviceGrant{g.info.uuid, "NVIDIA", mem, cores});
        out->gpu_positions[ci].push_back(p);
      }
      if (!c.init) {
        app[p].used += 1;
        app[p].used_mem_mib += mem;
        app[p].used_cores += cores;
      }
    }
  }
  if (record) {
    out->fits = true;
    out->failed_container = -1;
    out->node_reason = FitReason::kFits;
    out->gpu_reasons.clear();
    out->summary.clear();
  }
  return true;
}

// Whether a container of `want` GPUs fits on a node of n_gpus GPUs of which passes(i) says
// which pass every check: counts them (per NUMA node, numa(i), under numa-bind). Exact when the
// GPU order cannot matter. One copy for both forms of a node (NodeState, NodeFitSummary).
template <typename PassesFn, typename NumaFn>
bool FitsByCount(int32_t want, size_t n_gpus, bool numa_bind, PassesFn&& passes, NumaFn&& numa) {
  if (static_cast<size_t>(want) > n_gpus) return false;
  if (!numa_bind || want == 1) {
    int32_t count = 0;
    for (size_t i = 0; i < n_gpus; ++i) {
      if (passes(i) && ++count == want) return true;
    }
    return false;
  }
  // numa-bind: some NUMA node must hold `want` passing GPUs.
  internal::SmallBuffer<int32_t> numa_of_passing(n_gpus);
  size_t passing = 0;
  for (size_t i = 0; i < n_gpus; ++i) {
    if (passes(i)) numa_of_passing[passing++] = numa(i);
  }
  for (size_t i = 0; i < passing; ++i) {
    int32_t same = 0;
    for (size_t j = 0; j < passing; ++j) same += numa_of_passing[j] == numa_of_passing[i];
    if (same >= want) return true;
  }
  return false;
}

// Whether `c` alone fits against the node's own usage (FitsByCount over its GpuStates).
// kLent: the node's lent memory counts (a borrower on a fresh record); a template so that the
// ordinary pods' loop is the one it was before lending existed.
template <bool kLent>
bool ContainerFitsByCount(const ContainerRequest& c, const PodRequest& pod, const NodeState& node,
                          TypeVerdictCache* cache) {
  TypeMemo memo;
  return FitsByCount(
      c.num_gpus, node.gpus.size(), pod.numa_bind,
      [&](size_t i) {
        const GpuState& g = node.gpus[i];
        GpuUsage u = GpuUsage::Of(g);
        if constexpr (kLent) u.lent_mib = static_cast<int32_t>(node.LentMib(i));
        return CheckOne(c, pod, g, u, cache, &memo) == FitReason::kFits;
      },
      [&](size_t i) { return node.gpus[i].info.numa; });
}

// Number of GPU-using app containers: with at most one, no container's choice affects another's
// checks (init containers are each checked against the node as it is), so the GPU order cannot
// change whether the pod fits.
int32_t AppGpuContainers(const PodRequest& pod) {
  int32_t n = 0;
  for (const ContainerRequest& c : pod.containers) {
    if (c.UsesGpu() && !c.init) ++n;
  }
  return n;
}

template <typename Int>
bool FitsIn(int64_t v) {
  return v >= std::numeric_limits<Int>::min() && v <= std::numeric_limits<Int>::max();
}

}  // namespace

FitReason CheckGpu(const ContainerRequest& container, const PodRequest& pod, const DeviceInfo& info,
                   bool cordoned, const GpuUsage& usage) {
  FitReason r = PreNumaChecks(pod, info, cordoned, nullptr, nullptr);
  if (r != FitReason::kFits) return r;
  return PostNumaChecks(container, pod, info, usage);
}

FitResult Fit(const PodRequest& pod, const NodeState& node, const FitOptions& options) {
  FitResult result;
  FitOrdered(pod, node, options, &result);
  return result;
}

bool Fits(const PodRequest& pod, const NodeState& node, const FitOptions& options) {
  // The order of the GPUs cannot change the answer (AppGpuContainers): count, do not sort.
  if (AppGpuContainers(pod) > 1) return FitOrdered(pod, node, options, nullptr);
  const bool lent = LentCounts(pod, node, options);
  for (const ContainerRequest& c : pod.containers) {
    if (!c.UsesGpu()) continue;
    const bool fits = lent ? ContainerFitsByCount<true>(c, pod, node, options.type_cache)
                           : ContainerFitsByCount<false>(c, pod, node, options.type_cache);
    if (!fits) return false;
  }
  return true;
}

NodeFitSummary SummarizeForFit(const NodeState& node) {
  NodeFitSummary s;
  if (node.gpus.size() > NodeFitSummary::kMaxGpus) return s;
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    const GpuState& g = node.gpus[i];
    if (!FitsIn<int32_t>(g.info.devmem_mib) || !FitsIn<int32_t>(g.used_mem_mib) ||
        !FitsIn<int16_t>(g.info.devcore) || !FitsIn<int16_t>(g.used_cores) ||
        !FitsIn<int8_t>(g.info.numa)) {
      return NodeFitSummary{};
    }
    PackedGpu& p = s.gpu[i];
    p.devmem_mib = static_cast<int32_t>(g.info.devmem_mib);
    p.used_mem_mib = static_cast<int32_t>(g.used_mem_mib);
    p.devcore = static_cast<int16_t>(g.info.devcore);
    p.used_cores = static_cast<int16_t>(g.used_cores);
    p.numa = static_cast<int8_t>(g.info.numa);
    p.flags = static_cast<uint8_t>(
        (g.info.health ? PackedGpu::kHealth : 0) | (g.cordoned ? PackedGpu::kCordoned : 0) |
        (g.info.count > g.used ? PackedGpu::kSliceFree : 0) | (g.used > 0 ? PackedGpu::kInUse : 0));
  }
  s.gpus = static_cast<uint8_t>(node.gpus.size());
  s.exact = true;
  return s;
}

bool SummaryDecides(const PodRequest& pod) {
  // Every check CheckOne makes that reads more than PackedGpu holds is off for this pod:
  // PreNumaChecks' mode and type rows, PostNumaChecks' UUID row. (The mutex row reads only
  // whether the GPU is in use, which PackedGpu carries.)
  return AppGpuContainers(pod) <= 1 && !pod.borrower && pod.vgpu_mode.empty() &&
         pod.use_types.empty() && pod.nouse_types.empty() && pod.use_uuids.empty() &&
         pod.nouse_uuids.empty();
}

bool FitsBySummary(const PodRequest& pod, const NodeFitSummary& summary) {
  if (!summary.exact || !SummaryDecides(pod)) return false;
  for (const ContainerRequest& c : pod.containers) {
    if (!c.UsesGpu()) continue;
    const bool fits = FitsByCount(
        c.num_gpus, summary.gpus, pod.numa_bind,
        [&](size_t i) {
          const PackedGpu& g = summary.gpu[i];
          return StateChecks((g.flags & PackedGpu::kHealth) != 0,
                             (g.flags & PackedGpu::kCordoned) != 0) == FitReason::kFits &&
                 CapacityChecks(c, pod,
                                {g.devmem_mib, g.used_mem_mib, g.devcore, g.used_cores,
                                 (g.flags & PackedGpu::kSliceFree) != 0,
                                 (g.flags & PackedGpu::kInUse) != 0, 0}) == FitReason::kFits;
        },
        [&](size_t i) { return static_cast<int32_t>(summary.gpu[i].numa); });
    if (!fits) return false;
  }
  return true;
}

size_t CountInitContainers(const PodRequest& pod) {
  size_t n = 0;
  while (n < pod.containers.size() && pod.containers[n].init) ++n;
  return n;
}

Result<std::vector<GpuUsageDelta>> CollapsePodUsage(const PodGrants& grants, size_t num_init,
                                                    bool init_finished) {
  if (num_init > grants.size()) {
    return InvalidArgument("num_init " + std::to_string(num_init) + " exceeds the " +
                           std::to_string(grants.size()) + " containers of the allocation");
  }
  struct Acc {
    GpuUsageDelta delta;
    bool init_used = false;
    int64_t init_mem = 0, app_mem = 0;
    int32_t init_cores = 0, app_cores = 0, app_slots = 0;
  };
  std::vector<Acc> acc;
  auto find = [&](const std::string& uuid) -> Acc& {
    for (Acc& a : acc) {
      if (a.delta.uuid == uuid) return a;
    }
    acc.emplace_back();
    acc.back().delta.uuid = uuid;
    return acc.back();
  };
  for (size_t ci = 0; ci < grants.size(); ++ci) {
    const bool init = ci < num_init;
    if (init && init_finished) continue;
    for (const DeviceGrant& g : grants[ci]) {
      Acc& a = find(g.uuid);
      if (init) {
        a.init_used = true;
        a.init_mem = std::max(a.init_mem, g.mem_mib);
        a.init_cores = std::max(a.init_cores, g.cores_percent);
      } else {
        a.app_slots += 1;
        a.app_mem += g.mem_mib;
        a.app_cores += g.cores_percent;
      }
    }
  }
  std::vector<GpuUsageDelta> out;
  out.reserve(acc.size());
  for (Acc& a : acc) {
    a.delta.slots = std::max(a.init_used ? 1 : 0, a.app_slots);
    a.delta.mem_mib = std::max(a.init_mem, a.app_mem);
    a.delta.cores = std::max(a.init_cores, a.app_cores);
    out.push_back(std::move(a.delta));
  }
  return out;
}

namespace {

// Positions in node.gpus of each delta's UUID, or kNotFound naming the first unknown UUID.
Result<std::vector<size_t>> Locate(const NodeState& node, std::span<const GpuUsageDelta> usage) {
  std::vector<size_t> pos;
  pos.reserve(usage.size());
  for (const GpuUsageDelta& d : usage) {
    size_t i = 0;
    while (i < node.gpus.size() && node.gpus[i].info.uuid != d.uuid) ++i;
    if (i == node.gpus.size()) {
      return NotFound("GPU " + d.uuid + " is not on node " + node.name);
    }
    pos.push_back(i);
  }
  return pos;
}

}  // namespace

Status AddPodUsage(NodeState& node, std::span<const GpuUsageDelta> usage) {
  Result<std::vector<size_t>> pos = Locate(node, usage);
  if (!pos.ok()) return pos.status();
  for (size_t k = 0; k < usage.size(); ++k) {
    GpuState& g = node.gpus[(*pos)[k]];
    g.used += usage[k].slots;
    g.used_mem_mib += usage[k].mem_mib;
    g.used_cores += usage[k].cores;
  }
  return Status::Ok();
}

Status RemovePodUsage(NodeState& node, std::span<const GpuUsageDelta> usage) {
  Result<std::vector<size_t>> pos = Locate(node, usage);
  if (!pos.ok()) return pos.status();
  // Check every GPU first so that an error changes nothing. A UUID listed twice is summed.
  std::vector<GpuUsage> after(node.gpus.size());
  for (size_t i = 0; i < node.gpus.size(); ++i) after[i] = GpuUsage::Of(node.gpus[i]);
  for (size_t k = 0; k < usage.size(); ++k) {
    GpuUsage& a = after[(*pos)[k]];
    a.used -= usage[k].slots;
    a.used_mem_mib -= usage[k].mem_mib;
    a.used_cores -= usage[k].cores;
    const char* field = a.used < 0           ? "used slots"
                        : a.used_mem_mib < 0 ? "used memory (MiB)"
                        : a.used_cores < 0   ? "used cores (%)"
                                             : nullptr;
    if (field != nullptr) {
      return InvalidArgument("removing the usage of GPU " + usage[k].uuid + " from node " +
                             node.name + " would make its " + field +
                             " negative (that usage was never added)");
    }
  }
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    node.gpus[i].used = after[i].used;
    node.gpus[i].used_mem_mib = after[i].used_mem_mib;
    node.gpus[i].used_cores = after[i].used_cores;
  }
  return Status::Ok();
}

Status AddPodGrants(NodeState& node, const PodGrants& grants, size_t num_init, bool init_finished) {
  Result<std::vector<GpuUsageDelta>> usage = CollapsePodUsage(grants, num_init, init_finished);
  if (!usage.ok()) return usage.status();
  return AddPodUsage(node, *usage);
}

Status RemovePodGrants(NodeState& node, const PodGrants& grants, size_t num_init,
                       bool init_finished) {
  Result<std::vector<GpuUsageDelta>> usage = CollapsePodUsage(grants, num_init, init_finished);
  if (!usage.ok()) return usage.status();
  return RemovePodUsage(node, *usage);
}

}  // namespace fracgpu::core
