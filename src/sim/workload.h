#pragma once
// The workload of one experiment: trace pods mapped to pod specs and parsed by the core
// request parser (the one the webhook and the scheduler use), the FGD target workload, and
// the paper's arrival procedure (docs/design/fgd-evaluation.md §2.4 and §3 points 1–4).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/fgd_policies.h"
#include "core/frag.h"
#include "core/request.h"
#include "core/seeded_rng.h"
#include "sim/cluster.h"
#include "sim/trace.h"

namespace fracgpu::sim {

/// The Kubernetes Pod (JSON) a trace pod stands for: one container "main" with requests
/// cpu = cpu_milli "m" and memory = memory_mib "Mi"; for a GPU pod, limits
/// nvidia.com/gpu = num_gpu, nvidia.com/gpucores = nvidia.com/gpumem-percentage =
/// gpu_milli / 10; a gpu_spec "A|B" becomes the annotation nvidia.com/use-gputype "A,B".
nlohmann::json TracePodSpec(const TracePod& pod);

/// Everything a run needs about the pods, prepared once per trace.
struct SimWorkload {
  std::vector<TracePod> pods;               ///< sorted by name
  std::vector<core::PodRequest> requests;   ///< one per distinct (num_gpu, gpu_milli, gpu_spec)
  std::vector<int32_t> request_of;          ///< per pod: index into requests
  std::vector<core::FragDemand> demand;     ///< per pod: what the policies see
  std::vector<core::WeightedShape> target;  ///< the target workload M
  std::vector<core::WeightedShape> target_gpu_weighted;  ///< M of FGD-gpuweighted
  core::FragWorkload compiled;                           ///< M compiled against the cluster's types
  core::FragWorkload compiled_gpu_weighted;              ///< GpuWeightedWorkload(M), compiled
  int64_t total_gpu_milli = 0;                           ///< Σ num_gpu × gpu_milli of the trace
};

/// Sorts the pods by name, parses one pod spec per distinct GPU request with
/// core::ParsePodRequest, derives each pod's FragDemand from the parsed request (gpu_milli =
/// gpucores × 10, allowed types by core::GpuTypeAllowed on the cluster's models) plus its CPU
/// and memory, and selects M (shapes covering ≥ coverage_percent % of pods).
/// Errors: kInvalidArgument `file:line: pod spec: <parser message>` if a spec is refused, or
/// `file:line: gpu_spec: no GPU of the cluster has an allowed model` is NOT an error (the pod
/// simply never fits); an empty pod list is an error.
Result<SimWorkload> PrepareWorkload(std::vector<TracePod> pods, const SimCluster& cluster,
                                    double coverage_percent, const std::string& file);

/// The arrival sequence of one run, as indices into `pods` (sorted by name): the pods shuffled
/// by `rng`, then tuned to `tune` × capacity_milli of total GPU request — when below, pods drawn
/// uniformly with replacement from `pods` are appended until total + gpu_milli of the next draw
/// would exceed the target (the authors' stop rule: per-GPU milli in the test, total milli
/// added); when above, uniformly chosen pods are removed until the total is ≤ the target.
/// tune ≤ 0 leaves the shuffled trace as it is.
std::vector<int32_t> BuildArrivals(const std::vector<TracePod>& pods, int64_t capacity_milli,
                                   double tune, core::SeededRng& rng);

}  // namespace fracgpu::sim
