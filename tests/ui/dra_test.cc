// `fracgpu ui --dra-mode` over real HTTP: the cluster view from resource.k8s.io/v1
// ResourceSlices and allocated ResourceClaims in the fake API server, and the fit preview
// placing the notebook's claims (the webhook's conversion, core::ConvertHamiPod) with
// kube-scheduler's first fit over devices (core::FirstFitDevices). Slices and claims are
// written here by hand in the wire format (not with fracgpu's own builders); every expected
// figure is computed by hand from the fixture below.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "authz_notebooks.h"
#include "core/quantity.h"
#include "fake_apiserver.h"
#include "http/server.h"
#include "k8s/client.h"
#include "ui/cluster.h"
#include "ui/dra_cluster.h"
#include "ui/service.h"
#include "ui_fixture.h"

namespace fracgpu::ui {
namespace {

using nlohmann::json;

// One device of fracgpu's driver: `mib` MiB and 100 cores, shareable (KEP-5075 policies as
// fracgpu's driver publishes them: memory default the card, 1Mi..card step 1Mi; cores default 0,
// 0..100 step 1).
json Device(const std::string& name, const std::string& uuid, const std::string& type,
            const std::string& tokens, int mib, bool healthy = true) {
  std::string card = std::to_string(mib) + "Mi";
  return {
      {"name", name},
      {"allowMultipleAllocations", true},
      {"attributes",
       {{"uuid", {{"string", uuid}}},
        {"type", {{"string", type}}},
        {"typeTokens", {{"string", tokens}}},
        {"index", {{"int", name.back() - '0'}}},
        {"numaNode", {{"int", 0}}},
        {"healthy", {{"bool", healthy}}}}},
      {"capacity",
       {{"memory",
         {{"value", card},
          {"requestPolicy",
           {{"default", card}, {"validRange", {{"min", "1Mi"}, {"max", card}, {"step", "1Mi"}}}}}}},
        {"cores",
         {{"value", "100"},
          {"requestPolicy",
           {{"default", "0"}, {"validRange", {{"min", "0"}, {"max", "100"}, {"step", "1"}}}}}}}}}};
}

json Slice(const std::string& node, json devices, int generation = 1) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", node + "-gpu.fracgpu.io"}}},
          {"spec",
           {{"driver", "gpu.fracgpu.io"},
            {"nodeName", node},
            {"pool", {{"name", node}, {"generation", generation}, {"resourceSliceCount", 1}}},
            {"devices", std::move(devices)}}}};
}

// An allocated claim with one share, as kube-scheduler writes it.
json Claim(const std::string& name, const std::string& node, const std::string& device,
           const std::string& memory, const std::string& cores, const std::string& pod = "") {
  json claim = {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaim"},
      {"metadata", {{"name", name}, {"namespace", "team-a"}}},
      {"spec", {{"devices", {{"requests", json::array({{{"name", "gpu"}}})}}}}},
      {"status",
       {{"allocation",
         {{"devices",
           {{"results",
             json::array({{{"request", "gpu"},
                           {"driver", "gpu.fracgpu.io"},
                           {"pool", node},
                           {"device", device},
                           {"shareID", "share-" + name},
                           {"consumedCapacity", {{"memory", memory}, {"cores", cores}}}}})}}}}}}}};
  if (!pod.empty()) {
    claim["status"]["reservedFor"] =
        json::array({{{"resource", "pods"}, {"name", pod}, {"uid", "uid-" + pod}}});
  }
  return claim;
}

json Node(const std::string& name, bool cordoned = false) {
  json node = {{"metadata", {{"name", name}}}};
  if (cordoned) node["spec"] = {{"unschedulable", true}};
  return node;
}

constexpr const char* kT4 = "NVIDIA-Tesla T4";
constexpr const char* kT4Tokens = ",NVIDIA,TESLA,T4,";

