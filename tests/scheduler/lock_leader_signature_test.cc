// Node lock, leader election, allocation signature, init-container collapse in the state.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>
#include <string>

#include "core/node_lock_codec.h"
#include "core/signature.h"
#include "fake_apiserver.h"
#include "k8s/objects.h"
#include "scheduler/extender.h"
#include "scheduler/leader.h"
#include "scheduler/node_lock.h"
#include "scheduler/state.h"

namespace fracgpu::scheduler {
namespace {

using nlohmann::json;

TEST(SignatureTest, MatchesHmacSha256Base64) {
  // Expected values computed independently with Python's hmac + base64 modules.
  EXPECT_EQ(core::SignAllocation("secret", "uid-1", "node-a", ";GPU-1,NVIDIA,3000,0:;"),
            "RrkOGZ+g2MleDyfb2Os7HrXMnFN7z8X5tdURo1tse3Q=");
  EXPECT_EQ(core::SignAllocation("k", "", "", ""), "e0doCfjGlaiS1AaSYRna7ZecB1PVQ55BHr7Z+gzS5Sk=");
}

TEST(SignatureTest, VerifyRejectsAnyChange) {
  std::string sig = core::SignAllocation("key", "u", "n", "a");
  EXPECT_TRUE(core::VerifyAllocation("key", "u", "n", "a", sig));
  EXPECT_FALSE(core::VerifyAllocation("key2", "u", "n", "a", sig));
  EXPECT_FALSE(core::VerifyAllocation("key", "u2", "n", "a", sig));
  EXPECT_FALSE(core::VerifyAllocation("key", "u", "n2", "a", sig));
  EXPECT_FALSE(core::VerifyAllocation("key", "u", "n", "a2", sig));
  EXPECT_FALSE(core::VerifyAllocation("key", "u", "n", "a", sig.substr(1)));
  EXPECT_FALSE(core::VerifyAllocation("", "u", "n", "a", core::SignAllocation("", "u", "n", "a")));
}

// The node lock codec as the scheduler uses it (core/node_lock_codec.h; its table of good and
// bad values is tests/core/node_lock_codec_test.cc).
TEST(NodeLockValueTest, ParseAndFormat) {
  auto t = std::chrono::system_clock::from_time_t(1772446504);  // 2026-03-02T10:15:04Z
  auto t_s = std::chrono::floor<std::chrono::seconds>(t);
  EXPECT_EQ(core::EncodeNodeLock({t_s, "default", "gpu-pod"}),
            "2026-03-02T10:15:04Z,default,gpu-pod");
  auto v = core::DecodeNodeLock("2026-03-02T10:15:04Z,default,gpu-pod");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->time, t);
  EXPECT_EQ(v->pod_namespace, "default");
  EXPECT_EQ(v->pod_name, "gpu-pod");
  auto legacy = core::DecodeNodeLock("2026-03-02T12:15:04.123+02:00");
  ASSERT_TRUE(legacy.ok());
  EXPECT_EQ(legacy->time, t);
  EXPECT_TRUE(legacy->pod_name.empty());
  for (const char* bad : {"", "yesterday", "2026-03-02T10:15:04", "2026-03-02T10:15:04Z,onlyns"}) {
    EXPECT_EQ(core::DecodeNodeLock(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

class LockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    k8s::Config config;
    config.server = api_.url();
    client_ = std::move(k8s::Client::Create(config, {}, &clock_).value());
    clock_.Set(std::chrono::system_clock::from_time_t(1772446504));
    api_.Put("nodes", {{"metadata", {{"name", "n"}}}});
  }
  std::optional<std::string> Lock() {
    return k8s::Annotation(*api_.Get("nodes", "", "n"), core::kAnnotationNodeLock);
  }
  fakes::FakeApiServer api_;
  base::ManualClock clock_;
  std::unique_ptr<k8s::Client> client_;
};

TEST_F(LockTest, LockContentionExpiryAndRelease) {
  NodeLocker locker(client_.get(), &clock_, std::chrono::minutes(5));
  api_.Put("pods", {{"metadata", {{"name", "a"}, {"namespace", "ns"}}}});
  ASSERT_TRUE(locker.Lock("n", "ns", "a").ok());
  EXPECT_EQ(Lock(), "2026-03-02T10:15:04Z,ns,a");
  EXPECT_TRUE(locker.Lock("n", "ns", "a").ok());  // same pod: re-entrant
  Status other = locker.Lock("n", "ns", "b");
  EXPECT_EQ(other.code(), StatusCode::kConflict);
  EXPECT_NE(other.message().find("ns,a"), std::string::npos);
  EXPECT_TRUE(locker.Unlock("n", "ns", "b").ok());  // not the holder: nothing released
  EXPECT_TRUE(Lock());
  clock_.Advance(std::chrono::minutes(5) + std::chrono::seconds(1));
  EXPECT_TRUE(locker.Lock("n", "ns", "b").ok());  // expired: taken over
  EXPECT_EQ(Lock(), "2026-03-02T10:20:05Z,ns,b");
  EXPECT_TRUE(locker.Unlock("n", "ns", "b").ok());
  EXPECT_FALSE(Lock());
  EXPECT_EQ(locker.Lock("missing-node", "ns", "a").code(), StatusCode::kNotFound);
}

// Issue 37 item 1: Lock with the node as the caller read it patches without reading it again;
// a copy gone stale (changed since: 409; or showing a lock released since) is read afresh.
TEST_F(LockTest, TheNodeAsReadSavesAGetAndAStaleCopyIsReadAgain) {
  NodeLocker locker(client_.get(), &clock_, std::chrono::minutes(5));
  api_.Put("pods", {{"metadata", {{"name", "a"}, {"namespace", "ns"}}}});
  api_.Put("pods", {{"metadata", {{"name", "b"}, {"namespace", "ns"}}}});
  json fresh = *api_.Get("nodes", "", "n");
  const int gets = api_.CountRequests("GET", "/api/v1/nodes/n");
  ASSERT_TRUE(locker.Lock("n", "ns", "a", &fresh).ok());
  EXPECT_EQ(Lock(), "2026-03-02T10:15:04Z,ns,a");
  EXPECT_EQ(api_.CountRequests("GET", "/api/v1/nodes/n"), gets);  // no GET of the node
  // `fresh` is stale now (resourceVersion before the lock): b's patch gets 409, the node is
  // read again and b finds a's lock.
  Status st = locker.Lock("n", "ns", "b", &fresh);
  EXPECT_EQ(st.code(), StatusCode::kConflict);
  EXPECT_NE(st.message().find("ns,a"), std::string::npos) << st.message();
  // A copy showing a's lock, which a has released since: b reads the node again and locks it.
  json locked = *api_.Get("nodes", "", "n");
  ASSERT_TRUE(locker.Unlock("n", "ns", "a").ok());
  ASSERT_TRUE(locker.Lock("n", "ns", "b", &locked).ok());
  EXPECT_EQ(Lock(), "2026-03-02T10:15:04Z,ns,b");
}

TEST(LeaderTest, OneLeaderAndTakeoverAfterLeaseDuration) {
  fakes::FakeApiServer api;
  base::ManualClock clock(std::chrono::system_clock::from_time_t(1772446504));
  k8s::Config config;
  config.server = api.url();
  auto client = std::move(k8s::Client::Create(config, {}, &clock).value());
  LeaderElectionConfig a_cfg{"fracgpu-system", "fracgpu-scheduler", "a", std::chrono::seconds(15),
                             std::chrono::seconds(2)};
  LeaderElectionConfig b_cfg = a_cfg;
  b_cfg.identity = "b";
  std::vector<std::string> changes;
  LeaderElector a(client.get(), &clock, a_cfg,
                  [&](bool l) { changes.push_back(std::string("a:") + (l ? "1" : "0")); });
  LeaderElector b(client.get(), &clock, b_cfg,
                  [&](bool l) { changes.push_back(std::string("b:") + (l ? "1" : "0")); });
  EXPECT_TRUE(a.TryAcquireOrRenew());
  EXPECT_FALSE(b.TryAcquireOrRenew());
  auto lease = api.Get("leases", "fracgpu-system", "fracgpu-scheduler");
  ASSERT_TRUE(lease);
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "a");
  // a keeps renewing: b never takes over.
  for (int i = 0; i < 10; ++i) {
    clock.Advance(std::chrono::seconds(2));
    EXPECT_TRUE(a.TryAcquireOrRenew());
    EXPECT_FALSE(b.TryAcquireOrRenew());
  }
  // a stops; b takes over only once the record is 15 s old on b's clock.
  clock.Advance(std::chrono::seconds(14));
  EXPECT_FALSE(b.TryAcquireOrRenew());
  clock.Advance(std::chrono::seconds(2));
  EXPECT_TRUE(b.TryAcquireOrRenew());
  lease = api.Get("leases", "fracgpu-system", "fracgpu-scheduler");
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "b");
  EXPECT_EQ((*lease)["spec"]["leaseTransitions"], 1);
  EXPECT_FALSE(a.TryAcquireOrRenew());
  EXPECT_EQ(changes, (std::vector<std::string>{"a:1", "b:1", "a:0"}));
}

TEST(LeaderTest, StopReleasesTheLeaseForAnImmediateTakeover) {
  fakes::FakeApiServer api;
  base::ManualClock clock(std::chrono::system_clock::from_time_t(1772446504));
  k8s::Config config;
  config.server = api.url();
  auto client = std::move(k8s::Client::Create(config, {}, &clock).value());
  LeaderElectionConfig a_cfg{"fracgpu-system", "fracgpu-scheduler", "a", std::chrono::seconds(15),
                             std::chrono::seconds(2)};
  LeaderElectionConfig b_cfg = a_cfg;
  b_cfg.identity = "b";
  LeaderElector b(client.get(), &clock, b_cfg);
  {
    LeaderElector a(client.get(), &clock, a_cfg);
    EXPECT_TRUE(a.TryAcquireOrRenew());
    EXPECT_FALSE(b.TryAcquireOrRenew());
    a.Stop();  // as on SIGTERM
    EXPECT_FALSE(a.is_leader());
    auto lease = api.Get("leases", "fracgpu-system", "fracgpu-scheduler");
    ASSERT_TRUE(lease);
    EXPECT_EQ((*lease)["spec"]["holderIdentity"], "");
    EXPECT_EQ((*lease)["spec"]["leaseDurationSeconds"], 1);
  }
  // No time passes: b takes over at its next round, not 15 s later.
  EXPECT_TRUE(b.TryAcquireOrRenew());
  auto lease = api.Get("leases", "fracgpu-system", "fracgpu-scheduler");
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "b");
  EXPECT_EQ((*lease)["spec"]["leaseDurationSeconds"], 15);
  EXPECT_EQ((*lease)["spec"]["leaseTransitions"], 1);
}

