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

namespace detail {
/// Maps `bytes` (rounded up to pages) from the kernel; aborts when it cannot (as a failed
/// allocation would end the process).
void* MapPages(size_t bytes);
/// Unmaps what MapPages(bytes) returned.
void UnmapPages(void* p, size_t bytes) noexcept;

/// Allocator of whole pages from the kernel (mmap(2)/munmap(2)) for a scrape's text: what a
/// scrape frees goes back to the kernel at once, whatever the malloc settings. With glibc a
/// block freed at the top of a worker thread's arena stays resident until that top exceeds
/// M_TRIM_THRESHOLD (64 MiB in the scheduler, TuneMallocForRequests), which a thread arena
/// (64 MiB at most) never does, and malloc_trim(0) does not release an arena's top: each
/// worker that served a scrape kept ~46 MiB of it at 5,000 nodes × 8 GPUs.
template <class T>
struct PageAllocator {
  using value_type = T;
  PageAllocator() = default;
  template <class U>
  PageAllocator(const PageAllocator<U>&) noexcept {}  // NOLINT: allocator rebinding
  T* allocate(size_t n) { return static_cast<T*>(MapPages(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { UnmapPages(p, n * sizeof(T)); }
  friend bool operator==(const PageAllocator&, const PageAllocator&) { return true; }
  friend bool operator!=(const PageAllocator&, const PageAllocator&) { return false; }
};
}  // namespace detail

/// Text held in kernel pages (detail::PageAllocator), for a scrape's sample lines.
using PageText = std::basic_string<char, std::char_traits<char>, detail::PageAllocator<char>>;

/// Label pairs in the order they are written.
using Labels = std::vector<std::pair<std::string, std::string>>;

enum class Type { kCounter, kGauge, kHistogram };

/// Upper bounds (seconds) from 100 µs to 10 s, for request latencies; every 0.5–1 ms between 1
/// and 5 ms.
std::vector<double> DefaultLatencyBuckets();
/// Escapes a label value (backslash, double quote, newline) as the text format requires.
std::string EscapeLabelValue(const std::string& value);

class Registry {
 public:
  /// Gauges computed at scrape time (e.g. per-GPU allocation read from the cluster state).
  /// Each Set writes its sample line at once into its family's text (no map of samples: at
  /// 5,000 nodes × 8 GPUs a scrape has ~520,000 samples, and a map keyed by their label text
  /// held ~3 times the page's size before the page was written). Lines of a family are written
  /// in the order they were set.
  class Scrape {
   public:
    /// Writes a sample of a family described with Type::kGauge (or kCounter). A collector sets
    /// each label set of a family at most once per scrape (a repeat is written again), and a
    /// family it sets is not also set through Registry::Set/Add (both would be written).
    void Set(const std::string& name, const Labels& labels, double value);
    /// Bytes of sample text written so far (for tests and sizing).
    size_t bytes() const;

   private:
    friend class Registry;
    std::map<std::string, PageText> lines_;  // family → its sample lines
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
  /// The whole exposition text, families in name order, written once into a buffer reserved
  /// to its final size (the collectors' lines are moved out family by family).
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
