#pragma once
// The simulated cluster: trace nodes turned into the NodeState the scheduler's core code
// reads (fit, fragmentation) and into the compact FragNode the policies score.

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/frag.h"
#include "core/node.h"
#include "sim/trace.h"

namespace fracgpu::sim {

/// Device memory of a trace GPU model, MiB. Published figures: Tesla T4 16 GB, Tesla P100
/// 16 GB (PCIe 16 GB variant), Tesla V100 16 GB / 32 GB (the trace's V100M16 / V100M32),
/// A10 24 GB (NVIDIA data sheets). G2 and G3 are undisclosed Alibaba codes; fracgpu assumes
/// 32 GB for both (documented in docs/simulate.md). Memory never constrains the experiment: a
/// trace pod asks for gpumem-percentage = gpucores = gpu_milli / 10.
struct GpuModelSpec {
  std::string model;
  int64_t devmem_mib = 0;
};

/// The models above, in a fixed order.
const std::vector<GpuModelSpec>& KnownGpuModels();

/// Split count (slices per GPU) given to every simulated GPU: 100, so that the smallest
/// possible trace share (10 milli-GPU = 1 % of cores) can fill a card; the paper's simulator
/// has no slice limit, so the count must never be what refuses a pod.
inline constexpr int32_t kSimSplitCount = 100;

/// A cluster built from a node list.
struct SimCluster {
  std::vector<std::string> type_table;  ///< GPU model codes; FragNode type id = index
  std::vector<core::NodeState> states;  ///< nodes sorted by name
  std::vector<core::FragNode> frag;     ///< the same nodes, compact, same order
  int64_t total_gpus = 0;

  int64_t CapacityMilli() const { return total_gpus * core::kMilliPerGpu; }
};

/// Builds the cluster from trace nodes (only nodes with GPUs; the paper simulates the 1,213
/// GPU nodes). GPU i of node "n" gets UUID "n-gpu<i>", type = the model code, devcore 100,
/// count kSimSplitCount, devmem from KnownGpuModels(). Errors: kInvalidArgument
/// `file:line: model: unknown GPU model "X" (known: …)`, or when there are no GPU nodes or more
/// than core::kMaxFragTypes models.
Result<SimCluster> BuildCluster(const std::vector<TraceNode>& nodes, const std::string& file);

}  // namespace fracgpu::sim
