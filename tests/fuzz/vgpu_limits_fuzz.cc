// Fuzz target: libvgpu.so's limits-file and environment parser (src/vgpu/limits.h).
// The input is parsed as a limits file, then its lines again as an environment.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "vgpu/limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fracgpu::vgpu;
  Config file_config;
  ParseLimitsFile(&file_config, reinterpret_cast<const char*>(data), size);
  FinishConfig(&file_config);
  bool fail = false;
  for (int i = -1; i <= kMaxDevices; ++i) {
    (void)EffectiveMemoryLimit(file_config, i, &fail);
    (void)EffectiveSmLimit(file_config, i);
  }
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    lines.push_back(text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos));
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  std::vector<char*> envp;
  for (auto& l : lines) envp.push_back(l.data());  // embedded NULs just cut a line short
  envp.push_back(nullptr);
  Config env_config;
  ApplyEnvironment(&env_config, envp.data());
  FinishConfig(&env_config);
  return 0;
}
