// Fuzz target: arbitrary bytes as a --fragmentation-workload file (core/workload_json.h). An
// accepted workload holds shapes in range whose popularities sum to 1 and survives write → read
// unchanged; errors must be kInvalidArgument with a message.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/workload_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto m = fracgpu::core::ParseTargetWorkload(text);
  if (!m.ok()) {
    if (m.status().code() != fracgpu::StatusCode::kInvalidArgument || m.status().message().empty())
      std::abort();
    return 0;
  }
  double total = 0;
  for (const auto& w : *m) {
    if (w.shape.cpu_milli < 0 || w.shape.gpu_milli < 0 || w.shape.gpu_milli > 1000 ||
        w.shape.num_gpus < 0 || !(w.popularity > 0))
      std::abort();
    total += w.popularity;
  }
  if (m->empty() || !(std::abs(total - 1.0) <= 1e-6)) std::abort();
  auto back = fracgpu::core::ParseTargetWorkload(fracgpu::core::TargetWorkloadToJson(*m).dump());
  if (!back.ok() || back->size() != m->size()) std::abort();
  for (size_t i = 0; i < m->size(); ++i) {
    if (!((*back)[i].shape == (*m)[i].shape) || (*back)[i].popularity != (*m)[i].popularity)
      std::abort();
  }
  return 0;
}