json NodeWithGpu() {
  return {
      {"metadata",
       {{"name", "n"},
        {"annotations",
         {{core::kAnnotationNodeRegister,
           R"([{"id":"GPU-1","count":10,"devmem":20000,"devcore":100,"type":"NVIDIA-A100","health":true}])"}}}}},
      {"status", {{"allocatable", {{"nvidia.com/gpu", "10"}}}}}};
}

// Issue 33 item 8: leadership is the last successful renew, not a flag set per round. A
// leader frozen (no round runs) past the lease duration refuses as soon as its own clock says
// so — before any candidate took over and before its next round — and the extender's writes,
// guarded by CheckLeader, refuse with it: no lock, no annotation, no Binding.
TEST(LeaderTest, AFrozenLeaderRefusesToWriteOnceItsLastRenewIsALeaseDurationOld) {
  fakes::FakeApiServer api;
  base::ManualClock clock(std::chrono::system_clock::from_time_t(1772446504));
  k8s::Config config;
  config.server = api.url();
  auto client = std::move(k8s::Client::Create(config, {}, &clock).value());
  LeaderElectionConfig cfg{"fracgpu-system", "fracgpu-scheduler", "a", std::chrono::seconds(15),
                           std::chrono::seconds(2)};
  LeaderElector a(client.get(), &clock, cfg);
  EXPECT_FALSE(a.is_leader());
  EXPECT_EQ(a.CheckLeader().code(), StatusCode::kUnavailable);
  ASSERT_TRUE(a.TryAcquireOrRenew());
  EXPECT_TRUE(a.CheckLeader().ok());
  clock.Advance(std::chrono::seconds(14));
  EXPECT_TRUE(a.is_leader());  // 14 s since the renew: still within the lease
  clock.Advance(std::chrono::seconds(1));
  Status st = a.CheckLeader();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("leadership lapsed: the last successful renew of lease "
                              "fracgpu-system/fracgpu-scheduler was 15000 ms ago"),
            std::string::npos)
      << st.message();
  EXPECT_FALSE(a.is_leader());

  // The extender, its writes guarded by the elector: a bind refused, nothing written.
  api.Put("nodes",
          {{"metadata", {{"name", "n"}, {"annotations", NodeWithGpu()["metadata"]["annotations"]}}},
           {"status", {{"allocatable", {{"nvidia.com/gpu", "10"}}}}}});
  json pod = api.Put(
      "pods",
      {{"metadata", {{"name", "p"}, {"namespace", "ns"}}},
       {"spec",
        {{"schedulerName", "fracgpu-scheduler"},
         {"containers",
          {{{"name", "c"}, {"resources", {{"limits", {{"nvidia.com/gpumem", "1000"}}}}}}}}}}});
  ClusterState state;
  ASSERT_TRUE(state.UpsertNode(NodeWithGpu()).ok());
  ExtenderConfig ext_cfg;
  ext_cfg.write_guard = [&] { return a.CheckLeader(); };
  Extender ext(ext_cfg, &state, client.get(), nullptr, nullptr, &clock);
  ExtenderBindingArgs args{"p", "ns", k8s::Uid(pod), "n"};
  json b = ext.Bind(args);
  EXPECT_NE(b["Error"].get<std::string>().find("leadership lapsed"), std::string::npos) << b.dump();
  EXPECT_FALSE(k8s::Annotation(*api.Get("nodes", "", "n"), core::kAnnotationNodeLock));
  EXPECT_FALSE(k8s::Annotation(*api.Get("pods", "ns", "p"), core::kAnnotationVgpuNode));
  EXPECT_EQ(k8s::PodNodeName(*api.Get("pods", "ns", "p")), "");
  EXPECT_FALSE(state.Allocation(k8s::Uid(pod)));
  // A renew makes it leader again; the bind goes through.
  ASSERT_TRUE(a.TryAcquireOrRenew());
  EXPECT_EQ(ext.Bind(args)["Error"], "");
  EXPECT_EQ(k8s::PodNodeName(*api.Get("pods", "ns", "p")), "n");
}

