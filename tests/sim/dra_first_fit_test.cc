// DRA-FirstFit (core::PlacementPolicy::kDraFirstFit): kube-scheduler's DRA structured
// allocator as a simulator baseline — the first feasible node, on it the first GPUs in slice
// (index) order with the capacity — on a hand-built cluster, and its row in `fracgpu simulate`.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/dra.h"
#include "core/fgd_policies.h"
#include "sim/cluster.h"

namespace fracgpu::cli {
void RegisterSimulateCommand(CLI::App& app);
}

namespace fracgpu::sim {
namespace {

namespace fs = std::filesystem;

TraceNode Node(std::string name, int32_t gpus) {
  TraceNode n;
  n.name = std::move(name);
  n.cpu_milli = 8000;
  n.memory_mib = 65536;
  n.gpus = gpus;
  n.model = "T4";
  return n;
}

core::FragDemand Demand(int32_t gpus, int32_t milli) {
  core::FragDemand d;
  d.cpu_milli = 1000;
  d.num_gpus = gpus;
  d.gpu_milli = milli;
  return d;
}

// Node "a": one GPU with 300 milli left; node "b": four GPUs with 200, 600, 1000, 500 left.
// By hand: a 500-milli share does not fit on "a"; on "b" the first GPU in order with ≥ 500
// left is GPU 1 (600), where BestFit takes the tightest, GPU 3 (500 left, exactly used up).
// A whole card: GPU 2 of "b", the only free one; two whole cards: nowhere.
class DraFirstFitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = BuildCluster({Node("a", 1), Node("b", 4)}, "n.csv");
    ASSERT_TRUE(c.ok()) << c.status().message();
    nodes_ = c->frag;
    ASSERT_EQ(nodes_.size(), 2u);
    nodes_[0].gpu_left = {300};
    nodes_[1].gpu_left = {200, 600, 1000, 500};
  }
  core::Placement Choose(core::PlacementPolicy policy, const core::FragDemand& d) {
    core::SeededRng rng(1, 2);
    // Neither policy here reads F_n(M) (the FGD family does): no fragment values, no workload.
    return core::ChooseNode(policy, nodes_, {}, d, workload_, rng);
  }

  std::vector<core::FragNode> nodes_;
  core::FragWorkload workload_;
};

TEST_F(DraFirstFitTest, FirstNodeThenFirstFittingGpu) {
  core::Placement p = Choose(core::PlacementPolicy::kDraFirstFit, Demand(1, 500));
  EXPECT_EQ(p.node, 1);
  ASSERT_EQ(p.pick.count, 1);
  EXPECT_EQ(p.pick.index[0], 1);
  core::Placement best = Choose(core::PlacementPolicy::kBestFit, Demand(1, 500));
  EXPECT_EQ(best.node, 1);
  ASSERT_EQ(best.pick.count, 1);
  EXPECT_EQ(best.pick.index[0], 3);  // the tightest: what first fit does not do

  // A 200-milli share fits on "a" (300 left), the first node: first fit stops there.
  p = Choose(core::PlacementPolicy::kDraFirstFit, Demand(1, 200));
  EXPECT_EQ(p.node, 0);
  EXPECT_EQ(p.pick.index[0], 0);

  p = Choose(core::PlacementPolicy::kDraFirstFit, Demand(1, 1000));
  EXPECT_EQ(p.node, 1);
  EXPECT_EQ(p.pick.index[0], 2);
  EXPECT_EQ(Choose(core::PlacementPolicy::kDraFirstFit, Demand(2, 1000)).node, -1);

  // Two 500-milli GPUs of one pod: distinct devices, GPUs 1 and 3 in order.
  p = Choose(core::PlacementPolicy::kDraFirstFit, Demand(2, 500));
  EXPECT_EQ(p.node, 1);
  ASSERT_EQ(p.pick.count, 2);
  EXPECT_EQ(p.pick.index[0], 1);
  EXPECT_EQ(p.pick.index[1], 2);  // GPU 2 (1000 left) comes before GPU 3 in slice order
}