// Fixture cluster (DRA mode):
//   node-a: gpu-0 GPU-a0 and gpu-1 GPU-a1, T4 16384 MiB each. Claims c1 (3000 MiB, 30 cores,
//           pod train-1) and c2 (4000 MiB, 20 cores, pod train-2) on gpu-0: 7000 MiB and 50 %
//           used, 9384 MiB free; c3 (6000 MiB, 10 cores) on gpu-1: 10384 MiB free.
//   node-b: gpu-0 GPU-b0 A100 81920 MiB free; gpu-1 GPU-b1 A100 81920 MiB unhealthy.
//   node-c: cordoned; gpu-0 GPU-c0 T4 16384 MiB free.
//   node-d: no ResourceSlice (no GPUs).
//   c4: a claim not allocated yet (no status): consumes nothing.
class UiDraTest : public uitest::UiHarness {
 protected:
  void SetUp() override {
    for (const char* n : {"node-a", "node-b", "node-d"}) fake_.Put("nodes", Node(n));
    fake_.Put("nodes", Node("node-c", true));
    fake_.Put("resourceslices",
              Slice("node-a", json::array({Device("gpu-0", "GPU-a0", kT4, kT4Tokens, 16384),
                                           Device("gpu-1", "GPU-a1", kT4, kT4Tokens, 16384)})));
    const char* a100 = "NVIDIA A100-SXM4-80GB";
    const char* a100_tokens = ",NVIDIA,A100,SXM4,80GB,";
    fake_.Put(
        "resourceslices",
        Slice("node-b", json::array({Device("gpu-0", "GPU-b0", a100, a100_tokens, 81920),
                                     Device("gpu-1", "GPU-b1", a100, a100_tokens, 81920, false)})));
    fake_.Put("resourceslices",
              Slice("node-c", json::array({Device("gpu-0", "GPU-c0", kT4, kT4Tokens, 16384)})));
    fake_.Put("resourceclaims", Claim("c1", "node-a", "gpu-0", "3000Mi", "30", "train-1"));
    fake_.Put("resourceclaims", Claim("c2", "node-a", "gpu-0", "4000Mi", "20", "train-2"));
    fake_.Put("resourceclaims", Claim("c3", "node-a", "gpu-1", "6000Mi", "10"));
    json pending = Claim("c4", "node-a", "gpu-1", "9000Mi", "0");
    pending.erase("status");
    fake_.Put("resourceclaims", pending);

    UiOptions options;
    options.images = {"jupyter-scipy:v1"};
    StartUi(options, /*dra_mode=*/true);
  }

  static std::string Memory(int mib, int cores = -1) {
    std::string slice = R"("slice":{"mode":"memory","memory_value":)" + std::to_string(mib) +
                        R"(,"memory_unit":"MiB")";
    if (cores >= 0) slice += R"(,"cores_percent":)" + std::to_string(cores);
    return R"("gpus":1,)" + slice + "}";
  }
  static const json& NodeEntry(const json& preview, const std::string& node) {
    for (const auto& n : preview["fit"]["per_node"]) {
      if (n["node"] == node) return n;
    }
    static const json none;
    ADD_FAILURE() << "no per_node entry for " << node << " in " << preview["fit"].dump();
    return none;
  }
};

TEST_F(UiDraTest, ClusterShowsDevicesAndConsumedCapacity) {
  // alice may list notebooks in team-a, the namespace of every claim: she sees their names.
  authz_.Allow("alice", "list", "team-a");
  auto [status, c] = Get("/api/cluster", "alice");
  ASSERT_EQ(status, 200) << c.dump();
  EXPECT_EQ(c["mode"], "dra");
  EXPECT_EQ(c["problems"], json::array());
  ASSERT_EQ(c["nodes"].size(), 4u);
  const json& a = c["nodes"][0];
  EXPECT_EQ(a["name"], "node-a");
  EXPECT_EQ(a["gpu_ready"], true);
  ASSERT_EQ(a["gpus"].size(), 2u);
  const json& a0 = a["gpus"][0];
  EXPECT_EQ(a0["uuid"], "GPU-a0");
  EXPECT_EQ(a0["device"], "gpu-0");
  EXPECT_EQ(a0["pool"], "node-a");
  EXPECT_EQ(a0["shared"], true);
  EXPECT_EQ(a0["type"], kT4);
  EXPECT_EQ(a0["health"], true);
  EXPECT_EQ(a0["devmem_mib"], 16384);
  EXPECT_EQ(a0["used_mem_mib"], 7000);  // 3000 + 4000
  EXPECT_EQ(a0["devcore"], 100);
  EXPECT_EQ(a0["used_cores"], 50);  // 30 + 20
  EXPECT_EQ(a0["used"], 2);
  EXPECT_EQ(a0["slices"], json::parse(R"([
      {"pod":"train-1","namespace":"team-a","claim":"c1","mem_mib":3000,"cores":30,"whole":false},
      {"pod":"train-2","namespace":"team-a","claim":"c2","mem_mib":4000,"cores":20,"whole":false}])"));
  // c3 has no reservedFor: the claim's name stands for the pod; c4 (pending) consumes nothing.
  EXPECT_EQ(a["gpus"][1]["used_mem_mib"], 6000);
  EXPECT_EQ(a["gpus"][1]["slices"][0]["pod"], "c3");
  EXPECT_EQ(c["nodes"][1]["gpus"][1]["health"], false);
  EXPECT_EQ(c["nodes"][2]["name"], "node-c");
  EXPECT_EQ(c["nodes"][2]["unschedulable"], true);
  EXPECT_EQ(c["nodes"][3]["name"], "node-d");
  EXPECT_EQ(c["nodes"][3]["gpu_ready"], false);
  EXPECT_EQ(c["nodes"][3]["gpus"], json::array());
  // 2 × 16384 + 2 × 81920 + 16384 MiB; 7000 + 6000 used.
  EXPECT_EQ(c["totals"],
            json({{"nodes", 4}, {"gpus", 5}, {"devmem_mib", 212992}, {"used_mem_mib", 13000}}));
}

