// k8s::Informer: list+watch, relist on 410, reconnect after a dropped stream.
#include "k8s/informer.h"

#include <gtest/gtest.h>

#include <mutex>
#include <set>

#include "fake_apiserver.h"
#include "k8s/objects.h"

namespace fracgpu::k8s {
namespace {

using nlohmann::json;

json Pod(const std::string& name, const std::string& node) {
  return {{"metadata", {{"name", name}, {"namespace", "ns"}}}, {"spec", {{"nodeName", node}}}};
}

// A consumer that mirrors the informer's callbacks into a set of keys.
struct Mirror {
  std::mutex mu;
  std::map<std::string, std::string> objects;  // key → node
  int deletes = 0;
  InformerHandlers Handlers() {
    return {[this](const json& o) {
              std::lock_guard<std::mutex> l(mu);
              objects[Key(o)] = PodNodeName(o);
            },
            [this](const json& o) {
              std::lock_guard<std::mutex> l(mu);
              objects.erase(Key(o));
              ++deletes;
            },
            nullptr};
  }
  std::map<std::string, std::string> Get() {
    std::lock_guard<std::mutex> l(mu);
    return objects;
  }
};

class InformerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Config config;
    config.server = api_.url();
    auto c = Client::Create(config, {}, &clock_);
    ASSERT_TRUE(c.ok());
    client_ = std::move(*c);
  }
  InformerOptions Options(const std::string& field_selector = "") {
    InformerOptions o;
    o.path = "/api/v1/pods";
    o.field_selector = field_selector;
    o.seed = 7;
    return o;
  }
  fakes::FakeApiServer api_;
  base::ManualClock clock_;  // backoff sleeps return at once
  std::unique_ptr<Client> client_;
};

TEST_F(InformerTest, SyncsThenFollowsChanges) {
  api_.Put("pods", Pod("a", "n1"));
  Mirror m;
  Informer inf(client_.get(), Options(), m.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(10)));
  EXPECT_EQ(m.Get(), (std::map<std::string, std::string>{{"ns/a", "n1"}}));
  api_.Put("pods", Pod("b", "n2"));
  api_.Patch("pods", "ns", "a", {{"spec", {{"nodeName", "n3"}}}});
  ASSERT_TRUE(api_.WaitFor([&] {
    return m.Get() == std::map<std::string, std::string>{{"ns/a", "n3"}, {"ns/b", "n2"}};
  }));
  api_.Remove("pods", "ns", "a");
  ASSERT_TRUE(api_.WaitFor([&] { return m.Get().size() == 1; }));
  EXPECT_EQ(inf.list_count(), 1);
  inf.Stop();
}

TEST_F(InformerTest, FieldSelectorLimitsTheStore) {
  api_.Put("pods", Pod("a", "n1"));
  api_.Put("pods", Pod("b", "n2"));
  Mirror m;
  Informer inf(client_.get(), Options("spec.nodeName=n1"), m.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(10)));
  api_.Put("pods", Pod("c", "n1"));
  api_.Put("pods", Pod("d", "n2"));
  ASSERT_TRUE(api_.WaitFor([&] { return m.Get().size() == 2; }));
  EXPECT_EQ(m.Get(), (std::map<std::string, std::string>{{"ns/a", "n1"}, {"ns/c", "n1"}}));
  inf.Stop();
}

TEST_F(InformerTest, WatchBrokenBy410RelistsAndReportsMissedDeletes) {
  api_.Put("pods", Pod("a", "n1"));
  api_.Put("pods", Pod("b", "n1"));
  Mirror m;
  Informer inf(client_.get(), Options(), m.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(10)));
  ASSERT_TRUE(api_.WaitFor([&] { return api_.OpenWatches() == 1; }));
  // Changes the informer cannot see through the watch: the history is compacted and the
  // open stream gets ERROR 410. The relist must bring it to the server's state.
  {
    // Make the changes and the expiry atomic from the informer's point of view: its
    // reconnect waits until all of them are made, so it cannot see them one by one.
    api_.HoldWatches(true);
    api_.DropWatches();
    api_.Remove("pods", "ns", "a");
    api_.Put("pods", Pod("c", "n2"));
    api_.ExpireHistory();
    api_.HoldWatches(false);
  }
  // The mirror reaches the state inside the relist, before the list is counted: wait for both.
  ASSERT_TRUE(api_.WaitFor([&] {
    return inf.list_count() >= 2 &&
           m.Get() == std::map<std::string, std::string>{{"ns/b", "n1"}, {"ns/c", "n2"}};
  }));
  EXPECT_EQ(m.deletes, 1);
  // And it keeps watching afterwards.
  api_.Put("pods", Pod("d", "n2"));
  ASSERT_TRUE(api_.WaitFor([&] { return m.Get().count("ns/d") == 1; }));
  inf.Stop();
}

TEST_F(InformerTest, Http410OnWatchRequestRelists) {
  Mirror m;
  api_.RejectNextWatches(1);
  Informer inf(client_.get(), Options(), m.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(10)));
  ASSERT_TRUE(api_.WaitFor([&] { return inf.list_count() == 2 && api_.OpenWatches() == 1; }));
  api_.Put("pods", Pod("x", "n"));
  ASSERT_TRUE(api_.WaitFor([&] { return m.Get().count("ns/x") == 1; }));
  inf.Stop();
}

