// The enforcement core (src/enforce/enforce.h): a table of cases, episodes, and the
// false-positive run (compliant processes never produce a finding).
#include "enforce/enforce.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <stdexcept>

namespace fracgpu::enforce {
namespace {

constexpr uint64_t kMiB = 1024ull * 1024ull;
const std::string kGpu = "GPU-11111111-1111-1111-1111-111111111111";
const std::string kGpu2 = "GPU-22222222-2222-2222-2222-222222222222";
const ContainerId kA{"aaaaaaaa-0000-0000-0000-000000000001", "main"};
const ContainerId kB{"bbbbbbbb-0000-0000-0000-000000000002", "main"};

// A small world: containers with limits on kGpu, processes with driver usage and claims.
struct World {
  Observation obs;
  World() {
    obs.gpus.push_back(GpuSample{kGpu, true, true, {}, std::nullopt});
    for (const ContainerId& id : {kA, kB}) {
      ContainerState c;
      c.id = id;
      c.memory_limit_bytes[kGpu] = 1000 * kMiB;
      c.sm_limit_percent[kGpu] = 30;
      obs.containers.push_back(c);
    }
  }
  ContainerState& C(const ContainerId& id) {
    for (auto& c : obs.containers)
      if (c.id == id) return c;
    throw std::runtime_error("no container");
  }
  // A process of `id` (or of no container when id is null) holding `driver` bytes, of which
  // its region claims `claim`.
  void Proc(uint32_t pid, const ContainerId* id, uint64_t driver, uint64_t claim,
            const std::string& gpu = kGpu) {
    for (auto& g : obs.gpus)
      if (g.uuid == gpu) g.processes.push_back({pid, driver});
    if (id) {
      obs.owners[pid] = ProcessOwner{*id, 1000 + pid};
      C(*id).claims[gpu][pid] = claim;
    }
  }
  void Clear() {
    for (auto& g : obs.gpus) g.processes.clear();
    for (auto& c : obs.containers) c.claims.clear();
    obs.owners.clear();
  }
};

std::vector<Finding> Confirmed(const std::vector<Finding>& fs) {
  std::vector<Finding> out;
  for (const auto& f : fs)
    if (f.confirmed) out.push_back(f);
  return out;
}

TEST(Enforcer, CompliantContainersAtExactlyTheirLimitGiveNothing) {
  World w;
  // Context memory (300 MiB each, as on a real card) is charged by libvgpu.so: claims = driver.
  w.Proc(10, &kA, 300 * kMiB, 300 * kMiB);
  w.Proc(11, &kA, 700 * kMiB, 700 * kMiB);  // Σ exactly 1000 MiB
  w.Proc(20, &kB, 1000 * kMiB, 1000 * kMiB);
  Enforcer e;
  for (int poll = 0; poll < 5; ++poll) {
    w.obs.now_ns += 500'000'000;
    EXPECT_TRUE(e.Evaluate(w.obs).empty());
  }
}

TEST(Enforcer, BypassOverTheLimitIsKilledOnTheSecondPollAndReportedOnce) {
  World w;
  w.Proc(10, &kA, 300 * kMiB, 300 * kMiB);  // compliant neighbour in the same container
  w.Proc(11, &kA, 800 * kMiB, 300 * kMiB);  // bypass: 500 MiB the region never saw
  w.Proc(20, &kB, 900 * kMiB, 900 * kMiB);  // other container, fine
  Enforcer e;
  auto first = e.Evaluate(w.obs);
  // Poll 1: seen, not confirmed, nothing to do yet.
  ASSERT_EQ(first.size(), 2u);
  for (const auto& f : first) {
    EXPECT_FALSE(f.confirmed);
    EXPECT_FALSE(f.new_episode);
    EXPECT_EQ(f.action, Action::kNone);
    EXPECT_EQ(f.polls, 1);
  }
  w.obs.now_ns += 500'000'000;
  auto second = e.Evaluate(w.obs);
  ASSERT_EQ(second.size(), 2u);
  const Finding& mem = second[0];
  EXPECT_EQ(mem.reason, Reason::kMemoryOverLimit);
  EXPECT_TRUE(mem.confirmed);
  EXPECT_TRUE(mem.new_episode);
  EXPECT_EQ(mem.action, Action::kKill);
  EXPECT_EQ(mem.pid, 11u);
  EXPECT_EQ(mem.start_time, 1011u);
  EXPECT_EQ(mem.used_bytes, 1100 * kMiB);
  EXPECT_EQ(mem.limit_bytes, 1000 * kMiB);
  EXPECT_EQ(mem.process_bytes, 800 * kMiB);
  EXPECT_EQ(*mem.container, kA);
  EXPECT_EQ(mem.Describe(), "memory_over_limit on " + kGpu + ": pod " + kA.pod_uid +
                                " container main uses 1100.0 MiB of 1000.0 MiB (+100.0 MiB), "
                                "pushed over by pid 11 (800.0 MiB); "
                                "action kill");
  const Finding& mis = second[1];
  EXPECT_EQ(mis.reason, Reason::kRegionMismatch);
  EXPECT_EQ(mis.pid, 11u);
  EXPECT_EQ(mis.claimed_bytes, 300 * kMiB);
  EXPECT_EQ(mis.action, Action::kReport);
  EXPECT_TRUE(mis.new_episode);
  // Poll 3, still over (the kill has not landed): kill again, but no second report.
  w.obs.now_ns += 500'000'000;
  auto third = e.Evaluate(w.obs);
  ASSERT_EQ(third.size(), 2u);
  EXPECT_EQ(third[0].action, Action::kKill);
  EXPECT_FALSE(third[0].new_episode);
  EXPECT_FALSE(third[1].new_episode);
  EXPECT_EQ(third[0].polls, 3);
}

TEST(Enforcer, EpisodeEndsWhenBackUnderAndANewOneIsReportedAgain) {
  World w;
  ContainerState& a = w.C(kA);
  a.memory_action = Action::kReport;          // pod opt-in: report only
  w.Proc(10, &kA, 1200 * kMiB, 1200 * kMiB);  // claims agree (tampered limit? no: over anyway)
  Enforcer e;
  int reports = 0;
  for (int poll = 0; poll < 6; ++poll) {
    for (const auto& f : e.Evaluate(w.obs)) {
      EXPECT_NE(f.action, Action::kKill);
      reports += f.new_episode;
    }
  }
  EXPECT_EQ(reports, 1);  // once per episode, not every poll
  w.Clear();
  w.Proc(10, &kA, 900 * kMiB, 900 * kMiB);
  EXPECT_TRUE(e.Evaluate(w.obs).empty());
  w.Clear();
  w.Proc(10, &kA, 1200 * kMiB, 1200 * kMiB);
  e.Evaluate(w.obs);
  auto again = e.Evaluate(w.obs);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_TRUE(again[0].new_episode);
  EXPECT_EQ(again[0].action, Action::kReport);
}

TEST(Enforcer, CulpritIsTheProcessAboveItsClaimThenTheOneThatGrew) {
  World w;
  w.Proc(10, &kA, 900 * kMiB, 900 * kMiB);  // biggest, but compliant
  w.Proc(11, &kA, 200 * kMiB, 150 * kMiB);  // 50 MiB the region never saw
  Enforcer e;
  e.Evaluate(w.obs);
  auto f = Confirmed(e.Evaluate(w.obs));
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].reason, Reason::kMemoryOverLimit);
  EXPECT_EQ(f[0].pid, 11u);

