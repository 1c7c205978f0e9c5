// core/bind_choice.h: the target workload of a cluster's allocations and the bind-time GPU
// choice over a core::ClusterState (the code /bind and the UI's preview share). The scheduler's
// locked adapter over the same functions is tested in tests/scheduler/gpu_choice_test.cc.
#include "core/bind_choice.h"

#include <gtest/gtest.h>

#include "../support/gpu_fixtures.h"
#include "core/annotations.h"
#include "core/codec.h"

namespace fracgpu::core {
namespace {

PodAllocation Holding(const std::string& uid, int32_t cores, const std::string& gpu) {
  PodAllocation a;
  a.key = "default/" + uid;
  a.uid = uid;
  a.node = "n1";
  a.grants = {{DeviceGrant{gpu, "NVIDIA", 16384 * cores / 100, cores}}};
  return a;
}

using testsupport::Sharing;

TEST(TargetWorkloadTest, CountsRunningSharesAndTheIncomingPod) {
  // Shapes 700×1 (running) and 300×1 (incoming), one pod each: both are needed to cover 95 %,
  // ties ordered by the shape tuple descending (docs/design/fgd-evaluation.md §3 point 4).
  auto m = TargetWorkload({Holding("a", 70, "GPU-0")}, Sharing(30));
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].shape.gpu_milli, 700);
  EXPECT_EQ(m[1].shape.gpu_milli, 300);
  EXPECT_DOUBLE_EQ(m[0].popularity, 0.5);
  EXPECT_DOUBLE_EQ(m[1].popularity, 0.5);
}

TEST(TargetWorkloadTest, MemoryOnlySlicesAreNotShapes) {
  EXPECT_TRUE(TargetWorkload({Holding("a", 0, "GPU-0")}, Sharing(0)).empty());
}

class CoreFitForBindTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // testsupport::TwoGpuNode's registration, read as k8s/gpu_objects.h would.
    NodeObject node;
    node.name = "n1";
    node.node_register =
        testsupport::TwoGpuNode()["metadata"]["annotations"][kAnnotationNodeRegister]
            .get<std::string>();
    node.allocatable_gpus = 20;
    ASSERT_TRUE(state_.UpsertNode(node).ok());
    // GPU-0 holds 70 % of its SMs: 300 milli-GPU left; GPU-1 is idle.
    ASSERT_TRUE(state_.Assume(Holding("a", 70, "GPU-0")).ok());
  }
  std::string Chosen(const PodRequest& req, GpuPolicy cluster_default) {
    auto node = state_.Node("n1");
    EXPECT_TRUE(node.has_value());
    FitResult fit = FitForBind(req, *node, state_, cluster_default);
    EXPECT_TRUE(fit.fits) << fit.summary;
    if (fit.grants.size() != 1 || fit.grants[0].size() != 1) return "";
    return fit.grants[0][0].uuid;
  }
  ClusterState state_;
};

TEST_F(CoreFitForBindTest, FragmentationAwareFillsTheGpuThePodCompletes) {
  // Worked by hand with M = {700: 0.5, 300: 0.5}: on GPU-0 the leftovers become (0, 1000) and
  // F = 0; on GPU-1 they become (300, 700): for m = 700, 300 < 700 counts, F = 0.5 × 300 = 150.
  EXPECT_EQ(Chosen(Sharing(30), GpuPolicy::kFragmentationAware), "GPU-0");
  EXPECT_EQ(BindWorkload(Sharing(30), state_, GpuPolicy::kFragmentationAware).size(), 2u);
}

TEST_F(CoreFitForBindTest, SpreadTakesTheLeastUsedGpuAndReadsNoWorkload) {
  EXPECT_EQ(Chosen(Sharing(30), GpuPolicy::kSpread), "GPU-1");
  EXPECT_TRUE(BindWorkload(Sharing(30), state_, GpuPolicy::kSpread).empty());
}

TEST_F(CoreFitForBindTest, ThePodsOwnPolicyWinsOverTheDefault) {
  PodRequest req = Sharing(30);
  req.gpu_policy = GpuPolicy::kFragmentationAware;
  EXPECT_EQ(Chosen(req, GpuPolicy::kSpread), "GPU-0");
}

