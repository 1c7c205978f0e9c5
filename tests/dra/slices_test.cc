// ResourceSlice content (attributes, capacities, request policies; whole-device mode) and
// publishing against the fake API server (create, no-op, generation bump on change).
#include "dra/slices.h"

#include <gtest/gtest.h>

#include "dra/api.h"
#include "dra/placement.h"
#include "fake_apiserver.h"
#include "k8s/client.h"
#include "node/inventory.h"
#include "test_util.h"

namespace fracgpu::dra {
namespace {

using namespace testing;  // NOLINT

std::vector<nvml::GpuInfo> Gpus() {
  return {{kUuid0, 0, "NVIDIA A100-SXM4-80GB", 80ULL << 30, "0000:3b:00.0", 0},
          {kUuid1, 1, "NVIDIA A100-SXM4-80GB", 80ULL << 30, "0000:86:00.0", 1}};
}

TEST(SlicesTest, DevicesCarryAttributesCapacitiesAndPolicies) {
  // The device plugin's own inventory code makes the register entries.
  auto infos = node::BuildDeviceInfos(Gpus(), node::DeviceConfig{}, {kUuid1});
  std::map<std::string, GpuFacts> facts = {{kUuid0, {"Ampere", "8.0", "535.104.05"}}};
  json devices = BuildSliceDevices(infos, Gpus(), facts, {kDriverName, kNode, true, 0, "", true});
  ASSERT_EQ(devices.size(), 2u);
  const json& d = devices[0];
  EXPECT_EQ(d["name"], "gpu-0");
  EXPECT_EQ(d["allowMultipleAllocations"], true);
  const json& a = d["attributes"];
  EXPECT_EQ(a["uuid"]["string"], kUuid0);
  EXPECT_EQ(a["productName"]["string"], "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(a["type"]["string"], "NVIDIA A100-SXM4-80GB");  // already starts with NVIDIA: no prefix
  EXPECT_EQ(a["typeTokens"]["string"], ",NVIDIA,A100,SXM4,80GB,");
  EXPECT_EQ(a["index"]["int"], 0);
  EXPECT_EQ(a["numaNode"]["int"], 0);
  EXPECT_EQ(a["healthy"]["bool"], true);
  EXPECT_EQ(a["pciBusID"]["string"], "0000:3b:00.0");
  EXPECT_EQ(a["architecture"]["string"], "Ampere");
  EXPECT_EQ(a["computeCapability"]["version"], "8.0.0");
  EXPECT_EQ(a["driverVersion"]["version"], "535.104.5");
  EXPECT_EQ(d["capacity"]["memory"]["value"], "81920Mi");
  EXPECT_EQ(d["capacity"]["memory"]["requestPolicy"],
            json({{"default", "81920Mi"},
                  {"validRange", {{"min", "1Mi"}, {"max", "81920Mi"}, {"step", "1Mi"}}}}));
  EXPECT_EQ(d["capacity"]["cores"]["value"], "100");
  EXPECT_EQ(d["capacity"]["cores"]["requestPolicy"]["validRange"],
            json({{"min", "0"}, {"max", "100"}, {"step", "1"}}));
  // The unhealthy GPU is published as such; no NVML facts → no such attributes.
  EXPECT_EQ(devices[1]["attributes"]["healthy"]["bool"], false);
  EXPECT_EQ(devices[1]["attributes"]["numaNode"]["int"], 1);
  EXPECT_FALSE(devices[1]["attributes"].contains("computeCapability"));
}

TEST(SlicesTest, WholeDeviceModeHasNoSharingAndNoPolicies) {
  auto infos = node::BuildDeviceInfos(Gpus(), node::DeviceConfig{}, {});
  json devices = BuildSliceDevices(infos, Gpus(), {}, {kDriverName, kNode, false, 0, "", true});
  for (const auto& d : devices) {
    EXPECT_FALSE(d.contains("allowMultipleAllocations"));
    EXPECT_FALSE(d["capacity"]["memory"].contains("requestPolicy"));
    EXPECT_EQ(d["capacity"]["memory"]["value"], "81920Mi");
  }
  // First-fit over whole devices: two claims take the two cards, a third does not fit.
  json slice = BuildResourceSlice(devices, {kDriverName, kNode, false, 0, "", true}, 1);
  auto usage = UsageFromSlices({slice}, {}, kDriverName);
  ASSERT_TRUE(usage.ok());
  int n = 0;
  auto id = [&] { return "share-" + std::to_string(++n); };
  auto r1 = FirstFit(&*usage, ShareRequest{}, kDriverName, id);
  auto r2 = FirstFit(&*usage, ShareRequest{}, kDriverName, id);
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_EQ((*r1)[0]["device"], "gpu-0");
  EXPECT_EQ((*r2)[0]["device"], "gpu-1");
  EXPECT_FALSE((*r1)[0].contains("consumedCapacity"));
  EXPECT_EQ(FirstFit(&*usage, ShareRequest{}, kDriverName, id).status().code(),
            StatusCode::kResourceExhausted);
}

TEST(SlicesTest, MemoryDefaultIsTheWholeCardWhateverDefaultMemorySays) {
  // A request without memory (the whole-GPU class) must take the whole card, so defaultMemory
  // is not the policy default (it would make "whole" a defaultMemory-sized share).
  node::DeviceConfig config;
  config.default_memory_mib = 2000;
  auto infos = node::BuildDeviceInfos(Gpus(), config, {});
  json devices = BuildSliceDevices(infos, Gpus(), {}, {kDriverName, kNode, true, 0, "", true});
  for (const auto& d : devices) {
    EXPECT_EQ(d["capacity"]["memory"]["requestPolicy"]["default"],
              d["capacity"]["memory"]["value"]);
  }
}

TEST(SlicesTest, SameSliceSpecComparesCapacityQuantitiesByValue) {
  auto infos = node::BuildDeviceInfos(Gpus(), node::DeviceConfig{}, {});
  SliceOptions opt{kDriverName, kNode, true, 0, "", true};
  json want = BuildResourceSlice(BuildSliceDevices(infos, Gpus(), {}, opt), opt, 3)["spec"];
  // What the API server returns: 81920Mi stored as 80Gi.
  json read_back = want;
  for (auto& d : read_back["devices"]) {
    d["capacity"]["memory"]["value"] = "80Gi";
    d["capacity"]["memory"]["requestPolicy"]["default"] = "80Gi";
    d["capacity"]["memory"]["requestPolicy"]["validRange"]["max"] = "80Gi";
  }
  EXPECT_NE(read_back, want);
  EXPECT_TRUE(SameSliceSpec(read_back, want));
  json bigger = read_back;
  bigger["devices"][0]["capacity"]["memory"]["value"] = "81Gi";
  EXPECT_FALSE(SameSliceSpec(bigger, want));
  // Outside capacity, strings compare as strings.
  json renamed = read_back;
  renamed["devices"][0]["attributes"]["productName"]["string"] = "x";
  EXPECT_FALSE(SameSliceSpec(renamed, want));
  json extra = read_back;
  extra["devices"][0]["attributes"]["extra"] = {{"int", 1}};
  EXPECT_FALSE(SameSliceSpec(extra, want));
}

TEST(SlicesTest, SemverAndTokens) {
  EXPECT_EQ(SemverOf("9").value(), "9.0.0");
  EXPECT_EQ(SemverOf("12.4").value(), "12.4.0");
  EXPECT_FALSE(SemverOf("1.2.3.4").ok());
  EXPECT_FALSE(SemverOf("r535").ok());
  EXPECT_FALSE(SemverOf("1..2").ok());
  EXPECT_EQ(TypeTokensAttribute("NVIDIA-Tesla T4"), ",NVIDIA,TESLA,T4,");
}

TEST(SlicesTest, PublisherCreatesUpdatesWithNewGenerationAndSkipsNoChange) {
  fakes::FakeApiServer api;
  k8s::Config config;
  config.server = api.url();
  auto client = k8s::Client::Create(config);
  ASSERT_TRUE(client.ok());
  SliceOptions opt{kDriverName, kNode, true, 0, "", true};
  SlicePublisher pub(opt, client->get());
  auto healthy = node::BuildDeviceInfos(Gpus(), node::DeviceConfig{}, {});
  auto g1 = pub.Sync(BuildSliceDevices(healthy, Gpus(), {}, opt));
  ASSERT_TRUE(g1.ok()) << g1.status().ToString();
  EXPECT_EQ(*g1, 1);
  auto stored = api.Get("resourceslices", "", "node-a-gpu.fracgpu.io");
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ((*stored)["spec"]["nodeName"], kNode);
  EXPECT_EQ((*stored)["spec"]["driver"], kDriverName);
  EXPECT_EQ((*stored)["spec"]["pool"],
            json({{"name", kNode}, {"generation", 1}, {"resourceSliceCount", 1}}));
  // Stored canonicalised, as the real API server does (81920Mi reads back as 80Gi).
  EXPECT_EQ((*stored)["spec"]["devices"][0]["capacity"]["memory"]["value"], "80Gi");
  int puts_before = api.CountRequests("PUT", "/apis/resource.k8s.io/v1/resourceslices");
  // A restarted driver with the same GPUs changes nothing.
  SlicePublisher again(opt, client->get());
  EXPECT_EQ(again.Sync(BuildSliceDevices(healthy, Gpus(), {}, opt)).value(), 1);
  EXPECT_EQ(api.CountRequests("PUT", "/apis/resource.k8s.io/v1/resourceslices"), puts_before);
  // A GPU turns unhealthy: generation 2.
  auto sick = node::BuildDeviceInfos(Gpus(), node::DeviceConfig{}, {kUuid0});
  EXPECT_EQ(again.Sync(BuildSliceDevices(sick, Gpus(), {}, opt)).value(), 2);
  stored = api.Get("resourceslices", "", "node-a-gpu.fracgpu.io");
  EXPECT_EQ((*stored)["spec"]["pool"]["generation"], 2);
  EXPECT_EQ((*stored)["spec"]["devices"][0]["attributes"]["healthy"]["bool"], false);
  // Listing by the upstream field selectors finds it.
  k8s::ListOptions lo;
  lo.field_selector = "spec.nodeName=node-a,spec.driver=gpu.fracgpu.io";
  auto list = (*client)->List("/apis/resource.k8s.io/v1/resourceslices", lo);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ((*list)["items"].size(), 1u);
  EXPECT_TRUE(again.Delete().ok());
  EXPECT_FALSE(api.Get("resourceslices", "", "node-a-gpu.fracgpu.io").has_value());
}

TEST(SlicesTest, PublisherOwnsTheSliceByItsNodeWithoutANewGeneration) {
  fakes::FakeApiServer api;
  k8s::Config config;
  config.server = api.url();
  auto client = k8s::Client::Create(config);
  ASSERT_TRUE(client.ok());
  auto healthy = node::BuildDeviceInfos(Gpus(), node::DeviceConfig{}, {});
  // A slice published by a driver that could not read its Node: no ownerReference.
  SliceOptions plain{kDriverName, kNode, true, 0, "", true};
  ASSERT_EQ(SlicePublisher(plain, client->get())
                .Sync(BuildSliceDevices(healthy, Gpus(), {}, plain))
                .value(),
            1);
  EXPECT_FALSE(api.Get("resourceslices", "", "node-a-gpu.fracgpu.io")
                   ->at("metadata")
                   .contains("ownerReferences"));
  // The next driver knows the Node's uid: the same devices, the owner added, generation kept.
  SliceOptions owned = plain;
  owned.node_uid = "9d3f1c2e-0000-4000-8000-000000000001";
  SlicePublisher pub(owned, client->get());
  EXPECT_EQ(pub.Sync(BuildSliceDevices(healthy, Gpus(), {}, owned)).value(), 1);
  auto stored = api.Get("resourceslices", "", "node-a-gpu.fracgpu.io");
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ((*stored)["metadata"]["ownerReferences"], json::array({{{"apiVersion", "v1"},
                                                                    {"kind", "Node"},
                                                                    {"name", kNode},
                                                                    {"uid", owned.node_uid},
                                                                    {"controller", true}}}));
  EXPECT_EQ((*stored)["spec"]["pool"]["generation"], 1);
  // And then nothing to write.
  int puts = api.CountRequests("PUT", "/apis/resource.k8s.io/v1/resourceslices");
  EXPECT_EQ(pub.Sync(BuildSliceDevices(healthy, Gpus(), {}, owned)).value(), 1);
  EXPECT_EQ(api.CountRequests("PUT", "/apis/resource.k8s.io/v1/resourceslices"), puts);
}

TEST(SlicesTest, DroppedConsumableFieldsNamesWhatTheApiServerLeftOut) {
  auto infos = node::BuildDeviceInfos(Gpus(), node::DeviceConfig{}, {});
  SliceOptions opt{kDriverName, kNode, true, 0, "", true};
  json sent = BuildResourceSlice(BuildSliceDevices(infos, Gpus(), {}, opt), opt, 1)["spec"];
  EXPECT_TRUE(DroppedConsumableFields(sent, sent).empty());
  // What an API server without DRAConsumableCapacity stores (disabled-field stripping).
  json stored = sent;
  for (auto& d : stored["devices"]) {
    d.erase("allowMultipleAllocations");
    for (auto& [name, cap] : d["capacity"].items()) cap.erase("requestPolicy");
  }
  auto dropped = DroppedConsumableFields(sent, stored);
  ASSERT_EQ(dropped.size(), 6u);  // 2 devices × (allowMultipleAllocations + 2 policies)
  EXPECT_EQ(dropped[0], "devices[0].allowMultipleAllocations");
  EXPECT_EQ(dropped[1], "devices[0].capacity.cores.requestPolicy");
  // Whole-card slices have nothing to lose.
  SliceOptions whole{kDriverName, kNode, false, 0, "", true};
  json plain = BuildResourceSlice(BuildSliceDevices(infos, Gpus(), {}, whole), whole, 1)["spec"];
  EXPECT_TRUE(DroppedConsumableFields(plain, plain).empty());
}

TEST(SlicesTest, AnUnhealthyGpuIsTaintedNoExecuteAndTheStampDoesNotRewrite) {
  auto sick = node::BuildDeviceInfos(Gpus(), node::DeviceConfig{}, {kUuid1});
  SliceOptions opt{kDriverName, kNode, true, 0, "", true};
  json devices = BuildSliceDevices(sick, Gpus(), {}, opt);
  EXPECT_FALSE(devices[0].contains("taints"));
  EXPECT_EQ(devices[1]["taints"],
            json::array({{{"key", "gpu.fracgpu.io/unhealthy"}, {"effect", "NoExecute"}}}));
  EXPECT_EQ(devices[1]["attributes"]["healthy"]["bool"], false);
  // Read back with the time the API server stamps: still the same spec (no rewrite per sync).
  json want = BuildResourceSlice(devices, opt, 2)["spec"];
  json stored = want;
  stored["devices"][1]["taints"][0]["timeAdded"] = "2026-12-04T10:00:00Z";
  EXPECT_TRUE(SameSliceSpec(stored, want));
  stored["devices"][1]["taints"][0]["effect"] = "NoSchedule";
  EXPECT_FALSE(SameSliceSpec(stored, want));
  // An API server without DRADeviceTaints answers the write without them.
  json answer = {{"spec", want}};
  EXPECT_FALSE(DroppedTaints(devices, answer));
  answer["spec"]["devices"][1].erase("taints");
  EXPECT_TRUE(DroppedTaints(devices, answer));
  // Told so, the publisher's options leave taints out.
  opt.device_taints = false;
  EXPECT_FALSE(BuildSliceDevices(sick, Gpus(), {}, opt)[1].contains("taints"));
}

bool IsDns1123Subdomain(const std::string& s) {
  // apimachinery IsDNS1123Subdomain: ≤ 253, labels [a-z0-9]([-a-z0-9]*[a-z0-9])? joined by '.'.
  // (Checked by hand: std::regex trips GCC 12's -Wmaybe-uninitialized under the sanitizers.)
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    std::string label = s.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (label.empty() || label.front() == '-' || label.back() == '-') return false;
    for (char c : label) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
    }
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

TEST(SlicesTest, SliceNamesFitTheNameLimitForAnyNodeName) {
  EXPECT_EQ(SliceNameFor("node-a", kDriverName), "node-a-gpu.fracgpu.io");
  // Node names are subdomains of up to 253 characters; "<node>-<driver>" would not fit.
  std::string label(63, 'a');
  std::string longest = label + "." + label + "." + label + "." + std::string(61, 'b');
  ASSERT_EQ(longest.size(), 253u);
  std::string other = longest;
  other.back() = 'c';
  std::string edge = std::string(228, 'n') + "-" + std::string(24, 'x');  // cut lands on '-'
  for (const std::string& node : {longest, other, edge, std::string(237, 'd')}) {
    std::string name = SliceNameFor(node, kDriverName);
    EXPECT_TRUE(IsDns1123Subdomain(name)) << name;
    EXPECT_TRUE(name.ends_with(std::string("-") + kDriverName)) << name;
  }
  // The one that just fits keeps the plain form; cut names of different nodes stay distinct.
  EXPECT_EQ(SliceNameFor(std::string(237, 'd'), kDriverName),
            std::string(237, 'd') + "-" + kDriverName);
  EXPECT_NE(SliceNameFor(longest, kDriverName), SliceNameFor(other, kDriverName));
}

}  // namespace
}  // namespace fracgpu::dra
