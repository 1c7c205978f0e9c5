// Cluster device config YAML, per-node overrides JSON and the Xid policy env: good inputs and
// a table of bad ones (each error names the field and the value).
#include "node/config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "node/health.h"

namespace fracgpu::node {
namespace {

TEST(DeviceConfigYaml, ReadsTheNvidiaSection) {
  auto c = ParseDeviceConfigYaml(R"(
nvidia:
  resourceCountName: example.com/vgpu
  resourceMemoryName: example.com/vgpu-memory
  resourceMemoryPercentageName: example.com/vgpu-memory-percentage
  resourceCoreName: example.com/vgpu-cores
  resourcePriorityName: example.com/vgpu-priority
  deviceSplitCount: 7
  deviceMemoryScaling: 1.5
  deviceCoreScaling: 2
  defaultMemory: 2048
  defaultCores: 20
  disableCoreLimit: true
  gpuCorePolicy: FORCE
  libCudaLogLevel: 3
  enableNumaTopology: true
  preConfiguredDeviceMemory: 65536
  knownMigGeometries: [ignored, list]
cambricon:
  resourceCountName: cambricon.com/vmlu
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->resources.gpu, "example.com/vgpu");
  EXPECT_EQ(c->resources.gpumem, "example.com/vgpu-memory");
  EXPECT_EQ(c->resources.gpumem_percentage, "example.com/vgpu-memory-percentage");
  EXPECT_EQ(c->resources.gpucores, "example.com/vgpu-cores");
  EXPECT_EQ(c->resources.priority, "example.com/vgpu-priority");
  EXPECT_EQ(c->split_count, 7);
  EXPECT_DOUBLE_EQ(c->memory_scaling, 1.5);
  EXPECT_DOUBLE_EQ(c->core_scaling, 2.0);
  EXPECT_EQ(c->default_memory_mib, 2048);
  EXPECT_EQ(c->default_cores, 20);
  EXPECT_TRUE(c->disable_core_limit);
  EXPECT_EQ(c->core_policy, "force");
  EXPECT_EQ(c->libcuda_log_level, "3");
  EXPECT_TRUE(c->enable_numa_topology);
  EXPECT_EQ(c->preconfigured_memory_mib, 65536);
}

TEST(DeviceConfigYaml, EmptyOrOtherVendorsOnlyGivesDefaults) {
  for (const char* text : {"", "cambricon: {}\n", "nvidia:\n"}) {
    auto c = ParseDeviceConfigYaml(text);
    ASSERT_TRUE(c.ok()) << text;
    EXPECT_EQ(*c, DeviceConfig{}) << text;
  }
}

TEST(DeviceConfigYaml, BadValuesNameTheKeyAndValue) {
  struct Case {
    const char* yaml;
    const char* message;
  } cases[] = {
      {"nvidia:\n  deviceSplitCount: 0\n",
       "nvidia.deviceSplitCount must be an integer 1..1000, got \"0\""},
      {"nvidia:\n  deviceSplitCount: ten\n",
       "nvidia.deviceSplitCount must be an integer 1..1000, got \"ten\""},
      {"nvidia:\n  deviceSplitCount: 2.5\n",
       "nvidia.deviceSplitCount must be an integer 1..1000, got \"2.5\""},
      {"nvidia:\n  deviceMemoryScaling: 0\n",
       "nvidia.deviceMemoryScaling must be a number > 0 and <= 100, got \"0\""},
      {"nvidia:\n  deviceCoreScaling: -1\n",
       "nvidia.deviceCoreScaling must be a number > 0 and <= 100, got \"-1\""},
      {"nvidia:\n  deviceCoreScaling: .nan\n",
       "nvidia.deviceCoreScaling must be a number > 0 and <= 100, got \".nan\""},
      {"nvidia:\n  defaultCores: 150\n",
       "nvidia.defaultCores must be an integer 0..100, got \"150\""},
      {"nvidia:\n  disableCoreLimit: maybe\n",
       "nvidia.disableCoreLimit must be true or false, got \"maybe\""},
      {"nvidia:\n  libCudaLogLevel: 9\n", "nvidia.libCudaLogLevel must be 0..4, got \"9\""},
      {"nvidia:\n  gpuCorePolicy: strict\n",
       "nvidia.gpuCorePolicy must be default, force or disable, got \"strict\""},
      {"nvidia:\n  resourceCountName: gpu\n",
       "nvidia.resourceCountName must be a domain-prefixed resource name like nvidia.com/gpu, got "
       "\"gpu\""},
      {"nvidia:\n  deviceSplitCount: [1]\n", "nvidia.deviceSplitCount must be a scalar"},
      {"nvidia: 3\n", "device config: nvidia must be a mapping"},
      {"- a\n- b\n", "device config must be a YAML mapping with an nvidia: section"},
  };
  for (const auto& c : cases) {
    auto r = ParseDeviceConfigYaml(c.yaml);
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), c.message) << c.yaml;
  }
  auto broken = ParseDeviceConfigYaml("nvidia: [unclosed\n");
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().message().rfind("device config is not valid YAML: ", 0), 0u);
}

