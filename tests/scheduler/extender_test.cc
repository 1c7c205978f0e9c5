// The scheduler service over real HTTP against the fake API server: filter / prioritize /
// bind in kube-scheduler's shapes, concurrent binds, restart rebuild, 410 recovery, bad bodies.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "base/clock.h"
#include "core/annotations.h"
#include "core/codec.h"
#include "core/node_lock_codec.h"
#include "core/request.h"
#include "core/signature.h"
#include "fake_apiserver.h"
#include "k8s/objects.h"
#include "manifest.h"
#include "node/config.h"
#include "scheduler/service.h"
#include "type_swap.h"

namespace fracgpu::scheduler {
namespace {

using nlohmann::json;

constexpr char kKey[] = "test-signing-key";

json GpuNode(const std::string& name, const std::vector<std::pair<std::string, int64_t>>& gpus,
             int count = 10) {
  std::vector<core::DeviceInfo> devices;
  int index = 0;
  for (const auto& [uuid, mem] : gpus) {
    core::DeviceInfo d;
    d.uuid = uuid;
    d.index = index++;
    d.count = count;
    d.devmem_mib = mem;
    d.devcore = 100;
    d.type = "NVIDIA-NVIDIA A100-SXM4-80GB";
    devices.push_back(d);
  }
  return {{"metadata",
           {{"name", name},
            {"annotations", {{core::kAnnotationNodeRegister, core::EncodeNodeRegister(devices)}}}}},
          {"status", {{"allocatable", {{"nvidia.com/gpu", std::to_string(gpus.size() * count)}}}}}};
}

json GpuPod(const std::string& name, json limits) {
  return {{"metadata", {{"name", name}, {"namespace", "ml"}}},
          {"spec",
           {{"schedulerName", "fracgpu-scheduler"},
            {"containers", {{{"name", "c"}, {"resources", {{"limits", limits}}}}}}}}};
}

// Gives `pod` UID `uid` and the allocation `value` on `node`, signed with kKey as Bind signs.
void SignedAllocation(json& pod, const std::string& uid, const std::string& node,
                      const std::string& value) {
  pod["metadata"]["uid"] = uid;
  pod["metadata"]["annotations"] = {
      {core::kAnnotationVgpuNode, node},
      {core::kAnnotationVgpuDevicesAllocated, value},
      {core::kAnnotationAllocationSignature, core::SignAllocation(kKey, uid, node, value)}};
}

// The allocation recorded on a pod, decoded.
core::PodGrants GrantsOf(const json& pod) {
  auto v = k8s::Annotation(pod, core::kAnnotationVgpuDevicesAllocated);
  if (!v) return {};
  auto g = core::DecodePodGrants(*v);
  return g.ok() ? *g : core::PodGrants{};
}

// Makes a hang fail: a test still running after `limit` aborts the process with its name,
// so CI reports a failure instead of waiting for ctest's timeout.
class Watchdog {
 public:
  explicit Watchdog(std::chrono::seconds limit) {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    thread_ = std::thread([this, limit, name] {
      std::unique_lock<std::mutex> lock(mu_);
      if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
        std::fprintf(stderr, "FAILED: %s still running after %lld s (hang); aborting\n",
                     name.c_str(), static_cast<long long>(limit.count()));
        std::abort();
      }
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

class ExtenderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    k8s::Config config;
    config.server = api_.url();
    auto c = k8s::Client::Create(config);
    ASSERT_TRUE(c.ok());
    client_ = std::move(*c);
  }
  std::unique_ptr<SchedulerService> StartService(bool hami_metrics = true,
                                                 bool legacy_metrics = false,
                                                 const core::ResourceNames& names = {},
                                                 bool binpack_avoids_busy_nodes = false,
                                                 bool filter_returns_every_fitting_node = false) {
    SchedulerOptions o;
    o.webhook.names = names;  // the service gives the extender the webhook's names
    o.extender.binpack_avoids_busy_nodes = binpack_avoids_busy_nodes;
    o.extender.filter_returns_every_fitting_node = filter_returns_every_fitting_node;
    o.extender.signing_key = kKey;
    o.hami_metrics = hami_metrics;
    o.legacy_metrics = legacy_metrics;
    o.version = "9.8.7";
    auto s = std::make_unique<SchedulerService>(o, client_.get());
    EXPECT_TRUE(s->Start().ok());
    EXPECT_TRUE(s->WaitForSync(std::chrono::seconds(10)));
    return s;
  }
  json Post(SchedulerService& s, const std::string& path, const std::string& body,
            int want_status = 200) {
    httplib::Client http("127.0.0.1", s.port());
    http.set_connection_timeout(10, 0);
    http.set_read_timeout(30, 0);
    http.set_write_timeout(30, 0);
    auto res = http.Post(path.c_str(), body, "application/json");
    EXPECT_TRUE(res) << path << " error " << httplib::to_string(res.error());
    if (!res) return json();
    EXPECT_EQ(res->status, want_status) << res->body;
    return json::parse(res->body, nullptr, false);
  }
  json Filter(SchedulerService& s, const json& pod, const std::vector<std::string>& nodes) {
    return Post(s, "/filter", json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", nodes}}.dump());
  }
  json Bind(SchedulerService& s, const json& pod, const std::string& node) {
    return Post(s, "/bind",
                json{{"PodName", k8s::Name(pod)},
                     {"PodNamespace", "ml"},
                     {"PodUID", k8s::Uid(pod)},
                     {"Node", node}}
                    .dump());
  }
  // Waits until the service's cache shows `mib` MiB used on GPU `uuid` of `node`.
  bool WaitUsed(SchedulerService& s, const std::string& node, const std::string& uuid,
                int64_t mib) {
    return api_.WaitFor([&] {
      auto n = s.state().Node(node);
      if (!n) return false;
      for (const auto& g : n->gpus) {
        if (g.info.uuid == uuid) return g.used_mem_mib == mib;
      }
      return false;
    });
  }
  // Sets HAMi's node lock on `node` for pod ml/`pod`, taken now (as a scheduler would).
  void LockNodeNow(const std::string& node, const std::string& pod) {
    api_.Patch("nodes", "", node,
               {{"metadata",
                 {{"annotations",
                   {{core::kAnnotationNodeLock,
                     core::EncodeNodeLock({std::chrono::floor<std::chrono::seconds>(
                                               std::chrono::system_clock::now()),
                                           "ml", pod})}}}}}});
  }
  // "METHOD path" of each request to the API server since the `before`-th whose path is one
  // of `paths` (exactly), in order.
  std::vector<std::string> CallsSince(size_t before, const std::set<std::string>& paths) {
    std::vector<std::string> calls;
    const auto all = api_.Requests();
    for (size_t i = before; i < all.size(); ++i) {
      if (paths.count(all[i].path) != 0) calls.push_back(all[i].method + " " + all[i].path);
    }
    return calls;
  }
  // Plays the device plugin: releases the node lock after "Allocate".
  void ReleaseLock(const std::string& node) {
    api_.Patch("nodes", "", node,
               {{"metadata", {{"annotations", {{core::kAnnotationNodeLock, nullptr}}}}}});
  }

  // Declared first, destroyed last: it also covers the services' and the fake's shutdown.
  Watchdog watchdog_{std::chrono::seconds(120)};
  fakes::FakeApiServer api_;
  std::unique_ptr<k8s::Client> client_;
};

TEST_F(ExtenderTest, FilterPrioritizeBindInKubeSchedulerShapes) {
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 16000}}));
  api_.Put("nodes", GpuNode("node-b", {{"GPU-b0", 40000}, {"GPU-b1", 40000}}));
  api_.Put("nodes", {{"metadata", {{"name", "cpu-only"}}}});
  json busy = GpuPod("busy", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "8000"}});
  SignedAllocation(busy, "uid-busy", "node-a", "GPU-a0,NVIDIA,8000,0:;");
  busy["spec"]["nodeName"] = "node-a";
  api_.Put("pods", busy);
  json pod =
      api_.Put("pods", GpuPod("train", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "10k"}}));
  auto svc = StartService();
  ASSERT_TRUE(WaitUsed(*svc, "node-a", "GPU-a0", 8000));

  json f = Filter(*svc, pod, {"node-a", "node-b", "cpu-only", "ghost"});
  EXPECT_EQ(f["NodeNames"], json::array({"node-b"}));
  EXPECT_EQ(f["Error"], "");
  EXPECT_NE(f["FailedNodes"]["node-a"].get<std::string>().find("CardInsufficientMemory"),
            std::string::npos)
      << f.dump();
  // No GPUs at all (cpu-only) or not known (ghost): unresolvable, preemption cannot help.
  EXPECT_EQ(f["FailedNodes"].size(), 1u) << f.dump();
  EXPECT_TRUE(f["FailedAndUnresolvableNodes"].contains("cpu-only")) << f.dump();
  EXPECT_TRUE(f["FailedAndUnresolvableNodes"].contains("ghost")) << f.dump();
  EXPECT_TRUE(f["Nodes"].is_null());

  // A pod without fracgpu resources passes every node untouched.
  json plain = GpuPod("plain", json::object());
  EXPECT_EQ(Filter(*svc, plain, {"cpu-only", "ghost"})["NodeNames"],
            json::array({"cpu-only", "ghost"}));

  // Prioritize: binpack prefers the fuller node (node-a 8000/16000 used vs node-b empty).
  json p =
      Post(*svc, "/prioritize", json{{"Pod", pod}, {"NodeNames", {"node-a", "node-b"}}}.dump());
  ASSERT_TRUE(p.is_array()) << p.dump();
  std::map<std::string, int> scores;
  for (const auto& e : p) scores[e["Host"]] = e["Score"];
  EXPECT_EQ(scores["node-a"], 10);
  EXPECT_EQ(scores["node-b"], 0);

  json b = Bind(*svc, pod, "node-b");
  EXPECT_EQ(b["Error"], "") << b.dump();
  json bound = *api_.Get("pods", "ml", "train");
  EXPECT_EQ(k8s::PodNodeName(bound), "node-b");
  EXPECT_EQ(k8s::Annotation(bound, core::kAnnotationVgpuNode), "node-b");
  EXPECT_EQ(k8s::Annotation(bound, core::kAnnotationBindPhase), "allocating");
  core::PodGrants grants = GrantsOf(bound);
  ASSERT_EQ(grants.size(), 1u);
  ASSERT_EQ(grants[0].size(), 1u);
  EXPECT_EQ(grants[0][0].mem_mib, 10000);
  EXPECT_EQ(grants[0][0].cores_percent, 0);
  EXPECT_TRUE(grants[0][0].uuid == "GPU-b0" || grants[0][0].uuid == "GPU-b1");
  EXPECT_EQ(k8s::Annotation(bound, core::kAnnotationVgpuDevicesToAllocate),
            k8s::Annotation(bound, core::kAnnotationVgpuDevicesAllocated));
  EXPECT_TRUE(
      core::VerifyAllocation(kKey, k8s::Uid(bound), "node-b",
                             *k8s::Annotation(bound, core::kAnnotationVgpuDevicesAllocated),
                             *k8s::Annotation(bound, core::kAnnotationAllocationSignature)));
  auto lock = k8s::Annotation(*api_.Get("nodes", "", "node-b"), core::kAnnotationNodeLock);
  ASSERT_TRUE(lock);
  EXPECT_NE(lock->find(",ml,train"), std::string::npos);
  auto hs = k8s::Annotation(*api_.Get("nodes", "", "node-a"), core::kAnnotationNodeHandshake);
  ASSERT_TRUE(hs);
  EXPECT_EQ(hs->rfind("Requesting_", 0), 0u);
  ASSERT_TRUE(svc->events().Flush(std::chrono::seconds(30)));
  bool succeeded = false;
  for (const auto& e : api_.List("events")) succeeded |= e["reason"] == "BindingSucceed";
  EXPECT_TRUE(succeeded);

  // Binding again (a retry after success) is refused without touching the decision.
  json again = Bind(*svc, bound, "node-a");
  EXPECT_NE(again["Error"].get<std::string>().find("already bound"), std::string::npos);
  EXPECT_EQ(k8s::Annotation(*api_.Get("pods", "ml", "train"), core::kAnnotationVgpuNode), "node-b");
}

