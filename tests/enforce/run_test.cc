// `fracgpu run` end to end over the fake driver and NVML: fail closed when libvgpu.so is
// missing or unloadable (nothing runs), a compliant child runs with the library (its region
// slot carries its allocation), and a child that goes around libvgpu.so is caught by the
// driver's account: over its limit it is killed and run exits non-zero with one line saying so.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "../support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
constexpr const char* kGpus = "GPU-11111111-1111-1111-1111-111111111111:4096";

uint64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct Outcome {
  int status = 0;
  std::string out, err;
  uint64_t exited_ns = 0;
  int code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
};

class RunTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = tmp_.path(); }

  // Runs `fracgpu run <args>` (fracgpu = `binary`) with the fake driver's environment.
  Outcome Run(const std::vector<std::string>& args, const std::string& binary = FRACGPU_BIN) {
    std::map<std::string, std::string> env = {{"LD_LIBRARY_PATH", FRACGPU_FAKES_LIB},
                                              {"FAKE_GPU_DEVICES", kGpus},
                                              {"FAKE_GPU_STATE_DIR", dir_},
                                              {"LIBCUDA_LOG_LEVEL", "0"},
                                              {"PATH", "/usr/bin:/bin"},
                                              {"TMPDIR", dir_}};
    std::vector<std::string> strings;
    for (const auto& [k, v] : env) strings.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& s : strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv_s = {binary, "run", "--nvml-library",
                                       std::string(FRACGPU_FAKES_LIB) + "/libnvidia-ml.so.1"};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& s : argv_s) argv.push_back(s.data());
    argv.push_back(nullptr);
    int out[2], err[2];
    EXPECT_EQ(pipe(out), 0);
    EXPECT_EQ(pipe(err), 0);
    pid_t pid = fork();
    if (pid == 0) {
      dup2(out[1], 1);
      dup2(err[1], 2);
      close(out[0]);
      close(err[0]);
      if (chdir(dir_.c_str()) != 0) _exit(126);
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    close(out[1]);
    close(err[1]);
    Outcome o;
    auto drain = [](int fd, std::string* s) {
      char buf[4096];
      ssize_t n = read(fd, buf, sizeof buf);
      if (n > 0) s->append(buf, static_cast<size_t>(n));
      return n > 0;
    };
    bool a = true, b = true;
    while (a || b) {
      fd_set set;
      FD_ZERO(&set);
      if (a) FD_SET(out[0], &set);
      if (b) FD_SET(err[0], &set);
      select(std::max(out[0], err[0]) + 1, &set, nullptr, nullptr, nullptr);
      if (a && FD_ISSET(out[0], &set)) a = drain(out[0], &o.out);
      if (b && FD_ISSET(err[0], &set)) b = drain(err[0], &o.err);
    }
    waitpid(pid, &o.status, 0);
    o.exited_ns = NowNs();
    close(out[0]);
    close(err[0]);
    return o;
  }
  // The region directory `fracgpu run` named on stderr ("fracgpu run: region <dir>/region.cache
  // (…"), or "" when it named none.
  static std::string RegionDir(const std::string& err) {
    const std::string prefix = "fracgpu run: region ";
    size_t at = err.find(prefix);
    if (at == std::string::npos) return "";
    size_t end = err.find(' ', at + prefix.size());
    return fs::path(err.substr(at + prefix.size(), end - at - prefix.size()))
        .parent_path()
        .string();
  }
  // The fracgpu-run-* entries left in the test's TMPDIR.
  std::vector<std::string> LeftOver() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().filename().string().rfind("fracgpu-run-", 0) == 0)
        out.push_back(e.path().string());
    return out;
  }
  fracgpu::test_support::TempDir tmp_{"fracgpu-runtest-"};
  std::string dir_;
};

