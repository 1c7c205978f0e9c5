#pragma once
// The authors' published per-run results (data/alibaba-gpu-v2023/expected_results/
// analysis_*_discrete.csv): one row per workload × policy × tune × seed, one column per
// arrived-% bucket. The column set differs between files (analysis_allo_discrete.csv has an
// extra total_gpus column), so columns are found by header name.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "core/fgd_policies.h"

namespace fracgpu::sim {

/// One parsed analysis_*_discrete.csv.
struct PaperTable {
  struct Row {
    std::string workload;  ///< e.g. "openb_pod_list_default"
    std::string policy;    ///< e.g. "06-FGD"
    std::string seed;
    std::map<std::string, double> values;  ///< numeric columns by header name ("130", …)
  };
  std::vector<Row> rows;
};

/// Parses the text of one analysis_*_discrete.csv. The header must contain `workload`,
/// `sc_policy` and `seed`; every other cell must be a number (empty cells are skipped).
/// Errors: kInvalidArgument `file:line: column: problem`.
Result<PaperTable> ParsePaperCsv(std::string_view text, std::string_view file);

/// The policy a `sc_policy` cell names ("02-DotProd" → kDotProduct), if any.
std::optional<core::PlacementPolicy> PaperPolicy(const std::string& sc_policy);

/// Mean over the rows (seeds) of `workload` and `policy` of numeric column `column`;
/// nullopt when no row has it.
std::optional<double> PaperMean(const PaperTable& table, const std::string& workload,
                                core::PlacementPolicy policy, const std::string& column);

}  // namespace fracgpu::sim
