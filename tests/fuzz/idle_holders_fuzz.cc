// Fuzz target: arbitrary bytes as the idle-holder record (`fracgpu.io/idle-holders`,
// core/idle_holders.h). An accepted value must hold within the bounds (entry count, MiB, idle
// seconds, UID and UUID shape, no (pod, GPU) twice) and be its own canonical encoding; errors
// must be kInvalidArgument with a message.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "core/idle_holders.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace core = fracgpu::core;
  const std::string_view value(reinterpret_cast<const char*>(data), size);
  fracgpu::Result<core::IdleHolders> record = core::ParseIdleHolders(value);
  if (!record.ok()) {
    if (record.status().code() != fracgpu::StatusCode::kInvalidArgument ||
        record.status().message().empty())
      std::abort();
    return 0;
  }
  if (record->at_unix < 1 || record->holders.size() > core::kIdleHoldersMaxEntries) std::abort();
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& h : record->holders) {
    if (h.mib < 0 || h.mib > core::kIdleHoldersMaxMib) std::abort();
    if (h.idle_s < 0 || h.idle_s > core::kIdleHoldersMaxIdleSeconds) std::abort();
    if (h.pod_uid.empty() || h.pod_uid.size() > core::kIdleHoldersMaxPodUid) std::abort();
    if (h.gpu_uuid.rfind("GPU-", 0) != 0 || h.gpu_uuid.size() > core::kLentMaxUuid) std::abort();
    if (h.pod_uid.find_first_of(",:;/") != std::string::npos ||
        h.gpu_uuid.find_first_of(",:;/") != std::string::npos)
      std::abort();
    if (!seen.insert({h.pod_uid, h.gpu_uuid}).second) std::abort();
  }
  const std::string formatted = core::FormatIdleHolders(*record);
  if (formatted != value) {  // the accepted encoding is canonical: the value itself
    std::fprintf(stderr, "not canonical:\n%s\n", formatted.c_str());
    std::abort();
  }
  fracgpu::Result<core::IdleHolders> back = core::ParseIdleHolders(formatted);
  if (!back.ok() || !(*back == *record)) std::abort();
  return 0;
}