TEST_F(UiDraTest, OptionsListTheDevices) {
  auto [status, o] = Get("/api/options");
  ASSERT_EQ(status, 200);
  EXPECT_EQ(o["dra_mode"], true);
  EXPECT_EQ(o["gpu_types"], json({"NVIDIA A100-SXM4-80GB", kT4}));
  ASSERT_EQ(o["gpus"].size(), 5u);
  EXPECT_EQ(o["gpus"][0],
            json({{"uuid", "GPU-a0"}, {"node", "node-a"}, {"type", kT4}, {"index", 0}}));
}

TEST_F(UiDraTest, FiveThousandMiBFitsBesideTheTwoClaims) {
  // gpu-0 of node-a: 7000 + 5000 = 12000 ≤ 16384 MiB and 50 + 10 ≤ 100 cores: first fit takes it.
  json p = Preview(Memory(5000, 10));
  EXPECT_EQ(p["errors"], json::array());
  EXPECT_EQ(p["fit"]["mode"], "dra");
  EXPECT_EQ(p["fit"]["fits"], true);
  // node-a: GPU-a0 and GPU-a1 eligible; node-b: GPU-b0 (GPU-b1 unhealthy); node-c cordoned.
  EXPECT_EQ(p["fit"]["message"],
            "fits now: takes 1 GPU on one node; 2 nodes of 3 can take it (3 candidate GPUs)");
  EXPECT_EQ(p["fit"]["total_nodes"], 3);
  const json& a = NodeEntry(p, "node-a");
  EXPECT_EQ(a["fits"], true);
  EXPECT_EQ(a["gpus"], json({"GPU-a0"}));
  EXPECT_EQ(a["devices"], json({"gpu-0"}));
  EXPECT_EQ(a["eligible"], json({"GPU-a0", "GPU-a1"}));
  EXPECT_EQ(a["candidates"], json::parse(R"([
      {"uuid":"GPU-a0","device":"gpu-0","mem_mib":5000,"devmem_mib":16384,"free_mem_mib":9384},
      {"uuid":"GPU-a1","device":"gpu-1","mem_mib":5000,"devmem_mib":16384,"free_mem_mib":10384}])"));
  EXPECT_EQ(NodeEntry(p, "node-b")["gpus"], json({"GPU-b0"}));
  const json& c = NodeEntry(p, "node-c");
  EXPECT_EQ(c["fits"], false);
  EXPECT_EQ(c["eligible"], json({"GPU-c0"}));
  EXPECT_EQ(c["reason"], kCordonedNodeReason);
}

TEST_F(UiDraTest, TenThousandMiBGoesToTheNextDevice) {
  // gpu-0 has 9384 MiB free: first fit passes it and takes gpu-1 (10384 free).
  json p = Preview(Memory(10000));
  const json& a = NodeEntry(p, "node-a");
  EXPECT_EQ(a["fits"], true);
  EXPECT_EQ(a["gpus"], json({"GPU-a1"}));
  EXPECT_EQ(a["eligible"], json({"GPU-a1"}));
}

