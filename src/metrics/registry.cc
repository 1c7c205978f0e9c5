#include "metrics/registry.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace fracgpu::metrics {

namespace detail {

void* MapPages(size_t bytes) {
  if (bytes == 0) bytes = 1;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    // As an allocation that fails ends the process (no exceptions outside the front ends).
    std::fprintf(stderr, "fracgpu metrics: mmap of %zu bytes for a scrape failed\n", bytes);
    std::abort();
  }
  return p;
}

void UnmapPages(void* p, size_t bytes) noexcept {
  if (p != nullptr) ::munmap(p, bytes == 0 ? 1 : bytes);
}

}  // namespace detail

namespace {

// Appends `v` as the text format writes a sample value.
template <class Text>
void AppendValue(Text& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
    return;
  }
  char buf[32];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    int n = std::snprintf(buf, sizeof buf, "%.0f", v);
    out.append(buf, static_cast<size_t>(n));
    return;
  }
  // The shortest of %.15g..%.17g that reads back as the same double.
  int n = 0;
  for (int precision = 15; precision <= 17; ++precision) {
    n = std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  out.append(buf, static_cast<size_t>(n));
}

std::string FormatValue(double v) {
  std::string out;
  AppendValue(out, v);
  return out;
}

// Appends a label value escaped as the text format requires (backslash, quote, newline).
template <class Text>
void AppendEscaped(Text& out, const std::string& value) {
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
}

const char* TypeName(Type t) {
  switch (t) {
    case Type::kCounter:
      return "counter";
    case Type::kGauge:
      return "gauge";
    case Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// Inserts `le` into rendered labels "{a="b"}" → "{a="b",le="0.1"}".
std::string WithLe(const std::string& labels, const std::string& le) {
  std::string pair = "le=\"" + le + "\"";
  if (labels.empty()) return "{" + pair + "}";
  return labels.substr(0, labels.size() - 1) + "," + pair + "}";
}

template <class Text>
void AppendLabels(Text& out, const Labels& labels) {
  if (labels.empty()) return;
  out.push_back('{');
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i) out.push_back(',');
    out += labels[i].first;
    out += "=\"";
    AppendEscaped(out, labels[i].second);
    out.push_back('"');
  }
  out.push_back('}');
}

}  // namespace

std::vector<double> DefaultLatencyBuckets() {
  // 1.5–4 ms in steps so a p99 near the extender's goals (issue 37: /filter under 2 ms at
  // 5,000 nodes, 5 ms at 15,000) is read inside a narrow bucket, not interpolated across 1–2.5.
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0015, 0.002, 0.0025, 0.003, 0.004, 0.005,
          0.01,   0.025,   0.05,   0.1,   0.25,   0.5,   1,      2.5,   5,     10};
}

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  AppendEscaped(out, value);
  return out;
}

std::string Registry::RenderLabels(const Labels& labels) {
  std::string out;
  AppendLabels(out, labels);
  return out;
}

void Registry::Scrape::Set(const std::string& name, const Labels& labels, double value) {
  PageText& out = lines_[name];
  out += name;
  AppendLabels(out, labels);
  out.push_back(' ');
  AppendValue(out, value);
  out.push_back('\n');
}

size_t Registry::Scrape::bytes() const {
  size_t n = 0;
  for (const auto& [name, text] : lines_) n += text.size();
  return n;
}

void Registry::Describe(const std::string& name, Type type, const std::string& help,
                        std::vector<double> buckets) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = families_[name];
  f.type = type;
  f.help = help;
  std::sort(buckets.begin(), buckets.end());
  f.buckets = std::move(buckets);
}

void Registry::Add(const std::string& name, const Labels& labels, double value) {
  std::lock_guard<std::mutex> lock(mu_);
  families_[name].values[RenderLabels(labels)] += value;
}

void Registry::Set(const std::string& name, const Labels& labels, double value) {
  std::lock_guard<std::mutex> lock(mu_);
  families_[name].values[RenderLabels(labels)] = value;
}

void Registry::Observe(const std::string& name, const Labels& labels, double value) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = families_[name];
  Histogram& h = f.histograms[RenderLabels(labels)];
  if (h.counts.size() != f.buckets.size()) h.counts.assign(f.buckets.size(), 0);
  auto it = std::lower_bound(f.buckets.begin(), f.buckets.end(), value);
  if (it != f.buckets.end()) ++h.counts[static_cast<size_t>(it - f.buckets.begin())];
  ++h.count;
  h.sum += value;
}

void Registry::AddCollector(std::function<void(Scrape&)> collector) {
  std::lock_guard<std::mutex> lock(mu_);
  collectors_.push_back(std::move(collector));
}

double Registry::Value(const std::string& name, const Labels& labels) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto f = families_.find(name);
  if (f == families_.end()) return 0;
  auto v = f->second.values.find(RenderLabels(labels));
  return v == f->second.values.end() ? 0 : v->second;
}

std::string Registry::Render() const {
  std::vector<std::function<void(Scrape&)>> collectors;
  std::map<std::string, Family> families;
  {
    std::lock_guard<std::mutex> lock(mu_);
    collectors = collectors_;
    families = families_;  // small: the collectors' samples are not in it
  }
  Scrape scrape;
  for (const auto& c : collectors) c(scrape);
  for (const auto& [name, text] : scrape.lines_) families.try_emplace(name);

  // The registry's own samples (counters, histograms) first, into their own small text per
  // family; then one buffer of the page's final size, so the collectors' text (nearly all of
  // the page at cluster scale) is copied once and never reallocated.
  std::map<std::string, std::string> own;
  size_t total = 0;
  for (const auto& [name, f] : families) {
    auto lines = scrape.lines_.find(name);
    const size_t collected = lines == scrape.lines_.end() ? 0 : lines->second.size();
    if (f.values.empty() && f.histograms.empty() && collected == 0) continue;
    std::string& out = own[name];
    out += "# HELP " + name + " " + f.help + "\n";
    out += "# TYPE " + name + " " + TypeName(f.type) + "\n";
    if (f.type == Type::kHistogram) {
      for (const auto& [labels, h] : f.histograms) {
        uint64_t cumulative = 0;
        for (size_t i = 0; i < f.buckets.size(); ++i) {
          cumulative += i < h.counts.size() ? h.counts[i] : 0;
          out += name + "_bucket" + WithLe(labels, FormatValue(f.buckets[i])) + " " +
                 std::to_string(cumulative) + "\n";
        }
        out += name + "_bucket" + WithLe(labels, "+Inf") + " " + std::to_string(h.count) + "\n";
        out += name + "_sum" + labels + " " + FormatValue(h.sum) + "\n";
        out += name + "_count" + labels + " " + std::to_string(h.count) + "\n";
      }
    } else {
      for (const auto& [labels, v] : f.values) {
        out += name;
        out += labels;
        out.push_back(' ');
        AppendValue(out, v);
        out.push_back('\n');
      }
    }
    total += out.size() + collected;
  }
  std::string page;
  page.reserve(total);
  for (auto& [name, text] : own) {
    page += text;
    auto lines = scrape.lines_.find(name);
    if (lines != scrape.lines_.end()) {
      page.append(lines->second.data(), lines->second.size());
      PageText().swap(lines->second);  // unmapped as soon as copied
    }
  }
  return page;
}

}  // namespace fracgpu::metrics
