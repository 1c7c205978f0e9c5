// The ResourceSlice attributes that come from NVML (architecture, computeCapability,
// driverVersion), the way `fracgpu dra-driver` assembles them: the real NVML loader over the
// fake libnvidia-ml.so.1 (tests/fakes/nvml: an H100 / H200 by default, and a build without the
// three entry points, an older driver), the device plugin's inventory, BuildSliceDevices and
// SlicePublisher into the fake API server; and `fracgpu dra-driver` itself as a process.
// Attribute types are resource/v1 DeviceAttribute's (string / version, a semver 2.0.0 string).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dra/api.h"
#include "dra/slices.h"
#include "fake_apiserver.h"
#include "k8s/client.h"
#include "node/inventory.h"
#include "nvml/nvml.h"
#include "test_util.h"

extern char** environ;

namespace fracgpu::dra {
namespace {

using namespace testing;  // NOLINT

constexpr const char* kH200 = "GPU-cccccccc-1111-2222-3333-000000000003";

// What the driver publishes for the GPUs of `library` (after ListGpus, as at start).
json PublishedDevices(const std::string& library, std::vector<std::string>* omitted) {
  auto nvml = nvml::Nvml::Open({library, "/nonexistent"});
  EXPECT_TRUE(nvml.ok()) << nvml.status().ToString();
  if (!nvml.ok()) return json();
  auto gpus = (*nvml)->ListGpus();
  EXPECT_TRUE(gpus.ok()) << gpus.status().ToString();
  if (!gpus.ok()) return json();
  nvml::FactsReport facts = (*nvml)->Facts();
  *omitted = facts.omitted;
  for (const auto& line : UnpublishableFacts(facts.by_uuid)) omitted->push_back(line);
  fakes::FakeApiServer api;
  k8s::Config config;
  config.server = api.url();
  auto client = k8s::Client::Create(config);
  EXPECT_TRUE(client.ok());
  SliceOptions opt{kDriverName, kNode, true, 0, "", true};
  SlicePublisher publisher(opt, client->get());
  auto infos = node::BuildDeviceInfos(*gpus, node::DeviceConfig{}, {});
  auto gen = publisher.Sync(BuildSliceDevices(infos, *gpus, facts.by_uuid, opt));
  EXPECT_TRUE(gen.ok()) << gen.status().ToString();
  auto stored = api.Get("resourceslices", "", publisher.SliceName());
  EXPECT_TRUE(stored.has_value());
  return stored ? (*stored)["spec"]["devices"] : json();
}

TEST(DraNvmlFacts, AnH200PublishesArchitectureComputeCapabilityAndDriverVersion) {
  setenv("FAKE_GPU_DEVICES", (std::string(kH200) + ":143771").c_str(), 1);
  std::vector<std::string> omitted;
  json devices = PublishedDevices(FRACGPU_FAKE_NVML, &omitted);
  ASSERT_EQ(devices.size(), 1u);
  const json& a = devices[0]["attributes"];
  EXPECT_EQ(a["uuid"], json({{"string", kH200}}));
  // DeviceAttribute: exactly one of string / version per attribute.
  EXPECT_EQ(a["architecture"], json({{"string", "Hopper"}}));
  EXPECT_EQ(a["computeCapability"], json({{"version", "9.0.0"}}));
  EXPECT_EQ(a["driverVersion"],
            json({{"version", "580.95.5"}}));  // "05": no leading zeros in semver
  EXPECT_EQ(devices[0]["capacity"]["memory"]["value"], "143771Mi");
  EXPECT_EQ(omitted, std::vector<std::string>{});
}

TEST(DraNvmlFacts, ADriverVersionThatIsNotAVersionIsLeftOutAndSaid) {
  setenv("FAKE_GPU_DEVICES", (std::string(kH200) + ":143771").c_str(), 1);
  setenv("FAKE_NVML_DRIVER_VERSION", "580.95.05-beta", 1);
  std::vector<std::string> omitted;
  json devices = PublishedDevices(FRACGPU_FAKE_NVML, &omitted);
  unsetenv("FAKE_NVML_DRIVER_VERSION");
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_FALSE(devices[0]["attributes"].contains("driverVersion"));
  EXPECT_EQ(devices[0]["attributes"]["computeCapability"], json({{"version", "9.0.0"}}));
  EXPECT_EQ(omitted, std::vector<std::string>{
                         std::string(kH200) +
                         ": attribute driverVersion omitted: version \"580.95.05-beta\" is not "
                         "1 to 3 dot-separated numbers"});
}

TEST(DraNvmlFacts, AnOlderDriverWithoutTheEntryPointsOmitsTheAttributesOnly) {
  setenv("FAKE_GPU_DEVICES", (std::string(kH200) + ":143771").c_str(), 1);
  std::vector<std::string> omitted;
  json devices = PublishedDevices(FRACGPU_FAKE_NVML_WITHOUT_FACTS, &omitted);
  ASSERT_EQ(devices.size(), 1u);
  const json& a = devices[0]["attributes"];
  for (const char* absent : {"architecture", "computeCapability", "driverVersion"}) {
    EXPECT_FALSE(a.contains(absent)) << absent;
  }
  // Everything else is still published.
  EXPECT_EQ(a["uuid"], json({{"string", kH200}}));
  EXPECT_EQ(a["healthy"], json({{"bool", true}}));
  EXPECT_EQ(devices[0]["allowMultipleAllocations"], true);
  EXPECT_EQ(omitted.size(), 3u);
}

TEST(DraNvmlFacts, NotSupportedOmitsThatAttribute) {
  setenv("FAKE_GPU_DEVICES", (std::string(kH200) + ":143771").c_str(), 1);
  setenv("FAKE_NVML_NOT_SUPPORTED", "nvmlDeviceGetCudaComputeCapability", 1);
  std::vector<std::string> omitted;
  json devices = PublishedDevices(FRACGPU_FAKE_NVML, &omitted);
  unsetenv("FAKE_NVML_NOT_SUPPORTED");
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_FALSE(devices[0]["attributes"].contains("computeCapability"));
  EXPECT_EQ(devices[0]["attributes"]["architecture"], json({{"string", "Hopper"}}));
  EXPECT_EQ(devices[0]["attributes"]["driverVersion"], json({{"version", "580.95.5"}}));
  ASSERT_EQ(omitted.size(), 1u);
  EXPECT_EQ(omitted[0],
            "nvmlDeviceGetCudaComputeCapability failed: NVML error 3 (Not Supported) for " +
                std::string(kH200) + ": computeCapability omitted");
}

// `fracgpu dra-driver` as a process (the fake NVML, the fake API server through a kubeconfig,
// kubelet's directories in a temporary folder): the slice it publishes carries the facts, and
// with an older driver it publishes the devices without them and says so.
class DraDriverCommand : public ::testing::Test {
 protected:
  // Starts the driver with `library`; its output goes to <dir>/log.
  void Start(const std::string& library) {
    for (const char* sub : {"/hook/vgpu", "/reg", "/plug", "/cdi"})
      std::filesystem::create_directories(dir_.path() + sub);
    std::ofstream(dir_.path() + "/hook/vgpu/libvgpu.so") << "ELF";
    std::ofstream(dir_.path() + "/device-config.yaml")
        << "nvidia:\n  resourceCountName: nvidia.com/gpu\n";
    std::ofstream(dir_.path() + "/kubeconfig")
        << "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: "
        << api_.url()
        << "\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    "
           "user: u\n"
           "current-context: x\n";
    std::vector<std::string> args = {FRACGPU_BINARY,
                                     "dra-driver",
                                     "--node-name=" + std::string(kNode),
                                     "--hook-path=" + dir_.path() + "/hook",
                                     "--registry-dir=" + dir_.path() + "/reg",
                                     "--plugin-dir=" + dir_.path() + "/plug",
                                     "--cdi-dir=" + dir_.path() + "/cdi",
                                     "--config-file=" + dir_.path() + "/device-config.yaml",
                                     "--node-config=" + dir_.path() + "/absent.json",
                                     "--kubeconfig=" + dir_.path() + "/kubeconfig",
                                     "--nvml-library=" + library};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_store = {"FAKE_GPU_DEVICES=" + std::string(kH200) + ":143771"};
    for (char** e = environ; *e; ++e) {
      if (std::string(*e).rfind("FAKE_", 0) != 0) env_store.push_back(*e);
    }
    std::vector<char*> envp;
    for (auto& e : env_store) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    const std::string log = dir_.path() + "/log";
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    ASSERT_EQ(posix_spawn(&pid_, FRACGPU_BINARY, &actions, nullptr, argv.data(), envp.data()), 0);
    posix_spawn_file_actions_destroy(&actions);
  }
  // The published slice's devices, once it exists.
  json Devices() {
    const std::string name = std::string(kNode) + "-" + kDriverName;
    EXPECT_TRUE(api_.WaitFor([&] { return api_.Get("resourceslices", "", name).has_value(); },
                             std::chrono::seconds(30)))
        << ReadFile(dir_.path() + "/log");
    auto slice = api_.Get("resourceslices", "", name);
    return slice ? (*slice)["spec"]["devices"] : json();
  }
  // SIGTERM; the exit status must be 0.
  void Stop() {
    ASSERT_EQ(kill(pid_, SIGTERM), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid_, &status, 0), pid_);
    pid_ = 0;
    ASSERT_TRUE(WIFEXITED(status)) << status;
    EXPECT_EQ(WEXITSTATUS(status), 0) << ReadFile(dir_.path() + "/log");
  }
  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  TempDir dir_;
  fakes::FakeApiServer api_;
  pid_t pid_ = 0;
};

TEST_F(DraDriverCommand, PublishesArchitectureComputeCapabilityAndDriverVersion) {
  api_.Put("nodes", {{"metadata", {{"name", kNode}}}});
  Start(FRACGPU_FAKE_NVML);
  json devices = Devices();
  ASSERT_EQ(devices.size(), 1u);
  const json& a = devices[0]["attributes"];
  EXPECT_EQ(a["uuid"], json({{"string", kH200}}));
  EXPECT_EQ(a["architecture"], json({{"string", "Hopper"}}));
  EXPECT_EQ(a["computeCapability"], json({{"version", "9.0.0"}}));
  EXPECT_EQ(a["driverVersion"], json({{"version", "580.95.5"}}));
  Stop();
}

TEST_F(DraDriverCommand, AnOlderDriverPublishesTheDevicesWithoutTheFacts) {
  api_.Put("nodes", {{"metadata", {{"name", kNode}}}});
  Start(FRACGPU_FAKE_NVML_WITHOUT_FACTS);
  json devices = Devices();
  ASSERT_EQ(devices.size(), 1u);
  const json& a = devices[0]["attributes"];
  EXPECT_EQ(a["uuid"], json({{"string", kH200}}));
  for (const char* absent : {"architecture", "computeCapability", "driverVersion"}) {
    EXPECT_FALSE(a.contains(absent)) << absent;
  }
  Stop();
  EXPECT_NE(ReadFile(dir_.path() + "/log")
                .find("ResourceSlice: 3 NVML fact(s) left out of the device attributes; the "
                      "first: NVML library " +
                      std::string(FRACGPU_FAKE_NVML_WITHOUT_FACTS) +
                      " has no nvmlSystemGetDriverVersion: driverVersion omitted"),
            std::string::npos)
      << ReadFile(dir_.path() + "/log");
}

}  // namespace
}  // namespace fracgpu::dra
