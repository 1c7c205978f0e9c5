#pragma once
// Small cluster objects shared by the scheduler's and the UI's tests of the GPU choice: the
// same node and request, so both suites pin the same worked example.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/annotations.h"
#include "core/codec.h"
#include "core/request.h"

namespace fracgpu::testsupport {

/// A Node "n1" with two idle 16384 MiB T4s (GPU-0, GPU-1; split count 10, 100 cores each),
/// registered as the device plugin does (hami.io/node-nvidia-register), allocatable 20.
inline nlohmann::json TwoGpuNode() {
  std::vector<core::DeviceInfo> devices(2);
  for (int i = 0; i < 2; ++i) {
    devices[i].uuid = "GPU-" + std::to_string(i);
    devices[i].index = i;
    devices[i].count = 10;
    devices[i].devmem_mib = 16384;
    devices[i].devcore = 100;
    devices[i].type = "NVIDIA-Tesla T4";
  }
  return {{"metadata",
           {{"name", "n1"},
            {"annotations", {{core::kAnnotationNodeRegister, core::EncodeNodeRegister(devices)}}}}},
          {"status", {{"allocatable", {{"nvidia.com/gpu", "20"}}}}}};
}

/// A pod of one container asking for `cores` % of one GPU's SMs and the same % of its memory.
inline core::PodRequest Sharing(int32_t cores) {
  core::PodRequest req;
  core::ContainerRequest c;
  c.name = "main";
  c.num_gpus = 1;
  c.mem_percent = cores;
  c.cores_percent = cores;
  req.containers.push_back(c);
  return req;
}

}  // namespace fracgpu::testsupport
