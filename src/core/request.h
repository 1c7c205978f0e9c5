#pragma once
// The GPU request of a pod, parsed from container resources and pod annotations exactly as
// docs/design/CONTRACT.md §1 says. One parser serves the webhook, the scheduler, the
// simulator and the UI (docs/design/STYLE.md: no copy-paste families).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/status.h"

namespace fracgpu::core {

/// The cluster's per-container request defaults, from the `nvidia:` section of the device
/// config (HAMi v2.10 `NvidiaConfig`, applied as `pkg/device/nvidia/device.go`
/// GenerateResourceRequests and mutateContainerResource apply them). The built-in values are
/// HAMi's chart defaults; every component (webhook, extender, device plugin, DRA driver) reads
/// the same file so they agree.
struct RequestDefaults {
  /// defaultMemory: MiB per GPU for a GPU container that gives neither gpumem nor
  /// gpumem-percentage (0 = the whole card). Cores are still 100 for such a container unless
  /// it sets gpucores (HAMi's defaultExclusiveCoreIfNeeded looks at the keys given).
  int64_t default_memory_mib = 0;
  /// defaultCores: SM share, percent 0..100, for a GPU container without gpucores that asks for
  /// part of a card's memory (a whole-memory container gets 100, as in HAMi).
  int32_t default_cores = 0;
  /// defaultGPUNum: GPUs given to a container that sets gpumem, gpumem-percentage or gpucores
  /// but no GPU count, ≥ 1.
  int32_t default_gpu_num = 1;
  /// memoryFactor: the unit of gpumem in MiB (gpumem × memoryFactor = MiB per GPU), ≥ 1.
  int64_t memory_factor = 1;

  bool operator==(const RequestDefaults&) const = default;
};

/// How a container's resources are read: the extended-resource names (configurable per
/// cluster; these are HAMi's defaults, docs/design/CONTRACT.md §1) and the cluster's request
/// defaults (RequestDefaults: defaultMemory, defaultCores, defaultGPUNum, memoryFactor).
struct ResourceNames {
  std::string gpu = "nvidia.com/gpu";        ///< count of distinct physical GPUs
  std::string gpumem = "nvidia.com/gpumem";  ///< gpumem units (MiB × memoryFactor) per GPU
  std::string gpumem_percentage = "nvidia.com/gpumem-percentage";  ///< % of the card's memory
  std::string gpucores = "nvidia.com/gpucores";                    ///< SM share per GPU, %
  std::string priority = "nvidia.com/priority";                    ///< 0 high, 1 low
  RequestDefaults defaults;  ///< the device config's request defaults
};

/// Pod annotation keys a user may set (docs/design/CONTRACT.md §1; HAMi's names,
/// docs/design/hami-behaviour.md §1.4).
inline constexpr char kAnnotationUseGpuType[] = "nvidia.com/use-gputype";
inline constexpr char kAnnotationNoUseGpuType[] = "nvidia.com/nouse-gputype";
inline constexpr char kAnnotationUseGpuUuid[] = "nvidia.com/use-gpuuuid";
inline constexpr char kAnnotationNoUseGpuUuid[] = "nvidia.com/nouse-gpuuuid";
inline constexpr char kAnnotationNumaBind[] = "nvidia.com/numa-bind";
/// `"true"` (exactly, as the node agent reads it) marks a borrower (issue 36 item 2,
/// docs/reclaim.md "Lending"): the scheduler may place it on memory a node lends
/// (core/lent.h), and the node agent evicts it when the parked owner wakes. Any other value, or
/// none, is an ordinary pod (a value other than "false" gets a warning).
inline constexpr char kAnnotationBorrower[] = "fracgpu.io/borrower";
inline constexpr char kAnnotationNodePolicy[] = "hami.io/node-scheduler-policy";
inline constexpr char kAnnotationGpuPolicy[] = "hami.io/gpu-scheduler-policy";
/// HAMi's GPU mode filter ("hami-core", "mig", "mps"; docs/design/hami-behaviour.md §1.4).
inline constexpr char kAnnotationVgpuMode[] = "nvidia.com/vgpu-mode";
/// HAMi v2.10's per-pod score weights, "slot=<int>,core=<int>,memory=<int>".
inline constexpr char kAnnotationScoringWeights[] = "hami.io/device-scoring-weights";
/// The container environment variable that switches libvgpu.so off (docs/design/CONTRACT.md §3).
inline constexpr char kEnvDisableControl[] = "CUDA_DISABLE_CONTROL";

/// Node-level policy (`hami.io/node-scheduler-policy`): which node to prefer.
enum class NodePolicy { kBinpack, kSpread };
/// GPU-level policy (`hami.io/gpu-scheduler-policy`): which GPU(s) of the node to prefer.
enum class GpuPolicy { kBinpack, kSpread, kTopologyAware, kFragmentationAware };

/// One sort key of a HAMi v2.10.0 GPU policy chain (`pkg/scheduler/policy/gpu_policy.go`,
/// `gpuSortKeyChain`): binpack = most-used GPU first, spread = least-used first, numa = by
/// NUMA node.
enum class GpuSortKey : uint8_t { kBinpack, kSpread, kNuma };

/// A parsed `hami.io/gpu-scheduler-policy` value as HAMi v2.10.0 reads it: a single policy,
/// or a comma list ("binpack,numa", "spread,numa,mutex") or bare "numa" (a chain).
struct GpuPolicySpec {
  /// The policy fit applies: the single value; in a chain topology-aware when named, else the
  /// first of binpack/spread, else spread (HAMi's fallback).
  GpuPolicy policy = GpuPolicy::kSpread;
  /// True for a comma list or bare "numa": GPUs are ordered by `sort_keys` (HAMi's
  /// `lessByChain`), not by `policy`'s own order.
  bool chain = false;
  /// binpack/spread/numa in written order, duplicates dropped (empty chain → spread).
  std::vector<GpuSortKey> sort_keys;
  /// "mutex" named (alone or in a chain): only GPUs no one uses are candidates
  /// (ExclusiveDeviceAllocateConflict otherwise).
  bool mutex = false;