TEST_F(RunTest, MissingLibraryRefusesAndRunsNothing) {
  std::string marker = dir_ + "/ran";
  Outcome o = Run({"--lib", "/nonexistent/libvgpu.so", "--gpumem", "1000", "--", "touch", marker});
  EXPECT_EQ(o.code(), 2) << o.err;
  EXPECT_NE(o.err.find("/nonexistent/libvgpu.so"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("refusing to run without limits"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(marker));
}

TEST_F(RunTest, UnloadableLibraryRefusesWithTheLoadersMessage) {
  std::string bogus = dir_ + "/libvgpu.so";
  std::ofstream(bogus) << "not an ELF object\n";
  std::string marker = dir_ + "/ran";
  Outcome o = Run({"--lib", bogus, "--gpumem", "1000", "--", "touch", marker});
  EXPECT_EQ(o.code(), 2) << o.err;
  EXPECT_NE(o.err.find(bogus + " cannot be loaded"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(marker));
}

TEST_F(RunTest, CopiedBinaryWithoutTheDefaultLibraryRefuses) {
  if (fs::exists("/usr/local/vgpu/libvgpu.so"))
    GTEST_SKIP() << "/usr/local/vgpu/libvgpu.so is installed here";
  std::string copy = dir_ + "/fracgpu";
  fs::copy_file(FRACGPU_BIN, copy);
  fs::permissions(copy, fs::perms::owner_all);
  std::string marker = dir_ + "/ran";
  Outcome o = Run({"--gpumem", "1000", "--", "touch", marker}, copy);
  EXPECT_EQ(o.code(), 2) << o.err;
  EXPECT_NE(o.err.find("/usr/local/vgpu/libvgpu.so"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(marker));
}

TEST_F(RunTest, CompliantChildRunsWithTheLibraryAndExitsZero) {
  Outcome o = Run({"--lib", FRACGPU_LIBVGPU, "--gpumem", "1000", "--", FRACGPU_VGPU_APP, "init",
                   "alloc:104857600", "region:0"});
  EXPECT_EQ(o.code(), 0) << o.err << o.out;
  // The child's own slot in run's private region charges its 100 MiB: libvgpu.so was active.
  std::istringstream lines(o.out);
  bool found = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("region 0 ", 0) != 0) continue;
    std::istringstream f(line.substr(9));
    long long host_pid = 0;
    unsigned long long used = 0;
    f >> host_pid >> used;
    EXPECT_GT(host_pid, 0);
    EXPECT_EQ(used, 104857600ull);
    found = true;
  }
  EXPECT_TRUE(found) << o.out;
  EXPECT_EQ(o.err.find("killed"), std::string::npos) << o.err;
}

TEST_F(RunTest, BypassOverTheLimitIsKilledAndRunSaysSo) {
  Outcome o = Run({"--lib", FRACGPU_LIBVGPU, "--gpumem", "1000", "--", FRACGPU_BYPASS_APP,
                   "bypass:1100", "hold:15000"});
  EXPECT_EQ(o.code(), 3) << o.err << o.out;
  // Allocation really succeeded around the library (the fake driver has 4096 MiB).
  size_t over = o.out.find("over ");
  ASSERT_NE(over, std::string::npos) << o.out << o.err;
  uint64_t over_ns = std::stoull(o.out.substr(over + 5));
  EXPECT_EQ(o.out.find("done"), std::string::npos) << "the bypass ran to its end";
  // Killed long before its 15 s hold ended (the latency distribution is measured by
  // bench/enforce_kill_latency.py, not here).
  EXPECT_LT(o.exited_ns - over_ns, 5'000'000'000ull);
  // One line saying so, with the numbers.
  size_t killed = o.err.find("fracgpu run: killed pid ");
  ASSERT_NE(killed, std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("fracgpu run: killed pid ", killed + 1), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("uses 1100.0 MiB of 1000.0 MiB (+100.0 MiB)"), std::string::npos) << o.err;
}

TEST_F(RunTest, BypassUnderTheLimitIsNotKilledButRunFailsClosed) {
  Outcome o = Run({"--lib", FRACGPU_LIBVGPU, "--gpumem", "1000", "--", FRACGPU_BYPASS_APP,
                   "bypass:200", "hold:600"});
  EXPECT_EQ(o.code(), 4) << o.err << o.out;
  EXPECT_NE(o.out.find("done"), std::string::npos) << o.out;  // ran to its end
  EXPECT_NE(o.err.find("that libvgpu.so never charged"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("killed"), std::string::npos) << o.err;
}

// Refused flags create nothing (the directory used to be made before the flags were checked).
TEST_F(RunTest, RefusedFlagsCreateNoRegionDirectory) {
  std::string marker = dir_ + "/ran";
  for (const std::vector<std::string>& flags : {std::vector<std::string>{"--gpumem", "3g"},
                                                {"--gpumem", "1000", "--gpucores", "150"},
                                                {"--gpumem", "1000", "--devices", "7"}}) {
    std::vector<std::string> args = {"--lib", FRACGPU_LIBVGPU};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--", "touch", marker});
    Outcome o = Run(args);
    EXPECT_EQ(o.code(), 2) << flags[flags.size() - 1] << ": " << o.err;
    EXPECT_EQ(RegionDir(o.err), "") << o.err;
    EXPECT_EQ(LeftOver(), std::vector<std::string>{}) << o.err;
    EXPECT_FALSE(fs::exists(marker));
  }
}

// The command's exit, whatever its code, and a failed exec remove the directory run created.
TEST_F(RunTest, RegionDirectoryIsRemovedWhenTheCommandExits) {
  Outcome ok = Run({"--lib", FRACGPU_LIBVGPU, "--gpumem", "1000", "--", FRACGPU_VGPU_APP, "init",
                    "alloc:104857600"});
  EXPECT_EQ(ok.code(), 0) << ok.err << ok.out;
  Outcome fails = Run({"--lib", FRACGPU_LIBVGPU, "--gpumem", "1000", "--", "sh", "-c", "exit 7"});
  EXPECT_EQ(fails.code(), 7) << fails.err;
  Outcome no_exec =
      Run({"--lib", FRACGPU_LIBVGPU, "--gpumem", "1000", "--", dir_ + "/no-such-program"});
  EXPECT_EQ(no_exec.code(), 127) << no_exec.err;
  for (const Outcome* o : {&ok, &fails, &no_exec}) {
    std::string region_dir = RegionDir(o->err);
    EXPECT_EQ(fs::path(region_dir).parent_path().string(), dir_) << o->err;  // under $TMPDIR
    EXPECT_FALSE(fs::exists(region_dir)) << region_dir;
  }
  EXPECT_EQ(LeftOver(), std::vector<std::string>{});
}

// SIGTERM to run (here from the command itself, at once: before or after run installs its
// handlers) reaches the command, and run still removes the directory.
TEST_F(RunTest, RegionDirectoryIsRemovedWhenRunIsKilled) {
  Outcome o = Run({"--lib", FRACGPU_LIBVGPU, "--gpumem", "1000", "--", "sh", "-c",
                   "kill -TERM $PPID; exec sleep 30"});
  EXPECT_EQ(o.code(), 128 + SIGTERM) << o.err;
  std::string region_dir = RegionDir(o.err);
  EXPECT_NE(region_dir, "") << o.err;
  EXPECT_FALSE(fs::exists(region_dir)) << region_dir;
  EXPECT_EQ(LeftOver(), std::vector<std::string>{});
}

// --keep-region leaves it, with the region the command wrote, and says so.
TEST_F(RunTest, KeepRegionLeavesTheDirectoryForInspect) {
  Outcome o = Run({"--keep-region", "--lib", FRACGPU_LIBVGPU, "--gpumem", "1000", "--",
                   FRACGPU_VGPU_APP, "init", "alloc:104857600"});
  EXPECT_EQ(o.code(), 0) << o.err;
  std::string region_dir = RegionDir(o.err);
  ASSERT_NE(region_dir, "") << o.err;
  EXPECT_TRUE(fs::is_regular_file(region_dir + "/region.cache")) << o.err;
  EXPECT_NE(
      o.err.find("fracgpu run: kept the region directory " + region_dir + " (--keep-region)\n"),
      std::string::npos)
      << o.err;
}

}  // namespace