TEST_F(UiDraTest, TwelveThousandMiBFitsOnNoDeviceOfNodeA) {
  json p = Preview(Memory(12000));
  const json& a = NodeEntry(p, "node-a");
  EXPECT_EQ(a["fits"], false);
  EXPECT_EQ(a["gpus"], json::array());
  EXPECT_EQ(a["reason"],
            "container \"nb1\": request \"gpu\": device 1 of 1 fits no device (gpu-0: needs 12000 "
            "MiB, 9384 MiB free; "
            "gpu-1: needs 12000 MiB, 10384 MiB free)");
  EXPECT_EQ(NodeEntry(p, "node-b")["fits"], true);
  EXPECT_EQ(p["fit"]["message"],
            "fits now: takes 1 GPU on one node; 1 node of 3 can take it (1 candidate GPU)");
}

TEST_F(UiDraTest, NothingFitsAndThePreviewSaysSo) {
  // 90000 MiB is beyond every device's validRange max (16384, 81920 MiB).
  json p = Preview(Memory(90000));
  EXPECT_EQ(p["fit"]["fits"], false);
  EXPECT_EQ(p["fit"]["message"], "fits on no node");
  EXPECT_EQ(p["fit"]["nodes"], 0);
  EXPECT_EQ(NodeEntry(p, "node-b")["reason"],
            "container \"nb1\": request \"gpu\": device 1 of 1 fits no device (gpu-0: memory "
            "request outside the "
            "device's request policy (81920 MiB); gpu-1: unhealthy)");
}

TEST_F(UiDraTest, TypeRulesSelectDevicesAsTheClaimsCelWould) {
  json p = Preview(Memory(5000) + R"(,"use_types":["T4"])");
  EXPECT_EQ(NodeEntry(p, "node-a")["gpus"], json({"GPU-a0"}));
  EXPECT_EQ(NodeEntry(p, "node-b")["reason"],
            "container \"nb1\": request \"gpu\": device 1 of 1 fits no device (gpu-0: not selected "
            "by the type/UUID "
            "rules; gpu-1: unhealthy)");
  p = Preview(Memory(5000) + R"(,"nouse_uuids":["gpu-a0"])");  // UUIDs compare case-insensitively
  EXPECT_EQ(NodeEntry(p, "node-a")["gpus"], json({"GPU-a1"}));
}

TEST_F(UiDraTest, TwoDevicesAndTheCardDefault) {
  // Two devices of 5000 MiB: node-a takes both; node-b has one healthy device.
  json p = Preview(R"("gpus":2,"slice":{"mode":"memory","memory_value":5000,"memory_unit":"MiB"})");
  EXPECT_EQ(NodeEntry(p, "node-a")["gpus"], json({"GPU-a0", "GPU-a1"}));
  EXPECT_EQ(NodeEntry(p, "node-b")["reason"],
            "container \"nb1\": request \"gpu\": device 2 of 2 fits no device (gpu-0: could take "
            "one; gpu-1: "
            "unhealthy)");
  // Cores only: no memory request, so the request policy's default (the whole card) is consumed:
  // 16384 MiB fits on neither device of node-a, but on GPU-b0.
  p = Preview(R"("gpus":1,"slice":{"mode":"cores","cores_percent":30})");
  EXPECT_EQ(p["errors"], json::array()) << p["errors"].dump();
  EXPECT_EQ(NodeEntry(p, "node-a")["reason"],
            "container \"nb1\": request \"gpu\": device 1 of 1 fits no device (gpu-0: needs 16384 "
            "MiB, 9384 MiB free; "
            "gpu-1: needs 16384 MiB, 10384 MiB free)");
  EXPECT_EQ(NodeEntry(p, "node-b")["gpus"], json({"GPU-b0"}));
}