  // Claims all agree (a tenant that raised its own claims): the process that grew.
  World v;
  v.Proc(10, &kA, 900 * kMiB, 900 * kMiB);
  v.Proc(11, &kA, 50 * kMiB, 50 * kMiB);
  Enforcer e2;
  e2.Evaluate(v.obs);
  v.Clear();
  v.Proc(10, &kA, 900 * kMiB, 900 * kMiB);
  v.Proc(11, &kA, 250 * kMiB, 250 * kMiB);
  auto g = Confirmed(e2.Evaluate(v.obs));
  ASSERT_EQ(g.size(), 0u);  // first poll over the limit
  g = Confirmed(e2.Evaluate(v.obs));
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].pid, 11u);
}

// A process in no fracgpu container is killed only when the caller placed it in a pod
// container fracgpu gave no GPU (Observation::foreign_pod_processes) and the policy says kill;
// one the caller could not place (the host's) is reported whatever the policy (issue 32 item 6).
TEST(Enforcer, UnmanagedIsKilledOnlyWhenInAForeignPodContainer) {
  for (Action policy_action : {Action::kReport, Action::kKill}) {
    SCOPED_TRACE(ActionName(policy_action));
    World w;
    w.Proc(40, nullptr, 300 * kMiB, 0);  // NVIDIA_VISIBLE_DEVICES=all in a pod with no GPU
    w.Proc(41, nullptr, 300 * kMiB, 0);  // a host process
    w.obs.foreign_pod_processes[40] = 4242;
    Policy p;
    p.unmanaged = policy_action;
    Enforcer e(p);
    w.obs.now_ns = 1;
    for (const auto& f : e.Evaluate(w.obs)) EXPECT_NE(f.action, Action::kKill);  // unconfirmed
    w.obs.now_ns = 2;
    auto found = Confirmed(e.Evaluate(w.obs));
    ASSERT_EQ(found.size(), 2u);
    for (const auto& f : found) {
      EXPECT_EQ(f.reason, Reason::kUnmanagedProcess);
      const bool kill = policy_action == Action::kKill && f.pid == 40;
      EXPECT_EQ(f.action, kill ? Action::kKill : Action::kReport) << f.Describe();
      if (kill) {
        EXPECT_EQ(f.start_time, 4242u);  // the kill is PID-reuse checked
      }
    }
  }
}

