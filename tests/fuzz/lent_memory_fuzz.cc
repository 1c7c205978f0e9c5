// Fuzz target: arbitrary bytes as the lent-memory record (`fracgpu.io/lent-memory`,
// core/lent.h). An accepted value must hold within the bounds (GPU count, MiB, UUID shape, no
// duplicate) and survive format → parse unchanged; errors must be kInvalidArgument with a
// message.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "core/lent.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using fracgpu::core::LentMemory;
  const std::string_view value(reinterpret_cast<const char*>(data), size);
  fracgpu::Result<LentMemory> lent = fracgpu::core::ParseLentMemory(value);
  if (!lent.ok()) {
    if (lent.status().code() != fracgpu::StatusCode::kInvalidArgument ||
        lent.status().message().empty())
      std::abort();
    return 0;
  }
  if (lent->at_unix < 1 || lent->gpus.size() > fracgpu::core::kLentMaxGpus) std::abort();
  std::set<std::string> seen;
  for (const auto& g : lent->gpus) {
    if (g.mib < 0 || g.mib > fracgpu::core::kLentMaxMib) std::abort();
    if (g.uuid.rfind("GPU-", 0) != 0 || g.uuid.size() > fracgpu::core::kLentMaxUuid) std::abort();
    if (g.uuid.find_first_of(",:;") != std::string::npos) std::abort();
    if (!seen.insert(g.uuid).second) std::abort();
  }
  const std::string formatted = fracgpu::core::FormatLentMemory(*lent);
  // The accepted encoding is canonical: the value itself.
  if (formatted != value) {
    std::fprintf(stderr, "not canonical:\n%s\n", formatted.c_str());
    std::abort();
  }
  fracgpu::Result<LentMemory> back = fracgpu::core::ParseLentMemory(formatted);
  if (!back.ok() || !(*back == *lent)) std::abort();
  return 0;
}