// The device config's custom resource names and memoryFactor reach /filter and /bind (what
// `fracgpu scheduler --device-config-file` loads): 20 units × 1024 MiB do not fit a 16,000 MiB
// card (20 MiB would), and the grant records 20,480 MiB.
TEST_F(ExtenderTest, DeviceConfigNamesAndMemoryFactorReachFilterAndBind) {
  auto config = node::ParseDeviceConfigYaml(R"(
nvidia:
  resourceCountName: example.com/vgpu
  resourceMemoryName: example.com/vgpu-memory
  memoryFactor: 1024
)");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  for (const char* name : {"node-a", "node-b"}) {
    json node = GpuNode(name, {{std::string("GPU-") + name, name[5] == 'a' ? 16000 : 40000}});
    node["status"]["allocatable"] = {{"example.com/vgpu", "10"}};
    api_.Put("nodes", node);
  }
  json pod = api_.Put(
      "pods", GpuPod("train", {{"example.com/vgpu", "1"}, {"example.com/vgpu-memory", "20"}}));
  auto svc = StartService(true, false, config->resources);
  json f = Filter(*svc, pod, {"node-a", "node-b"});
  EXPECT_EQ(f["NodeNames"], json::array({"node-b"})) << f.dump();
  EXPECT_NE(f["FailedNodes"]["node-a"].get<std::string>().find("CardInsufficientMemory"),
            std::string::npos)
      << f.dump();
  json b = Bind(*svc, pod, "node-b");
  EXPECT_EQ(b["Error"], "") << b.dump();
  core::PodGrants grants = GrantsOf(*api_.Get("pods", "ml", "train"));
  ASSERT_EQ(grants.size(), 1u);
  ASSERT_EQ(grants[0].size(), 1u);
  EXPECT_EQ(grants[0][0].mem_mib, 20480);
  // The same pod under nvidia.com/* names asks for nothing here: not a GPU pod of this cluster.
  json plain = GpuPod("plain", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "20"}});
  EXPECT_EQ(Filter(*svc, plain, {"node-a"})["NodeNames"], json::array({"node-a"}));
}

TEST_F(ExtenderTest, PrioritizeScoresAFragmentationAwarePodByFgd) {
  // One 80,000 MiB GPU per node. node-a holds a 50 % pod, node-c a 70 % one, node-b is idle.
  // The incoming pod asks for 50 %: M = {500: 2/3, 700: 1/3} (the running pods and it).
  // F of one GPU with leftover L = Σ p_m · L over m > L: node-a 500 → 0 takes ΔF = +166.7
  // (score 54), node-b 0 → 166.7 ΔF = −166.7 (score 45), node-c does not fit (30 % left). So
  // FGD puts node-a first, where spread, the pod's node policy, puts the idle node-b first.
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 80000}}));
  api_.Put("nodes", GpuNode("node-b", {{"GPU-b0", 80000}}));
  api_.Put("nodes", GpuNode("node-c", {{"GPU-c0", 80000}}));
  json half = GpuPod("half", {{"nvidia.com/gpu", "1"}});
  SignedAllocation(half, "uid-half", "node-a", "GPU-a0,NVIDIA,40000,50:;");
  half["spec"]["nodeName"] = "node-a";
  api_.Put("pods", half);
  json most = GpuPod("most", {{"nvidia.com/gpu", "1"}});
  SignedAllocation(most, "uid-most", "node-c", "GPU-c0,NVIDIA,56000,70:;");
  most["spec"]["nodeName"] = "node-c";
  api_.Put("pods", most);
  auto svc = StartService();
  ASSERT_TRUE(WaitUsed(*svc, "node-a", "GPU-a0", 40000));
  ASSERT_TRUE(WaitUsed(*svc, "node-c", "GPU-c0", 56000));

  auto scores_of = [&](const json& pod) {
    json p = Post(*svc, "/prioritize",
                  json{{"Pod", pod}, {"NodeNames", {"node-a", "node-b", "node-c"}}}.dump());
    std::map<std::string, int> scores;
    for (const auto& e : p) scores[e["Host"]] = e["Score"];
    return scores;
  };
  json pod = GpuPod(
      "train",
      {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "50"}, {"nvidia.com/gpumem", "40000"}});
  pod["metadata"]["annotations"] = {{core::kAnnotationNodePolicy, "spread"}};
  // Spread over HAMi's node scores 10 × (Σused/Σcount + Σcores/Σdevcore + Σmem/Σdevmem):
  // node-b 0, node-a 10 × (0.1 + 0.5 + 0.5) = 11, node-c 15; round(10 × (15 − s) / 15).
  auto spread = scores_of(pod);
  EXPECT_EQ(spread["node-b"], 10);
  EXPECT_EQ(spread["node-a"], 3);
  EXPECT_EQ(spread["node-c"], 0);

  pod["metadata"]["annotations"][core::kAnnotationGpuPolicy] = "fragmentation-aware";
  auto fgd = scores_of(pod);
  EXPECT_EQ(fgd["node-a"], 10);
  EXPECT_EQ(fgd["node-b"], 0);
  EXPECT_EQ(fgd["node-c"], 0);  // does not fit
}

TEST_F(ExtenderTest, LowerCaseKeysAndFullNodesAreAccepted) {
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 16000}}));
  json pod = api_.Put("pods", GpuPod("p", {{"nvidia.com/gpumem", "1000"}}));
  auto svc = StartService();
  json node = {{"metadata", {{"name", "node-a"}, {"labels", {{"zone", "z1"}}}}}};
  json f = Post(*svc, "/filter", json{{"pod", pod}, {"nodes", {{"items", {node}}}}}.dump());
  // Answered in the request's form: the node object as sent, no NodeNames.
  EXPECT_EQ(f["Nodes"], json({{"items", {node}}})) << f.dump();
  EXPECT_TRUE(f["NodeNames"].is_null()) << f.dump();
}

TEST_F(ExtenderTest, UnfitFilterRecordsFilteringFailedEvent) {
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 1000}}));
  json pod = api_.Put("pods", GpuPod("big", {{"nvidia.com/gpumem", "5000"}}));
  auto svc = StartService();
  json f = Filter(*svc, pod, {"node-a"});
  EXPECT_EQ(f["NodeNames"], json::array());
  ASSERT_TRUE(svc->events().Flush(std::chrono::seconds(30)));
  auto events = api_.List("events");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["reason"], "FilteringFailed");
  EXPECT_NE(events[0]["message"].get<std::string>().find("node-a"), std::string::npos);
}

TEST_F(ExtenderTest, BindFailureRollsBackLockStateAndAnnotations) {
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 16000}}));
  json pod = api_.Put("pods", GpuPod("p", {{"nvidia.com/gpumem", "1000"}}));
  auto svc = StartService();
  api_.FailNext("POST", "/api/v1/namespaces/ml/pods/p/binding", 500);
  json b = Bind(*svc, pod, "node-a");
  EXPECT_NE(b["Error"].get<std::string>(), "");
  json after = *api_.Get("pods", "ml", "p");
  EXPECT_FALSE(k8s::Annotation(after, core::kAnnotationVgpuNode));
  EXPECT_FALSE(k8s::Annotation(after, core::kAnnotationVgpuDevicesAllocated));
  EXPECT_FALSE(k8s::Annotation(*api_.Get("nodes", "", "node-a"), core::kAnnotationNodeLock));
  // The cache forgets the allocation (the decision travels in the Binding, which failed, so
  // the pod never carried it).
  EXPECT_TRUE(api_.WaitFor([&] { return !svc->state().Allocation(k8s::Uid(pod)); }));
  EXPECT_TRUE(WaitUsed(*svc, "node-a", "GPU-a0", 0));
  // A later bind succeeds.
  EXPECT_EQ(Bind(*svc, pod, "node-a")["Error"], "");
}

TEST_F(ExtenderTest, LockHeldByAnotherPodIsAConflict) {
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 16000}}));
  api_.Put("pods", GpuPod("holder", {{"nvidia.com/gpumem", "1000"}}));
  json pod = api_.Put("pods", GpuPod("p", {{"nvidia.com/gpumem", "1000"}}));
  auto svc = StartService();
  LockNodeNow("node-a", "holder");
  json b = Bind(*svc, pod, "node-a");
  EXPECT_NE(b["Error"].get<std::string>().find("locked"), std::string::npos) << b.dump();
  EXPECT_EQ(svc->metrics().Value("fracgpu_binds_total", {{"result", "conflict"}}), 1);
  // The holder disappears: the lock is taken over.
  api_.Remove("pods", "ml", "holder");
  EXPECT_EQ(Bind(*svc, pod, "node-a")["Error"], "");
}

// Issue 37 item 1: through the service's node watch, a node whose lock is held scores 0 at
// /prioritize (binpack with --binpack-avoid-busy-nodes), and once the device plugin releases it
// the node ranks by the policy again.
TEST_F(ExtenderTest, ANodeLockSeenThroughTheWatchScoresZeroUntilReleased) {
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 16000}}));
  api_.Put("nodes", GpuNode("node-b", {{"GPU-b0", 16000}}));
  json first = api_.Put("pods", GpuPod("first", {{"nvidia.com/gpumem", "1000"}}));
  json pod = api_.Put("pods", GpuPod("p", {{"nvidia.com/gpumem", "1000"}}));
  auto svc = StartService(true, false, {}, true);
  auto scores = [&] {
    std::map<std::string, int64_t> out;
    json r =
        Post(*svc, "/prioritize", json{{"Pod", pod}, {"NodeNames", {"node-a", "node-b"}}}.dump());
    for (const auto& e : r) out[e["Host"].get<std::string>()] = e["Score"].get<int64_t>();
    return out;
  };
  // `first` bound to node-a: node-a is fuller (binpack) but locked until "Allocate".
  ASSERT_EQ(Bind(*svc, first, "node-a")["Error"], "");
  ASSERT_TRUE(api_.WaitFor([&] { return svc->state().NodeLockTime("node-a").has_value(); }));
  auto s = scores();
  EXPECT_EQ(s["node-a"], 0);
  EXPECT_GE(s["node-b"], 1);
  ReleaseLock("node-a");
  ASSERT_TRUE(api_.WaitFor([&] { return !svc->state().NodeLockTime("node-a").has_value(); }));
  // p's own reservation (on node-b, from the call above) was dropped before scoring.
  s = scores();
  EXPECT_EQ(s["node-a"], 10);
  EXPECT_LT(s["node-b"], 10);
}

TEST_F(ExtenderTest, BadBodiesGet400WithAMessageAndNoCrash) {
  auto svc = StartService();
  std::string huge(10 << 20, ' ');
  huge[0] = '{';
  struct Case {
    std::string path, body, want;
  } cases[] = {
      {"/filter", R"({"Pod":{"metadata":)", "not valid JSON"},
      {"/filter", R"({"Pod":"x","NodeNames":[]})", "Pod must be an object"},
      {"/filter", R"({"Pod":{},"NodeNames":[1]})", "NodeNames[0] must be a string"},
      {"/prioritize", R"([1,2])", "must be a JSON object"},
      {"/bind", R"({"PodName":1})", "PodName must be a string"},
      {"/bind", R"({"PodName":"a","PodNamespace":"b","PodUID":"u"})", "Node is missing"},
      {"/bind", R"({"PodName":"a","PodNamespace":"b","Node":"n"})", "PodUID is missing"},
      {"/bind",
       R"({"PodName":"../../../nodes/node-a","PodNamespace":"ml","PodUID":"u","Node":"node-a"})",
       "PodName \"../../../nodes/node-a\" is not a DNS-1123 subdomain"},
      // The attack of issue 15: an annotation value that is an array nested 100,000 deep.
      {"/webhook",
       R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE",)"
       R"("object":{"metadata":{"annotations":{"x":)" +
           std::string(100000, '[') + std::string(100000, ']') + "}}}}}",
       "AdmissionReview body nests objects/arrays deeper than 64 levels"},
      {"/webhook",
       R"({"request":{"uid":"u","operation":"UPDATE","object":{"metadata":{"labels":{"a":1}}},"oldObject":{}}})",
       "AdmissionReview.request.object.metadata.labels[\"a\"] must be a string (Kubernetes "
       "map[string]string), got a "
       "number"},
      {"/filter",
       R"({"Pod":{"metadata":{"annotations":{"x":)" + std::string(100000, '[') +
           std::string(100000, ']') + R"(}}},"NodeNames":["node-a"]})",
       "ExtenderArgs body nests objects/arrays deeper than 64 levels"},
      {"/webhook", R"({"request":{"uid":"x"}})", "operation must be a string"},
      {"/webhook", "{\"kind\":\"AdmissionReview\",\"request\":", "not valid JSON"},
      {"/filter", huge, "the limit of POST /filter is 1048576 bytes"},
      {"/webhook", huge, "the limit of POST /webhook is 3145728 bytes"},
  };
  for (const auto& c : cases) {
    json r = Post(*svc, c.path, c.body, c.body.size() > (1u << 20) ? 413 : 400);
    ASSERT_TRUE(r.is_object()) << c.path;
    EXPECT_NE(r.value("error", "").find(c.want), std::string::npos) << c.path << ": " << r.dump();
  }
  httplib::Client http("127.0.0.1", svc->port());
  auto health = http.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  // The process survived every case and serves a normal request right after.
  json review = {
      {"apiVersion", "admission.k8s.io/v1"},
      {"kind", "AdmissionReview"},
      {"request",
       {{"uid", "ok-1"}, {"operation", "CREATE"}, {"object", {{"metadata", {{"name", "p"}}}}}}}};
  json ok = Post(*svc, "/webhook", review.dump());
  EXPECT_EQ(ok["response"]["uid"], "ok-1");
  EXPECT_EQ(ok["response"]["allowed"], true);
  json f = Filter(*svc, GpuPod("p", {{"nvidia.com/gpumem", "1000"}}), {"node-a"});
  EXPECT_TRUE(f["NodeNames"].is_array()) << f.dump();
}