  bool operator==(const GpuPolicySpec&) const = default;
};

/// Parses a `hami.io/gpu-scheduler-policy` value: binpack, spread, topology-aware,
/// fragmentation-aware (fracgpu's), mutex, numa, or a comma list of HAMi's five (entries
/// trimmed, empty entries skipped). Errors: kInvalidArgument naming the unknown entry (HAMi
/// ignores unknown names; fracgpu refuses them so a typo is not silently spread), or
/// fragmentation-aware inside a list.
Result<GpuPolicySpec> ParseGpuPolicySpec(const std::string& value);

/// Per-pod weights of the three terms of the per-GPU score (`hami.io/device-scoring-weights`,
/// HAMi v2.10.0 `pkg/util/device_scoring_weights.go`). Default 1/1/1 = HAMi's classic score.
struct ScoringWeights {
  int64_t slot = 1;
  int64_t core = 1;
  int64_t memory = 1;

  bool operator==(const ScoringWeights&) const = default;
};

/// Parses "slot=<int>,core=<int>,memory=<int>" exactly as HAMi v2.10.0 does: three entries,
/// each key once, integers ≥ 0, at least one > 0 (entries and values trimmed). Errors:
/// kInvalidArgument saying which rule the value breaks (HAMi fails Filter on the same values).
Result<ScoringWeights> ParseScoringWeights(const std::string& value);

/// "binpack" / "spread" → NodePolicy (exact, lower case); anything else is kInvalidArgument
/// naming the value and the accepted names.
Result<NodePolicy> ParseNodePolicy(const std::string& value);
/// "binpack" / "spread" / "topology-aware" / "fragmentation-aware" → GpuPolicy (exact, lower
/// case): one policy, as the scheduler's default flag takes it. Pod annotations go through
/// ParseGpuPolicySpec, which also takes HAMi v2.10's "mutex", "numa" and comma chains.
Result<GpuPolicy> ParseGpuPolicy(const std::string& value);
/// The annotation spelling of a policy ("binpack", …); ParseNodePolicy inverts it.
const char* NodePolicyName(NodePolicy policy);
/// The annotation spelling of a policy ("topology-aware", …); ParseGpuPolicy inverts it.
const char* GpuPolicyName(GpuPolicy policy);

/// What one container asks for, after defaults (docs/design/CONTRACT.md §1).
struct ContainerRequest {
  std::string name;
  bool init = false;     ///< an init container (sidecars included)
  int32_t num_gpus = 0;  ///< distinct physical GPUs; 0 = this container uses no GPU
  /// Memory per GPU in MiB when `nvidia.com/gpumem` was given; 0 otherwise.
  int64_t mem_mib = 0;
  /// Memory per GPU as % of the card when mem_mib == 0 (100 when no memory was given).
  int32_t mem_percent = 100;
  int32_t cores_percent = 0;  ///< SM share per GPU, 0..100 (100 = exclusive card)
  int32_t priority = 1;       ///< CUDA_TASK_PRIORITY: 0 high, 1 low (default)
  /// `CUDA_DISABLE_CONTROL` as a literal env value in the spec (nullopt when absent).
  std::optional<bool> disable_control;