// Pod ns/p (UID `uid`) holding `mib` MiB of node n's GPU-1.
PodAllocation OnGpu1(const std::string& uid, int64_t mib) {
  PodAllocation a;
  a.key = "ns/p";
  a.uid = uid;
  a.node = "n";
  a.grants = {{{"GPU-1", "NVIDIA", mib, 0}}};
  return a;
}

TEST(StateTest, InitContainersCollapseAndShrinkWhenFinished) {
  ClusterState state;
  ASSERT_TRUE(state.UpsertNode(NodeWithGpu()).ok());
  json pod = {
      {"metadata",
       {{"name", "p"},
        {"namespace", "ns"},
        {"uid", "u1"},
        {"annotations",
         {{core::kAnnotationVgpuNode, "n"},
          {core::kAnnotationVgpuDevicesAllocated,
           "GPU-1,NVIDIA,5000,10:;GPU-1,NVIDIA,2000,20:;GPU-1,NVIDIA,1000,5:;"}}}}},
      {"spec",
       {{"initContainers", {{{"name", "i"}}}}, {"containers", {{{"name", "a"}}, {{"name", "b"}}}}}},
      {"status", {{"phase", "Pending"}}}};
  ASSERT_TRUE(state.UpsertPod(pod).ok());
  auto gpu = state.Node("n")->gpus[0];
  // max(init 5000, apps 2000+1000) MiB; max(10, 20+5) %; slots max(1, 2).
  EXPECT_EQ(gpu.used_mem_mib, 5000);
  EXPECT_EQ(gpu.used_cores, 25);
  EXPECT_EQ(gpu.used, 2);
  pod["status"]["initContainerStatuses"] = {
      {{"name", "i"}, {"state", {{"terminated", {{"exitCode", 0}}}}}}};
  ASSERT_TRUE(state.UpsertPod(pod).ok());
  gpu = state.Node("n")->gpus[0];
  EXPECT_EQ(gpu.used_mem_mib, 3000);
  EXPECT_EQ(gpu.used_cores, 25);
  pod["status"]["phase"] = "Failed";
  ASSERT_TRUE(state.UpsertPod(pod).ok());
  EXPECT_EQ(state.Node("n")->gpus[0].used_mem_mib, 0);
}