// HAMi v2.10's request-default keys land in resources.defaults, the one struct the webhook,
// the extender, the device plugin and the DRA driver parse requests with.
TEST(DeviceConfigYaml, RequestDefaultsAndPodKeysOfHamiV210) {
  auto c = ParseDeviceConfigYaml(R"(
nvidia:
  defaultMemory: 4096
  defaultCores: 25
  defaultGPUNum: 2
  memoryFactor: 1024
  overwriteEnv: false
  runtimeClassName: nvidia
  migProfileAllowlist: [{models: ["A100"], allowedProfiles: ["1g.10gb"]}]
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->resources.defaults.default_memory_mib, 4096);
  EXPECT_EQ(c->resources.defaults.default_cores, 25);
  EXPECT_EQ(c->resources.defaults.default_gpu_num, 2);
  EXPECT_EQ(c->resources.defaults.memory_factor, 1024);
  EXPECT_EQ(c->default_memory_mib, 4096);
  EXPECT_EQ(c->default_cores, 25);
  EXPECT_EQ(c->overwrite_env, false);
  EXPECT_EQ(c->runtime_class_name, "nvidia");
  ASSERT_EQ(c->notes.size(), 1u);
  EXPECT_NE(c->notes[0].find("nvidia.migProfileAllowlist has no effect"), std::string::npos);
  // Absent keys: HAMi's chart defaults; overwriteEnv unset leaves the webhook's own default.
  auto d = ParseDeviceConfigYaml("nvidia: {}\n");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->resources.defaults, core::RequestDefaults{});
  EXPECT_EQ(d->resources.defaults.default_gpu_num, 1);
  EXPECT_EQ(d->resources.defaults.memory_factor, 1);
  EXPECT_FALSE(d->overwrite_env.has_value());
  EXPECT_TRUE(d->notes.empty());
}

// The nvidia: section HAMi v2.10's chart renders with its default values
// (charts/hami/templates/scheduler/device-configmap.yaml) parses as it is, MIG list and all, and
// an unset value (`libCudaLogLevel:` with nothing) is "not set".
TEST(DeviceConfigYaml, HamiChartDefaultSectionParses) {
  auto c = ParseDeviceConfigYaml(R"(
nvidia:
  resourceCountName: nvidia.com/gpu
  resourceMemoryName: nvidia.com/gpumem
  resourceMemoryPercentageName: nvidia.com/gpumem-percentage
  resourceCoreName: nvidia.com/gpucores
  resourcePriorityName: nvidia.com/priority
  overwriteEnv: false
  defaultMemory: 0
  defaultCores: 0
  defaultGPUNum: 1
  preConfiguredDeviceMemory: 0
  memoryFactor: 1
  deviceSplitCount: 10
  deviceMemoryScaling: 1
  deviceCoreScaling: 1
  enableNumaTopology: false
  gpuCorePolicy: default
  libCudaLogLevel:
  runtimeClassName: ""
  migProfileAllowlist:
  - models: [ "A30" ]
    profiles: [ "1g.6gb", "2g.12gb", "4g.24gb" ]
hygon:
  resourceCountName: hygon.com/dcunum
  memoryFactor: 1
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->overwrite_env, false);
  EXPECT_EQ(c->runtime_class_name, "");
  EXPECT_EQ(c->libcuda_log_level, "");
  EXPECT_EQ(c->resources.defaults, core::RequestDefaults{});
  EXPECT_EQ(c->notes.size(), 1u);  // the MIG list: no effect, said at start
}