// The pick is core::FirstFitDevices' (the allocator the DRA driver's tests use): the same
// devices with the same capacity on the device list built by hand.
TEST_F(DraFirstFitTest, SameAsCoreFirstFitDevices) {
  std::vector<core::DeviceUsage> usage(4);
  const int64_t left[] = {200, 600, 1000, 500};
  for (size_t g = 0; g < 4; ++g) {
    usage[g].multiple_allocations = true;
    usage[g].cores = {1000, true, 1000, 0, 1000, 1};
    usage[g].used_cores = 1000 - left[g];
  }
  core::ShareRequest r;
  r.count = 2;
  r.cores = 500;
  auto taken = core::FirstFitDevices(&usage, r);
  ASSERT_TRUE(taken.ok());
  ASSERT_EQ(taken->size(), 2u);
  EXPECT_EQ((*taken)[0].device, 1u);
  EXPECT_EQ((*taken)[1].device, 2u);
  EXPECT_EQ(usage[1].used_cores, 900);
  EXPECT_EQ(usage[2].used_cores, 500);
  const core::GpuPick pick = core::DraFirstFitPick(nodes_[1], Demand(2, 500));
  ASSERT_EQ(pick.count, 2);
  EXPECT_EQ(pick.index[0], 1);
  EXPECT_EQ(pick.index[1], 2);
  // Does not fit: usage unchanged.
  r.count = 3;
  r.cores = 600;
  EXPECT_EQ(core::FirstFitDevices(&usage, r).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(usage[3].used_cores, 500);
}

TEST(DraFirstFitNames, ParsesAndIsInAll) {
  auto p = core::ParsePlacementPolicy("dra-firstfit");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, core::PlacementPolicy::kDraFirstFit);
  EXPECT_STREQ(core::PlacementPolicyName(*p), "DRA-FirstFit");
  auto all = core::AllPlacementPolicies();
  EXPECT_NE(std::find(all.begin(), all.end(), core::PlacementPolicy::kDraFirstFit), all.end());
}

// `fracgpu simulate` prints a DRA-FirstFit row beside FGD. Six half-GPU pods on one node with
// two T4s, tuned to 1× capacity (four of them arrive): the four halves fill both cards whatever
// the order.
TEST(DraFirstFitSimulate, RowBesideFgd) {
  const fs::path dir = fs::path(::testing::TempDir()) / "dra_first_fit_simulate";
  fs::remove_all(dir);
  fs::create_directories(dir / "none");  // --expected: a directory without the paper's tables
  std::ofstream(dir / "nodes.csv") << "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,T4\n";
  std::ofstream pods(dir / "pods.csv");
  pods << "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";
  for (int i = 0; i < 6; ++i) pods << "p" << i << ",1000,1024,1,500\n";
  pods.close();
  CLI::App app;
  cli::RegisterSimulateCommand(app);
  std::vector<std::string> args = {"simulate",
                                   "--trace",
                                   (dir / "pods.csv").string(),
                                   "--nodes",
                                   (dir / "nodes.csv").string(),
                                   "--expected",
                                   (dir / "none").string(),
                                   "--policies",
                                   "FGD,DRA-FirstFit",
                                   "--seeds",
                                   "1",
                                   "--tune",
                                   "1",
                                   "--out",
                                   (dir / "out").string(),
                                   "-j",
                                   "1",
                                   "-q",
                                   "--no-bound"};
  std::vector<const char*> argv = {"fracgpu"};
  for (const auto& a : args) argv.push_back(a.c_str());
  ::testing::internal::CaptureStdout();
  int rc = 0;
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::Error& e) {
    rc = app.exit(e);
  }
  std::fflush(stdout);
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(rc, 0) << out;
  auto row = [&](const std::string& name) {
    const size_t at = out.find("\n" + name + " ");
    return at == std::string::npos ? std::string()
                                   : out.substr(at + 1, out.find('\n', at + 1) - at - 1);
  };
  const std::string fgd = row("FGD"), dra = row("DRA-FirstFit");
  ASSERT_FALSE(fgd.empty()) << out;
  ASSERT_FALSE(dra.empty()) << out;
  // @100 % arrived (3000 of 2000 milli arrived at the end; 100 % = 2000): both cards allocated.
  EXPECT_NE(dra.find(" 100.00 "), std::string::npos) << dra;
  EXPECT_NE(fgd.find(" 100.00 "), std::string::npos) << fgd;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace fracgpu::sim
