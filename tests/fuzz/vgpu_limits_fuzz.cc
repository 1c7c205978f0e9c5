// Fuzz target: libvgpu.so's limits-file and environment parser (src/vgpu/limits.h).
// The input is parsed as a limits file, then its lines again as an environment, then as a
// limits directory (ParseLimitsDir): files separated by '\f', each "<name>\n<text>".
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

  std::vector<std::string> names;
  std::vector<LimitsFragment> files;
  std::vector<std::string> chunks;
  for (size_t at = 0; at <= text.size() && chunks.size() <= kMaxFragments + 1;) {
    size_t ff = text.find('\f', at);
    chunks.push_back(text.substr(at, ff == std::string::npos ? std::string::npos : ff - at));
    if (ff == std::string::npos) break;
    at = ff + 1;
  }
  names.reserve(chunks.size());
  for (const auto& chunk : chunks) {
    size_t nl = chunk.find('\n');
    names.push_back(chunk.substr(0, nl));  // a NUL inside just cuts the name short
    const char* body = nl == std::string::npos ? "" : chunk.data() + nl + 1;
    size_t body_size = nl == std::string::npos ? 0 : chunk.size() - nl - 1;
    files.push_back({names.back().c_str(), body, body_size});
  }
  Config dir_config;
  ParseLimitsDir(&dir_config, files.data(), files.size());
  FinishConfig(&dir_config);
  for (int i = -1; i <= kMaxDevices; ++i) {
    (void)EffectiveMemoryLimit(dir_config, i, &fail);
    (void)EffectiveSmLimit(dir_config, i);
  }
  return 0;
}
