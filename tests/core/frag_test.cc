// The FGD paper's fragmentation measure and placement policies (src/core/frag.h,
// fgd_policies.h). Every expected value is computed by hand in the comment beside it.
#include "core/frag.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/fgd_policies.h"

namespace fracgpu::core {
namespace {

FragNode MakeNode(int64_t cpu_left, std::vector<int32_t> left, uint8_t type = 0) {
  FragNode n;
  n.cpu_left = cpu_left;
  n.mem_left = 1 << 20;
  n.num_gpus = static_cast<int32_t>(left.size());
  for (size_t g = 0; g < left.size(); ++g) {
    n.gpu_left[g] = left[g];
    n.gpu_type[g] = type;
  }
  return n;
}

FragDemand Demand(int64_t cpu, int32_t num_gpus, int32_t milli, uint64_t mask = ~0ULL) {
  FragDemand d;
  d.cpu_milli = cpu;
  d.num_gpus = num_gpus;
  d.gpu_milli = milli;
  d.type_mask = mask;
  return d;
}

FragWorkload Workload(std::vector<std::pair<FragDemand, double>> shapes) {
  FragWorkload w;
  for (auto& [d, p] : shapes) {
    w.shapes.push_back(d);
    w.popularity.push_back(p);
  }
  return w;
}

// Node: 8 vCPU left, GPUs with leftovers 1000, 500, 200, 0 (total 1700).
struct ShapeCase {
  const char* name;
  FragDemand shape;
  int64_t want;
};

TEST(ShapeFragment, HandComputedCases) {
  const FragNode node = MakeNode(8000, {1000, 500, 200, 0});
  const ShapeCase cases[] = {
      // CPU-only shapes see all unallocated GPU as fragment.
      {"cpu-only", Demand(1000, 0, 0), 1700},
      // 300: GPUs 1000 and 500 can host it; 200 + 0 are fragment.
      {"share-300", Demand(4000, 1, 300), 200},
      // 600: only the 1000 GPU can; 500 + 200 + 0.
      {"share-600", Demand(4000, 1, 600), 700},
      // 2 whole GPUs: only one fully free GPU, so the node cannot run it: everything.
      {"two-whole", Demand(4000, 2, 1000), 1700},
      // 1 whole GPU: runs on GPU 0; the others (500 + 200 + 0) are fragment.
      {"one-whole", Demand(4000, 1, 1000), 700},
      // Not enough CPU (10 > 8 vCPU): everything.
      {"cpu-short", Demand(10000, 1, 300), 1700},
      // GPU type not allowed (mask without type 0): everything.
      {"type-mismatch", Demand(0, 1, 300, /*mask=*/0b10), 1700},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(ShapeFragment(node, c.shape), c.want) << c.name;
  }
}

TEST(ShapeFragment, MixedTypesCountDisallowedGpusAsFragment) {
  // GPU 0 of type 0 (1000 left), GPU 1 of type 1 (800 left); the shape allows only type 1.
  FragNode node = MakeNode(8000, {1000, 800});
  node.gpu_type[1] = 1;
  // It runs on GPU 1; GPU 0 cannot host it, so its 1000 is fragment.
  EXPECT_EQ(ShapeFragment(node, Demand(0, 1, 500, 0b10)), 1000);
}

TEST(NodeFragment, IsPopularityWeightedSum) {
  const FragNode node = MakeNode(8000, {1000, 500, 200, 0});
  // 0.5 × 200 (share-300) + 0.25 × 1700 (cpu-only) + 0.25 × 700 (share-600) = 100 + 425 + 175.
  const FragWorkload w = Workload(
      {{Demand(4000, 1, 300), 0.5}, {Demand(1000, 0, 0), 0.25}, {Demand(4000, 1, 600), 0.25}});
  EXPECT_DOUBLE_EQ(NodeFragment(node, w), 700.0);
}

TEST(SelectTargetWorkload, CoversThresholdAndRenormalises) {
  const TaskShape a{1000, 500, 1, ""}, b{2000, 1000, 1, ""}, c{0, 0, 0, ""}, d{4000, 0, 0, ""};
  // 10 pods: a 5, b 3, c 1, d 1. 70 %: a (50 %) then b (80 %) → stop.
  auto m = SelectTargetWorkload({{c, 1}, {a, 5}, {d, 1}, {b, 3}}, 70);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].shape, a);
  EXPECT_EQ(m[1].shape, b);
  EXPECT_DOUBLE_EQ(m[0].popularity, 5.0 / 8.0);
  EXPECT_DOUBLE_EQ(m[1].popularity, 3.0 / 8.0);
  // 85 %: a, b, then one of the two 1-pod shapes: ties go to the larger tuple (d: cpu 4000).
  m = SelectTargetWorkload({{c, 1}, {a, 5}, {d, 1}, {b, 3}}, 85);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[2].shape, d);
  EXPECT_DOUBLE_EQ(m[2].popularity, 1.0 / 9.0);
  EXPECT_TRUE(SelectTargetWorkload({}, 95).empty());
}

