// The `fracgpu monitor` subcommand through its CLI11 registration (as src/cli/main.cc runs it):
// --once prints one scrape of the node (regions + fake NVML), bad flags are refused.
#include <CLI/CLI.hpp>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "region_files.h"

namespace fracgpu::cli {
void RegisterMonitorCommand(CLI::App& app);
}

namespace fracgpu::monitor::testing {
namespace {

constexpr const char* kGpu = "GPU-11111111-1111-1111-1111-111111111111";

int RunCli(std::vector<std::string> args) {
  CLI::App app("fracgpu");
  app.require_subcommand(1);
  fracgpu::cli::RegisterMonitorCommand(app);
  std::reverse(args.begin(), args.end());  // CLI11 takes the vector in reverse order
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return e.get_exit_code() == 0 ? 0 : -e.get_exit_code();
  }
  return 0;
}

TEST(MonitorCommand, OncePrintsTheNodesScrape) {
  TempDir dir;
  std::string root = dir.path() + "/vgpu/containers/uid-1_main";
  std::filesystem::create_directories(root);
  auto h = MakeRegion(root + "/region.cache", {{kGpu, 64 * kMiB, 0}});
  SetSlot(h.region, 0, 1, 1, {{0, 0, 5 * kMiB}});
  vgpu::RegionClose(&h);
  ::setenv("FAKE_GPU_DEVICES", (std::string(kGpu) + ":4096").c_str(), 1);
  ::unsetenv("FAKE_GPU_STATE_DIR");
  ::testing::internal::CaptureStdout();
  int rc = RunCli({"monitor", "--once", "--no-apiserver", "--node-name", "n1", "--hook-path", dir.path(),
                   "--node-dir", "", "--nvml-library", std::string(FRACGPU_FAKES_LIB) + "/libnvidia-ml.so.1"});
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("fracgpu_container_memory_used_bytes{node=\"n1\",namespace=\"\",pod=\"uid-1\",container=\"main\","
                     "device_uuid=\"" + std::string(kGpu) + "\"} 5242880\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("fracgpu_gpu_memory_total_bytes{node=\"n1\",device_uuid=\"" + std::string(kGpu) +
                     "\",device_index=\"0\",model=\"Fake GPU 0\"} 4294967296\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("fracgpu_build_info{component=\"monitor\",version=\""), std::string::npos);
}

TEST(MonitorCommand, BadFlagsAreRefused) {
  EXPECT_NE(RunCli({"monitor", "--once", "--no-apiserver", "--interval", "0"}), 0);
  EXPECT_NE(RunCli({"monitor", "--once", "--no-apiserver", "--port", "70000"}), 0);
  EXPECT_NE(RunCli({"monitor", "--once", "--no-apiserver", "--orphan-grace", "-1"}), 0);
  EXPECT_NE(RunCli({"monitor", "--no-such-flag"}), 0);
}

TEST(MonitorCommand, NodeNameIsRequiredWithAnApiServer) {
  ::unsetenv("NODE_NAME");
  EXPECT_THROW(
      {
        CLI::App app("fracgpu");
        fracgpu::cli::RegisterMonitorCommand(app);
        app.parse(std::vector<std::string>{"--once", "monitor"});
      },
      CLI::RuntimeError);
}

}  // namespace
}  // namespace fracgpu::monitor::testing
