#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/request.h"

namespace fracgpu::core {
namespace {

using nlohmann::json;

json PodWith(json resources) {
  json c = {{"name", "train"}};
  if (!resources.is_null()) c["resources"] = resources;
  return {{"metadata", {{"name", "p"}}}, {"spec", {{"containers", json::array({c})}}}};
}

struct Case {
  std::string name;
  json resources;
  std::vector<std::pair<std::string, json>> want;  // resource → value, for /spec/containers/0
};

// docs/design/CONTRACT.md §1: the webhook writes the gpu and gpucores defaults (never memory) and
// copies request-only values into limits.
TEST(LimitDefaultsTest, Table) {
  const std::string ptr = "/spec/containers/0";
  const std::vector<Case> cases = {
      {"no GPU", nullptr, {}},
      {"bare gpu → cores 100",
       {{"limits", {{"nvidia.com/gpu", "2"}}}},
       {{"nvidia.com/gpucores", "100"}}},
      {"gpumem → gpu 1, no cores, no memory",
       {{"limits", {{"nvidia.com/gpumem", "3000"}}}},
       {{"nvidia.com/gpu", "1"}}},
      {"percentage 100 → gpu 1 and cores 100",
       {{"limits", {{"nvidia.com/gpumem-percentage", "100"}}}},
       {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "100"}}},
      {"percentage 50 → gpu 1",
       {{"limits", {{"nvidia.com/gpumem-percentage", "50"}}}},
       {{"nvidia.com/gpu", "1"}}},
      {"cores only → gpu 1",
       {{"limits", {{"nvidia.com/gpucores", "30"}}}},
       {{"nvidia.com/gpu", "1"}}},
      {"everything given → nothing",
       {{"limits", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "0"}}}},
       {}},
      {"request-only values are copied as given",
       {{"requests",
         {{"nvidia.com/gpu", 2}, {"nvidia.com/gpumem", "3k"}, {"nvidia.com/priority", "0"}}}},
       {{"nvidia.com/gpu", 2}, {"nvidia.com/gpumem", "3k"}, {"nvidia.com/priority", "0"}}},
      {"request-only in a container without GPU",
       {{"requests", {{"nvidia.com/gpu", "0"}, {"nvidia.com/priority", "1"}}}},
       {{"nvidia.com/gpu", "0"}, {"nvidia.com/priority", "1"}}},
      {"limits present: only the missing ones",
       {{"limits", {{"nvidia.com/gpumem", "1000"}}},
        {"requests", {{"nvidia.com/gpumem", "1000"}, {"nvidia.com/gpucores", "5"}}}},
       {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "5"}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result<std::vector<LimitDefault>> got = ComputeLimitDefaults(PodWith(c.resources));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    std::vector<LimitDefault> want;
    for (const auto& [resource, value] : c.want) want.push_back({ptr, resource, value});
    EXPECT_EQ(*got, want);
  }
}

TEST(LimitDefaultsTest, InitContainersFirstWithPointers) {
  json pod = {
      {"spec",
       {{"initContainers",
         json::array(
             {{{"name", "i0"}},
              {{"name", "i1"}, {"resources", {{"limits", {{"nvidia.com/gpumem", "10"}}}}}}})},
        {"containers", json::array({{{"name", "a0"},
                                     {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}})}}}};
  Result<std::vector<LimitDefault>> got = ComputeLimitDefaults(pod);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got,
            (std::vector<LimitDefault>{{"/spec/initContainers/1", "nvidia.com/gpu", "1"},
                                       {"/spec/containers/0", "nvidia.com/gpucores", "100"}}));
}

TEST(LimitDefaultsTest, PatchShapes) {
  // resources without limits → one add creating resources.limits with every value.
  Result<json> p = LimitDefaultsPatch(PodWith({{"requests", {{"nvidia.com/gpu", "1"}}}}));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, json::parse(R"([{"op":"add","path":"/spec/containers/0/resources/limits",
      "value":{"nvidia.com/gpu":"1","nvidia.com/gpucores":"100"}}])"));

  // Nothing to write → empty patch.
  p = LimitDefaultsPatch(PodWith(nullptr));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, json::array());

  // Limits exist → one add per value, with '/' escaped as "~1" (RFC 6901).
  p = LimitDefaultsPatch(PodWith({{"limits", {{"nvidia.com/gpu", "1"}}}}));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(
      *p,
      json::parse(R"([{"op":"add","path":"/spec/containers/0/resources/limits/nvidia.com~1gpucores",
      "value":"100"}])"));
}

TEST(LimitDefaultsTest, PatchEscapesTilde) {
  ResourceNames names;
  names.gpu = "a~b/gpu";
  Result<json> p = LimitDefaultsPatch(PodWith({{"limits", {{"nvidia.com/gpucores", "0"}}}}), names);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(
      *p,
      json::parse(
          R"([{"op":"add","path":"/spec/containers/0/resources/limits/a~0b~1gpu","value":"1"}])"));
}

TEST(LimitDefaultsTest, PatchEqualsApplyAndIsIdempotent) {
  const std::vector<json> pods = {
      PodWith({{"requests", {{"nvidia.com/gpu", "1"}}}}),
      PodWith({{"limits", {{"nvidia.com/gpumem-percentage", "100"}}}}),
      PodWith({{"limits", {{"nvidia.com/gpumem", "3000"}, {"cpu", "1"}}},
               {"requests", {{"nvidia.com/priority", "0"}}}}),
      PodWith(nullptr),
      {{"spec",
        {{"initContainers",
          json::array(
              {{{"name", "i"}, {"resources", {{"requests", {{"nvidia.com/gpucores", "10"}}}}}}})},
         {"containers",
          json::array({{{"name", "a"},
                        {"resources",
                         {{"limits", nullptr}, {"requests", {{"nvidia.com/gpu", "2"}}}}}}})}}}},
  };
  for (const json& pod : pods) {
    SCOPED_TRACE(pod.dump());
    Result<json> patch = LimitDefaultsPatch(pod);
    ASSERT_TRUE(patch.ok()) << patch.status().ToString();
    json patched = pod.patch(*patch);  // nlohmann's RFC 6902 implementation: independent check
    json applied = pod;
    ASSERT_TRUE(ApplyLimitDefaults(applied).ok());
    EXPECT_EQ(patched, applied);
    // The parsed request is unchanged, and a second pass writes nothing.
    EXPECT_EQ(*ParsePodRequest(applied), *ParsePodRequest(pod));
    Result<std::vector<LimitDefault>> again = ComputeLimitDefaults(applied);
    ASSERT_TRUE(again.ok());
    EXPECT_TRUE(again->empty());
  }
}

TEST(LimitDefaultsTest, InvalidPodIsAnErrorAndUnchanged) {
  json pod = PodWith({{"limits", {{"nvidia.com/gpucores", "150"}}}});
  const json before = pod;
  Status st = ApplyLimitDefaults(pod);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "container \"train\": nvidia.com/gpucores must be an integer 0..100, got \"150\"");
  EXPECT_EQ(pod, before);
  EXPECT_FALSE(ComputeLimitDefaults(pod).ok());
  EXPECT_FALSE(LimitDefaultsPatch(pod).ok());
}

}  // namespace
}  // namespace fracgpu::core
