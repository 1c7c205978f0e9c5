// What a viewer sees of other namespaces on the dashboard (docs/ui.md "What a viewer sees of
// other namespaces"): GET /api/cluster names a slice's pod only to a viewer who may list
// notebooks in its namespace (the SubjectAccessReview "Your notebooks" asks), through the
// gateway and never in --dashboard-only; everyone else sees the slice's size and cores without
// pod or namespace, so the GPU's figures stay whole. The decisions are cached (AccessCache) for
// UiOptions::access_cache_ttl; at most kMaxViewReviews reviews a request, never-decided and
// oldest decisions first (no viewer starved by others' namespaces), one review per key for
// concurrent requests (single-flight) and at most access_reviews_per_second for all viewers.
// Also AccessCache and ReviewRateLimit themselves.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
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

// The attack review's case: 120 namespaces ns000 … ns119 hold a slice each (with the
// fixture's team-a, team-b and team-c: 123 namespaces), and zoe may list notebooks only in
// ns119, the last but three in namespace order. The dashboard refreshes every 5 s for 5 minutes
// (60 requests; the finding ran 10). Before the fix the 16 reviews a request always went to the
// first uncached namespaces in name order, and with the 30 s cache only ~96 were ever decided:
// zoe's pod was named in 0 of 120 requests (and in 0 of these 60). Now the never-decided and then
// the oldest decisions go first, so ns119 is decided within ceil(123 / 16) = 8 requests, named
// while its decision is cached (the 5 refreshes after it, 30 s), and decided again within 8
// requests of its expiry.
TEST_F(UiScopingTest, AViewersOwnNamespaceIsNotStarvedByOthers) {
  constexpr int kNamespaces = 120;
  for (int i = 0; i < kNamespaces; ++i) {
    char ns[16];  // room for any int (-Wformat-truncation at -O1)
    std::snprintf(ns, sizeof ns, "ns%03d", i);
    fake_.Put("pods", PlacedPod(ns, "p", "node-a", "GPU-a0,NVIDIA,100,0:;"));
  }
  authz_.Allow("zoe", "list", "ns119");
  const size_t total = kNamespaces + 3;  // + team-a, team-b, team-c
  const size_t bound = (total + kMaxViewReviews - 1) / kMaxViewReviews;
  ASSERT_EQ(bound, 8u);
  auto zoe_named = [](const json& c) {
    for (const auto& s : c["nodes"][0]["gpus"][0]["slices"]) {
      if (s["namespace"] == "ns119" && s["pod"] == "p") return true;
    }
    return false;
  };
  size_t reviews_seen = 0, ns119_reviews = 0;
  int first_named = -1, last_review = -1, unnamed_streak = 0, longest_streak = 0, named = 0;
  constexpr int kRequests = 60;
  for (int r = 0; r < kRequests; ++r) {
    if (r > 0) Advance(std::chrono::seconds(5));
    const json c = Cluster("zoe");
    const bool is_named = zoe_named(c);
    const auto reviews = authz_.reviews();
    EXPECT_LE(reviews.size() - reviews_seen, kMaxViewReviews) << "request " << r;
    bool reviewed = false;
    for (size_t i = reviews_seen; i < reviews.size(); ++i) {
      if (reviews[i]["spec"]["resourceAttributes"]["namespace"] == "ns119") {
        reviewed = true;
        ++ns119_reviews;
      }
    }
    reviews_seen = reviews.size();
    if (reviewed) {
      EXPECT_TRUE(is_named) << "request " << r << ": reviewed and allowed";
      last_review = r;
    } else if (last_review >= 0 && r - last_review <= 5) {
      EXPECT_TRUE(is_named) << "request " << r << ": decided at request " << last_review
                            << ", cached for 30 s";
    } else {
      EXPECT_FALSE(is_named) << "request " << r << ": no decision cached";
    }
    if (is_named) {
      ++named;
      if (first_named < 0) first_named = r;
      unnamed_streak = 0;
    } else if (first_named >= 0) {
      longest_streak = std::max(longest_streak, ++unnamed_streak);
    }
  }
  ASSERT_GE(first_named, 0) << "zoe's pod was never named in " << kRequests << " requests";
  EXPECT_LT(first_named, static_cast<int>(bound));  // named by the 8th request
  // After an expiry (request d + 6) it is decided again by request d + 6 + 7.
  EXPECT_LE(longest_streak, static_cast<int>(bound) - 1);
  // Each decision names her for 6 requests (its own and 5 cached); one at least every 6 + 7.
  EXPECT_GE(ns119_reviews, (kRequests - bound) / (6 + bound - 1));
  EXPECT_EQ(named, static_cast<int>(ns119_reviews) * 6 - std::max(0, last_review + 6 - kRequests));
}

