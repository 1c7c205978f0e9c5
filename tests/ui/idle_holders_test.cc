// The dashboard's idle holders (docs/ui.md "Idle holders", issue 36 item 4): GET /api/cluster
// shows per GPU the pods its node's fresh `fracgpu.io/idle-holders` record lists (count, MiB
// held, longest idle), and names a pod only to a viewer who may list notebooks in its
// namespace (the SubjectAccessReview "Your notebooks" asks); stale, future-dated beyond the
// window, or unreadable records show nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "core/annotations.h"
#include "ui_fixture.h"

namespace fracgpu::ui::uitest {
namespace {

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class UiIdleHoldersTest : public UiApiTest {
 protected:
  std::string Uid(const std::string& ns, const std::string& name) {
    auto pod = fake_.Get("pods", ns, name);
    return pod ? (*pod)["metadata"].value("uid", "") : "";
  }
  void SetRecord(const std::string& node, const std::string& value) {
    fake_.Patch("nodes", "", node,
                {{"metadata", {{"annotations", {{core::kAnnotationIdleHolders, value}}}}}});
  }
  // The idle holders of GPU `gpu` of node `node` (positions in the sorted answer) for `user`.
  json Holders(size_t node, size_t gpu, const std::string& user = "") {
    auto [status, c] = Get("/api/cluster", user);
    EXPECT_EQ(status, 200) << c.dump();
    return c["nodes"][node]["gpus"][gpu]["idle_holders"];
  }
  static json None() {
    return {{"count", 0}, {"held_mib", 0}, {"longest_idle_s", 0}, {"pods", json::array()}};
  }
};

TEST_F(UiIdleHoldersTest, FreshRecordsShowCountsToAllAndNamesOnlyToViewersOfTheNamespace) {
  const std::string train = Uid("team-b", "train"), infer = Uid("team-a", "infer");
  ASSERT_FALSE(train.empty());
  ASSERT_FALSE(infer.empty());
  EXPECT_EQ(Holders(0, 1), None());  // no record yet
  // Written 60 s ahead (clock skew within the window): idle times as written.
  const int64_t ahead = UnixNow() + 60;
  SetRecord("node-a", std::to_string(ahead) + ";" + train + ":GPU-a1:30720:3600,uid-gone:GPU-a1:" +
                          "2048:9000,uid-x:GPU-unknown:4096:50");
  SetRecord("node-b", std::to_string(ahead) + ";" + infer + ":GPU-b0:10000:7200");

  // Nobody signed in: counts, MiB and the longest idle time, no names. A pod no longer listed
  // (uid-gone: deleted, its region not yet removed) and a GPU the node does not register are
  // not shown.
  EXPECT_EQ(Holders(0, 0), None());
  EXPECT_EQ(
      Holders(0, 1),
      json({{"count", 1}, {"held_mib", 30720}, {"longest_idle_s", 3600}, {"pods", json::array()}}));
  EXPECT_EQ(
      Holders(1, 0),
      json({{"count", 1}, {"held_mib", 10000}, {"longest_idle_s", 7200}, {"pods", json::array()}}));
  EXPECT_TRUE(authz_.reviews().empty());  // no user, no review

  // alice may list notebooks in team-a: infer is named to her, train (team-b) is not.
  authz_.Allow("alice", "list", "team-a");
  EXPECT_EQ(
      Holders(1, 0, "alice")["pods"],
      json::array({{{"pod", "infer"}, {"namespace", "team-a"}, {"mib", 10000}, {"idle_s", 7200}}}));
  EXPECT_EQ(Holders(0, 1, "alice")["pods"], json::array());
  EXPECT_EQ(Holders(0, 1, "alice")["count"], 1);
  // One review per namespace of a listed holder, asked for alice, verb list.
  const auto reviews = authz_.reviews();
  ASSERT_GE(reviews.size(), 2u);
  std::set<std::string> asked;
  for (const json& r : reviews) {
    EXPECT_EQ(r["spec"]["user"], "alice");
    EXPECT_EQ(r["spec"]["resourceAttributes"]["verb"], "list");
    asked.insert(r["spec"]["resourceAttributes"]["namespace"].get<std::string>());
  }
  EXPECT_EQ(asked, (std::set<std::string>{"team-a", "team-b"}));
  // bob may see neither namespace.
  EXPECT_EQ(Holders(1, 0, "bob")["pods"], json::array());
  EXPECT_EQ(Holders(1, 0, "bob")["count"], 1);
  // bob's denials are cached (UiOptions::access_cache_ttl, 30 s): a grant shows after that.
  authz_.Allow("bob", "list", "team-b");
  EXPECT_EQ(Holders(0, 1, "bob")["pods"], json::array());
  Advance(std::chrono::seconds(30));
  EXPECT_EQ(
      Holders(0, 1, "bob")["pods"],
      json::array({{{"pod", "train"}, {"namespace", "team-b"}, {"mib", 30720}, {"idle_s", 3600}}}));
}

TEST_F(UiIdleHoldersTest, IdleTimesGrowFromTheRecordAndStaleOrBadRecordsShowNothing) {
  const std::string infer = Uid("team-a", "infer");
  // Written 100 s ago with 50 s idle: 150 s idle now (a second more if the clock ticks).
  SetRecord("node-b", std::to_string(UnixNow() - 100) + ";" + infer + ":GPU-b0:10000:50");
  const json h = Holders(1, 0);
  EXPECT_EQ(h["count"], 1);
  EXPECT_GE(h["longest_idle_s"].get<int64_t>(), 150);
  EXPECT_LE(h["longest_idle_s"].get<int64_t>(), 152);
  // Older than 180 s: the agent stopped; nothing shown.
  SetRecord("node-b", std::to_string(UnixNow() - 181) + ";" + infer + ":GPU-b0:10000:50");
  EXPECT_EQ(Holders(1, 0), None());
  // More than 180 s in the future: not shown either.
  SetRecord("node-b", std::to_string(UnixNow() + 240) + ";" + infer + ":GPU-b0:10000:50");
  EXPECT_EQ(Holders(1, 0), None());
  // A record that does not parse (anyone able to patch a node could write it): nothing shown,
  // the rest of the dashboard unchanged.
  SetRecord("node-b",
            std::to_string(UnixNow()) + ";" + infer + ":GPU-b0:10000:50," + infer + ":GPU-b0:1:1");
  auto [status, c] = Get("/api/cluster");
  ASSERT_EQ(status, 200);
  EXPECT_EQ(c["nodes"][1]["gpus"][0]["idle_holders"], None());
  EXPECT_EQ(c["nodes"][1]["gpus"][0]["used_mem_mib"], 10000);
}

// At most kMaxViewReviews reviews a request: holders in further namespaces stay unnamed
// (fail closed), and are still counted.
TEST_F(UiIdleHoldersTest, AtMostSixteenReviewsARequest) {
  std::string record = std::to_string(UnixNow()) + ";";
  for (int i = 0; i < 20; ++i) {
    const std::string ns = "ns-" + std::to_string(10 + i);  // sorted as written
    json pod = PlacedPod(ns, "p", "node-a", "GPU-a0,NVIDIA,1024,0:;");
    const std::string uid = fake_.Put("pods", pod)["metadata"].value("uid", "");
    ASSERT_FALSE(uid.empty());
    record += (i ? "," : "") + uid + ":GPU-a0:1024:60";
    authz_.Allow("alice", "list", ns);
  }
  SetRecord("node-a", record);
  const json h = Holders(0, 0, "alice");
  EXPECT_EQ(h["count"], 20);
  EXPECT_EQ(h["held_mib"], 20 * 1024);
  ASSERT_EQ(h["pods"].size(), kMaxViewReviews);
  EXPECT_EQ(h["pods"][0]["namespace"], "ns-10");
  EXPECT_EQ(h["pods"][15]["namespace"], "ns-25");
  EXPECT_EQ(authz_.reviews().size(), kMaxViewReviews);
}

// A header that did not come through the gateway names nobody, and no review is asked for it.
TEST_F(UiIdleHoldersTest, NoNamesWithoutTheGateway) {
  UiOptions options = Options();
  options.gateway_secret = "0123456789abcdef-gateway";
  StartUi(options);
  authz_.Allow("alice", "list", "team-a");
  SetRecord("node-b",
            std::to_string(UnixNow()) + ";" + Uid("team-a", "infer") + ":GPU-b0:10000:50");
  EXPECT_EQ(Holders(1, 0, "alice")["pods"], json::array());
  EXPECT_EQ(Holders(1, 0, "alice")["count"], 1);
  EXPECT_TRUE(authz_.reviews().empty());
  httplib::Headers through = {{"kubeflow-userid", "alice"},
                              {"x-fracgpu-gateway-secret", "0123456789abcdef-gateway"}};
  auto r = http_->Get("/api/cluster", through);
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["nodes"][1]["gpus"][0]["idle_holders"]["pods"][0]["pod"], "infer");
}

// --dashboard-only reads no identity: nobody is named, whatever the header says.
TEST_F(UiIdleHoldersTest, DashboardOnlyNamesNobody) {
  UiOptions options = Options();
  options.dashboard_only = true;
  StartUi(options);
  authz_.Allow("alice", "list", "team-a");
  SetRecord("node-b",
            std::to_string(UnixNow()) + ";" + Uid("team-a", "infer") + ":GPU-b0:10000:50");
  EXPECT_EQ(Holders(1, 0, "alice")["pods"], json::array());
  EXPECT_EQ(Holders(1, 0, "alice")["held_mib"], 10000);
  EXPECT_TRUE(authz_.reviews().empty());
}

}  // namespace
}  // namespace fracgpu::ui::uitest
