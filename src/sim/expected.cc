#include "sim/expected.h"

#include <charconv>
#include <cstdlib>

namespace fracgpu::sim {
namespace {

std::vector<std::string_view> Split(std::string_view line) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      out.push_back(line.substr(start));
      return out;
    }
    out.push_back(line.substr(start, comma - start));
    start = comma + 1;
  }
}

}  // namespace

Result<PaperTable> ParsePaperCsv(std::string_view text, std::string_view file) {
  auto err = [&](int line, std::string_view col, const std::string& problem) {
    return InvalidArgument(std::string(file) + ":" + std::to_string(line) + ": " +
                           std::string(col) + ": " + problem);
  };
  PaperTable table;
  std::vector<std::string> header;
  int workload_col = -1, policy_col = -1, seed_col = -1;
  int line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const auto fields = Split(line);
    if (header.empty()) {
      for (size_t i = 0; i < fields.size(); ++i) {
        header.emplace_back(fields[i]);
        if (fields[i] == "workload") workload_col = static_cast<int>(i);
        if (fields[i] == "sc_policy") policy_col = static_cast<int>(i);
        if (fields[i] == "seed") seed_col = static_cast<int>(i);
      }
      if (workload_col < 0 || policy_col < 0 || seed_col < 0) {
        return err(line_no, "header", "needs columns workload, sc_policy and seed");
      }
      continue;
    }
    if (fields.size() != header.size()) {
      return err(line_no, "row",
                 "expected " + std::to_string(header.size()) + " columns, got " +
                     std::to_string(fields.size()));
    }
    PaperTable::Row row;
    for (size_t i = 0; i < fields.size(); ++i) {
      const int c = static_cast<int>(i);
      if (c == workload_col) {
        row.workload = std::string(fields[i]);
      } else if (c == policy_col) {
        row.policy = std::string(fields[i]);
      } else if (c == seed_col) {
        row.seed = std::string(fields[i]);
      } else if (!fields[i].empty()) {
        const std::string cell(fields[i]);
        char* endp = nullptr;
        const double v = std::strtod(cell.c_str(), &endp);
        if (endp != cell.c_str() + cell.size()) {
          return err(line_no, header[i], "not a number: \"" + cell.substr(0, 40) + "\"");
        }
        row.values[header[i]] = v;
      }
    }
    table.rows.push_back(std::move(row));
  }
  if (header.empty()) return err(1, "header", "empty file");
  return table;
}

std::optional<core::PlacementPolicy> PaperPolicy(const std::string& sc_policy) {
  const size_t dash = sc_policy.find('-');
  const std::string name = dash == std::string::npos ? sc_policy : sc_policy.substr(dash + 1);
  auto p = core::ParsePlacementPolicy(name);
  if (!p.ok()) return std::nullopt;
  return *p;
}

std::optional<double> PaperMean(const PaperTable& table, const std::string& workload,
                                core::PlacementPolicy policy, const std::string& column) {
  double sum = 0;
  int n = 0;
  for (const auto& row : table.rows) {
    if (row.workload != workload || PaperPolicy(row.policy) != policy) continue;
    const auto it = row.values.find(column);
    if (it == row.values.end()) continue;
    sum += it->second;
    ++n;
  }
  if (n == 0) return std::nullopt;
  return sum / n;
}

}  // namespace fracgpu::sim
