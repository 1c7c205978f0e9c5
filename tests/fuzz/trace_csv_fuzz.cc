// Fuzz target: the trace CSV loaders (src/sim/trace.h) and the published-results parser
// (src/sim/expected.h) must return a Status for any input, never crash, and accept only rows
// that satisfy the documented column rules.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sim/expected.h"
#include "sim/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto pods = fracgpu::sim::ParsePodCsv(text, "fuzz.csv"); pods.ok()) {
    for (const auto& p : *pods) {
      const bool sane = !p.name.empty() && p.num_gpus >= 0 && p.num_gpus <= 16 &&
                        p.gpu_milli >= 0 && p.gpu_milli <= 1000 && p.gpu_milli % 10 == 0 &&
                        (p.num_gpus == 0) == (p.gpu_milli == 0) && p.cpu_milli >= 0;
      if (!sane) std::abort();
    }
  }
  if (auto nodes = fracgpu::sim::ParseNodeCsv(text, "fuzz.csv"); nodes.ok()) {
    for (const auto& n : *nodes) {
      if (n.name.empty() || n.gpus < 0 || n.gpus > 16 || (n.gpus > 0) == n.model.empty())
        std::abort();
    }
  }
  (void)fracgpu::sim::ParsePaperCsv(text, "fuzz.csv");
  return 0;
}
