// One grant seen by both node plugins: the device plugin's Allocate (the real Allocator against
// the in-memory API server) and the DRA driver's claim edits give a container the same
// environment, the same mounts (only the slot name differs: "<pod UID>_<container>" for a
// pod's container, "claim_<uid>" for a claim) and the same limits file, and both equal what
// docs/design/CONTRACT.md §3 says, written out here by hand.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../support/files.h"
#include "deviceplugin/allocator.h"
#include "dra/cdi.h"
#include "fake_cluster.h"
#include "node/container_edits.h"
#include "node/device_state.h"
#include "test_support.h"

namespace fracgpu::node {
namespace {

namespace fs = std::filesystem;
namespace dp = deviceplugin;
using Env = std::map<std::string, std::string>;

TEST(BothPlugins, OneGrantGivesTheSameEnvironmentMountsAndLimitsFile) {
  dp::testing::TempDir dir;
  const std::string hook = dir.path() + "/hook";
  const std::string vgpu = hook + "/vgpu";
  fs::create_directories(vgpu);
  std::ofstream(vgpu + "/libvgpu.so") << "ELF";
  DeviceConfig config;
  config.libcuda_log_level = "2";

  // 3000 MiB and 30 % of GPU A, as docs/design/CONTRACT.md §3 spells the container's share.
  auto expected = [&](const std::string& slot) {
    ContainerEdits e;
    e.env = {{"NVIDIA_VISIBLE_DEVICES", dp::testing::kUuidA},
             {"CUDA_DEVICE_MEMORY_LIMIT_0", "3000m"},
             {"CUDA_DEVICE_SM_LIMIT_0", "30"},
             {"CUDA_DEVICE_SM_LIMIT", "30"},
             {"CUDA_DEVICE_MEMORY_SHARED_CACHE", vgpu + "/region.cache"},
             {"CUDA_TASK_PRIORITY", "1"},
             {"GPU_CORE_UTILIZATION_POLICY", "default"},
             {"LIBCUDA_LOG_LEVEL", "2"}};
    e.mounts = {{vgpu + "/libvgpu.so", vgpu + "/libvgpu.so", true},
                {"/etc/ld.so.preload", vgpu + "/ld.so.preload", true},
                {vgpu, vgpu + "/containers/" + slot, false},
                {"/etc/fracgpu/limits.env", vgpu + "/limits/" + slot + ".env", true},
                {"/run/fracgpu/node", vgpu + "/node", true}};
    return e;
  };

  // The device plugin: a pod granted the share, served by Allocate.
  dp::testing::FakeCluster cluster;
  base::ManualClock clock;
  DeviceState state(dp::testing::TwoGpus(), config);
  const std::string grant = std::string(dp::testing::kUuidA) + ",NVIDIA,3000,30:;";
  cluster.PutNode(dp::testing::MakeNode("ml", "train"));
  cluster.PutPod(dp::testing::MakePod("train", {{"main", false, 1}}, grant));
  dp::AllocatorOptions ao;
  ao.node_name = dp::testing::kNode;
  ao.hook_path = hook;
  ao.config = config;
  ao.verify_signature = [](const std::string& uid, const std::string& node_name,
                           const std::string& allocated, const std::string& sig) {
    return sig == dp::testing::Sign(uid, node_name, allocated) ? Status::Ok()
                                                               : PermissionDenied("bad");
  };
  dp::Allocator allocator(ao, &cluster, &clock, [&] { return state.Devices(); });
  ASSERT_TRUE(allocator.PrepareHostFiles().ok());
  auto a = allocator.Allocate({{std::string(dp::testing::kUuidA) + "-0"}});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  const ContainerEdits want_pod = expected("uid-train_main");
  EXPECT_EQ((*a)[0].envs, want_pod.env);
  EXPECT_EQ((*a)[0].mounts, want_pod.mounts);

  // The DRA driver: a claim allocated the same share.
  dra::CdiOptions co;
  co.cdi_dir = dir.path() + "/cdi";
  fs::create_directories(co.cdi_dir);
  co.hook_path = hook;
  co.config = config;
  dra::AllocatedShare share{"gpu", "node-a", "gpu-0", dp::testing::kUuidA, 3000, 30, "s-1"};
  const ContainerEdits want_claim = expected("claim_uid-c");
  ContainerEdits got = dra::BuildClaimEdits("uid-c", {share}, co);
  EXPECT_EQ(got.env, want_claim.env);
  EXPECT_EQ(got.mounts, want_claim.mounts);

  // The same limits file on the host, in docs/design/CONTRACT.md §3's order.
  ASSERT_TRUE(dra::WriteClaimFiles("uid-c", {share}, co).ok());
  const std::string file = std::string("NVIDIA_VISIBLE_DEVICES=") + dp::testing::kUuidA +
                           "\nCUDA_DEVICE_MEMORY_LIMIT_0=3000m\nCUDA_DEVICE_SM_LIMIT_0=30\n"
                           "CUDA_DEVICE_MEMORY_SHARED_CACHE=" +
                           vgpu + "/region.cache\nGPU_CORE_UTILIZATION_POLICY=default\n" +
                           "CUDA_TASK_PRIORITY=1\n";
  EXPECT_EQ(test_support::ReadWholeFile(vgpu + "/limits/uid-train_main.env"), file);
  EXPECT_EQ(test_support::ReadWholeFile(vgpu + "/limits/claim_uid-c.env"), file);
}

}  // namespace
}  // namespace fracgpu::node
