// `fracgpu run` environment building and `fracgpu inspect` formatting, on a region written by
// libvgpu.so itself.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <fstream>

#include "harness.h"
#include "run/run_inspect.h"

namespace fracgpu::cli {
void RegisterInspectCommand(CLI::App& app);
}  // namespace fracgpu::cli

namespace fracgpu::vgpu::testing {
namespace {

using EnvList = std::vector<std::pair<std::string, std::string>>;

TEST(VgpuCli, RunEnvironmentFollowsTheContract) {
  ::fracgpu::run::RunOptions o;
  o.gpumem = "3000,4000";
  o.gpucores = 50;
  o.devices = "2,3";
  o.library = "/x/libvgpu.so";
  o.region = "/tmp/r/region.cache";
  auto env = ::fracgpu::run::BuildRunEnvironment(o);
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EnvList expected = {{"CUDA_DEVICE_MEMORY_LIMIT_0", "3000m"},
                      {"CUDA_DEVICE_MEMORY_LIMIT_1", "4000m"},
                      {"CUDA_DEVICE_SM_LIMIT_0", "50"},
                      {"CUDA_DEVICE_SM_LIMIT_1", "50"},
                      {"CUDA_DEVICE_SM_LIMIT", "50"},
                      {"NVIDIA_VISIBLE_DEVICES", "2,3"},
                      {"CUDA_VISIBLE_DEVICES", "2,3"},
                      {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
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
  const Case cases[] = {{"3g", 0, "", "--gpumem: \"3g\""},
                        {"0", 0, "", "--gpumem: \"0\""},
                        {"", 0, "", "--gpumem: \"\""},
                        {"100,", 0, "", "--gpumem: \"\""},
                        {"100", 150, "", "--gpucores: must be 0..100, got 150"},
                        {"100", 0, "a", "--devices: \"a\""},
                        {"100,200", 0, "0", "--devices names 1 GPUs"}};
  for (const Case& c : cases) {
    ::fracgpu::run::RunOptions o;
    o.gpumem = c.gpumem;
    o.gpucores = c.cores;
    o.devices = c.devices;
    auto env = ::fracgpu::run::BuildRunEnvironment(o);
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
  auto bytes = ::fracgpu::run::ReadRegionFile(box.region());
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  std::string text = ::fracgpu::run::FormatRegion(*bytes.value());
  EXPECT_NE(text.find(kUuid0), std::string::npos) << text;
  EXPECT_NE(text.find("64.0"), std::string::npos) << text;
  EXPECT_NE(text.find(std::to_string(a.pid) + " "), std::string::npos) << text;
  EXPECT_NE(text.find("16.0 (0.0+0.0+16.0)"), std::string::npos) << text;  // all of it data
  // This test runs in the host's PID namespace: the host PID is the PID.
  EXPECT_NE(text.find(std::to_string(a.pid) +
                      std::string(8 - std::min<size_t>(8, std::to_string(a.pid).size()), ' ') +
                      " " + std::to_string(a.pid)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("never"), std::string::npos) << text;  // no kernel launched yet
  // inspect follows a symlink the operator names (the monitor's and enforcer's reads do not).
  std::string link = box.dir() + "/region-link";
  ASSERT_EQ(::symlink(box.region().c_str(), link.c_str()), 0);
  auto linked = ::fracgpu::run::ReadRegionFile(link);
  ASSERT_TRUE(linked.ok()) << linked.status().ToString();
  EXPECT_EQ(::fracgpu::run::FormatRegion(*linked.value()).substr(0, 40), text.substr(0, 40));
  Finish(a);
  auto bad = ::fracgpu::run::ReadRegionFile(box.dir() + "/fracgpu-limits.env-missing");
  EXPECT_FALSE(bad.ok());
}

// `fracgpu inspect ARGS` through its CLI11 registration, as src/cli/main.cc runs it: the exit
// code (0, or the CLI::Error's) and what it printed on stderr. Any other exception escapes (and
// fails the test), as it would abort the executable.
std::pair<int, std::string> RunInspect(const std::string& path) {
  CLI::App app("fracgpu");
  app.require_subcommand(1);
  fracgpu::cli::RegisterInspectCommand(app);
  ::testing::internal::CaptureStderr();
  int rc = 0;
  try {
    app.parse(std::vector<std::string>{path, "inspect"});  // CLI11 takes the vector reversed
  } catch (const CLI::Error& e) {
    rc = e.get_exit_code();
  }
  return {rc, ::testing::internal::GetCapturedStderr()};
}

TEST(VgpuCli, InspectOfADirectoryIsAnErrorNamingThePath) {
  Sandbox box;
  auto bytes = ::fracgpu::run::ReadRegionFile(
      box.dir());  // threw std::ios_base::failure (rc 134 in fracgpu)
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.status().message(),
            "region file \"" + box.dir() + "\": is a directory, not a region file");
  auto [rc, err] = RunInspect(box.dir());
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(err, "fracgpu inspect: region file \"" + box.dir() +
                     "\": is a directory, not a region file\n");
}

TEST(VgpuCli, InspectOfAMissingOrForeignFileIsAnErrorNamingThePath) {
  Sandbox box;
  auto [rc, err] = RunInspect(box.dir() + "/missing");
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(err, "fracgpu inspect: region file \"" + box.dir() +
                     "/missing\": cannot open: No such file or directory\n");
  std::ofstream(box.dir() + "/short") << "abc";
  std::tie(rc, err) = RunInspect(box.dir() + "/short");
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(err, "fracgpu inspect: region file \"" + box.dir() + "/short\": not a fracgpu v" +
                     std::to_string(kRegionVersion) + " region (3 bytes, expected " +
                     std::to_string(sizeof(Region)) + ")\n");
  // A FIFO in place of the file: refused at once (O_NONBLOCK), never read.
  std::string fifo = box.dir() + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  std::tie(rc, err) = RunInspect(fifo);
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(err, "fracgpu inspect: region file \"" + fifo + "\": not a regular file\n");
}

}  // namespace
}  // namespace fracgpu::vgpu::testing
