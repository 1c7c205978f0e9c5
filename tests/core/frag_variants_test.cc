// fracgpu's FGD variants beyond the paper (src/core/frag.h ShapeFragmentCpuAware,
// fgd_policies.h kFgdCpu / kFgdKeepFree / kFgdFine / kFgdHybrid / kFgdCpuBalance / kFgdCpuRoute)
// and the one code path of the fragmentation-aware choice (frag_choice.h). Expected values are
// computed by hand beside them.
#include <gtest/gtest.h>

#include <limits>

#include "core/fgd_policies.h"
#include "core/frag.h"
#include "core/frag_choice.h"

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

FragWorkload OneShape(const FragDemand& d) {
  FragWorkload w;
  w.shapes.push_back(d);
  w.popularity.push_back(1.0);
  return w;
}

// Node: 8 vCPU, leftovers 1000, 500, 200, 0 (total 1700).
TEST(ShapeFragmentCpuAware, AddsTheGpuTheShapesCpuCannotReach) {
  const FragNode node = MakeNode(8000, {1000, 500, 200, 0});
  // 300 milli, 4 vCPU: FGD's fragment is 200 + 0 (GPUs too small). The GPUs that fit hold
  // 1000 + 500 = 1500, but 8000 / 4000 = 2 copies use only 600: 900 more is stranded by CPU.
  EXPECT_EQ(ShapeFragment(node, Demand(4000, 1, 300)), 200);
  EXPECT_EQ(ShapeFragmentCpuAware(node, Demand(4000, 1, 300)), 200 + 900);
  // 1 vCPU: 8 copies × 300 = 2400 ≥ 1500: nothing stranded by CPU, FGD's value.
  EXPECT_EQ(ShapeFragmentCpuAware(node, Demand(1000, 1, 300)), 200);
  // No CPU asked: FGD's value.
  EXPECT_EQ(ShapeFragmentCpuAware(node, Demand(0, 1, 300)), 200);
  // More CPU than left: the cliff, all 1700 (as FGD).
  EXPECT_EQ(ShapeFragmentCpuAware(node, Demand(9000, 1, 300)), 1700);
  // A whole card with 5 vCPU: one copy (8000 / 5000) uses the one free card: 700 (as FGD).
  EXPECT_EQ(ShapeFragmentCpuAware(node, Demand(5000, 1, 1000)), 700);
  // CPU-only shapes: everything, as FGD.
  EXPECT_EQ(ShapeFragmentCpuAware(node, Demand(1000, 0, 0)), 1700);
  // Untracked CPU (the scheduler's INT64_MAX / 2) does not overflow: FGD's value.
  const FragNode untracked = MakeNode(std::numeric_limits<int64_t>::max() / 2, {1000, 500, 200, 0});
  EXPECT_EQ(ShapeFragmentCpuAware(untracked, Demand(1, 1, 300)), 200);
}

TEST(ShapeFragmentCpuAware, PolicyFragmentSelectsTheMeasure) {
  const FragNode node = MakeNode(8000, {1000, 500, 200, 0});
  const FragWorkload w = OneShape(Demand(4000, 1, 300));
  EXPECT_DOUBLE_EQ(PolicyFragment(PlacementPolicy::kFgd, node, w), 200.0);
  EXPECT_DOUBLE_EQ(PolicyFragment(PlacementPolicy::kFgdCpu, node, w), 1100.0);
  EXPECT_DOUBLE_EQ(PolicyFragment(PlacementPolicy::kFgdCpuBestFit, node, w), 1100.0);
  EXPECT_DOUBLE_EQ(PolicyFragment(PlacementPolicy::kFgdKeepFree, node, w), 200.0);
}