  bool UsesGpu() const { return num_gpus > 0; }
  /// Memory this request takes on a card with `devmem_mib` MiB: mem_mib if set, else
  /// floor(devmem_mib × mem_percent / 100).
  int64_t MemOn(int64_t devmem_mib) const {
    return mem_mib > 0 ? mem_mib : devmem_mib * mem_percent / 100;
  }
  /// True when it asks for whole, exclusive cards (cores 100 and the whole memory).
  bool WholeCards() const { return cores_percent == 100 && mem_mib == 0 && mem_percent == 100; }

  bool operator==(const ContainerRequest&) const = default;
};

/// At most this many entries in one list annotation (nvidia.com/use-gputype, nouse-gputype,
/// use-gpuuuid, nouse-gpuuuid): ParsePodRequest refuses a longer list (kInvalidArgument naming
/// the annotation, its count and this cap), so the webhook rejects such a pod at admission and
/// /filter's work per node stays bounded. A node has at most 16 GPUs; 1,024 UUIDs name those
/// of 64 full nodes.
inline constexpr size_t kMaxAnnotationListEntries = 1024;

/// A hash set of GPU UUIDs compared as GpuUuidEquals (core/gputype.h) does: ASCII case
/// ignored. Built once per request by ParsePodRequest from use_uuids / nouse_uuids, so a GPU
/// is matched in O(1) instead of O(list). Derived data: two indexes always compare equal (the
/// lists they came from are compared); `source_size` is the size of the list it was built
/// from, and an index whose list has since changed size is not used (GpuUuidAllowed then
/// scans the list).
struct GpuUuidIndex {
  struct Hash {
    size_t operator()(const std::string& s) const {
      uint64_t h = 1469598103934665603ull;  // FNV-1a over the upper-cased bytes
      for (char c : s) {
        h ^= static_cast<unsigned char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
        h *= 1099511628211ull;
      }
      return static_cast<size_t>(h);
    }
  };
  struct Equal {
    bool operator()(const std::string& a, const std::string& b) const {
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        char x = a[i], y = b[i];
        if (x >= 'a' && x <= 'z') x = static_cast<char>(x - 'a' + 'A');
        if (y >= 'a' && y <= 'z') y = static_cast<char>(y - 'a' + 'A');
        if (x != y) return false;
      }
      return true;
    }
  };
  std::unordered_set<std::string, Hash, Equal> set;
  size_t source_size = 0;

  /// The index of `list`.
  static GpuUuidIndex Of(const std::vector<std::string>& list) {
    GpuUuidIndex index;
    index.set.reserve(list.size());
    index.set.insert(list.begin(), list.end());
    index.source_size = list.size();
    return index;
  }
  /// Whether this index was built from `list` (as far as its size tells) and can answer for it.
  bool Covers(const std::vector<std::string>& list) const {
    return !list.empty() && source_size == list.size();
  }
  bool operator==(const GpuUuidIndex&) const { return true; }
};

/// What a pod asks for: its containers (init containers first, in spec order, then app
/// containers; ephemeral containers never get GPUs) and the user-settable annotations.
struct PodRequest {
  std::vector<ContainerRequest> containers;
  std::vector<std::string> use_types;    ///< nvidia.com/use-gputype entries (empty = any)
  std::vector<std::string> nouse_types;  ///< nvidia.com/nouse-gputype entries
  std::vector<std::string> use_uuids;    ///< nvidia.com/use-gpuuuid
  std::vector<std::string> nouse_uuids;  ///< nvidia.com/nouse-gpuuuid
  GpuUuidIndex use_uuid_index;           ///< use_uuids as a hash set (ParsePodRequest)
  GpuUuidIndex nouse_uuid_index;         ///< nouse_uuids as a hash set (ParsePodRequest)
  bool numa_bind = false;                ///< nvidia.com/numa-bind (Go strconv.ParseBool)
  /// fracgpu.io/borrower is "true": the pod may use lent memory (FitOptions::now_unix).
  bool borrower = false;
  std::optional<NodePolicy> node_policy;  ///< hami.io/node-scheduler-policy, when set
  std::optional<GpuPolicy> gpu_policy;    ///< hami.io/gpu-scheduler-policy, when set
  /// The whole gpu-scheduler-policy value (chain keys, mutex); `spec.policy` == *gpu_policy.
  std::optional<GpuPolicySpec> gpu_policy_spec;
  /// nvidia.com/vgpu-mode ("" = any): a GPU fits only when this value contains its mode.
  std::string vgpu_mode;
  /// hami.io/device-scoring-weights (default 1/1/1).
  ScoringWeights scoring_weights;
  /// Admission warnings (e.g. gpumem and gpumem-percentage both given; slice keys written as
  /// annotations; priority without a GPU).
  std::vector<std::string> warnings;

