// k8s::Client against the fake API server over real HTTP.
#include "k8s/client.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "fake_apiserver.h"
#include "k8s/objects.h"

namespace fracgpu::k8s {
namespace {

using nlohmann::json;

json Node(const std::string& name, json labels = json::object()) {
  return {{"metadata", {{"name", name}, {"labels", labels}}},
          {"status", {{"allocatable", {{"nvidia.com/gpu", "20"}}}}}};
}

json Pod(const std::string& ns, const std::string& name, const std::string& node = "") {
  json p = {{"metadata", {{"name", name}, {"namespace", ns}}},
            {"spec", {{"containers", json::array()}}}};
  if (!node.empty()) p["spec"]["nodeName"] = node;
  return p;
}

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Config config;
    config.server = api_.url();
    config.timeout_s = 5;
    ClientOptions options;
    options.backoff.initial = std::chrono::milliseconds(1);
    auto c = Client::Create(config, options, &clock_);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(*c);
  }
  fakes::FakeApiServer api_;
  base::ManualClock clock_;
  std::unique_ptr<Client> client_;
};

TEST_F(ClientTest, GetReturnsObjectAndMaps404ToNotFound) {
  api_.Put("nodes", Node("a"));
  auto node = client_->Get(NodePath("a"));
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(Name(*node), "a");
  EXPECT_EQ(NodeAllocatable(*node, "nvidia.com/gpu"), 20);
  auto missing = client_->Get(NodePath("zz"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/api/v1/nodes/zz"), std::string::npos);
  EXPECT_NE(missing.status().message().find("404"), std::string::npos);
}

TEST_F(ClientTest, ListFiltersBySelectorsAndFollowsPages) {
  for (int i = 0; i < 7; ++i)
    api_.Put("pods", Pod("ns", std::string("p").append(std::to_string(i)), i % 2 ? "n1" : "n2"));
  api_.Put("pods", Pod("other", "x", "n1"));
  ListOptions lo;
  lo.field_selector = "spec.nodeName=n1";
  lo.limit = 2;  // forces paging: p1, p3, p5, other/x
  auto list = client_->List("/api/v1/pods", lo);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  std::vector<std::string> names;
  for (const auto& p : (*list)["items"]) names.push_back(Key(p));
  EXPECT_EQ(names, (std::vector<std::string>{"ns/p1", "ns/p3", "ns/p5", "other/x"}));
  EXPECT_EQ(ResourceVersion(*list), std::to_string(api_.resource_version()));
  EXPECT_EQ(api_.CountRequests("GET", "/api/v1/pods"), 2);

  api_.Put("nodes", Node("g1", {{"gpu", "yes"}}));
  api_.Put("nodes", Node("c1", {{"gpu", "no"}}));
  ListOptions ls;
  ls.label_selector = "gpu=yes";
  auto nodes = client_->List("/api/v1/nodes", ls);
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ((*nodes)["items"].size(), 1u);
  EXPECT_EQ(Name((*nodes)["items"][0]), "g1");
}

// ListEach hands each item over before the next page is fetched: the number of list requests
// the server has seen when an item arrives is its page's number (limit 2: items 1–2 → 1, …).
TEST_F(ClientTest, ListEachPassesEachPageBeforeFetchingTheNext) {
  for (int i = 0; i < 5; ++i) api_.Put("pods", Pod("ns", "p" + std::to_string(i), "n1"));
  ListOptions lo;
  lo.limit = 2;
  std::vector<std::pair<std::string, int>> seen;  // key, list requests made when it arrived
  auto rv = client_->ListEach("/api/v1/pods", lo, [&](json& item) {
    seen.emplace_back(Key(item), api_.CountRequests("GET", "/api/v1/pods"));
    item = nullptr;  // the callback may take the item
  });
  ASSERT_TRUE(rv.ok()) << rv.status().ToString();
  EXPECT_EQ(seen, (std::vector<std::pair<std::string, int>>{
                      {"ns/p0", 1}, {"ns/p1", 1}, {"ns/p2", 2}, {"ns/p3", 2}, {"ns/p4", 3}}));
  EXPECT_EQ(*rv, std::to_string(api_.resource_version()));

  api_.FailNext("GET", "/api/v1/pods", 403);
  int items = 0;
  auto denied = client_->ListEach("/api/v1/pods", lo, [&](json&) { ++items; });
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(items, 0);
}

TEST_F(ClientTest, MergePatchSetsAndDeletesAnnotations) {
  json n = Node("a");
  n["metadata"]["annotations"] = {{"keep", "1"}, {"gone", "2"}};
  api_.Put("nodes", n);
  auto r = client_->MergePatch(
      NodePath("a"), {{"metadata", {{"annotations", {{"new", "3"}, {"gone", nullptr}}}}}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto stored = api_.Get("nodes", "", "a");
  EXPECT_EQ((*stored)["metadata"]["annotations"], (json{{"keep", "1"}, {"new", "3"}}));
}

TEST_F(ClientTest, StaleResourceVersionIsConflict) {
  json stored = api_.Put("nodes", Node("a"));
  std::string old_rv = ResourceVersion(stored);
  api_.Patch("nodes", "", "a", {{"metadata", {{"labels", {{"x", "1"}}}}}});
  auto r = client_->MergePatch(
      NodePath("a"), {{"metadata", {{"resourceVersion", old_rv}, {"labels", {{"y", "2"}}}}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kConflict);
  EXPECT_FALSE((*api_.Get("nodes", "", "a"))["metadata"]["labels"].contains("y"));
}

TEST_F(ClientTest, PatchWithRetryRereadsOn409) {
  api_.Put("nodes", Node("a"));
  api_.FailNext("PATCH", "/api/v1/nodes/a", 409, 2);
  int calls = 0;
  auto r = client_->PatchWithRetry(NodePath("a"), [&](const json& cur) -> Result<json> {
    ++calls;
    EXPECT_EQ(Name(cur), "a");
    return json{{"metadata", {{"annotations", {{"hami.io/mutex.lock", "t,ns,p"}}}}}};
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(Annotation(*api_.Get("nodes", "", "a"), "hami.io/mutex.lock"), "t,ns,p");
  // Every PATCH carried the resourceVersion that was read.
  for (const auto& req : api_.Requests()) {
    if (req.method == "PATCH") {
      EXPECT_NE(req.body.find("resourceVersion"), std::string::npos);
    }
  }
}

TEST_F(ClientTest, PatchWithRetryGivesUpAfterConflictRetries) {
  api_.Put("nodes", Node("a"));
  api_.FailNext("PATCH", "/api/v1/nodes/a", 409, 100);
  auto r = client_->PatchWithRetry(NodePath("a"), [](const json&) -> Result<json> {
    return json{{"metadata", {{"labels", {{"a", "b"}}}}}};
  });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kConflict);
  EXPECT_EQ(api_.CountRequests("PATCH", "/api/v1/nodes/a"), 1 + ClientOptions{}.conflict_retries);
}

TEST_F(ClientTest, PatchWithRetryNullPatchChangesNothing) {
  api_.Put("nodes", Node("a"));
  auto r =
      client_->PatchWithRetry(NodePath("a"), [](const json&) -> Result<json> { return json(); });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(api_.CountRequests("PATCH", ""), 0);
  auto e = client_->PatchWithRetry(NodePath("a"),
                                   [](const json&) -> Result<json> { return Conflict("held"); });
  EXPECT_EQ(e.status().code(), StatusCode::kConflict);
}

TEST_F(ClientTest, GetRetries5xxThenSucceeds) {
  api_.Put("nodes", Node("a"));
  api_.FailNext("GET", "/api/v1/nodes/a", 503, 2);
  auto r = client_->Get(NodePath("a"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(api_.CountRequests("GET", "/api/v1/nodes/a"), 3);
  EXPECT_EQ(clock_.sleeps().size(), 2u);
}

TEST_F(ClientTest, PostIsNotRetried) {
  api_.FailNext("POST", "/api/v1/namespaces/ns/pods", 500, 1);
  auto r = client_->Create(PodPath("ns"), Pod("ns", "p"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(api_.CountRequests("POST", ""), 1);
}

TEST_F(ClientTest, EveryWriteAsksForStrictFieldValidation) {
  api_.Put("nodes", Node("a"));
  json pod = api_.Put("pods", Pod("ns", "p"));
  ASSERT_TRUE(client_->Create(PodPath("ns"), Pod("ns", "q")).ok());
  ASSERT_TRUE(client_->MergePatch(NodePath("a"), {{"metadata", {{"labels", {{"x", "y"}}}}}}).ok());
  auto current = client_->Get(NodePath("a"));
  ASSERT_TRUE(current.ok());
  ASSERT_TRUE(client_->Update(NodePath("a"), *current).ok());
  ASSERT_TRUE(client_->BindPod("ns", "p", Uid(pod), "node-a").ok());
  ASSERT_TRUE(client_->CreateEvent(pod, "Normal", "Test", "m", "fracgpu-test").ok());
  int writes = 0;
  for (const auto& r : api_.Requests()) {
    if (r.method == "GET") continue;
    ++writes;
    EXPECT_NE(r.query.find("fieldValidation=Strict"), std::string::npos)
        << r.method << " " << r.path << "?" << r.query;
  }
  EXPECT_EQ(writes, 5);
  // An error names the path as the caller gave it, without the query the client added.
  auto again = client_->Create(PodPath("ns"), Pod("ns", "q"));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().message().rfind("POST " + PodPath("ns") + ": HTTP 409", 0), 0u)
      << again.status().ToString();
}

TEST_F(ClientTest, BindPodSetsNodeNameAndConflictsWhenBound) {
  json pod = api_.Put("pods", Pod("ns", "p"));
  ASSERT_TRUE(client_->BindPod("ns", "p", Uid(pod), "node-a").ok());
  EXPECT_EQ(PodNodeName(*api_.Get("pods", "ns", "p")), "node-a");
  Status again = client_->BindPod("ns", "p", Uid(pod), "node-b");
  EXPECT_EQ(again.code(), StatusCode::kConflict);
  api_.Put("pods", Pod("ns", "q"));
  EXPECT_EQ(client_->BindPod("ns", "q", "wrong-uid", "node-a").code(), StatusCode::kConflict);
  EXPECT_EQ(client_->BindPod("ns", "missing", "", "node-a").code(), StatusCode::kNotFound);
}

// Issue 37 item 1: a Binding's metadata travels onto the pod in the one write that binds it,
// as the real API server's BindingREST.setPodNodeAndMetadata does (storage.go, v1.34.4 and
// v1.37.2): annotations merged (existing keys kept, equal keys overwritten), labels merged
// only where PodTopologyLabelsAdmission is on, resourceVersion a precondition (409, nothing
// written), a pod being deleted or carrying scheduling gates refused.
TEST_F(ClientTest, BindPodCarriesAnnotationsAndLabelsUnderItsPreconditions) {
  json pod = Pod("ns", "p");
  pod["metadata"]["annotations"] = {{"keep", "1"}, {"over", "old"}};
  pod = api_.Put("pods", pod);
  Client::BindingMeta meta;
  meta.uid = Uid(pod);
  meta.resource_version = "1";  // not the pod's
  meta.annotations = {{"over", "new"}, {"hami.io/vgpu-node", "node-a"}};
  meta.labels = {{"hami.io/vgpu-node", "node-a"}};
  EXPECT_EQ(client_->BindPod("ns", "p", "node-a", meta).code(), StatusCode::kConflict);
  json unchanged = *api_.Get("pods", "ns", "p");
  EXPECT_EQ(PodNodeName(unchanged), "");
  EXPECT_EQ(unchanged["metadata"]["annotations"], pod["metadata"]["annotations"]);
  meta.resource_version = ResourceVersion(pod);
  ASSERT_TRUE(client_->BindPod("ns", "p", "node-a", meta).ok());
  json bound = *api_.Get("pods", "ns", "p");
  EXPECT_EQ(PodNodeName(bound), "node-a");
  EXPECT_EQ(bound["metadata"]["annotations"],
            json({{"keep", "1"}, {"over", "new"}, {"hami.io/vgpu-node", "node-a"}}));
  EXPECT_EQ(bound["metadata"]["labels"]["hami.io/vgpu-node"], "node-a");
  // Kubernetes 1.34 (gate off): the annotations still land, the labels do not.
  api_.SetBindingCopiesLabels(false);
  json q = api_.Put("pods", Pod("ns", "q"));
  meta.uid = Uid(q);
  meta.resource_version = ResourceVersion(q);
  ASSERT_TRUE(client_->BindPod("ns", "q", "node-a", meta).ok());
  json bound_q = *api_.Get("pods", "ns", "q");
  EXPECT_EQ(bound_q["metadata"]["annotations"]["hami.io/vgpu-node"], "node-a");
  EXPECT_FALSE(bound_q["metadata"].contains("labels") &&
               bound_q["metadata"]["labels"].contains("hami.io/vgpu-node"));
  // Refused as the real one refuses: gated, being deleted.
  json gated = Pod("ns", "g");
  gated["spec"]["schedulingGates"] = json::array({{{"name", "wait"}}});
  api_.Put("pods", gated);
  EXPECT_EQ(client_->BindPod("ns", "g", "", "node-a").code(), StatusCode::kConflict);
  json gone = Pod("ns", "d");
  gone["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  api_.Put("pods", gone);
  EXPECT_EQ(client_->BindPod("ns", "d", "", "node-a").code(), StatusCode::kConflict);
  EXPECT_EQ(PodNodeName(*api_.Get("pods", "ns", "d")), "");
}

TEST_F(ClientTest, CreateEventNamesTheInvolvedObject) {
  json pod = api_.Put("pods", Pod("ns", "p"));
  ASSERT_TRUE(
      client_->CreateEvent(pod, "Warning", "FilteringFailed", "no node fits", "fracgpu-scheduler")
          .ok());
  auto events = api_.List("events");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["reason"], "FilteringFailed");
  EXPECT_EQ(events[0]["type"], "Warning");
  EXPECT_EQ(events[0]["involvedObject"]["name"], "p");
  EXPECT_EQ(events[0]["involvedObject"]["uid"], Uid(pod));
  EXPECT_EQ(events[0]["metadata"]["namespace"], "ns");
}

TEST_F(ClientTest, WatchStreamsEventsAndBookmarks) {
  json first = api_.Put("pods", Pod("ns", "a"));
  std::vector<std::string> seen;
  std::atomic<bool> ready{false};
  base::StopSignal stop;
  std::thread producer([&] {
    api_.WaitFor([&] { return api_.OpenWatches() == 1; });
    api_.Put("pods", Pod("ns", "b"));
    api_.Patch("pods", "ns", "a", {{"metadata", {{"labels", {{"x", "y"}}}}}});
    api_.Remove("pods", "ns", "b");
    api_.SendBookmarks();
  });
  WatchOptions wo;
  wo.resource_version = ResourceVersion(first);
  auto end = client_->Watch(
      "/api/v1/pods", wo,
      [&](const WatchEvent& ev) {
        seen.push_back(ev.type + ":" +
                       (ev.type == "BOOKMARK" ? ResourceVersion(ev.object) : Name(ev.object)));
        return ev.type != "BOOKMARK";
      },
      &stop);
  producer.join();
  ASSERT_TRUE(end.ok()) << end.status().ToString();
  EXPECT_EQ(*end, WatchEnd::kStopped);
  EXPECT_EQ(seen,
            (std::vector<std::string>{"ADDED:b", "MODIFIED:a", "DELETED:b",
                                      "BOOKMARK:" + std::to_string(api_.resource_version())}));
}

TEST_F(ClientTest, WatchFromExpiredVersionEndsExpired) {
  json first = api_.Put("pods", Pod("ns", "a"));
  api_.Put("pods", Pod("ns", "b"));
  api_.ExpireHistory();
  WatchOptions wo;
  wo.resource_version = ResourceVersion(first);
  int events = 0;
  auto end = client_->Watch("/api/v1/pods", wo, [&](const WatchEvent&) {
    ++events;
    return true;
  });
  ASSERT_TRUE(end.ok()) << end.status().ToString();
  EXPECT_EQ(*end, WatchEnd::kExpired);
  EXPECT_EQ(events, 0);
  api_.RejectNextWatches(1);
  auto end2 = client_->Watch("/api/v1/pods", wo, [&](const WatchEvent&) { return true; });
  ASSERT_TRUE(end2.ok()) << end2.status().ToString();
  EXPECT_EQ(*end2, WatchEnd::kExpired);
}

TEST_F(ClientTest, StopInterruptsABlockedWatch) {
  base::StopSignal stop;
  std::thread stopper([&] {
    api_.WaitFor([&] { return api_.OpenWatches() == 1; });
    stop.Stop();
  });
  auto end = client_->Watch(
      "/api/v1/nodes", {}, [](const WatchEvent&) { return true; }, &stop);
  stopper.join();
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(*end, WatchEnd::kStopped);
}

TEST_F(ClientTest, DroppedWatchIsUnavailable) {
  std::thread dropper([&] {
    api_.WaitFor([&] { return api_.OpenWatches() == 1; });
    api_.DropWatches();
  });
  auto end = client_->Watch("/api/v1/nodes", {}, [](const WatchEvent&) { return true; });
  dropper.join();
  ASSERT_FALSE(end.ok());
  EXPECT_EQ(end.status().code(), StatusCode::kUnavailable);
}

TEST_F(ClientTest, ConcurrentCallsShareTheClient) {
  api_.Put("nodes", Node("a"));
  // Every 409 means another thread's patch landed, so with 16 writers a thread loses at most
  // 15 times: 16 re-reads make the outcome deterministic whatever the interleaving.
  ClientOptions options;
  options.conflict_retries = 16;
  auto shared = Client::Create(client_->config(), options, &clock_);
  ASSERT_TRUE(shared.ok());
  Client* client = shared->get();
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      auto r = client->PatchWithRetry(NodePath("a"), [&](const json&) -> Result<json> {
        return json{{"metadata", {{"annotations", {{"k" + std::to_string(i), "v"}}}}}};
      });
      if (r.ok()) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 16);
  EXPECT_EQ((*api_.Get("nodes", "", "a"))["metadata"]["annotations"].size(), 16u);
}

// Calls made at once each hold a connection. Afterwards up to max_idle_connections of them stay
// open for the next calls and the others are closed, so the next calls open new ones (each a
// TCP and TLS handshake against a real API server). The fake sees a connection as its client port.
TEST_F(ClientTest, IdleConnectionsAreKeptUpToTheLimit) {
  api_.Put("nodes", Node("a"));
  // Each request waits in the fake until all six of its round have arrived, so the six calls
  // are in flight together and none can take a handle another has released (5 s at most).
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  api_.SetRequestHook([&](const std::string&, const std::string&) {
    std::unique_lock<std::mutex> lock(mu);
    const int round_end = (arrived / 6 + 1) * 6;
    ++arrived;
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(5), [&] { return arrived >= round_end; });
  });
  auto round = [&](Client* c) {
    const size_t before = api_.Requests().size();
    std::vector<std::thread> threads;
    for (int i = 0; i < 6; ++i) {
      threads.emplace_back([c] { EXPECT_TRUE(c->Get(NodePath("a")).ok()); });
    }
    for (auto& t : threads) t.join();
    const auto requests = api_.Requests();
    std::set<int> ports;
    for (size_t i = before; i < requests.size(); ++i) ports.insert(requests[i].remote_port);
    return ports;
  };
  for (int limit : {2, ClientOptions{}.max_idle_connections}) {
    ClientOptions options;
    options.max_idle_connections = limit;
    auto c = Client::Create(client_->config(), options, &clock_);
    ASSERT_TRUE(c.ok());
    const std::set<int> first = round(c->get());
    ASSERT_EQ(first.size(), 6u) << "six calls at once, six connections";
    const std::set<int> second = round(c->get());
    size_t reused = 0;
    for (int port : second) reused += first.count(port);
    EXPECT_EQ(second.size(), 6u);
    EXPECT_EQ(reused, static_cast<size_t>(std::min(limit, 6))) << "limit " << limit;
  }
  EXPECT_GE(ClientOptions{}.max_idle_connections, 32);  // above the scheduler's binds in flight
}

TEST(ClientCreate, EmptyServerIsInvalid) {
  auto c = Client::Create(Config{});
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
}

TEST(ClientUnreachable, TransportErrorIsUnavailable) {
  Config config;
  config.server = "http://127.0.0.1:1";  // nothing listens on port 1
  base::ManualClock clock;
  auto c = Client::Create(config, {}, &clock);
  ASSERT_TRUE(c.ok());
  auto r = (*c)->Get("/api/v1/nodes");
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  // The message names the URL tried, so a log line says which API server is unreachable.
  EXPECT_EQ(r.status().message().rfind("GET http://127.0.0.1:1/api/v1/nodes: ", 0), 0u)
      << r.status().message();
  EXPECT_NE(r.status().message().find("(API server http://127.0.0.1:1)"), std::string::npos);
  EXPECT_EQ(clock.sleeps().size(), 3u);  // retries = 3
}

TEST(UrlEncodeTest, EncodesReservedCharacters) {
  EXPECT_EQ(UrlEncode("spec.nodeName=a b/c"), "spec.nodeName%3Da%20b%2Fc");
  EXPECT_EQ(PodPath("ns", "p"), "/api/v1/namespaces/ns/pods/p");
  EXPECT_EQ(LeasePath("ns", "l"), "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l");
}

}  // namespace
}  // namespace fracgpu::k8s