TEST(StateTest, NodeRulesAndBadAnnotations) {
  ClusterState state;
  json node = NodeWithGpu();
  node["status"]["allocatable"]["nvidia.com/gpu"] = "0";  // device plugin gone
  ASSERT_TRUE(state.UpsertNode(node).ok());
  EXPECT_FALSE(state.Node("n"));
  node["status"]["allocatable"]["nvidia.com/gpu"] = "10";
  node["metadata"]["annotations"][kAnnotationCordon] = " GPU-1 ,";
  ASSERT_TRUE(state.UpsertNode(node).ok());
  ASSERT_TRUE(state.Node("n"));
  EXPECT_TRUE(state.Node("n")->gpus[0].cordoned);
  node["metadata"]["annotations"][core::kAnnotationNodeRegister] =
      "[{\"id\":\"GPU-1\",\"devmem\":-5}]";
  Status st = state.UpsertNode(node);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("node n"), std::string::npos);
  EXPECT_FALSE(state.Node("n"));
  json pod = {
      {"metadata",
       {{"name", "p"},
        {"namespace", "ns"},
        {"uid", "u"},
        {"annotations",
         {{core::kAnnotationVgpuNode, "n"}, {core::kAnnotationVgpuDevicesAllocated, "garbage"}}}}}};
  EXPECT_EQ(state.UpsertPod(pod).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(state.Allocations().empty());
}

