#include "core/codec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fracgpu::core {
namespace {

const std::string kU1 = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448";
const std::string kU2 = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec";

DeviceInfo Dev(std::string uuid, int32_t index, int32_t count, int64_t devmem, int32_t devcore,
               std::string type, int32_t numa, bool health, std::string mode) {
  DeviceInfo d;
  d.uuid = std::move(uuid);
  d.index = index;
  d.count = count;
  d.devmem_mib = devmem;
  d.devcore = devcore;
  d.type = std::move(type);
  d.numa = numa;
  d.health = health;
  d.mode = std::move(mode);
  return d;
}

// ---- hami.io/node-nvidia-register --------------------------------------------------------

TEST(NodeRegisterTest, EncodeExactAndRoundTrip) {
  std::vector<DeviceInfo> devices = {
      Dev(kU2, 0, 10, 32768, 100, "NVIDIA-Tesla V100-PCIE-32GB", 0, true, "hami-core"),
      Dev(kU1, 1, 10, 32768, 100, "NVIDIA-Tesla V100-PCIE-32GB", 1, false, "hami-core"),
  };
  const std::string want =
      R"([{"id":"GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec","index":0,"count":10,"devmem":32768,)"
      R"("devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":0,"health":true,"mode":"hami-core"},)"
      R"({"id":"GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448","index":1,"count":10,"devmem":32768,)"
      R"("devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"health":false,"mode":"hami-core"}])";
  EXPECT_EQ(EncodeNodeRegister(devices), want);
  Result<std::vector<DeviceInfo>> back = DecodeNodeRegister(want);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, devices);
  EXPECT_EQ(EncodeNodeRegister({}), "[]");
}

// docs/design/hami-behaviour.md §3.3's example: HAMi's omitempty leaves zero fields out.
TEST(NodeRegisterTest, DecodesHamiJsonWithOmittedZeroFields) {
  const std::string hami =
      R"([{"id":"GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec","count":10,"devmem":32768,"devcore":100,
  "type":"NVIDIA-Tesla V100-PCIE-32GB","health":true,"mode":"hami-core"},
 {"id":"GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448","index":1,"count":10,"devmem":32768,"devcore":100,
  "type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"health":true,"mode":"hami-core",
  "migProfiles":[{"name":"1g.10gb"}]}])";
  Result<std::vector<DeviceInfo>> got = DecodeNodeRegister(hami);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got,
            (std::vector<DeviceInfo>{
                Dev(kU2, 0, 10, 32768, 100, "NVIDIA-Tesla V100-PCIE-32GB", 0, true, "hami-core"),
                Dev(kU1, 1, 10, 32768, 100, "NVIDIA-Tesla V100-PCIE-32GB", 1, true, "hami-core")}));
  // Everything but the id omitted: every field reads as its zero value.
  got = DecodeNodeRegister(R"([{"id":"GPU-x"}])");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, (std::vector<DeviceInfo>{Dev("GPU-x", 0, 0, 0, 0, "", 0, false, "")}));
  // Nulls read as omitted.
  got = DecodeNodeRegister(R"([{"id":"GPU-x","count":null,"health":null,"type":null}])");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, (std::vector<DeviceInfo>{Dev("GPU-x", 0, 0, 0, 0, "", 0, false, "")}));
}

TEST(NodeRegisterTest, DecodesLegacyColonFormat) {
  const std::string nine =
      "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec,10,32768,100,NVIDIA-Tesla "
      "V100-PCIE-32GB,0,true,0,hami-core:"
      "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,10,32768,100,NVIDIA-Tesla "
      "V100-PCIE-32GB,0,true,1,hami-core:";
  Result<std::vector<DeviceInfo>> got = DecodeNodeRegister(nine);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got,
            (std::vector<DeviceInfo>{
                Dev(kU2, 0, 10, 32768, 100, "NVIDIA-Tesla V100-PCIE-32GB", 0, true, "hami-core"),
                Dev(kU1, 1, 10, 32768, 100, "NVIDIA-Tesla V100-PCIE-32GB", 0, true, "hami-core")}));

  // 7 fields imply index 0 and mode hami-core; the final ':' may be missing; health in Go's
  // ParseBool spellings; surrounding whitespace is trimmed.
  got = DecodeNodeRegister("  GPU-a,4,16384,200,NVIDIA A10,1,false:GPU-b,2,8,100,T4,0,1,3,mig\n");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, (std::vector<DeviceInfo>{
                      Dev("GPU-a", 0, 4, 16384, 200, "NVIDIA A10", 1, false, "hami-core"),
                      Dev("GPU-b", 3, 2, 8, 100, "T4", 0, true, "mig")}));
}