TEST_F(ExtenderTest, ThirtyTwoConcurrentBindsNeverOverCommitOneGpu) {
  // One GPU of 10,000 MiB; 32 pods of 3,000 MiB: exactly 3 can ever be placed.
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 10000}}, 100));
  std::vector<json> pods;
  for (int i = 0; i < 32; ++i) {
    pods.push_back(api_.Put("pods", GpuPod(std::string("p").append(std::to_string(i)),
                                           {{"nvidia.com/gpumem", "3000"}})));
  }
  auto svc = StartService();
  std::unique_ptr<SchedulerService> restarted;
  SchedulerService* current = svc.get();
  std::set<int> bound;
  for (int round = 0; round < 40; ++round) {
    std::atomic<int> ok{0};
    std::vector<std::thread> threads;
    std::vector<int> pending;
    for (int i = 0; i < 32; ++i) {
      if (!bound.count(i)) pending.push_back(i);
    }
    std::vector<std::string> errors(32);
    for (int i : pending) {
      threads.emplace_back([&, i] {
        json r = Bind(*current, pods[i], "node-a");
        errors[i] = r.is_object() ? r.value("Error", "no Error key") : "no reply";
        if (errors[i].empty()) ++ok;
      });
    }
    for (auto& t : threads) t.join();
    for (int i : pending) {
      if (errors[i].empty()) bound.insert(i);
    }
    EXPECT_LE(ok.load(), 1) << "one bind per node holds the lock until Allocate";
    ReleaseLock("node-a");
    if (round == 1 && !restarted) {
      // A restart in the middle: the new instance rebuilds the usage from the annotations.
      auto before = current->state().Node("node-a")->gpus[0].used_mem_mib;
      svc->Stop();
      restarted = StartService();
      current = restarted.get();
      ASSERT_TRUE(WaitUsed(*current, "node-a", "GPU-a0", before));
    }
    bool all_unfit = true;
    for (int i : pending) {
      if (!bound.count(i) && errors[i].find("no longer fits") == std::string::npos)
        all_unfit = false;
    }
    if (all_unfit && ok == 0) break;
  }
  EXPECT_EQ(bound.size(), 3u);
  int64_t promised = 0;
  for (const auto& p : api_.List("pods")) {
    for (const auto& c : GrantsOf(p)) {
      for (const auto& g : c) promised += g.mem_mib;
    }
  }
  EXPECT_EQ(promised, 9000);
  EXPECT_TRUE(WaitUsed(*current, "node-a", "GPU-a0", 9000));
}

TEST_F(ExtenderTest, RestartRebuildsTheSameUsage) {
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 40000}, {"GPU-a1", 40000}}));
  api_.Put("nodes", GpuNode("node-b", {{"GPU-b0", 40000}}));
  auto svc = StartService();
  int n = 0;
  for (const auto& [node, mem] : std::vector<std::pair<std::string, std::string>>{
           {"node-a", "5000"}, {"node-a", "7000"}, {"node-b", "9000"}, {"node-a", "11000"}}) {
    json pod =
        api_.Put("pods", GpuPod(std::string("r").append(std::to_string(n++)),
                                {{"nvidia.com/gpumem", mem}, {"nvidia.com/gpucores", "20"}}));
    ASSERT_EQ(Bind(*svc, pod, node)["Error"], "");
    ReleaseLock(node);
  }
  auto usage = [](SchedulerService& s) {
    std::map<std::string, std::tuple<int32_t, int64_t, int32_t>> out;
    for (const auto& node : s.state().Nodes()) {
      for (const auto& g : node.gpus) out[g.info.uuid] = {g.used, g.used_mem_mib, g.used_cores};
    }
    return out;
  };
  auto before = usage(*svc);
  int64_t total = 0;
  for (const auto& [u, t] : before) total += std::get<1>(t);
  EXPECT_EQ(total, 32000);
  svc->Stop();
  svc.reset();
  auto again = StartService();
  ASSERT_TRUE(api_.WaitFor([&] { return usage(*again) == before; }));
}

// The hang of a fresh-clone CI run: a service stopped right after Start(), before httplib's
// accept loop had set is_running(), lost the stop and joined a thread blocked in accept()
// forever. Stop right after Start, many times (the watchdog turns a hang into a failure).
TEST_F(ExtenderTest, StopRightAfterStartNeverHangs) {
  SchedulerOptions o;
  o.http.threads = 2;  // the race is before the pool exists; fewer threads keep the test quick
  for (int i = 0; i < 30; ++i) {
    SchedulerService webhook_only(o, nullptr);
    ASSERT_TRUE(webhook_only.Start().ok());
    webhook_only.Stop();
  }
  for (int i = 0; i < 5; ++i) {
    SchedulerService s(o, client_.get());
    ASSERT_TRUE(s.Start().ok());
    s.Stop();  // the informers may be mid-list or mid-watch
  }
}

TEST_F(ExtenderTest, FinishedAndDeletedPodsReleaseTheirSlice) {
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 16000}}));
  json pod = api_.Put("pods", GpuPod("p", {{"nvidia.com/gpumem", "4000"}}));
  json pod2 = api_.Put("pods", GpuPod("q", {{"nvidia.com/gpumem", "2000"}}));
  auto svc = StartService();
  ASSERT_EQ(Bind(*svc, pod, "node-a")["Error"], "");
  ReleaseLock("node-a");
  ASSERT_EQ(Bind(*svc, pod2, "node-a")["Error"], "");
  ASSERT_TRUE(WaitUsed(*svc, "node-a", "GPU-a0", 6000));
  api_.Patch("pods", "ml", "p", {{"status", {{"phase", "Succeeded"}}}});
  ASSERT_TRUE(WaitUsed(*svc, "node-a", "GPU-a0", 2000));
  api_.Remove("pods", "ml", "q");
  ASSERT_TRUE(WaitUsed(*svc, "node-a", "GPU-a0", 0));
}

TEST_F(ExtenderTest, WatchBrokenBy410Recovers) {
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 16000}}));
  json a = GpuPod("a", {{"nvidia.com/gpumem", "1000"}});
  SignedAllocation(a, "uid-a", "node-a", "GPU-a0,NVIDIA,1000,0:;");
  api_.Put("pods", a);
  auto svc = StartService();
  ASSERT_TRUE(WaitUsed(*svc, "node-a", "GPU-a0", 1000));
  // Nodes, pods, ResourceQuotas (scheduler/quota.h) and the ValidatingAdmissionPolicy and its
  // bindings (scheduler/borrower_guard.h) are watched.
  ASSERT_TRUE(api_.WaitFor([&] { return api_.OpenWatches() == 5; }));
  // While the watches are down: one pod goes away, another arrives, and the history is
  // compacted, so the reconnect gets 410 and must relist.
  api_.DropWatches();
  api_.Remove("pods", "ml", "a");
  json b = GpuPod("b", {{"nvidia.com/gpumem", "3000"}});
  SignedAllocation(b, "uid-b", "node-a", "GPU-a0,NVIDIA,3000,0:;");
  api_.Put("pods", b);
  api_.ExpireHistory();
  ASSERT_TRUE(WaitUsed(*svc, "node-a", "GPU-a0", 3000));
}

// The samples of a /metrics scrape: "name{labels}" → value.
std::map<std::string, double> Samples(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    auto sp = line.rfind(' ');
    out[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
  }
  return out;
}

TEST_F(ExtenderTest, MetricsExposeAllocationsAndRequests) {
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 16000}}));
  json pod =
      api_.Put("pods", GpuPod("p", {{"nvidia.com/gpumem", "4096"}, {"nvidia.com/gpucores", "25"}}));
  auto svc = StartService();
  ASSERT_EQ(Bind(*svc, pod, "node-a")["Error"], "");
  httplib::Client http("127.0.0.1", svc->port());
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res);
  const std::string& m = res->body;
  EXPECT_NE(m.find("# TYPE fracgpu_gpu_memory_allocated_bytes gauge"), std::string::npos);
  EXPECT_NE(m.find("fracgpu_gpu_memory_allocated_bytes{node=\"node-a\",device_uuid=\"GPU-a0\","
                   "device_index=\"0\","
                   "device_type=\"NVIDIA-NVIDIA A100-SXM4-80GB\"} 4294967296"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("fracgpu_gpu_core_allocated_ratio{node=\"node-a\",device_uuid=\"GPU-a0\",device_"
                   "index=\"0\","
                   "device_type=\"NVIDIA-NVIDIA A100-SXM4-80GB\"} 0.25"),
            std::string::npos);
  EXPECT_NE(m.find("fracgpu_pod_gpu_memory_allocated_bytes{namespace=\"ml\",pod=\"p\",node=\"node-"
                   "a\",container_index=\"0\","
                   "device_uuid=\"GPU-a0\"} 4294967296"),
            std::string::npos);
  EXPECT_NE(m.find("fracgpu_binds_total{result=\"ok\"} 1"), std::string::npos);
  EXPECT_NE(m.find("fracgpu_http_request_duration_seconds_count{endpoint=\"/bind\"} 1"),
            std::string::npos);
  // The handler thread's CPU beside the latency: one sample each, and a thread cannot run for
  // longer than the wall-clock time it was handling the request.
  auto v = Samples(m);
  EXPECT_EQ(v["fracgpu_http_request_cpu_seconds_count{endpoint=\"/bind\"}"], 1);
  EXPECT_GT(v["fracgpu_http_request_cpu_seconds_sum{endpoint=\"/bind\"}"], 0);
  EXPECT_LE(v["fracgpu_http_request_cpu_seconds_sum{endpoint=\"/bind\"}"],
            v["fracgpu_http_request_duration_seconds_sum{endpoint=\"/bind\"}"]);
  // The latency in three parts, one sample each: the CPU, the wait for a CPU and the sleep
  // (the bind's API calls) add up to it. (A kernel without schedstat records no wait.)
  if (base::ThreadRunDelay().count() >= 0) {
    EXPECT_EQ(v["fracgpu_http_request_cpu_wait_seconds_count{endpoint=\"/bind\"}"], 1);
    EXPECT_EQ(v["fracgpu_http_request_sleep_seconds_count{endpoint=\"/bind\"}"], 1);
    EXPECT_GT(v["fracgpu_http_request_sleep_seconds_sum{endpoint=\"/bind\"}"], 0);
    EXPECT_NEAR(v["fracgpu_http_request_cpu_seconds_sum{endpoint=\"/bind\"}"] +
                    v["fracgpu_http_request_cpu_wait_seconds_sum{endpoint=\"/bind\"}"] +
                    v["fracgpu_http_request_sleep_seconds_sum{endpoint=\"/bind\"}"],
                v["fracgpu_http_request_duration_seconds_sum{endpoint=\"/bind\"}"], 1e-4);
  }
  // The bucket at the /filter goal of 2 ms (issue 37) exists.
  EXPECT_EQ(
      v.count("fracgpu_http_request_duration_seconds_bucket{endpoint=\"/bind\",le=\"0.002\"}"), 1u);
  // The state's lock, counted: the bind wrote the state (its decision) and the scrape read it;
  // a wait is never more than the acquisitions of its mode.
  EXPECT_NE(m.find("# TYPE fracgpu_state_lock_acquisitions_total counter"), std::string::npos);
  EXPECT_GE(v["fracgpu_state_lock_acquisitions_total{mode=\"exclusive\"}"], 1);
  EXPECT_GE(v["fracgpu_state_lock_acquisitions_total{mode=\"shared\"}"], 1);
  for (const char* mode : {"shared", "exclusive"}) {
    const std::string l = std::string("{mode=\"") + mode + "\"}";
    ASSERT_EQ(v.count("fracgpu_state_lock_waits_total" + l), 1u) << mode;
    EXPECT_LE(v["fracgpu_state_lock_waits_total" + l],
              v["fracgpu_state_lock_acquisitions_total" + l]);
  }
  auto ready = http.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
}

