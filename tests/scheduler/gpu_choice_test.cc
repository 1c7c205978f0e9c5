// scheduler::FitForBind: core/bind_choice.h (tested in tests/core/bind_choice_test.cc, with
// core::TargetWorkload) over the scheduler's locked ClusterState.
#include "scheduler/gpu_choice.h"

#include <gtest/gtest.h>

#include "../support/gpu_fixtures.h"
#include "core/codec.h"

namespace fracgpu::scheduler {
namespace {

using nlohmann::json;

PodAllocation Holding(const std::string& uid, int32_t cores, const std::string& gpu) {
  PodAllocation a;
  a.key = "default/" + uid;
  a.uid = uid;
  a.node = "n1";
  a.grants = {{core::DeviceGrant{gpu, "NVIDIA", 16384 * cores / 100, cores}}};
  return a;
}

using testsupport::Sharing;
using testsupport::TwoGpuNode;

class FitForBindTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(state_.UpsertNode(TwoGpuNode()).ok());
    // GPU-0 holds 70 % of its SMs: 300 milli-GPU left; GPU-1 is idle.
    ASSERT_TRUE(state_.Assume(Holding("a", 70, "GPU-0")).ok());
  }
  ClusterState state_;
};

TEST_F(FitForBindTest, FragmentationAwareFillsTheGpuThePodCompletes) {
  // Worked by hand with M = {700: 0.5, 300: 0.5}: on GPU-0 the leftovers become (0, 1000) and
  // F = 0; on GPU-1 they become (300, 700): for m = 700, 300 < 700 counts, F = 0.5 × 300 = 150.
  // FGD chooses the GPU that adds the least fragmentation: GPU-0.
  auto node = state_.Node("n1");
  ASSERT_TRUE(node.has_value());
  core::FitResult fit =
      FitForBind(Sharing(30), *node, state_, core::GpuPolicy::kFragmentationAware);
  ASSERT_TRUE(fit.fits) << fit.summary;
  ASSERT_EQ(fit.grants.size(), 1u);
  ASSERT_EQ(fit.grants[0].size(), 1u);
  EXPECT_EQ(fit.grants[0][0].uuid, "GPU-0");
  EXPECT_EQ(fit.grants[0][0].cores_percent, 30);
}

TEST_F(FitForBindTest, SpreadTakesTheLeastUsedGpu) {
  auto node = state_.Node("n1");
  ASSERT_TRUE(node.has_value());
  core::FitResult fit = FitForBind(Sharing(30), *node, state_, core::GpuPolicy::kSpread);
  ASSERT_TRUE(fit.fits) << fit.summary;
  EXPECT_EQ(fit.grants[0][0].uuid, "GPU-1");
}

TEST_F(FitForBindTest, ThePodsOwnPolicyWinsOverTheDefault) {
  auto node = state_.Node("n1");
  ASSERT_TRUE(node.has_value());
  core::PodRequest req = Sharing(30);
  req.gpu_policy = core::GpuPolicy::kFragmentationAware;
  core::FitResult fit = FitForBind(req, *node, state_, core::GpuPolicy::kSpread);
  ASSERT_TRUE(fit.fits) << fit.summary;
  EXPECT_EQ(fit.grants[0][0].uuid, "GPU-0");
}

}  // namespace
}  // namespace fracgpu::scheduler