TEST(NodeRegisterTest, EmptyIsNoDevices) {
  for (const char* v : {"", "  ", "[]", " [ ] ", ":", "::"}) {
    Result<std::vector<DeviceInfo>> got = DecodeNodeRegister(v);
    ASSERT_TRUE(got.ok()) << v << ": " << got.status().ToString();
    EXPECT_TRUE(got->empty()) << v;
  }
}

struct BadCase {
  std::string value;
  std::string message;
};

TEST(NodeRegisterTest, BadJsonTable) {
  const std::string d0 = "device 0 (\"GPU-a\"): ";
  const std::vector<BadCase> cases = {
      {"[1]", "device 0 must be an object, got 1"},
      {"[{\"index\":0}]", "device 0: id is missing"},
      {"[{\"id\":\"\"}]", "device 0: id must be a non-empty string, got \"\""},
      {"[{\"id\":5}]", "device 0: id must be a non-empty string, got 5"},
      {R"([{"id":"GPU-a"},{"id":"GPU-a"}])", "device 1 (\"GPU-a\"): duplicate id"},
      {R"([{"id":"GPU-a","devmem":-5}])", d0 + "devmem must be an integer 0..2147483647, got -5"},
      {R"([{"id":"GPU-a","devmem":"32768"}])",
       d0 + "devmem must be an integer 0..2147483647, got \"32768\""},
      {R"([{"id":"GPU-a","devmem":1.5}])", d0 + "devmem must be an integer 0..2147483647, got 1.5"},
      {R"([{"id":"GPU-a","devmem":32768.0}])",
       d0 + "devmem must be an integer 0..2147483647, got 32768.0"},
      {R"([{"id":"GPU-a","devmem":3000000000}])",
       d0 + "devmem must be an integer 0..2147483647, got 3000000000"},
      {R"([{"id":"GPU-a","count":true}])", d0 + "count must be an integer 0..2147483647, got true"},
      {R"([{"id":"GPU-a","index":-1}])", d0 + "index must be an integer 0..2147483647, got -1"},
      {R"([{"id":"GPU-a","devcore":{}}])",
       d0 + "devcore must be an integer 0..2147483647, got an object"},
      {R"([{"id":"GPU-a","numa":-1}])", d0 + "numa must be an integer 0..2147483647, got -1"},
      {R"([{"id":"GPU-a","health":"true"}])", d0 + "health must be true or false, got \"true\""},
      {R"([{"id":"GPU-a","type":5}])", d0 + "type must be a string, got 5"},
      {R"([{"id":"GPU-a","mode":[]}])", d0 + "mode must be a string, got an array"},
      {R"({"id":"GPU-a"})", "want a JSON array of devices, got an object"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.value);
    Result<std::vector<DeviceInfo>> got = DecodeNodeRegister(c.value);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(got.status().message(), c.message);
  }
  // The JSON library's own parse message follows the prefix (its wording is the library's).
  for (const char* v : {"[", "[{}] x", "[\"\xff\"]"}) {
    Result<std::vector<DeviceInfo>> got = DecodeNodeRegister(v);
    ASSERT_FALSE(got.ok()) << v;
    EXPECT_EQ(got.status().message().rfind("not valid JSON: ", 0), 0u) << got.status().message();
  }
}

