// `fracgpu run` environment building and `fracgpu inspect` formatting, on a region written by
// libvgpu.so itself.
#include "vgpu/cli/run_inspect.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "harness.h"

namespace fracgpu::vgpu::testing {
namespace {

using EnvList = std::vector<std::pair<std::string, std::string>>;

TEST(VgpuCli, RunEnvironmentFollowsTheContract) {
  cli::RunOptions o;
  o.gpumem = "3000,4000";
  o.gpucores = 50;
  o.devices = "2,3";
  o.library = "/x/libvgpu.so";
  o.region = "/tmp/r/region.cache";
  auto env = cli::BuildRunEnvironment(o);
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EnvList expected = {{"CUDA_DEVICE_MEMORY_LIMIT_0", "3000m"}, {"CUDA_DEVICE_MEMORY_LIMIT_1", "4000m"},
                      {"CUDA_DEVICE_SM_LIMIT_0", "50"},        {"CUDA_DEVICE_SM_LIMIT_1", "50"},
                      {"CUDA_DEVICE_SM_LIMIT", "50"},          {"NVIDIA_VISIBLE_DEVICES", "2,3"},
                      {"CUDA_VISIBLE_DEVICES", "2,3"},         {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
                      {"CUDA_DEVICE_MEMORY_SHARED_CACHE", "/tmp/r/region.cache"},
                      {"LD_PRELOAD", "/x/libvgpu.so"}};
  EXPECT_EQ(env.value(), expected);
}

TEST(VgpuCli, RunRejectsBadFlagsNamingThem) {
  struct Case {
    const char* gpumem;
    int cores;
    const char* devices;
    const char* message;
  };
  const Case cases[] = {{"3g", 0, "", "--gpumem: \"3g\""},        {"0", 0, "", "--gpumem: \"0\""},
                        {"", 0, "", "--gpumem: \"\""},            {"100,", 0, "", "--gpumem: \"\""},
                        {"100", 150, "", "--gpucores: must be 0..100, got 150"},
                        {"100", 0, "a", "--devices: \"a\""},      {"100,200", 0, "0", "--devices names 1 GPUs"}};
  for (const Case& c : cases) {
    cli::RunOptions o;
    o.gpumem = c.gpumem;
    o.gpucores = c.cores;
    o.devices = c.devices;
    auto env = cli::BuildRunEnvironment(o);
    ASSERT_FALSE(env.ok()) << c.gpumem;
    EXPECT_NE(env.status().message().find(c.message), std::string::npos) << env.status().message();
  }
}

TEST(VgpuCli, InspectShowsProcessesAndDevices) {
  Sandbox box;
  auto env = box.Env();
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "64m";
  Child a = Spawn(box, env, {"init", "alloc:16777216", "wait"});
  ReadLine(a);
  ReadLine(a);
  ASSERT_EQ(ReadLine(a), "ready");
  auto bytes = cli::ReadRegionFile(box.region());
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  std::string text = cli::FormatRegion(*reinterpret_cast<const Region*>(bytes.value().data()));
  EXPECT_NE(text.find(kUuid0), std::string::npos) << text;
  EXPECT_NE(text.find("64.0"), std::string::npos) << text;
  EXPECT_NE(text.find(std::to_string(a.pid) + " "), std::string::npos) << text;
  EXPECT_NE(text.find("16.0 (0.0+0.0+16.0)"), std::string::npos) << text;  // all of it data
  // This test runs in the host's PID namespace: the host PID is the PID.
  EXPECT_NE(text.find(std::to_string(a.pid) + std::string(8 - std::min<size_t>(8, std::to_string(a.pid).size()), ' ') +
                      " " + std::to_string(a.pid)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("never"), std::string::npos) << text;  // no kernel launched yet
  Finish(a);
  auto bad = cli::ReadRegionFile(box.dir() + "/fracgpu-limits.env-missing");
  EXPECT_FALSE(bad.ok());
}

}  // namespace
}  // namespace fracgpu::vgpu::testing
