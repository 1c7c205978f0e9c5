// Fuzz target: a ResourceClaim as the DRA driver reads it from the API server (outside input).
// The input (at most 64 KiB) is JSON as k8s::Client hands it over (invalid JSON is skipped);
// ParseClaimAllocation must return shares or an error, never crash, and every share
// must fit the node's device (1..devmem MiB, 0..100 % cores, a known UUID).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "dra/claim.h"

using namespace fracgpu;  // NOLINT

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 16)) return 0;
  auto claim = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (claim.is_discarded()) return 0;
  core::DeviceInfo d;
  d.uuid = "GPU-0";
  d.index = 0;
  d.devmem_mib = 16384;
  auto shares = dra::ParseClaimAllocation(claim, "gpu.fracgpu.io", "node-a", {d});
  if (!shares.ok()) return 0;
  if (shares->empty() || shares->size() > dra::kMaxResults) std::abort();
  for (const auto& s : *shares) {
    if (s.uuid != "GPU-0" || s.mem_mib < 1 || s.mem_mib > 16384 || s.cores < 0 || s.cores > 100)
      std::abort();
  }
  return 0;
}