// M = one shape (0 vCPU, 1 × 500). Node A: two free cards; node B: {1000, 500}; node C: GPUs
// all allocated. A 500-milli pod leaves F = 0 on A and B (ΔF 0 → score 50 on both); a CPU-only
// pod changes no F anywhere (score 50 everywhere). FGD takes the first node in order; KeepFree
// sends the GPU pod to B (a GPU already in use there) and the CPU-only pod to C (no GPU left).
TEST(FgdKeepFree, TiesKeepWholeNodesFreeAndCpuOnlyPodsOnFullNodes) {
  const FragWorkload w = OneShape(Demand(0, 1, 500));
  const std::vector<FragNode> nodes = {MakeNode(8000, {1000, 1000}), MakeNode(8000, {1000, 500}),
                                       MakeNode(8000, {0, 0})};
  std::vector<double> frag;
  for (const auto& n : nodes) frag.push_back(NodeFragment(n, w));
  SeededRng rng(1, 0);
  const FragDemand gpu_pod = Demand(0, 1, 500), cpu_pod = Demand(1000, 0, 0);
  EXPECT_EQ(ChooseNode(PlacementPolicy::kFgd, nodes, frag, gpu_pod, w, rng).node, 0);
  EXPECT_EQ(ChooseNode(PlacementPolicy::kFgdKeepFree, nodes, frag, gpu_pod, w, rng).node, 1);
  EXPECT_EQ(ChooseNode(PlacementPolicy::kFgd, nodes, frag, cpu_pod, w, rng).node, 0);
  EXPECT_EQ(ChooseNode(PlacementPolicy::kFgdKeepFree, nodes, frag, cpu_pod, w, rng).node, 2);
  // The score: FGD's integer score × 10 + 1 when the tie-break prefers the node.
  EXPECT_EQ(ScoreNode(PlacementPolicy::kFgdKeepFree, nodes[1], gpu_pod, w, frag[1]).score, 501);
  EXPECT_EQ(ScoreNode(PlacementPolicy::kFgdKeepFree, nodes[0], gpu_pod, w, frag[0]).score, 500);
}

// M = one shape 1 × 600 (0 vCPU); node {1000, 300}: the 300 pod on GPU 1 leaves F = 0, on
// GPU 0 F = 700 + 0: ΔF = 300 − 0 → sigmoid(0.3) = 0.5744; ×1000 → 574 (fine); the hybrid's
// GPU pods compare the exact ΔF, 300; its CPU-only pods FGD's integer score, 50.
TEST(FgdScore, FineAndHybridVariants) {
  const FragWorkload w = OneShape(Demand(0, 1, 600));
  const FragNode node = MakeNode(8000, {1000, 300});
  const double before = NodeFragment(node, w);
  EXPECT_DOUBLE_EQ(before, 300.0);
  EXPECT_EQ(ScoreNode(PlacementPolicy::kFgdFine, node, Demand(0, 1, 300), w, before).score, 574);
  EXPECT_DOUBLE_EQ(ScoreNode(PlacementPolicy::kFgdHybrid, node, Demand(0, 1, 300), w, before).score,
                   300.0);
  EXPECT_EQ(ScoreNode(PlacementPolicy::kFgdHybrid, node, Demand(1000, 0, 0), w, before).score, 50);
}

// M = one shape (2 vCPU, 1 × 500): r = 2000 / 500 = 4 millicores per milli-GPU. A CPU-only pod
// of 1 vCPU changes no F on nodes with ≥ 3 vCPU left (score 50 everywhere). Node A: 4 vCPU,
// 1000 milli left → surplus after = 3000 − 4 × 1000 < 0; node B: 8 vCPU, 1000 left → 7000 − 4000
// ≥ 0. FGD takes A (first); CpuBalance takes B (its CPU is spare).
TEST(FgdCpuBalance, CpuOnlyPodsGoWhereCpuIsSpare) {
  const FragWorkload w = OneShape(Demand(2000, 1, 500));
  const std::vector<FragNode> nodes = {MakeNode(4000, {1000}), MakeNode(8000, {1000})};
  std::vector<double> frag;
  for (const auto& n : nodes) frag.push_back(NodeFragment(n, w));
  SeededRng rng(1, 0);
  const FragDemand cpu_pod = Demand(1000, 0, 0);
  EXPECT_EQ(ChooseNode(PlacementPolicy::kFgd, nodes, frag, cpu_pod, w, rng).node, 0);
  EXPECT_EQ(ChooseNode(PlacementPolicy::kFgdCpuBalance, nodes, frag, cpu_pod, w, rng).node, 1);
  EXPECT_EQ(ScoreNode(PlacementPolicy::kFgdCpuBalance, nodes[1], cpu_pod, w, frag[1]).score, 501);
  EXPECT_EQ(ScoreNode(PlacementPolicy::kFgdCpuBalance, nodes[0], cpu_pod, w, frag[0]).score, 500);
  // GPU pods: no tie-break, FGD's score × 10.
  const FragDemand gpu_pod = Demand(0, 1, 500);
  EXPECT_EQ(ScoreNode(PlacementPolicy::kFgdCpuBalance, nodes[1], gpu_pod, w, frag[1]).score,
            10 * ScoreNode(PlacementPolicy::kFgd, nodes[1], gpu_pod, w, frag[1]).score);
}

