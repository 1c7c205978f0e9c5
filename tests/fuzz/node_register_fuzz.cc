// Fuzz target: arbitrary bytes as the node annotations `hami.io/node-nvidia-register` (JSON or
// legacy colon format) and `hami.io/node-nvidia-score`. An accepted register value must
// survive encode → decode unchanged; errors must carry a message.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string value(reinterpret_cast<const char*>(data), size);
  fracgpu::Result<std::vector<fracgpu::core::DeviceInfo>> devices =
      fracgpu::core::DecodeNodeRegister(value);
  if (devices.ok()) {
    const std::string encoded = fracgpu::core::EncodeNodeRegister(*devices);
    fracgpu::Result<std::vector<fracgpu::core::DeviceInfo>> back =
        fracgpu::core::DecodeNodeRegister(encoded);
    if (!back.ok()) {
      std::fprintf(stderr, "re-decode failed: %s\n%s\n", back.status().ToString().c_str(),
                   encoded.c_str());
      std::abort();
    }
    if (*back != *devices) {
      std::fprintf(stderr, "register round trip differs:\n%s\n", encoded.c_str());
      std::abort();
    }
  } else if (devices.status().message().empty()) {
    std::abort();
  }
  fracgpu::Result<fracgpu::core::TopologyScores> scores =
      fracgpu::core::DecodeTopologyScores(value);
  if (!scores.ok() && scores.status().message().empty()) std::abort();
  return 0;
}
