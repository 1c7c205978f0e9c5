// The borrowers of a GPU and their eviction when its parked owner wakes (issue 36 item 3,
// src/monitor/borrowers.h): which pods are borrowers of the GPU, which to evict for a given
// amount of memory, and the eviction itself through the fake API server's Eviction API.
#include "monitor/borrowers.h"

#include <gtest/gtest.h>

#include "core/annotations.h"
#include "core/codec.h"
#include "fake_apiserver.h"
#include "k8s/client.h"
#include "test_client.h"

namespace fracgpu::monitor {
namespace {

using nlohmann::json;

constexpr char kGpu[] = "GPU-11111111-1111-1111-1111-111111111111";
constexpr char kOther[] = "GPU-22222222-2222-2222-2222-222222222222";

// A pod of this node: `grants` per container as (uuid, MiB); `borrower` the annotation's value
// ("" = absent); `phase`; `created` its creationTimestamp.
json Pod(const std::string& name,
         const std::vector<std::vector<std::pair<std::string, int>>>& grants,
         const std::string& borrower = "true", const std::string& phase = "Running",
         const std::string& created = "2026-12-05T05:00:00Z") {
  core::PodGrants pg;
  for (const auto& c : grants) {
    core::ContainerGrants cg;
    for (const auto& [uuid, mib] : c) cg.push_back({uuid, "NVIDIA", mib, 0});
    pg.push_back(cg);
  }
  json p = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name},
        {"namespace", "batch"},
        {"uid", "uid-" + name},
        {"creationTimestamp", created},
        {"annotations", {{core::kAnnotationVgpuDevicesAllocated, core::EncodePodGrants(pg)}}}}},
      {"spec", {{"nodeName", "n1"}, {"containers", json::array()}}},
      {"status", {{"phase", phase}}}};
  if (!borrower.empty()) p["metadata"]["annotations"]["fracgpu.io/borrower"] = borrower;
  return p;
}

std::vector<std::string> Names(const std::vector<Borrower>& bs) {
  std::vector<std::string> out;
  for (const auto& b : bs) out.push_back(b.name);
  return out;
}

TEST(BorrowersOf, OnlyLiveBorrowersHoldingTheGpuWithWhatTheyHoldThere) {
  json terminating = Pod("terminating", {{{kGpu, 100}}});
  terminating["metadata"]["deletionTimestamp"] = "2026-12-05T05:01:00Z";
  json bad = Pod("bad-allocation", {{{kGpu, 100}}});
  bad["metadata"]["annotations"][core::kAnnotationVgpuDevicesAllocated] = "not,an;allocation";
  json list = {
      {"kind", "PodList"},
      {"items",
       {Pod("two-containers", {{{kGpu, 1000}}, {}, {{kGpu, 500}, {kOther, 700}}}),
        Pod("owner", {{{kGpu, 4000}}}, ""),                 // not a borrower
        Pod("opted-out", {{{kGpu, 100}}}, "false"),         // annotation not "true"
        Pod("elsewhere", {{{kOther, 2000}}}),               // another GPU
        Pod("done", {{{kGpu, 100}}}, "true", "Succeeded"),  // finished
        Pod("failed", {{{kGpu, 100}}}, "true", "Failed"),   // finished
        terminating, bad, Pod("lower-case", {{{"gpu-11111111-1111-1111-1111-111111111111", 300}}}),
        Pod("pending", {{{kGpu, 200}}}, "true", "Pending")}}};
  auto got = BorrowersOf(list, kGpu);
  EXPECT_EQ(Names(got), (std::vector<std::string>{"two-containers", "lower-case", "pending"}));
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].mib, 1500);  // both containers' grants on the GPU, not the other GPU's
  EXPECT_EQ(got[0].namespace_name, "batch");
  EXPECT_EQ(got[0].uid, "uid-two-containers");
  EXPECT_EQ(got[1].mib, 300);
  // The items array alone is read the same way; anything else gives nothing.
  EXPECT_EQ(Names(BorrowersOf(list["items"], kGpu)), Names(got));
  EXPECT_TRUE(BorrowersOf(json::object(), kGpu).empty());
  EXPECT_TRUE(BorrowersOf(json("items"), kGpu).empty());
  EXPECT_TRUE(BorrowersOf(json{{"items", json::array({1, "x", json::object()})}}, kGpu).empty());
}

