// The `fracgpu monitor` subcommand through its CLI11 registration (as src/cli/main.cc runs it):
// --once prints one scrape of the node (regions + fake NVML), bad flags are refused.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <sstream>

#include "api/node_gpu.h"
#include "monitor/monitor.h"
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
  int rc = RunCli({"monitor", "--once", "--no-apiserver", "--node-name", "n1", "--hook-path",
                   dir.path(), "--node-dir", "", "--nvml-library",
                   std::string(FRACGPU_FAKES_LIB) + "/libnvidia-ml.so.1"});
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("fracgpu_container_memory_used_bytes{node=\"n1\",namespace=\"\",pod=\"uid-1\","
                     "container=\"main\","
                     "device_uuid=\"" +
                     std::string(kGpu) + "\"} 5242880\n"),
            std::string::npos)
      << out;
  EXPECT_NE(
      out.find("fracgpu_gpu_memory_total_bytes{node=\"n1\",device_uuid=\"" + std::string(kGpu) +
               "\",device_index=\"0\",model=\"Fake GPU 4GB\"} 4294967296\n"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("fracgpu_build_info{component=\"monitor\",version=\""), std::string::npos);
  // HAMi's names by default (the DaemonSet passes no flag) …
  EXPECT_NE(out.find("hami_vgpu_memory_used_bytes{namespace=\"\",pod=\"uid-1\",container=\"main\","
                     "vdevice_index=\"0\","
                     "device_uuid=\"" +
                     std::string(kGpu) + "\",zone=\"vGPU\"} 5242880\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("hami_build_info{"), std::string::npos);

  // … and none with --hami-metrics=false.
  ::testing::internal::CaptureStdout();
  rc = RunCli({"monitor", "--once", "--no-apiserver", "--node-name", "n1", "--hook-path",
               dir.path(), "--node-dir", "", "--hami-metrics=false", "--nvml-library",
               std::string(FRACGPU_FAKES_LIB) + "/libnvidia-ml.so.1"});
  out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(out.find("hami_"), std::string::npos) << out;
  EXPECT_NE(out.find("fracgpu_container_memory_used_bytes{"), std::string::npos) << out;
}

TEST(MonitorCommand, BadFlagsAreRefused) {
  EXPECT_NE(RunCli({"monitor", "--once", "--no-apiserver", "--interval", "0"}), 0);
  EXPECT_NE(RunCli({"monitor", "--once", "--no-apiserver", "--port", "70000"}), 0);
  EXPECT_NE(RunCli({"monitor", "--once", "--no-apiserver", "--orphan-grace", "-1"}), 0);
  EXPECT_NE(RunCli({"monitor", "--no-such-flag"}), 0);
  EXPECT_NE(RunCli({"monitor", "--once", "--no-apiserver", "--listen", "0.0.0.0:70000"}), 0);
  EXPECT_NE(RunCli({"monitor", "--once", "--no-apiserver", "--listen", "0.0.0.0:1", "--port", "2"}),
            0);
  // Checked even with --no-enforce, before anything is opened.
  EXPECT_NE(
      RunCli({"monitor", "--once", "--no-apiserver", "--no-enforce", "--enforce-memory", "x"}), 0);
}

TEST(MonitorCommand, NodeNameIsRequiredWithAnApiServer) {
  ::unsetenv("NODE_NAME");
  EXPECT_THROW(
      {
        CLI::App app("fracgpu");
        fracgpu::cli::RegisterMonitorCommand(app);
        app.parse(std::vector<std::string>{"--once", "monitor"});
      },
      CLI::ValidationError);  // a usage error: exit 2 in fracgpu (src/cli/usage.h)
}

// Every flag with a value shows its default in --help (as `device-plugin --help` does).
TEST(MonitorCommand, HelpShowsTheDefaults) {
  ::unsetenv("HOOK_PATH");
  CLI::App app("fracgpu");
  fracgpu::cli::RegisterMonitorCommand(app);
  const std::string help = app.get_subcommand("monitor")->help();
  const std::pair<const char*, const char*> defaults[] = {
      {"--hook-path", "/usr/local"},    {"--node-dir", "/usr/local/vgpu/node"},
      {"--listen", "0.0.0.0:9394"},     {"--interval", "5"},
      {"--orphan-grace", "300"},        {"--nvml-library", "libnvidia-ml.so.1"},
      {"--enforce-interval", "0.2"},    {"--enforce-memory", "kill"},
      {"--enforce-mismatch", "report"}, {"--enforce-unmanaged", "kill"},
      {"--enforce-confirm-polls", "2"}, {"--enforce-memory-slack", "64"},
      {"--priority-interval", "0.01"},  {"--proc-root", "/proc"}};
  for (const auto& [flag, value] : defaults) {
    size_t at = help.find(std::string("\n  ") + flag + " ");
    ASSERT_NE(at, std::string::npos) << flag << " in\n" << help;
    std::string line = help.substr(at + 1, help.find('\n', at + 1) - at - 1);
    const std::string shown = std::string("=") + value;
    size_t v = line.find(shown);
    EXPECT_TRUE(v != std::string::npos &&
                (v + shown.size() == line.size() || line[v + shown.size()] == ' '))
        << flag << " should show =" << value << ": " << line;
  }
}

// Without --node-dir the node directory follows the hook path (--hook-path or HOOK_PATH), so
// the priority file the device plugin's <hook>/vgpu/node holds is read; an explicit --node-dir,
// "" (off) included, wins.
TEST(MonitorCommand, NodeDirFollowsTheHookPathUnlessGiven) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() + "/vgpu/node");
  api::NodeGpu node{};
  node.magic = api::kNodeGpuMagic;
  node.version = api::kNodeGpuVersion;
  node.high_last_launch_ns = 1;  // a launch long ago: any monotonic now is later
  node.high_last_launch_check = ~node.high_last_launch_ns;
  WriteBytes(dir.path() + "/vgpu/node/" + kGpu,
             std::string(reinterpret_cast<const char*>(&node), sizeof node));
  ::setenv("FAKE_GPU_DEVICES", (std::string(kGpu) + ":4096").c_str(), 1);
  ::unsetenv("FAKE_GPU_STATE_DIR");
  const std::string nvml = std::string(FRACGPU_FAKES_LIB) + "/libnvidia-ml.so.1";
  const std::string age = "fracgpu_gpu_priority_launch_age_seconds{node=\"n1\",device_uuid=\"" +
                          std::string(kGpu) + "\"} ";
  auto once = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"monitor",     "--once", "--no-apiserver", "--no-enforce",
                                     "--node-name", "n1",     "--nvml-library", nvml};
    args.insert(args.end(), extra.begin(), extra.end());
    ::testing::internal::CaptureStdout();
    int rc = RunCli(args);
    std::string out = ::testing::internal::GetCapturedStdout();
    EXPECT_EQ(rc, 0);
    return out;
  };
  ::unsetenv("HOOK_PATH");
  std::string out = once({"--hook-path", dir.path()});
  EXPECT_NE(out.find(age), std::string::npos) << out;  // <hook-path>/vgpu/node
  out = once({"--hook-path", dir.path(), "--node-dir", ""});
  EXPECT_EQ(out.find(age), std::string::npos) << out;  // "" = off
  out = once({"--hook-path", dir.path(), "--node-dir", dir.path() + "/elsewhere"});
  EXPECT_EQ(out.find(age), std::string::npos) << out;  // explicit, holding no file
  // HOOK_PATH alone moves both (the flags are registered after it is set).
  ::setenv("HOOK_PATH", dir.path().c_str(), 1);
  out = once({});
  ::unsetenv("HOOK_PATH");
  EXPECT_NE(out.find(age), std::string::npos) << out;
}