TEST(TypeMaskForSpec, UsesTheTokenRule) {
  const std::vector<std::string> table = {"T4", "V100M16", "V100M32", "A10"};
  EXPECT_EQ(TypeMaskForSpec("", table), 0b1111u);
  EXPECT_EQ(TypeMaskForSpec("V100M16|V100M32", table), 0b0110u);
  EXPECT_EQ(TypeMaskForSpec("A10", table), 0b1000u);  // A10 only, whatever else is listed
  EXPECT_EQ(TypeMaskForSpec("H100", table), 0u);
  EXPECT_EQ(SplitGpuSpec("A|B||C"), (std::vector<std::string>{"A", "B", "C"}));
}

TEST(Fits, ChecksCpuMemoryTypeAndGpuCount) {
  FragNode node = MakeNode(8000, {1000, 500});
  node.mem_left = 1000;
  EXPECT_TRUE(Fits(node, Demand(8000, 1, 500)));
  EXPECT_FALSE(Fits(node, Demand(8001, 1, 500)));
  FragDemand mem = Demand(0, 0, 0);
  mem.mem_mib = 1001;
  EXPECT_FALSE(Fits(node, mem));
  EXPECT_TRUE(Fits(node, Demand(0, 2, 500)));
  EXPECT_FALSE(Fits(node, Demand(0, 2, 1000)));
  EXPECT_FALSE(Fits(node, Demand(0, 1, 500, 0b10)));
}

TEST(PickTightestGpus, SmallestLeftoverLowestIndexOnTies) {
  const FragNode node = MakeNode(0, {1000, 600, 400, 600, 1000});
  GpuPick p = PickTightestGpus(node, Demand(0, 1, 500));
  ASSERT_EQ(p.count, 1);
  EXPECT_EQ(p.index[0], 1);  // 600 is the smallest ≥ 500; GPU 1 before GPU 3
  p = PickTightestGpus(node, Demand(0, 2, 1000));
  ASSERT_EQ(p.count, 2);
  EXPECT_EQ(p.index[0], 0);  // lowest-indexed fully free GPUs
  EXPECT_EQ(p.index[1], 4);
}

// FGD: target workload = one shape (1 GPU, 600 milli). Node GPUs [1000, 300]:
// before: GPU 0 can host it → F = 300.
// Sharing pod of 300 on GPU 1 → [1000, 0] → F = 0 → ΔF = 300 → int(sigmoid(0.3) × 100) = 57.
// On GPU 0 → [700, 300] → F = 300 → ΔF = 0 → 50. So GPU 1, score 57.
TEST(FgdScore, ChoosesTheGpuOfSteepestDescent) {
  const FragWorkload w = Workload({{Demand(0, 1, 600), 1.0}});
  const FragNode node = MakeNode(8000, {1000, 300});
  const double before = NodeFragment(node, w);
  EXPECT_DOUBLE_EQ(before, 300.0);
  const PlacementScore s = ScoreNode(PlacementPolicy::kFgd, node, Demand(0, 1, 300), w, before);
  EXPECT_EQ(s.score, 57);
  ASSERT_EQ(s.pick.count, 1);
  EXPECT_EQ(s.pick.index[0], 1);
  // The exact variant returns ΔF itself.
  EXPECT_DOUBLE_EQ(ScoreNode(PlacementPolicy::kFgdExact, node, Demand(0, 1, 300), w, before).score,
                   300.0);
}