TEST(ChooseEvictions, NewestFirstUntilTheNeedIsCovered) {
  std::vector<Borrower> bs = {{"batch", "old", "u1", "2026-12-05T01:00:00Z", 1000},
                              {"batch", "new", "u2", "2026-12-05T03:00:00Z", 600},
                              {"batch", "mid", "u3", "2026-12-05T02:00:00Z", 800}};
  EXPECT_TRUE(ChooseEvictions(bs, 0).empty());
  EXPECT_TRUE(ChooseEvictions(bs, -5).empty());
  EXPECT_EQ(Names(ChooseEvictions(bs, 1)), (std::vector<std::string>{"new"}));
  EXPECT_EQ(Names(ChooseEvictions(bs, 600)), (std::vector<std::string>{"new"}));
  EXPECT_EQ(Names(ChooseEvictions(bs, 601)), (std::vector<std::string>{"new", "mid"}));
  EXPECT_EQ(Names(ChooseEvictions(bs, 1400)), (std::vector<std::string>{"new", "mid"}));
  EXPECT_EQ(Names(ChooseEvictions(bs, 1401)), (std::vector<std::string>{"new", "mid", "old"}));
  // They hold 2,400 MiB together: all of them, and no more, when more is needed.
  EXPECT_EQ(ChooseEvictions(bs, 1 << 20).size(), 3u);
}

class EvictBorrowerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = fakes::NoRetryClient(api_.url());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(*c);
  }
  fakes::FakeApiServer api_;
  std::unique_ptr<k8s::Client> client_;
};

TEST_F(EvictBorrowerTest, EvictsThroughTheEvictionApiAndSaysWhyInAnEvent) {
  api_.Put("pods", Pod("borrower", {{{kGpu, 1500}}}));
  auto found = BorrowersOf(json::array({*api_.Get("pods", "batch", "borrower")}), kGpu);
  ASSERT_EQ(found.size(), 1u);
  const Borrower& b = found[0];
  Status st = EvictBorrower(*client_, b, "team-a/notebook", kGpu, "n1");
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_FALSE(api_.Get("pods", "batch", "borrower").has_value());
  EXPECT_EQ(api_.CountRequests("POST", "/api/v1/namespaces/batch/pods/borrower/eviction"), 1);
  // A bounded grace period, whatever the borrower's own terminationGracePeriodSeconds.
  json body;
  for (const auto& r : api_.Requests())
    if (r.method == "POST" && r.path.ends_with("/eviction")) body = json::parse(r.body);
  EXPECT_EQ(body["deleteOptions"]["gracePeriodSeconds"], kBorrowerGraceSeconds) << body.dump();
  EXPECT_EQ(body["deleteOptions"]["preconditions"]["uid"], "uid-borrower") << body.dump();
  EXPECT_EQ(api_.CountRequests("DELETE", "/api/v1/namespaces/batch/pods/borrower"), 0);
  auto events = api_.List("events");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["reason"], "GPUMemoryReclaimed");
  EXPECT_EQ(events[0]["type"], "Warning");
  EXPECT_EQ(events[0]["involvedObject"]["name"], "borrower");
  EXPECT_EQ(events[0]["involvedObject"]["uid"], "uid-borrower");
  const std::string message = events[0]["message"];
  EXPECT_NE(message.find("1500 MiB"), std::string::npos) << message;
  EXPECT_NE(message.find(kGpu), std::string::npos) << message;
  EXPECT_NE(message.find("node n1"), std::string::npos) << message;
  // The owner is another tenant's pod: the borrower's Event does not name it.
  EXPECT_EQ(message.find("team-a"), std::string::npos) << message;
  EXPECT_EQ(message.find("notebook"), std::string::npos) << message;
}