// The namespaces' names in a /api/cluster answer.
std::set<std::string> NamedIn(const json& c) {
  std::set<std::string> out;
  for (const auto& n : c["nodes"]) {
    for (const auto& g : n["gpus"]) {
      for (const auto& s : g["slices"]) {
        if (!s["namespace"].is_null()) out.insert(s["namespace"].get<std::string>());
      }
    }
  }
  return out;
}

// How many reviews asked about each namespace.
std::map<std::string, int> ReviewsPerNamespace(const std::vector<json>& reviews) {
  std::map<std::string, int> out;
  for (const json& r : reviews) ++out[r["spec"]["resourceAttributes"]["namespace"]];
  return out;
}

// Concurrent misses of one (user, groups, namespace) share one review (single-flight): 8
// dashboards of alice asking at once, each review taking 300 ms at the API server, send one
// review per namespace (3, counted there; before the fix each request sent its own: up to 24),
// and every answer names team-a (those that waited got the decision).
TEST_F(UiScopingTest, ConcurrentRequestsShareOneReviewPerKey) {
  authz_.Allow("alice", "list", "team-a");
  authz_.SetReviewDelay(std::chrono::milliseconds(300));
  constexpr int kViewers = 8;
  std::vector<json> answers(kViewers);
  std::vector<std::thread> viewers;
  const int port = server_->port();
  for (int i = 0; i < kViewers; ++i) {
    viewers.emplace_back([&answers, i, port] {
      httplib::Client http("127.0.0.1", port);
      http.set_read_timeout(30);
      auto r = http.Get("/api/cluster", httplib::Headers{{"kubeflow-userid", "alice"}});
      if (r && r->status == 200) answers[i] = json::parse(r->body, nullptr, false);
    });
  }
  for (auto& v : viewers) v.join();
  EXPECT_EQ(ReviewsPerNamespace(authz_.reviews()),
            (std::map<std::string, int>{{"team-a", 1}, {"team-b", 1}, {"team-c", 1}}));
  for (int i = 0; i < kViewers; ++i) {
    EXPECT_EQ(NamedIn(answers[i]), std::set<std::string>{"team-a"}) << "viewer " << i;
  }
}

// A request waits for another's review at most access_review_wait (here 100 ms, the review
// takes 600 ms a namespace): then it names nobody (fail closed) and sends no review of its
// own; the decisions land in the cache for the next refresh.
TEST_F(UiScopingTest, AWaitPastTheBoundNamesNobody) {
  UiOptions options;
  options.access_review_wait = std::chrono::milliseconds(100);
  StartUi(options);
  authz_.Allow("alice", "list", "team-a");
  authz_.SetReviewDelay(std::chrono::milliseconds(600));
  const int port = server_->port();
  json first;
  std::thread claimant([&first, port] {
    httplib::Client http("127.0.0.1", port);
    http.set_read_timeout(30);
    auto r = http.Get("/api/cluster", httplib::Headers{{"kubeflow-userid", "alice"}});
    if (r && r->status == 200) first = json::parse(r->body, nullptr, false);
  });
  // The claimant claims its three keys before its first review reaches the API server.
  for (int i = 0; i < 500 && authz_.reviews().empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_EQ(authz_.reviews().size(), 1u);
  const auto start = std::chrono::steady_clock::now();
  const json waited = Cluster("alice");
  const auto waited_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - start)
                             .count();
  ExpectNoNamesAndWholeFigures(waited);
  EXPECT_GE(waited_ms, 100);
  EXPECT_LT(waited_ms, 1200);  // not the claimant's 3 x 600 ms
  claimant.join();
  EXPECT_EQ(NamedIn(first), std::set<std::string>{"team-a"});
  EXPECT_EQ(authz_.reviews().size(), 3u);
  authz_.SetReviewDelay(std::chrono::milliseconds(0));
  EXPECT_EQ(NamedIn(Cluster("alice")), std::set<std::string>{"team-a"});  // cached
  EXPECT_EQ(authz_.reviews().size(), 3u);
}

