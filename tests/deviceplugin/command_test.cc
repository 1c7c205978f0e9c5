// `fracgpu device-plugin` as a process, end to end without a GPU or a cluster: the fake NVML
// (dlopen'd), the fake kubelet (Unix socket), the fake kube-apiserver (HTTP, via kubeconfig).
// It registers, publishes the node annotation, serves a signed pod, and stops on SIGTERM.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/codec.h"
#include "deviceplugin/allocator.h"
#include "fake_apiserver.h"
#include "fake_kubelet.h"
#include "test_support.h"

extern char** environ;

namespace fracgpu::deviceplugin {
namespace {

using namespace testing;  // NOLINT
namespace fs = std::filesystem;
constexpr auto kWait = std::chrono::seconds(30);

TEST(Command, ServesAsADaemonAndStopsOnSigterm) {
  TempDir dir;
  const std::string sockets = dir.path() + "/dp", hook = dir.path() + "/hook";
  fs::create_directories(sockets);
  fs::create_directories(hook + "/vgpu");
  std::ofstream(hook + "/vgpu/libvgpu.so") << "ELF";
  std::ofstream(dir.path() + "/key") << kKey;
  std::ofstream(dir.path() + "/device-config.yaml")
      << "nvidia:\n  deviceSplitCount: 3\n  resourceCountName: nvidia.com/gpu\n";
  fakes::FakeApiServer api;
  api.Put("nodes", MakeNode());
  std::ofstream(dir.path() + "/kubeconfig")
      << "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " << api.url()
      << "\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    "
         "user: u\n"
         "current-context: x\n";
  fakes::FakeKubelet kubelet(sockets);
  ASSERT_TRUE(kubelet.Start());

  std::vector<std::string> args = {FRACGPU_BINARY,
                                   "device-plugin",
                                   "--node-name=" + std::string(kNode),
                                   "--hook-path=" + hook,
                                   "--socket-dir=" + sockets,
                                   "--config-file=" + dir.path() + "/device-config.yaml",
                                   "--node-config=" + dir.path() + "/absent.json",
                                   "--signing-key-file=" + dir.path() + "/key",
                                   "--kubeconfig=" + dir.path() + "/kubeconfig",
                                   "--nvml-library=" + std::string(FRACGPU_FAKE_NVML)};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The two GPUs bridged by 2 NVLinks (tests/fakes/nvml/fake_nvml.cc).
  std::vector<std::string> env_store = {
      std::string("FAKE_GPU_DEVICES=") + kUuidA + ":32768," + kUuidB + ":16384",
      "FAKE_GPU_TOPOLOGY=links:0-1x2"};
  for (char** e = environ; *e; ++e) env_store.push_back(*e);
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, FRACGPU_BINARY, nullptr, nullptr, argv.data(), envp.data()), 0);

