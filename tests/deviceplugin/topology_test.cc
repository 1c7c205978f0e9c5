// The GPU link scores `hami.io/node-nvidia-score` (issue 34 item 6): HAMi's pair score and JSON
// encoding, checked against values computed here from the boxes' links; the registrar writing
// the annotation; and end to end, the device plugin's NVML reading of the fake 2x NVLink box ->
// the annotation -> the extender's /filter and /bind placing a topology-aware 2-GPU pod on a
// linked pair.
#include "deviceplugin/topology.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "api/nvml.h"
#include "core/cluster_state.h"
#include "core/codec.h"
#include "core/signature.h"
#include "deviceplugin/cluster_api.h"
#include "deviceplugin/registrar.h"
#include "fake_apiserver.h"
#include "fake_cluster.h"
#include "k8s/client.h"
#include "k8s/objects.h"
#include "node/device_state.h"
#include "scheduler/service.h"
#include "test_support.h"

namespace fracgpu::deviceplugin {
namespace {

using namespace testing;  // NOLINT
using nlohmann::json;

std::string Uuid(int i) { return "GPU-00000000-0000-0000-0000-00000000000" + std::to_string(i); }

// Every ordered pair of `n` GPUs: common ancestor `ancestor(a, b)`, `nvlinks(a, b)` NVLinks.
template <typename Ancestor, typename Nvlinks>
nvml::TopologyReport Box(int n, Ancestor ancestor, Nvlinks nvlinks) {
  nvml::TopologyReport r;
  for (int a = 0; a < n; ++a) r.uuids.push_back(Uuid(a));
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a != b) r.links.push_back({Uuid(a), Uuid(b), ancestor(a, b), nvlinks(a, b)});
    }
  }
  return r;
}

// HAMi's JSON, written out by hand: [{"uuid":"A","score":{"B":s,...}},...], keys sorted.
std::string HamiJson(int n, const std::function<int(int, int)>& score) {
  std::string out = "[";
  for (int a = 0; a < n; ++a) {
    out += std::string(a ? "," : "") + "{\"uuid\":\"" + Uuid(a) + "\",\"score\":{";
    bool first = true;
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      out += std::string(first ? "" : ",") + "\"" + Uuid(b) + "\":" + std::to_string(score(a, b));
      first = false;
    }
    out += "}}";
  }
  return out + "]";
}

std::vector<std::string> Uuids(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(Uuid(i));
  return out;
}

TEST(TopologyScores, TwoWayNvlinkBoxInHamisFormat) {
  // 0-1 and 2-3 bridged by 4 NVLinks, every pair on one CPU (NVML_TOPOLOGY_NODE).
  auto linked = [](int a, int b) { return a / 2 == b / 2; };
  nvml::TopologyReport r = Box(
      4, [](int, int) { return NVML_TOPOLOGY_NODE; },
      [&](int a, int b) { return linked(a, b) ? 4u : 0u; });
  bool asymmetric = false;
  std::string value = EncodeTopologyScores(Uuids(4), r, &asymmetric);
  // SameCPU 20, plus 100 per NVLink.
  EXPECT_EQ(value, HamiJson(4, [&](int a, int b) { return 20 + (linked(a, b) ? 400 : 0); }));
  const std::string head =
      "[{\"uuid\":\"GPU-00000000-0000-0000-0000-000000000000\",\"score\":{\"GPU-00000000-"
      "0000-0000-0000-000000000001\":420,";
  EXPECT_EQ(value.substr(0, head.size()), head);
  EXPECT_FALSE(asymmetric);
  // What the scheduler reads back.
  auto decoded = core::DecodeTopologyScores(value);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ((*decoded)[Uuid(0)][Uuid(1)], 420);
  EXPECT_EQ((*decoded)[Uuid(1)][Uuid(2)], 20);
  EXPECT_EQ((*decoded)[Uuid(3)][Uuid(2)], 420);
}