// All viewers together send at most access_reviews_per_second reviews a second, at most
// access_reviews_burst at once (here 10/s, 20): beyond, the namespaces not yet decided stay
// unnamed in that answer (fail closed) and are not cached as failed, so they are decided as
// soon as tokens return. 23 namespaces (ns-10 … ns-29, team-a, team-b, team-c), users u0 … u3
// allowed in all.
TEST_F(UiScopingTest, ReviewsOfAllViewersAreBoundedPerSecond) {
  UiOptions options;
  options.access_reviews_per_second = 10;
  options.access_reviews_burst = 20;
  StartUi(options);
  std::set<std::string> all = {"team-a", "team-b", "team-c"};
  for (int i = 0; i < 20; ++i) {
    const std::string ns = "ns-" + std::to_string(10 + i);
    fake_.Put("pods", PlacedPod(ns, "p", "node-a", "GPU-a0,NVIDIA,1024,0:;"));
    all.insert(ns);
  }
  for (const char* user : {"u0", "u1", "u2", "u3"}) {
    for (const auto& ns : all) authz_.Allow(user, "list", ns);
  }
  auto first = [&all](size_t n) {  // the first n namespaces in name order
    std::set<std::string> out;
    for (const auto& ns : all) {
      if (out.size() == n) break;
      out.insert(ns);
    }
    return out;
  };
  // The clock stands still: u0 spends 16 of the 20 tokens (the per-request cap), u1 the 4 left.
  EXPECT_EQ(NamedIn(Cluster("u0")), first(16));
  EXPECT_EQ(authz_.reviews().size(), 16u);
  EXPECT_EQ(NamedIn(Cluster("u1")), first(4));
  EXPECT_EQ(authz_.reviews().size(), 20u);
  ExpectNoNamesAndWholeFigures(Cluster("u2"));  // no token: nothing named, nothing sent
  EXPECT_EQ(authz_.reviews().size(), 20u);
  // 500 ms later: 5 tokens; u2's namespaces were not cached as failed (failed TTL 5 s).
  Advance(std::chrono::milliseconds(500));
  EXPECT_EQ(NamedIn(Cluster("u2")), first(5));
  EXPECT_EQ(authz_.reviews().size(), 25u);
  // 10 s later the bucket holds 20 again, not 100: u3 sends 16 (the cap), u2 4 of its 18 left.
  Advance(std::chrono::seconds(10));
  EXPECT_EQ(NamedIn(Cluster("u3")), first(16));
  EXPECT_EQ(authz_.reviews().size(), 41u);
  EXPECT_EQ(NamedIn(Cluster("u2")), first(9));
  EXPECT_EQ(authz_.reviews().size(), 45u);
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
  // Kept, unanswered: its age orders the reviews (Look).
  EXPECT_EQ(cache.size(), 3u);
  const AccessCache::Lookup expired = cache.Look(failed);
  EXPECT_EQ(expired.decision, std::nullopt);
  EXPECT_TRUE(expired.decided);
  EXPECT_EQ(expired.since, clock.now - std::chrono::milliseconds(5000));
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

TEST(AccessCacheTest, OneClaimPerKeyAndItsWaitersGetTheDecision) {
  AccessCache cache(std::chrono::seconds(30), std::chrono::seconds(5), 16);
  const std::string key = AccessCache::Key("alice", {}, "team-a");
  AccessDecision got = AccessDecision::kFailed;
  EXPECT_EQ(cache.Claim(key, &got), AccessCache::ClaimResult::kClaimed);
  EXPECT_EQ(cache.Claim(key, &got), AccessCache::ClaimResult::kInFlight);
  EXPECT_TRUE(cache.Look(key).in_flight);
  EXPECT_FALSE(cache.Look(key).decided);
  std::optional<AccessDecision> waited;
  std::thread waiter([&] {
    waited = cache.Wait(key, std::chrono::steady_clock::now() + std::chrono::seconds(10));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  cache.Put(key, AccessDecision::kAllowed);
  waiter.join();
  EXPECT_EQ(waited, AccessDecision::kAllowed);
  EXPECT_EQ(cache.Claim(key, &got), AccessCache::ClaimResult::kDecided);
  EXPECT_EQ(got, AccessDecision::kAllowed);
  // Abandoned: the waiter wakes with no decision, and the key may be claimed again.
  const std::string other = AccessCache::Key("alice", {}, "team-b");
  ASSERT_EQ(cache.Claim(other, &got), AccessCache::ClaimResult::kClaimed);
  std::thread abandon([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cache.Abandon(other);
  });
  EXPECT_EQ(cache.Wait(other, std::chrono::steady_clock::now() + std::chrono::seconds(10)),
            std::nullopt);
  abandon.join();
  EXPECT_EQ(cache.Claim(other, &got), AccessCache::ClaimResult::kClaimed);
  // Past the deadline, still in flight: nullopt.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(cache.Wait(other, start + std::chrono::milliseconds(80)), std::nullopt);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(80));
}

TEST(ReviewRateLimitTest, TokensRefillAtTheRateUpToTheBurst) {
  FakeClock clock;
  ReviewRateLimit limit(2, 3, clock.Fn());  // 2/s, at most 3
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limit.TryTake()) << i;
  EXPECT_FALSE(limit.TryTake());
  clock.now += std::chrono::milliseconds(499);  // 0.998 tokens
  EXPECT_FALSE(limit.TryTake());
  clock.now += std::chrono::milliseconds(1);
  EXPECT_TRUE(limit.TryTake());
  EXPECT_FALSE(limit.TryTake());
  clock.now += std::chrono::seconds(100);  // capped at 3, not 200
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limit.TryTake()) << i;
  EXPECT_FALSE(limit.TryTake());
  ReviewRateLimit none(0, 50, clock.Fn());
  EXPECT_FALSE(none.TryTake());
}

}  // namespace
}  // namespace fracgpu::ui::uitest
