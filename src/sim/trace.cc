// Hand-written CSV reading: none of the project's libraries reads CSV, and the openb files are
// plain comma-separated rows of integers and identifiers without quoting, so a splitter with
// strict per-column validation is shorter and stricter than pulling in a general CSV library.
#include "sim/trace.h"

#include <charconv>
#include <cstring>
#include <set>

#include "base/file.h"
#include "core/frag.h"

namespace fracgpu::sim {
namespace {

constexpr int32_t kMaxGpusPerNode = core::kMaxFragGpus;

// One line of the file, split on commas, with its 1-based number.
struct Row {
  int32_t line = 0;
  std::vector<std::string_view> fields;
};

Status RowError(std::string_view file, int32_t line, std::string_view column,
                const std::string& problem) {
  return InvalidArgument(std::string(file) + ":" + std::to_string(line) + ": " +
                         std::string(column) + ": " + problem);
}

std::string Quote(std::string_view v) {
  std::string out = "\"";
  for (char c : v.substr(0, 40)) {
    out += (static_cast<unsigned char>(c) < 0x20 || c == '"') ? '?' : c;
  }
  if (v.size() > 40) out += "…";
  return out + "\"";
}

// Splits `text` into rows; the first row is the header. A final newline is allowed; a blank
// line elsewhere or a quote character is an error.
Result<std::vector<Row>> SplitRows(std::string_view text, std::string_view file) {
  std::vector<Row> rows;
  int32_t line = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view l = text.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (l.empty()) {
      if (pos >= text.size()) break;  // trailing newline
      return RowError(file, line, "row", "empty line");
    }
    if (l.find('"') != std::string_view::npos) {
      return RowError(file, line, "row", "quoted fields are not supported");
    }
    Row row;
    row.line = line;
    size_t start = 0;
    while (true) {
      const size_t comma = l.find(',', start);
      if (comma == std::string_view::npos) {
        row.fields.push_back(l.substr(start));
        break;
      }
      row.fields.push_back(l.substr(start, comma - start));
      start = comma + 1;
    }
    rows.push_back(std::move(row));
  }
  if (rows.empty()) return RowError(file, 1, "header", "empty file");
  return rows;
}

std::string JoinHeader(const std::vector<std::string_view>& fields) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) out += ',';
    out += fields[i];
  }
  return out;
}

// A non-negative decimal integer in [lo, hi], digits only.
Result<int64_t> ParseInt(std::string_view v, int64_t lo, int64_t hi) {
  int64_t x = 0;
  if (v.empty())
    return InvalidArgument("must be an integer " + std::to_string(lo) + ".." + std::to_string(hi) +
                           ", got an empty value");
  const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || ptr != v.data() + v.size() || v[0] == '-' || x < lo || x > hi) {
    return InvalidArgument("must be an integer " + std::to_string(lo) + ".." + std::to_string(hi) +
                           ", got " + Quote(v));
  }
  return x;
}

constexpr int64_t kMaxQuantity = int64_t{1} << 40;  // far above any node or pod

}  // namespace

Result<std::vector<TraceNode>> ParseNodeCsv(std::string_view text, std::string_view file) {
  auto rows = SplitRows(text, file);
  if (!rows.ok()) return rows.status();
  const std::string expected = "sn,cpu_milli,memory_mib,gpu,model";
  if (JoinHeader(rows->front().fields) != expected) {
    return RowError(
        file, 1, "header",
        "expected \"" + expected + "\", got " + Quote(JoinHeader(rows->front().fields)));
  }
  std::vector<TraceNode> nodes;
  std::set<std::string_view> names;
  for (size_t r = 1; r < rows->size(); ++r) {
    const Row& row = (*rows)[r];
    if (row.fields.size() != 5) {
      return RowError(file, row.line, "row",
                      "expected 5 columns, got " + std::to_string(row.fields.size()));
    }
    TraceNode n;
    n.line = row.line;
    n.name = std::string(row.fields[0]);
    if (n.name.empty()) return RowError(file, row.line, "sn", "empty node name");
    if (!names.insert(row.fields[0]).second) {
      return RowError(file, row.line, "sn", "duplicate node name " + Quote(n.name));
    }
    const char* cols[] = {"cpu_milli", "memory_mib", "gpu"};
    const int64_t hi[] = {kMaxQuantity, kMaxQuantity, kMaxGpusPerNode};
    int64_t v[3];
    for (int c = 0; c < 3; ++c) {
      auto x = ParseInt(row.fields[1 + c], 0, hi[c]);
      if (!x.ok()) return RowError(file, row.line, cols[c], x.status().message());
      v[c] = *x;
    }
    n.cpu_milli = v[0];
    n.memory_mib = v[1];
    n.gpus = static_cast<int32_t>(v[2]);
    n.model = std::string(row.fields[4]);
    if (n.gpus > 0 && n.model.empty()) {
      return RowError(file, row.line, "model",
                      "missing on a node with " + std::to_string(n.gpus) + " GPUs");
    }
    if (n.gpus == 0 && !n.model.empty()) {
      return RowError(file, row.line, "model", Quote(n.model) + " given on a node with 0 GPUs");
    }
    nodes.push_back(std::move(n));
  }
  return nodes;
}