// HAMi v2.10's scheduler names (cmd/scheduler/metrics.go) next to fracgpu's by default, with
// HAMi's labels, zone="vGPU" and units (bytes; core ratios 0–100, allocations rounded up).
TEST_F(ExtenderTest, HamiMetricNamesByDefaultAndNotWithTheSwitchOff) {
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 16000}}));
  json odd = GpuNode("node-b", {{"GPU-b0", 24000}});
  {
    core::DeviceInfo d;  // a card that offers 300 "cores" (HAMi normalises to 100)
    d.uuid = "GPU-b0";
    d.index = 0;
    d.count = 10;
    d.devmem_mib = 24000;
    d.devcore = 300;
    d.type = "NVIDIA-NVIDIA A100-SXM4-80GB";
    odd["metadata"]["annotations"][core::kAnnotationNodeRegister] = core::EncodeNodeRegister({d});
  }
  api_.Put("nodes", odd);
  json p =
      api_.Put("pods", GpuPod("p", {{"nvidia.com/gpumem", "4096"}, {"nvidia.com/gpucores", "25"}}));
  json q =
      api_.Put("pods", GpuPod("q", {{"nvidia.com/gpumem", "1000"}, {"nvidia.com/gpucores", "50"}}));
  auto svc = StartService();
  ASSERT_EQ(Bind(*svc, p, "node-a")["Error"], "");
  ReleaseLock("node-a");
  ASSERT_EQ(Bind(*svc, q, "node-b")["Error"], "");
  httplib::Client http("127.0.0.1", svc->port());
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res);
  auto v = Samples(res->body);
  const double mib = 1024.0 * 1024.0;
  const std::string type = "NVIDIA-NVIDIA A100-SXM4-80GB";
  const std::string a =
      "{node=\"node-a\",device_uuid=\"GPU-a0\",device_index=\"0\",device_type=\"" + type +
      "\",zone=\"vGPU\"}";
  const std::string b =
      "{node=\"node-b\",device_uuid=\"GPU-b0\",device_index=\"0\",device_type=\"" + type +
      "\",zone=\"vGPU\"}";
  EXPECT_EQ(v.count("hami_gpu_memory_limit_bytes" + a), 1u) << res->body;
  EXPECT_EQ(v["hami_gpu_memory_limit_bytes" + a], 16000 * mib);
  EXPECT_EQ(v["hami_gpu_core_limit_ratio" + a], 100);
  EXPECT_EQ(v["hami_gpu_core_limit_ratio" + b], 100);  // 300 cores offered: still 100
  EXPECT_EQ(v["hami_gpu_core_allocated_ratio" + a], 25);
  EXPECT_EQ(v["hami_gpu_core_allocated_ratio" + b], 17);  // ceil(50 / 300 * 100)
  EXPECT_EQ(v["hami_gpu_shared_count" + a], 1);
  EXPECT_EQ(v.count("hami_gpu_memory_allocated_bytes{node=\"node-a\",device_uuid=\"GPU-a0\",device_"
                    "index=\"0\","
                    "device_cores=\"100\",device_type=\"" +
                    type + "\",zone=\"vGPU\"}"),
            1u);
  EXPECT_EQ(
      v["hami_gpu_memory_allocated_bytes{node=\"node-b\",device_uuid=\"GPU-b0\",device_index=\"0\","
        "device_cores=\"300\",device_type=\"" +
        type + "\",zone=\"vGPU\"}"],
      1000 * mib);
  EXPECT_EQ(v["hami_node_gpu_overview{node=\"node-a\",device_uuid=\"GPU-a0\",device_index=\"0\","
              "device_cores=\"100\","
              "device_memory_limit=\"16000\",device_type=\"" +
              type + "\",zone=\"vGPU\"}"],
            4096 * mib);
  EXPECT_DOUBLE_EQ(v["hami_node_gpu_memory_allocated_ratio{node=\"node-a\",device_uuid=\"GPU-a0\","
                     "device_index=\"0\","
                     "zone=\"vGPU\"}"],
                   4096.0 / 16000.0);
  const std::string pa =
      "{namespace=\"ml\",node=\"node-a\",pod=\"p\",container_index=\"0\",device_uuid=\"GPU-a0\","
      "zone=\"vGPU\"}";
  const std::string qb =
      "{namespace=\"ml\",node=\"node-b\",pod=\"q\",container_index=\"0\",device_uuid=\"GPU-b0\","
      "zone=\"vGPU\"}";
  EXPECT_EQ(v["hami_vgpu_memory_allocated_bytes" + pa], 4096 * mib);
  EXPECT_EQ(v["hami_vgpu_core_allocated_ratio" + pa], 25);
  EXPECT_EQ(v["hami_vgpu_memory_allocated_bytes" + qb], 1000 * mib);
  EXPECT_EQ(v["hami_vgpu_core_allocated_ratio" + qb], 17);
  // hami_build_info with HAMi's six labels, no zone.
  bool build_info = false;
  for (const auto& [k, val] : v) {
    if (k.rfind("hami_build_info{version=\"9.8.7\",revision=\"", 0) != 0) continue;
    build_info = val == 1 && k.find(",build_date=\"") != std::string::npos &&
                 k.find(",go_version=\"") != std::string::npos &&
                 k.find(",compiler=\"") != std::string::npos &&
                 k.find(",platform=\"linux/") != std::string::npos &&
                 k.find("zone") == std::string::npos;
  }
  EXPECT_TRUE(build_info) << res->body;
  EXPECT_NE(res->body.find("# TYPE hami_gpu_memory_limit_bytes gauge\n"), std::string::npos);
  EXPECT_EQ(res->body.find("GPUDevice"),
            std::string::npos);  // pre-v2.10 names: only with --legacy-metrics
  // fracgpu's own names are still there, with their own units.
  EXPECT_EQ(v["fracgpu_gpu_core_allocated_ratio{node=\"node-b\",device_uuid=\"GPU-b0\",device_"
              "index=\"0\","
              "device_type=\"" +
              type + "\"}"],
            0.5);
  svc->Stop();

  // --hami-metrics=false: fracgpu's names only.
  auto off = StartService(/*hami_metrics=*/false);
  ASSERT_TRUE(WaitUsed(*off, "node-a", "GPU-a0", 4096));
  httplib::Client http_off("127.0.0.1", off->port());
  auto res_off = http_off.Get("/metrics");
  ASSERT_TRUE(res_off);
  EXPECT_EQ(res_off->body.find("hami_"), std::string::npos) << res_off->body;
  EXPECT_EQ(
      Samples(
          res_off
              ->body)["fracgpu_gpu_memory_allocated_bytes{node=\"node-a\",device_uuid=\"GPU-a0\","
                      "device_index=\"0\",device_type=\"" +
                      type + "\"}"],
      4096 * mib);
  off->Stop();

  // --legacy-metrics: HAMi's pre-v2.10 names too, with raw core counts.
  auto legacy = StartService(/*hami_metrics=*/true, /*legacy_metrics=*/true);
  ASSERT_TRUE(WaitUsed(*legacy, "node-b", "GPU-b0", 1000));
  httplib::Client http_legacy("127.0.0.1", legacy->port());
  auto res_legacy = http_legacy.Get("/metrics");
  ASSERT_TRUE(res_legacy);
  auto lv = Samples(res_legacy->body);
  const std::string ob = "{nodeid=\"node-b\",deviceuuid=\"GPU-b0\",deviceidx=\"0\",devicetype=\"" +
                         type + "\",zone=\"vGPU\"}";
  EXPECT_EQ(lv.count("GPUDeviceCoreLimit" + ob), 1u) << res_legacy->body;
  EXPECT_EQ(lv["GPUDeviceCoreLimit" + ob], 300);
  EXPECT_EQ(lv["GPUDeviceCoreAllocated" + ob], 50);
  EXPECT_EQ(lv["GPUDeviceMemoryLimit" + ob], 24000 * mib);
  EXPECT_EQ(lv["GPUDeviceSharedNum" + ob], 1);
  EXPECT_EQ(lv["GPUDeviceMemoryAllocated{nodeid=\"node-b\",deviceuuid=\"GPU-b0\",deviceidx=\"0\","
               "devicecores=\"300\","
               "devicetype=\"" +
               type + "\",zone=\"vGPU\"}"],
            1000 * mib);
  const std::string oq =
      "{podnamespace=\"ml\",nodename=\"node-b\",podname=\"q\",containeridx=\"0\","
      "deviceuuid=\"GPU-b0\",zone=\"vGPU\"}";
  EXPECT_EQ(lv["vGPUMemoryAllocated" + oq], 1000 * mib);
  EXPECT_EQ(lv["vGPUCoreAllocated" + oq], 50);
  EXPECT_EQ(lv["hami_vgpu_core_allocated_ratio{namespace=\"ml\",node=\"node-b\",pod=\"q\","
               "container_index=\"0\","
               "device_uuid=\"GPU-b0\",zone=\"vGPU\"}"],
            17);
}

TEST_F(ExtenderTest, WebhookOverHttp) {
  auto svc = StartService();
  json review = {{"apiVersion", "admission.k8s.io/v1"},
                 {"kind", "AdmissionReview"},
                 {"request",
                  {{"uid", "abc"},
                   {"kind", {{"kind", "Pod"}}},
                   {"operation", "CREATE"},
                   {"object", GpuPod("w", {{"nvidia.com/gpucores", "150"}})}}}};
  json r = Post(*svc, "/webhook?timeout=10s", review.dump());
  EXPECT_EQ(r["response"]["uid"], "abc");
  EXPECT_EQ(r["response"]["allowed"], false);
  EXPECT_EQ(r["response"]["status"]["code"], 400);
}

