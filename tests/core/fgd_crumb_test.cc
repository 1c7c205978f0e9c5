// FGD+CpuRoute+Crumb (src/core/fgd_policies.h kFgdCpuRouteCrumb, CrumbCeilingMilli,
// LeavesCrumb). Expected values are computed by hand beside them (sigmoid values to 4 digits).
#include <gtest/gtest.h>

#include <vector>

#include "core/fgd_policies.h"
#include "core/frag.h"

namespace fracgpu::core {
namespace {

FragNode MakeNode(int64_t cpu_left, std::vector<int32_t> left) {
  FragNode n;
  n.cpu_left = cpu_left;
  n.mem_left = 1 << 20;
  n.num_gpus = static_cast<int32_t>(left.size());
  for (size_t g = 0; g < left.size(); ++g) n.gpu_left[g] = left[g];
  return n;
}

FragDemand Demand(int64_t cpu, int32_t num_gpus, int32_t milli) {
  FragDemand d;
  d.cpu_milli = cpu;
  d.num_gpus = num_gpus;
  d.gpu_milli = milli;
  return d;
}

FragWorkload Workload(std::vector<std::pair<FragDemand, double>> shapes) {
  FragWorkload w;
  for (const auto& [d, p] : shapes) {
    w.shapes.push_back(d);
    w.popularity.push_back(p);
  }
  return w;
}

GpuPick One(int g) {
  GpuPick p;
  p.count = 1;
  p.index[0] = static_cast<int8_t>(g);
  return p;
}

// GPU shapes hold 0.8 of the popularity; 1 % of it is 0.008. Shares ≤ 160: 0.005 (below);
// ≤ 220: 0.005 + 0.010 = 0.015 (reaches it): the ceiling is 220. The CPU-only shape (0.2) and
// the 2-GPU shape (per-GPU 1000) count only in the total.
TEST(CrumbCeilingMilli, IsTheOnePercentQuantileOfTheGpuShapesShare) {
  const FragWorkload w = Workload({{Demand(1000, 0, 0), 0.2},
                                   {Demand(1000, 1, 500), 0.385},
                                   {Demand(1000, 1, 220), 0.010},
                                   {Demand(1000, 1, 160), 0.005},
                                   {Demand(1000, 2, 1000), 0.1},
                                   {Demand(1000, 1, 1000), 0.3}});
  EXPECT_EQ(CrumbCeilingMilli(w), 220);
  // With 0.009 on 160 (≥ 0.008) the 160 share itself is the quantile.
  FragWorkload w2 = w;
  w2.popularity[3] = 0.009;
  EXPECT_EQ(CrumbCeilingMilli(w2), 160);
  // Only CPU-only shapes: nothing is a crumb.
  EXPECT_EQ(CrumbCeilingMilli(Workload({{Demand(1000, 0, 0), 1.0}})), 0);
  // Only whole cards: any leftover below a card fits none of M's GPU pods.
  EXPECT_EQ(CrumbCeilingMilli(Workload({{Demand(1000, 1, 1000), 1.0}})), 1000);
}

// Leftovers 1000, 680, 150; ceiling 220: a crumb is a leftover in (100, 220).
TEST(LeavesCrumb, OnlyASharingPodsLeftoverBetweenFloorAndCeiling) {
  const FragNode node = MakeNode(64000, {1000, 680, 150});
  EXPECT_TRUE(LeavesCrumb(node, Demand(0, 1, 810), One(0), 220));       // 190
  EXPECT_TRUE(LeavesCrumb(node, Demand(0, 1, 470), One(1), 220));       // 210
  EXPECT_FALSE(LeavesCrumb(node, Demand(0, 1, 580), One(1), 220));      // 100: counts as full
  EXPECT_FALSE(LeavesCrumb(node, Demand(0, 1, 50), One(2), 220));       // 100
  EXPECT_TRUE(LeavesCrumb(node, Demand(0, 1, 40), One(2), 220));        // 110
  EXPECT_FALSE(LeavesCrumb(node, Demand(0, 1, 460), One(1), 220));      // 220: fits a 220 pod
  EXPECT_FALSE(LeavesCrumb(node, Demand(0, 1, 320), One(0), 220));      // 680
  EXPECT_FALSE(LeavesCrumb(node, Demand(0, 1, 1000), One(0), 1000));    // whole card
  EXPECT_FALSE(LeavesCrumb(node, Demand(1000, 0, 0), GpuPick{}, 220));  // CPU-only
  EXPECT_FALSE(LeavesCrumb(node, Demand(0, 1, 810), One(0), 0));        // no ceiling
}

// M = {whole card, p 0.9; 220 share, p 0.1}, no CPU: ceiling 220, r = 0 (no route for GPU pods).
// A 470 pod on node A (one GPU, 680 left): F before = 0.9 × 680 = 612 (the card shape cannot
// use 680; the 220 shape can), after (210 left) = 0.9 × 210 + 0.1 × 210 = 210: ΔF = +402,
// int(sigmoid(0.402) × 70) = int(41.94) = 41; 210 is a crumb. On node B (one free GPU): F before
// 0, after (530 left) 0.9 × 530 = 477: ΔF = −477, int(sigmoid(−0.477) × 70) = int(26.81) = 26; no
// crumb. FGD+CpuRoute takes A (41 > 26); the crumb key sends the pod to B (26 + 71 = 97 > 41).
TEST(FgdCpuRouteCrumb, AvoidsLeavingACrumbBeforeTheFgdScore) {
  const FragWorkload w = Workload({{Demand(0, 1, 1000), 0.9}, {Demand(0, 1, 220), 0.1}});
  ASSERT_EQ(CrumbCeilingMilli(w), 220);
  const std::vector<FragNode> nodes = {MakeNode(64000, {680}), MakeNode(64000, {1000})};
  std::vector<double> frag;
  for (const auto& n : nodes) frag.push_back(NodeFragment(n, w));
  EXPECT_DOUBLE_EQ(frag[0], 612.0);
  const FragDemand pod = Demand(0, 1, 470);
  SeededRng rng(1, 0);
  EXPECT_EQ(ScoreNode(PlacementPolicy::kFgdCpuRoute, nodes[0], pod, w, frag[0]).score, 41);
  EXPECT_EQ(ScoreNode(PlacementPolicy::kFgdCpuRoute, nodes[1], pod, w, frag[1]).score, 26);
  EXPECT_EQ(ChooseNode(PlacementPolicy::kFgdCpuRoute, nodes, frag, pod, w, rng).node, 0);
  EXPECT_EQ(ScoreNode(PlacementPolicy::kFgdCpuRouteCrumb, nodes[0], pod, w, frag[0]).score, 41);
  EXPECT_EQ(ScoreNode(PlacementPolicy::kFgdCpuRouteCrumb, nodes[1], pod, w, frag[1]).score, 97);
  EXPECT_EQ(ChooseNode(PlacementPolicy::kFgdCpuRouteCrumb, nodes, frag, pod, w, rng).node, 1);
  // A CPU-only pod (1 vCPU) on B: ΔF = 0 → 35; no crumb (+71); routed (CPU-only, surplus
  // 63000 − 0 × 1000 ≥ 0: +142) = 248.
  EXPECT_EQ(
      ScoreNode(PlacementPolicy::kFgdCpuRouteCrumb, nodes[1], Demand(1000, 0, 0), w, frag[1]).score,
      248);
  EXPECT_EQ(ParsePlacementPolicy("fgd+cpuroute+crumb").value(), PlacementPolicy::kFgdCpuRouteCrumb);
  EXPECT_TRUE(HasFgdGpuOrder(PlacementPolicy::kFgdCpuRouteCrumb));
  EXPECT_TRUE(RoutesCpu(PlacementPolicy::kFgdCpuRouteCrumb));
  EXPECT_EQ(FgdScoreScale(PlacementPolicy::kFgdCpuRouteCrumb), 70);
}

// The route outranks the crumb key. M = {whole card, 8 vCPU, p 0.9; 220 share, 1.76 vCPU, p
// 0.1}: r = (7200 + 176) / (900 + 22) = 8 milli-CPU per milli-GPU. A 470 pod with 4 vCPU is
// CPU-heavy (4000 > 8 × 470 = 3760). Node A (64 vCPU, 680 left): surplus after 60000 − 8 × 210
// ≥ 0, routed; ΔF = +402 as above → 41, leaves a crumb: 41 + 142 = 183. Node B (5 vCPU, one free
// GPU): surplus after 1000 − 8 × 530 < 0, not routed. F before: the card shape lacks CPU, all
// 1000 × 0.9 = 900; after (1 vCPU, 530 left): both shapes lack CPU, 530: ΔF = +370,
// int(sigmoid(0.37) × 70) = int(41.40) = 41, no crumb: 41 + 71 = 112. A wins.
TEST(FgdCpuRouteCrumb, TheRouteComesFirst) {
  const FragWorkload w = Workload({{Demand(8000, 1, 1000), 0.9}, {Demand(1760, 1, 220), 0.1}});
  EXPECT_DOUBLE_EQ(WorkloadCpuPerGpuMilli(w), 8.0);
  const std::vector<FragNode> nodes = {MakeNode(64000, {680}), MakeNode(5000, {1000})};
  std::vector<double> frag;
  for (const auto& n : nodes) frag.push_back(NodeFragment(n, w));
  EXPECT_DOUBLE_EQ(frag[1], 900.0);
  const FragDemand pod = Demand(4000, 1, 470);
  SeededRng rng(1, 0);
  EXPECT_EQ(ScoreNode(PlacementPolicy::kFgdCpuRouteCrumb, nodes[0], pod, w, frag[0]).score, 183);
  EXPECT_EQ(ScoreNode(PlacementPolicy::kFgdCpuRouteCrumb, nodes[1], pod, w, frag[1]).score, 112);
  EXPECT_EQ(ChooseNode(PlacementPolicy::kFgdCpuRouteCrumb, nodes, frag, pod, w, rng).node, 0);
}

}  // namespace
}  // namespace fracgpu::core