// The same node under fracgpu's variants: coarse = int(sigmoid(0.3) × 20) = int(11.49) = 11;
// FGD+BestFit = 57 × 1000 + BestFit (1 − (0.5 × 8000/128000 + 0.5 × 1000/8000) = 0.90625 → 90);
// FGD+GpuPacking = 57 × 1000 + packing (GPU 1 partially used, 300 left: 100 − 30/10 = 97).
TEST(FgdScore, FracgpuVariants) {
  const FragWorkload w = Workload({{Demand(0, 1, 600), 1.0}});
  const FragNode node = MakeNode(8000, {1000, 300});
  const double before = NodeFragment(node, w);
  const FragDemand pod = Demand(0, 1, 300);
  EXPECT_EQ(ScoreNode(PlacementPolicy::kFgdCoarse, node, pod, w, before).score, 11);
  EXPECT_EQ(ScoreNode(PlacementPolicy::kFgdBestFit, node, pod, w, before).score, 57090);
  EXPECT_EQ(ScoreNode(PlacementPolicy::kFgdPacking, node, pod, w, before).score, 57097);
  EXPECT_EQ(ScoreNode(PlacementPolicy::kFgdGpuWeighted, node, pod, w, before).score, 57);
}

TEST(GpuWeightedCounts, ScalesByGpusNeeded) {
  const auto c = GpuWeightedCounts(
      {{TaskShape{0, 0, 0, ""}, 5}, {TaskShape{0, 1000, 8, ""}, 3}, {TaskShape{0, 500, 1, ""}, 2}});
  EXPECT_EQ(c[0].count, 5);   // CPU-only: × 1
  EXPECT_EQ(c[1].count, 24);  // 8 GPUs: × 8
  EXPECT_EQ(c[2].count, 2);
}

// Shape (1 GPU, 500). Node [1000, 600], pod 500:
// GPU 0 → [500, 600]: both host 500 → F = 0 → ΔF = 0 → 50.
// GPU 1 → [1000, 100]: F = 100 → ΔF = −100 → int(sigmoid(−0.1) × 100) = int(47.50) = 47.
// FGD keeps GPU 0 (score 50), where BestFit-style policies take the tighter GPU 1.
TEST(FgdScore, NegativeDescentAndFirstOfEqualScores) {
  const FragWorkload w = Workload({{Demand(0, 1, 500), 1.0}});
  const FragNode node = MakeNode(8000, {1000, 600});
  PlacementScore s =
      ScoreNode(PlacementPolicy::kFgd, node, Demand(0, 1, 500), w, NodeFragment(node, w));
  EXPECT_EQ(s.score, 50);
  EXPECT_EQ(s.pick.index[0], 0);
  EXPECT_EQ(ScoreNode(PlacementPolicy::kBestFit, node, Demand(0, 1, 500), w, 0).pick.index[0], 1);
  // [1000, 500] with pod 500: both GPUs give F = 0 (score 50): the first (GPU 0) is kept.
  const FragNode tie = MakeNode(8000, {1000, 500});
  s = ScoreNode(PlacementPolicy::kFgd, tie, Demand(0, 1, 500), w, NodeFragment(tie, w));
  EXPECT_EQ(s.score, 50);
  EXPECT_EQ(s.pick.index[0], 0);
}

// A CPU-only pod on a node whose CPU it exhausts: shape (cpu 4000, 1 GPU, 500); node with
// 4 vCPU left and GPUs [1000]. Before: F = 0. After taking 4 vCPU: the shape lacks CPU →
// F = 1000 → ΔF = −1000 → int(sigmoid(−1) × 100) = int(26.89) = 26.
TEST(FgdScore, CpuOnlyPodChargesItsCpu) {
  const FragWorkload w = Workload({{Demand(4000, 1, 500), 1.0}});
  const FragNode node = MakeNode(4000, {1000});
  const PlacementScore s =
      ScoreNode(PlacementPolicy::kFgd, node, Demand(4000, 0, 0), w, NodeFragment(node, w));
  EXPECT_EQ(s.score, 26);
  EXPECT_EQ(s.pick.count, 0);
}

