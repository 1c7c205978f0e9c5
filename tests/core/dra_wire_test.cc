// core/dra_wire.h: ResourceSlices + allocated ResourceClaims → DeviceUsage (strict and lenient),
// a claim's device request → ShareRequest, and core::DeviceSelected (the rules of the claims'
// CEL selector, core/dra_convert.h). Objects are written by hand in the resource/v1 wire format.
#include "core/dra_wire.h"

#include <gtest/gtest.h>

#include <limits>

#include "core/dra_convert.h"

namespace fracgpu::core {
namespace {

using nlohmann::json;

json Slice(const std::string& name, const std::string& pool, int generation, json devices) {
  return {{"metadata", {{"name", name}}},
          {"spec",
           {{"driver", "gpu.fracgpu.io"},
            {"nodeName", pool},
            {"pool", {{"name", pool}, {"generation", generation}, {"resourceSliceCount", 1}}},
            {"devices", std::move(devices)}}}};
}

json Shared(const std::string& name, const std::string& mib) {
  return {{"name", name},
          {"allowMultipleAllocations", true},
          {"attributes", {{"uuid", {{"string", "GPU-" + name}}}, {"healthy", {{"bool", true}}}}},
          {"capacity",
           {{"memory",
             {{"value", mib},
              {"requestPolicy",
               {{"default", mib}, {"validRange", {{"min", "1Mi"}, {"step", "1Mi"}}}}}}},
            {"cores", {{"value", "100"}}}}}};
}

json Claim(const std::string& name, json results, json reserved = json()) {
  json c = {{"metadata", {{"name", name}, {"namespace", "ns"}}},
            {"status", {{"allocation", {{"devices", {{"results", std::move(results)}}}}}}}};
  if (!reserved.is_null()) c["status"]["reservedFor"] = std::move(reserved);
  return c;
}

json Result(const std::string& pool, const std::string& device, json consumed = json()) {
  json r = {{"request", "gpu"}, {"driver", "gpu.fracgpu.io"}, {"pool", pool}, {"device", device}};
  if (!consumed.is_null()) r["consumedCapacity"] = std::move(consumed);
  return r;
}

TEST(DraWire, UsageFromSlicesReadsCapacityPolicyAndConsumption) {
  std::vector<json> slices = {
      Slice("a-old", "a", 1, json::array({Shared("gpu-9", "1Gi")})),
      Slice("a-new", "a", 2, json::array({Shared("gpu-0", "16Gi"), Shared("gpu-1", "16384Mi")}))};
  std::vector<json> claims = {
      Claim("c1", json::array({Result("a", "gpu-0", {{"memory", "3000Mi"}, {"cores", "30"}})}),
            json::array({{{"resource", "pods"}, {"name", "p1"}}})),
      Claim("c2", json::array({Result("a", "gpu-0", {{"gpu.fracgpu.io/memory", "1Gi"}})})),
      Claim("c3",
            json::array({Result("b", "gpu-0", {{"memory", "1Mi"}})})),  // another pool: ignored
  };
  auto usage = UsageFromSlices(slices, claims, "gpu.fracgpu.io");
  ASSERT_TRUE(usage.ok()) << usage.status().ToString();
  ASSERT_EQ(usage->size(), 2u);  // generation 1 is stale
  const DeviceUsage& d = (*usage)[0];
  EXPECT_EQ(d.device, "gpu-0");
  EXPECT_EQ(d.node, "a");
  EXPECT_EQ(d.memory.total, 16384);
  EXPECT_TRUE(d.memory.has_policy);
  EXPECT_EQ(d.memory.default_value, 16384);
  EXPECT_EQ(d.memory.min, 1);
  EXPECT_EQ(d.memory.step, 1);
  EXPECT_EQ(d.used_memory, 3000 + 1024);
  EXPECT_EQ(d.used_cores, 30);
  EXPECT_EQ(d.shares, 2);
  ASSERT_EQ(d.allocations.size(), 2u);
  EXPECT_EQ(d.allocations[0].claim, "ns/c1");
  EXPECT_EQ(d.allocations[0].pod, "p1");
  EXPECT_EQ(d.allocations[0].memory_mib, 3000);
  EXPECT_EQ(d.allocations[1].memory_mib, 1024);
  EXPECT_EQ((*usage)[1].memory.total, 16384);
  EXPECT_EQ((*usage)[1].shares, 0);
}

TEST(DraWire, StrictErrorsNameTheObjectFieldAndValue) {
  struct Case {
    std::vector<json> slices, claims;
    std::string error;
  };
  json bad_cap = Shared("gpu-0", "16Gi");
  bad_cap["capacity"]["memory"]["requestPolicy"]["validRange"]["step"] = 5;
  json too_many = json::array();
  for (int i = 0; i < 129; ++i) too_many.push_back(Shared("gpu-" + std::to_string(i), "1Gi"));
  json attrs = Shared("gpu-0", "1Gi");
  for (int i = 0; i < 31; ++i) attrs["attributes"]["a" + std::to_string(i)] = {{"int", i}};
  json results = json::array();
  for (int i = 0; i < 33; ++i) results.push_back(Result("a", "gpu-0"));
  const Case cases[] = {
      {{Slice("s", "a", 1, json::array({bad_cap}))},
       {},
       "ResourceSlice s spec.devices[0] (gpu-0) capacity.memory.requestPolicy.validRange.step must "
       "be a quantity "
       "string, got 5"},
      {{Slice("s", "a", 1, too_many)},
       {},
       "ResourceSlice s spec.devices has 129 entries (at most 128)"},
      {{Slice("s", "a", 1, json::array({attrs}))},
       {},
       "ResourceSlice s spec.devices[0] (gpu-0) has 35 attributes and capacities (at most 32)"},
      {{Slice("s", "a", 1, json::array({{{"name", 7}}}))},
       {},
       "ResourceSlice s spec.devices[0].name must be a string, got 7"},
      {{json::array()}, {}, "ResourceSlice must be a JSON object, got []"},
      {{{{"metadata", {{"name", "s"}}},
         {"spec", {{"driver", "gpu.fracgpu.io"}, {"pool", {{"name", "a"}, {"generation", "2"}}}}}}},
       {},
       "ResourceSlice s spec.pool.generation must be an integer, got \"2\""},
      {{Slice("s", "a", 1, json::array({Shared("gpu-0", "1Gi")}))},
       {Claim("c", json::array({Result("a", "gpu-0", {{"cores", "-5"}})}))},
       "ResourceClaim ns/c status.allocation.devices.results[0].consumedCapacity.cores \"-5\" is "
       "negative"},
      {{Slice("s", "a", 1, json::array({Shared("gpu-0", "1Gi")}))},
       {Claim("c", results)},
       "ResourceClaim ns/c status.allocation.devices.results has 33 entries (at most 32)"},
      {{Slice("s", "a", 1, json::array({Shared("gpu-0", "1Gi")}))},
       {Claim("c", json::array({{{"driver", 1}}}))},
       "ResourceClaim ns/c status.allocation.devices.results[0].driver must be a string, got 1"},
  };
  for (const auto& c : cases) {
    auto usage = UsageFromSlices(c.slices, c.claims, "gpu.fracgpu.io");
    ASSERT_FALSE(usage.ok()) << c.error;
    EXPECT_EQ(usage.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(usage.status().message(), c.error);
    // Lenient: the same problem is reported and the read goes on.
    std::vector<std::string> problems;
    auto lenient = UsageFromSlices(c.slices, c.claims, "gpu.fracgpu.io", &problems);
    ASSERT_TRUE(lenient.ok());
    EXPECT_EQ(problems, std::vector<std::string>{c.error});
  }
}

TEST(DraWire, LenientMarksADeviceWithAnUnreadableResultTakenWhole) {
  std::vector<json> slices = {
      Slice("s", "a", 1, json::array({Shared("gpu-0", "16Gi"), Shared("gpu-1", "16Gi")}))};
  std::vector<json> claims = {
      Claim("c", json::array({Result("a", "gpu-1", {{"memory", "0.5Mi"}})}))};
  std::vector<std::string> problems;
  auto usage = UsageFromSlices(slices, claims, "gpu.fracgpu.io", &problems);
  ASSERT_TRUE(usage.ok());
  EXPECT_EQ(problems, std::vector<std::string>{
                          "ResourceClaim ns/c status.allocation.devices.results[0]"
                          ".consumedCapacity.memory \"0.5Mi\" is not a whole number of MiB"});
  EXPECT_FALSE((*usage)[0].allocated_whole);
  EXPECT_TRUE((*usage)[1].allocated_whole);
  ShareRequest r;
  r.memory_mib = 100;
  auto taken = FirstFitDevices(&*usage, r);
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ((*taken)[0].device, 0u);
}

TEST(DraWire, ConsumedCapacitySaturatesInsteadOfOverflowing) {
  std::vector<json> slices = {Slice("s", "a", 1, json::array({Shared("gpu-0", "16Gi")}))};
  std::vector<json> claims;
  for (int i = 0; i < 3; ++i) {
    claims.push_back(
        Claim("c" + std::to_string(i),
              json::array({Result("a", "gpu-0", {{"cores", "4000000000000000000"}})})));
  }
  auto usage = UsageFromSlices(slices, claims, "gpu.fracgpu.io");
  ASSERT_TRUE(usage.ok()) << usage.status().ToString();
  EXPECT_EQ((*usage)[0].used_cores, std::numeric_limits<int64_t>::max());
  ShareRequest r;
  r.cores = 1;
  EXPECT_FALSE(FirstFitDevices(&*usage, r).ok());
}

TEST(DraWire, ShareRequestOfTheWebhooksTemplates) {
  json pod = {{"metadata", {{"name", "p"}, {"namespace", "ns"}}},
              {"spec",
               {{"containers", json::array({{{"name", "main"},
                                             {"resources",
                                              {{"limits",
                                                {{"nvidia.com/gpu", "2"},
                                                 {"nvidia.com/gpumem", "3000"},
                                                 {"nvidia.com/gpucores", "30"}}}}}}})}}}};
  auto conv = ConvertHamiPod(pod, ResourceNames{});
  ASSERT_TRUE(conv.ok()) << conv.status().ToString();
  const json& req = conv->templates[0]["spec"]["spec"]["devices"]["requests"][0];
  auto share = ShareRequestOf(req);
  ASSERT_TRUE(share.ok()) << share.status().ToString();
  EXPECT_EQ(share->name, "gpu");
  EXPECT_EQ(share->count, 2);
  EXPECT_EQ(share->memory_mib, 3000);
  EXPECT_EQ(share->cores, 30);
  json no_capacity = {{"name", "gpu"}, {"exactly", {{"deviceClassName", "whole-gpu.fracgpu.io"}}}};
  EXPECT_EQ(ShareRequestOf(no_capacity)->memory_mib, -1);
  EXPECT_EQ(ShareRequestOf(no_capacity)->count, 1);
  struct Bad {
    json request;
    std::string error;
  } bad[] = {
      {{{"name", "gpu"}}, "r.exactly must be an object, got nothing"},
      {{{"name", "gpu"}, {"firstAvailable", json::array()}},
       "r.firstAvailable is not supported (fracgpu's claims use exactly)"},
      {{{"name", "gpu"}, {"exactly", {{"allocationMode", "All"}}}},
       "r.exactly.allocationMode \"All\" is not supported (only ExactCount)"},
      {{{"name", "gpu"}, {"exactly", {{"count", 40}}}},
       "r.exactly.count must be an integer 1..32, got 40"},
      {{{"name", "gpu"}, {"exactly", {{"capacity", {{"requests", {{"memory", "1.5Mi"}}}}}}}},
       "r.exactly.capacity.requests.memory \"1.5Mi\" is not a whole number of MiB"},
  };
  for (const auto& b : bad) {
    auto r = ShareRequestOf(b.request, "r");
    ASSERT_FALSE(r.ok()) << b.error;
    EXPECT_EQ(r.status().message(), b.error);
  }
}

TEST(DraWire, DeviceSelectedAppliesTheCelSelectorsRules) {
  DeviceUsage d;
  d.attributes = {{"uuid", {{"string", "GPU-AbC"}}},
                  {"typeTokens", {{"string", ",NVIDIA,A100,SXM4,80GB,"}}},
                  {"healthy", {{"bool", true}}}};
  PodRequest r;
  EXPECT_TRUE(DeviceSelected(r, kDraDriverName, d));
  r.use_types = {"A100-80GB"};  // ordered tokens, not adjacent
  EXPECT_TRUE(DeviceSelected(r, kDraDriverName, d));
  r.use_types = {"A10"};  // a whole token, not a substring
  EXPECT_FALSE(DeviceSelected(r, kDraDriverName, d));
  r.use_types = {};
  r.nouse_types = {"SXM4"};
  EXPECT_FALSE(DeviceSelected(r, kDraDriverName, d));
  r.nouse_types = {};
  r.use_uuids = {"gpu-abc"};
  EXPECT_TRUE(DeviceSelected(r, kDraDriverName, d));
  r.nouse_uuids = {"GPU-ABC"};
  EXPECT_FALSE(DeviceSelected(r, kDraDriverName, d));
  // Qualified attribute names count; the DeviceClass's healthy == true always applies.
  DeviceUsage q;
  q.attributes = {{"gpu.fracgpu.io/healthy", {{"bool", true}}},
                  {"gpu.fracgpu.io/uuid", {{"string", "GPU-1"}}}};
  EXPECT_TRUE(DeviceSelected(PodRequest{}, kDraDriverName, q));
  q.attributes["gpu.fracgpu.io/healthy"] = {{"bool", false}};
  EXPECT_FALSE(DeviceSelected(PodRequest{}, kDraDriverName, q));
  // A rule over an attribute the device lacks selects nothing (a CEL evaluation error).
  PodRequest typed;
  typed.use_types = {"T4"};
  q.attributes["gpu.fracgpu.io/healthy"] = {{"bool", true}};
  EXPECT_FALSE(DeviceSelected(typed, kDraDriverName, q));
}

}  // namespace
}  // namespace fracgpu::core