// M = one shape (2 vCPU, 1 × 500): r = 4. Node A: 5 vCPU, two free GPUs; node B: 12 vCPU, two
// free GPUs. Every pod below leaves the shape able to fit, so ΔF = 0 on both: FGD's score is 50
// on both and FGD takes A (first); at scale 70 the score is 35.
//  - CPU-heavy GPU pod (2.5 vCPU, 1 × 500; 2500 > 4 × 500): surplus after on A = 2500 − 4 × 1500
//    < 0, on B = 9500 − 6000 ≥ 0 → B is routed: 35 + 71 = 106; CpuRoute takes B.
//  - CPU-light GPU pod (1 vCPU, 1 × 500; 1000 ≤ 2000): no route, 35 on both → A (node order).
//  - CPU-only pod (1 vCPU): A 4000 − 8000 < 0, B 11000 − 8000 ≥ 0 → B.
TEST(FgdCpuRoute, HeavyAndCpuOnlyPodsGoWhereCpuIsSpareLightPodsFollowFgd) {
  const FragWorkload w = OneShape(Demand(2000, 1, 500));
  EXPECT_DOUBLE_EQ(WorkloadCpuPerGpuMilli(w), 4.0);
  const std::vector<FragNode> nodes = {MakeNode(5000, {1000, 1000}), MakeNode(12000, {1000, 1000})};
  std::vector<double> frag;
  for (const auto& n : nodes) frag.push_back(NodeFragment(n, w));
  SeededRng rng(1, 0);
  const FragDemand heavy = Demand(2500, 1, 500), light = Demand(1000, 1, 500),
                   cpu_only = Demand(1000, 0, 0);
  EXPECT_EQ(ChooseNode(PlacementPolicy::kFgd, nodes, frag, heavy, w, rng).node, 0);
  EXPECT_EQ(ChooseNode(PlacementPolicy::kFgdCpuRoute, nodes, frag, heavy, w, rng).node, 1);
  EXPECT_EQ(ChooseNode(PlacementPolicy::kFgdCpuRoute100, nodes, frag, heavy, w, rng).node, 1);
  EXPECT_EQ(ScoreNode(PlacementPolicy::kFgdCpuRoute, nodes[0], heavy, w, frag[0]).score, 35);
  EXPECT_EQ(ScoreNode(PlacementPolicy::kFgdCpuRoute, nodes[1], heavy, w, frag[1]).score, 106);
  EXPECT_EQ(ScoreNode(PlacementPolicy::kFgdCpuRoute100, nodes[1], heavy, w, frag[1]).score, 151);
  EXPECT_EQ(ChooseNode(PlacementPolicy::kFgdCpuRoute, nodes, frag, light, w, rng).node, 0);
  EXPECT_EQ(ScoreNode(PlacementPolicy::kFgdCpuRoute, nodes[1], light, w, frag[1]).score, 35);
  EXPECT_EQ(ChooseNode(PlacementPolicy::kFgdCpuRoute, nodes, frag, cpu_only, w, rng).node, 1);
  EXPECT_FALSE(CpuRouteFirst(nodes[0], cpu_only, 4.0));
  EXPECT_TRUE(CpuRouteFirst(nodes[1], cpu_only, 4.0));
  EXPECT_EQ(FgdScoreScale(PlacementPolicy::kFgd), 100);
  EXPECT_EQ(ParsePlacementPolicy("fragmentation-aware").value(),
            PlacementPolicy::kFgdCpuRouteCrumb);
  EXPECT_EQ(ParsePlacementPolicy("FGD+CpuRoute-s100").value(), PlacementPolicy::kFgdCpuRoute100);
}

TEST(ShapeCounter, CountsSharesOfGrantsAndTheIncomingPod) {
  ShapeCounter counter;
  EXPECT_TRUE(counter.Workload().empty());
  PodGrants grants = {{DeviceGrant{"GPU-0", "NVIDIA", 1000, 30}},
                      {DeviceGrant{"GPU-1", "NVIDIA", 1000, 0}}};  // memory-only: not a shape
  counter.AddGrants(grants);
  counter.AddGrants(grants);
  PodRequest pod;
  ContainerRequest c;
  c.num_gpus = 2;
  c.cores_percent = 100;
  pod.containers.push_back(c);
  counter.AddRequest(pod);
  // Shapes: (300 milli, 1 GPU) × 2 and (1000, 2) × 1 → 2/3 and 1/3 (both needed for 95 %).
  const auto m = counter.Workload();
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].shape.gpu_milli, 300);
  EXPECT_EQ(m[0].shape.num_gpus, 1);
  EXPECT_NEAR(m[0].popularity, 2.0 / 3.0, 1e-12);
  EXPECT_EQ(m[1].shape.gpu_milli, 1000);
  EXPECT_EQ(m[1].shape.num_gpus, 2);
  EXPECT_NEAR(m[1].popularity, 1.0 / 3.0, 1e-12);
}

}  // namespace
}  // namespace fracgpu::core
