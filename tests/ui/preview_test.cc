// The UI's fit preview picks, on each node, the GPUs /bind would pick (scheduler::FitForBind):
// the same target workload and the same fragmentation-aware fit (core/bind_choice.h), so a
// notebook's preview and its placement agree. The preview reads a core::ClusterState, /bind the
// scheduler's locked ClusterState, both fed the same node and allocation.
#include <gtest/gtest.h>

#include <map>

#include "../support/gpu_fixtures.h"
#include "core/codec.h"
#include "k8s/gpu_objects.h"
#include "scheduler/gpu_choice.h"
#include "ui/cluster.h"

namespace fracgpu::ui {
namespace {

using nlohmann::json;

using testsupport::Sharing;
using testsupport::TwoGpuNode;

class PreviewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto state = std::make_shared<core::ClusterState>();
    node_ = TwoGpuNode();
    ASSERT_TRUE(state->UpsertNode(k8s::NodeObjectOf(node_, "nvidia.com/gpu")).ok());
    ASSERT_TRUE(bind_state_.UpsertNode(node_).ok());
    // GPU-0 holds 70 % of its SMs (and 70 % of its memory); GPU-1 is idle.
    scheduler::PodAllocation a;
    a.key = "default/a";
    a.uid = "a";
    a.node = "n1";
    a.grants = {{core::DeviceGrant{"GPU-0", "NVIDIA", 16384 * 70 / 100, 70}}};
    ASSERT_TRUE(state->Assume(a).ok());
    ASSERT_TRUE(bind_state_.Assume(a).ok());
    state_ = state;
    snapshot_.state = state_;
    snapshot_.nodes = {node_};
  }
  // The GPUs the preview shows for node n1.
  std::vector<std::string> PreviewGpus(const core::PodRequest& req,
                                       core::GpuPolicy cluster_default) {
    core::FitOptions options;
    options.default_gpu_policy = cluster_default;
    json preview = FitPreviewJson(req, snapshot_, options);
    EXPECT_EQ(preview["per_node"].size(), 1u) << preview.dump();
    return preview["per_node"][0]["gpus"].get<std::vector<std::string>>();
  }
  // The GPUs /bind picks for the same pod on n1.
  std::vector<std::string> BindGpus(const core::PodRequest& req, core::GpuPolicy cluster_default) {
    auto node = bind_state_.Node("n1");
    EXPECT_TRUE(node.has_value());
    core::FitResult fit = scheduler::FitForBind(req, *node, bind_state_, cluster_default);
    EXPECT_TRUE(fit.fits) << fit.summary;
    std::vector<std::string> out;
    for (const auto& cg : fit.grants) {
      for (const auto& g : cg) out.push_back(g.uuid);
    }
    return out;
  }
  // n1 renamed n2, its GPUs' UUIDs prefixed "n2-" (two idle T4s).
  json SecondNode() const {
    json n2 = node_;
    n2["metadata"]["name"] = "n2";
    auto devices = core::DecodeNodeRegister(
        n2["metadata"]["annotations"][core::kAnnotationNodeRegister].get<std::string>());
    EXPECT_TRUE(devices.ok());
    if (!devices.ok()) return n2;
    for (auto& d : *devices) d.uuid = "n2-" + d.uuid;
    n2["metadata"]["annotations"][core::kAnnotationNodeRegister] =
        core::EncodeNodeRegister(*devices);
    return n2;
  }
  json node_;
  std::shared_ptr<const core::ClusterState> state_;  // what the preview reads
  scheduler::ClusterState bind_state_;               // what /bind reads
  ClusterSnapshot snapshot_;
};

TEST_F(PreviewTest, FragmentationAwareDefaultShowsTheGpuBindChooses) {
  // Worked by hand (tests/scheduler/gpu_choice_test.cc): with M = {700: 0.5, 300: 0.5} a 30 %
  // pod on GPU-0 leaves (0, 1000), F = 0; on GPU-1 it leaves (300, 700), F = 150. FGD takes
  // GPU-0; the spread order (the preview's choice before it shared /bind's path) takes GPU-1.
  EXPECT_EQ(PreviewGpus(Sharing(30), core::GpuPolicy::kFragmentationAware),
            std::vector<std::string>{"GPU-0"});
  EXPECT_EQ(BindGpus(Sharing(30), core::GpuPolicy::kFragmentationAware),
            std::vector<std::string>{"GPU-0"});
}

TEST_F(PreviewTest, ThePodsOwnPolicyWinsInThePreviewAsAtBind) {
  core::PodRequest fa = Sharing(30);
  fa.gpu_policy = core::GpuPolicy::kFragmentationAware;
  EXPECT_EQ(PreviewGpus(fa, core::GpuPolicy::kSpread), std::vector<std::string>{"GPU-0"});
  core::PodRequest spread = Sharing(30);
  spread.gpu_policy = core::GpuPolicy::kSpread;
  EXPECT_EQ(PreviewGpus(spread, core::GpuPolicy::kFragmentationAware),
            std::vector<std::string>{"GPU-1"});
  EXPECT_EQ(BindGpus(spread, core::GpuPolicy::kFragmentationAware),
            std::vector<std::string>{"GPU-1"});
}