TEST(TopologyScores, EightGpuNvswitchBoxInHamisFormat) {
  // 18 NVLinks through the NVSwitches between every pair; GPUs 0-3 and 4-7 on two sockets.
  nvml::TopologyReport r = Box(
      8, [](int a, int b) { return a / 4 == b / 4 ? NVML_TOPOLOGY_NODE : NVML_TOPOLOGY_SYSTEM; },
      [](int, int) { return 18u; });
  bool asymmetric = false;
  EXPECT_EQ(EncodeTopologyScores(Uuids(8), r, &asymmetric),
            HamiJson(8, [](int a, int b) { return (a / 4 == b / 4 ? 20 : 10) + 1800; }));
  EXPECT_FALSE(asymmetric);
}

TEST(TopologyScores, EveryPcieLevelAndTheRegisteredGpusOnly) {
  const unsigned levels[] = {NVML_TOPOLOGY_INTERNAL,   NVML_TOPOLOGY_SINGLE, NVML_TOPOLOGY_MULTIPLE,
                             NVML_TOPOLOGY_HOSTBRIDGE, NVML_TOPOLOGY_NODE,   NVML_TOPOLOGY_SYSTEM};
  const int want[] = {60, 50, 40, 30, 20, 10};
  for (int k = 0; k < 6; ++k) {
    nvml::GpuPairLink ab{"a", "b", levels[k], 0}, ba{"b", "a", levels[k], 0};
    EXPECT_EQ(PairScore(ab, ba, nullptr), want[k]) << levels[k];
  }
  // An NVLink count HAMi has no type for (above 18) adds nothing.
  nvml::GpuPairLink many{"a", "b", NVML_TOPOLOGY_NODE, 19},
      many_back{"b", "a", NVML_TOPOLOGY_NODE, 19};
  EXPECT_EQ(PairScore(many, many_back, nullptr), 20);
  // Only the GPUs registered (filterdevices may drop some), in the register's order.
  nvml::TopologyReport r = Box(
      3, [](int, int) { return NVML_TOPOLOGY_HOSTBRIDGE; }, [](int, int) { return 1u; });
  EXPECT_EQ(EncodeTopologyScores({Uuid(2), Uuid(0)}, r, nullptr),
            "[{\"uuid\":\"" + Uuid(2) + "\",\"score\":{\"" + Uuid(0) + "\":130}},{\"uuid\":\"" +
                Uuid(0) + "\",\"score\":{\"" + Uuid(2) + "\":130}}]");
  // One GPU: an empty score map, as HAMi writes it.
  EXPECT_EQ(EncodeTopologyScores({Uuid(1)}, r, nullptr),
            "[{\"uuid\":\"" + Uuid(1) + "\",\"score\":{}}]");
}

TEST(TopologyScores, AsymmetricLinksScoreZeroAndNothingWithoutATopology) {
  nvml::TopologyReport r = Box(
      2, [](int, int) { return NVML_TOPOLOGY_NODE; }, [](int a, int) { return a == 0 ? 2u : 0u; });
  bool asymmetric = false;
  EXPECT_EQ(EncodeTopologyScores(Uuids(2), r, &asymmetric),
            HamiJson(2, [](int, int) { return 0; }));
  EXPECT_TRUE(asymmetric);
  r.links.clear();
  r.omitted = "NVML library x has no nvmlDeviceGetTopologyCommonAncestor: no GPU link scores";
  EXPECT_EQ(EncodeTopologyScores(Uuids(2), r, nullptr), "");
  EXPECT_EQ(EncodeTopologyScores({},
                                 Box(
                                     0, [](int, int) { return 0u; }, [](int, int) { return 0u; }),
                                 nullptr),
            "");
}

