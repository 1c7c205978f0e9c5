#include "sim/cluster.h"

#include <algorithm>

namespace fracgpu::sim {

const std::vector<GpuModelSpec>& KnownGpuModels() {
  static const std::vector<GpuModelSpec> kModels = {
      {"T4", 16384},  {"P100", 16384}, {"V100M16", 16384}, {"V100M32", 32768},
      {"A10", 24576}, {"G2", 32768},   {"G3", 32768},
  };
  return kModels;
}

Result<SimCluster> BuildCluster(const std::vector<TraceNode>& nodes, const std::string& file) {
  SimCluster c;
  std::vector<const TraceNode*> gpu_nodes;
  for (const auto& n : nodes) {
    if (n.gpus > 0) gpu_nodes.push_back(&n);
  }
  if (gpu_nodes.empty()) return InvalidArgument(file + ": no node with GPUs");
  std::sort(gpu_nodes.begin(), gpu_nodes.end(),
            [](const TraceNode* a, const TraceNode* b) { return a->name < b->name; });
  std::string known;
  for (const auto& m : KnownGpuModels()) known += (known.empty() ? "" : ", ") + m.model;
  for (const TraceNode* n : gpu_nodes) {
    const auto spec = std::find_if(KnownGpuModels().begin(), KnownGpuModels().end(),
                                   [&](const GpuModelSpec& m) { return m.model == n->model; });
    if (spec == KnownGpuModels().end()) {
      return InvalidArgument(file + ":" + std::to_string(n->line) +
                             ": model: unknown GPU model \"" + n->model + "\" (known: " + known +
                             ")");
    }
    auto type = std::find(c.type_table.begin(), c.type_table.end(), n->model);
    if (type == c.type_table.end()) {
      if (c.type_table.size() >= static_cast<size_t>(core::kMaxFragTypes)) {
        return InvalidArgument(file + ": more than 64 GPU models");
      }
      c.type_table.push_back(n->model);
      type = c.type_table.end() - 1;
    }
    const auto type_id = static_cast<uint8_t>(type - c.type_table.begin());
    core::NodeState s;
    s.name = n->name;
    s.cpu_milli_total = n->cpu_milli;
    s.mem_mib_total = n->memory_mib;
    core::FragNode f;
    f.cpu_left = n->cpu_milli;
    f.mem_left = n->memory_mib;
    f.num_gpus = n->gpus;
    for (int32_t g = 0; g < n->gpus; ++g) {
      core::GpuState gpu;
      gpu.info.uuid = n->name + "-gpu" + std::to_string(g);
      gpu.info.index = g;
      gpu.info.count = kSimSplitCount;
      gpu.info.devmem_mib = spec->devmem_mib;
      gpu.info.devcore = 100;
      gpu.info.type = n->model;
      s.gpus.push_back(std::move(gpu));
      f.gpu_left[g] = core::kMilliPerGpu;
      f.gpu_type[g] = type_id;
    }
    c.total_gpus += n->gpus;
    c.states.push_back(std::move(s));
    c.frag.push_back(f);
  }
  return c;
}

}  // namespace fracgpu::sim
