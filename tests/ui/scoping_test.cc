// What a viewer sees of other namespaces on the dashboard (docs/ui.md "What a viewer sees of
// other namespaces"): GET /api/cluster names a slice's pod only to a viewer who may list
// notebooks in its namespace (the SubjectAccessReview "Your notebooks" asks), through the
// gateway and never in --dashboard-only; everyone else sees the slice's size and cores without
// pod or namespace, so the GPU's figures stay whole. The decisions are cached (AccessCache) for
// UiOptions::access_cache_ttl. Also AccessCache itself.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ui/access.h"
#include "ui_fixture.h"

namespace fracgpu::ui::uitest {
namespace {

// UiApiTest's cluster plus two pods on GPU-a1 beside team-b/train (30720 MiB, cores 0):
// team-a/nb (4096 MiB, 20 %) and team-c/etl (2048 MiB, cores 0). GPU-a1 then holds
// 30720 + 4096 + 2048 = 36864 MiB and 20 % cores; GPU-b0 holds team-a/infer (10000 MiB, 50 %).
class UiScopingTest : public UiApiTest {
 protected:
  void SetUp() override {
    UiApiTest::SetUp();
    fake_.Put("pods", PlacedPod("team-a", "nb", "node-a", "GPU-a1,NVIDIA,4096,20:;"));
    fake_.Put("pods", PlacedPod("team-c", "etl", "node-a", "GPU-a1,NVIDIA,2048,0:;"));
  }
  static json Named(const std::string& ns, const std::string& pod, int64_t mib, int64_t cores) {
    return {{"pod", pod}, {"namespace", ns}, {"mem_mib", mib}, {"cores", cores}};
  }
  static json Anonymous(int64_t mib, int64_t cores) {
    return {{"pod", nullptr}, {"namespace", nullptr}, {"mem_mib", mib}, {"cores", cores}};
  }
  // Every slice of the answer is anonymous, and per GPU the slices sum to its usage.
  static void ExpectNoNamesAndWholeFigures(const json& c) {
    for (const auto& n : c["nodes"]) {
      for (const auto& g : n["gpus"]) {
        int64_t mib = 0;
        for (const auto& s : g["slices"]) {
          EXPECT_TRUE(s["pod"].is_null()) << s.dump();
          EXPECT_TRUE(s["namespace"].is_null()) << s.dump();
          mib += s["mem_mib"].get<int64_t>();
        }
        EXPECT_EQ(mib, g["used_mem_mib"].get<int64_t>()) << g.dump();
      }
    }
    for (const char* name : {"team-a", "team-b", "team-c", "train", "infer", "etl", "\"nb\""})
      EXPECT_EQ(c.dump().find(name), std::string::npos) << name << " in " << c.dump();
  }
  json Cluster(const std::string& user = "") {
    auto [status, c] = Get("/api/cluster", user);
    EXPECT_EQ(status, 200) << c.dump();
    return c;
  }
};

TEST_F(UiScopingTest, AliceSeesTeamANamesOnlyAndEverySliceSize) {
  authz_.Allow("alice", "list", "team-a");
  authz_.Allow("alice", "create", "team-b");  // create is not list: team-b stays hidden
  const json c = Cluster("alice");
  const json& a1 = c["nodes"][0]["gpus"][1];
  EXPECT_EQ(a1["used_mem_mib"], 36864);
  EXPECT_EQ(a1["used_cores"], 20);
  EXPECT_EQ(a1["used"], 3);
  // Her slice by name; the other two without, largest first.
  EXPECT_EQ(a1["slices"], json::array({Named("team-a", "nb", 4096, 20), Anonymous(30720, 0),
                                       Anonymous(2048, 0)}));
  EXPECT_EQ(c["nodes"][1]["gpus"][0]["slices"], json::array({Named("team-a", "infer", 10000, 50)}));
  EXPECT_EQ(c["totals"]["used_mem_mib"], 36864 + 10000);
  for (const char* other : {"team-b", "team-c", "train", "etl"})
    EXPECT_EQ(c.dump().find(other), std::string::npos) << other << " in " << c.dump();
  // One review per namespace with a slice, for alice, verb list, group kubeflow.org.
  std::set<std::string> asked;
  for (const json& r : authz_.reviews()) {
    EXPECT_EQ(r["spec"]["user"], "alice");
    EXPECT_EQ(r["spec"]["resourceAttributes"]["verb"], "list");
    EXPECT_EQ(r["spec"]["resourceAttributes"]["resource"], "notebooks");
    EXPECT_EQ(r["spec"]["resourceAttributes"]["group"], "kubeflow.org");
    asked.insert(r["spec"]["resourceAttributes"]["namespace"].get<std::string>());
  }
  EXPECT_EQ(asked, (std::set<std::string>{"team-a", "team-b", "team-c"}));
  EXPECT_EQ(authz_.reviews().size(), 3u);
  // bob, allowed in team-c, sees etl and nothing of team-a.
  authz_.Allow("bob", "list", "team-c");
  EXPECT_EQ(
      Cluster("bob")["nodes"][0]["gpus"][1]["slices"],
      json::array({Named("team-c", "etl", 2048, 0), Anonymous(30720, 0), Anonymous(4096, 20)}));
}

TEST_F(UiScopingTest, NoUserHeaderNamesNobody) {
  authz_.Allow("alice", "list", "team-a");
  const json c = Cluster();
  ExpectNoNamesAndWholeFigures(c);
  EXPECT_EQ(c["nodes"][0]["gpus"][1]["slices"],
            json::array({Anonymous(30720, 0), Anonymous(4096, 20), Anonymous(2048, 0)}));
  EXPECT_TRUE(authz_.reviews().empty());
}

TEST_F(UiScopingTest, AHeaderNotFromTheGatewayNamesNobody) {
  UiOptions options;
  options.gateway_secret = "0123456789abcdef-gateway";
  StartUi(options);
  authz_.Allow("alice", "list", "team-a");
  ExpectNoNamesAndWholeFigures(Cluster("alice"));
  EXPECT_TRUE(authz_.reviews().empty());
  httplib::Headers through = {{"kubeflow-userid", "alice"},
                              {"x-fracgpu-gateway-secret", "0123456789abcdef-gateway"}};
  auto r = http_->Get("/api/cluster", through);
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["nodes"][1]["gpus"][0]["slices"],
            json::array({Named("team-a", "infer", 10000, 50)}));
}

TEST_F(UiScopingTest, DashboardOnlyNamesNobody) {
  UiOptions options;
  options.dashboard_only = true;
  StartUi(options);
  authz_.Allow("alice", "list", "team-a");
  ExpectNoNamesAndWholeFigures(Cluster("alice"));
  EXPECT_TRUE(authz_.reviews().empty());
}

// A review the API server cannot answer hides the namespace (fail closed); the failure is
// cached for access_cache_failed_ttl (5 s), then asked again.
TEST_F(UiScopingTest, AFailingReviewNamesNobodyAndIsAskedAgainAfterItsTtl) {
  authz_.Allow("alice", "list", "team-a");
  authz_.FailReviews(100);
  ExpectNoNamesAndWholeFigures(Cluster("alice"));
  EXPECT_EQ(authz_.reviews().size(), 3u);
  authz_.FailReviews(0);
  Advance(std::chrono::milliseconds(4999));
  ExpectNoNamesAndWholeFigures(Cluster("alice"));
  EXPECT_EQ(authz_.reviews().size(), 3u);  // still the cached failures
  Advance(std::chrono::milliseconds(1));
  EXPECT_EQ(Cluster("alice")["nodes"][1]["gpus"][0]["slices"],
            json::array({Named("team-a", "infer", 10000, 50)}));
  EXPECT_EQ(authz_.reviews().size(), 6u);
}

// The dashboard refreshes every 5 s: within access_cache_ttl (30 s) a viewer's decisions are
// reused, allowed and denied alike, and asked again after it; each user has their own.
TEST_F(UiScopingTest, DecisionsAreCachedForTheirTtl) {
  authz_.Allow("alice", "list", "team-a");
  const json first = Cluster("alice");
  EXPECT_EQ(authz_.reviews().size(), 3u);
  // A grant in team-b meanwhile is not seen before the denial expires.
  authz_.Allow("alice", "list", "team-b");
  for (int refresh = 1; refresh < 6; ++refresh) {
    Advance(std::chrono::seconds(5));  // 25 s after the first answer at the last one
    EXPECT_EQ(Cluster("alice"), first);
  }
  Advance(std::chrono::milliseconds(4999));
  EXPECT_EQ(Cluster("alice"), first);
  EXPECT_EQ(authz_.reviews().size(), 3u);  // no review since the first answer
  Advance(std::chrono::milliseconds(1));   // 30 s
  const json later = Cluster("alice");
  EXPECT_EQ(authz_.reviews().size(), 6u);
  EXPECT_EQ(later["nodes"][0]["gpus"][1]["slices"],
            json::array({Named("team-a", "nb", 4096, 20), Named("team-b", "train", 30720, 0),
                         Anonymous(2048, 0)}));
  // bob's decisions are his own: three reviews for him.
  Cluster("bob");
  EXPECT_EQ(authz_.reviews().size(), 9u);
  EXPECT_EQ(authz_.reviews().back()["spec"]["user"], "bob");
}

// At most kMaxViewReviews reviews a request; the cached decisions do not count, so the next
// refreshes decide the rest.
TEST_F(UiScopingTest, TheReviewCapIsPerRequestAndTheCacheFillsIn) {
  // ns-10 … ns-29 sort before team-a, team-b, team-c: 23 namespaces with a slice.
  for (int i = 0; i < 20; ++i) {
    const std::string ns = "ns-" + std::to_string(10 + i);
    fake_.Put("pods", PlacedPod(ns, "p", "node-a", "GPU-a0,NVIDIA,1024,0:;"));
    authz_.Allow("alice", "list", ns);
  }
  authz_.Allow("alice", "list", "team-c");
  auto named = [](const json& c) {
    std::set<std::string> out;
    for (const auto& n : c["nodes"]) {
      for (const auto& g : n["gpus"]) {
        for (const auto& s : g["slices"]) {
          if (!s["namespace"].is_null()) out.insert(s["namespace"].get<std::string>());
        }
      }
    }
    return out;
  };
  json c = Cluster("alice");
  EXPECT_EQ(authz_.reviews().size(), kMaxViewReviews);
  EXPECT_EQ(named(c).size(), kMaxViewReviews);  // ns-10 … ns-25
  EXPECT_EQ(c["nodes"][0]["gpus"][0]["used_mem_mib"], 20 * 1024);
  EXPECT_EQ(c["nodes"][0]["gpus"][0]["slices"].size(), 20u);
  c = Cluster("alice");
  EXPECT_EQ(authz_.reviews().size(), 23u);  // the 7 left
  std::set<std::string> want;
  for (int i = 0; i < 20; ++i) want.insert("ns-" + std::to_string(10 + i));
  want.insert("team-c");
  EXPECT_EQ(named(c), want);
  Cluster("alice");
  EXPECT_EQ(authz_.reviews().size(), 23u);
}

// ---------------------------------------------------------------- AccessCache

struct FakeClock {
  std::chrono::steady_clock::time_point now{std::chrono::seconds(100)};
  AccessCache::Clock Fn() {
    return [this] { return now; };
  }
};

TEST(AccessCacheTest, DecisionsLiveForTheirTtl) {
  FakeClock clock;
  AccessCache cache(std::chrono::seconds(30), std::chrono::seconds(5), 16, clock.Fn());
  const std::string allowed = AccessCache::Key("alice", {}, "team-a");
  const std::string denied = AccessCache::Key("alice", {}, "team-b");
  const std::string failed = AccessCache::Key("alice", {}, "team-c");
  EXPECT_EQ(cache.Find(allowed), std::nullopt);
  cache.Put(allowed, AccessDecision::kAllowed);
  cache.Put(denied, AccessDecision::kDenied);
  cache.Put(failed, AccessDecision::kFailed);
  clock.now += std::chrono::milliseconds(4999);
  EXPECT_EQ(cache.Find(failed), AccessDecision::kFailed);
  clock.now += std::chrono::milliseconds(1);
  EXPECT_EQ(cache.Find(failed), std::nullopt);
  EXPECT_EQ(cache.size(), 2u);  // dropped when met expired
  clock.now += std::chrono::milliseconds(24999);
  EXPECT_EQ(cache.Find(allowed), AccessDecision::kAllowed);
  EXPECT_EQ(cache.Find(denied), AccessDecision::kDenied);
  clock.now += std::chrono::milliseconds(1);
  EXPECT_EQ(cache.Find(allowed), std::nullopt);
  EXPECT_EQ(cache.Find(denied), std::nullopt);
  // A TTL of 0 caches nothing of that outcome.
  AccessCache no_failures(std::chrono::seconds(30), std::chrono::seconds(0), 16, clock.Fn());
  no_failures.Put(failed, AccessDecision::kFailed);
  EXPECT_EQ(no_failures.Find(failed), std::nullopt);
  EXPECT_EQ(no_failures.size(), 0u);
}

TEST(AccessCacheTest, KeysSeparateUserGroupsAndNamespace) {
  EXPECT_EQ(AccessCache::Key("alice", {"b", "a"}, "ns"),
            AccessCache::Key("alice", {"a", "b"}, "ns"));
  EXPECT_EQ(AccessCache::Key("alice", {"a", "a"}, "ns"), AccessCache::Key("alice", {"a"}, "ns"));
  std::set<std::string> distinct = {
      AccessCache::Key("alice", {}, "ns"),       AccessCache::Key("alice", {"g"}, "ns"),
      AccessCache::Key("alice", {}, "ns2"),      AccessCache::Key("bob", {}, "ns"),
      AccessCache::Key("alice,", {}, "ns"),      AccessCache::Key("alice", {"g", "h"}, "ns"),
      AccessCache::Key("alice", {"g,h"}, "ns2"),
  };
  EXPECT_EQ(distinct.size(), 7u);
}

TEST(AccessCacheTest, BoundedLeastRecentlyUsedGoesFirst) {
  FakeClock clock;
  AccessCache cache(std::chrono::seconds(30), std::chrono::seconds(5), 3, clock.Fn());
  cache.Put("a", AccessDecision::kAllowed);
  cache.Put("b", AccessDecision::kDenied);
  cache.Put("c", AccessDecision::kAllowed);
  EXPECT_EQ(cache.Find("a"), AccessDecision::kAllowed);  // a used: b is now the oldest
  cache.Put("d", AccessDecision::kAllowed);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.Find("b"), std::nullopt);
  EXPECT_EQ(cache.Find("a"), AccessDecision::kAllowed);
  EXPECT_EQ(cache.Find("c"), AccessDecision::kAllowed);
  EXPECT_EQ(cache.Find("d"), AccessDecision::kAllowed);
  // Replacing a key keeps one entry with the new decision.
  cache.Put("a", AccessDecision::kDenied);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.Find("a"), AccessDecision::kDenied);
  // 1024 distinct keys into a cache of 1024, then one more: still 1024.
  AccessCache big(std::chrono::seconds(30), std::chrono::seconds(5), 1024, clock.Fn());
  for (int i = 0; i <= 1024; ++i) big.Put("k" + std::to_string(i), AccessDecision::kAllowed);
  EXPECT_EQ(big.size(), 1024u);
  EXPECT_EQ(big.Find("k0"), std::nullopt);
  EXPECT_EQ(big.Find("k1024"), AccessDecision::kAllowed);
}

TEST(AccessCacheTest, ConcurrentUseKeepsTheBound) {
  AccessCache cache(std::chrono::seconds(30), std::chrono::seconds(5), 64);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < 2000; ++i) {
        const std::string key = "k" + std::to_string((i * 7 + t) % 200);
        if (auto d = cache.Find(key); d) {
          EXPECT_EQ(*d,
                    (key.back() - '0') % 2 ? AccessDecision::kAllowed : AccessDecision::kDenied);
        } else {
          cache.Put(key,
                    (key.back() - '0') % 2 ? AccessDecision::kAllowed : AccessDecision::kDenied);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(cache.size(), 64u);
  EXPECT_GT(cache.size(), 0u);
}

}  // namespace
}  // namespace fracgpu::ui::uitest
