// The paper's workload procedure (src/sim/workload.h): pod specs through the core request
// parser, the target workload, and the arrival sequence (shuffle, then tune up or down).
#include "sim/workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace fracgpu::sim {
namespace {

TracePod Pod(std::string name, int64_t cpu, int32_t num_gpus, int32_t milli,
             std::string spec = "") {
  TracePod p;
  p.name = std::move(name);
  p.cpu_milli = cpu;
  p.memory_mib = 1024;
  p.num_gpus = num_gpus;
  p.gpu_milli = milli;
  p.gpu_spec = std::move(spec);
  return p;
}

// Built by appending: `"p" + std::to_string(i)` trips GCC 12's false -Wrestrict positive.
std::string Name(int i) {
  std::string s = "p";
  s += std::to_string(i);
  return s;
}

int64_t GpuTotal(const std::vector<TracePod>& pods, const std::vector<int32_t>& order) {
  int64_t t = 0;
  for (int32_t i : order) t += pods[i].TotalGpuMilli();
  return t;
}

TEST(BuildArrivals, ShufflesEveryPodFirst) {
  std::vector<TracePod> pods;
  for (int i = 0; i < 20; ++i) pods.push_back(Pod(Name(i), 0, 1, 100));
  core::SeededRng rng(42);
  // 20 × 100 = 2000 milli; tune 1.0 of 2000 → nothing to add (2000 + 100 > 2000).
  const auto order = BuildArrivals(pods, 2000, 1.0, rng);
  ASSERT_EQ(order.size(), 20u);
  std::vector<int32_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int32_t> all(20);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(sorted, all);
  EXPECT_NE(order, all);  // shuffled (20! orders; the identity is practically impossible)
}

// The authors' stop rule tests total + per-GPU milli, but adds num_gpu × milli: with only
// 4-GPU whole-card pods (4000 milli each), capacity 10000, tune 1.3 (target 13000):
// 4000 (original) → +4000 (4000+1000 ≤ 13000) → 8000 → +4000 (9000 ≤ 13000) → 12000 →
// +4000 (13000 ≤ 13000) → 16000 → stop (17000 > 13000). The total overshoots to 16000.
TEST(BuildArrivals, StopRuleQuirkOvershootsWithMultiGpuPods) {
  const std::vector<TracePod> pods = {Pod("a", 0, 4, 1000)};
  core::SeededRng rng(1);
  const auto order = BuildArrivals(pods, 10000, 1.3, rng);
  EXPECT_EQ(order.size(), 4u);
  EXPECT_EQ(GpuTotal(pods, order), 16000);
}

// CPU-only draws never stop the resampling; only a GPU draw that would pass the target does.
// Pods: one CPU-only, one 500-milli pod; capacity 1000, tune 1.3 (target 1300):
// 500 → +500 (1000 ≤ 1300) → 1000 → next GPU draw 1500 > 1300 → stop. So exactly two GPU
// pods, with any number of CPU-only copies between.
TEST(BuildArrivals, CpuOnlyDrawsNeverStopIt) {
  const std::vector<TracePod> pods = {Pod("cpu", 1000, 0, 0), Pod("gpu", 0, 1, 500)};
  for (uint64_t seed = 0; seed < 20; ++seed) {
    core::SeededRng rng(seed);
    const auto order = BuildArrivals(pods, 1000, 1.3, rng);
    EXPECT_EQ(GpuTotal(pods, order), 1000) << seed;
    EXPECT_EQ(std::count(order.begin(), order.end(), 1), 2) << seed;
    EXPECT_GE(std::count(order.begin(), order.end(), 0), 1) << seed;
  }
}

// Above the target, uniformly chosen pods are removed until the total fits: ten whole-GPU
// pods (10000 milli), capacity 5000, tune 1.3 (target 6500) → 6 pods (6000) remain, in the
// shuffled order.
TEST(BuildArrivals, TunesDownAboveTarget) {
  std::vector<TracePod> pods;
  for (int i = 0; i < 10; ++i) pods.push_back(Pod(Name(i), 0, 1, 1000));
  core::SeededRng rng(5), shuffle_only(5);
  const auto order = BuildArrivals(pods, 5000, 1.3, rng);
  EXPECT_EQ(order.size(), 6u);
  EXPECT_EQ(GpuTotal(pods, order), 6000);
  // The survivors keep the order of the shuffle (same seed, same first draws).
  std::vector<int32_t> shuffled(10);
  std::iota(shuffled.begin(), shuffled.end(), 0);
  shuffle_only.Shuffle(shuffled);
  EXPECT_TRUE(std::includes(shuffled.begin(), shuffled.end(), order.begin(), order.end(),
                            [&](int32_t a, int32_t b) {
                              return std::find(shuffled.begin(), shuffled.end(), a) <
                                     std::find(shuffled.begin(), shuffled.end(), b);
                            }));
}

TEST(BuildArrivals, SameSeedSameSequence) {
  std::vector<TracePod> pods;
  for (int i = 0; i < 50; ++i) pods.push_back(Pod(Name(i), 0, 1, 10 * (i + 1)));
  core::SeededRng a(9), b(9), c(10);
  const auto x = BuildArrivals(pods, 10000, 1.3, a);
  EXPECT_EQ(x, BuildArrivals(pods, 10000, 1.3, b));
  EXPECT_NE(x, BuildArrivals(pods, 10000, 1.3, c));
  // Stop rule: the total is at most the target and within one pod's share of it.
  EXPECT_LE(GpuTotal(pods, x), 13000);
  EXPECT_GT(GpuTotal(pods, x), 13000 - 500);
}

TEST(TracePodSpec, MapsTheTraceFieldsToResources) {
  const auto spec = TracePodSpec(Pod("p", 6000, 1, 470, "V100M16|V100M32"));
  const auto& c = spec["spec"]["containers"][0]["resources"];
  EXPECT_EQ(c["limits"]["nvidia.com/gpu"], "1");
  EXPECT_EQ(c["limits"]["nvidia.com/gpucores"], "47");
  EXPECT_EQ(c["limits"]["nvidia.com/gpumem-percentage"], "47");
  EXPECT_EQ(c["requests"]["cpu"], "6000m");
  EXPECT_EQ(spec["metadata"]["annotations"]["nvidia.com/use-gputype"], "V100M16,V100M32");
  const auto cpu_only = TracePodSpec(Pod("q", 1000, 0, 0));
  EXPECT_TRUE(cpu_only["spec"]["containers"][0]["resources"]["limits"].empty());
}

TEST(PrepareWorkload, ParsesEachShapeThroughTheCoreParser) {
  SimCluster cluster;
  cluster.type_table = {"T4", "V100M16", "V100M32"};
  std::vector<TracePod> pods = {Pod("c", 1000, 1, 470, "V100M16|V100M32"), Pod("a", 1000, 1, 470),
                                Pod("b", 2000, 0, 0), Pod("d", 1000, 2, 1000)};
  auto w = PrepareWorkload(pods, cluster, 100, "t.csv");
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_EQ(w->pods.size(), 4u);
  EXPECT_EQ(w->pods[0].name, "a");    // sorted by name
  EXPECT_EQ(w->requests.size(), 4u);  // four distinct (num_gpu, milli, spec)
  // "a": one GPU, gpucores 47 → 470 milli, any type.
  EXPECT_EQ(w->demand[0].num_gpus, 1);
  EXPECT_EQ(w->demand[0].gpu_milli, 470);
  EXPECT_EQ(w->demand[0].type_mask, 0b111u);
  EXPECT_EQ(w->demand[0].cpu_milli, 1000);
  EXPECT_EQ(w->demand[0].mem_mib, 1024);
  EXPECT_EQ(w->demand[1].num_gpus, 0);        // "b": CPU-only
  EXPECT_EQ(w->demand[2].type_mask, 0b110u);  // "c": V100M16|V100M32
  EXPECT_EQ(w->demand[3].num_gpus, 2);        // "d": 2 whole cards
  EXPECT_EQ(w->demand[3].gpu_milli, 1000);
  EXPECT_EQ(w->total_gpu_milli, 470 + 470 + 2000);
  EXPECT_EQ(w->target.size(), 4u);  // coverage 100 %: every shape
}

}  // namespace
}  // namespace fracgpu::sim
