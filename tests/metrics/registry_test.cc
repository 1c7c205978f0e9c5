#include "metrics/registry.h"

#include <gtest/gtest.h>

namespace fracgpu::metrics {
namespace {

TEST(RegistryTest, CountersAndGaugesWithHelpAndType) {
  Registry r;
  r.Describe("fracgpu_binds_total", Type::kCounter, "Binds by result.");
  r.Add("fracgpu_binds_total", {{"result", "ok"}});
  r.Add("fracgpu_binds_total", {{"result", "ok"}}, 2);
  r.Add("fracgpu_binds_total", {{"result", "failed"}});
  r.Describe("fracgpu_up", Type::kGauge, "Up.");
  r.Set("fracgpu_up", {}, 1);
  EXPECT_EQ(r.Render(),
            "# HELP fracgpu_binds_total Binds by result.\n"
            "# TYPE fracgpu_binds_total counter\n"
            "fracgpu_binds_total{result=\"failed\"} 1\n"
            "fracgpu_binds_total{result=\"ok\"} 3\n"
            "# HELP fracgpu_up Up.\n"
            "# TYPE fracgpu_up gauge\n"
            "fracgpu_up 1\n");
  EXPECT_EQ(r.Value("fracgpu_binds_total", {{"result", "ok"}}), 3);
}

TEST(RegistryTest, HistogramBucketsAreCumulative) {
  Registry r;
  r.Describe("lat_seconds", Type::kHistogram, "Latency.", {0.1, 1});
  for (double v : {0.05, 0.1, 0.5, 3.0}) r.Observe("lat_seconds", {{"endpoint", "/filter"}}, v);
  EXPECT_EQ(r.Render(),
            "# HELP lat_seconds Latency.\n"
            "# TYPE lat_seconds histogram\n"
            "lat_seconds_bucket{endpoint=\"/filter\",le=\"0.1\"} 2\n"
            "lat_seconds_bucket{endpoint=\"/filter\",le=\"1\"} 3\n"
            "lat_seconds_bucket{endpoint=\"/filter\",le=\"+Inf\"} 4\n"
            "lat_seconds_sum{endpoint=\"/filter\"} 3.65\n"
            "lat_seconds_count{endpoint=\"/filter\"} 4\n");
}

TEST(RegistryTest, CollectorsAndEscaping) {
  Registry r;
  r.Describe("g", Type::kGauge, "G.");
  r.AddCollector([](Registry::Scrape& s) { s.Set("g", {{"pod", "a\"b\\c\nd"}}, 2.5); });
  EXPECT_EQ(r.Render(), "# HELP g G.\n# TYPE g gauge\ng{pod=\"a\\\"b\\\\c\\nd\"} 2.5\n");
}

// A collector's samples are grouped by family (families in name order, the registry's own
// samples beside them) and written in the order they were set, interleaved as a per-GPU
// collector sets them; Scrape::bytes counts the sample text written.
TEST(RegistryTest, CollectorLinesAreGroupedByFamilyInSetOrder) {
  Registry r;
  r.Describe("b_gpu", Type::kGauge, "B.");
  r.Describe("a_gpu", Type::kGauge, "A.");
  r.Describe("c_total", Type::kCounter, "C.");
  r.Add("c_total", {{"x", "1"}});
  size_t bytes = 0;
  r.AddCollector([&](Registry::Scrape& s) {
    for (const char* gpu : {"g2", "g1"}) {
      s.Set("b_gpu", {{"gpu", gpu}}, 1);
      s.Set("a_gpu", {{"gpu", gpu}, {"node", "n"}}, 0.5);
    }
    s.Set("undescribed", {}, 3);
    bytes = s.bytes();
  });
  EXPECT_EQ(r.Render(),
            "# HELP a_gpu A.\n# TYPE a_gpu gauge\n"
            "a_gpu{gpu=\"g2\",node=\"n\"} 0.5\n"
            "a_gpu{gpu=\"g1\",node=\"n\"} 0.5\n"
            "# HELP b_gpu B.\n# TYPE b_gpu gauge\n"
            "b_gpu{gpu=\"g2\"} 1\n"
            "b_gpu{gpu=\"g1\"} 1\n"
            "# HELP c_total C.\n# TYPE c_total counter\n"
            "c_total{x=\"1\"} 1\n"
            "# HELP undescribed \n# TYPE undescribed gauge\n"
            "undescribed 3\n");
  // Two a_gpu and two b_gpu lines (g1 and g2 lines are as long) and "undescribed 3\n".
  EXPECT_EQ(bytes, 2 * (std::string("a_gpu{gpu=\"g2\",node=\"n\"} 0.5\n").size() +
                        std::string("b_gpu{gpu=\"g2\"} 1\n").size()) +
                       std::string("undescribed 3\n").size());
  // A second render runs the collector again: the same page, nothing carried over.
  EXPECT_EQ(r.Render(), r.Render());
}

}  // namespace
}  // namespace fracgpu::metrics