  bool operator==(const PodRequest&) const = default;

  /// True when any container uses fracgpu (num_gpus ≥ 1 after defaults).
  bool UsesGpu() const {
    for (const auto& c : containers) {
      if (c.UsesGpu()) return true;
    }
    return false;
  }
};

/// Parses the GPU request of a pod (a Kubernetes Pod object as JSON: metadata.annotations,
/// spec.initContainers, spec.containers, resources.limits falling back to requests).
/// Quantities may be JSON numbers or strings in canonical form ("3k" = 3000); fractions
/// ("500m") and binary suffixes ("3Gi") are errors that say the unit.
/// Absent or null maps and lists (metadata, annotations, spec, containers, resources, env)
/// count as empty; present ones of the wrong JSON type are errors. Empty annotation values
/// count as unset. `CUDA_DISABLE_CONTROL` is validated only in containers that use a GPU
/// (elsewhere it is irrelevant; an unparsable value there is left as nullopt).
/// Errors: kInvalidArgument with a message naming container, resource and value, e.g.
/// `container "train": nvidia.com/gpucores must be an integer 0..100, got "150"`, or the
/// annotation and its value. Never throws. Thread-safe (pure function).
Result<PodRequest> ParsePodRequest(const nlohmann::json& pod, const ResourceNames& names = {});

/// One value the admission webhook writes into a container's `resources.limits`
/// (docs/design/CONTRACT.md §1: the `nvidia.com/gpu` and `gpucores` defaults, and every fracgpu
/// resource given only in `requests`; memory defaults are never written: absent memory = whole
/// card).
struct LimitDefault {
  /// RFC 6901 JSON pointer of the container, e.g. "/spec/initContainers/0".
  std::string container_pointer;
  std::string resource;  ///< resource name, e.g. "nvidia.com/gpu"
  /// The quantity to write: a defaulted value as a string ("1", "100"), or a request-only
  /// value copied exactly as given in `requests`.
  nlohmann::json value;

  bool operator==(const LimitDefault&) const = default;
};

/// The values the webhook must add to the pod's limits, in container order (init containers
/// first) and, per container, in the order gpu, gpumem, gpumem-percentage, gpucores, priority.
/// Containers using no GPU only get their request-only values copied. Errors: those of
/// ParsePodRequest (the pod is validated first). Never throws.
Result<std::vector<LimitDefault>> ComputeLimitDefaults(const nlohmann::json& pod,
                                                       const ResourceNames& names = {});

/// The same values as an RFC 6902 JSON Patch (an array of "add" operations) ready for an
/// AdmissionResponse: when a container has no `resources.limits` object, one "add" creates it
/// with all its values; otherwise one "add" per value (names escaped per RFC 6901). Empty array
/// when there is nothing to write. Errors: those of ParsePodRequest.
Result<nlohmann::json> LimitDefaultsPatch(const nlohmann::json& pod,
                                          const ResourceNames& names = {});

/// Writes the limit defaults into `pod` in place (the simulator and tests use this; the
/// webhook sends LimitDefaultsPatch). Idempotent: a second call changes nothing, and
/// ParsePodRequest returns the same containers before and after. On error `pod` is unchanged.
Status ApplyLimitDefaults(nlohmann::json& pod, const ResourceNames& names = {});

/// True when a GPU whose type string is `gpu_type` is allowed by the request's use/nouse type
/// lists, using the token rule of docs/design/CONTRACT.md §1 (case-insensitive tokens split on
/// space, '-' and '_', an entry matches when its tokens appear in order among the type's tokens;
/// nouse wins).
bool GpuTypeAllowed(const PodRequest& request, const std::string& gpu_type);
/// True when the GPU `uuid` is allowed by the use/nouse UUID lists (nouse wins).
bool GpuUuidAllowed(const PodRequest& request, const std::string& uuid);

}  // namespace fracgpu::core
