// The target workload's JSON (core/workload_json.h): what `fracgpu simulate --replay-out` writes
// is what `fracgpu scheduler --fragmentation-workload` reads back, and each bad file is refused
// naming the shape and the field.
#include "core/workload_json.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fracgpu::core {
namespace {

TEST(TargetWorkloadJson, WhatIsWrittenReadsBackTheSame) {
  std::vector<WeightedShape> m(2);
  m[0].shape = {8000, 500, 1, "V100M16|V100M32"};
  m[0].popularity = 0.75;
  m[1].shape = {0, 1000, 8, ""};
  m[1].popularity = 0.25;
  const nlohmann::json j = TargetWorkloadToJson(m);
  EXPECT_EQ(j, nlohmann::json::parse(R"([
      {"cpu_milli": 8000, "gpu_milli": 500, "num_gpus": 1, "gpu_spec": "V100M16|V100M32",
       "popularity": 0.75},
      {"cpu_milli": 0, "gpu_milli": 1000, "num_gpus": 8, "gpu_spec": "", "popularity": 0.25}])"));
  auto back = ParseTargetWorkload(j.dump());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ((*back)[i].shape, m[i].shape);
    EXPECT_EQ((*back)[i].popularity, m[i].popularity);
  }
  // gpu_spec may be left out: any model.
  auto bare = ParseTargetWorkload(R"([{"cpu_milli":1,"gpu_milli":2,"num_gpus":3,"popularity":1}])");
  ASSERT_TRUE(bare.ok()) << bare.status().ToString();
  EXPECT_EQ((*bare)[0].shape, (TaskShape{1, 2, 3, ""}));
}

TEST(TargetWorkloadJson, BadFilesAreRefusedNamingTheShapeAndField) {
  struct Bad {
    std::string text;
    const char* message_part;
  };
  const std::vector<Bad> bad = {
      {"", "not valid JSON"},
      {"{}", "not a non-empty JSON array of shapes"},
      {"[]", "not a non-empty JSON array of shapes"},
      {"[1]", "shape 1: not an object"},
      {R"([{"cpu_milli":1000}])", R"("gpu_milli" must be a whole number)"},
      {R"([{"cpu_milli":1.5,"gpu_milli":1,"num_gpus":1,"popularity":1}])",
       R"("cpu_milli" must be a whole number)"},
      {R"([{"cpu_milli":"1","gpu_milli":1,"num_gpus":1,"popularity":1}])",
       R"("cpu_milli" must be a whole number)"},
      {R"([{"cpu_milli":18446744073709551615,"gpu_milli":1,"num_gpus":1,"popularity":1}])",
       R"("cpu_milli" must be a whole number)"},
      {R"([{"cpu_milli":1,"gpu_milli":1,"num_gpus":1}])", R"("popularity" must be a number)"},
      {R"([{"cpu_milli":1,"gpu_milli":1,"num_gpus":1,"popularity":1,"gpu_spec":3}])",
       R"("gpu_spec" must be a string)"},
      {R"([{"cpu_milli":1,"gpu_milli":1001,"num_gpus":1,"popularity":1}])", "out of range"},
      {R"([{"cpu_milli":-1,"gpu_milli":1,"num_gpus":1,"popularity":1}])", "out of range"},
      {R"([{"cpu_milli":1,"gpu_milli":1,"num_gpus":4294967296,"popularity":1}])", "out of range"},
      {R"([{"cpu_milli":1,"gpu_milli":1,"num_gpus":1,"popularity":0}])", "out of range"},
      {R"([{"cpu_milli":1,"gpu_milli":1,"num_gpus":1,"popularity":0.9}])",
       "popularities sum to 0.900000, not 1"},
      {std::string(100, '[') + std::string(100, ']'), "deeper than"},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.text);
    auto r = ParseTargetWorkload(b.text);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(b.message_part), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace fracgpu::core
