// The fragmentation-aware policy on the scheduler's NodeState / PodRequest
// (src/core/frag_scheduler.h), with hand-computed scores.
#include "core/frag_scheduler.h"

#include <gtest/gtest.h>

namespace fracgpu::core {
namespace {

NodeState TwoGpuNode(int32_t used_cores0, int32_t used_cores1) {
  NodeState n;
  n.name = "n0";
  n.cpu_milli_total = 8000;
  int32_t used[2] = {used_cores0, used_cores1};
  for (int g = 0; g < 2; ++g) {
    GpuState gpu;
    gpu.info.uuid = "GPU-" + std::to_string(g);
    gpu.info.index = g;
    gpu.info.count = 10;
    gpu.info.devmem_mib = 10000;
    gpu.info.devcore = 100;
    gpu.info.type = "NVIDIA Tesla T4";
    gpu.used = used[g] > 0 ? 1 : 0;
    gpu.used_cores = used[g];
    gpu.used_mem_mib = used[g] * 100;  // memory share = core share
    n.gpus.push_back(gpu);
  }
  return n;
}

PodRequest SharingPod(int32_t percent) {
  PodRequest pod;
  ContainerRequest c;
  c.name = "main";
  c.num_gpus = 1;
  c.cores_percent = percent;
  c.mem_percent = percent;
  pod.containers.push_back(c);
  return pod;
}

std::vector<WeightedShape> OneShape(int32_t gpu_milli) {
  return {{TaskShape{0, gpu_milli, 1, ""}, 1.0}};
}

// Shape (1 GPU, 600). GPUs leftover [1000, 300]; pod 30 % (300 milli):
// on GPU 1 → [1000, 0]: F 300 → 0, ΔF = 300 → int(sigmoid(0.3) × 100) = 57 (GPU 0 would give 50).
TEST(FragmentationModel, ScoresTheSteepestDescentGpu) {
  const FragmentationModel model(OneShape(600));
  const NodeState node = TwoGpuNode(0, 70);
  EXPECT_DOUBLE_EQ(model.NodeFragment(node), 300.0);
  auto s = model.ScoreNode(SharingPod(30), 0, node);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->score, 57);
  ASSERT_EQ(s->fit.gpu_positions.size(), 1u);
  EXPECT_EQ(s->fit.gpu_positions[0], (std::vector<uint16_t>{1}));
  EXPECT_EQ(s->fit.grants[0][0].uuid, "GPU-1");
  EXPECT_EQ(s->fit.grants[0][0].cores_percent, 30);
}

// Shape (1 GPU, 500). Leftover [1000, 600]; pod 50 %: GPU 0 keeps F at 0 (score 50), GPU 1
// would leave 100 unusable (47). FGD takes GPU 0 where binpack would take the fuller GPU 1.
TEST(FragmentationModel, AvoidsTheGpuThatWouldStrandCapacity) {
  const FragmentationModel model(OneShape(500));
  auto s = model.ScoreNode(SharingPod(50), 0, TwoGpuNode(0, 40));
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->score, 50);
  EXPECT_EQ(s->fit.gpu_positions[0], (std::vector<uint16_t>{0}));
}

// FGD+CpuRoute on the scheduler's types: the same node as ScoresTheSteepestDescentGpu at
// scale 70 — int(sigmoid(0.3) × 70) = int(40.2) = 40 on GPU 1 (35 on GPU 0); the shape has no
// CPU, so r = 0, the CPU-free pod is not CPU-heavy: no route.
TEST(FragmentationModel, CpuRouteScoresAtScaleSeventy) {
  const FragmentationModel model(OneShape(600), PlacementPolicy::kFgdCpuRoute);
  auto s = model.ScoreNode(SharingPod(30), 0, TwoGpuNode(0, 70));
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->score, 40);
  EXPECT_EQ(s->fit.gpu_positions[0], (std::vector<uint16_t>{1}));
}

