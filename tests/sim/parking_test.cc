// The notebook parking model (src/sim/parking.h): hand-computed figures on one GPU with one
// notebook and one borrower, the memory invariant replayed from the recorded events on random
// inputs, the input built from a run, and determinism per seed.
#include "sim/parking.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "core/seeded_rng.h"

namespace fracgpu::sim {
namespace {

// One 16 GiB GPU; a notebook of half of it (8 GiB) active [0, 600) and [7200, 7800) s; one
// borrower of the whole GPU arriving at 1200 s; 3 hours. Parking at 30 min idle, 4 GiB/s,
// 1 s fixed: a park or a restore of 8 GiB takes 1 + 8 / 4 = 3 s.
ParkInput OneNotebook(double borrower_duration_s) {
  ParkInput in;
  in.horizon_s = 10800;
  in.gpus.push_back({16384, 0, 500});
  ParkNotebook nb;
  nb.gpu = 0;
  nb.milli = 500;
  nb.active = {{0, 600}, {7200, 7800}};
  in.notebooks.push_back(nb);
  in.borrowers.push_back({1200, 1000, borrower_duration_s, ~0ULL});
  return in;
}

ParkSettings With() {
  ParkSettings s;
  s.park = true;
  s.idle_threshold_s = 1800;
  s.bandwidth_gib_s = 4;
  s.fixed_s = 1;
  s.keep_events = true;
  return s;
}

// Without parking the borrower (1000 milli) never fits beside the notebook (500 held): it
// waits 10800 − 1200 = 9600 s; work = the notebook's 1200 active s × 0.5 / 10800 s = 1/18.
TEST(Parking, WithoutParkingTheBorrowerWaitsTheWholeRun) {
  auto r = SimulateParking(OneNotebook(1800), ParkSettings{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->borrowers, 1);
  EXPECT_EQ(r->started, 0);
  EXPECT_DOUBLE_EQ(r->wait_mean_s, 9600);
  EXPECT_DOUBLE_EQ(r->wait_p95_s, 9600);
  EXPECT_DOUBLE_EQ(r->work_per_gpu, 1.0 / 18);
  EXPECT_DOUBLE_EQ(r->borrower_work_per_gpu, 0);
  EXPECT_EQ(r->parks, 0);
  EXPECT_EQ(r->wakes, 0);
  EXPECT_EQ(r->evictions, 0);
}

// With parking: idle from 600 s, parkable at 2400 s, parked for the borrower, which starts
// after the 3 s copy at 2403 s (waited 1203 s) and ends at 4203 s. The owner wakes at 7200 s
// still parked and waits 3 s for its restore. Work = (0.5 × (1200 − 3) + 1 × 1800) / 10800.
TEST(Parking, WithParkingTheBorrowerRunsOnTheIdleNotebooksMemory) {
  auto r = SimulateParking(OneNotebook(1800), With());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->started, 1);
  EXPECT_EQ(r->completed, 1);
  EXPECT_DOUBLE_EQ(r->wait_mean_s, 1203);
  EXPECT_EQ(r->parks, 1);
  EXPECT_EQ(r->wakes, 1);
  EXPECT_DOUBLE_EQ(r->wake_p50_s, 3);
  EXPECT_DOUBLE_EQ(r->wake_p99_s, 3);
  EXPECT_EQ(r->evictions, 0);
  EXPECT_DOUBLE_EQ(r->work_per_gpu, (0.5 * 1197 + 1800) / 10800);
  EXPECT_DOUBLE_EQ(r->borrower_work_per_gpu, 1800.0 / 10800);
  EXPECT_DOUBLE_EQ(r->max_parked_gib, 8);
  ASSERT_EQ(r->events.size(), 4u);
  EXPECT_EQ(r->events[0].kind, ParkEvent::kPark);
  EXPECT_DOUBLE_EQ(r->events[0].t, 2400);
  EXPECT_EQ(r->events[1].kind, ParkEvent::kStart);
  EXPECT_EQ(r->events[2].kind, ParkEvent::kFinish);
  EXPECT_DOUBLE_EQ(r->events[2].t, 4203);
  EXPECT_EQ(r->events[3].kind, ParkEvent::kWake);
  EXPECT_DOUBLE_EQ(r->events[3].t, 7200);
}

// A borrower of 6000 s is still running when the owner wakes at 7200 s: evicted, its
// 7200 − 2403 = 4797 s of whole-GPU work lost; queued again, it runs once the notebook is idle
// for 30 min again (7800 + 1800 = 9600 s, parked, start 9603 s) until the end: 1197 s of
// progress. Waited 1203 + (9603 − 7200) = 3606 s.
TEST(Parking, TheOwnersWakeEvictsTheBorrowerAndItsWorkIsLost) {
  auto r = SimulateParking(OneNotebook(6000), With());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->started, 1);
  EXPECT_EQ(r->completed, 0);
  EXPECT_EQ(r->evictions, 1);
  EXPECT_DOUBLE_EQ(r->lost_gpu_hours, 4797.0 / 3600);
  EXPECT_EQ(r->parks, 2);
  EXPECT_EQ(r->wakes, 1);
  EXPECT_DOUBLE_EQ(r->wait_mean_s, 3606);
  EXPECT_DOUBLE_EQ(r->work_per_gpu, (0.5 * 1197 + 1197) / 10800);
  // The eviction happens at the wake, before the owner computes.
  ASSERT_GE(r->events.size(), 4u);
  EXPECT_EQ(r->events[2].kind, ParkEvent::kWake);
  EXPECT_EQ(r->events[3].kind, ParkEvent::kEvict);
  EXPECT_DOUBLE_EQ(r->events[3].t, 7200);
}

// A random input: GPUs with a few notebooks and other residents, borrowers of random shares.
ParkInput RandomInput(uint64_t seed) {
  core::SeededRng rng(seed, 9);
  ParkInput in;
  in.horizon_s = 36000;
  for (int g = 0; g < 6; ++g) {
    ParkGpu gpu{static_cast<int64_t>(8192 + 8192 * rng.Uniform(3)), 0, 0};
    const int n = static_cast<int>(rng.Uniform(4));
    for (int k = 0; k < n; ++k) {
      const auto milli = static_cast<int32_t>(10 * (1 + rng.Uniform(25)));
      if (gpu.held_milli + milli > 1000) break;
      gpu.held_milli += milli;
      ParkNotebook nb;
      nb.gpu = g;
      nb.milli = milli;
      nb.idle_since = -static_cast<double>(rng.Uniform(3000));
      double t = static_cast<double>(rng.Uniform(2000));
      while (t < in.horizon_s) {
        const double end = std::min(in.horizon_s, t + 60 + static_cast<double>(rng.Uniform(1800)));
        nb.active.emplace_back(t, end);
        t = end + 60 + static_cast<double>(rng.Uniform(6000));
      }
      in.notebooks.push_back(nb);
    }
    gpu.held_milli += static_cast<int32_t>(10 * rng.Uniform((1000 - gpu.held_milli) / 10 + 1));
    in.gpus.push_back(gpu);
  }
  double t = 0;
  for (int i = 0; i < 60; ++i) {
    t += static_cast<double>(rng.Uniform(900));
    in.borrowers.push_back({t, static_cast<int32_t>(10 * (1 + rng.Uniform(100))),
                            60 + static_cast<double>(rng.Uniform(7200)), ~0ULL});
  }
  return in;
}

bool ActiveAt(const ParkNotebook& nb, double t) {
  for (const auto& [a, b] : nb.active)
    if (a <= t && t < b) return true;
  return false;
}

// Replays the recorded events and checks, independently of the model's own check: a notebook
// is parked only when idle for at least the threshold; it is never parked while active (every
// active period that starts while it is parked starts with its wake); on every GPU the memory
// of the residents not parked plus the borrowers' never exceeds the GPU.
TEST(Parking, NeverLendsAnActiveNotebooksMemory) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const ParkInput in = RandomInput(seed);
    ParkSettings s = With();
    s.idle_threshold_s = 600;
    auto r = SimulateParking(in, s);
    ASSERT_TRUE(r.ok()) << r.status().message();
    std::vector<int32_t> parked_milli(in.gpus.size()), borrowed(in.gpus.size());
    std::vector<bool> parked(in.notebooks.size());
    std::map<int32_t, int32_t> running_on;  // borrower → GPU
    size_t e = 0;
    // Walk time through every event time and every period start.
    std::vector<double> times;
    for (const auto& ev : r->events) times.push_back(ev.t);
    for (const auto& nb : in.notebooks)
      for (const auto& [a, b] : nb.active) times.push_back(a);
    std::sort(times.begin(), times.end());
    for (double t : times) {
      for (; e < r->events.size() && r->events[e].t <= t; ++e) {
        const ParkEvent& ev = r->events[e];
        if (ev.kind == ParkEvent::kPark) {
          const ParkNotebook& nb = in.notebooks[ev.who];
          ASSERT_FALSE(ActiveAt(nb, ev.t)) << "seed " << seed << " t " << ev.t;
          double idle_since = nb.idle_since;
          for (const auto& [a, b] : nb.active)
            if (b <= ev.t) idle_since = b;
          EXPECT_GE(ev.t - idle_since, s.idle_threshold_s) << "seed " << seed;
          ASSERT_FALSE(parked[ev.who]);
          parked[ev.who] = true;
          parked_milli[ev.gpu] += nb.milli;
        } else if (ev.kind == ParkEvent::kWake) {
          ASSERT_TRUE(parked[ev.who]);
          parked[ev.who] = false;
          parked_milli[ev.gpu] -= in.notebooks[ev.who].milli;
        } else if (ev.kind == ParkEvent::kStart) {
          borrowed[ev.gpu] += in.borrowers[ev.who].milli;
          running_on[ev.who] = ev.gpu;
        } else {
          ASSERT_EQ(running_on[ev.who], ev.gpu);
          borrowed[ev.gpu] -= in.borrowers[ev.who].milli;
          running_on.erase(ev.who);
        }
      }
      // Checked once every event of the instant is in: a wake precedes its evictions.
      for (size_t g = 0; g < in.gpus.size(); ++g) {
        EXPECT_LE(in.gpus[g].held_milli - parked_milli[g] + borrowed[g], 1000)
            << "seed " << seed << " GPU " << g << " t " << t;
      }
      for (size_t n = 0; n < in.notebooks.size(); ++n)
        EXPECT_FALSE(parked[n] && ActiveAt(in.notebooks[n], t))
            << "seed " << seed << " notebook " << n << " t " << t;
    }
    EXPECT_GT(r->parks, 0) << "seed " << seed;  // the inputs do exercise parking
  }
}

