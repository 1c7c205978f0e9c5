// SM limiter (issue 4) on the fake device's virtual clock (tests/fakes/cuda/fake_clock.h,
// docs/sm-limiter.md): measured utilisation over the simulated window [2 s, 12 s) within ±3
// points of the limit, every 1 s window after 2 s too (convergence within 2 s), no process
// or container starved. The measured busy time comes from the fake clock's own record of
// when kernels ran (not from NVML, which the limiter reads), so the check is independent.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "api/node_gpu.h"
#include "harness.h"

namespace fracgpu::vgpu::testing {
namespace {

constexpr const char* kOneGpu = "GPU-11111111-1111-1111-1111-111111111111:1024:108";
constexpr double kWindowNs = 10e9;  // [2 s, 12 s)

/// One process's result: launches, busy ns in the window, busy ns per second 0..11.
struct SmRun {
  int rc = -1;
  unsigned long long launches = 0;
  double busy = 0;
  std::vector<double> per_second;
};

SmRun Parse(const std::vector<std::string>& lines) {
  SmRun run;
  for (const auto& l : lines) {
    auto f = Fields(l);
    if (f.size() == 16 && f[0] == "smrun") {
      run.rc = std::stoi(f[1]);
      run.launches = std::stoull(f[2]);
      run.busy = std::stod(f[3]);
      for (size_t i = 4; i < 16; ++i) run.per_second.push_back(std::stod(f[i]));
    }
  }
  return run;
}

/// Environment of one container (region `name`) with SM limit `limit` in a simulation of
/// `participants` processes.
std::map<std::string, std::string> SmEnv(const Sandbox& box, const std::string& name, int limit,
                                         int participants) {
  auto env = box.Env();
  env["FAKE_GPU_DEVICES"] = kOneGpu;
  env["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = box.dir() + "/" + name;
  if (limit > 0) env["CUDA_DEVICE_SM_LIMIT"] = std::to_string(limit);
  env["FAKE_CLOCK_PARTICIPANTS"] = std::to_string(participants);
  return env;
}

/// Spawns every (env, ops) pair at once and returns their results in order.
std::vector<SmRun> RunAll(
    const Sandbox& box,
    const std::vector<std::pair<std::map<std::string, std::string>, std::vector<std::string>>>&
        procs) {
  std::vector<Child> children;
  int rank = 0;
  for (const auto& [env, ops] : procs) {
    auto ranked = env;
    ranked["FAKE_CLOCK_RANK"] = std::to_string(rank++);  // deterministic tie-break
    children.push_back(Spawn(box, ranked, ops));
  }
  std::vector<SmRun> runs;
  for (auto& c : children) runs.push_back(Parse(Finish(c)));
  return runs;
}

/// Utilisation (percent) of a group of processes over [2 s, 12 s) and per second 2..11.
struct Util {
  double window = 0;
  std::vector<double> seconds;
};
Util Sum(const std::vector<SmRun>& runs) {
  Util u;
  u.seconds.assign(12, 0.0);
  for (const auto& r : runs) {
    u.window += r.busy * 100.0 / kWindowNs;
    for (size_t s = 0; s < r.per_second.size() && s < 12; ++s)
      u.seconds[s] += r.per_second[s] / 1e7;
  }
  return u;
}

void ExpectNear(const Util& u, int target, const std::string& what) {
  EXPECT_NEAR(u.window, target, 3.0) << what << ": 10 s window";
  for (size_t s = 2; s < 12; ++s)
    EXPECT_NEAR(u.seconds[s], target, 3.0) << what << ": second " << s;
}

class SmLimit : public ::testing::TestWithParam<int> {};

// 5 ms kernels (108 blocks x 5000 threads x 1 ns), one launch then synchronise, through the
// cooperative-launch path HAMi-core leaves unlimited.
TEST_P(SmLimit, OneProcessLongKernels) {
  Sandbox box;
  auto runs = RunAll(box, {{SmEnv(box, "r", GetParam(), 1),
                            {"init", "cost:1000000", "smrun:108:5000:c:12000:1"}}});
  ASSERT_EQ(runs[0].rc, 0);
  ExpectNear(Sum(runs), GetParam(), "long kernels");
}

// 20 us kernels, synchronising every 100 launches (the host runs ahead of the device).
TEST_P(SmLimit, OneProcessTinyKernels) {
  Sandbox box;
  auto runs = RunAll(box, {{SmEnv(box, "r", GetParam(), 1),
                            {"init", "cost:1000000", "smrun:108:20:k:12000:100"}}});
  ASSERT_EQ(runs[0].rc, 0);
  EXPECT_GT(runs[0].launches, 10000u);
  ExpectNear(Sum(runs), GetParam(), "tiny kernels");
}

// Four processes of one container, different kernel sizes and launch paths, share the limit.
TEST_P(SmLimit, FourProcessesShareOneLimit) {
  Sandbox box;
  auto env = SmEnv(box, "r", GetParam(), 4);
  auto runs = RunAll(box, {{env, {"init", "cost:1000000", "smrun:54:200:k:12000:1"}},
                           {env, {"init", "cost:1000000", "smrun:54:1000:p:12000:1"}},
                           {env, {"init", "cost:1000000", "smrun:54:250:e:12000:10"}},
                           {env, {"init", "cost:1000000", "smrun:54:3000:c:12000:1"}}});
  for (const auto& r : runs) {
    ASSERT_EQ(r.rc, 0);
    EXPECT_GT(r.busy, 0.0) << "a process was starved";
  }
  ExpectNear(Sum(runs), GetParam(), "four processes");
}

INSTANTIATE_TEST_SUITE_P(Limits, SmLimit, ::testing::Values(10, 30, 50, 70, 90));

// Two containers (30 % and 70 %) on one device, each with two processes.
TEST(SmLimitContainers, ThirtyAndSeventyOnOneDevice) {
  Sandbox box;
  auto a = SmEnv(box, "a", 30, 4), b = SmEnv(box, "b", 70, 4);
  auto runs = RunAll(box, {{a, {"init", "cost:1000000", "smrun:54:1000:k:12000:1"}},
                           {a, {"init", "cost:1000000", "smrun:54:200:k:12000:5"}},
                           {b, {"init", "cost:1000000", "smrun:54:300:k:12000:1"}},
                           {b, {"init", "cost:1000000", "smrun:54:5000:e:12000:1"}}});
  for (const auto& r : runs) {
    ASSERT_EQ(r.rc, 0);
    EXPECT_GT(r.busy, 0.0) << "a process was starved";
  }
  ExpectNear(Sum({runs[0], runs[1]}), 30, "container A (30 %)");
  ExpectNear(Sum({runs[2], runs[3]}), 70, "container B (70 %)");
}

// In a container's PID namespace NVML reports host PIDs, not the ones the region's slots hold
// (emulated: FAKE_NVML_HOST_PID_OFFSET). The limiter matches NVML's samples by each slot's
// host_pid (host_pid.h), so the same limits hold. (Matching by the namespace PID would count
// nothing and never slow down: the runs would sit near 100 %.)
std::map<std::string, std::string> InNamespace(std::map<std::string, std::string> env) {
  env["FAKE_NVML_HOST_PID_OFFSET"] = "1000000";
  return env;
}

class SmLimitPidNamespace : public ::testing::TestWithParam<int> {};

TEST_P(SmLimitPidNamespace, OneProcessLongKernels) {
  Sandbox box;
  auto runs = RunAll(box, {{InNamespace(SmEnv(box, "r", GetParam(), 1)),
                            {"init", "cost:1000000", "smrun:108:5000:c:12000:1"}}});
  ASSERT_EQ(runs[0].rc, 0);
  ExpectNear(Sum(runs), GetParam(), "long kernels, PID namespace");
}

TEST_P(SmLimitPidNamespace, FourProcessesShareOneLimit) {
  Sandbox box;
  auto env = InNamespace(SmEnv(box, "r", GetParam(), 4));
  auto runs = RunAll(box, {{env, {"init", "cost:1000000", "smrun:54:200:k:12000:1"}},
                           {env, {"init", "cost:1000000", "smrun:54:1000:p:12000:1"}},
                           {env, {"init", "cost:1000000", "smrun:54:250:e:12000:10"}},
                           {env, {"init", "cost:1000000", "smrun:54:3000:c:12000:1"}}});
  for (const auto& r : runs) {
    ASSERT_EQ(r.rc, 0);
    EXPECT_GT(r.busy, 0.0) << "a process was starved";
  }
  ExpectNear(Sum(runs), GetParam(), "four processes, PID namespace");
}

INSTANTIATE_TEST_SUITE_P(Limits, SmLimitPidNamespace, ::testing::Values(30, 70));

TEST(SmLimitPidNamespaceContainers, ThirtyAndSeventyOnOneDevice) {
  Sandbox box;
  auto a = InNamespace(SmEnv(box, "a", 30, 4)), b = InNamespace(SmEnv(box, "b", 70, 4));
  auto runs = RunAll(box, {{a, {"init", "cost:1000000", "smrun:54:1000:k:12000:1"}},
                           {a, {"init", "cost:1000000", "smrun:54:200:k:12000:5"}},
                           {b, {"init", "cost:1000000", "smrun:54:300:k:12000:1"}},
                           {b, {"init", "cost:1000000", "smrun:54:5000:e:12000:1"}}});
  for (const auto& r : runs) {
    ASSERT_EQ(r.rc, 0);
    EXPECT_GT(r.busy, 0.0) << "a process was starved";
  }
  ExpectNear(Sum({runs[0], runs[1]}), 30, "container A (30 %), PID namespace");
  ExpectNear(Sum({runs[2], runs[3]}), 70, "container B (70 %), PID namespace");
}

// Without a limit the same workloads run far above every tested target: the limiter, not the
// workload, produces the figures above.
TEST(SmLimitBaseline, UnlimitedRunsNearlyFull) {
  Sandbox box;
  auto runs =
      RunAll(box, {{SmEnv(box, "r", 0, 1), {"init", "cost:1000000", "smrun:108:5000:c:12000:1"}}});
  EXPECT_GT(Sum(runs).window, 99.0);
  Sandbox box2;
  auto tiny = RunAll(
      box2, {{SmEnv(box2, "r", 100, 1), {"init", "cost:1000000", "smrun:108:20:k:12000:100"}}});
  EXPECT_GT(Sum(tiny).window, 99.0) << "limit 100 means unlimited";
}

// GPU_CORE_UTILIZATION_POLICY=disable never limits; force limits like default.
TEST(SmLimitPolicy, DisableNeverLimitsForceDoes) {
  Sandbox box;
  auto env = SmEnv(box, "r", 30, 1);
  env["GPU_CORE_UTILIZATION_POLICY"] = "disable";
  auto runs = RunAll(box, {{env, {"init", "cost:1000000", "smrun:108:5000:k:12000:1"}}});
  EXPECT_GT(Sum(runs).window, 99.0);
  Sandbox box2;
  auto env2 = SmEnv(box2, "r", 30, 1);
  env2["GPU_CORE_UTILIZATION_POLICY"] = "force";
  auto forced = RunAll(box2, {{env2, {"init", "cost:1000000", "smrun:108:5000:k:12000:1"}}});
  EXPECT_NEAR(Sum(forced).window, 30, 3.0);
}

// cuGraphLaunch (1 ms graphs: 1 block x 1000 threads x 1 ns) is paced like a kernel.
TEST(SmLimitPaths, GraphLaunchIsLimited) {
  Sandbox box;
  auto runs =
      RunAll(box, {{SmEnv(box, "r", 40, 1), {"init", "cost:1000000000", "smrun:1:1:g:12000:1"}}});
  ASSERT_EQ(runs[0].rc, 0);
  ExpectNear(Sum(runs), 40, "graphs");
}

// Priority (issue 32 item 2): the node agent publishes the last priority-0 launch per GPU in a
// read-only node file (api/node_gpu.h); no container writes it. A priority-1 process holds its
// launches back while that stamp is less than 50 ms old. Here the test plays the agent: it writes
// a stamp at 5 s (virtual clock); the priority-1 process runs unheld before (a stamp in the
// future is ignored), is held ~50 ms after 5 s, and runs unheld after.
constexpr const char* kGpuUuid = "GPU-11111111-1111-1111-1111-111111111111";

/// Writes the node file of kGpuUuid under `box` as the agent does: 64 bytes, magic, version 2,
/// stamp, ~stamp, and with `contended_until` its contention word and check (without it both
/// stay zero, as an agent that predates them leaves them); mode 0644.
std::string WriteNodeFile(const Sandbox& box, uint64_t stamp,
                          std::optional<uint64_t> contended_until = std::nullopt) {
  const std::string dir = box.dir() + "/fracgpu-node";
  std::filesystem::create_directories(dir);
  api::NodeGpu n{};
  n.magic = api::kNodeGpuMagic;
  n.version = api::kNodeGpuVersion;
  n.high_last_launch_ns = stamp;
  n.high_last_launch_check = ~stamp;
  if (contended_until) {
    n.contended_until_ns = *contended_until;
    n.contended_until_check = ~*contended_until;
  }
  const std::string path = dir + "/" + kGpuUuid;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(&n), sizeof n);
  std::filesystem::permissions(
      path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                std::filesystem::perms::group_read | std::filesystem::perms::others_read);
  return path;
}

/// One priority-1 process alone on the GPU for 12 s (virtual), kernels of half the SMs.
SmRun RunLow(const Sandbox& box) {
  auto low = SmEnv(box, "low", 100, 1);
  low["CUDA_TASK_PRIORITY"] = "1";
  return RunAll(box, {{low, {"init", "cost:1000000", "smrun:54:1000:k:12000:1"}}})[0];
}

TEST(SmLimitPriority, LowPriorityHeldWhileAgentStampIsFresh) {
  Sandbox box;
  WriteNodeFile(box, 5'000'000'000ull);
  SmRun l = RunLow(box);
  ASSERT_EQ(l.rc, 0);
  for (int s : {0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11})
    EXPECT_GT(l.per_second[s], 0.99e9) << "held back in second " << s;
  // Held from the first read after 5 s (files are re-read every 5 ms) until 5.05 s.
  EXPECT_LT(l.per_second[5], 0.965e9);
  EXPECT_GT(l.per_second[5], 0.94e9);
}

// A node file a tenant forged or broke never holds a priority-1 process for long and never
// crashes it: each variant below is treated as "no priority-0 launch" (the old design: a forged
// future stamp blocked the first launch forever, a truncated file raised SIGBUS, the file
// belonged to whichever container created it).
TEST(SmLimitPriority, ForgedTruncatedOrForeignNodeFileIsIgnored) {
  const uint64_t fresh = 5'000'000'000ull;
  struct Variant {
    const char* name;
    std::function<void(const Sandbox&)> make;
  };
  namespace fs = std::filesystem;
  const std::vector<Variant> variants = {
      {"stamp far in the future", [](const Sandbox& b) { WriteNodeFile(b, ~0ull - 1); }},
      {"truncated to 8 bytes",
       [&](const Sandbox& b) { fs::resize_file(WriteNodeFile(b, fresh), 8); }},
      {"empty", [&](const Sandbox& b) { fs::resize_file(WriteNodeFile(b, fresh), 0); }},
      {"longer than 64 bytes",
       [&](const Sandbox& b) { fs::resize_file(WriteNodeFile(b, fresh), 4096); }},
      {"bad check word",
       [&](const Sandbox& b) {
         std::fstream f(WriteNodeFile(b, fresh), std::ios::in | std::ios::out | std::ios::binary);
         f.seekp(16);
         f.put('x');
       }},
      {"writable by others (a tenant could have written it)",
       [&](const Sandbox& b) { fs::permissions(WriteNodeFile(b, fresh), fs::perms::all); }},
      {"owned by another user",
       [&](const Sandbox& b) {
         std::string p = WriteNodeFile(b, fresh);
         if (geteuid() == 0) {
           ASSERT_EQ(chown(p.c_str(), 65534, 65534), 0);
         } else {
           GTEST_SKIP() << "chown needs root";
         }
       }},
      {"a directory",
       [](const Sandbox& b) { fs::create_directories(b.dir() + "/fracgpu-node/" + kGpuUuid); }},
      {"a symlink to a valid file",
       [&](const Sandbox& b) {
         std::string p = WriteNodeFile(b, fresh);
         fs::rename(p, b.dir() + "/valid");
         fs::create_symlink(b.dir() + "/valid", p);
       }},
  };
  for (const auto& v : variants) {
    SCOPED_TRACE(v.name);
    Sandbox box;
    v.make(box);
    SmRun l = RunLow(box);
    ASSERT_EQ(l.rc, 0);
    ASSERT_EQ(l.per_second.size(), 12u);
    EXPECT_GT(l.per_second[5], 0.99e9);
  }
}

// Without the node directory, priority has no effect (the same run overlaps fully).
TEST(SmLimitPriority, NoNodeDirectoryNoPriority) {
  Sandbox box;
  auto high = SmEnv(box, "high", 100, 2), low = SmEnv(box, "low", 100, 2);
  high["CUDA_TASK_PRIORITY"] = "0";
  low["CUDA_TASK_PRIORITY"] = "1";
  auto runs =
      RunAll(box, {{high, {"init", "cost:1000000", "sleepto:3000", "smrun:54:1000:k:6000:1"}},
                   {low, {"init", "cost:1000000", "smrun:54:1000:k:12000:1"}}});
  EXPECT_GT(runs[1].per_second[4], 0.99e9);
}

// GPU_CORE_UTILIZATION_POLICY (issue 34 item 4), HAMi's semantics: `default` caps only while
// the GPU is contended, which the node agent publishes in the read-only node file
// (contended_until_ns: two or more containers launched there within 100 ms; the agent's side is
// PriorityTest.PublishesUntilWhenTwoContainersAreActiveOnAGpu). The test plays the agent.
// 5 ms kernels over all SMs, limit 30 %.
SmRun RunThirty(const Sandbox& box, const std::string& name, const std::string& policy,
                int participants = 1) {
  auto env = SmEnv(box, name, 30, participants);
  if (!policy.empty()) env["GPU_CORE_UTILIZATION_POLICY"] = policy;
  return RunAll(box, {{env, {"init", "cost:1000000", "smrun:108:5000:k:12000:1"}}})[0];
}

TEST(SmLimitPolicy, DefaultRunsUncappedAloneAndCapsWhileContended) {
  // Alone (the agent has seen no second container): uncapped, as HAMi's default.
  Sandbox alone;
  WriteNodeFile(alone, 0, 0);
  SmRun a = RunThirty(alone, "a", "");
  ASSERT_EQ(a.rc, 0);
  EXPECT_GT(Sum({a}).window, 99.0) << "a lone 30 % container is not capped under default";
  std::printf("figure: default, alone: %.2f %%\n", Sum({a}).window);
  // A second container launched until 6 s (contended_until = 6 s): capped at 30 % before,
  // uncapped again once the neighbour is gone.
  Sandbox until6;
  WriteNodeFile(until6, 0, 6'000'000'000ull);
  SmRun b = RunThirty(until6, "b", "");
  ASSERT_EQ(b.rc, 0);
  Util u = Sum({b});
  for (size_t s = 2; s < 6; ++s) EXPECT_NEAR(u.seconds[s], 30, 3.0) << "second " << s;
  for (size_t s = 7; s < 12; ++s) EXPECT_GT(u.seconds[s], 99.0) << "second " << s;
  std::printf(
      "figure: default, contended until 6 s: seconds 2-5 %.2f %.2f %.2f %.2f, 7-11 %.2f %.2f %.2f "
      "%.2f %.2f %%\n",
      u.seconds[2], u.seconds[3], u.seconds[4], u.seconds[5], u.seconds[7], u.seconds[8],
      u.seconds[9], u.seconds[10], u.seconds[11]);
  // Two containers of 30 % each on the GPU, contended all along: each capped.
  Sandbox two;
  WriteNodeFile(two, 0, 13'000'000'000ull);
  auto x = SmEnv(two, "x", 30, 2), y = SmEnv(two, "y", 30, 2);
  auto runs = RunAll(two, {{x, {"init", "cost:1000000", "smrun:108:5000:k:12000:1"}},
                           {y, {"init", "cost:1000000", "smrun:108:5000:k:12000:1"}}});
  ASSERT_EQ(runs[0].rc, 0);
  ASSERT_EQ(runs[1].rc, 0);
  ExpectNear(Sum({runs[0]}), 30, "container X (30 %, contended)");
  ExpectNear(Sum({runs[1]}), 30, "container Y (30 %, contended)");
  std::printf("figure: default, two containers: %.2f %% and %.2f %%\n", Sum({runs[0]}).window,
              Sum({runs[1]}).window);
}

TEST(SmLimitPolicy, ForceCapsAloneDisableNeverCapsAndUnknownContentionCaps) {
  Sandbox forced;
  WriteNodeFile(forced, 0, 0);  // alone
  SmRun f = RunThirty(forced, "f", "force");
  ASSERT_EQ(f.rc, 0);
  ExpectNear(Sum({f}), 30, "force, alone");
  Sandbox disabled;
  WriteNodeFile(disabled, 0, 13'000'000'000ull);  // contended
  SmRun d = RunThirty(disabled, "d", "disable");
  ASSERT_EQ(d.rc, 0);
  EXPECT_GT(Sum({d}).window, 99.0) << "disable never caps";
  // A node file without a valid contention word (an older agent) or no file at all: the GPU
  // counts as contended, the cap holds (fail closed).
  Sandbox old_agent;
  WriteNodeFile(old_agent, 0);
  SmRun o = RunThirty(old_agent, "o", "");
  ASSERT_EQ(o.rc, 0);
  ExpectNear(Sum({o}), 30, "default, no contention word");
  Sandbox no_file;
  std::filesystem::create_directories(no_file.dir() + "/fracgpu-node");
  SmRun n = RunThirty(no_file, "n", "");
  ASSERT_EQ(n.rc, 0);
  ExpectNear(Sum({n}), 30, "default, node directory without the GPU's file");
  std::printf("figure: force alone %.2f, disable contended %.2f, no word %.2f, no file %.2f %%\n",
              Sum({f}).window, Sum({d}).window, Sum({o}).window, Sum({n}).window);
}

// The simulation is deterministic: the same processes give the same schedule, to the ns.
TEST(SmLimitClock, Deterministic) {
  std::vector<std::vector<SmRun>> results;
  for (int i = 0; i < 2; ++i) {
    Sandbox box;
    auto env = SmEnv(box, "r", 50, 2);
    results.push_back(RunAll(box, {{env, {"init", "cost:1000000", "smrun:54:700:k:12000:1"}},
                                   {env, {"init", "cost:1000000", "smrun:54:90:k:12000:3"}}}));
  }
  for (size_t p = 0; p < 2; ++p) {
    EXPECT_EQ(results[0][p].launches, results[1][p].launches);
    EXPECT_EQ(results[0][p].per_second, results[1][p].per_second);
  }
}

}  // namespace
}  // namespace fracgpu::vgpu::testing
