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

}  // namespace
}  // namespace fracgpu::metrics
