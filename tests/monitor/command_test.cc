// The `fracgpu monitor` subcommand through its CLI11 registration (as src/cli/main.cc runs it):
// --once prints one scrape of the node (regions + fake NVML), bad flags are refused.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "api/node_gpu.h"
#include "cli/usage.h"
#include "fake_apiserver.h"
#include "monitor/monitor.h"
#include "region_files.h"

extern char** environ;

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

// What `fracgpu monitor ARGS` exits with and prints on stderr, as main.cc runs it (usage.h).
std::pair<int, std::string> RunMain(std::vector<std::string> args) {
  CLI::App app("fracgpu");
  app.require_subcommand(1);
  fracgpu::cli::RegisterMonitorCommand(app);
  std::reverse(args.begin(), args.end());
  ::testing::internal::CaptureStderr();
  int rc = 0;
  try {
    app.parse(args);
  } catch (const CLI::Error& e) {
    rc = fracgpu::cli::ExitFor(app, "monitor", e);
  }
  return {rc, ::testing::internal::GetCapturedStderr()};
}

// The parking flags are checked with the others, before anything is opened: each bad value is
// a usage error (exit 2, `fracgpu monitor: <message>` naming the flag and the value).
TEST(MonitorCommand, ParkingFlagsAreUsageErrors) {
  ::setenv("NODE_NAME", "n1", 1);
  const std::vector<std::string> base = {"monitor", "--once", "--kubeconfig", "/nonexistent"};
  struct Row {
    std::vector<std::string> extra;
    std::string message;
  };
  const Row rows[] = {
      {{"--park"}, "--park needs --park-drivers"},
      {{"--park", "--park-drivers", ""}, "--park-drivers: '' is not a driver version"},
      {{"--park", "--park-drivers", "580.,abc"}, "--park-drivers: 'abc' is not a driver version"},
      {{"--park", "--park-drivers", "580.", "--no-apiserver"}, "not with --no-apiserver"},
      {{"--park", "--park-drivers", "580.", "--park-namespaces", "Team_A"},
       "--park-namespaces: 'Team_A' is not a namespace name"},
      {{"--park", "--park-drivers", "580.", "--park-idle", "0"}, "--park-idle"},
      {{"--park", "--park-drivers", "580.", "--park-idle", "x"}, "--park-idle"},
      {{"--park", "--park-drivers", "580.", "--park-interval", "0"}, "--park-interval"},
      {{"--park", "--park-drivers", "580.", "--park-lock-timeout-ms", "0"},
       "--park-lock-timeout-ms"},
      {{"--park", "--park-drivers", "580.", "--park-lock-timeout-ms", "-1"},
       "--park-lock-timeout-ms"},
      {{"--park", "--park-drivers", "580.", "--park-lend-interval", "0"}, "--park-lend-interval"},
      {{"--park", "--park-drivers", "580.", "--park-lend-interval", "90"}, "--park-lend-interval"},
      {{"--park", "--park-drivers", "580.", "--park-reclaim-timeout", "0"},
       "--park-reclaim-timeout"},
      {{"--park", "--park-drivers", "580.", "--cuda-library", ""}, "--cuda-library: empty"},
      {{"--park", "--park-drivers", "580.", "--cgroup-root", "sys/fs/cgroup"},
       "--cgroup-root: 'sys/fs/cgroup' is not an absolute path"},
  };
  for (const Row& row : rows) {
    std::vector<std::string> args = base;
    args.insert(args.end(), row.extra.begin(), row.extra.end());
    auto [rc, err] = RunMain(args);
    EXPECT_EQ(rc, fracgpu::cli::kExitUsage) << row.message << ": " << err;
    EXPECT_EQ(err.rfind("fracgpu monitor: ", 0), 0u) << err;
    EXPECT_NE(err.find(row.message), std::string::npos) << row.message << " in " << err;
  }
  // Valid parking flags pass the checks: the run then fails connecting (exit 1, not 2).
  auto [rc, err] =
      RunMain({"monitor", "--once", "--kubeconfig", "/nonexistent", "--park", "--park-drivers",
               "580.,575.57.08", "--park-namespaces", "notebooks,team-a", "--park-idle", "600",
               "--park-interval", "0.5", "--park-lock-timeout-ms", "1000", "--park-lend-interval",
               "15", "--park-reclaim-timeout", "120"});
  EXPECT_EQ(rc, 1) << err;
  EXPECT_EQ(err.find("--park"), std::string::npos) << err;
  ::unsetenv("NODE_NAME");
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
  const std::pair<const char*, const char*> defaults[] = {{"--hook-path", "/usr/local"},
                                                          {"--node-dir", "/usr/local/vgpu/node"},
                                                          {"--listen", "0.0.0.0:9394"},
                                                          {"--interval", "5"},
                                                          {"--orphan-grace", "300"},
                                                          {"--nvml-library", "libnvidia-ml.so.1"},
                                                          {"--enforce-interval", "0.2"},
                                                          {"--enforce-memory", "kill"},
                                                          {"--enforce-mismatch", "report"},
                                                          {"--enforce-unmanaged", "kill"},
                                                          {"--enforce-confirm-polls", "2"},
                                                          {"--enforce-memory-slack", "64"},
                                                          {"--priority-interval", "0.01"},
                                                          {"--proc-root", "/proc"},
                                                          {"--park-idle", "1800"},
                                                          {"--park-interval", "0.2"},
                                                          {"--park-lock-timeout-ms", "500"},
                                                          {"--park-lend-interval", "30"},
                                                          {"--park-reclaim-timeout", "60"},
                                                          {"--cuda-library", "libcuda.so.1"},
                                                          {"--cgroup-root", "/sys/fs/cgroup"}};
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

// ---- `fracgpu monitor --park` as a daemon (the fracgpu binary, the fake API server).

// The body of GET http://127.0.0.1:<port><path> ("" when it cannot be read).
std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) out.append(buf, n);
    }
  }
  close(fd);
  size_t body = out.find("\r\n\r\n");
  return body == std::string::npos ? "" : out.substr(body + 4);
}