TEST_F(InformerTest, DroppedConnectionResumesFromLastVersionWithoutRelist) {
  Mirror m;
  Informer inf(client_.get(), Options(), m.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(10)));
  ASSERT_TRUE(api_.WaitFor([&] { return api_.OpenWatches() == 1; }));
  api_.Put("pods", Pod("a", "n"));
  ASSERT_TRUE(api_.WaitFor([&] { return m.Get().size() == 1; }));
  api_.DropWatches();
  api_.Put("pods", Pod("b", "n"));  // happens while disconnected: replayed from history
  ASSERT_TRUE(api_.WaitFor([&] { return m.Get().size() == 2; }));
  EXPECT_EQ(inf.list_count(), 1);
  EXPECT_GE(api_.CountRequests("GET", "/api/v1/pods"), 3);  // list + 2 watches
  // The reconnect asked for the version it had seen.
  bool resumed = false;
  for (const auto& r : api_.Requests()) {
    if (r.query.find("watch=true") != std::string::npos &&
        r.query.find("resourceVersion=") != std::string::npos) {
      resumed = true;
    }
  }
  EXPECT_TRUE(resumed);
  inf.Stop();
}

TEST_F(InformerTest, ListErrorsBackOffWithGrowingDelays) {
  ClientOptions no_retries;
  no_retries.retries = 0;  // so every recorded sleep is the informer's
  auto client = Client::Create(client_->config(), no_retries, &clock_);
  ASSERT_TRUE(client.ok());
  api_.FailNext("GET", "/api/v1/pods", 500, 4);
  Mirror m;
  Informer inf(client->get(), Options(), m.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(10)));
  inf.Stop();
  std::vector<double> informer_sleeps;
  for (auto d : clock_.sleeps())
    informer_sleeps.push_back(std::chrono::duration<double>(d).count());
  ASSERT_GE(informer_sleeps.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    double base = 0.2 * (1 << i);
    EXPECT_GE(informer_sleeps[i], base);
    EXPECT_LT(informer_sleeps[i], base * 1.5);
  }
}

TEST_F(InformerTest, BookmarkAdvancesResourceVersion) {
  Mirror m;
  Informer inf(client_.get(), Options(), m.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(10)));
  ASSERT_TRUE(api_.WaitFor([&] { return api_.OpenWatches() == 1; }));
  api_.Put("nodes", {{"metadata", {{"name", "unrelated"}}}});  // moves the global version
  api_.SendBookmarks();
  std::string want = std::to_string(api_.resource_version());
  ASSERT_TRUE(api_.WaitFor([&] { return inf.last_resource_version() == want; }));
  inf.Stop();
}

}  // namespace
}  // namespace fracgpu::k8s

namespace fracgpu::k8s {
namespace {

// Without keep_objects the store holds identities only, while the handlers still get whole
// objects; the delete a relist reports carries the identity (name, namespace, uid), which is
// what a consumer such as ClusterState::RemovePod (by uid) reads.
TEST_F(InformerTest, WithoutKeepObjectsTheStoreHoldsIdentitiesOnly) {
  json big = Pod("a", "n1");
  big["metadata"]["uid"] = "uid-a";
  big["metadata"]["annotations"] = {{"hami.io/node-nvidia-register", std::string(4096, 'x')}};
  api_.Put("pods", big);
  json b = Pod("b", "n1");
  b["metadata"]["uid"] = "uid-b";
  api_.Put("pods", b);
  Mirror m;
  std::mutex mu;
  std::vector<json> deleted;
  InformerHandlers h = m.Handlers();
  auto mirror_delete = h.on_delete;
  h.on_delete = [&](const json& o) {
    mirror_delete(o);
    std::lock_guard<std::mutex> l(mu);
    deleted.push_back(o);
  };
  InformerOptions o = Options();
  o.keep_objects = false;
  Informer inf(client_.get(), o, h);
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(10)));
  // The handler saw the whole object (its spec.nodeName) ...
  EXPECT_EQ(m.Get(), (std::map<std::string, std::string>{{"ns/a", "n1"}, {"ns/b", "n1"}}));
  // ... the store only its identity, with the server's resourceVersion.
  auto stored = api_.Get("pods", "ns", "a");
  ASSERT_TRUE(stored.has_value());
  const std::string rv_a = (*stored)["metadata"]["resourceVersion"].get<std::string>();
  json want_a = {
      {"metadata",
       {{"name", "a"}, {"namespace", "ns"}, {"uid", "uid-a"}, {"resourceVersion", rv_a}}}};
  auto snap = inf.Snapshot();
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap["ns/a"], want_a);

  // A delete missed during a 410 gap is reported from the identity.
  ASSERT_TRUE(api_.WaitFor([&] { return api_.OpenWatches() == 1; }));
  api_.HoldWatches(true);
  api_.DropWatches();
  api_.Remove("pods", "ns", "a");
  api_.ExpireHistory();
  api_.HoldWatches(false);
  ASSERT_TRUE(api_.WaitFor([&] { return inf.list_count() >= 2 && m.Get().size() == 1; }));
  {
    std::lock_guard<std::mutex> l(mu);
    ASSERT_EQ(deleted.size(), 1u);
    EXPECT_EQ(deleted[0], want_a);
  }
  // A watch event stores the identity too.
  json c = Pod("c", "n2");
  c["metadata"]["uid"] = "uid-c";
  api_.Put("pods", c);
  ASSERT_TRUE(api_.WaitFor([&] { return inf.Snapshot().count("ns/c") == 1; }));
  json got_c = inf.Snapshot()["ns/c"];
  EXPECT_EQ(got_c["metadata"].size(), 4u);  // name, namespace, uid, resourceVersion
  EXPECT_EQ(got_c["metadata"]["uid"], "uid-c");
  EXPECT_FALSE(got_c.contains("spec"));
  inf.Stop();
}

}  // namespace
}  // namespace fracgpu::k8s
