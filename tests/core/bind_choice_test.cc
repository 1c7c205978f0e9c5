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

}  // namespace
}  // namespace fracgpu::core