TEST(BestFitScore, HandComputed) {
  // cpu 64 vCPU left, 2 free GPUs; pod 16 vCPU + 1 GPU:
  // 1 − (0.5 × 48000/128000 + 0.5 × 1000/8000) = 1 − (0.1875 + 0.0625) = 0.75 → 75.
  const FragNode node = MakeNode(64000, {1000, 1000});
  EXPECT_EQ(ScoreNode(PlacementPolicy::kBestFit, node, Demand(16000, 1, 1000), {}, 0).score, 75);
}

TEST(DotProductScore, HandComputed) {
  // [64000/128000, 2000/8000] · [16000/128000, 1000/8000] = 0.5 × 0.125 + 0.25 × 0.125 = 0.09375;
  // 100 × (1 − 0.09375 / 2) = 95.3125 → 95.
  const FragNode node = MakeNode(64000, {1000, 1000});
  EXPECT_EQ(ScoreNode(PlacementPolicy::kDotProduct, node, Demand(16000, 1, 1000), {}, 0).score, 95);
}

TEST(GpuPackingScore, HandComputedTiers) {
  const FragWorkload none;
  // Untouched node with 2 GPUs: 33 − 2 = 31.
  EXPECT_EQ(
      ScoreNode(PlacementPolicy::kGpuPacking, MakeNode(0, {1000, 1000}), Demand(0, 1, 300), none, 0)
          .score,
      31);
  // Fits on the partially used GPU (400 left): 100 − (400·100/1000)/10 = 100 − 4 = 96.
  EXPECT_EQ(
      ScoreNode(PlacementPolicy::kGpuPacking, MakeNode(0, {1000, 400}), Demand(0, 1, 300), none, 0)
          .score,
      96);
  // Must open one fully free GPU on a used node: 50 − 1 = 49.
  EXPECT_EQ(
      ScoreNode(PlacementPolicy::kGpuPacking, MakeNode(0, {1000, 200}), Demand(0, 1, 300), none, 0)
          .score,
      49);
  // CPU-only pods: 0.
  EXPECT_EQ(
      ScoreNode(PlacementPolicy::kGpuPacking, MakeNode(0, {1000, 200}), Demand(1000, 0, 0), none, 0)
          .score,
      0);
}

TEST(GpuClusteringScore, HandComputedTiers) {
  const FragWorkload none;
  FragNode node = MakeNode(0, {1000, 1000, 1000, 1000, 1000, 1000, 500, 500});  // 7000 left
  // base = 25 × (8000 − 7000) / 8000 = 3 (integer).
  node.gpu_tags = 1;  // only share-gpu pods
  EXPECT_EQ(ScoreNode(PlacementPolicy::kGpuClustering, node, Demand(0, 1, 300), none, 0).score,
            3 + 75);
  EXPECT_EQ(ScoreNode(PlacementPolicy::kGpuClustering, node, Demand(0, 1, 1000), none, 0).score, 3);
  node.gpu_tags = 1 | (1 << 1);  // share-gpu and 1-gpu
  EXPECT_EQ(ScoreNode(PlacementPolicy::kGpuClustering, node, Demand(0, 1, 300), none, 0).score,
            3 + 50);
  node.gpu_tags = 0;  // no GPU pods
  EXPECT_EQ(ScoreNode(PlacementPolicy::kGpuClustering, node, Demand(0, 1, 300), none, 0).score,
            3 + 25);
  EXPECT_EQ(ScoreNode(PlacementPolicy::kGpuClustering, node, Demand(500, 0, 0), none, 0).score, 0);
}