TEST(StateTest, AssumedDecisionSurvivesAnOlderPodVersion) {
  ClusterState state;
  ASSERT_TRUE(state.UpsertNode(NodeWithGpu()).ok());
  PodAllocation a = OnGpu1("u", 4000);
  ASSERT_TRUE(state.Assume(a).ok());
  json old_version = {{"metadata", {{"name", "p"}, {"namespace", "ns"}, {"uid", "u"}}},
                      {"status", {{"phase", "Pending"}}}};
  ASSERT_TRUE(state.UpsertPod(old_version).ok());
  EXPECT_EQ(state.Node("n")->gpus[0].used_mem_mib, 4000);
  state.Forget("u");
  EXPECT_EQ(state.Node("n")->gpus[0].used_mem_mib, 0);
  a.node = "nope";
  EXPECT_EQ(state.Assume(a).code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace fracgpu::scheduler

namespace fracgpu::scheduler {
namespace {

// A pod with `bind-phase`, its node, bind time and status phase as the watch delivers it.
nlohmann::json BindPhasePod(const std::string& uid, const char* bind_phase,
                            const std::string& phase = "Pending") {
  nlohmann::json pod = {{"metadata",
                         {{"name", "p-" + uid},
                          {"namespace", "ns"},
                          {"uid", uid},
                          {"creationTimestamp", "2026-12-06T10:00:00Z"}}},
                        {"spec", {{"nodeName", "n"}, {"containers", nlohmann::json::array()}}},
                        {"status", {{"phase", phase}}}};
  if (bind_phase != nullptr) {
    pod["metadata"]["annotations"] = {{core::kAnnotationVgpuNode, "n"},
                                      {core::kAnnotationBindPhase, bind_phase},
                                      {core::kAnnotationBindTime, "1764000000"}};
  }
  return pod;
}

// The bind-phase node lock in the state (NodeLockMode::kBindPhase): a pod holds its node while
// the watch shows it `allocating`, Pending and bound there, or from a bind's note until the
// watch shows it leave that state; an event older than the Binding (no bind-phase) changes
// nothing; a failed bind drops only its own note, never a hold the watch shows; a newer pod of
// the same name ends an older one's hold, never the other way round.
TEST(PodLockTest, APodHoldsItsNodeFromTheNoteUntilTheWatchShowsItServedFailedOrGone) {
  ClusterState state;
  const auto epoch = std::chrono::system_clock::time_point{};
  EXPECT_FALSE(state.PodLockOf("n", ""));
  using Hold = ClusterState::Hold;
  ClusterState::PodLock other;
  EXPECT_EQ(state.HoldNode("u1", {"n", "ns/p-u1", epoch}, &other), Hold::kTaken);
  ASSERT_TRUE(state.PodLockOf("n", ""));
  // Another pod's bind on the node meets the hold, and records nothing.
  EXPECT_EQ(state.HoldNode("u0", {"n", "ns/p-u0", epoch}, &other), Hold::kHeldByOther);
  EXPECT_EQ(other.key, "ns/p-u1");
  EXPECT_EQ(state.PodLockOf("n", "")->key, "ns/p-u1");
  EXPECT_FALSE(state.PodLockOf("n", "u1"));  // the holder itself is not held off
  EXPECT_FALSE(state.PodLockOf("other-node", ""));
  EXPECT_EQ(state.PodLockedNodes(), std::set<std::string>{"n"});
  // A second bind of the same pod (its first reply lost) changes nothing.
  EXPECT_EQ(state.HoldNode("u1", {"other-node", "ns/p-u1", epoch}, &other), Hold::kAlreadyHolding);
  EXPECT_EQ(state.PodLockedNodes(), std::set<std::string>{"n"});
  // The watch's copy from before the Binding: still held.
  (void)state.UpsertPod(BindPhasePod("u1", nullptr));
  EXPECT_TRUE(state.PodLockOf("n", ""));
  // Seen allocating: held, since the bind time it carries; a failed bind's undo (its note
  // only) and Forget (the decision) leave a hold the watch shows alone.
  (void)state.UpsertPod(BindPhasePod("u1", core::kBindPhaseAllocating));
  ASSERT_TRUE(state.PodLockOf("n", ""));
  EXPECT_TRUE(state.PodLockOf("n", "")->seen);
  EXPECT_EQ(state.PodLockOf("n", "")->since,
            std::chrono::system_clock::time_point(std::chrono::seconds(1764000000)));
  state.ForgetPodLockNote("u1", "n");
  state.Forget("u1");
  EXPECT_TRUE(state.PodLockOf("n", ""));
  // Served by the device plugin: released.
  (void)state.UpsertPod(BindPhasePod("u1", core::kBindPhaseSuccess));
  EXPECT_FALSE(state.PodLockOf("n", ""));
  EXPECT_TRUE(state.PodLockedNodes().empty());

  // A pod listed allocating (a restart rebuilds the holds from the API), then failed.
  (void)state.UpsertPod(BindPhasePod("u2", core::kBindPhaseAllocating));
  EXPECT_EQ(state.PodLockOf("n", "")->key, "ns/p-u2");
  (void)state.UpsertPod(BindPhasePod("u2", core::kBindPhaseFailed));
  EXPECT_FALSE(state.PodLockOf("n", ""));
  // Allocating but no longer Pending (kubelet refused it: Failed), terminating, or not bound
  // to the node its annotation names: no hold.
  (void)state.UpsertPod(BindPhasePod("u3", core::kBindPhaseAllocating, "Failed"));
  EXPECT_FALSE(state.PodLockOf("n", ""));
  nlohmann::json deleting = BindPhasePod("u4", core::kBindPhaseAllocating);
  deleting["metadata"]["deletionTimestamp"] = "2026-12-06T10:00:00Z";
  (void)state.UpsertPod(deleting);
  EXPECT_FALSE(state.PodLockOf("n", ""));
  nlohmann::json unbound = BindPhasePod("u4b", core::kBindPhaseAllocating);
  unbound["spec"].erase("nodeName");
  (void)state.UpsertPod(unbound);
  EXPECT_FALSE(state.PodLockOf("n", ""));
  // Removed: released. A pod of the same name with a new UID (deleted and created again while
  // the watch was away): the old one's hold is gone.
  (void)state.UpsertPod(BindPhasePod("u5", core::kBindPhaseAllocating));
  EXPECT_TRUE(state.PodLockOf("n", ""));
  state.RemovePod(BindPhasePod("u5", core::kBindPhaseAllocating));
  EXPECT_FALSE(state.PodLockOf("n", ""));
  nlohmann::json old_pod = BindPhasePod("u6", core::kBindPhaseAllocating);
  (void)state.UpsertPod(old_pod);
  nlohmann::json again = BindPhasePod("u7", nullptr);
  again["metadata"]["name"] = old_pod["metadata"]["name"];
  again["metadata"]["creationTimestamp"] = "2026-12-06T10:05:00Z";
  (void)state.UpsertPod(again);
  EXPECT_FALSE(state.PodLockOf("n", ""));
  // The new pod bound (its note), then a late event of the old pod: the new pod's hold stays.
  EXPECT_EQ(state.HoldNode("u7", {"n", "ns/p-u6", epoch, false, "2026-12-06T10:05:00Z"}, &other),
            Hold::kTaken);
  old_pod["metadata"]["deletionTimestamp"] = "2026-12-06T10:04:00Z";
  (void)state.UpsertPod(old_pod);
  ASSERT_TRUE(state.PodLockOf("n", ""));
  EXPECT_EQ(state.PodLockOf("n", "")->created, "2026-12-06T10:05:00Z");
  state.RemovePod(again);
  // A failed bind's note goes with its undo.
  EXPECT_EQ(state.HoldNode("u8", {"n", "ns/p-u8", epoch}, &other), Hold::kTaken);
  state.ForgetPodLockNote("u8", "n");
  EXPECT_FALSE(state.PodLockOf("n", ""));
}

// The reservation's record: an allocation already there (a bind's decision, the watch's) is
// never moved or replaced; with none, the same as Assume.
TEST(StateTest, AssumeIfAbsentNeverReplacesAnAllocation) {
  ClusterState state;
  ASSERT_TRUE(state.UpsertNode(NodeWithGpu()).ok());
  const PodAllocation bound = OnGpu1("u", 4000);
  ASSERT_TRUE(state.Assume(bound).ok());
  PodAllocation other = OnGpu1("u", 1000);
  Status st = state.AssumeIfAbsent(other);
  EXPECT_EQ(st.code(), StatusCode::kConflict);
  EXPECT_NE(st.message().find("ns/p"), std::string::npos) << st.message();
  EXPECT_EQ(state.Node("n")->gpus[0].used_mem_mib, 4000);
  ASSERT_EQ(state.Allocation("u")->grants, bound.grants);
  // Absent: recorded as assumed, as Assume does; an unknown node is still kNotFound.
  other.uid = "u2";
  other.key = "ns/p2";
  ASSERT_TRUE(state.AssumeIfAbsent(other).ok());
  EXPECT_EQ(state.Node("n")->gpus[0].used_mem_mib, 5000);
  EXPECT_TRUE(state.Allocation("u2")->assumed);
  other.uid = "u3";
  other.node = "nope";
  EXPECT_EQ(state.AssumeIfAbsent(other).code(), StatusCode::kNotFound);
  EXPECT_FALSE(state.Allocation("u3"));
}

// Locked's view answers what the locking methods answer, in one shared section.
TEST(StateTest, TheLockedViewAnswersAsTheMethodsDo) {
  ClusterState state;
  ASSERT_TRUE(state.UpsertNode(NodeWithGpu()).ok());
  const PodAllocation a = OnGpu1("u", 4000);
  ASSERT_TRUE(state.Assume(a).ok());
  const auto now = std::chrono::system_clock::from_time_t(1772446504);
  state.NoteNodeLock("m", now - std::chrono::seconds(1), now);
  state.NoteNodeLock("old", now - std::chrono::seconds(60),
                     now - ClusterState::kLockNoteTtl - std::chrono::seconds(1));
  ClusterState::PodLock held;
  held.node = "n";
  held.key = "ns/q";
  ASSERT_EQ(state.HoldNode("uq", held, nullptr), ClusterState::Hold::kTaken);
  state.Locked([&](const ClusterState::View& v) {
    const PodAllocation* found = v.FindAllocation("u");
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(found->grants, a.grants);
    EXPECT_TRUE(found->assumed);
    EXPECT_EQ(v.FindAllocation("absent"), nullptr);
    EXPECT_EQ(v.NodeLockTimes(now), (std::map<std::string, std::chrono::system_clock::time_point>{
                                        {"m", now - std::chrono::seconds(1)}}));
    EXPECT_EQ(v.PodLockedNodes(), std::set<std::string>{"n"});
    EXPECT_EQ(v.model().Node("n")->gpus[0].used_mem_mib, 4000);
  });
  EXPECT_EQ(state.PodLockedNodes(), std::set<std::string>{"n"});
}

// With a signing key, only a pod whose allocation verifies holds its node: a pod carrying the
// annotations without a valid signature (forged, or written by another scheduler) holds none.
TEST(PodLockTest, APodWhoseAllocationDoesNotVerifyHoldsNoNode) {
  ClusterState state;
  state.SetSigningKey("key");
  nlohmann::json forged = BindPhasePod("u1", core::kBindPhaseAllocating);
  forged["metadata"]["annotations"][core::kAnnotationVgpuDevicesAllocated] =
      "GPU-0,NVIDIA,1000,0:;";
  forged["metadata"]["annotations"][core::kAnnotationAllocationSignature] = "bm90IGEgc2lnbmF0dXJl";
  (void)state.UpsertPod(forged);
  EXPECT_FALSE(state.PodLockOf("n", ""));
  nlohmann::json signed_pod = forged;
  signed_pod["metadata"]["annotations"][core::kAnnotationAllocationSignature] =
      core::SignAllocation("key", "u1", "n", "GPU-0,NVIDIA,1000,0:;");
  (void)state.UpsertPod(signed_pod);
  EXPECT_TRUE(state.PodLockOf("n", ""));
}

}  // namespace
}  // namespace fracgpu::scheduler