// Parking only adds: without it no notebook is ever parked, and its borrowers use only free
// memory; over the random inputs parking never lowers how many borrowers ran.
TEST(Parking, WithoutParkingNothingIsParked) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const ParkInput in = RandomInput(seed);
    ParkSettings off;
    off.keep_events = true;
    auto r = SimulateParking(in, off);
    ASSERT_TRUE(r.ok());
    for (const auto& ev : r->events) EXPECT_NE(ev.kind, ParkEvent::kPark);
    EXPECT_EQ(r->evictions, 0);
    EXPECT_EQ(r->wakes, 0);
  }
}

TEST(Parking, RefusesMalformedInput) {
  ParkInput in = OneNotebook(100);
  in.notebooks[0].active = {{600, 700}, {0, 100}};
  EXPECT_FALSE(SimulateParking(in, With()).ok());
  in = OneNotebook(100);
  in.borrowers[0].milli = 15;
  EXPECT_FALSE(SimulateParking(in, With()).ok());
  in = OneNotebook(100);
  in.notebooks[0].gpu = 3;
  EXPECT_FALSE(SimulateParking(in, With()).ok());
}

TraceNode Node(std::string name, int32_t gpus) {
  TraceNode n;
  n.name = std::move(name);
  n.cpu_milli = 64000;
  n.memory_mib = 262144;
  n.gpus = gpus;
  n.model = "T4";
  return n;
}