TEST(MonitorCommand, WarnsAtStartWhenTheContainersDirectoryIsMissing) {
  TempDir dir;
  const std::string warning =
      dir.path() +
      "/vgpu/containers is missing: no container's region can be read, so no "
      "slice is measured or enforced until it appears (the device plugin creates it when it "
      "starts). If the device plugin uses another folder, point --hook-path (env HOOK_PATH) "
      "at the one holding vgpu/containers";
  EXPECT_EQ(MissingContainersWarning(dir.path()), warning);
  std::ofstream(dir.path() + "/vgpu") << "a file, not a folder";
  EXPECT_EQ(MissingContainersWarning(dir.path()), warning);  // vgpu is a file: still missing
  std::filesystem::remove(dir.path() + "/vgpu");

  // The command logs it once at start, as a warning.
  std::ostringstream log;
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  ::testing::internal::CaptureStdout();
  int rc = RunCli({"monitor", "--once", "--no-apiserver", "--no-enforce", "--hook-path", dir.path(),
                   "--node-dir", "", "--nvml-library", dir.path() + "/no-libnvidia-ml.so.1"});
  ::testing::internal::GetCapturedStdout();
  spdlog::set_default_logger(previous);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(log.str().find("[warning] " + warning + "\n"), std::string::npos) << log.str();

  // Present: no warning.
  std::filesystem::create_directories(dir.path() + "/vgpu/containers");
  EXPECT_EQ(MissingContainersWarning(dir.path()), "");
  std::ostringstream quiet;
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(quiet)));
  ::testing::internal::CaptureStdout();
  rc = RunCli({"monitor", "--once", "--no-apiserver", "--no-enforce", "--hook-path", dir.path(),
               "--node-dir", "", "--nvml-library", dir.path() + "/no-libnvidia-ml.so.1"});
  ::testing::internal::GetCapturedStdout();
  spdlog::set_default_logger(previous);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(quiet.str().find("is missing"), std::string::npos) << quiet.str();
}

}  // namespace
}  // namespace fracgpu::monitor::testing