TEST(NodeRegisterTest, BadLegacyTable) {
  const std::string r0 = "record 0 (\"GPU-a\"): ";
  const std::vector<BadCase> cases = {
      {"GPU-a,10,32768,100,T4:",
       "record 0: want 7 or 9 comma-separated fields "
       "(<UUID>,<count>,<devmem>,<devcore>,<type>,<numa>,<health>"
       "[,<index>,<mode>]), got 5 in \"GPU-a,10,32768,100,T4\""},
      {"GPU-a,10,32768,100,T4,0,true,0:",
       "record 0: want 7 or 9 comma-separated fields "
       "(<UUID>,<count>,<devmem>,<devcore>,<type>,<numa>,<health>"
       "[,<index>,<mode>]), got 8 in \"GPU-a,10,32768,100,T4,0,true,0\""},
      {",10,32768,100,T4,0,true:", "record 0: id is empty"},
      {"GPU-a,x,32768,100,T4,0,true:", r0 + "count must be an integer 0..2147483647, got \"x\""},
      {"GPU-a,10,-1,100,T4,0,true:", r0 + "devmem must be an integer 0..2147483647, got \"-1\""},
      {"GPU-a,10,+5,100,T4,0,true:", r0 + "devmem must be an integer 0..2147483647, got \"+5\""},
      {"GPU-a,10, 5,100,T4,0,true:", r0 + "devmem must be an integer 0..2147483647, got \" 5\""},
      {"GPU-a,10,2147483648,100,T4,0,true:",
       r0 + "devmem must be an integer 0..2147483647, got \"2147483648\""},
      {"GPU-a,10,32768,,T4,0,true:", r0 + "devcore must be an integer 0..2147483647, got \"\""},
      {"GPU-a,10,32768,100,T4,-1,true:", r0 + "numa must be an integer 0..2147483647, got \"-1\""},
      {"GPU-a,10,32768,100,T4,0,yes:", r0 + "health must be true or false, got \"yes\""},
      {"GPU-a,10,32768,100,T4,0,true,z,hami-core:",
       r0 + "index must be an integer 0..2147483647, got \"z\""},
      {"GPU-a,10,32768,100,T4,0,true,0,:", r0 + "mode is empty"},
      {"GPU-a,10,32768,100,T4,0,true:GPU-a,10,32768,100,T4,0,true:",
       "record 1 (\"GPU-a\"): duplicate id"},
      {"GPU-a,10,32768,100,T\xff,0,true:", "record 0: not valid UTF-8"},
      {"GPU-a,10,32768,100,T4,0,true:GPU-b:",
       "record 1: want 7 or 9 comma-separated fields (<UUID>,<count>,"
       "<devmem>,<devcore>,<type>,<numa>,<health>[,<index>,<mode>]), got 1 in \"GPU-b\""},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.value);
    Result<std::vector<DeviceInfo>> got = DecodeNodeRegister(c.value);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(got.status().message(), c.message);
  }
}

// ---- hami.io/vgpu-devices-allocated ------------------------------------------------------

// docs/design/CONTRACT.md §2's example (full UUIDs from docs/design/hami-behaviour.md §3.5): one
// init container without GPU and two app containers.
TEST(PodGrantsTest, ContractExampleRoundTrip) {
  const std::string example =
      ";" + kU1 + ",NVIDIA,3000,0:;" + kU1 + ",NVIDIA,5000,30:" + kU2 + ",NVIDIA,5000,30:;";
  Result<PodGrants> got = DecodePodGrants(example);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const PodGrants want = {
      {},
      {{kU1, "NVIDIA", 3000, 0}},
      {{kU1, "NVIDIA", 5000, 30}, {kU2, "NVIDIA", 5000, 30}},
  };
  EXPECT_EQ(*got, want);
  EXPECT_EQ(EncodePodGrants(want), example);
}

TEST(PodGrantsTest, EmptyForms) {
  struct Case {
    std::string value;
    size_t containers;
  };
  for (const Case& c : std::vector<Case>{{"", 0}, {";", 1}, {";;", 2}, {";;;", 3}}) {
    Result<PodGrants> got = DecodePodGrants(c.value);
    ASSERT_TRUE(got.ok()) << c.value;
    EXPECT_EQ(got->size(), c.containers);
    for (const ContainerGrants& g : *got) EXPECT_TRUE(g.empty());
    EXPECT_EQ(EncodePodGrants(*got), c.value);
  }
  EXPECT_EQ(EncodePodGrants({}), "");
}