TEST_F(PreviewTest, EveryPolicyAgreesWithBindOverManyShares) {
  for (core::GpuPolicy policy : {core::GpuPolicy::kSpread, core::GpuPolicy::kBinpack,
                                 core::GpuPolicy::kFragmentationAware}) {
    for (int32_t cores : {5, 10, 25, 30, 31, 50}) {
      EXPECT_EQ(PreviewGpus(Sharing(cores), policy), BindGpus(Sharing(cores), policy))
          << "policy " << static_cast<int>(policy) << " cores " << cores;
    }
  }
}

TEST_F(PreviewTest, FragmentationAwarePreviewShowsThePrioritizeScores) {
  // A second node n2 with two idle T4s. M = {700: 0.5, 300: 0.5}; F = Σ p_m × the leftovers
  // of the GPUs that cannot host m. n1 before: GPU-0's 300 cannot host 700, F = 150; after
  // the 30 % pod on GPU-0, F = 0: ΔF = +150, int(sigmoid(0.15) × 100) = 53. n2: F = 0 before
  // and after (700 left hosts both shapes): 50. So n1 gets 10, n2 0, as /prioritize says.
  json n2 = SecondNode();
  auto state = std::make_shared<core::ClusterState>(*state_);
  ASSERT_TRUE(state->UpsertNode(k8s::NodeObjectOf(n2, "nvidia.com/gpu")).ok());
  ASSERT_TRUE(bind_state_.UpsertNode(n2).ok());
  snapshot_.state = state;
  snapshot_.nodes = {node_, n2};

  core::FitOptions options;
  options.default_gpu_policy = core::GpuPolicy::kFragmentationAware;
  json preview = FitPreviewJson(Sharing(30), snapshot_, options);
  ASSERT_EQ(preview["per_node"].size(), 2u) << preview.dump();
  std::map<std::string, int64_t> shown;
  for (const auto& e : preview["per_node"]) shown[e["node"]] = e.value("priority", int64_t{-1});
  EXPECT_EQ(shown, (std::map<std::string, int64_t>{{"n1", 10}, {"n2", 0}}));
  auto scored = bind_state_.Locked([&](const scheduler::ClusterState::View& v) {
    return core::FragmentationAwarePriorities(Sharing(30), {"n1", "n2"}, v.model(),
                                              core::GpuPolicy::kFragmentationAware);
  });
  ASSERT_TRUE(scored.has_value());
  EXPECT_EQ(*scored, (std::vector<int64_t>{10, 0}));
  // Spread reads no workload: no priority in the preview.
  options.default_gpu_policy = core::GpuPolicy::kSpread;
  EXPECT_FALSE(FitPreviewJson(Sharing(30), snapshot_, options)["per_node"][0].contains("priority"));
}

TEST_F(PreviewTest, ThePodsCpuRequestSteersThePreviewAsItSteersPrioritize) {
  // FGD+CpuRoute (issue 34 item 7) reads the pod's CPU request and each node's allocatable CPU
  // minus its pods' requests. n1 has 4 CPUs, n2 64, both with two T4s (n1's GPU-0 at 70 %).
  // By hand, M = {700 with 0 CPU: 0.5, 300 with 3000m: 0.5}: 3 milli-CPU per milli-GPU, and the
  // 3000m pod is CPU-heavy (3000 > 3 × 300). On n1 it would leave 4000 − 3000 = 1000m for
  // 1000 milli-GPU still free (3000m needed): no route. On n2 it leaves 61000m for 1700 (5100m
  // needed): routed there, +71. So with its CPU the pod goes to n2; with CPU 0 (the preview
  // before it read the CPU) it went to n1 (FragmentationAwarePreviewShowsThePrioritizeScores).
  json n1 = node_;
  n1["status"]["allocatable"]["cpu"] = "4";
  json n2 = SecondNode();
  n2["status"]["allocatable"]["cpu"] = "64";
  auto state = std::make_shared<core::ClusterState>(*state_);
  ASSERT_TRUE(state->UpsertNode(k8s::NodeObjectOf(n1, "nvidia.com/gpu")).ok());
  ASSERT_TRUE(state->UpsertNode(k8s::NodeObjectOf(n2, "nvidia.com/gpu")).ok());
  ASSERT_TRUE(bind_state_.UpsertNode(n1).ok());
  ASSERT_TRUE(bind_state_.UpsertNode(n2).ok());
  snapshot_.state = state;
  snapshot_.nodes = {n1, n2};

  core::FitOptions options;
  options.default_gpu_policy = core::GpuPolicy::kFragmentationAware;
  auto shown = [&](int64_t cpu_milli) {
    std::map<std::string, int64_t> out;
    const json preview = FitPreviewJson(Sharing(30), snapshot_, options, cpu_milli);
    for (const auto& e : preview["per_node"]) out[e["node"]] = e.value("priority", int64_t{-1});
    return out;
  };
  EXPECT_EQ(shown(3000), (std::map<std::string, int64_t>{{"n1", 0}, {"n2", 10}}));
  EXPECT_EQ(shown(0), (std::map<std::string, int64_t>{{"n1", 10}, {"n2", 0}}));
  // /prioritize gives the same, from the same inputs.
  core::FragmentationInputs inputs;
  inputs.pod_cpu_milli = 3000;
  auto scored = bind_state_.Locked([&](const scheduler::ClusterState::View& v) {
    return core::FragmentationAwarePriorities(Sharing(30), {"n1", "n2"}, v.model(),
                                              core::GpuPolicy::kFragmentationAware, inputs);
  });
  ASSERT_TRUE(scored.has_value());
  EXPECT_EQ(*scored, (std::vector<int64_t>{0, 10}));
}

}  // namespace
}  // namespace fracgpu::ui
