// Fuzz target: arbitrary bytes as the allocation annotation (`hami.io/vgpu-devices-allocated`).
// An accepted value must survive encode → decode unchanged; errors must carry a message.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string value(reinterpret_cast<const char*>(data), size);
  fracgpu::Result<fracgpu::core::PodGrants> grants = fracgpu::core::DecodePodGrants(value);
  if (!grants.ok()) {
    if (grants.status().message().empty()) std::abort();
    return 0;
  }
  const std::string encoded = fracgpu::core::EncodePodGrants(*grants);
  fracgpu::Result<fracgpu::core::PodGrants> back = fracgpu::core::DecodePodGrants(encoded);
  if (!back.ok()) {
    std::fprintf(stderr, "re-decode failed: %s\n%s\n", back.status().ToString().c_str(),
                 encoded.c_str());
    std::abort();
  }
  if (*back != *grants) {
    std::fprintf(stderr, "grants round trip differs:\n%s\n", encoded.c_str());
    std::abort();
  }
  // The encoding is canonical: encoding the re-decoded value gives the same text.
  if (fracgpu::core::EncodePodGrants(*back) != encoded) std::abort();
  return 0;
}