TEST(PodGrantsTest, BadTable) {
  const std::vector<BadCase> cases = {
      {"GPU-a,NVIDIA,3000,0:", "container 0: part not terminated by ';'"},
      {";GPU-a,NVIDIA,3000,0:", "container 1: part not terminated by ';'"},
      {"GPU-a,NVIDIA,3000,0;",
       "container 0: the last device is not terminated by ':' in \"GPU-a,NVIDIA,3000,0\""},
      {"GPU-a,NVIDIA,3000:;",
       "container 0 device 0: want 4 comma-separated fields <UUID>,<type>,<mem MiB>,<cores %>, got "
       "3 in "
       "\"GPU-a,NVIDIA,3000\""},
      {"GPU-a,NVIDIA,3000,0,x:;",
       "container 0 device 0: want 4 comma-separated fields <UUID>,<type>,<mem MiB>,<cores %>, got "
       "5 in "
       "\"GPU-a,NVIDIA,3000,0,x\""},
      {":;",
       "container 0 device 0: want 4 comma-separated fields <UUID>,<type>,<mem MiB>,<cores %>, got "
       "1 in \"\""},
      {",NVIDIA,3000,0:;", "container 0 device 0: uuid is empty"},
      {"GPU-a,,3000,0:;", "container 0 device 0: type is empty"},
      {"GPU-a,NVIDIA,-1,0:;",
       "container 0 device 0: mem must be an integer 0..2147483647 (MiB), got \"-1\""},
      {"GPU-a,NVIDIA,abc,0:;",
       "container 0 device 0: mem must be an integer 0..2147483647 (MiB), got \"abc\""},
      {"GPU-a,NVIDIA,3k,0:;",
       "container 0 device 0: mem must be an integer 0..2147483647 (MiB), got \"3k\""},
      {"GPU-a,NVIDIA,99999999999,0:;",
       "container 0 device 0: mem must be an integer 0..2147483647 (MiB), got \"99999999999\""},
      {"GPU-a,NVIDIA,3000,101:;",
       "container 0 device 0: cores must be an integer 0..100 (%), got \"101\""},
      {"GPU-a,NVIDIA,3000,-0:;",
       "container 0 device 0: cores must be an integer 0..100 (%), got \"-0\""},
      {"GPU-a,NVIDIA,3000,:;",
       "container 0 device 0: cores must be an integer 0..100 (%), got \"\""},
      {";;GPU-a,NVIDIA,1,0:GPU-b,NVIDIA,2,x:;",
       "container 2 device 1: cores must be an integer 0..100 (%), got \"x\""},
      {"GPU-a,NVIDIA,1,0:GPU-A,NVIDIA,1,0:;",
       "container 0 device 1: GPU \"GPU-A\" is listed twice (a container gets distinct GPUs)"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.value);
    Result<PodGrants> got = DecodePodGrants(c.value);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(got.status().message(), c.message);
  }
}

TEST(PodGrantsTest, SameGpuInDifferentContainersIsFine) {
  Result<PodGrants> got = DecodePodGrants("GPU-a,NVIDIA,1,0:;GPU-a,NVIDIA,2,0:;");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), 2u);
}

// ---- hami.io/node-nvidia-score -----------------------------------------------------------

TEST(TopologyScoresTest, Decode) {
  Result<TopologyScores> got = DecodeTopologyScores(
      R"([{"uuid":"GPU-a","score":{"GPU-b":200,"GPU-c":10}},{"uuid":"GPU-b","score":{"GPU-a":200}},{"uuid":"GPU-c"}])");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  TopologyScores want;
  want["GPU-a"] = {{"GPU-b", 200}, {"GPU-c", 10}};
  want["GPU-b"] = {{"GPU-a", 200}};
  want["GPU-c"] = {};
  EXPECT_EQ(*got, want);
  EXPECT_TRUE(DecodeTopologyScores("")->empty());
  EXPECT_TRUE(DecodeTopologyScores("[]")->empty());
}

TEST(TopologyScoresTest, BadTable) {
  const std::vector<BadCase> cases = {
      {"{}", "want a JSON array of GPU scores, got an object"},
      {"[1]", "entry 0 must be an object, got 1"},
      {R"([{"score":{}}])", "entry 0: uuid is missing"},
      {R"([{"uuid":""}])", "entry 0: uuid must be a non-empty string, got \"\""},
      {R"([{"uuid":"GPU-a"},{"uuid":"GPU-a"}])", "entry 1 (\"GPU-a\"): duplicate uuid"},
      {R"([{"uuid":"GPU-a","score":[]}])",
       "entry 0 (\"GPU-a\"): score must be an object of uuid → integer, got an array"},
      {R"([{"uuid":"GPU-a","score":{"GPU-b":-1}}])",
       "entry 0 (\"GPU-a\"): score[\"GPU-b\"] must be an integer 0..2147483647, got -1"},
      {R"([{"uuid":"GPU-a","score":{"GPU-b":"10"}}])",
       "entry 0 (\"GPU-a\"): score[\"GPU-b\"] must be an integer 0..2147483647, got \"10\""},
      {R"([{"uuid":"GPU-a","score":{"GPU-b":1.5}}])",
       "entry 0 (\"GPU-a\"): score[\"GPU-b\"] must be an integer 0..2147483647, got 1.5"},
      {R"([{"uuid":"GPU-a","score":{"GPU-b":4294967296}}])",
       "entry 0 (\"GPU-a\"): score[\"GPU-b\"] must be an integer 0..2147483647, got 4294967296"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.value);
    Result<TopologyScores> got = DecodeTopologyScores(c.value);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(got.status().message(), c.message);
  }
  Result<TopologyScores> bad_json = DecodeTopologyScores("[{");
  ASSERT_FALSE(bad_json.ok());
  EXPECT_EQ(bad_json.status().message().rfind("not valid JSON: ", 0), 0u);
}

}  // namespace
}  // namespace fracgpu::core