// ResourceQuota on limits.nvidia.com/gpumem and limits.nvidia.com/gpucores (issue 34 item 5),
// counted as HAMi counts it (pkg/device/quota.go): per GPU × GPUs, a percentage resolved on the
// node's card; enforced at admission, at /filter (ResourceQuotaNotFit) and at /bind; HAMi's
// hami_resource_quota_used metric.
TEST_F(ExtenderTest, ResourceQuotaOnGpuMemoryAndCoresAtAdmissionFilterAndBind) {
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 16000}, {"GPU-a1", 16000}}));
  api_.Put("nodes", GpuNode("node-b", {{"GPU-b0", 40000}}));
  api_.Put("resourcequotas", {{"metadata", {{"name", "gpu-quota"}, {"namespace", "ml"}}},
                              {"spec",
                               {{"hard",
                                 {{"limits.nvidia.com/gpumem", "20000"},
                                  {"limits.nvidia.com/gpucores", "100"},
                                  {"limits.cpu", "8"}}}}}});
  json busy = GpuPod(
      "busy",
      {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "8000"}, {"nvidia.com/gpucores", "30"}});
  SignedAllocation(busy, "uid-busy", "node-a", "GPU-a0,NVIDIA,8000,30:;");
  busy["spec"]["nodeName"] = "node-a";
  api_.Put("pods", busy);
  // Another namespace's pods do not count against ml's quota.
  json other = GpuPod("other", {{"nvidia.com/gpumem", "9000"}});
  other["metadata"]["namespace"] = "dev";
  SignedAllocation(other, "uid-other", "node-b", "GPU-b0,NVIDIA,9000,0:;");
  other["spec"]["nodeName"] = "node-b";
  api_.Put("pods", other);
  auto svc = StartService();
  ASSERT_TRUE(WaitUsed(*svc, "node-a", "GPU-a0", 8000));

  // /filter: 2 GPUs × 7000 MiB = 14000, 8000 used: over 20000 on every node.
  json two =
      api_.Put("pods", GpuPod("two", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "7000"}}));
  json f = Filter(*svc, two, {"node-a", "node-b"});
  EXPECT_EQ(f["NodeNames"], json::array()) << f.dump();
  EXPECT_EQ(f["FailedNodes"]["node-a"],
            "ResourceQuotaNotFit: ResourceQuota ml/gpu-quota limits.nvidia.com/gpumem is 20000 "
            "(MiB), 8000 used, 14000 asked")
      << f.dump();
  // A percentage is resolved on the node's card: 50 % is 8000 MiB on node-a (fits the
  // quota), 20000 MiB on node-b (does not).
  json half = api_.Put("pods", GpuPod("half", {{"nvidia.com/gpumem-percentage", "50"}}));
  json h = Filter(*svc, half, {"node-a", "node-b"});
  EXPECT_EQ(h["NodeNames"], json::array({"node-a"})) << h.dump();
  EXPECT_NE(h["FailedNodes"]["node-b"].get<std::string>().find("20000 asked"), std::string::npos)
      << h.dump();
  // Cores: a whole card is 100 % of a card's cores; 30 used + 100 > 100.
  json whole = api_.Put("pods", GpuPod("whole", {{"nvidia.com/gpu", "1"}}));
  json w = Filter(*svc, whole, {"node-a"});
  EXPECT_NE(w["FailedNodes"]["node-a"].get<std::string>().find(
                "limits.nvidia.com/gpucores is 100 (% of a card), 30 used, 100 asked"),
            std::string::npos)
      << w.dump();
  // /bind re-checks (a pod bound without /filter, or a quota that shrank in between).
  json b = Bind(*svc, two, "node-a");
  EXPECT_NE(b["Error"].get<std::string>().find("ResourceQuotaNotFit"), std::string::npos)
      << b.dump();
  EXPECT_FALSE(k8s::Annotation(*api_.Get("pods", "ml", "two"), core::kAnnotationVgpuNode));
  // What fits is bound and counted: 8000 + 8000 = 16000 used.
  EXPECT_EQ(Bind(*svc, half, "node-a")["Error"], "");
  // Admission: what the spec alone determines (gpumem × GPUs) is checked against what the
  // namespace holds, with a message naming the quota, the limit, used and asked.
  json review = {{"apiVersion", "admission.k8s.io/v1"},
                 {"kind", "AdmissionReview"},
                 {"request",
                  {{"uid", "q1"},
                   {"kind", {{"kind", "Pod"}}},
                   {"operation", "CREATE"},
                   {"namespace", "ml"},
                   {"object", GpuPod("big", {{"nvidia.com/gpumem", "4001"}})}}}};
  json r = Post(*svc, "/webhook", review.dump());
  EXPECT_EQ(r["response"]["allowed"], false) << r.dump();
  EXPECT_EQ(r["response"]["status"]["code"], 403);
  EXPECT_EQ(r["response"]["status"]["message"],
            "namespace ml: ResourceQuotaNotFit: ResourceQuota ml/gpu-quota "
            "limits.nvidia.com/gpumem is 20000 (MiB), 16000 used, 4001 asked");
  review["request"]["object"] = GpuPod("fits", {{"nvidia.com/gpumem", "4000"}});
  EXPECT_EQ(Post(*svc, "/webhook", review.dump())["response"]["allowed"], true);
  // HAMi's metric: what the namespace holds, the quota's value in the label.
  httplib::Client http("127.0.0.1", svc->port());
  auto m = http.Get("/metrics");
  ASSERT_TRUE(m);
  auto samples = Samples(m->body);
  EXPECT_EQ(samples["hami_resource_quota_used{namespace=\"ml\",quota_name=\"nvidia.com/gpumem\","
                    "limit=\"20000\",zone=\"vGPU\"}"],
            16000)
      << m->body;
  EXPECT_EQ(samples["hami_resource_quota_used{namespace=\"ml\",quota_name=\"nvidia.com/gpucores\","
                    "limit=\"100\",zone=\"vGPU\"}"],
            30);
  // The quota removed: nothing is limited any more.
  api_.Remove("resourcequotas", "ml", "gpu-quota");
  ASSERT_TRUE(api_.WaitFor([&] {
    return Filter(*svc, two, {"node-a", "node-b"})["NodeNames"].size() == 1;
  }));
}

}  // namespace
}  // namespace fracgpu::scheduler

namespace fracgpu::scheduler {
namespace {

// Issue 15's tenant attacks, with the webhook out of the way (the pods carry the opt-out
// label and the fake API server has no webhook: edits land as a tenant would make them).
TEST_F(ExtenderTest, TenantEditsCannotMoveTheAccounting) {
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 23028}}));
  api_.Put("nodes", GpuNode("node-b", {{"GPU-b0", 23028}}));
  json p1 = GpuPod("p1", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "20000"}});
  p1["metadata"]["labels"] = {{"hami.io/webhook", "ignore"}};
  p1 = api_.Put("pods", p1);
  auto svc = StartService();
  ASSERT_EQ(Bind(*svc, p1, "node-a")["Error"], "");
  ReleaseLock("node-a");
  ASSERT_TRUE(WaitUsed(*svc, "node-a", "GPU-a0", 20000));

  // Edit-down: the bound pod's allocation rewritten to 1000 MiB (the signature no longer matches).
  api_.Patch(
      "pods", "ml", "p1",
      {{"metadata",
        {{"annotations", {{core::kAnnotationVgpuDevicesAllocated, "GPU-a0,NVIDIA,1000,0:;"}}}}}});
  ASSERT_TRUE(api_.WaitFor([&] { return svc->state().unverified_allocations() >= 1; }));
  EXPECT_TRUE(WaitUsed(*svc, "node-a", "GPU-a0", 20000))
      << "the last verified allocation still counts";
  // A second 20000 MiB pod does not fit on the 23028 MiB card: no over-commit.
  json p2 =
      api_.Put("pods", GpuPod("p2", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "20000"}}));
  json f = Filter(*svc, p2, {"node-a"});
  EXPECT_EQ(f["NodeNames"], json::array()) << f.dump();
  EXPECT_NE(Bind(*svc, p2, "node-a")["Error"], "");

  // Removing the annotations altogether does not free the card either.
  api_.Patch("pods", "ml", "p1",
             {{"metadata",
               {{"annotations",
                 {{core::kAnnotationVgpuDevicesAllocated, nullptr},
                  {core::kAnnotationAllocationSignature, nullptr}}}}}});
  ASSERT_TRUE(api_.WaitFor([&] { return svc->state().unverified_allocations() >= 2; }));
  EXPECT_TRUE(WaitUsed(*svc, "node-a", "GPU-a0", 20000));

  // A restarted scheduler has no memory of p1's signed allocation: the bound pod with an
  // unverifiable one holds the whole node (every GPU, all memory and cores).
  svc->Stop();
  auto restarted = StartService();
  ASSERT_TRUE(WaitUsed(*restarted, "node-a", "GPU-a0", 23028));
  f = Filter(*restarted, p2, {"node-a", "node-b"});
  EXPECT_EQ(f["NodeNames"], json::array({"node-b"})) << f.dump();
  // That /filter reserved p2 on node-b (its 20000 MiB counted until it is bound or 30 s pass).
  ASSERT_TRUE(WaitUsed(*restarted, "node-b", "GPU-b0", 20000));

  // A forged, unsigned allocation on an unbound opted-out pod reserves nothing: no device
  // plugin served it (they verify the signature), and it cannot lower anything either.
  json forged = GpuPod("forged", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "23028"}});
  forged["metadata"]["labels"] = {{"hami.io/webhook", "ignore"}};
  forged["metadata"]["annotations"] = {
      {core::kAnnotationVgpuNode, "node-b"},
      {core::kAnnotationVgpuDevicesAllocated, "GPU-b0,NVIDIA,23028,100:;"}};
  // Read before the Put: the informer may count the forged pod before Put returns.
  int64_t before = restarted->state().unverified_allocations();
  api_.Put("pods", forged);
  ASSERT_TRUE(api_.WaitFor([&] { return restarted->state().unverified_allocations() > before; }));
  EXPECT_TRUE(WaitUsed(*restarted, "node-b", "GPU-b0", 20000));  // p2's reservation alone
  EXPECT_FALSE(restarted->state()
                   .Allocation(k8s::Uid(api_.Get("pods", "ml", "forged").value()))
                   .has_value());
  // Each unverifiable allocation was evented (the recorders post in the background: wait until
  // both services' queues are empty before reading the events).
  ASSERT_TRUE(svc->events().Flush(std::chrono::seconds(30)));
  ASSERT_TRUE(restarted->events().Flush(std::chrono::seconds(30)));
  int warned = 0;
  for (const auto& e : api_.List("events")) warned += e["reason"] == "UnverifiedAllocation";
  EXPECT_GE(warned, 3);
}

}  // namespace
}  // namespace fracgpu::scheduler

namespace fracgpu::scheduler {
namespace {

// Issue 33 item 1: the crash case. The 200 went out, then the FilteringFailed event's
// involvedObject read metadata.uid (JSON null) as a string on the event thread: an uncaught
// nlohmann::json type_error ended the process.
TEST_F(ExtenderTest, NullPodUidInAnUnfitFilterIsRecordedNotACrash) {
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 1000}}));
  auto svc = StartService();
  json pod = GpuPod("big", {{"nvidia.com/gpumem", "5000"}});
  pod["metadata"]["uid"] = nullptr;
  json f = Filter(*svc, pod, {"node-a"});
  EXPECT_EQ(f["NodeNames"], json::array()) << f.dump();
  ASSERT_TRUE(svc->events().Flush(std::chrono::seconds(30)));
  auto events = api_.List("events");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["reason"], "FilteringFailed");
  EXPECT_EQ(events[0]["involvedObject"]["name"], "big");
  EXPECT_EQ(events[0]["involvedObject"]["uid"], "");
  httplib::Client http("127.0.0.1", svc->port());
  auto health = http.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

// Issue 33 item 1: every field of a seed request of each endpoint, swapped to each JSON type
// (typeswap::Replacements), is answered — 200 with an Error or a result, or 400 naming the
// field — never 500 (a handler that threw) and never a dead process; the event thread, which
// runs after the answer, survives every recorded event.
TEST_F(ExtenderTest, EveryFieldOfEveryEndpointSwappedToEveryJsonTypeIsAnswered) {
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 1000}}));
  json pod = typeswap::SeedPod("p");
  pod.erase("status");
  api_.Put("pods", pod);
  auto svc = StartService();
  httplib::Client http("127.0.0.1", svc->port());
  http.set_read_timeout(30, 0);
  size_t requests = 0;
  for (const auto& seed : typeswap::Seeds({"node-a", "node-b"})) {
    const char* path = seed.endpoint == typeswap::Endpoint::kFilter       ? "/filter"
                       : seed.endpoint == typeswap::Endpoint::kPrioritize ? "/prioritize"
                       : seed.endpoint == typeswap::Endpoint::kBind       ? "/bind"
                                                                          : "/webhook";
    for (const auto& at : typeswap::Paths(seed.body)) {
      for (const auto& value : typeswap::Replacements()) {
        std::string body = typeswap::Swapped(seed.body, at, value).dump();
        auto res = http.Post(path, body, "application/json");
        ++requests;
        ASSERT_TRUE(res) << path << " " << at.to_string() << " = " << value.dump()
                         << ": no answer (" << httplib::to_string(res.error()) << ")";
        EXPECT_TRUE(res->status == 200 || res->status == 400)
            << path << " " << at.to_string() << " = " << value.dump() << ": " << res->status << " "
            << res->body;
      }
    }
  }
  EXPECT_GT(requests, 1000u);
  ASSERT_TRUE(svc->events().Flush(std::chrono::seconds(60)));
  auto health = http.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

}  // namespace
}  // namespace fracgpu::scheduler

