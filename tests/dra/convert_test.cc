// HAMi-style pod → ResourceClaimTemplates + pod patch (docs/dra.md), and first-fit rounding.
#include "dra/convert.h"

#include <gtest/gtest.h>

#include "dra/placement.h"

namespace fracgpu::dra {
namespace {

json Pod(json limits, json annotations = json::object()) {
  return json{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", "train"}, {"namespace", "ml"}, {"annotations", annotations}}},
      {"spec",
       {{"containers",
         json::array({{{"name", "main"}, {"image", "x"}, {"resources", {{"limits", limits}}}},
                      {{"name", "side"}, {"image", "y"}}})}}}};
}

TEST(ConvertTest, GpumemAndGpucoresBecomeACapacityRequestAndThePodIsPatched) {
  json pod = Pod({{"nvidia.com/gpu", "1"},
                  {"nvidia.com/gpumem", "3000"},
                  {"nvidia.com/gpucores", "30"},
                  {"cpu", "1"}},
                 {{"nvidia.com/use-gputype", "A100-80GB"}});
  auto c = ConvertHamiPod(pod, core::ResourceNames{});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->templates.size(), 1u);
  const json& t = c->templates[0];
  EXPECT_EQ(t["kind"], "ResourceClaimTemplate");
  EXPECT_EQ(t["metadata"]["name"], "train-main-gpu");
  const json& ex = t["spec"]["spec"]["devices"]["requests"][0]["exactly"];
  EXPECT_EQ(ex["deviceClassName"], "gpu.fracgpu.io");
  EXPECT_EQ(ex["count"], 1);
  EXPECT_EQ(ex["capacity"]["requests"], json({{"memory", "3000Mi"}, {"cores", "30"}}));
  // One GPU: no constraint.
  EXPECT_FALSE(t["spec"]["spec"]["devices"].contains("constraints"));
  EXPECT_EQ(ex["selectors"][0]["cel"]["expression"],
            "(device.attributes[\"gpu.fracgpu.io\"].typeTokens.matches(\",A100,([^,]+,)*80GB,\"))");
  json patched = pod.patch(c->pod_patch);
  EXPECT_EQ(patched["spec"]["resourceClaims"],
            json::array({{{"name", "main-gpu"}, {"resourceClaimTemplateName", "train-main-gpu"}}}));
  EXPECT_EQ(patched["spec"]["containers"][0]["resources"]["claims"],
            json::array({{{"name", "main-gpu"}}}));
  EXPECT_EQ(patched["spec"]["containers"][0]["resources"]["limits"], json({{"cpu", "1"}}));
  EXPECT_FALSE(patched["spec"]["containers"][1].contains("resources"));
}

TEST(ConvertTest, LongPodAndContainerNamesGiveNamesWithinTheirLimits) {
  // A container name is a DNS label of up to 63 characters and a pod name a subdomain of up to
  // 253: "<container>-gpu" (the pod's claim name, a label) and "<pod>-<container>-gpu" (the
  // template's, a subdomain) would be refused by the API server.
  json pod = Pod({{"nvidia.com/gpumem", "3000"}});
  std::string ctr(63, 'c'), name(253, 'p');
  pod["metadata"]["name"] = name;
  pod["spec"]["containers"][0]["name"] = ctr;
  auto c = ConvertHamiPod(pod, core::ResourceNames{});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::string tname = c->templates[0]["metadata"]["name"];
  EXPECT_EQ(tname.size(), 253u);
  EXPECT_TRUE(tname.ends_with("-gpu"));
  json patched = pod.patch(c->pod_patch);
  std::string claim = patched["spec"]["resourceClaims"][0]["name"];
  EXPECT_EQ(claim.size(), 63u);
  EXPECT_TRUE(claim.ends_with("-gpu"));
  EXPECT_EQ(patched["spec"]["resourceClaims"][0]["resourceClaimTemplateName"], tname);
  EXPECT_EQ(patched["spec"]["containers"][0]["resources"]["claims"][0]["name"], claim);
  // A container name one shorter gets a different claim name (the hash covers the whole).
  pod["spec"]["containers"][0]["name"] = std::string(62, 'c');
  json other = pod.patch(ConvertHamiPod(pod, core::ResourceNames{})->pod_patch);
  EXPECT_NE(other["spec"]["resourceClaims"][0]["name"], claim);
}

TEST(ConvertTest, WholeCardsUuidRulesAndWhatDraCannotExpress) {
  json whole = Pod({{"nvidia.com/gpu", "2"}, {"nvidia.com/gpucores", "100"}},
                   {{"nvidia.com/nouse-gpuuuid", "GPU-AAAA-1"}});
  auto c = ConvertHamiPod(whole, core::ResourceNames{});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const json& ex = c->templates[0]["spec"]["spec"]["devices"]["requests"][0]["exactly"];
  EXPECT_EQ(ex["deviceClassName"], "whole-gpu.fracgpu.io");
  EXPECT_EQ(ex["count"], 2);
  // All the cores, and no memory entry: the slices' policy default is the whole card.
  EXPECT_EQ(ex["capacity"], json({{"requests", {{"cores", "100"}}}}));
  // Two GPUs are two cards (KEP-5075 distinctAttribute over the UUID attribute).
  EXPECT_EQ(c->templates[0]["spec"]["spec"]["devices"]["constraints"],
            json::array({{{"requests", {"gpu"}}, {"distinctAttribute", "gpu.fracgpu.io/uuid"}}}));
  EXPECT_EQ(ex["selectors"][0]["cel"]["expression"],
            "!(device.attributes[\"gpu.fracgpu.io\"].uuid.lowerAscii() in [\"gpu-aaaa-1\"])");
  auto pct = ConvertHamiPod(Pod({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "50"}}),
                            core::ResourceNames{});
  ASSERT_FALSE(pct.ok());
  EXPECT_NE(pct.status().message().find("gpumem-percentage 50 cannot be expressed"),
            std::string::npos);
  auto none = ConvertHamiPod(Pod({{"cpu", "1"}}), core::ResourceNames{});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->templates.empty());
  EXPECT_TRUE(none->pod_patch.empty());
}

TEST(PlacementTest, RequestPolicyRoundsUpAndRefusesBeyondMax) {
  CapacityPolicy p{16384, true, 16384, 1, 16384, 1};
  EXPECT_EQ(ConsumedAmount(p, 3000), 3000);
  EXPECT_EQ(ConsumedAmount(p, -1), 16384);  // the default
  EXPECT_EQ(ConsumedAmount(p, 0), 1);       // below min: min
  EXPECT_EQ(ConsumedAmount(p, 16385), -1);
  CapacityPolicy stepped{100, true, 0, 10, 100, 25};
  EXPECT_EQ(ConsumedAmount(stepped, 11), 35);  // min + 1·step
  EXPECT_EQ(ConsumedAmount(stepped, 86), -1);  // rounds to 110 > max
  EXPECT_EQ(MiBQuantity(3072), "3Gi");
  EXPECT_EQ(MiBQuantity(3000), "3000Mi");
}

}  // namespace
}  // namespace fracgpu::dra