TEST_F(UiDraTest, WhatDraCannotExpressIsTheWebhooksError) {
  json p =
      Preview(R"("gpus":1,"slice":{"mode":"fraction","memory_percent":50,"cores_percent":50})");
  EXPECT_EQ(
      p["errors"],
      json({"DRA mode: container \"nb1\": nvidia.com/gpumem-percentage 50 cannot be expressed in "
            "DRA (capacity requests are absolute MiB); use nvidia.com/gpumem"}));
  EXPECT_TRUE(p["fit"].is_null());
  authz_.Allow("alice", "create", "team-a");
  auto [status, body] =
      Post("/api/notebooks",
           R"({"name":"nb1","namespace":"team-a","image":"jupyter-scipy:v1","gpus":1,
                                 "slice":{"mode":"fraction","memory_percent":50,"cores_percent":50}})",
           "alice");
  EXPECT_EQ(status, 400);
  EXPECT_EQ(body["error"], p["errors"][0]);
  EXPECT_TRUE(authz_.created().empty());
  // A request DRA can express is created as usual.
  std::tie(status, body) =
      Post("/api/notebooks",
           R"({"name":"nb2","namespace":"team-a","image":"jupyter-scipy:v1","gpus":1,
               "slice":{"mode":"memory","memory_value":5000,"memory_unit":"MiB"}})",
           "alice");
  EXPECT_EQ(status, 201) << body.dump();
}

TEST_F(UiDraTest, HostileSlicesAndClaimsAreReportedNotFatal) {
  // A device with a bad quantity, a slice of 129 devices, devices that are not objects, a
  // claim whose consumed memory is not whole MiB (on GPU-a1: what it consumes is unknown, so
  // nothing more is placed there), a claim with 33 results, results that are not a list, a
  // slice for a node that does not exist.
  json bad_device = Device("gpu-0", "GPU-e0", kT4, kT4Tokens, 16384);
  bad_device["capacity"]["memory"]["value"] = "lots";
  fake_.Put("nodes", Node("node-e"));
  fake_.Put(
      "resourceslices",
      Slice("node-e", json::array({bad_device, Device("gpu-1", "GPU-e1", kT4, kT4Tokens, 16384)})));
  json many = json::array();
  for (int i = 0; i < 129; ++i)
    many.push_back(Device("gpu-" + std::to_string(i % 10), "GPU-f", kT4, kT4Tokens, 1));
  fake_.Put("nodes", Node("node-f"));
  fake_.Put("resourceslices", Slice("node-f", many));
  fake_.Put("nodes", Node("node-g"));
  fake_.Put("resourceslices", Slice("node-g", json::array({5, "x"})));
  fake_.Put("resourceslices",
            Slice("node-gone", json::array({Device("gpu-0", "GPU-x", kT4, kT4Tokens, 16384)})));
  fake_.Put("resourceclaims", Claim("c5", "node-a", "gpu-1", "12.5Mi", "0"));
  json big = Claim("c6", "node-b", "gpu-0", "1Mi", "0");
  json results = json::array();
  for (int i = 0; i < 33; ++i)
    results.push_back(big["status"]["allocation"]["devices"]["results"][0]);
  big["status"]["allocation"]["devices"]["results"] = results;
  fake_.Put("resourceclaims", big);
  json not_list = Claim("c7", "node-b", "gpu-0", "1Mi", "0");
  not_list["status"]["allocation"]["devices"]["results"] = "x";
  fake_.Put("resourceclaims", not_list);

  // Nobody signed in: the problems naming team-a's claims are counted, not shown.
  auto [anon_status, anon] = Get("/api/cluster");
  ASSERT_EQ(anon_status, 200) << anon.dump();
  EXPECT_EQ(anon["problems_hidden"], 3);
  EXPECT_EQ(anon["problems"].size(), 5u) << anon["problems"].dump();
  EXPECT_EQ(anon.dump().find("team-a"), std::string::npos) << anon.dump();
  // alice may list notebooks in team-a: she reads them all.
  authz_.Allow("alice", "list", "team-a");
  auto [status, c] = Get("/api/cluster", "alice");
  ASSERT_EQ(status, 200) << c.dump();
  EXPECT_EQ(c["problems_hidden"], 0);
  std::vector<std::string> problems = c["problems"].get<std::vector<std::string>>();
  std::sort(problems.begin(), problems.end());
  EXPECT_EQ(
      problems,
      (std::vector<std::string>{
          "ResourceClaim team-a/c5 status.allocation.devices.results[0].consumedCapacity.memory "
          "\"12.5Mi\" is "
          "not a whole number of MiB",
          "ResourceClaim team-a/c6 status.allocation.devices.results has 33 entries (at most 32)",
          "ResourceClaim team-a/c7 status.allocation.devices.results must be a list, got \"x\"",
          "ResourceSlice node-e-gpu.fracgpu.io spec.devices[0] (gpu-0) capacity.memory.value "
          "\"lots\": " +
              core::ParseQuantity("lots").status().message(),
          "ResourceSlice node-f-gpu.fracgpu.io spec.devices has 129 entries (at most 128)",
          "ResourceSlice node-g-gpu.fracgpu.io spec.devices[0] must be an object, got 5",
          "ResourceSlice node-g-gpu.fracgpu.io spec.devices[1] must be an object, got \"x\"",
          "ResourceSlice pool \"node-gone\" of driver gpu.fracgpu.io is for node \"node-gone\", "
          "which is not a "
          "node of the cluster: its devices are not shown"}));
  // node-e shows its good device only; GPU-a1 counts as taken whole.
  for (const auto& n : c["nodes"]) {
    if (n["name"] == "node-e") {
      ASSERT_EQ(n["gpus"].size(), 1u);
      EXPECT_EQ(n["gpus"][0]["uuid"], "GPU-e1");
    }
    if (n["name"] == "node-a") {
      EXPECT_EQ(n["gpus"][1]["used_mem_mib"], 16384);
    }
  }
  // The preview still answers: 10000 MiB no longer fits on node-a (GPU-a1 is taken whole).
  json p = Preview(Memory(10000));
  EXPECT_EQ(NodeEntry(p, "node-a")["reason"],
            "container \"nb1\": request \"gpu\": device 1 of 1 fits no device (gpu-0: needs 10000 "
            "MiB, 9384 MiB free; "
            "gpu-1: taken whole by a claim)");
  EXPECT_EQ(NodeEntry(p, "node-e")["gpus"], json({"GPU-e1"}));
}

