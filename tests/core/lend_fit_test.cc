// Lending (issue 36 item 2, docs/reclaim.md "Lending"): a GPU's lent memory is room for a
// borrower pod only (fracgpu.io/borrower: "true"), only while the node's lent-memory record is
// fresh at FitOptions::now_unix, and never beyond what is lent; the model reads the record from
// the node annotation and reports borrowers' memory. Values worked by hand in the comments.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../support/fit_fixtures.h"
#include "core/cluster_state.h"
#include "core/codec.h"
#include "core/fit.h"
#include "core/lent.h"
#include "core/request.h"

namespace fracgpu::core {
namespace {

using testsupport::Ctr;
using testsupport::Pod;

constexpr int64_t kNow = 1764921600;

// One 16384 MiB GPU "GPU-0" with 12288 MiB promised (the parked owner's slice), lending 8192
// MiB under a record written at `lent_at`.
NodeState LendingNode(int64_t lent_at = kNow - 30, int64_t lent = 8192) {
  GpuState g;
  g.info.uuid = "GPU-0";
  g.info.devmem_mib = 16384;
  g.used = 1;
  g.used_mem_mib = 12288;
  g.used_cores = 0;
  NodeState n = testsupport::Node({g});
  n.lent_mib = {static_cast<int32_t>(lent)};
  n.lent_at_unix = lent_at;
  return n;
}

PodRequest Asking(int64_t mem, bool borrower, int32_t containers = 1) {
  std::vector<ContainerRequest> cs;
  for (int32_t i = 0; i < containers; ++i) cs.push_back(Ctr(1, mem, 0));
  PodRequest p = Pod(cs);
  p.borrower = borrower;
  return p;
}

FitOptions At(int64_t now) {
  FitOptions o;
  o.now_unix = now;
  return o;
}

// Free for an ordinary pod: 16384 - 12288 = 4096. For a borrower: 4096 + 8192 = 12288.
TEST(LendFit, BorrowerFitsOnLentMemoryAndAnOrdinaryPodDoesNot) {
  const NodeState node = LendingNode();
  EXPECT_TRUE(Fits(Asking(12288, true), node, At(kNow)));
  EXPECT_TRUE(Fit(Asking(12288, true), node, At(kNow)).fits);
  EXPECT_FALSE(Fits(Asking(12288, false), node, At(kNow)));
  EXPECT_TRUE(Fits(Asking(4096, false), node, At(kNow)));
  EXPECT_FALSE(Fits(Asking(4097, false), node, At(kNow)));
  const FitResult r = Fit(Asking(12288, true), node, At(kNow));
  ASSERT_EQ(r.grants.size(), 1u);
  ASSERT_EQ(r.grants[0].size(), 1u);
  EXPECT_EQ(r.grants[0][0].mem_mib, 12288);
}

TEST(LendFit, BorrowerDoesNotFitBeyondWhatIsLent) {
  const NodeState node = LendingNode();
  EXPECT_FALSE(Fits(Asking(12289, true), node, At(kNow)));
  const FitResult r = Fit(Asking(12289, true), node, At(kNow));
  EXPECT_FALSE(r.fits);
  EXPECT_EQ(r.summary, "1/1 CardInsufficientMemory");
  // Two app containers of 6144 (12288 in all) fit; of 6145 they do not (the ordered path).
  EXPECT_TRUE(Fits(Asking(6144, true, 2), node, At(kNow)));
  EXPECT_TRUE(Fit(Asking(6144, true, 2), node, At(kNow)).fits);
  EXPECT_FALSE(Fits(Asking(6145, true, 2), node, At(kNow)));
  EXPECT_FALSE(Fit(Asking(6145, true, 2), node, At(kNow)).fits);
}

TEST(LendFit, AStaleOrMissingRecordLendsNothing) {
  // Written 91 s ago: stale (kLentFreshSeconds 90); 90 s ago: still fresh.
  EXPECT_FALSE(Fits(Asking(8192, true), LendingNode(kNow - 91), At(kNow)));
  EXPECT_FALSE(Fit(Asking(8192, true), LendingNode(kNow - 91), At(kNow)).fits);
  EXPECT_TRUE(Fits(Asking(8192, true), LendingNode(kNow - 90), At(kNow)));
  // Far in the future (a node clock 91 s ahead): not trusted either.
  EXPECT_FALSE(Fits(Asking(8192, true), LendingNode(kNow + 91), At(kNow)));
  // No record, or no clock given (FitOptions::now_unix 0): nothing lent.
  EXPECT_FALSE(Fits(Asking(8192, true), LendingNode(0), At(kNow)));
  EXPECT_FALSE(Fits(Asking(8192, true), LendingNode(), FitOptions{}));
  // What is not lent still fits a borrower as any pod.
  EXPECT_TRUE(Fits(Asking(4096, true), LendingNode(kNow - 91), At(kNow)));
}

TEST(LendFit, BorrowersHoldingLentMemoryLeaveNoRoomForOrdinaryPods) {
  NodeState node = LendingNode();
  node.gpus[0].used = 2;
  node.gpus[0].used_mem_mib = 12288 + 10000;  // a borrower holds 10000: 5904 over capacity
  EXPECT_FALSE(Fits(Asking(1, false), node, At(kNow)));
  EXPECT_TRUE(Fits(Asking(2288, true), node, At(kNow)));  // 16384 + 8192 - 22288
  EXPECT_FALSE(Fits(Asking(2289, true), node, At(kNow)));
}

TEST(LendFit, APercentageIsOfTheCardNotOfWhatItLends) {
  // 50 % of the card is 8192 MiB (not 50 % of 24576): fits in 12288 for a borrower only.
  PodRequest half = Pod({Ctr(1, 0, 0, false, 50)});
  half.borrower = true;
  const FitResult r = Fit(half, LendingNode(), At(kNow));
  ASSERT_TRUE(r.fits);
  EXPECT_EQ(r.grants[0][0].mem_mib, 8192);
  half.borrower = false;
  EXPECT_FALSE(Fits(half, LendingNode(), At(kNow)));
}

TEST(LendFit, TheSummaryNeverDecidesForABorrower) {
  EXPECT_TRUE(SummaryDecides(Asking(1, false)));
  EXPECT_FALSE(SummaryDecides(Asking(1, true)));
  EXPECT_FALSE(FitsBySummary(Asking(1, true), SummarizeForFit(LendingNode())));
}

TEST(LendFit, OnlyTheExactValueTrueMakesABorrower) {
  auto parse = [](const char* value) {
    nlohmann::json pod = {
        {"metadata", {{"annotations", {{kAnnotationBorrower, value}}}}},
        {"spec",
         {{"containers",
           {{{"name", "a"},
             {"resources",
              {{"limits", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}}}}}}}}}};
    return ParsePodRequest(pod);
  };
  auto yes = parse("true");
  ASSERT_TRUE(yes.ok()) << yes.status().ToString();
  EXPECT_TRUE(yes->borrower);
  EXPECT_TRUE(yes->warnings.empty());
  auto no = parse("false");
  ASSERT_TRUE(no.ok());
  EXPECT_FALSE(no->borrower);
  EXPECT_TRUE(no->warnings.empty());
  auto odd = parse("True");
  ASSERT_TRUE(odd.ok());
  EXPECT_FALSE(odd->borrower);
  ASSERT_EQ(odd->warnings.size(), 1u);
  EXPECT_EQ(odd->warnings[0],
            "annotation fracgpu.io/borrower \"True\" is neither \"true\" nor \"false\"; the pod "
            "is not a borrower");
}

// ---- the model (core::ClusterState) ----

NodeObject TwoGpus() {
  DeviceInfo a;
  a.uuid = "GPU-0";
  a.devmem_mib = 16384;
  DeviceInfo b = a;
  b.uuid = "GPU-1";
  b.index = 1;
  NodeObject n;
  n.name = "n1";
  n.node_register = EncodeNodeRegister({a, b});
  n.allocatable_gpus = 2;
  return n;
}

PodObject Holding(const std::string& uid, const PodGrants& grants, bool borrower) {
  PodObject p;
  p.key = "default/" + uid;
  p.uid = uid;
  p.phase = "Running";
  p.node_name = "n1";
  p.vgpu_node = "n1";
  p.allocated = EncodePodGrants(grants);
  p.asks_for_gpu = true;
  p.borrower = borrower;
  return p;
}

TEST(LendClusterState, TheRecordSetsLentMemoryOfTheGpusItNames) {
  ClusterState s;
  NodeObject n = TwoGpus();
  // GPU-9 is not registered on the node: ignored.
  n.lent_memory = "1764921600;GPU-1:4096,GPU-9:100";
  ASSERT_TRUE(s.UpsertNode(n).ok());
  const NodeState* node = s.FindNode("n1");
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->lent_at_unix, 1764921600);
  ASSERT_EQ(node->gpus.size(), 2u);
  EXPECT_EQ(node->LentMib(0), 0);
  EXPECT_EQ(node->LentMib(1), 4096);
  // A pod arriving re-applies usage; the record stays.
  ASSERT_TRUE(s.UpsertPod(Holding("o", {{DeviceGrant{"GPU-1", "NVIDIA", 16384, 0}}}, false)).ok());
  node = s.FindNode("n1");
  EXPECT_EQ(node->LentMib(1), 4096);
  EXPECT_EQ(node->gpus[1].used_mem_mib, 16384);
  // The record removed: nothing lent.
  n.lent_memory.reset();
  ASSERT_TRUE(s.UpsertNode(n).ok());
  node = s.FindNode("n1");
  EXPECT_EQ(node->lent_at_unix, 0);
  EXPECT_EQ(node->LentMib(1), 0);
}

