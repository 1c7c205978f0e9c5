// gpu_park_check on a machine without a GPU (issue 36 item 7): it refuses, by name and exit
// code, a missing driver and a driver without the checkpoint API (older than CUDA 12.8), and
// over the fake driver and NVML (tests/fakes: the checkpoint API served by the tenant process,
// docs/reclaim.md "The checkpoint API in the fake driver") it parks and wakes a running
// park_tenant through node::Parker, which then finds its bytes intact. The figures it prints are
// checked against what the test allocated.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;

constexpr const char* kGpu = "GPU-00000000-0000-4000-8000-0000000007a1";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct ToolRun {
  int rc = -1;
  std::string out, err;
};

std::vector<char*> Ptrs(std::vector<std::string>& v) {
  std::vector<char*> p;
  for (auto& s : v) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

// The environment of this process with `extra` ("K=V") in front.
std::vector<std::string> Env(const std::vector<std::string>& extra) {
  std::vector<std::string> env = extra;
  for (char** e = environ; *e; ++e) env.push_back(*e);
  return env;
}

class ParkCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fracgpu-park-check-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    StopTenant();
    fs::remove_all(dir_);
  }

  // Runs gpu_park_check with `args` and `env` extra, stdout and stderr to files.
  ToolRun Tool(std::vector<std::string> args, const std::vector<std::string>& env = {}) {
    args.insert(args.begin(), FRACGPU_PARK_CHECK);
    auto argv = Ptrs(args);
    auto envs = Env(env);
    auto envp = Ptrs(envs);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, (dir_ + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_addopen(&fa, 2, (dir_ + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    pid_t pid = -1;
    ToolRun r;
    if (posix_spawn(&pid, FRACGPU_PARK_CHECK, &fa, nullptr, argv.data(), envp.data()) != 0)
      return r;
    posix_spawn_file_actions_destroy(&fa);
    int status = 0;
    ::waitpid(pid, &status, 0);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = ReadFile(dir_ + "/out");
    r.err = ReadFile(dir_ + "/err");
    return r;
  }

  std::vector<std::string> FakeEnv() const {
    return {"FAKE_GPU_DEVICES=" + std::string(kGpu) + ":4096", "FAKE_GPU_STATE_DIR=" + dir_};
  }

  // Starts park_tenant over the fake driver with `mib` (and `env`); returns its "ready" line.
  std::string StartTenant(const std::vector<std::string>& mib,
                          const std::vector<std::string>& env = {}) {
    int in[2], out[2];
    if (::pipe(in) != 0 || ::pipe(out) != 0) return "";
    std::vector<std::string> args = {FRACGPU_PARK_TENANT};
    args.insert(args.end(), mib.begin(), mib.end());
    auto argv = Ptrs(args);
    auto envs = Env(FakeEnv());
    envs.insert(envs.begin(), env.begin(), env.end());
    envs.push_back("LD_LIBRARY_PATH=" + std::string(FRACGPU_FAKES_LIB));
    auto envp = Ptrs(envs);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    const int rc =
        posix_spawn(&tenant_, FRACGPU_PARK_TENANT, &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    if (rc != 0) return "";
    to_tenant_ = in[1];
    from_tenant_ = ::fdopen(out[0], "r");
    return TenantLine();
  }
  std::string TenantLine() {
    char buf[256] = {};
    if (from_tenant_ == nullptr || std::fgets(buf, sizeof(buf), from_tenant_) == nullptr) return "";
    std::string s = buf;
    if (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }
  // Lets the tenant check its bytes; its verdict line and exit code.
  std::pair<std::string, int> FinishTenant() {
    if (::write(to_tenant_, "go\n", 3) != 3) return {"", -1};
    std::string line = TenantLine();
    int status = 0;
    ::waitpid(tenant_, &status, 0);
    tenant_ = -1;
    return {line, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
  }
  void StopTenant() {
    if (tenant_ > 0) {
      ::kill(tenant_, SIGKILL);
      ::waitpid(tenant_, nullptr, 0);
      tenant_ = -1;
    }
    if (to_tenant_ >= 0) ::close(to_tenant_);
    to_tenant_ = -1;
    if (from_tenant_ != nullptr) ::fclose(from_tenant_);
    from_tenant_ = nullptr;
  }

  // A cgroup tree under dir_/cgroup with the tenant's memory cgroup (v1 or v2, as its
  // /proc/<pid>/cgroup names it): a 64 GiB limit, 1 MiB used.
  std::string FakeCgroupRoot() {
    const std::string root = dir_ + "/cgroup";
    std::istringstream lines(ReadFile("/proc/" + std::to_string(tenant_) + "/cgroup"));
    std::string line, v1, v2;
    bool has_v1 = false;
    while (std::getline(lines, line)) {
      const size_t a = line.find(':'), b = line.find(':', a + 1);
      const std::string ctl = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
      if (line.rfind("0::", 0) == 0) v2 = path;
      if (("," + ctl + ",").find(",memory,") != std::string::npos) {
        has_v1 = true;
        v1 = path;
      }
    }
    const std::string at = has_v1 ? root + "/memory" + v1 : root + v2;
    fs::create_directories(at);
    std::ofstream(at + (has_v1 ? "/memory.limit_in_bytes" : "/memory.max"))
        << (64ull << 30) << "\n";
    std::ofstream(at + (has_v1 ? "/memory.usage_in_bytes" : "/memory.current"))
        << (1 << 20) << "\n";
    return root;
  }

  // The tool's arguments over the fakes; `region` "" is --no-region.
  std::vector<std::string> FakeToolArgs(const std::string& region = "") {
    std::vector<std::string> facts = {"--no-region"};
    if (!region.empty()) facts = {"--region", region};
    return {"--pid",          std::to_string(tenant_),
            facts[0],         facts.size() > 1 ? facts[1] : "--no-region",
            "--allow-driver", "580.",
            "--cuda-library", std::string(FRACGPU_FAKES_LIB) + "/libcuda.so.1",
            "--nvml-library", std::string(FRACGPU_FAKES_LIB) + "/libnvidia-ml.so.1",
            "--cgroup-root",  FakeCgroupRoot()};
  }

  std::string dir_;
  pid_t tenant_ = -1;
  int to_tenant_ = -1;
  FILE* from_tenant_ = nullptr;
};

// "figure <name> <value>" lines.
std::map<std::string, double> Figures(const std::string& out) {
  std::map<std::string, double> f;
  std::istringstream in(out);
  std::string word, name;
  double v = 0;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    if (l >> word >> name >> v && word == "figure") f[name] = v;
  }
  return f;
}

TEST_F(ParkCheck, NoDriverIsRefusedAsUnsupported) {
  ToolRun r = Tool({"--pid", "1", "--no-region", "--allow-driver", "580.", "--cuda-library",
                    dir_ + "/no-such-libcuda.so.1"});
  EXPECT_EQ(r.rc, 3) << r.err;
  EXPECT_NE(r.err.find("gpu_park_check: unsupported: cannot load the CUDA driver " + dir_ +
                       "/no-such-libcuda.so.1"),
            std::string::npos)
      << r.err;
}

TEST_F(ParkCheck, ADriverWithoutTheCheckpointApiIsRefusedByName) {
  ToolRun r = Tool({"--pid", "1", "--no-region", "--allow-driver", "580.", "--cuda-library",
                    FRACGPU_OLD_LIBCUDA});
  EXPECT_EQ(r.rc, 3) << r.err;
  EXPECT_NE(r.err.find(std::string("gpu_park_check: unsupported: the CUDA driver ") +
                       FRACGPU_OLD_LIBCUDA +
                       " lacks cuCheckpointProcessGetState (the checkpoint API needs a CUDA 12.8 "
                       "or newer driver)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(ParkCheck, UsageErrorsExitTwo) {
  ToolRun r = Tool({"--pid", "1", "--allow-driver", "580."});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("give --region FILE (a process under libvgpu.so) or --no-region"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(Tool({"--no-region", "--allow-driver", "580."}).rc, 2);  // no --pid
  EXPECT_EQ(Tool({"--pid", "0", "--no-region", "--allow-driver", "580."}).rc, 2);
  EXPECT_EQ(Tool({"--pid", "1", "--region", "x", "--no-region", "--allow-driver", "580."}).rc, 2);
}

TEST_F(ParkCheck, ParksAndWakesATenantOverTheFakeDriverWithItsBytesIntact) {
  const std::string ready = StartTenant({"64", "128"});
  ASSERT_EQ(ready, "ready " + std::to_string(tenant_) + " 192");
  ToolRun r = Tool(FakeToolArgs(), FakeEnv());
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  std::printf("%s", r.out.c_str());  // the fake's figures, for the log
  EXPECT_NE(r.out.find("gpu " + std::string(kGpu) + " pid " + std::to_string(tenant_)),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("result parked-and-woken"), std::string::npos) << r.out;
  auto f = Figures(r.out);
  const double buffers = 192.0 * (1 << 20);
  // NVML's account of the pid: at least its buffers before, unlisted while parked, back after.
  EXPECT_GE(f["nvml_pid_bytes_before"], buffers);
  EXPECT_EQ(f["nvml_pid_listed_parked"], 0);
  EXPECT_EQ(f["nvml_pid_bytes_parked"], 0);
  EXPECT_EQ(f["nvml_pid_bytes_after"], f["nvml_pid_bytes_before"]);
  // The park released what NVML charged the pid (--no-region: the charge is NVML's).
  EXPECT_EQ(f["charged_bytes"], f["nvml_pid_bytes_before"]);
  EXPECT_EQ(f["released_bytes"], f["nvml_free_bytes_parked"] - f["nvml_free_bytes_before"]);
  EXPECT_GE(f["released_bytes"], f["charged_bytes"]);
  // The host copy: the tenant's resident memory grows by at least its buffers while parked.
  EXPECT_GE(f["vmrss_kib_parked"] - f["vmrss_kib_before"], buffers / 1024);
  for (const char* t : {"lock_ms", "checkpoint_ms", "restore_ms", "unlock_ms"}) {
    EXPECT_GE(f[t], 0) << t;
    EXPECT_LE(
        f[t],
        f[std::string(t) == "lock_ms" || std::string(t) == "checkpoint_ms" ? "park_ms" : "wake_ms"])
        << t;
  }
  auto [verdict, rc] = FinishTenant();
  EXPECT_EQ(verdict, "intact 192");
  EXPECT_EQ(rc, 0);
}

// The agent's path: the tenant under libvgpu.so, the facts from its region (its use record and
// the bytes libvgpu.so charged it, which NVML must show released).
TEST_F(ParkCheck, UnderLibvgpuTheRegionsFactsAreUsed) {
  const std::string region = dir_ + "/region.cache";
  const std::string ready = StartTenant(
      {"64"}, {"LD_PRELOAD=" + std::string(FRACGPU_LIBVGPU), "CUDA_DEVICE_MEMORY_LIMIT_0=1024m",
               "CUDA_DEVICE_MEMORY_SHARED_CACHE=" + region});
  ASSERT_EQ(ready, "ready " + std::to_string(tenant_) + " 64");
  ToolRun r = Tool(FakeToolArgs(region), FakeEnv());
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  auto f = Figures(r.out);
  EXPECT_GE(f["charged_bytes"], 64.0 * (1 << 20));  // the buffer, plus the context
  EXPECT_GE(f["released_bytes"], f["charged_bytes"]);
  EXPECT_EQ(f["nvml_pid_listed_parked"], 0);
  auto [verdict, rc] = FinishTenant();
  EXPECT_EQ(verdict, "intact 64");
  EXPECT_EQ(rc, 0);
}

TEST_F(ParkCheck, ARegionThatDoesNotHoldThePidIsAnUnknownFact) {
  const std::string ready = StartTenant({"16"});  // no libvgpu.so: no region of its own
  ASSERT_EQ(ready, "ready " + std::to_string(tenant_) + " 16");
  ToolRun r = Tool(FakeToolArgs(dir_ + "/missing.cache"), FakeEnv());
  EXPECT_EQ(r.rc, 4) << r.out << r.err;
  EXPECT_NE(r.err.find("gpu_park_check: ineligible: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("region " + dir_ + "/missing.cache"), std::string::npos) << r.err;
  auto [verdict, rc] = FinishTenant();
  EXPECT_EQ(verdict, "intact 16");
}

TEST_F(ParkCheck, AMigGpuIsIneligibleAndTheTenantIsNotTouched) {
  const std::string ready = StartTenant({"16"});
  ASSERT_EQ(ready, "ready " + std::to_string(tenant_) + " 16");
  auto env = FakeEnv();
  env.push_back("FAKE_NVML_MIG=1");
  ToolRun r = Tool(FakeToolArgs(), env);
  EXPECT_EQ(r.rc, 4) << r.out << r.err;
  EXPECT_NE(r.err.find("gpu_park_check: ineligible: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("MIG"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("figure"), std::string::npos) << r.out;
  auto [verdict, rc] = FinishTenant();
  EXPECT_EQ(verdict, "intact 16");
  EXPECT_EQ(rc, 0);
}

}  // namespace
