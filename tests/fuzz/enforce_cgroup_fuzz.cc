// Fuzz target: /proc/<pid>/cgroup and /proc/<pid>/stat parsing (src/enforce/proc.h). Path
// components below a container's cgroup can be chosen by the tenant; the parsers must never
// crash, read out of bounds, or accept a malformed pod UID / container ID.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "enforce/proc.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto id = fracgpu::enforce::ParseCgroupFile(text);
  if (id.ok() && (id->pod_uid.size() != 36 || id->container_id.size() != 64)) __builtin_trap();
  (void)fracgpu::enforce::ParseStatStartTime(text);
  return 0;
}