namespace fracgpu::scheduler {
namespace {

// The Binding bodies POSTed for pod ml/<name>.
std::vector<json> BindingsPosted(const fakes::FakeApiServer& api, const std::string& name) {
  std::vector<json> out;
  for (const auto& r : api.Requests()) {
    if (r.method == "POST" && r.path == "/api/v1/namespaces/ml/pods/" + name + "/binding")
      out.push_back(json::parse(r.body, nullptr, false));
  }
  return out;
}

// Issue 33 item 3 (the /bind checks): another scheduler's pod, a node failing the pod's
// nodeSelector or required node affinity, and a node that does not exist are refused before
// anything is written (no lock, no annotation, no Binding); a pod that passes is bound with a
// Binding carrying its UID (metadata.uid: the API server's precondition).
TEST_F(ExtenderTest, BindRefusesOtherSchedulersPodsAndNodesFailingThePodsPredicates) {
  json a = GpuNode("node-a", {{"GPU-a0", 16000}});
  a["metadata"]["labels"] = {{"pool", "gpu"}, {"zone", "z1"}, {"gen", "9"}};
  api_.Put("nodes", a);
  api_.Put("nodes", GpuNode("node-b", {{"GPU-b0", 16000}}));
  json other = GpuPod("other", {{"nvidia.com/gpumem", "1000"}});
  other["spec"]["schedulerName"] = "default-scheduler";
  other = api_.Put("pods", other);
  json sel = GpuPod("sel", {{"nvidia.com/gpumem", "1000"}});
  sel["spec"]["nodeSelector"] = {{"pool", "gpu"}};
  sel = api_.Put("pods", sel);
  json aff = GpuPod("aff", {{"nvidia.com/gpumem", "1000"}});
  aff["spec"]["affinity"] = {
      {"nodeAffinity",
       {{"requiredDuringSchedulingIgnoredDuringExecution",
         {{"nodeSelectorTerms",
           {{{"matchExpressions", {{{"key", "zone"}, {"operator", "In"}, {"values", {"z2"}}}}}},
            {{"matchExpressions",
              {{{"key", "gen"}, {"operator", "Gt"}, {"values", {"8"}}},
               {{"key", "pool"}, {"operator", "Exists"}}}},
             {"matchFields",
              {{{"key", "metadata.name"}, {"operator", "NotIn"}, {"values", {"node-c"}}}}}}}}}}}}};
  aff = api_.Put("pods", aff);
  json plain = api_.Put(
      "pods",
      {{"metadata", {{"name", "plain"}, {"namespace", "ml"}}},
       {"spec", {{"schedulerName", "fracgpu-scheduler"}, {"containers", {{{"name", "c"}}}}}}});
  auto svc = StartService();
  struct Refusal {
    json pod;
    std::string node, want;
  } refusals[] = {
      {other, "node-a",
       "is not scheduled by fracgpu-scheduler (spec.schedulerName \"default-scheduler\")"},
      {sel, "node-b", "does not match spec.nodeSelector pool=gpu"},
      {aff, "node-b", "matches no term of the pod's required node affinity"},
      {sel, "node-zz", "node node-zz does not exist"},
      {plain, "node-zz", "node node-zz does not exist"},
  };
  for (const auto& r : refusals) {
    json b = Bind(*svc, r.pod, r.node);
    EXPECT_NE(b["Error"].get<std::string>().find(r.want), std::string::npos)
        << k8s::Name(r.pod) << " → " << r.node << ": " << b.dump();
    json after = *api_.Get("pods", "ml", k8s::Name(r.pod));
    EXPECT_FALSE(k8s::Annotation(after, core::kAnnotationVgpuNode)) << k8s::Name(r.pod);
    EXPECT_EQ(k8s::PodNodeName(after), "") << k8s::Name(r.pod);
    EXPECT_TRUE(BindingsPosted(api_, k8s::Name(r.pod)).empty()) << k8s::Name(r.pod);
  }
  EXPECT_EQ(svc->metrics().Value("fracgpu_binds_total", {{"result", "refused"}}), 5);
  EXPECT_FALSE(k8s::Annotation(*api_.Get("nodes", "", "node-a"), core::kAnnotationNodeLock));
  EXPECT_FALSE(k8s::Annotation(*api_.Get("nodes", "", "node-b"), core::kAnnotationNodeLock));
  // The same pods on nodes that pass their predicates are bound, the Binding carrying the UID.
  EXPECT_EQ(Bind(*svc, sel, "node-a")["Error"], "");
  ReleaseLock("node-a");
  EXPECT_EQ(Bind(*svc, aff, "node-a")["Error"], "");
  EXPECT_EQ(Bind(*svc, plain, "node-b")["Error"], "");
  for (const json* p : {&sel, &aff, &plain}) {
    auto posted = BindingsPosted(api_, k8s::Name(*p));
    ASSERT_EQ(posted.size(), 1u) << k8s::Name(*p);
    EXPECT_EQ(posted[0]["metadata"]["uid"], k8s::Uid(*p)) << posted[0].dump();
  }
}

// The service's one scheduler name (the webhook's, --scheduler-name) is the one /bind accepts:
// a deployment under another name binds its own pods and refuses fracgpu-scheduler's.
TEST_F(ExtenderTest, BindAcceptsTheSchedulerNameTheServiceRunsAs) {
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 16000}}));
  json mine = GpuPod("mine", {{"nvidia.com/gpumem", "1000"}});
  mine["spec"]["schedulerName"] = "team-scheduler";
  mine = api_.Put("pods", mine);
  json theirs = api_.Put("pods", GpuPod("theirs", {{"nvidia.com/gpumem", "1000"}}));
  SchedulerOptions o;
  o.extender.signing_key = kKey;
  o.webhook.scheduler_name = "team-scheduler";
  SchedulerService svc(o, client_.get());
  ASSERT_TRUE(svc.Start().ok());
  ASSERT_TRUE(svc.WaitForSync(std::chrono::seconds(10)));
  EXPECT_NE(Bind(svc, theirs, "node-a")["Error"].get<std::string>().find(
                "is not scheduled by team-scheduler"),
            std::string::npos);
  EXPECT_EQ(Bind(svc, mine, "node-a")["Error"], "");
  EXPECT_EQ(BindingsPosted(api_, "mine").size(), 1u);
  EXPECT_TRUE(BindingsPosted(api_, "theirs").empty());
}

// Issue 33 item 5: a second /bind of a pod while the first is in flight (held inside its
// Binding by a request hook of the fake API server) is a conflict that changes
// nothing: the first binds, its annotations stay, the second's node is neither locked nor
// charged. Before, the second bound the pod to its node, then the first's patch overwrote the
// annotations and its rollback cleared them: bound with no allocation, the node locked.
TEST_F(ExtenderTest, TwoConcurrentBindsOfOnePodOneWinsAndTheLoserChangesNothing) {
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 16000}}));
  api_.Put("nodes", GpuNode("node-b", {{"GPU-b0", 16000}}));
  json pod = api_.Put("pods", GpuPod("p", {{"nvidia.com/gpumem", "1000"}}));
  auto svc = StartService();
  std::mutex mu;
  std::condition_variable cv;
  int patches = 0;
  bool release = false;
  api_.SetRequestHook([&](const std::string& method, const std::string& path) {
    if (method != "POST" || path != "/api/v1/namespaces/ml/pods/p/binding") return;
    std::unique_lock<std::mutex> lock(mu);
    if (++patches == 1) {
      cv.notify_all();
      cv.wait_for(lock, std::chrono::seconds(20), [&] { return release; });
    }
  });
  json first;
  std::thread t([&] { first = Bind(*svc, pod, "node-a"); });
  bool held = false;
  {
    std::unique_lock<std::mutex> lock(mu);
    held = cv.wait_for(lock, std::chrono::seconds(20), [&] { return patches >= 1; });
  }
  EXPECT_TRUE(held);
  json second = Bind(*svc, pod, "node-b");
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  t.join();
  api_.SetRequestHook(nullptr);
  EXPECT_EQ(first["Error"], "") << first.dump();
  EXPECT_NE(second["Error"].get<std::string>().find("already in progress"), std::string::npos)
      << second.dump();
  json after = *api_.Get("pods", "ml", "p");
  EXPECT_EQ(k8s::PodNodeName(after), "node-a");
  EXPECT_EQ(k8s::Annotation(after, core::kAnnotationVgpuNode), "node-a");
  auto grants = GrantsOf(after);
  ASSERT_EQ(grants.size(), 1u);
  ASSERT_EQ(grants[0].size(), 1u);
  EXPECT_EQ(grants[0][0].uuid, "GPU-a0");
  EXPECT_TRUE(k8s::Annotation(*api_.Get("nodes", "", "node-a"), core::kAnnotationNodeLock));
  EXPECT_FALSE(k8s::Annotation(*api_.Get("nodes", "", "node-b"), core::kAnnotationNodeLock));
  EXPECT_TRUE(WaitUsed(*svc, "node-a", "GPU-a0", 1000));
  EXPECT_TRUE(WaitUsed(*svc, "node-b", "GPU-b0", 0));
  // A later bind of the bound pod elsewhere: a conflict, the pod as it was.
  json third = Bind(*svc, pod, "node-b");
  EXPECT_NE(third["Error"].get<std::string>().find("already bound"), std::string::npos);
  json again = *api_.Get("pods", "ml", "p");
  EXPECT_EQ(again["metadata"]["annotations"], after["metadata"]["annotations"]);
  EXPECT_FALSE(k8s::Annotation(*api_.Get("nodes", "", "node-b"), core::kAnnotationNodeLock));
}

// Issue 33 item 5: a bind that fails at any write — the node lock (injected 422), the Binding
// refused (422), finding the pod changed since it was read (409 on its resourceVersion) or
// failing (500) — leaves no node lock and no reservation; the pod keeps no decision (the
// decision travels in the Binding, issue 37 item 1, so a failed one wrote none).
TEST_F(ExtenderTest, AFailedBindNeverLeavesALockOrAReservation) {
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 16000}}));
  json pod = api_.Put("pods", GpuPod("p", {{"nvidia.com/gpumem", "1000"}}));
  auto svc = StartService();
  // A Binding's 409 on the pod as the watch cache had it is read past once (the pod read
  // afresh, the bind run again): the 409 step fails both.
  struct Step {
    std::string method, path;
    int status;
    int count;
  } steps[] = {{"PATCH", "/api/v1/nodes/node-a", 422, 1},
               {"POST", "/api/v1/namespaces/ml/pods/p/binding", 422, 1},
               {"POST", "/api/v1/namespaces/ml/pods/p/binding", 409, 2},
               {"POST", "/api/v1/namespaces/ml/pods/p/binding", 500, 1}};
  for (const auto& step : steps) {
    api_.ClearFailures();
    api_.FailNext(step.method, step.path, step.status, step.count);
    json b = Bind(*svc, pod, "node-a");
    EXPECT_NE(b["Error"].get<std::string>(), "") << step.method << " " << step.status;
    EXPECT_FALSE(k8s::Annotation(*api_.Get("nodes", "", "node-a"), core::kAnnotationNodeLock))
        << step.method << " " << step.status;
    EXPECT_FALSE(svc->state().Allocation(k8s::Uid(pod))) << step.method << " " << step.status;
    EXPECT_TRUE(api_.WaitFor([&] {
      return !k8s::Annotation(*api_.Get("pods", "ml", "p"), core::kAnnotationVgpuNode);
    })) << step.method
        << " " << step.status;
  }
  EXPECT_TRUE(WaitUsed(*svc, "node-a", "GPU-a0", 0));
  EXPECT_EQ(Bind(*svc, pod, "node-a")["Error"], "");
}

// Issue 37 item 1: the API calls of one GPU bind against the fake API server's request log.
// Before: GET pod, GET node, PATCH node (lock), PATCH pod (the decision's annotations), POST
// binding — five, the pod PATCH an UPDATE through the admission chain and one more pod write
// and watch event. Now four: the decision travels in the Binding's metadata (annotations,
// the label, the pod's UID and resourceVersion as preconditions), and the pod as bound
// carries every annotation a device plugin (fracgpu's or HAMi's) reads at Allocate.
TEST_F(ExtenderTest, AGpuBindCostsFourApiCallsAndNoPodPatch) {
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 16000}}));
  json pod = api_.Put("pods", GpuPod("p", {{"nvidia.com/gpumem", "1000"}}));
  auto svc = StartService();
  const size_t before = api_.Requests().size();
  ASSERT_EQ(Bind(*svc, pod, "node-a")["Error"], "");
  const std::vector<std::string> calls =
      CallsSince(before, {"/api/v1/namespaces/ml/pods/p", "/api/v1/nodes/node-a",
                          "/api/v1/namespaces/ml/pods/p/binding"});
  EXPECT_EQ(calls, (std::vector<std::string>{
                       "GET /api/v1/namespaces/ml/pods/p", "GET /api/v1/nodes/node-a",
                       "PATCH /api/v1/nodes/node-a", "POST /api/v1/namespaces/ml/pods/p/binding"}));
  auto posted = BindingsPosted(api_, "p");
  ASSERT_EQ(posted.size(), 1u);
  EXPECT_EQ(posted[0]["metadata"]["uid"], k8s::Uid(pod));
  EXPECT_EQ(posted[0]["metadata"]["resourceVersion"], k8s::ResourceVersion(pod));
  EXPECT_EQ(posted[0]["metadata"]["labels"], json({{core::kAnnotationVgpuNode, "node-a"}}));
  json bound = *api_.Get("pods", "ml", "p");
  EXPECT_EQ(k8s::PodNodeName(bound), "node-a");
  for (const char* key :
       {core::kAnnotationVgpuNode, core::kAnnotationVgpuTime, core::kAnnotationVgpuDevicesAllocated,
        core::kAnnotationVgpuDevicesToAllocate, core::kAnnotationBindPhase,
        core::kAnnotationBindTime, core::kAnnotationAllocationSignature}) {
    EXPECT_EQ(k8s::Annotation(bound, key), posted[0]["metadata"]["annotations"].value(key, ""))
        << key;
    EXPECT_TRUE(k8s::Annotation(bound, key)) << key;
  }
  EXPECT_EQ(*k8s::Annotation(bound, core::kAnnotationBindPhase), core::kBindPhaseAllocating);
  // The signature the device plugin checks covers this pod, node and decision.
  const std::string allocated = *k8s::Annotation(bound, core::kAnnotationVgpuDevicesAllocated);
  EXPECT_EQ(*k8s::Annotation(bound, core::kAnnotationAllocationSignature),
            core::SignAllocation(kKey, k8s::Uid(pod), "node-a", allocated));
  EXPECT_EQ(bound["metadata"]["labels"][core::kAnnotationVgpuNode], "node-a");
}