Result<std::vector<TracePod>> ParsePodCsv(std::string_view text, std::string_view file) {
  auto rows = SplitRows(text, file);
  if (!rows.ok()) return rows.status();
  const std::string full =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
      "deletion_time,scheduled_time";
  const std::string short_layout = "name,cpu_milli,memory_mib,num_gpu,gpu_milli";
  const std::string header = JoinHeader(rows->front().fields);
  size_t ncols = 0;
  if (header == full) {
    ncols = 11;
  } else if (header == short_layout) {
    ncols = 5;
  } else {
    return RowError(file, 1, "header",
                    "expected \"" + full + "\" or \"" + short_layout + "\", got " + Quote(header));
  }
  static const char* kCols[] = {"name",          "cpu_milli",     "memory_mib",    "num_gpu",
                                "gpu_milli",     "gpu_spec",      "qos",           "pod_phase",
                                "creation_time", "deletion_time", "scheduled_time"};
  std::vector<TracePod> pods;
  std::set<std::string_view> names;
  for (size_t r = 1; r < rows->size(); ++r) {
    const Row& row = (*rows)[r];
    if (row.fields.size() != ncols) {
      return RowError(file, row.line, "row",
                      "expected " + std::to_string(ncols) + " columns, got " +
                          std::to_string(row.fields.size()));
    }
    TracePod p;
    p.line = row.line;
    p.name = std::string(row.fields[0]);
    if (p.name.empty()) return RowError(file, row.line, "name", "empty pod name");
    if (!names.insert(row.fields[0]).second) {
      return RowError(file, row.line, "name", "duplicate pod name " + Quote(p.name));
    }
    const int64_t hi[] = {kMaxQuantity, kMaxQuantity, kMaxGpusPerNode, core::kMilliPerGpu};
    int64_t v[4];
    for (int c = 0; c < 4; ++c) {
      auto x = ParseInt(row.fields[1 + c], 0, hi[c]);
      if (!x.ok()) return RowError(file, row.line, kCols[1 + c], x.status().message());
      v[c] = *x;
    }
    p.cpu_milli = v[0];
    p.memory_mib = v[1];
    p.num_gpus = static_cast<int32_t>(v[2]);
    p.gpu_milli = static_cast<int32_t>(v[3]);
    if (p.num_gpus == 0 && p.gpu_milli != 0) {
      return RowError(file, row.line, "gpu_milli",
                      "must be 0 when num_gpu is 0, got " + Quote(row.fields[4]));
    }
    if (p.num_gpus > 0 && p.gpu_milli == 0) {
      return RowError(
          file, row.line, "gpu_milli",
          "must be 10..1000 when num_gpu is " + std::to_string(p.num_gpus) + ", got \"0\"");
    }
    if (p.gpu_milli % 10 != 0) {
      return RowError(
          file, row.line, "gpu_milli",
          "must be a multiple of 10 (gpucores are whole percent), got " + Quote(row.fields[4]));
    }
    if (ncols == 11) {
      p.gpu_spec = std::string(row.fields[5]);
      if (!p.gpu_spec.empty()) {
        const auto entries = core::SplitGpuSpec(p.gpu_spec);
        size_t bars = 0;
        for (char c : p.gpu_spec) bars += c == '|';
        if (entries.size() != bars + 1) {
          return RowError(file, row.line, "gpu_spec", "empty model in " + Quote(p.gpu_spec));
        }
      }
      for (int c = 8; c < 11; ++c) {
        if (row.fields[c].empty()) continue;
        auto x = ParseInt(row.fields[c], 0, kMaxQuantity);
        if (!x.ok()) return RowError(file, row.line, kCols[c], x.status().message());
        (c == 8 ? p.creation_time : c == 9 ? p.deletion_time : p.scheduled_time) = *x;
      }
    }
    pods.push_back(std::move(p));
  }
  return pods;
}

Result<std::vector<TraceNode>> LoadNodeCsv(const std::string& path) {
  auto text = base::ReadFile(path, kMaxTraceFileBytes);
  if (!text.ok()) return text.status();
  return ParseNodeCsv(*text, path);
}

Result<std::vector<TracePod>> LoadPodCsv(const std::string& path) {
  auto text = base::ReadFile(path, kMaxTraceFileBytes);
  if (!text.ok()) return text.status();
  return ParsePodCsv(*text, path);
}

}  // namespace fracgpu::sim