// A key fracgpu does not know is refused by name, never skipped: a misspelt memoryFactor would
// otherwise make every slice 1024 times smaller without a word.
TEST(DeviceConfigYaml, UnknownKeysAndBadNewValuesAreRefusedByName) {
  struct Case {
    const char* yaml;
    const char* starts;
  } cases[] = {
      {"nvidia:\n  memoryfactor: 1024\n",
       "nvidia.memoryfactor is not a key fracgpu knows (refused rather than ignored; known: "
       "resourceCountName, "},
      {"nvidia:\n  migStrategy: mixed\n", "nvidia.migStrategy is not a key fracgpu knows"},
      {"nvidia:\n  defaultGPUNum: 0\n", "nvidia.defaultGPUNum must be an integer 1..16, got \"0\""},
      {"nvidia:\n  memoryFactor: 0\n",
       "nvidia.memoryFactor must be an integer 1..1048576, got \"0\""},
      {"nvidia:\n  memoryFactor: 1.5\n",
       "nvidia.memoryFactor must be an integer 1..1048576, got \"1.5\""},
      {"nvidia:\n  overwriteEnv: sometimes\n",
       "nvidia.overwriteEnv must be true or false, got \"sometimes\""},
      {"nvidia:\n  runtimeClassName: Nvidia_RT\n",
       "nvidia.runtimeClassName must be a RuntimeClass name (lower-case DNS-1123 subdomain), got "
       "\"Nvidia_RT\""},
      {"nvidia:\n  migProfileAllowlist: all\n", "nvidia.migProfileAllowlist must be a list"},
  };
  for (const auto& c : cases) {
    auto r = ParseDeviceConfigYaml(c.yaml);
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message().rfind(c.starts, 0), 0u) << r.status().message();
  }
}

// docs/hami-migration.md "Device config keys" lists exactly the keys the parser knows, and
// each listed key parses (a key in the doc and not in the code, or the reverse, fails here).
TEST(DeviceConfigYaml, MigrationDocKeyTableMatchesTheParser) {
  std::ifstream doc(FRACGPU_SOURCE_DIR "/docs/hami-migration.md");
  ASSERT_TRUE(doc.good());
  std::string line;
  bool in_section = false;
  std::set<std::string> documented;
  while (std::getline(doc, line)) {
    if (line.rfind("#", 0) == 0) {
      in_section = line == "### Device config keys";
      continue;
    }
    if (!in_section || line.rfind("| `", 0) != 0) continue;
    size_t end = line.find('`', 3);
    ASSERT_NE(end, std::string::npos) << line;
    documented.insert(line.substr(3, end - 3));
  }
  const auto& known = KnownNvidiaKeys();
  std::set<std::string> parsed(known.begin(), known.end());
  EXPECT_EQ(documented, parsed);
  EXPECT_EQ(parsed.size(), known.size());  // no key listed twice in the code
  for (const auto& key : documented) {
    auto r = ParseDeviceConfigYaml("nvidia:\n  " + key + ":\n");
    // A null value is "not set": every documented key is accepted by the parser.
    EXPECT_TRUE(r.ok()) << key << ": " << r.status().ToString();
  }
}

TEST(NodeOverrides, TheEntryNamingThisNodeWins) {
  DeviceConfig base;
  auto c = ApplyNodeOverrides(base, R"({"nodeconfig":[
      {"name":"node-b","devicesplitcount":3},
      {"name":"node-a","operatingmode":"hami-core","devicememoryscaling":2,"devicesplitcount":20,
       "devicecorescaling":0.5,"preconfigureddevicememory":1024,"enablenumatopology":true,"libcudaloglevel":"1",
       "migstrategy":"none","filterdevices":{"uuid":["GPU-x"],"index":[3]},"enablegetpreferredallocation":false}]})",
                              "node-a");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->split_count, 20);
  EXPECT_DOUBLE_EQ(c->memory_scaling, 2.0);
  EXPECT_DOUBLE_EQ(c->core_scaling, 0.5);
  EXPECT_EQ(c->preconfigured_memory_mib, 1024);
  EXPECT_TRUE(c->enable_numa_topology);
  EXPECT_EQ(c->libcuda_log_level, "1");
  EXPECT_EQ(c->filter_uuids, std::vector<std::string>{"GPU-x"});
  EXPECT_EQ(c->filter_indices, std::vector<uint32_t>{3});
  EXPECT_FALSE(c->preferred_allocation);
  auto other = ApplyNodeOverrides(
      base, R"({"nodeconfig":[{"name":"node-b","devicesplitcount":3}]})", "node-a");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(*other, base);
}