TEST(Enforcer, TableOfReportOnlyAndIgnoredCases) {
  struct Case {
    const char* name;
    std::function<void(World&)> setup;
    Policy policy;
    std::vector<Reason> expect;  // confirmed reasons after two polls
  };
  Policy kill_everything;
  kill_everything.unmanaged = Action::kKill;
  kill_everything.region_mismatch = Action::kKill;
  const std::vector<Case> cases = {
      {"zeroed counters under the limit: mismatch, reported",
       [](World& w) { w.Proc(10, &kA, 500 * kMiB, 0); },
       Policy{},
       {Reason::kRegionMismatch}},
      {"zeroed region (invalid layout): mismatch with the region's error",
       [](World& w) {
         w.Proc(10, &kA, 500 * kMiB, 0);
         w.C(kA).region_ok = false;
         w.C(kA).region_error = "bad magic 0x0";
       },
       Policy{},
       {Reason::kRegionMismatch}},
      {"process in no fracgpu container on a managed GPU: reported",
       [](World& w) { w.Proc(99, nullptr, 4000 * kMiB, 0); },
       Policy{},
       {Reason::kUnmanagedProcess}},
      {"unmanaged GPU: never looked at, even far over",
       [](World& w) {
         w.obs.gpus.push_back(GpuSample{kGpu2, false, true, {}, std::nullopt});
         w.C(kA).memory_limit_bytes[kGpu2] = 100 * kMiB;
         w.Proc(10, &kA, 5000 * kMiB, 0, kGpu2);
         w.Proc(99, nullptr, 5000 * kMiB, 0, kGpu2);
       },
       kill_everything,
       {}},
      {"limits file unreadable: reported only",
       [](World& w) {
         w.C(kA).limits_ok = false;
         w.C(kA).limits_error = "permission denied";
         w.Proc(10, &kA, 5000 * kMiB, 0);
       },
       kill_everything,
       {Reason::kLimitsUnreadable}},
      {"unlimited container (limit 0): no memory finding",
       [](World& w) {
         w.C(kA).memory_limit_bytes[kGpu] = 0;
         w.Proc(10, &kA, 5000 * kMiB, 5000 * kMiB);
       },
       Policy{},
       {}},
      {"process that exited mid-poll: ignored",
       [](World& w) {
         w.Proc(99, nullptr, 4000 * kMiB, 0);
         w.obs.exited.insert(99);
       },
       Policy{},
       {}},
      {"claim above the driver (libvgpu charges first): fine",
       [](World& w) { w.Proc(10, &kA, 100 * kMiB, 400 * kMiB); },
       Policy{},
       {}},
      {"memory action none: nothing",
       [](World& w) { w.Proc(10, &kA, 2000 * kMiB, 2000 * kMiB); },
       Policy{.memory = Action::kNone},
       {}},
      {"slack absorbs a 1 MiB overage",
       [](World& w) { w.Proc(10, &kA, 1001 * kMiB, 1001 * kMiB); },
       Policy{.memory_slack_bytes = 2 * kMiB},
       {}},
      {"one byte over without slack",
       [](World& w) { w.Proc(10, &kA, 1000 * kMiB + 1, 1000 * kMiB + 1); },
       Policy{},
       {Reason::kMemoryOverLimit}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    World w;
    c.setup(w);
    Enforcer e(c.policy);
    e.Evaluate(w.obs);
    auto got = Confirmed(e.Evaluate(w.obs));
    std::vector<Reason> reasons;
    for (const auto& f : got) {
      reasons.push_back(f.reason);
      // Kills only for memory / mismatch of a container with readable limits on a managed GPU.
      if (f.action == Action::kKill) {
        EXPECT_TRUE(f.reason == Reason::kMemoryOverLimit || f.reason == Reason::kRegionMismatch);
        ASSERT_TRUE(f.container.has_value());
        EXPECT_TRUE(w.C(*f.container).limits_ok);
        EXPECT_NE(f.gpu_uuid, kGpu2);
      }
    }
    EXPECT_EQ(reasons, c.expect);
    if (!got.empty() && got[0].reason == Reason::kRegionMismatch && !w.C(kA).region_ok) {
      EXPECT_NE(got[0].Describe().find("bad magic 0x0"), std::string::npos) << got[0].Describe();
    }
    if (!got.empty() && got[0].reason == Reason::kUnmanagedProcess) {
      EXPECT_EQ(got[0].action, Action::kReport);
    }
    if (!got.empty() && got[0].reason == Reason::kLimitsUnreadable) {
      EXPECT_EQ(got[0].action, Action::kReport);
    }
  }
}

TEST(Enforcer, NvmlFailureOnAGpuNeitherEndsNorAdvancesItsEpisodes) {
  World w;
  w.Proc(11, &kA, 1100 * kMiB, 0);
  Enforcer e;
  auto p1 = e.Evaluate(w.obs);
  ASSERT_FALSE(p1.empty());
  EXPECT_EQ(p1[0].polls, 1);
  Observation failed = w.obs;
  failed.gpus[0].processes_ok = false;
  failed.gpus[0].processes.clear();
  EXPECT_TRUE(e.Evaluate(failed).empty());
  auto p3 = e.Evaluate(w.obs);
  ASSERT_FALSE(p3.empty());
  EXPECT_EQ(p3[0].polls, 2);
  EXPECT_TRUE(p3[0].new_episode);
}

TEST(Enforcer, SmAboveTheLimitOnlyAfterTheWholeWindow) {
  World w;
  w.Proc(10, &kA, 100 * kMiB, 100 * kMiB);
  w.Proc(11, &kA, 100 * kMiB, 100 * kMiB);
  w.obs.gpus[0].sm_utilization =
      std::map<uint32_t, double>{{10, 0.25}, {11, 0.25}};  // Σ 50% > 30% + 5%
  Policy p;
  p.sm_window_ns = 2'000'000'000;
  Enforcer e(p);
  for (int i = 0; i < 4; ++i) {  // t = 0, 0.5, 1.0, 1.5 s
    auto fs = e.Evaluate(w.obs);
    ASSERT_EQ(fs.size(), 1u);
    EXPECT_FALSE(fs[0].confirmed);
    w.obs.now_ns += 500'000'000;
  }
  auto fs = e.Evaluate(w.obs);  // t = 2 s
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_TRUE(fs[0].confirmed);
  EXPECT_TRUE(fs[0].new_episode);
  EXPECT_EQ(fs[0].action, Action::kReport);
  EXPECT_DOUBLE_EQ(fs[0].sm_ratio, 0.5);
  // Within the slack: the episode ends.
  w.obs.gpus[0].sm_utilization = std::map<uint32_t, double>{{10, 0.2}, {11, 0.14}};
  EXPECT_TRUE(e.Evaluate(w.obs).empty());
}

// The false-positive run: 4 compliant processes (2 containers × 2) each doing 10,000 random
// operations the way libvgpu.so lets them (charge the region first, then the driver
// allocates; the driver frees first, then the region is uncharged; contexts charged like
// data), up to exactly the container's limit. The enforcer is asked after every half step
// (the states a poll can catch between NVML and the region) and must never find anything.
TEST(Enforcer, FalsePositiveRunCompliantProcessesNeverViolate) {
  struct P {
    uint32_t pid;
    ContainerId id;
    uint64_t driver = 0, claim = 0;
    std::vector<uint64_t> allocs;
  };
  const uint64_t kLimit = 1000 * kMiB;
  const uint64_t kContext = 300 * kMiB;  // a real card's context, charged by libvgpu.so
  const uint64_t kPage = 2 * kMiB;       // allocations are whole pages on the driver
  std::vector<P> ps = {
      {10, kA, 0, 0, {}}, {11, kA, 0, 0, {}}, {20, kB, 0, 0, {}}, {21, kB, 0, 0, {}}};
  std::mt19937_64 rng(20261201);
  Enforcer e;
  Observation obs;
  obs.gpus.push_back(GpuSample{kGpu, true, true, {}, std::nullopt});
  for (const ContainerId& id : {kA, kB}) {
    ContainerState c;
    c.id = id;
    c.memory_limit_bytes[kGpu] = kLimit;
    obs.containers.push_back(c);
  }
  for (auto& p : ps) obs.owners[p.pid] = ProcessOwner{p.id, p.pid};
  auto container_claim = [&](const ContainerId& id) {
    uint64_t s = 0;
    for (const auto& p : ps)
      if (p.id == id) s += p.claim;
    return s;
  };
  long evaluations = 0, at_limit = 0, findings = 0;
  auto poll = [&] {
    obs.now_ns += 1;
    obs.gpus[0].processes.clear();
    for (auto& c : obs.containers) c.claims.clear();
    for (const auto& p : ps) {
      if (p.driver > 0) obs.gpus[0].processes.push_back({p.pid, p.driver});
      for (auto& c : obs.containers)
        if (c.id == p.id) c.claims[kGpu][p.pid] = p.claim;
    }
    for (const auto& f : e.Evaluate(obs)) {
      ++findings;
      ADD_FAILURE() << f.Describe();
    }
    ++evaluations;
  };
  for (int op = 0; op < 10000; ++op) {
    for (auto& p : ps) {
      uint64_t room = kLimit - container_claim(p.id);
      int kind = static_cast<int>(rng() % 10);
      uint64_t size = 0;
      bool context = p.driver == 0 && p.claim == 0;
      if (context)
        size = kContext;  // context creation
      else if (kind < 5)
        size = (1 + rng() % 128) * kPage;  // random allocation
      else if (kind < 7)
        size = room;  // exactly up to the limit
      if (size > 0) {
        if (size > room) continue;  // libvgpu.so returns OUT_OF_MEMORY
        p.claim += size;            // charged first
        poll();
        p.driver += size;  // then the driver allocates
        if (!context) p.allocs.push_back(size);
        if (container_claim(p.id) == kLimit) ++at_limit;
      } else if (!p.allocs.empty()) {
        size_t k = rng() % p.allocs.size();
        uint64_t s = p.allocs[k];
        p.allocs.erase(p.allocs.begin() + static_cast<long>(k));
        p.driver -= s;  // the driver frees first
        poll();
        p.claim -= s;  // then the region is uncharged
      }
      poll();
    }
  }
  EXPECT_EQ(findings, 0);
  EXPECT_GT(evaluations, 40000);
  EXPECT_GT(at_limit, 1000);  // the run really sat at exactly the limit, often
}

}  // namespace
}  // namespace fracgpu::enforce
