#pragma once
// The GPU request of a pod, parsed from container resources and pod annotations exactly as
// shared/design/CONTRACT.md §1 says. One parser serves the webhook, the scheduler, the
// simulator and the UI (STYLE.md: no copy-paste families).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace fracgpu::core {

/// Extended-resource names (configurable per cluster; these are HAMi's defaults, CONTRACT.md §1).
struct ResourceNames {
  std::string gpu = "nvidia.com/gpu";                        ///< count of distinct physical GPUs
  std::string gpumem = "nvidia.com/gpumem";                  ///< MiB per GPU
  std::string gpumem_percentage = "nvidia.com/gpumem-percentage";  ///< % of the card's memory
  std::string gpucores = "nvidia.com/gpucores";              ///< SM share per GPU, %
  std::string priority = "nvidia.com/priority";              ///< 0 high, 1 low
};

/// Node-level policy (`hami.io/node-scheduler-policy`): which node to prefer.
enum class NodePolicy { kBinpack, kSpread };
/// GPU-level policy (`hami.io/gpu-scheduler-policy`): which GPU(s) of the node to prefer.
enum class GpuPolicy { kBinpack, kSpread, kTopologyAware, kFragmentationAware };

/// "binpack" / "spread" → NodePolicy; anything else is kInvalidArgument naming the value.
Result<NodePolicy> ParseNodePolicy(const std::string& value);
/// "binpack" / "spread" / "topology-aware" / "fragmentation-aware" → GpuPolicy.
Result<GpuPolicy> ParseGpuPolicy(const std::string& value);
const char* NodePolicyName(NodePolicy policy);
const char* GpuPolicyName(GpuPolicy policy);

/// What one container asks for, after defaults (CONTRACT.md §1).
struct ContainerRequest {
  std::string name;
  bool init = false;          ///< an init container (sidecars included)
  int32_t num_gpus = 0;       ///< distinct physical GPUs; 0 = this container uses no GPU
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
};

/// What a pod asks for: its containers (init containers first, in spec order, then app
/// containers; ephemeral containers never get GPUs) and the user-settable annotations.
struct PodRequest {
  std::vector<ContainerRequest> containers;
  std::vector<std::string> use_types;    ///< nvidia.com/use-gputype entries (empty = any)
  std::vector<std::string> nouse_types;  ///< nvidia.com/nouse-gputype entries
  std::vector<std::string> use_uuids;    ///< nvidia.com/use-gpuuuid
  std::vector<std::string> nouse_uuids;  ///< nvidia.com/nouse-gpuuuid
  bool numa_bind = false;                ///< nvidia.com/numa-bind: "true"
  std::optional<NodePolicy> node_policy; ///< hami.io/node-scheduler-policy, when set
  std::optional<GpuPolicy> gpu_policy;   ///< hami.io/gpu-scheduler-policy, when set
  /// Admission warnings (e.g. gpumem and gpumem-percentage both given; slice keys written as
  /// annotations; priority without a GPU).
  std::vector<std::string> warnings;

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
/// Errors: kInvalidArgument with a message naming container, resource and value, e.g.
/// `container "train": nvidia.com/gpucores must be an integer 0..100, got "150"`.
Result<PodRequest> ParsePodRequest(const nlohmann::json& pod, const ResourceNames& names = {});

/// True when a GPU whose type string is `gpu_type` is allowed by the request's use/nouse type
/// lists, using the token rule of CONTRACT.md §1 (case-insensitive tokens split on space, '-'
/// and '_', an entry matches when its tokens appear in order among the type's tokens; nouse wins).
bool GpuTypeAllowed(const PodRequest& request, const std::string& gpu_type);
/// True when the GPU `uuid` is allowed by the use/nouse UUID lists (nouse wins).
bool GpuUuidAllowed(const PodRequest& request, const std::string& uuid);

}  // namespace fracgpu::core