// `--node-lock=bind-phase` (NodeLockMode::kBindPhase): a bind writes no Node (three API calls:
// the pod and the node from the watch cache, the Binding); the next pod of the node is refused
// until the device plugin's part ends the first pod's bind-phase, also after a restart (the hold is
// rebuilt from the listed pods); a node that carries HAMi's lock keeps HAMi's protocol.
TEST_F(ExtenderTest, UnderTheBindPhaseLockABindWritesNoNodeAndHoldsItUntilThePodIsServed) {
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 16000}}));
  json p1 = api_.Put("pods", GpuPod("p1", {{"nvidia.com/gpumem", "1000"}}));
  json p2 = api_.Put("pods", GpuPod("p2", {{"nvidia.com/gpumem", "1000"}}));
  SchedulerOptions o;
  o.extender.signing_key = kKey;
  o.extender.node_lock = NodeLockMode::kBindPhase;
  auto start = [&] {
    auto s = std::make_unique<SchedulerService>(o, client_.get());
    EXPECT_TRUE(s->Start().ok());
    EXPECT_TRUE(s->WaitForSync(std::chrono::seconds(10)));
    return s;
  };
  auto svc = start();
  const size_t before = api_.Requests().size();
  ASSERT_EQ(Bind(*svc, p1, "node-a")["Error"], "");
  const std::vector<std::string> calls =
      CallsSince(before, {"/api/v1/namespaces/ml/pods/p1", "/api/v1/namespaces/ml/pods/p1/binding",
                          "/api/v1/nodes/node-a", "/api/v1/nodes/node-b"});
  // The pod and the node (its predicates) from the watch cache, then the Binding: no PATCH.
  EXPECT_EQ(calls, (std::vector<std::string>{"GET /api/v1/namespaces/ml/pods/p1",
                                             "GET /api/v1/nodes/node-a",
                                             "POST /api/v1/namespaces/ml/pods/p1/binding"}));
  EXPECT_FALSE(k8s::Annotation(*api_.Get("nodes", "", "node-a"), core::kAnnotationNodeLock));
  EXPECT_EQ(k8s::Annotation(*api_.Get("pods", "ml", "p1"), core::kAnnotationBindPhase),
            core::kBindPhaseAllocating);

  // The GPU has room for p2, but node-a is held by p1 until its Allocate.
  json refused = Bind(*svc, p2, "node-a");
  EXPECT_NE(refused["Error"].get<std::string>().find("held by pod ml/p1"), std::string::npos)
      << refused.dump();
  EXPECT_EQ(k8s::PodNodeName(*api_.Get("pods", "ml", "p2")), "");
  EXPECT_FALSE(svc->state().Allocation(k8s::Uid(p2)));
  // A restart rebuilds the hold from the listed pod.
  svc.reset();
  svc = start();
  refused = Bind(*svc, p2, "node-a");
  EXPECT_NE(refused["Error"].get<std::string>().find("held by pod ml/p1"), std::string::npos)
      << refused.dump();

  // The device plugin's part (docs/device-plugin.md "Allocate" step 5): p1 served.
  api_.Patch("pods", "ml", "p1",
             {{"metadata",
               {{"annotations",
                 {{core::kAnnotationBindPhase, core::kBindPhaseSuccess},
                  {core::kAnnotationVgpuDevicesToAllocate, ";"}}}}}});
  ASSERT_TRUE(api_.WaitFor([&] { return !svc->state().PodLockOf("node-a", ""); }));
  ASSERT_EQ(Bind(*svc, p2, "node-a")["Error"], "");
  EXPECT_EQ(k8s::PodNodeName(*api_.Get("pods", "ml", "p2")), "node-a");
  EXPECT_FALSE(k8s::Annotation(*api_.Get("nodes", "", "node-a"), core::kAnnotationNodeLock));

  // HAMi's lock on a node (its scheduler, or one set before the switch) is HAMi's protocol: a
  // live one refuses the bind, and one taken over is written naming the pod.
  api_.Put("nodes", GpuNode("node-b", {{"GPU-b0", 16000}}));
  LockNodeNow("node-b", "hami-pod");
  json hami_pod = GpuPod("hami-pod", {{"nvidia.com/gpumem", "1000"}});
  api_.Put("pods", hami_pod);
  json p3 = api_.Put("pods", GpuPod("p3", {{"nvidia.com/gpumem", "1000"}}));
  ASSERT_TRUE(api_.WaitFor([&] { return svc->state().NodeLockTime("node-b").has_value(); }));
  refused = Bind(*svc, p3, "node-b");
  EXPECT_NE(refused["Error"].get<std::string>().find("locked by"), std::string::npos)
      << refused.dump();
  EXPECT_NE(refused["Error"].get<std::string>().find(",ml,hami-pod"), std::string::npos)
      << refused.dump();
  api_.Remove("pods", "ml", "hami-pod");  // the holder is gone: the lock is stale
  ASSERT_EQ(Bind(*svc, p3, "node-b")["Error"], "");
  auto lock = k8s::Annotation(*api_.Get("nodes", "", "node-b"), core::kAnnotationNodeLock);
  ASSERT_TRUE(lock);
  EXPECT_NE(lock->find(",ml,p3"), std::string::npos) << *lock;
}

}  // namespace
}  // namespace fracgpu::scheduler

namespace fracgpu::scheduler {
namespace {

// Issue 33 item 4: until every node and every pod is listed and counted, /filter and /bind are
// refused with a retryable Error (kube-scheduler tries the pod again), /prioritize with a 503,
// and they change nothing; the pod list is held back (403) while the node list is in. Once both are
// counted, the pod that holds the only GPU is in the count: the pending pod fits nowhere.
TEST_F(ExtenderTest, FilterAndBindAreRefusedUntilEveryNodeAndPodIsCounted) {
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 16000}}));
  json holder = GpuPod("holder", {{"nvidia.com/gpumem", "16000"}});
  holder["spec"]["nodeName"] = "node-a";
  holder["status"] = {{"phase", "Running"}};
  SignedAllocation(holder, "uid-holder", "node-a", "GPU-a0,NVIDIA,16000,0:;");
  api_.Put("pods", holder);
  json pod = api_.Put("pods", GpuPod("p", {{"nvidia.com/gpumem", "1000"}}));
  api_.FailNext("GET", "/api/v1/pods", 403, 1 << 30, "held back by the test");
  SchedulerOptions o;
  o.extender.signing_key = kKey;
  auto svc = std::make_unique<SchedulerService>(o, client_.get());
  ASSERT_TRUE(svc->Start().ok());
  // The pod list was asked for (and refused) at least once.
  for (int i = 0; i < 1000 && api_.CountRequests("GET", "/api/v1/pods") == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_GT(api_.CountRequests("GET", "/api/v1/pods"), 0);
  json f = Filter(*svc, pod, {"node-a"});
  EXPECT_TRUE(f["NodeNames"].is_null()) << f.dump();
  EXPECT_NE(f["Error"].get<std::string>().find("not ready"), std::string::npos) << f.dump();
  json b = Bind(*svc, pod, "node-a");
  EXPECT_NE(b["Error"].get<std::string>().find("not ready"), std::string::npos) << b.dump();
  // /prioritize has no Error member: it answers 503, which kube-scheduler reads as "no score
  // from this extender", and reserves nothing on the half-counted node (the holder's GPU
  // would look free).
  const std::string prioritize_args = json{{"Pod", pod}, {"NodeNames", {"node-a"}}}.dump();
  json p = Post(*svc, "/prioritize", prioritize_args, 503);
  EXPECT_NE(p.value("error", "").find("not ready"), std::string::npos) << p.dump();
  EXPECT_FALSE(svc->state().Allocation(k8s::Uid(pod)));
  EXPECT_EQ(k8s::PodNodeName(*api_.Get("pods", "ml", "p")), "");
  EXPECT_FALSE(k8s::Annotation(*api_.Get("nodes", "", "node-a"), core::kAnnotationNodeLock));
  api_.ClearFailures();
  ASSERT_TRUE(svc->WaitForSync(std::chrono::seconds(30)));
  f = Filter(*svc, pod, {"node-a"});
  EXPECT_EQ(f["NodeNames"], json::array()) << f.dump();
  EXPECT_EQ(Post(*svc, "/prioritize", prioritize_args).size(), 1u);
  EXPECT_NE(Bind(*svc, pod, "node-a")["Error"].get<std::string>().find("no longer fits"),
            std::string::npos);
}

// Issue 33 item 7: a use-gpuuuid list over the cap is refused at admission with the cap in the
// message, and /filter answers such a pod (created before the cap) with the same error.
TEST_F(ExtenderTest, AnOverLongGpuListIsRefusedAtAdmissionWithTheCap) {
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 16000}}));
  auto svc = StartService();
  std::string uuids;
  for (int i = 0; i < 6000; ++i) uuids += (i ? ",GPU-" : "GPU-") + std::to_string(i);
  json pod = GpuPod("w", {{"nvidia.com/gpumem", "1000"}});
  pod["metadata"]["annotations"] = {{"nvidia.com/use-gpuuuid", uuids}};
  json review = {
      {"apiVersion", "admission.k8s.io/v1"},
      {"kind", "AdmissionReview"},
      {"request",
       {{"uid", "r1"}, {"kind", {{"kind", "Pod"}}}, {"operation", "CREATE"}, {"object", pod}}}};
  json r = Post(*svc, "/webhook", review.dump());
  EXPECT_EQ(r["response"]["allowed"], false) << r.dump();
  const std::string want =
      "annotation nvidia.com/use-gpuuuid lists 6000 entries; at most 1024 are allowed";
  EXPECT_NE(r["response"]["status"]["message"].get<std::string>().find(want), std::string::npos)
      << r.dump();
  json f = Filter(*svc, pod, {"node-a"});
  EXPECT_NE(f["Error"].get<std::string>().find(want), std::string::npos) << f.dump();
}

}  // namespace
}  // namespace fracgpu::scheduler

namespace fracgpu::scheduler {
namespace {

// Issue 33 item 2 through the informers: GPU 1 leaves node-a's register annotation while a
// signed 2 × 10,000 MiB pod holds GPUs 0 and 1 (16,384 MiB each). /filter still finds no room
// for a 10,000 MiB pod — in the running scheduler, in one restarted while GPU 1 is away, and
// after GPU 1 returns.
TEST_F(ExtenderTest, AGpuLeavingTheRegistrationKeepsItsPodsChargesThroughTheInformers) {
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 16384}, {"GPU-a1", 16384}}));
  json holder = GpuPod("holder", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "10000"}});
  holder["spec"]["nodeName"] = "node-a";
  holder["status"] = {{"phase", "Running"}};
  SignedAllocation(holder, "uid-holder", "node-a", "GPU-a0,NVIDIA,10000,0:GPU-a1,NVIDIA,10000,0:;");
  api_.Put("pods", holder);
  json pod = api_.Put("pods", GpuPod("p", {{"nvidia.com/gpumem", "10000"}}));
  auto svc = StartService();
  ASSERT_TRUE(WaitUsed(*svc, "node-a", "GPU-a1", 10000));
  EXPECT_EQ(Filter(*svc, pod, {"node-a"})["NodeNames"], json::array());
  // Drop-out.
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 16384}}));
  ASSERT_TRUE(api_.WaitFor([&] {
    auto n = svc->state().Node("node-a");
    return n && n->gpus.size() == 2 && n->gpus[1].ghost;
  }));
  EXPECT_TRUE(WaitUsed(*svc, "node-a", "GPU-a0", 10000));
  EXPECT_EQ(Filter(*svc, pod, {"node-a"})["NodeNames"], json::array());
  EXPECT_NE(Bind(*svc, pod, "node-a")["Error"].get<std::string>().find("no longer fits"),
            std::string::npos);
  // Restart while GPU 1 is away: rebuilt from the pods, the same answer.
  svc->Stop();
  auto restarted = StartService();
  EXPECT_TRUE(WaitUsed(*restarted, "node-a", "GPU-a0", 10000));
  EXPECT_TRUE(WaitUsed(*restarted, "node-a", "GPU-a1", 10000));
  EXPECT_EQ(Filter(*restarted, pod, {"node-a"})["NodeNames"], json::array());
  // Return: GPU 1 takes its usage back.
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 16384}, {"GPU-a1", 16384}}));
  ASSERT_TRUE(api_.WaitFor([&] {
    auto n = restarted->state().Node("node-a");
    return n && n->gpus.size() == 2 && !n->gpus[1].ghost;
  }));
  EXPECT_TRUE(WaitUsed(*restarted, "node-a", "GPU-a1", 10000));
  EXPECT_EQ(Filter(*restarted, pod, {"node-a"})["NodeNames"], json::array());
}

}  // namespace
}  // namespace fracgpu::scheduler