// A claim of a namespace the viewer may not list notebooks in is shown without pod, namespace
// and claim (docs/ui.md "What a viewer sees of other namespaces"); the device's figures stay
// whole.
TEST_F(UiDraTest, ClaimsOfOtherNamespacesAreAnonymous) {
  json other = Claim("secret-claim", "node-b", "gpu-0", "20000Mi", "40", "customer-x-train");
  other["metadata"]["namespace"] = "team-b";
  fake_.Put("resourceclaims", other);
  authz_.Allow("alice", "list", "team-a");
  auto [status, c] = Get("/api/cluster", "alice");
  ASSERT_EQ(status, 200) << c.dump();
  const json& b0 = c["nodes"][1]["gpus"][0];
  EXPECT_EQ(b0["uuid"], "GPU-b0");
  EXPECT_EQ(b0["used_mem_mib"], 20000);
  EXPECT_EQ(b0["used_cores"], 40);
  EXPECT_EQ(b0["slices"], json::parse(R"([{"pod":null,"namespace":null,"claim":null,
      "mem_mib":20000,"cores":40,"whole":false}])"));
  EXPECT_EQ(c["nodes"][0]["gpus"][0]["slices"][0]["pod"], "train-1");  // team-a: named
  for (const char* name : {"team-b", "secret-claim", "customer-x"})
    EXPECT_EQ(c.dump().find(name), std::string::npos) << name;
  // Nobody signed in: no claim named at all.
  auto [anon_status, anon] = Get("/api/cluster");
  ASSERT_EQ(anon_status, 200);
  EXPECT_EQ(anon.dump().find("team-a"), std::string::npos) << anon.dump();
  EXPECT_EQ(anon["nodes"][0]["gpus"][0]["slices"], json::parse(R"([
      {"pod":null,"namespace":null,"claim":null,"mem_mib":4000,"cores":20,"whole":false},
      {"pod":null,"namespace":null,"claim":null,"mem_mib":3000,"cores":30,"whole":false}])"));
}

TEST_F(UiDraTest, AnApiServerWithoutTheResourceApiIsAnError) {
  fake_.FailNext("GET", "/apis/resource.k8s.io/v1/resourceslices", 404, 1,
                 "the server could not find the requested resource");
  auto [status, body] = Get("/api/cluster");
  EXPECT_EQ(status, 404) << body.dump();
  EXPECT_NE(body["error"].get<std::string>().find("listing ResourceSlices"), std::string::npos)
      << body.dump();
}

}  // namespace
}  // namespace fracgpu::ui