// A TCP port of 127.0.0.1 free a moment ago (the kernel's choice for port 0).
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = -1;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

// Runs `fracgpu monitor --park ...` against the fake API server until SIGTERM; `extra` are
// further flags. Reads its log (stderr) for the metrics port and what it said.
class ParkingDaemon : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.path() + "/vgpu/containers");
    std::ofstream(dir_.path() + "/kubeconfig")
        << "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: "
        << api_.url()
        << "\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: x\n  context:\n    cluster: "
           "c\n    user: u\ncurrent-context: x\n";
  }
  void TearDown() override {
    if (pid_ > 0) Stop();
  }
  void Start(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {
        FRACGPU_BINARY,
        "monitor",
        "--node-name=n1",
        "--hook-path=" + dir_.path(),
        "--node-dir",
        "",
        "--listen=127.0.0.1:" + std::to_string(port_ = FreePort()),
        "--no-enforce",
        "--kubeconfig=" + dir_.path() + "/kubeconfig",
        "--nvml-library=" + std::string(FRACGPU_FAKES_LIB) + "/libnvidia-ml.so.1",
        "--park",
        "--park-drivers=580."};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_store = {"FAKE_GPU_DEVICES=" + std::string(kGpu) + ":4096",
                                          "FAKE_GPU_STATE_DIR=" + dir_.path()};
    for (char** e = environ; *e; ++e)
      if (std::string(*e).rfind("FAKE_GPU_", 0) != 0) env_store.push_back(*e);
    std::vector<char*> envp;
    for (auto& e : env_store) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, (dir_.path() + "/monitor.log").c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);  // the log and errors in one file
    ASSERT_EQ(posix_spawn(&pid_, FRACGPU_BINARY, &actions, nullptr, argv.data(), envp.data()), 0);
    posix_spawn_file_actions_destroy(&actions);
  }
  std::string Log() const {
    std::ifstream in(dir_.path() + "/monitor.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // Waits (bounded) for the monitor's "monitor on http://127.0.0.1:<port>" line; its port.
  int WaitForPort() {
    const std::string mark = "monitor on http://127.0.0.1:";
    for (int i = 0; i < 3000; ++i) {
      std::string log = Log();
      if (size_t at = log.find(mark); at != std::string::npos)
        return std::atoi(log.c_str() + at + mark.size());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
  // The metrics once the first poll is published (bounded wait: the server answers before the
  // first poll ends, and a poll is counted only once its GPUs and slices are served).
  std::string MetricsAfterFirstPoll(int port) {
    std::string metrics;
    for (int i = 0; i < 3000; ++i) {
      metrics = HttpGet(port, "/metrics");
      if (metrics.find("\nfracgpu_monitor_polls_total ") != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return metrics;
  }
  int Stop() {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  TempDir dir_;
  fakes::FakeApiServer api_;
  pid_t pid_ = -1;
  int port_ = -1;  // the --listen port asked for
};

// A driver that cannot be loaded: said loudly, counted, and the monitor serves the rest.
TEST_F(ParkingDaemon, WithoutTheDriverParkingIsOffAndTheMonitorServes) {
  Start({"--cuda-library=" + dir_.path() + "/no-libcuda.so.1"});
  const int port = WaitForPort();
  ASSERT_EQ(port, port_) << Log();
  const std::string metrics = MetricsAfterFirstPoll(port);
  EXPECT_NE(metrics.find("fracgpu_monitor_errors_total{source=\"parking\"} 1\n"), std::string::npos)
      << metrics;
  EXPECT_EQ(metrics.find("fracgpu_parked_bytes"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("fracgpu_gpu_memory_total_bytes{"), std::string::npos) << metrics;
  EXPECT_NE(Log().find("[error] parking OFF: UNAVAILABLE: cannot load the CUDA driver " +
                       dir_.path() + "/no-libcuda.so.1"),
            std::string::npos)
      << Log();
  EXPECT_EQ(Stop(), 0) << Log();
}

// The fake driver and NVML: parking on, its metrics served (nothing parked: no pod opts in).
TEST_F(ParkingDaemon, WithTheDriverTheParkingLoopRunsAndStopsOnSigterm) {
  Start({"--cuda-library=" + std::string(FRACGPU_FAKES_LIB) + "/libcuda.so.1",
         "--park-namespaces=notebooks"});
  const int port = WaitForPort();
  ASSERT_EQ(port, port_) << Log();
  EXPECT_NE(Log().find("parking on: idle 1800 s, every 0.2 s, drivers 580., default namespaces "
                       "notebooks"),
            std::string::npos)
      << Log();
  const std::string metrics = MetricsAfterFirstPoll(port);
  EXPECT_NE(metrics.find("fracgpu_parked_bytes{node=\"n1\"} 0\n"), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("fracgpu_monitor_errors_total{source=\"parking\"}"), std::string::npos)
      << metrics;
  EXPECT_EQ(Stop(), 0) << Log();
  EXPECT_NE(Log().find("monitor stopped"), std::string::npos) << Log();
}

}  // namespace
}  // namespace fracgpu::monitor::testing
