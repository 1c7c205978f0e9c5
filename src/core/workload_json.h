#pragma once
// The target workload M of the fragmentation measure (core/frag.h WeightedShape) as JSON, one
// format for its writer (`fracgpu simulate --replay-out`, the trace's M) and its reader
// (`fracgpu scheduler --fragmentation-workload`): an array of
// {"cpu_milli", "gpu_milli", "num_gpus", "gpu_spec", "popularity"}.

#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "core/frag.h"

namespace fracgpu::core {

/// `workload` as a JSON array, one object per shape (cpu_milli in millicores, gpu_milli in
/// milli-GPU per GPU, num_gpus, gpu_spec, popularity as a fraction).
nlohmann::json TargetWorkloadToJson(const std::vector<WeightedShape>& workload);

/// Reads what TargetWorkloadToJson writes, bounded in depth (ParseJsonBounded). Each shape needs
/// whole numbers cpu_milli ≥ 0, 0 ≤ gpu_milli ≤ 1000 and num_gpus ≥ 0, a popularity > 0 and an
/// optional string gpu_spec; the popularities sum to 1 (within 1e-6). Errors (kInvalidArgument)
/// name the shape and the field: "not valid JSON: …", "not a non-empty JSON array of shapes",
/// `shape {…}: "gpu_milli" must be a whole number`, `shape {…} out of range`, "popularities sum to
/// 0.900000, not 1".
Result<std::vector<WeightedShape>> ParseTargetWorkload(std::string_view text);

}  // namespace fracgpu::core
