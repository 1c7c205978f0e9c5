#include "metrics/registry.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace fracgpu::metrics {
namespace {

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  // The shortest of %.15g..%.17g that reads back as the same double.
  char buf[32];
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
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

}  // namespace

std::vector<double> DefaultLatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
}

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
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
  return out;
}

std::string Registry::RenderLabels(const Labels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i) out += ",";
    out += labels[i].first + "=\"" + EscapeLabelValue(labels[i].second) + "\"";
  }
  return out + "}";
}

void Registry::Scrape::Set(const std::string& name, const Labels& labels, double value) {
  samples_[name][RenderLabels(labels)] = value;
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
    families = families_;
  }
  Scrape scrape;
  for (const auto& c : collectors) c(scrape);
  for (auto& [name, samples] : scrape.samples_) {
    for (auto& [labels, v] : samples) families[name].values[labels] = v;
  }
  std::string out;
  for (const auto& [name, f] : families) {
    if (f.values.empty() && f.histograms.empty()) continue;
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
      for (const auto& [labels, v] : f.values) out += name + labels + " " + FormatValue(v) + "\n";
    }
  }
  return out;
}

}  // namespace fracgpu::metrics
