// The one grant → container builder of both node plugins (node/container_edits.h): exact
// environment and mounts computed by hand from docs/design/CONTRACT.md §3, the core-policy order,
// the limits file, and the host files written whole, refused without libvgpu.so, and removed.
#include "node/container_edits.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "../support/files.h"
#include "../support/temp_dir.h"

namespace fracgpu::node {
namespace {

namespace fs = std::filesystem;
using Env = std::map<std::string, std::string>;

constexpr const char* kA = "GPU-aaaaaaaa-1111-2222-3333-000000000001";
constexpr const char* kB = "GPU-bbbbbbbb-1111-2222-3333-000000000002";

TEST(BuildContainerEdits, TwoGpusEveryOptionExactly) {
  DeviceConfig config;
  config.memory_scaling = 1.5;     // oversubscribed: CUDA_OVERSUBSCRIBE
  config.libcuda_log_level = "3";  // LIBCUDA_LOG_LEVEL
  ContainerEditsOptions o;
  o.hook_path = "/h";
  o.slot = "uid-p_main";
  o.priority = 0;
  o.container_core_policy = "FORCE";  // any letter case
  o.preload = false;                  // control disabled: libvgpu.so mounted, not preloaded
  ContainerEdits e =
      BuildContainerEdits({{kB, "NVIDIA", 4000, 25}, {kA, "NVIDIA", 5000, 40}}, config, o);
  const Env want = {{"NVIDIA_VISIBLE_DEVICES", std::string(kB) + "," + kA},
                    {"CUDA_DEVICE_MEMORY_LIMIT_0", "4000m"},
                    {"CUDA_DEVICE_SM_LIMIT_0", "25"},
                    {"CUDA_DEVICE_MEMORY_LIMIT_1", "5000m"},
                    {"CUDA_DEVICE_SM_LIMIT_1", "40"},
                    {"CUDA_DEVICE_SM_LIMIT", "25"},  // the first GPU's
                    {"CUDA_DEVICE_MEMORY_SHARED_CACHE", "/h/vgpu/region.cache"},
                    {"CUDA_TASK_PRIORITY", "0"},
                    {"GPU_CORE_UTILIZATION_POLICY", "force"},
                    {"CUDA_OVERSUBSCRIBE", "true"},
                    {"LIBCUDA_LOG_LEVEL", "3"}};
  EXPECT_EQ(e.env, want);
  const std::vector<MountSpec> mounts = {
      {"/h/vgpu/libvgpu.so", "/h/vgpu/libvgpu.so", true},
      {"/h/vgpu", "/h/vgpu/containers/uid-p_main", false},
      {"/etc/fracgpu/limits.env", "/h/vgpu/limits/uid-p_main.env", true},
      {"/run/fracgpu/node", "/h/vgpu/node", true}};
  EXPECT_EQ(e.mounts, mounts);
  EXPECT_EQ(e.region_dir, "/h/vgpu/containers/uid-p_main");
  EXPECT_EQ(e.limits_file, "/h/vgpu/limits/uid-p_main.env");
}

TEST(BuildContainerEdits, DefaultsMountThePreloadAndNoGrantHasNoSmLimit) {
  ContainerEditsOptions o;
  o.slot = "claim_u";
  ContainerEdits e = BuildContainerEdits({}, DeviceConfig{}, o);
  const Env want = {{"NVIDIA_VISIBLE_DEVICES", ""},
                    {"CUDA_DEVICE_MEMORY_SHARED_CACHE", "/usr/local/vgpu/region.cache"},
                    {"CUDA_TASK_PRIORITY", "1"},
                    {"GPU_CORE_UTILIZATION_POLICY", "default"}};
  EXPECT_EQ(e.env, want);
  ASSERT_EQ(e.mounts.size(), 5u);
  EXPECT_EQ(e.mounts[1], (MountSpec{"/etc/ld.so.preload", "/usr/local/vgpu/ld.so.preload", true}));
}

// disableCoreLimit, then gpuCorePolicy, then the container's own "force"/"disable".
TEST(BuildContainerEdits, CorePolicyOrder) {
  struct Case {
    bool disable_core_limit;
    std::string core_policy, container, want;
  };
  for (const Case& c : std::vector<Case>{{false, "default", "", "default"},
                                         {false, "default", "Disable", "disable"},
                                         {false, "default", "sometimes", "default"},
                                         {false, "force", "disable", "force"},
                                         {true, "force", "force", "disable"}}) {
    DeviceConfig config;
    config.disable_core_limit = c.disable_core_limit;
    config.core_policy = c.core_policy;
    ContainerEditsOptions o;
    o.container_core_policy = c.container;
    EXPECT_EQ(BuildContainerEdits({{kA, "NVIDIA", 1000, 10}}, config, o)
                  .env.at("GPU_CORE_UTILIZATION_POLICY"),
              c.want)
        << c.disable_core_limit << " " << c.core_policy << " " << c.container;
  }
}

TEST(LimitsFileContent, FixedOrderOnlyTheFileKeys) {
  const Env env = {{"CUDA_TASK_PRIORITY", "1"},
                   {"CUDA_DEVICE_SM_LIMIT_1", "40"},
                   {"CUDA_DEVICE_MEMORY_LIMIT_1", "5000m"},
                   {"CUDA_DEVICE_SM_LIMIT_0", "25"},
                   {"CUDA_DEVICE_MEMORY_LIMIT_0", "4000m"},
                   {"CUDA_DEVICE_SM_LIMIT", "25"},  // not a file key
                   {"LIBCUDA_LOG_LEVEL", "3"},      // not a file key
                   {"GPU_CORE_UTILIZATION_POLICY", "default"},
                   {"CUDA_DEVICE_MEMORY_SHARED_CACHE", "/h/vgpu/region.cache"},
                   {"NVIDIA_VISIBLE_DEVICES", "GPU-b,GPU-a"}};
  EXPECT_EQ(LimitsFileContent(env),
            "NVIDIA_VISIBLE_DEVICES=GPU-b,GPU-a\n"
            "CUDA_DEVICE_MEMORY_LIMIT_0=4000m\nCUDA_DEVICE_SM_LIMIT_0=25\n"
            "CUDA_DEVICE_MEMORY_LIMIT_1=5000m\nCUDA_DEVICE_SM_LIMIT_1=40\n"
            "CUDA_DEVICE_MEMORY_SHARED_CACHE=/h/vgpu/region.cache\n"
            "GPU_CORE_UTILIZATION_POLICY=default\nCUDA_TASK_PRIORITY=1\n");
}

class HostFilesTest : public ::testing::Test {
 protected:
  HostFilesTest() : dir_("fracgpu-node-") {
    hook_ = dir_.path();
    fs::create_directories(hook_ + "/vgpu");
    std::ofstream(hook_ + "/vgpu/libvgpu.so") << "ELF";
  }
  ContainerEdits Edits(const std::string& slot) {
    ContainerEditsOptions o;
    o.hook_path = hook_;
    o.slot = slot;
    return BuildContainerEdits({{kA, "NVIDIA", 3000, 30}}, DeviceConfig{}, o);
  }
  test_support::TempDir dir_;
  std::string hook_;
};

TEST_F(HostFilesTest, FreshRegionAndReadOnlyLimitsFileThenRemoved) {
  ASSERT_TRUE(PrepareHostFiles(hook_).ok());
  ContainerEdits e = Edits("s1");
  fs::create_directories(e.region_dir);
  std::ofstream(e.region_dir + "/stale") << "from the last allocation";
  ASSERT_TRUE(WriteContainerFiles(e, hook_).ok());
  EXPECT_TRUE(fs::is_empty(e.region_dir));
  struct stat st {};
  ASSERT_EQ(::stat(e.region_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0777u);
  ASSERT_EQ(::stat(e.limits_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
  EXPECT_EQ(test_support::ReadWholeFile(e.limits_file), LimitsFileContent(e.env));
  ASSERT_TRUE(RemoveContainerFiles(hook_, "s1").ok());
  EXPECT_FALSE(fs::exists(e.region_dir));
  EXPECT_FALSE(fs::exists(e.limits_file));
  EXPECT_TRUE(RemoveContainerFiles(hook_, "s1").ok());  // absent files are fine
}

TEST_F(HostFilesTest, MissingLibvgpuRefusesAndWritesNothing) {
  fs::remove(hook_ + "/vgpu/libvgpu.so");
  ContainerEdits e = Edits("s2");
  Status st = WriteContainerFiles(e, hook_);
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_EQ(st.message(),
            hook_ + "/vgpu/libvgpu.so is missing; refusing to give a GPU without isolation");
  EXPECT_FALSE(fs::exists(e.region_dir));
  EXPECT_FALSE(fs::exists(e.limits_file));
}

TEST_F(HostFilesTest, PrepareCreatesTheDirectoriesAndThePreloadLine) {
  ASSERT_TRUE(PrepareHostFiles(hook_).ok());
  for (const char* d : {"/vgpu/containers", "/vgpu/limits", "/vgpu/node"})
    EXPECT_TRUE(fs::is_directory(hook_ + d)) << d;
  struct stat st {};
  ASSERT_EQ(::stat((hook_ + "/vgpu/node").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  const std::string preload = hook_ + "/vgpu/ld.so.preload";
  EXPECT_EQ(test_support::ReadWholeFile(preload), hook_ + "/vgpu/libvgpu.so\n");
  ASSERT_EQ(::stat(preload.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

}  // namespace
}  // namespace fracgpu::node