namespace fracgpu::scheduler {
namespace {

// A pod as HAMi's scheduler and device plugin leave it: bound, Running, hami.io/vgpu-node and
// hami.io/vgpu-devices-allocated, no signature.
json HamiPlacedPod(const std::string& name, const std::string& node, const std::string& allocated,
                   const std::string& created) {
  json p = GpuPod(name, {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "8000"}});
  p["metadata"]["labels"] = {{"hami.io/webhook", "ignore"}};
  p["metadata"]["creationTimestamp"] = created;
  p["metadata"]["annotations"] = {{core::kAnnotationVgpuNode, node},
                                  {core::kAnnotationVgpuDevicesAllocated, allocated},
                                  {"hami.io/bind-phase", "success"}};
  p["spec"]["schedulerName"] = "hami-scheduler";
  p["spec"]["nodeName"] = node;
  p["status"] = {{"phase", "Running"}};
  return p;
}

// Migration without a drain (issue 34 item 3): with --adopt-hami-created-before, a pod HAMi
// placed before the takeover is verified against its node and counted as it is, so the rest
// of the card stays schedulable; one created after the takeover without a signature is still
// counted as its whole node.
TEST_F(ExtenderTest, HamiPlacedPodsAreAdoptedNotCountedAsWholeNodes) {
  api_.Put("nodes", GpuNode("node-a", {{"GPU-a0", 23028}}));
  api_.Put("nodes", GpuNode("node-b", {{"GPU-b0", 23028}}));
  api_.Put("pods",
           HamiPlacedPod("hami-old", "node-a", "GPU-a0,NVIDIA,8000,30:;", "2026-12-01T08:00:00Z"));
  SchedulerOptions o;
  o.extender.signing_key = kKey;
  o.adopt_hami_created_before = "2026-12-04T10:00:00Z";
  auto svc = std::make_unique<SchedulerService>(o, client_.get());
  ASSERT_TRUE(svc->Start().ok());
  ASSERT_TRUE(svc->WaitForSync(std::chrono::seconds(10)));
  ASSERT_TRUE(WaitUsed(*svc, "node-a", "GPU-a0", 8000));
  EXPECT_EQ(svc->state().adopted_allocations(), 1);
  // (It may have been counted whole for a moment: the pod informer can deliver it before the
  // node informer delivers its node; it is adopted when the node arrives.)
  auto adopted = svc->state().Allocation(k8s::Uid(api_.Get("pods", "ml", "hami-old").value()));
  ASSERT_TRUE(adopted.has_value());
  EXPECT_FALSE(adopted->whole_node);
  // A 10000 MiB slice fits beside it (23028 - 8000); as a whole node it would not.
  json p2 =
      api_.Put("pods", GpuPod("p2", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "10000"}}));
  json f = Filter(*svc, p2, {"node-a"});
  EXPECT_EQ(f["NodeNames"], json::array({"node-a"})) << f.dump();

  // Unsigned and created after the takeover: not HAMi's, counted as the whole node.
  api_.Put("pods",
           HamiPlacedPod("late", "node-b", "GPU-b0,NVIDIA,1000,10:;", "2026-12-04T10:00:01Z"));
  ASSERT_TRUE(WaitUsed(*svc, "node-b", "GPU-b0", 23028));
  EXPECT_EQ(svc->state().adopted_allocations(), 1);
  svc->Stop();
}

// Lending (issue 36 item 2, docs/reclaim.md "Lending"): a node's fresh lent-memory record is
// room for a borrower pod only; the borrower's grant is ordinary usage (over the card's
// capacity), the metrics show lent and borrowed memory, and a stale record lends nothing.
TEST_F(ExtenderTest, BorrowerIsPlacedOnLentMemoryAndAnOrdinaryPodIsNot) {
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  json lender = GpuNode("node-a", {{"GPU-a0", 16000}});
  // Written 60 s "ahead" (a node clock a little fast): fresh for 150 s, longer than the
  // watchdog lets this test run, so no timing decides it.
  const int64_t at = now + 60;
  lender["metadata"]["annotations"][core::kAnnotationLentMemory] =
      std::to_string(at) + ";GPU-a0:8000";
  api_.Put("nodes", lender);
  api_.Put("nodes", GpuNode("node-b", {{"GPU-b0", 40000}}));
  // The parked owner's slice stays allocated: 12000 of 16000.
  json owner = GpuPod("owner", {{"nvidia.com/gpumem", "12000"}});
  SignedAllocation(owner, "uid-owner", "node-a", "GPU-a0,NVIDIA,12000,0:;");
  owner["spec"]["nodeName"] = "node-a";
  api_.Put("pods", owner);
  auto as_borrower = [](json pod) {
    pod["metadata"]["annotations"][core::kAnnotationBorrower] = "true";
    return pod;
  };
  json borrower =
      api_.Put("pods", as_borrower(GpuPod("borrower", {{"nvidia.com/gpumem", "10000"}})));
  json ordinary = api_.Put("pods", GpuPod("ordinary", {{"nvidia.com/gpumem", "10000"}}));
  // /filter answers every node that fits (and reserves nothing): where each pod fits is the
  // subject here.
  auto svc = StartService(true, false, {}, false, /*filter_returns_every_fitting_node=*/true);
  ASSERT_TRUE(WaitUsed(*svc, "node-a", "GPU-a0", 12000));
  ASSERT_TRUE(api_.WaitFor([&] {
    auto n = svc->state().Node("node-a");
    return n && n->lent_at_unix == at && n->LentMib(0) == 8000;
  }));
  httplib::Client http("127.0.0.1", svc->port());
  auto lending = [&](int want) {
    const std::string line = "\nfracgpu_lending_enforced " + std::to_string(want) + "\n";
    return api_.WaitFor([&] {
      auto r = http.Get("/metrics");
      return r && r->body.find(line) != std::string::npos;
    });
  };
  // Until the API server is seen to keep the borrower flag fixed (deploy/'s
  // ValidatingAdmissionPolicy and its Deny binding, scheduler/borrower_guard.h), a borrower is
  // placed as an ordinary pod: no lent memory.
  ASSERT_TRUE(lending(0));
  EXPECT_EQ(Filter(*svc, borrower, {"node-a", "node-b"})["NodeNames"], json::array({"node-b"}));
  json policy_binding;
  for (const json& obj :
       fakes::LoadManifest(std::string(FRACGPU_SOURCE_DIR) + "/deploy/admission-policy.yaml")) {
    if (obj.value("kind", "") == "ValidatingAdmissionPolicy") {
      api_.Put("validatingadmissionpolicies", obj);
    } else {
      policy_binding = api_.Put("validatingadmissionpolicybindings", obj);
    }
  }
  ASSERT_TRUE(lending(1));

  // Free for an ordinary pod: 16000 - 12000 = 4000; for a borrower 4000 + 8000 = 12000.
  json fb = Filter(*svc, borrower, {"node-a", "node-b"});
  EXPECT_EQ(fb["NodeNames"], json::array({"node-a", "node-b"})) << fb.dump();
  json fo = Filter(*svc, ordinary, {"node-a", "node-b"});
  EXPECT_EQ(fo["NodeNames"], json::array({"node-b"})) << fo.dump();
  ASSERT_TRUE(fo["FailedNodes"].contains("node-a")) << fo.dump();
  EXPECT_NE(fo["FailedNodes"]["node-a"].get<std::string>().find("CardInsufficientMemory"),
            std::string::npos);
  // A borrower that outranks ordinary pods (its annotation added after the webhook admitted
  // it) is placed as an ordinary pod.
  json high = as_borrower(GpuPod("high", {{"nvidia.com/gpumem", "10000"}}));
  high["spec"]["priority"] = 1000;
  high = api_.Put("pods", high);
  EXPECT_EQ(Filter(*svc, high, {"node-a", "node-b"})["NodeNames"], json::array({"node-b"}));

  // Prioritize: binpack prefers node-a (12000 of 16000 used) and reserves it for the borrower,
  // which fits there only on lent memory: the reservation shows at once in the books.
  json p = Post(*svc, "/prioritize",
                json{{"Pod", borrower}, {"NodeNames", {"node-a", "node-b"}}}.dump());
  ASSERT_TRUE(p.is_array()) << p.dump();
  std::map<std::string, int> scores;
  for (const auto& e : p) scores[e["Host"]] = e["Score"];
  EXPECT_EQ(scores["node-a"], 10) << p.dump();
  EXPECT_EQ(scores["node-b"], 0) << p.dump();
  EXPECT_EQ(svc->state().Node("node-a")->gpus.at(0).used_mem_mib, 22000);

  json b = Bind(*svc, borrower, "node-a");
  EXPECT_EQ(b["Error"], "") << b.dump();
  core::PodGrants grants = GrantsOf(*api_.Get("pods", "ml", "borrower"));
  ASSERT_EQ(grants.size(), 1u);
  ASSERT_EQ(grants[0].size(), 1u);
  EXPECT_EQ(grants[0][0].uuid, "GPU-a0");
  EXPECT_EQ(grants[0][0].mem_mib, 10000);
  ASSERT_TRUE(WaitUsed(*svc, "node-a", "GPU-a0", 22000));  // 6000 over the card's capacity
  ReleaseLock("node-a");

  // Nothing is left for an ordinary pod, even of 1 MiB; 2000 for a borrower.
  json small = api_.Put("pods", GpuPod("small", {{"nvidia.com/gpumem", "1"}}));
  EXPECT_EQ(Filter(*svc, small, {"node-a"})["NodeNames"], json::array());
  json borrower2 =
      api_.Put("pods", as_borrower(GpuPod("borrower-2", {{"nvidia.com/gpumem", "2000"}})));
  EXPECT_EQ(Filter(*svc, borrower2, {"node-a"})["NodeNames"], json::array({"node-a"}));
  json borrower3 =
      api_.Put("pods", as_borrower(GpuPod("borrower-3", {{"nvidia.com/gpumem", "2001"}})));
  EXPECT_EQ(Filter(*svc, borrower3, {"node-a"})["NodeNames"], json::array());

  // The binding deleted (or switched to Warn): lending off at once, lent memory is no room.
  ASSERT_TRUE(api_.Remove("validatingadmissionpolicybindings", "",
                          policy_binding["metadata"]["name"].get<std::string>()));
  ASSERT_TRUE(lending(0));
  EXPECT_EQ(Filter(*svc, borrower2, {"node-a"})["NodeNames"], json::array());
  api_.Put("validatingadmissionpolicybindings", policy_binding);
  ASSERT_TRUE(lending(1));
  EXPECT_EQ(Filter(*svc, borrower2, {"node-a"})["NodeNames"], json::array({"node-a"}));

  const std::string labels =
      "{node=\"node-a\",device_uuid=\"GPU-a0\",device_index=\"0\",device_type=\"NVIDIA-NVIDIA "
      "A100-SXM4-80GB\"} ";
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_NE(res->body.find("fracgpu_gpu_memory_lent_bytes" + labels + "8388608000"),
            std::string::npos)
      << res->body;
  EXPECT_NE(res->body.find("fracgpu_gpu_memory_borrowed_bytes" + labels + "10485760000"),
            std::string::npos);

  // The agent stopped republishing: a record 91 s old lends nothing (fail closed).
  api_.Patch("nodes", "", "node-a",
             {{"metadata",
               {{"annotations",
                 {{core::kAnnotationLentMemory, std::to_string(now - 91) + ";GPU-a0:8000"}}}}}});
  ASSERT_TRUE(api_.WaitFor([&] {
    auto n = svc->state().Node("node-a");
    return n && n->lent_at_unix == now - 91;
  }));
  EXPECT_EQ(Filter(*svc, borrower2, {"node-a"})["NodeNames"], json::array());
  res = http.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_NE(res->body.find("fracgpu_gpu_memory_lent_bytes" + labels + "0"), std::string::npos);
  // The borrower placed earlier still holds its grant: the agent evicts it, not the scheduler.
  EXPECT_NE(res->body.find("fracgpu_gpu_memory_borrowed_bytes" + labels + "10485760000"),
            std::string::npos);
}

}  // namespace
}  // namespace fracgpu::scheduler
