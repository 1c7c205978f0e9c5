// Fuzz target: arbitrary bytes as the node lock annotation (`hami.io/mutex.lock`). An accepted
// value must survive encode → decode unchanged and carry no ',' in its names; errors must be
// kInvalidArgument with a message.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/node_lock_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view value(reinterpret_cast<const char*>(data), size);
  fracgpu::Result<fracgpu::core::NodeLock> lock = fracgpu::core::DecodeNodeLock(value);
  if (!lock.ok()) {
    if (lock.status().code() != fracgpu::StatusCode::kInvalidArgument ||
        lock.status().message().empty())
      std::abort();
    return 0;
  }
  if (lock->pod_namespace.find(',') != std::string::npos ||
      lock->pod_name.find(',') != std::string::npos)
    std::abort();
  // A legacy bare time names no pod.
  if (value.find(',') == std::string_view::npos && lock->names_pod()) std::abort();
  const std::string encoded = fracgpu::core::EncodeNodeLock(*lock);
  fracgpu::Result<fracgpu::core::NodeLock> back = fracgpu::core::DecodeNodeLock(encoded);
  if (!back.ok()) {
    std::fprintf(stderr, "re-decode failed: %s\n%s\n", back.status().ToString().c_str(),
                 encoded.c_str());
    std::abort();
  }
  if (!(*back == *lock)) {
    std::fprintf(stderr, "node lock round trip differs:\n%s\n", encoded.c_str());
    std::abort();
  }
  // The encoding is canonical: encoding the re-decoded value gives the same text.
  if (fracgpu::core::EncodeNodeLock(*back) != encoded) std::abort();
  return 0;
}