TEST(LendClusterState, AnUnreadableRecordLendsNothingAndTheNodeStillCounts) {
  ClusterState s;
  NodeObject n = TwoGpus();
  n.lent_memory = "1764921600;GPU-1:4096,GPU-1:1";
  Status st = s.UpsertNode(n);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "node n1: annotation fracgpu.io/lent-memory (nothing lent): gpu 1: uuid \"GPU-1\" is "
            "listed twice");
  const NodeState* node = s.FindNode("n1");
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->lent_at_unix, 0);
  EXPECT_EQ(node->LentMib(1), 0);
}

TEST(LendClusterState, BorrowedMemoryIsWhatBorrowerPodsHoldPerGpu) {
  ClusterState s;
  ASSERT_TRUE(s.UpsertNode(TwoGpus()).ok());
  ASSERT_TRUE(
      s.UpsertPod(Holding("owner", {{DeviceGrant{"GPU-1", "NVIDIA", 12288, 0}}}, false)).ok());
  ASSERT_TRUE(s.UpsertPod(Holding("b1", {{DeviceGrant{"GPU-1", "NVIDIA", 3000, 0}}}, true)).ok());
  // Two app containers on GPU-1 and GPU-0: 2000 + 1000 on GPU-1, 500 on GPU-0.
  ASSERT_TRUE(s.UpsertPod(Holding("b2",
                                  {{DeviceGrant{"GPU-1", "NVIDIA", 2000, 0},
                                    DeviceGrant{"GPU-0", "NVIDIA", 500, 0}},
                                   {DeviceGrant{"GPU-1", "NVIDIA", 1000, 0}}},
                                  true))
                  .ok());
  const std::map<std::string, int64_t> want = {{"GPU-0", 500}, {"GPU-1", 6000}};
  EXPECT_EQ(s.BorrowedMib(), want);
  // A borrower's grant is ordinary usage: 12288 + 3000 + 3000 on GPU-1.
  EXPECT_EQ(s.FindNode("n1")->gpus[1].used_mem_mib, 18288);
  // Assume keeps the flag.
  PodAllocation a;
  a.key = "default/b3";
  a.uid = "b3";
  a.node = "n1";
  a.grants = {{DeviceGrant{"GPU-0", "NVIDIA", 100, 0}}};
  a.borrower = true;
  ASSERT_TRUE(s.Assume(a).ok());
  EXPECT_EQ(s.BorrowedMib().at("GPU-0"), 600);
  s.Forget("b1");
  EXPECT_EQ(s.BorrowedMib().at("GPU-1"), 3000);
}

}  // namespace
}  // namespace fracgpu::core