// Two T4s (capacity 2000 milli) and five half-GPU pods, no tuning: the first four arrivals
// (2000 milli) are the residents, the fifth (past 100 %) the borrower with its trace run time
// (deletion − scheduled = 600 s). With every fractional resident a notebook, both GPUs are
// held whole by notebooks and nothing is counted as other busy pods.
TEST(BuildParkInput, ResidentsUpToFullCapacityAndBorrowersAfter) {
  auto cluster = BuildCluster({Node("n0", 2)}, "n.csv");
  ASSERT_TRUE(cluster.ok());
  std::vector<TracePod> pods;
  for (int i = 0; i < 5; ++i) {
    TracePod p;
    p.name = "p" + std::to_string(i);
    p.cpu_milli = 1000;
    p.memory_mib = 1024;
    p.num_gpus = 1;
    p.gpu_milli = 500;
    p.scheduled_time = 100;
    p.deletion_time = 700;
    pods.push_back(p);
  }
  auto w = PrepareWorkload(pods, *cluster, 95, "p.csv");
  ASSERT_TRUE(w.ok()) << w.status().message();
  RunOptions options;
  options.tune = 0;
  options.keep_placements = true;
  auto run = RunExperiment(*cluster, *w, core::PlacementPolicy::kFgd, 7, options);
  ASSERT_TRUE(run.ok());
  ParkBuild build;
  build.notebook_share = 1;
  build.horizon_s = 3600;
  auto in = BuildParkInput(*cluster, *w, *run, build, 7);
  ASSERT_TRUE(in.ok()) << in.status().message();
  ASSERT_EQ(in->gpus.size(), 2u);
  EXPECT_EQ(in->gpus[0].held_milli, 1000);
  EXPECT_EQ(in->gpus[1].held_milli, 1000);
  EXPECT_EQ(in->gpus[0].devmem_mib, 16384);
  EXPECT_EQ(in->notebooks.size(), 4u);
  EXPECT_EQ(in->other_busy_milli, 0);
  ASSERT_EQ(in->borrowers.size(), 1u);
  EXPECT_EQ(in->borrowers[0].milli, 500);
  EXPECT_DOUBLE_EQ(in->borrowers[0].duration_s, 600);
  for (const auto& nb : in->notebooks) {
    for (const auto& [a, b] : nb.active) {
      EXPECT_GE(a, 0);
      EXPECT_LT(a, b);
      EXPECT_LE(b, 3600);
    }
  }
  build.notebook_share = 0;
  in = BuildParkInput(*cluster, *w, *run, build, 7);
  ASSERT_TRUE(in.ok());
  EXPECT_EQ(in->notebooks.size(), 0u);
  EXPECT_EQ(in->other_busy_milli, 2000);
}