TEST(TopologyScores, TheRegistrarWritesThemWithTheRegisterAnnotationAndOnlyOnChange) {
  FakeCluster cluster;
  cluster.PutNode(MakeNode());
  node::DeviceState state(TwoGpus(), node::DeviceConfig{});
  NodeRegistrar registrar(kNode, &cluster);
  std::string scores = "[{\"uuid\":\"" + std::string(kUuidA) + "\",\"score\":{\"" + kUuidB +
                       "\":420}},{\"uuid\":\"" + kUuidB + "\",\"score\":{\"" + kUuidA + "\":420}}]";
  registrar.set_topology_scores(scores);
  auto first = registrar.Sync(state.Devices());
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(*first);
  json annotations = cluster.Node(kNode)["metadata"]["annotations"];
  EXPECT_EQ(annotations["hami.io/node-nvidia-score"], scores);
  EXPECT_TRUE(annotations.contains("hami.io/node-nvidia-register"));
  EXPECT_EQ(cluster.node_patches(), 1);
  auto again = registrar.Sync(state.Devices());
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
  // Re-registration restores a removed (or edited) value.
  json node = cluster.Node(kNode);
  node["metadata"]["annotations"].erase("hami.io/node-nvidia-score");
  cluster.PutNode(node);
  auto restored = registrar.Sync(state.Devices());
  ASSERT_TRUE(restored.ok());
  EXPECT_TRUE(*restored);
  EXPECT_EQ(cluster.Node(kNode)["metadata"]["annotations"]["hami.io/node-nvidia-score"], scores);
}

// ---- end to end: fake NVML -> device plugin -> annotation -> extender -------------------

constexpr char kSchedKey[] = "topology-test-key";

json Pod(const std::string& name, json limits) {
  return {{"metadata", {{"name", name}, {"namespace", "ml"}}},
          {"spec",
           {{"schedulerName", "fracgpu-scheduler"},
            {"containers", {{{"name", "c"}, {"resources", {{"limits", limits}}}}}}}}};
}

// A pod already running on `node` with `allocated` (signed as /bind signs).
json Running(const std::string& name, const std::string& node, const std::string& allocated) {
  json pod = Pod(name, {{"nvidia.com/gpu", "1"}});
  std::string uid = "uid-" + name;
  pod["metadata"]["uid"] = uid;
  pod["metadata"]["annotations"] = {{core::kAnnotationVgpuNode, node},
                                    {core::kAnnotationVgpuDevicesAllocated, allocated},
                                    {core::kAnnotationAllocationSignature,
                                     core::SignAllocation(kSchedKey, uid, node, allocated)}};
  pod["spec"]["nodeName"] = node;
  pod["status"]["phase"] = "Running";
  return pod;
}