  ASSERT_TRUE(kubelet.WaitForRegistrations(1, kWait));
  EXPECT_EQ(kubelet.registrations()[0].resource_name, "nvidia.com/gpu");
  ASSERT_TRUE(kubelet.WaitForDevices([](const auto& d) { return d.size() == 6; }, kWait));
  // Node registration: both fake GPUs, split count 3, memory from the fake NVML.
  ASSERT_TRUE(api.WaitFor(
      [&] {
        auto node = api.Get("nodes", "", kNode);
        return node && (*node)["metadata"]["annotations"].contains("hami.io/node-nvidia-register");
      },
      kWait));
  auto node = api.Get("nodes", "", kNode);
  auto devices =
      core::DecodeNodeRegister((*node)["metadata"]["annotations"]["hami.io/node-nvidia-register"]);
  ASSERT_TRUE(devices.ok());
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[0].uuid, kUuidA);
  EXPECT_EQ((*devices)[0].devmem_mib, 32768);
  EXPECT_EQ((*devices)[0].count, 3);
  EXPECT_EQ((*devices)[0].type, "NVIDIA-Fake GPU 32GB");  // fake_gpu.h FakeModelName
  EXPECT_EQ((*devices)[1].devmem_mib, 16384);
  // With it, HAMi's link scores from NVML: same CPU 20 + 2 NVLinks x 100 (issue 34 item 6).
  EXPECT_EQ((*node)["metadata"]["annotations"]["hami.io/node-nvidia-score"],
            std::string("[{\"uuid\":\"") + kUuidA + "\",\"score\":{\"" + kUuidB +
                "\":220}},{\"uuid\":\"" + kUuidB + "\",\"score\":{\"" + kUuidA + "\":220}}]");

  // A pod the scheduler bound, signed with the shared key.
  api.Patch(
      "nodes", "", kNode,
      {{"metadata", {{"annotations", {{"hami.io/mutex.lock", "2024-05-01T10:00:00Z,ml,train"}}}}}});
  std::string alloc = std::string(kUuidB) + ",NVIDIA,4096,50:;";
  api.Put("pods", MakePod("train", {{"main", false, 1}}, alloc));
  std::string uid = (*api.Get("pods", "ml", "train"))["metadata"]["uid"];
  ASSERT_EQ(uid, "uid-train");
  v1beta1::AllocateResponse response;
  grpc::Status st = kubelet.Allocate({{std::string(kUuidB) + "-2"}}, &response);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(response.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), kUuidB);
  EXPECT_EQ(response.container_responses(0).envs().at("CUDA_DEVICE_MEMORY_LIMIT_0"), "4096m");
  EXPECT_EQ((*api.Get("pods", "ml", "train"))["metadata"]["annotations"]["hami.io/bind-phase"],
            "success");
  EXPECT_FALSE(
      (*api.Get("nodes", "", kNode))["metadata"]["annotations"].contains("hami.io/mutex.lock"));

  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(fs::exists(sockets + "/fracgpu-nvidia.sock"));
}

// Runs `fracgpu <args>` with stdout and stderr together; returns the output and sets *rc.
std::string RunFracgpu(const std::string& args, int* rc) {
  std::string cmd = std::string(FRACGPU_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  if (p == nullptr) return out;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

TEST(Command, HelpShowsTheDefaults) {
  int rc = -1;
  std::string help = RunFracgpu("device-plugin --help", &rc);
  EXPECT_EQ(rc, 0);
  for (const char* want : {"/usr/local", "/var/lib/kubelet/device-plugins", "fracgpu-nvidia.sock",
                           "/device-config.yaml", "/config/config.json", "fracgpu-scheduler",
                           "/etc/fracgpu/signature/key", "libnvidia-ml.so.1", "30"}) {
    EXPECT_NE(help.find(want), std::string::npos) << want << " in\n" << help;
  }
}

TEST(Command, NoOrUnknownSubcommandListsThem) {
  int rc = -1;
  std::string alone = RunFracgpu("", &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(alone.rfind("fracgpu: a subcommand is required.", 0), 0u) << alone;
  EXPECT_NE(alone.find("  device-plugin "), std::string::npos) << alone;
  EXPECT_NE(alone.find("  version "), std::string::npos) << alone;
  std::string bogus = RunFracgpu("bogus", &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(bogus.rfind("fracgpu: unknown subcommand \"bogus\".", 0), 0u) << bogus;
  EXPECT_NE(bogus.find("  device-plugin "), std::string::npos) << bogus;
  // A known subcommand still runs.
  EXPECT_EQ(RunFracgpu("version", &rc).rfind("fracgpu ", 0), 0u);
  EXPECT_EQ(rc, 0);
}

TEST(Command, WarnsAtStartWhenLibvgpuIsMissing) {
  TempDir dir;
  fs::create_directories(dir.path() + "/vgpu");
  const std::string warning = MissingLibraryWarning(dir.path());
  EXPECT_EQ(warning.rfind(
                dir.path() + "/vgpu/libvgpu.so is missing: every GPU container will be refused", 0),
            0u)
      << warning;
  std::ofstream(dir.path() + "/vgpu/libvgpu.so") << "ELF";
  EXPECT_EQ(MissingLibraryWarning(dir.path()), "");
}

}  // namespace
}  // namespace fracgpu::deviceplugin