TEST(NodeOverrides, BadEntriesNameTheFieldAndValue) {
  struct Case {
    const char* json;
    const char* message;
  } cases[] = {
      {"not json", "node config is not valid JSON"},
      {"[]", "node config must be a JSON object with a nodeconfig list"},
      {R"({"nodeconfig":{}})", "node config: nodeconfig must be a list, got {}"},
      {R"({"nodeconfig":[3]})", "nodeconfig[0] must be an object, got 3"},
      {R"({"nodeconfig":[{"devicesplitcount":3}]})",
       "nodeconfig[0].name must be a non-empty string"},
      {R"({"nodeconfig":[{"name":"node-a","devicesplitcount":0}]})",
       "nodeconfig[0].devicesplitcount must be an integer 1..1000, got 0"},
      {R"({"nodeconfig":[{"name":"node-a","devicesplitcount":"4"}]})",
       "nodeconfig[0].devicesplitcount must be an integer 1..1000, got \"4\""},
      {R"({"nodeconfig":[{"name":"node-a","devicememoryscaling":-2}]})",
       "nodeconfig[0].devicememoryscaling must be a number > 0 and <= 100, got -2"},
      {R"({"nodeconfig":[{"name":"node-a","operatingmode":"mig"}]})",
       "nodeconfig[0].operatingmode must be \"hami-core\" (mig and mps modes are not supported), "
       "got \"mig\""},
      {R"({"nodeconfig":[{"name":"node-a","enablenumatopology":"yes"}]})",
       "nodeconfig[0].enablenumatopology must be true or false, got \"yes\""},
      {R"({"nodeconfig":[{"name":"node-a","filterdevices":{"index":[-1]}}]})",
       "nodeconfig[0].filterdevices.index must be an integer 0..1048576, got -1"},
      {R"({"nodeconfig":[{"name":"node-a","filterdevices":{"uuid":[""]}}]})",
       "nodeconfig[0].filterdevices.uuid entries must be non-empty strings, got \"\""},
      {R"({"nodeconfig":[{"name":"node-a","libcudaloglevel":2}]})",
       "nodeconfig[0].libcudaloglevel must be a string \"0\"..\"4\", got 2"},
      {R"({"nodeconfig":[{"name":"node-a","devicesplitcount":18446744073709551615}]})",
       "nodeconfig[0].devicesplitcount must be an integer 1..1000, got 18446744073709551615"},
  };
  DeviceConfig base;
  for (const auto& c : cases) {
    auto r = ApplyNodeOverrides(base, c.json, "node-a");
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), c.message) << c.json;
  }
}

TEST(XidPolicy, DefaultsAndEnvironment) {
  auto p = ParseXidPolicy("", "");
  ASSERT_TRUE(p.ok());
  for (uint64_t x : {13, 31, 43, 45, 68, 109}) EXPECT_FALSE(p->Counts(x)) << x;
  for (uint64_t x : {48, 79, 94, 95}) EXPECT_TRUE(p->Counts(x)) << x;
  auto off = ParseXidPolicy("all", "");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->Counts(79));
  auto more = ParseXidPolicy("79, 48", "13");
  ASSERT_TRUE(more.ok());
  EXPECT_FALSE(more->Counts(79));
  EXPECT_FALSE(more->Counts(48));
  EXPECT_TRUE(more->Counts(13));
  auto bad = ParseXidPolicy("79,x", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(
      bad.status().message(),
      "DP_DISABLE_HEALTHCHECKS must be all, xids or a comma list of Xid numbers; got entry \"x\"");
  auto bad2 = ParseXidPolicy("", "-1");
  ASSERT_FALSE(bad2.ok());
  EXPECT_NE(bad2.status().message().find("DP_ENABLE_HEALTHCHECKS"), std::string::npos);
}

}  // namespace
}  // namespace fracgpu::node