// /prioritize for a fragmentation-aware pod: four one-GPU nodes (T4, 100 cores), leftovers a 500,
// b 1000 (idle), c 300, d 800 milli-GPU; the incoming pod asks for 50 %. Running shapes 500, 700,
// 200 and the incoming 500: M = {500: 0.5, 700: 0.25, 200: 0.25} (all three are needed for 95 %).
// F of one GPU with leftover L = Σ p_m · L over the m > L (docs/design/fgd-evaluation.md §3 point
// 5), score = int(sigmoid(ΔF / 1000) × 100), ΔF = F before − F after:
//   a: 125 → 0,   ΔF = +125, sigmoid(0.125)  = 0.5312 → 53
//   b: 0 → 125,   ΔF = −125, sigmoid(−0.125) = 0.4688 → 46
//   d: 0 → 225 (300 < 500 and < 700), ΔF = −225, sigmoid(−0.225) = 0.4440 → 44
//   c: 300 < 500, the pod does not fit → 0.
// round(9 × (s − 44) / (53 − 44)) over {53, 46, 44}: a 9, b 2, d 0; a, the only best, gets 10. The
// spread order would have put b first (the idle node): the FGD score prefers completing a.
class FragmentationPrioritiesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AddNode("a", 50, "shape-500");
    AddNode("b", 0, "");
    AddNode("c", 70, "shape-700");
    AddNode("d", 20, "shape-200");
  }
  void AddNode(const std::string& name, int32_t used, const std::string& pod) {
    DeviceInfo gpu;
    gpu.uuid = "GPU-" + name;
    gpu.count = 10;
    gpu.devmem_mib = 16384;
    gpu.devcore = 100;
    gpu.type = "NVIDIA-Tesla T4";
    NodeObject node;
    node.name = name;
    node.node_register = EncodeNodeRegister({gpu});
    node.allocatable_gpus = 10;
    ASSERT_TRUE(state_.UpsertNode(node).ok());
    if (pod.empty()) return;
    PodAllocation a = Holding(pod, used, gpu.uuid);
    a.node = name;
    ASSERT_TRUE(state_.Assume(a).ok());
  }
  ClusterState state_;
  const std::vector<std::string> names_{"a", "b", "c", "d", "not-a-node"};
};

TEST_F(FragmentationPrioritiesTest, TheNodeFgdChoosesScoresTen) {
  auto prio =
      FragmentationAwarePriorities(Sharing(50), names_, state_, GpuPolicy::kFragmentationAware);
  ASSERT_TRUE(prio.has_value());
  EXPECT_EQ(*prio, (std::vector<int64_t>{10, 2, 0, 0, 0}));
}

TEST_F(FragmentationPrioritiesTest, EqualBestScoresGoToTheFirstNodeByName) {
  // e is idle like b: both score 46, so both normalise to 9 and the first by name, b, gets 10
  // (a fixed order, as FGD breaks ties), whatever order the candidates come in.
  AddNode("e", 0, "");
  auto prio =
      FragmentationAwarePriorities(Sharing(50), {"e", "b"}, state_, GpuPolicy::kFragmentationAware);
  ASSERT_TRUE(prio.has_value());
  EXPECT_EQ(*prio, (std::vector<int64_t>{9, 10}));
}

TEST_F(FragmentationPrioritiesTest, OtherGpuPoliciesLeaveItToTheNodePolicy) {
  EXPECT_FALSE(FragmentationAwarePriorities(Sharing(50), names_, state_, GpuPolicy::kSpread));
  PodRequest own = Sharing(50);
  own.gpu_policy = GpuPolicy::kFragmentationAware;
  EXPECT_TRUE(FragmentationAwarePriorities(own, names_, state_, GpuPolicy::kSpread));
  // Memory-only slices are no shape of M: nothing to measure, the node policy decides.
  EXPECT_FALSE(FragmentationAwarePriorities(Sharing(0), {"b"}, ClusterState(),
                                            GpuPolicy::kFragmentationAware));
}

}  // namespace
}  // namespace fracgpu::core