// Issue 36 review finding 5: a PodDisruptionBudget (HTTP 429 from the Eviction API) does not
// keep a borrower on the memory a woken owner needs: the pod is deleted, with the bounded grace.
TEST_F(EvictBorrowerTest, AnEvictionRefusedByADisruptionBudgetDeletesThePod) {
  api_.Put("pods", Pod("borrower", {{{kGpu, 1500}}}));
  api_.FailNext("POST", "/api/v1/namespaces/batch/pods/borrower/eviction", 429, 1,
                "Cannot evict pod as it would violate the pod's disruption budget.");
  Status st = EvictBorrower(*client_, {"batch", "borrower", "uid-borrower", "", 1500},
                            "team-a/notebook", kGpu, "n1");
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_FALSE(api_.Get("pods", "batch", "borrower").has_value());
  int deletes = 0;
  for (const auto& r : api_.Requests()) {
    if (r.method != "DELETE" || r.path != "/api/v1/namespaces/batch/pods/borrower") continue;
    ++deletes;
    EXPECT_EQ(r.query, "gracePeriodSeconds=" + std::to_string(kBorrowerGraceSeconds));
  }
  EXPECT_EQ(deletes, 1);
  ASSERT_EQ(api_.List("events").size(), 1u);
  EXPECT_EQ(api_.List("events")[0]["reason"], "GPUMemoryReclaimed");
}

TEST_F(EvictBorrowerTest, ARefusedEvictionDeletesNoRecreatedPodAndOtherErrorsDeleteNothing) {
  api_.Put("pods", Pod("borrower", {{{kGpu, 1500}}}));
  api_.FailNext("POST", "/api/v1/namespaces/batch/pods/borrower/eviction", 429);
  Status st = EvictBorrower(*client_, {"batch", "borrower", "uid-of-an-earlier-pod", "", 1500},
                            "team-a/notebook", kGpu, "n1");
  EXPECT_EQ(st.code(), StatusCode::kConflict) << st.ToString();
  EXPECT_TRUE(api_.Get("pods", "batch", "borrower").has_value());
  api_.FailNext("POST", "/api/v1/namespaces/batch/pods/borrower/eviction", 500);
  st = EvictBorrower(*client_, {"batch", "borrower", "uid-borrower", "", 1500}, "team-a/notebook",
                     kGpu, "n1");
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_TRUE(api_.Get("pods", "batch", "borrower").has_value());
  EXPECT_EQ(api_.CountRequests("DELETE", "/api/v1/namespaces/batch/pods/borrower"), 0);
  EXPECT_TRUE(api_.List("events").empty());
}

TEST_F(EvictBorrowerTest, ARecreatedPodOfTheSameNameIsNotEvicted) {
  api_.Put("pods", Pod("borrower", {{{kGpu, 1500}}}));
  Borrower stale{"batch", "borrower", "uid-of-an-earlier-pod", "", 1500};
  Status st = EvictBorrower(*client_, stale, "team-a/notebook", kGpu);
  EXPECT_EQ(st.code(), StatusCode::kConflict) << st.ToString();
  EXPECT_TRUE(api_.Get("pods", "batch", "borrower").has_value());
  EXPECT_TRUE(api_.List("events").empty());
}

TEST_F(EvictBorrowerTest, AGonePodIsNotFoundAndABadNameIsNeverSent) {
  Status st = EvictBorrower(*client_, {"batch", "gone", "u", "", 1}, "team-a/notebook", kGpu);
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.ToString();
  for (const Borrower& b :
       {Borrower{"batch", "a/../../nodes/n1", "", "", 1}, Borrower{"", "x", "", "", 1},
        Borrower{"batch", "x?dryRun=All", "", "", 1}, Borrower{"Batch", "x", "", "", 1}}) {
    st = EvictBorrower(*client_, b, "team-a/notebook", kGpu);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << b.namespace_name << "/" << b.name;
    EXPECT_NE(st.message().find(b.name), std::string::npos) << st.message();
  }
  EXPECT_EQ(api_.CountRequests("POST", "/api/v1/namespaces/batch/pods/a"), 0);
  EXPECT_EQ(api_.CountRequests("POST", "/api/v1/namespaces/Batch"), 0);
}

}  // namespace
}  // namespace fracgpu::monitor
