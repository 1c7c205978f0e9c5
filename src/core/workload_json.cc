#include "core/workload_json.h"

#include <cmath>
#include <limits>
#include <string>

#include "core/codec_json.h"

namespace fracgpu::core {

using nlohmann::json;

json TargetWorkloadToJson(const std::vector<WeightedShape>& workload) {
  json out = json::array();
  for (const auto& w : workload) {
    out.push_back({{"cpu_milli", w.shape.cpu_milli},
                   {"gpu_milli", w.shape.gpu_milli},
                   {"num_gpus", w.shape.num_gpus},
                   {"gpu_spec", w.shape.gpu_spec},
                   {"popularity", w.popularity}});
  }
  return out;
}

namespace {

// A whole-number field of `e` that fits an int64_t; false when missing, not whole, or larger.
bool WholeField(const json& e, const char* key, int64_t* out) {
  auto it = e.find(key);
  if (it == e.end() || !it->is_number_integer()) return false;
  if (it->is_number_unsigned() &&
      it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return false;
  *out = it->get<int64_t>();
  return true;
}

}  // namespace

Result<std::vector<WeightedShape>> ParseTargetWorkload(std::string_view text) {
  Result<json> parsed = ParseJsonBounded(text, "");
  if (!parsed.ok()) return parsed.status();
  const json& j = *parsed;
  if (!j.is_array() || j.empty()) return InvalidArgument("not a non-empty JSON array of shapes");
  std::vector<WeightedShape> out;
  double total = 0;
  for (const json& e : j) {
    if (!e.is_object()) return InvalidArgument("shape " + e.dump() + ": not an object");
    int64_t cpu = 0, gpu = 0, num = 0;
    for (auto [key, value] : {std::pair<const char*, int64_t*>{"cpu_milli", &cpu},
                              {"gpu_milli", &gpu},
                              {"num_gpus", &num}}) {
      if (!WholeField(e, key, value))
        return InvalidArgument("shape " + e.dump() + ": \"" + key + "\" must be a whole number");
    }
    auto pop = e.find("popularity");
    if (pop == e.end() || !pop->is_number())
      return InvalidArgument("shape " + e.dump() + ": \"popularity\" must be a number");
    auto spec = e.find("gpu_spec");
    if (spec != e.end() && !spec->is_string())
      return InvalidArgument("shape " + e.dump() + ": \"gpu_spec\" must be a string");
    WeightedShape w;
    w.popularity = pop->get<double>();
    if (cpu < 0 || num < 0 || num > std::numeric_limits<int32_t>::max() || gpu < 0 || gpu > 1000 ||
        !(w.popularity > 0))
      return InvalidArgument("shape " + e.dump() + " out of range");
    w.shape.cpu_milli = cpu;
    w.shape.gpu_milli = static_cast<int32_t>(gpu);
    w.shape.num_gpus = static_cast<int32_t>(num);
    if (spec != e.end()) w.shape.gpu_spec = spec->get<std::string>();
    total += w.popularity;
    out.push_back(std::move(w));
  }
  if (!(std::abs(total - 1.0) <= 1e-6))
    return InvalidArgument("popularities sum to " + std::to_string(total) + ", not 1");
  return out;
}

}  // namespace fracgpu::core
