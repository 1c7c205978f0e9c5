// Tests of src/core/score.h: HAMi's per-GPU and node scores (docs/design/hami-behaviour.md §3.5
// step 4), the GPU try-order of each policy (§3.6 "GPU sort order"), the topology-aware choice,
// node choice and the extender's 0–10 mapping. Expected values are worked out by hand.

#include "core/score.h"

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

namespace fracgpu::core {
namespace {

// "g<i>" (built by append: GCC 12 -O3 warns falsely on "literal" + std::string).
std::string Name(int i) {
  std::string s = "g";
  s += std::to_string(i);
  return s;
}

DeviceInfo Dev(const std::string& uuid, int64_t mem = 32768, int32_t numa = 0, int32_t count = 10,
               int32_t devcore = 100) {
  DeviceInfo d;
  d.uuid = uuid;
  d.devmem_mib = mem;
  d.numa = numa;
  d.count = count;
  d.devcore = devcore;
  d.type = "NVIDIA A100-SXM4-80GB";
  return d;
}

GpuState Gpu(DeviceInfo info, int32_t used = 0, int64_t used_mem = 0, int32_t used_cores = 0) {
  GpuState g;
  g.info = std::move(info);
  g.used = used;
  g.used_mem_mib = used_mem;
  g.used_cores = used_cores;
  return g;
}

ContainerRequest Ctr(int32_t gpus, int64_t mem, int32_t cores, int32_t pct = 100) {
  ContainerRequest c;
  c.name = "app";
  c.num_gpus = gpus;
  c.mem_mib = mem;
  c.mem_percent = pct;
  c.cores_percent = cores;
  return c;
}

std::vector<GpuUsage> UsageOf(const NodeState& node) {
  std::vector<GpuUsage> u;
  for (const GpuState& g : node.gpus) u.push_back(GpuUsage::Of(g));
  return u;
}

TEST(DeviceScoreTest, HamiFormula) {
  // 10 × ((1+1)/10 + (10+20)/100 + (4096+8192)/32768) = 10 × (0.2 + 0.3 + 0.375) = 8.75.
  EXPECT_FLOAT_EQ(DeviceScore(Ctr(1, 4096, 10), Dev("g"), GpuUsage{1, 8192, 20}), 8.75f);
}

TEST(DeviceScoreTest, CountsEveryRequestedGpu) {
  // 4 GPUs asked: (4+0)/8 = 0.5; cores 100/100 = 1; whole memory 1 → 10 × 2.5 = 25.
  EXPECT_FLOAT_EQ(DeviceScore(Ctr(4, 0, 100), Dev("g", 81920, 0, 8), GpuUsage{}), 25.0f);
}

TEST(DeviceScoreTest, MemoryPercentIsConvertedToMib) {
  // 50 % of 16384 = 8192 → 8192/16384 = 0.5; slots 1/10; cores 0 → 10 × 0.6 = 6.
  EXPECT_FLOAT_EQ(DeviceScore(Ctr(1, 0, 0, 50), Dev("g", 16384), GpuUsage{}), 6.0f);
}

TEST(DeviceScoreTest, ZeroCapacityTermsCountZero) {
  // count 0, devcore 0, devmem 0: every term would divide by zero → 0.
  EXPECT_FLOAT_EQ(DeviceScore(Ctr(1, 100, 10), Dev("g", 0, 0, 0, 0), GpuUsage{}), 0.0f);
}

TEST(NodeScoreTest, HamiDefaultScore) {
  // Σused 2 / Σcount 20 = 0.1; Σcores 50 / 200 = 0.25; Σmem 16384 / 65536 = 0.25 → 6.
  NodeState node;
  node.gpus = {Gpu(Dev("a"), 2, 16384, 50), Gpu(Dev("b"))};
  EXPECT_FLOAT_EQ(NodeScore(node), 6.0f);
}

TEST(NodeScoreTest, FullNodeScoresThirty) {
  NodeState node;
  node.gpus = {Gpu(Dev("a"), 10, 32768, 100)};
  EXPECT_FLOAT_EQ(NodeScore(node), 30.0f);
}

TEST(NodeScoreTest, NodeWithoutGpusScoresZero) { EXPECT_FLOAT_EQ(NodeScore(NodeState{}), 0.0f); }

// g0 NUMA 0 used 1 / 50 %, g1 NUMA 0 idle, g2 NUMA 1 used 1 / 20 %, g3 NUMA 1 idle.
// Request 1 × 1000 MiB, 10 %; m = 10 × 1000/32768 for all. Scores:
//   g0 = 10 × (2/10 + 60/100) + m = 8 + m;  g2 = 10 × (2/10 + 30/100) + m = 5 + m;
//   g1 = g3 = 10 × (1/10 + 10/100) + m = 2 + m.
NodeState OrderNode() {
  NodeState node;
  node.gpus = {Gpu(Dev("g0", 32768, 0), 1, 0, 50), Gpu(Dev("g1", 32768, 0)),
               Gpu(Dev("g2", 32768, 1), 1, 0, 20), Gpu(Dev("g3", 32768, 1))};
  return node;
}

struct OrderCase {
  const char* name;
  GpuPolicy policy;
  bool numa_bind;
  std::vector<uint16_t> want;
};

// Names the case in test output instead of dumping its bytes.
void PrintTo(const OrderCase& tc, std::ostream* os) { *os << tc.name; }

class OrderGpusTest : public ::testing::TestWithParam<OrderCase> {};

TEST_P(OrderGpusTest, TryOrder) {
  const OrderCase& tc = GetParam();
  NodeState node = OrderNode();
  std::vector<GpuUsage> usage = UsageOf(node);
  std::vector<uint16_t> order(node.gpus.size());
  OrderGpus(tc.policy, tc.numa_bind, Ctr(1, 1000, 10), node, usage, order);
  EXPECT_EQ(order, tc.want);
}

INSTANTIATE_TEST_SUITE_P(
    Policies, OrderGpusTest,
    ::testing::Values(
        // spread: score ascending; g1/g3 tie → NUMA ascending → g1 first.
        OrderCase{"Spread", GpuPolicy::kSpread, false, {1, 3, 2, 0}},
        // binpack: score descending; g1/g3 tie → NUMA ascending.
        OrderCase{"Binpack", GpuPolicy::kBinpack, false, {0, 2, 1, 3}},
        // binpack + numa-bind: NUMA ascending, then score descending.
        OrderCase{"BinpackNuma", GpuPolicy::kBinpack, true, {0, 1, 2, 3}},
        // spread + numa-bind: NUMA descending, then score ascending.
        OrderCase{"SpreadNuma", GpuPolicy::kSpread, true, {3, 2, 1, 0}},
        // topology-aware and fragmentation-aware (without orderer) scan in spread order.
        OrderCase{"Topology", GpuPolicy::kTopologyAware, false, {1, 3, 2, 0}},
        OrderCase{"FragmentationFallback", GpuPolicy::kFragmentationAware, false, {1, 3, 2, 0}}),
    [](const ::testing::TestParamInfo<OrderCase>& info) { return std::string(info.param.name); });

TEST(OrderGpusTest, UsesTheGivenUsageNotTheNodes) {
  // The node says idle; the usage span (earlier containers of the pod) says g0 is taken.
  NodeState node;
  node.gpus = {Gpu(Dev("g0")), Gpu(Dev("g1"))};
  std::vector<GpuUsage> usage = {GpuUsage{1, 8192, 25}, GpuUsage{}};
  std::vector<uint16_t> order(2);
  OrderGpus(GpuPolicy::kSpread, false, Ctr(1, 8192, 25), node, usage, order);
  EXPECT_EQ(order, (std::vector<uint16_t>{1, 0}));
}

// Links: 0–1 100, 0–2 10, 0–3 30, 1–2 10, 1–3 10, 2–3 200; g0, g1 NUMA 0; g2, g3 NUMA 1.
NodeState LinkNode() {
  NodeState node;
  node.gpus = {Gpu(Dev("g0", 32768, 0)), Gpu(Dev("g1", 32768, 0)), Gpu(Dev("g2", 32768, 1)),
               Gpu(Dev("g3", 32768, 1))};
  node.topology["g0"] = {{"g1", 100}, {"g2", 10}, {"g3", 30}};
  node.topology["g1"] = {{"g2", 10}, {"g3", 10}};
  node.topology["g3"] = {{"g2", 200}};
  return node;
}

TEST(TopologyTest, LinkScoreEitherDirection) {
  NodeState node = LinkNode();
  EXPECT_EQ(LinkScore(node, 0, 1), 100);
  EXPECT_EQ(LinkScore(node, 1, 0), 100);
  EXPECT_EQ(LinkScore(node, 2, 3), 200);
  NodeState bare;
  bare.gpus = {Gpu(Dev("x")), Gpu(Dev("y"))};
  EXPECT_EQ(LinkScore(bare, 0, 1), 0);
}

TEST(TopologyTest, OneGpuLowestSum) {
  // Sums: g0 140, g1 120, g2 220, g3 240 → g1.
  std::vector<uint16_t> c = {0, 1, 2, 3};
  EXPECT_EQ(ChooseByTopology(LinkNode(), c, 1, false), (std::vector<uint16_t>{1}));
}

TEST(TopologyTest, OneGpuTieTakesEarlierCandidate) {
  // Among {g0, g1} only: both sum 100 → the first candidate listed.
  std::vector<uint16_t> c = {1, 0};
  EXPECT_EQ(ChooseByTopology(LinkNode(), c, 1, false), (std::vector<uint16_t>{1}));
}

TEST(TopologyTest, PairHighestSum) {
  std::vector<uint16_t> c = {0, 1, 2, 3};
  EXPECT_EQ(ChooseByTopology(LinkNode(), c, 2, false), (std::vector<uint16_t>{2, 3}));
}

TEST(TopologyTest, NumaBindKeepsCombinationsOnOneNumaNode) {
  // g0–g2 made the best link, but they are on different NUMA nodes: with numa-bind
  // {g2, g3} (200) wins; without, {g0, g2} (500).
  NodeState node = LinkNode();
  node.topology["g0"]["g2"] = 500;
  std::vector<uint16_t> c = {0, 1, 2, 3};
  EXPECT_EQ(ChooseByTopology(node, c, 2, false), (std::vector<uint16_t>{0, 2}));
  EXPECT_EQ(ChooseByTopology(node, c, 2, true), (std::vector<uint16_t>{2, 3}));
  // Candidates g0, g2 only: no NUMA node holds two of them.
  std::vector<uint16_t> split = {0, 2};
  EXPECT_TRUE(ChooseByTopology(node, split, 2, true).empty());
}

TEST(TopologyTest, TooFewCandidates) {
  std::vector<uint16_t> c = {0};
  EXPECT_TRUE(ChooseByTopology(LinkNode(), c, 2, false).empty());
}

TEST(TopologyTest, WideNodeUsesGreedyAndFindsTheClique) {
  // 40 GPUs, choose 10: C(40,10) > 200,000 → greedy. Links 100 inside positions 10..19, 0
  // elsewhere: the best set is that clique (45 pairs × 100).
  NodeState node;
  for (int i = 0; i < 40; ++i) node.gpus.push_back(Gpu(Dev(Name(i))));
  for (int i = 10; i < 20; ++i) {
    for (int j = i + 1; j < 20; ++j) node.topology[Name(i)][Name(j)] = 100;
  }
  std::vector<uint16_t> c;
  for (uint16_t i = 0; i < 40; ++i) c.push_back(i);
  std::vector<uint16_t> want;
  for (uint16_t i = 10; i < 20; ++i) want.push_back(i);
  EXPECT_EQ(ChooseByTopology(node, c, 10, false), want);
}

TEST(ChooseNodeTest, BinpackMostUsedSpreadLeastUsed) {
  std::vector<float> s = {3.0f, 12.5f, 0.5f, 12.5f};
  EXPECT_EQ(ChooseNode(NodePolicy::kBinpack, s), 1u);  // tie 1/3 → earliest
  EXPECT_EQ(ChooseNode(NodePolicy::kSpread, s), 2u);
}

TEST(PriorityScoresTest, MinMaxToZeroTen) {
  std::vector<float> s = {0.0f, 15.0f, 30.0f};
  EXPECT_EQ(PriorityScores(NodePolicy::kBinpack, s), (std::vector<int64_t>{0, 5, 10}));
  EXPECT_EQ(PriorityScores(NodePolicy::kSpread, s), (std::vector<int64_t>{10, 5, 0}));
}

TEST(PriorityScoresTest, Rounds) {
  // (1 − 0)/(3 − 0) × 10 = 3.33 → 3; (2/3) × 10 = 6.67 → 7.
  std::vector<float> s = {0.0f, 1.0f, 2.0f, 3.0f};
  EXPECT_EQ(PriorityScores(NodePolicy::kBinpack, s), (std::vector<int64_t>{0, 3, 7, 10}));
}

TEST(PriorityScoresTest, AllEqualOrSingleScoreTen) {
  std::vector<float> eq = {4.0f, 4.0f};
  EXPECT_EQ(PriorityScores(NodePolicy::kSpread, eq), (std::vector<int64_t>{10, 10}));
  std::vector<float> one = {7.0f};
  EXPECT_EQ(PriorityScores(NodePolicy::kBinpack, one), (std::vector<int64_t>{10}));
  EXPECT_TRUE(PriorityScores(NodePolicy::kBinpack, {}).empty());
}

TEST(PriorityScoresTest, ChosenNodeGetsTen) {
  std::vector<float> s = {3.0f, 12.5f, 0.5f, 9.0f};
  for (NodePolicy p : {NodePolicy::kBinpack, NodePolicy::kSpread}) {
    EXPECT_EQ(PriorityScores(p, s)[ChooseNode(p, s)], 10) << NodePolicyName(p);
  }
}

}  // namespace
}  // namespace fracgpu::core
