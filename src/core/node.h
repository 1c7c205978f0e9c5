#pragma once
// A node's GPUs with their current usage: what fit, the scoring policies and the
// fragmentation measure read. Built by the scheduler from node and pod annotations, and by
// the simulator from the trace (docs/design/CONTRACT.md §2; docs/design/hami-behaviour.md §3.5
// "NodeUsage").

#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"

namespace fracgpu::core {

/// One GPU of a node: what it offers and what is already promised on it.
/// The usage fields come first, before info's numbers: what fit reads of a GPU lies within
/// 56 bytes (see DeviceInfo).
struct GpuState {
  int64_t used_mem_mib = 0;  ///< MiB promised
  int32_t used = 0;          ///< slices (containers) placed on it
  int32_t used_cores = 0;    ///< SM % promised (out of info.devcore)
  bool cordoned = false;     ///< UUID listed in `hami.io/device-cordon`
  /// Not in the node's registration any more, kept only for the usage its pods still hold
  /// (core::ClusterState): never schedulable (also !info.health and cordoned).
  bool ghost = false;
  DeviceInfo info;

  int64_t FreeMemMib() const { return info.devmem_mib - used_mem_mib; }
  int32_t FreeCores() const { return info.devcore - used_cores; }
};

/// A node as the scheduler sees it: its GPUs, their link scores, and (when known) the
/// CPU and memory kube-scheduler's NodeResourcesFit would check.
struct NodeState {
  std::string name;
  std::vector<GpuState> gpus;   ///< in NVML index order
  TopologyScores topology;      ///< empty when the node publishes none
  int64_t cpu_milli_total = 0;  ///< 0 = not tracked
  int64_t cpu_milli_used = 0;
  int64_t mem_mib_total = 0;  ///< host memory, MiB; 0 = not tracked
  int64_t mem_mib_used = 0;
  /// Unix seconds of the node's lent-memory record (core/lent.h); 0 = none (or unreadable):
  /// nothing lent.
  int64_t lent_at_unix = 0;
  /// MiB each GPU lends to borrower pods (`fracgpu.io/lent-memory`), by position in `gpus`;
  /// empty (most nodes), or shorter than `gpus`, means 0 for the rest. Counts only for a
  /// borrower and while lent_at_unix is fresh (core::LentFresh). Kept beside the GPUs, not in
  /// GpuState, so that the nodes that lend nothing pay 24 bytes, not 8 per GPU.
  std::vector<int32_t> lent_mib;

  /// MiB GPU `i` lends as last written (freshness not applied).
  int64_t LentMib(size_t i) const { return i < lent_mib.size() ? lent_mib[i] : 0; }
};

}  // namespace fracgpu::core