// FGD+CpuRoute+Crumb, the fragmentation-aware policy, on the scheduler's types (the keys of the
// simulator's ScoreNode: route 2 × 71, no crumb 71, FGD at scale 70). M = one shape of 600
// milli, so the crumb ceiling (the 1 % quantile of M's shares) is 600 and a crumb is a leftover
// in (100, 600). Leftover [1000, 300]: a 30 % pod on GPU 1 leaves 0 (full, no crumb): 40 + 71
// = 111. A 15 % pod: FGD takes GPU 1 (F 300 → 150, ΔF 150: int(sigmoid(0.15) × 70) = int(37.6)
// = 37; GPU 0 would leave F at 300: 35) and leaves 150 there, a crumb: 37 alone. A 50 % pod
// fits GPU 0 only and leaves 500 there, which the 600 shape cannot use (F 300 → 800, ΔF = −500:
// int(sigmoid(−0.5) × 70) = int(26.4) = 26) and which is a crumb too: 26 alone.
TEST(FragmentationModel, CrumbKeyBetweenTheRouteAndTheFgdScore) {
  ASSERT_EQ(kFragmentationAwarePolicy, PlacementPolicy::kFgdCpuRouteCrumb);
  const FragmentationModel model(OneShape(600), kFragmentationAwarePolicy);
  auto full = model.ScoreNode(SharingPod(30), 0, TwoGpuNode(0, 70));
  ASSERT_TRUE(full.ok()) << full.status().message();
  EXPECT_EQ(full->score, 111);
  EXPECT_EQ(full->fit.gpu_positions[0], (std::vector<uint16_t>{1}));
  auto crumb = model.ScoreNode(SharingPod(15), 0, TwoGpuNode(0, 70));
  ASSERT_TRUE(crumb.ok()) << crumb.status().message();
  EXPECT_EQ(crumb->score, 37);
  EXPECT_EQ(crumb->fit.gpu_positions[0], (std::vector<uint16_t>{1}));
  auto half = model.ScoreNode(SharingPod(50), 0, TwoGpuNode(0, 70));
  ASSERT_TRUE(half.ok()) << half.status().message();
  EXPECT_EQ(half->score, 26);
  EXPECT_EQ(half->fit.gpu_positions[0], (std::vector<uint16_t>{0}));
}

// Shape (2 vCPU, 1 GPU, 500): r = 2000 / 500 = 4 milli-CPU per milli-GPU. A 50 % pod with
// 3 vCPU is CPU-heavy (3000 > 4 × 500). Both GPUs free, so ΔF = 0 (score 35 at scale 70). On
// 8 vCPU the surplus after is (8000 − 3000) − 4 × (2000 − 500) = −1000: no route, 35; on
// 16 vCPU it is 13000 − 6000 = 7000 ≥ 0: routed, 35 + 71 = 106. With 1.5 vCPU the pod is
// CPU-light (1500 ≤ 2000): 35 on both.
TEST(FragmentationModel, CpuRouteAddsAboveEveryScoreWhereCpuIsSpare) {
  const FragmentationModel model({{TaskShape{2000, 500, 1, ""}, 1.0}},
                                 PlacementPolicy::kFgdCpuRoute);
  NodeState small = TwoGpuNode(0, 0);
  NodeState big = TwoGpuNode(0, 0);
  big.cpu_milli_total = 16000;
  EXPECT_EQ(model.ScoreNode(SharingPod(50), 3000, small)->score, 35);
  EXPECT_EQ(model.ScoreNode(SharingPod(50), 3000, big)->score, 106);
  EXPECT_EQ(model.ScoreNode(SharingPod(50), 1500, big)->score, 35);
  // Untracked node CPU (cpu_milli_total 0) always has CPU to spare.
  NodeState untracked = TwoGpuNode(0, 0);
  untracked.cpu_milli_total = 0;
  EXPECT_EQ(model.ScoreNode(SharingPod(50), 3000, untracked)->score, 106);
}

TEST(FragmentationModel, DoesNotFitIsResourceExhausted) {
  const FragmentationModel model(OneShape(500));
  auto s = model.ScoreNode(SharingPod(80), 0, TwoGpuNode(30, 30));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.status().message().find("CardInsufficient"), std::string::npos)
      << s.status().message();
}

TEST(ToFragNode, UnhealthyCordonedAndExhaustedGpus) {
  NodeState node = TwoGpuNode(20, 0);
  std::vector<std::string> types;
  FragNode f = ToFragNode(node, types);
  EXPECT_EQ(f.gpu_left[0], 800);
  EXPECT_EQ(f.gpu_left[1], 1000);
  EXPECT_EQ(types, (std::vector<std::string>{"NVIDIA Tesla T4"}));
  node.gpus[1].info.health = false;
  node.gpus[0].used = node.gpus[0].info.count;  // every slice taken
  types.clear();
  f = ToFragNode(node, types);
  EXPECT_EQ(f.gpu_left[1], 0);  // unhealthy: nothing left to count
  // Exhausted: its 800 left is fragment for every shape (no shape allows its type).
  EXPECT_EQ(ShapeFragment(f, FragDemand{0, 0, 1, 100, 0b1}), 800);
  EXPECT_EQ(f.cpu_left, 8000);
}

}  // namespace
}  // namespace fracgpu::core
