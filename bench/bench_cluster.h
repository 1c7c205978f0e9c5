#pragma once
// The cluster and the pod the scheduler benches share (bench_filter, bench_frag_bind): nodes of
// 8 × A100 80 GB (81,920 MiB, NUMA 0 for GPUs 0–3, 1 for 4–7), a 20 GiB / 25 % pod on every
// other GPU (half loaded, so fit does real work), and a pod asking for one 30,000 MiB slice
// with 30 % of the SMs, which fits on most of them.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/annotations.h"
#include "core/codec.h"
#include "scheduler/state.h"

namespace fracgpu::bench {

/// Adds `nodes` nodes "node-0" … and their running pods to `state`.
inline void Populate(scheduler::ClusterState& state, int nodes) {
  for (int n = 0; n < nodes; ++n) {
    std::string name = "node-" + std::to_string(n);
    std::vector<core::DeviceInfo> devices;
    for (int g = 0; g < 8; ++g) {
      core::DeviceInfo d;
      d.uuid = "GPU-" + std::to_string(n) + "-" + std::to_string(g);
      d.index = g;
      d.devmem_mib = 81920;
      d.type = "NVIDIA-NVIDIA A100-SXM4-80GB";
      d.numa = g / 4;
      devices.push_back(d);
    }
    nlohmann::json node = {
        {"metadata",
         {{"name", name},
          {"annotations", {{core::kAnnotationNodeRegister, core::EncodeNodeRegister(devices)}}}}},
        {"status", {{"allocatable", {{"nvidia.com/gpu", "80"}}}}}};
    (void)state.UpsertNode(node);
    for (int g = 0; g < 8; g += 2) {
      nlohmann::json pod = {
          {"metadata",
           {{"name", name + "-p" + std::to_string(g)},
            {"namespace", "bench"},
            {"uid", name + "-u" + std::to_string(g)},
            {"annotations",
             {{core::kAnnotationVgpuNode, name},
              {core::kAnnotationVgpuDevicesAllocated, devices[g].uuid + ",NVIDIA,20480,25:;"}}}}},
          {"status", {{"phase", "Running"}}}};
      (void)state.UpsertPod(pod);
    }
  }
}

/// The pod both benches ask about (namespace "bench", UID "q"), with `annotations`.
inline nlohmann::json BenchPod(nlohmann::json annotations = nlohmann::json::object()) {
  nlohmann::json pod = {{"metadata", {{"name", "q"}, {"namespace", "bench"}, {"uid", "q"}}},
                        {"spec",
                         {{"containers",
                           {{{"name", "c"},
                             {"resources",
                              {{"limits",
                                {{"nvidia.com/gpu", "1"},
                                 {"nvidia.com/gpumem", "30000"},
                                 {"nvidia.com/gpucores", "30"}}}}}}}}}}};
  if (!annotations.empty()) pod["metadata"]["annotations"] = std::move(annotations);
  return pod;
}

}  // namespace fracgpu::bench