// The GPUs /bind gives a topology-aware pod asking for 2 GPUs on the fake 4-GPU box read with
// FAKE_GPU_TOPOLOGY=`topology` (unset: the fake reports no topology), with GPU 0 full and GPU 3
// a little used: GPUs 1, 2 and 3 fit, and 1 + 2 is the unlinked pair.
std::set<std::string> PlaceTwoGpuPod(const char* topology, bool* scores_written) {
  std::string list;
  for (int i = 0; i < 4; ++i) list += (i ? "," : "") + Uuid(i) + ":81920";
  setenv("FAKE_GPU_DEVICES", list.c_str(), 1);
  if (topology) {
    setenv("FAKE_GPU_TOPOLOGY", topology, 1);
  } else {
    unsetenv("FAKE_GPU_TOPOLOGY");
  }
  fakes::FakeApiServer api;
  k8s::Config config;
  config.server = api.url();
  auto client = k8s::Client::Create(config);
  EXPECT_TRUE(client.ok());
  if (!client.ok()) return {};
  api.Put("nodes", {{"metadata", {{"name", "gpu-node"}}},
                    {"status", {{"allocatable", {{"nvidia.com/gpu", "40"}}}}}});

  // The device plugin's side, as `fracgpu device-plugin` runs it (src/deviceplugin/command.cc).
  auto nvml = nvml::Nvml::Open({FRACGPU_FAKE_NVML, "/nonexistent"});
  EXPECT_TRUE(nvml.ok()) << nvml.status().ToString();
  if (!nvml.ok()) return {};
  auto gpus = (*nvml)->ListGpus();
  EXPECT_TRUE(gpus.ok());
  if (!gpus.ok()) return {};
  node::DeviceState state(*gpus, node::DeviceConfig{});
  K8sClusterApi cluster_api(client->get());
  NodeRegistrar registrar("gpu-node", &cluster_api);
  registrar.set_topology_scores(NodeTopologyScores(nvml->get(), state.Devices()));
  auto synced = registrar.Sync(state.Devices());
  EXPECT_TRUE(synced.ok()) << synced.status().ToString();
  *scores_written =
      k8s::Annotation(*api.Get("nodes", "", "gpu-node"), core::kAnnotationTopology).has_value();

  api.Put("pods", Running("full", "gpu-node", Uuid(0) + ",NVIDIA,81920,0:;"));
  api.Put("pods", Running("small", "gpu-node", Uuid(3) + ",NVIDIA,1024,0:;"));
  json pod = Pod("train", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "8000"}});
  pod["metadata"]["annotations"] = {{"hami.io/gpu-scheduler-policy", "topology-aware"}};
  pod = api.Put("pods", pod);

  scheduler::SchedulerOptions o;
  o.extender.signing_key = kSchedKey;
  scheduler::SchedulerService svc(o, client->get());
  EXPECT_TRUE(svc.Start().ok());
  EXPECT_TRUE(svc.WaitForSync(std::chrono::seconds(10)));
  EXPECT_TRUE(api.WaitFor([&] {
    auto n = svc.state().Node("gpu-node");
    if (!n) return false;
    int64_t used = 0;
    for (const auto& g : n->gpus) used += g.used_mem_mib;
    return used == 81920 + 1024;
  }));
  httplib::Client http("127.0.0.1", svc.port());
  http.set_read_timeout(30, 0);
  auto filter = http.Post(
      "/filter", json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", {"gpu-node"}}}.dump(),
      "application/json");
  EXPECT_TRUE(filter && filter->status == 200);
  if (filter) {
    EXPECT_EQ(json::parse(filter->body)["NodeNames"], json::array({"gpu-node"})) << filter->body;
  }
  auto bind = http.Post("/bind",
                        json{{"PodName", "train"},
                             {"PodNamespace", "ml"},
                             {"PodUID", k8s::Uid(pod)},
                             {"Node", "gpu-node"}}
                            .dump(),
                        "application/json");
  EXPECT_TRUE(bind && bind->status == 200);
  if (bind) {
    EXPECT_EQ(json::parse(bind->body)["Error"], "") << bind->body;
  }
  std::set<std::string> chosen;
  auto allocated =
      k8s::Annotation(*api.Get("pods", "ml", "train"), core::kAnnotationVgpuDevicesAllocated);
  EXPECT_TRUE(allocated.has_value());
  if (!allocated) return {};
  auto grants = core::DecodePodGrants(*allocated);
  EXPECT_TRUE(grants.ok());
  if (!grants.ok()) return {};
  for (const auto& container : *grants) {
    for (const auto& g : container) chosen.insert(g.uuid);
  }
  svc.Stop();
  return chosen;
}

TEST(TopologyEndToEnd, TopologyAwarePlacesATwoGpuPodOnALinkedPair) {
  bool written = false;
  EXPECT_EQ(PlaceTwoGpuPod("nvlink2x", &written), (std::set<std::string>{Uuid(2), Uuid(3)}));
  EXPECT_TRUE(written);
}

TEST(TopologyEndToEnd, WithoutLinkScoresTheChoiceIgnoresTheLinks) {
  // What fracgpu did before the device plugin wrote the scores: the first two candidates,
  // 1 + 2, not linked on the 2x box.
  bool written = true;
  EXPECT_EQ(PlaceTwoGpuPod(nullptr, &written), (std::set<std::string>{Uuid(1), Uuid(2)}));
  EXPECT_FALSE(written);
}

}  // namespace
}  // namespace fracgpu::deviceplugin
