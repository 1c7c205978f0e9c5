#pragma once
// Nodes, containers and pods for the tests of core/fit.h (fit_test, fit_summary_test): the
// same builders, so that both suites read their worked examples alike.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/node.h"
#include "core/request.h"

namespace fracgpu::testsupport {

/// "GPU-<i>" (built by append: GCC 12 -O3 warns falsely on "literal" + std::string).
inline std::string Name(int i) {
  std::string s = "GPU-";
  s += std::to_string(i);
  return s;
}

/// Node "node-a" with `gpus`, each given its position as its index.
inline core::NodeState Node(std::vector<core::GpuState> gpus) {
  core::NodeState n;
  n.name = "node-a";
  n.gpus = std::move(gpus);
  for (size_t i = 0; i < n.gpus.size(); ++i) n.gpus[i].info.index = static_cast<int32_t>(i);
  return n;
}

/// A container asking `gpus` GPUs of `mem` MiB (0 = use `pct` % of the card) and `cores` %.
inline core::ContainerRequest Ctr(int32_t gpus, int64_t mem, int32_t cores, bool init = false,
                                  int32_t pct = 100) {
  core::ContainerRequest c;
  c.name = init ? "init" : "app";
  c.init = init;
  c.num_gpus = gpus;
  c.mem_mib = mem;
  c.mem_percent = pct;
  c.cores_percent = cores;
  return c;
}

/// A pod of `containers` (init containers first, as the pod spec lists them).
inline core::PodRequest Pod(std::vector<core::ContainerRequest> containers) {
  core::PodRequest p;
  p.containers = std::move(containers);
  return p;
}

}  // namespace fracgpu::testsupport
