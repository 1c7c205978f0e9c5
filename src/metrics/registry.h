#pragma once
// Prometheus text exposition (format 0.0.4): counters, gauges and histograms with labels,
// each family with its # HELP and # TYPE lines
// (https://prometheus.io/docs/instrumenting/exposition_formats/). Names follow Prometheus
// conventions: `fracgpu_*`, base units (bytes, seconds, ratios 0–1), counters end in `_total`.
//
//   metrics::Registry reg;
//   reg.Describe("fracgpu_binds_total", metrics::Type::kCounter, "Binds by result.");
//   reg.Add("fracgpu_binds_total", {{"result", "ok"}});
//   reg.Describe("fracgpu_http_request_duration_seconds", metrics::Type::kHistogram, "…",
//                metrics::DefaultLatencyBuckets());
//   reg.Observe("fracgpu_http_request_duration_seconds", {{"endpoint", "/filter"}}, 0.0012);
//   reg.AddCollector([&](metrics::Registry::Scrape& s) { s.Set("fracgpu_gpu_…", {...}, v); });
//   std::string text = reg.Render();
//
// Thread-safe.

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace fracgpu::metrics {

/// Label pairs in the order they are written.
using Labels = std::vector<std::pair<std::string, std::string>>;

enum class Type { kCounter, kGauge, kHistogram };

/// Upper bounds (seconds) from 100 µs to 10 s, for request latencies.
std::vector<double> DefaultLatencyBuckets();
/// Escapes a label value (backslash, double quote, newline) as the text format requires.
std::string EscapeLabelValue(const std::string& value);

class Registry {
 public:
  /// Gauges computed at scrape time (e.g. per-GPU allocation read from the cluster state).
  class Scrape {
   public:
    /// Sets a sample of a family described with Type::kGauge (or kCounter).
    void Set(const std::string& name, const Labels& labels, double value);

   private:
    friend class Registry;
    std::map<std::string, std::map<std::string, double>> samples_;
  };

  /// Declares a family; must precede its samples. Histograms need ascending `buckets`.
  void Describe(const std::string& name, Type type, const std::string& help,
                std::vector<double> buckets = {});
  /// Adds `value` (≥ 0) to a counter (or a gauge).
  void Add(const std::string& name, const Labels& labels, double value = 1.0);
  /// Sets a gauge.
  void Set(const std::string& name, const Labels& labels, double value);
  /// Records one observation of a histogram.
  void Observe(const std::string& name, const Labels& labels, double value);
  /// Registers a scrape-time collector.
  void AddCollector(std::function<void(Scrape&)> collector);
  /// The current value of a counter/gauge sample (0 when absent); for tests.
  double Value(const std::string& name, const Labels& labels) const;
  /// The whole exposition text.
  std::string Render() const;

 private:
  struct Histogram {
    std::vector<uint64_t> counts;  // per bucket (non-cumulative)
    uint64_t count = 0;
    double sum = 0;
  };
  struct Family {
    Type type = Type::kGauge;
    std::string help;
    std::vector<double> buckets;
    std::map<std::string, double> values;         // rendered labels → value
    std::map<std::string, Histogram> histograms;  // rendered labels → histogram
  };
  static std::string RenderLabels(const Labels& labels);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
  std::vector<std::function<void(Scrape&)>> collectors_;
};

}  // namespace fracgpu::metrics
