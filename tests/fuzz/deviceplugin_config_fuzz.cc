// Fuzz target: the node plugins' parsers of outside input (node/config.h, node/health.h and the
// device plugin's LockedPod). The first byte picks the parser (YAML device config, node overrides
// JSON, Xid policy env, node lock annotation); the rest is the input. Each must return a value
// or an error, never crash, and a parsed config must satisfy the documented ranges.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "deviceplugin/allocator.h"
#include "node/config.h"
#include "node/health.h"

using namespace fracgpu::deviceplugin;  // NOLINT
using namespace fracgpu::node;          // NOLINT

namespace {
void CheckRanges(const DeviceConfig& c) {
  if (c.split_count < 1 || c.split_count > 1000) std::abort();
  if (!(c.memory_scaling > 0) || c.memory_scaling > 100) std::abort();
  if (!(c.core_scaling > 0) || c.core_scaling > 100) std::abort();
  if (c.default_cores < 0 || c.default_cores > 100) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      auto c = ParseDeviceConfigYaml(input);
      if (c.ok()) CheckRanges(*c);
      break;
    }
    case 1: {
      auto c = ApplyNodeOverrides(DeviceConfig{}, input, "node-a");
      if (c.ok()) CheckRanges(*c);
      break;
    }
    case 2: {
      size_t nl = input.find('\n');
      auto p =
          ParseXidPolicy(input.substr(0, nl), nl == std::string::npos ? "" : input.substr(nl + 1));
      (void)p;
      break;
    }
    case 3: {
      auto l = LockedPod(input);
      if (l.ok() && (l->first.empty() || l->second.empty())) std::abort();
      break;
    }
  }
  return 0;
}
