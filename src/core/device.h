#pragma once
// Device inventory (what a node's GPUs offer, from `hami.io/node-nvidia-register`) and
// allocations (what a pod was given, `hami.io/vgpu-devices-allocated`), docs/design/CONTRACT.md §2.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fracgpu::core {

/// One physical GPU as a node registers it (one element of the register annotation).
/// The numbers fit reads on every GPU of every candidate node come first and together (one
/// cache line with GpuState's usage; /filter walks thousands of nodes), the strings after.
struct DeviceInfo {
  int64_t devmem_mib = 0;  ///< MiB, already multiplied by the memory scaling
  int32_t index = 0;       ///< NVML index
  int32_t count = 10;      ///< split count: max concurrent slices on the card
  int32_t devcore = 100;   ///< 100 × core scaling
  int32_t numa = 0;
  bool health = true;
  std::string uuid;  ///< "GPU-…" (`id`)
  std::string type;  ///< e.g. "NVIDIA-Tesla V100-PCIE-32GB"
  std::string mode = "hami-core";

  bool operator==(const DeviceInfo&) const = default;
};

/// One GPU granted to one container: an element of the allocation encoding
/// `<UUID>,NVIDIA,<mem MiB>,<cores %>:`.
struct DeviceGrant {
  std::string uuid;
  std::string type = "NVIDIA";  ///< the vendor token written in the annotation
  int64_t mem_mib = 0;
  int32_t cores_percent = 0;

  bool operator==(const DeviceGrant&) const = default;
};

/// The GPUs of one container (empty for a container without GPU).
using ContainerGrants = std::vector<DeviceGrant>;
/// A pod's allocation: one entry per container, init containers first (docs/design/CONTRACT.md §2).
using PodGrants = std::vector<ContainerGrants>;

/// Pairwise link scores between a node's GPUs (`hami.io/node-nvidia-score`): score[a][b].
using TopologyScores = std::map<std::string, std::map<std::string, int32_t>>;

}  // namespace fracgpu::core
