#pragma once
// Loaders for the Alibaba "openb" GPU trace (cluster-trace-gpu-v2023; data/alibaba-gpu-v2023/
// README.md describes the columns). Everything is parsed and validated before anything is
// simulated: a malformed row fails the whole load with `file:line: column: problem`.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace fracgpu::sim {

/// One row of openb_node_list_*.csv (`sn,cpu_milli,memory_mib,gpu,model`).
struct TraceNode {
  std::string name;        ///< `sn`, e.g. "openb-node-0000"
  int64_t cpu_milli = 0;   ///< CPU capacity, millicores
  int64_t memory_mib = 0;  ///< host memory, MiB
  int32_t gpus = 0;        ///< GPUs on the node (0..16)
  std::string model;       ///< GPU model code ("T4", "G2", …); empty iff gpus == 0
  int32_t line = 0;        ///< 1-based line in the file (for later error messages)
};

/// One row of openb_pod_list_*.csv. Both layouts are accepted: the full one
/// (`name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,
/// deletion_time,scheduled_time`) and the multigpu one (`name,cpu_milli,memory_mib,num_gpu,
/// gpu_milli`). Only the fields the experiment uses are kept.
struct TracePod {
  std::string name;
  int64_t cpu_milli = 0;   ///< CPU request, millicores
  int64_t memory_mib = 0;  ///< memory request, MiB
  int32_t num_gpus = 0;    ///< distinct GPUs (0..16)
  int32_t gpu_milli =
      0;                 ///< share per GPU, milli-GPU: 10..1000 in steps of 10, 0 iff num_gpus == 0
  std::string gpu_spec;  ///< allowed models separated by '|' ("" = any)
  int32_t line = 0;      ///< 1-based line in the file
  /// `creation_time`, `scheduled_time`, `deletion_time`: seconds from the trace's start, -1
  /// where the column is empty or absent (the multigpu layout). Read only by the notebook
  /// parking model (sim/parking.h) for a borrower's run time.
  int64_t creation_time = -1;
  int64_t scheduled_time = -1;
  int64_t deletion_time = -1;

  /// Total GPU request, milli-GPU.
  int64_t TotalGpuMilli() const { return static_cast<int64_t>(num_gpus) * gpu_milli; }
};

/// Parses the text of a node list. `file` is used only in error messages.
/// Errors (kInvalidArgument, all as `file:line: column: problem`): a header other than
/// `sn,cpu_milli,memory_mib,gpu,model`; a row with the wrong number of columns; an empty or
/// duplicate `sn`; a non-integer or negative `cpu_milli` / `memory_mib`; `gpu` outside 0..16;
/// a `model` missing on a GPU node or present on a CPU-only node; quoted fields; an empty file.
Result<std::vector<TraceNode>> ParseNodeCsv(std::string_view text, std::string_view file);

/// Parses the text of a pod list (either layout). Errors as ParseNodeCsv, plus: `num_gpu`
/// outside 0..16; `gpu_milli` outside 0..1000, not a multiple of 10 (gpucores are whole
/// percent), 0 on a GPU pod or non-zero on a CPU-only pod; `gpu_spec` with an empty entry;
/// a time column that is neither empty nor a non-negative integer.
Result<std::vector<TracePod>> ParsePodCsv(std::string_view text, std::string_view file);

/// The largest trace or paper-table file read (1 GiB: the published traces are a few MiB).
inline constexpr size_t kMaxTraceFileBytes = size_t{1} << 30;

/// base::ReadFile (at most kMaxTraceFileBytes) + ParseNodeCsv (errors name the path as given).
Result<std::vector<TraceNode>> LoadNodeCsv(const std::string& path);
/// base::ReadFile (at most kMaxTraceFileBytes) + ParsePodCsv (errors name the path as given).
Result<std::vector<TracePod>> LoadPodCsv(const std::string& path);

}  // namespace fracgpu::sim