TEST(Apply, SubtractsAndTags) {
  FragNode node = MakeNode(8000, {1000, 1000});
  FragDemand d = Demand(2000, 1, 300);
  d.mem_mib = 100;
  Apply(node, d, PickTightestGpus(node, d));
  EXPECT_EQ(node.cpu_left, 6000);
  EXPECT_EQ(node.mem_left, (1 << 20) - 100);
  EXPECT_EQ(node.gpu_left[0], 700);
  EXPECT_EQ(node.gpu_tags, 1u);
  Apply(node, Demand(0, 1, 1000), PickTightestGpus(node, Demand(0, 1, 1000)));
  EXPECT_EQ(node.gpu_left[1], 0);
  EXPECT_EQ(node.gpu_tags, 0b11u);
}

TEST(ChooseNode, TiesGoToTheFirstNodeInOrder) {
  const std::vector<FragNode> nodes = {MakeNode(1000, {1000}), MakeNode(8000, {1000}),
                                       MakeNode(8000, {1000})};
  SeededRng rng(1);
  // BestFit: node 0 lacks CPU (2000 > 1000); nodes 1 and 2 tie → node 1.
  const Placement p =
      ChooseNode(PlacementPolicy::kBestFit, nodes, {}, Demand(2000, 1, 500), {}, rng);
  EXPECT_EQ(p.node, 1);
  EXPECT_EQ(ChooseNode(PlacementPolicy::kBestFit, nodes, {}, Demand(9000, 0, 0), {}, rng).node, -1);
}

TEST(ChooseNode, HighestScoreWins) {
  // BestFit prefers the fuller node: node 1 (1 GPU left) over node 0 (2 GPUs left).
  const std::vector<FragNode> nodes = {MakeNode(8000, {1000, 1000}), MakeNode(8000, {1000, 0})};
  SeededRng rng(1);
  EXPECT_EQ(ChooseNode(PlacementPolicy::kBestFit, nodes, {}, Demand(0, 1, 1000), {}, rng).node, 1);
}

TEST(ChooseNode, RandomDrawsOnlyFeasibleNodesAndGpus) {
  const std::vector<FragNode> nodes = {MakeNode(0, {1000}), MakeNode(8000, {200, 900, 100, 800}),
                                       MakeNode(8000, {0})};
  SeededRng rng(7);
  int gpu_seen[4] = {};
  for (int i = 0; i < 200; ++i) {
    const Placement p =
        ChooseNode(PlacementPolicy::kRandom, nodes, {}, Demand(1000, 1, 500), {}, rng);
    ASSERT_EQ(p.node, 1);
    ASSERT_EQ(p.pick.count, 1);
    ++gpu_seen[p.pick.index[0]];
  }
  EXPECT_EQ(gpu_seen[0] + gpu_seen[2], 0);  // 200 and 100 left: too small
  EXPECT_GT(gpu_seen[1], 50);               // both fitting GPUs drawn (≈100 each)
  EXPECT_GT(gpu_seen[3], 50);
}

TEST(PlacementPolicyNames, RoundTripAndAliases) {
  for (PlacementPolicy p : AllPlacementPolicies()) {
    auto parsed = ParsePlacementPolicy(PlacementPolicyName(p));
    ASSERT_TRUE(parsed.ok()) << PlacementPolicyName(p);
    EXPECT_EQ(*parsed, p);
  }
  EXPECT_EQ(*ParsePlacementPolicy("DotProd"), PlacementPolicy::kDotProduct);
  EXPECT_EQ(*ParsePlacementPolicy("bestfit"), PlacementPolicy::kBestFit);
  auto bad = ParsePlacementPolicy("tetris");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"tetris\""), std::string::npos);
  EXPECT_EQ(PaperPolicies().size(), 6u);
  EXPECT_EQ(*ParsePlacementPolicy("fragmentation-aware"), kFragmentationAwarePolicy);
}

TEST(SeededRng, DeterministicAndInRange) {
  SeededRng a(42, 0), b(42, 0), c(42, 1);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.Uniform(10);
    EXPECT_EQ(x, b.Uniform(10));
    EXPECT_LT(x, 10u);
    differs |= x != c.Uniform(10);
  }
  EXPECT_TRUE(differs);
  std::vector<int> v = {0, 1, 2, 3, 4, 5, 6, 7};
  SeededRng(3).Shuffle(v);
  std::vector<int> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

}  // namespace
}  // namespace fracgpu::core