// The model's long-run active fraction: 15 / (15 + 0.7 × 5 + 0.3 × 420) = 15 / 144.5.
TEST(NotebookModel, ActiveFraction) {
  EXPECT_DOUBLE_EQ(NotebookModel{}.ActiveFraction(), 15.0 / 144.5);
}

// Same seed, same input and results; the schedules drawn follow the model on average.
TEST(BuildParkInput, DeterministicPerSeed) {
  auto cluster = BuildCluster({Node("n0", 8), Node("n1", 8), Node("n2", 8)}, "n.csv");
  ASSERT_TRUE(cluster.ok());
  std::vector<TracePod> pods;
  for (int i = 0; i < 120; ++i) {
    TracePod p;
    p.name = "p" + std::to_string(100 + i);
    p.cpu_milli = 500;
    p.memory_mib = 1024;
    p.num_gpus = 1;
    p.gpu_milli = 100 * (1 + i % 5);
    pods.push_back(p);
  }
  auto w = PrepareWorkload(pods, *cluster, 95, "p.csv");
  ASSERT_TRUE(w.ok());
  RunOptions options;
  options.tune = 1.3;
  options.keep_placements = true;
  std::vector<ParkResult> results;
  for (int k = 0; k < 2; ++k) {
    auto run = RunExperiment(*cluster, *w, core::PlacementPolicy::kFgd, 11, options);
    ASSERT_TRUE(run.ok());
    ParkBuild build;
    build.notebook_share = 1;
    build.horizon_s = 7 * 24 * 3600;
    auto in = BuildParkInput(*cluster, *w, *run, build, 11);
    ASSERT_TRUE(in.ok());
    EXPECT_GT(in->borrowers.size(), 0u);
    auto r = SimulateParking(*in, With());
    ASSERT_TRUE(r.ok()) << r.status().message();
    results.push_back(*r);
  }
  EXPECT_EQ(results[0].work_per_gpu, results[1].work_per_gpu);
  EXPECT_EQ(results[0].wait_mean_s, results[1].wait_mean_s);
  EXPECT_EQ(results[0].parks, results[1].parks);
  EXPECT_EQ(results[0].events.size(), results[1].events.size());
  // Over a week, the drawn active share is near the model's 10.4 % (loose: few notebooks).
  EXPECT_NEAR(results[0].notebook_active_fraction, NotebookModel{}.ActiveFraction(), 0.05);
}

}  // namespace
}  // namespace fracgpu::sim
