#include "base/clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace fracgpu::base {
namespace {

TEST(BackoffTest, GrowsWithJitterUpToCap) {
  Backoff::Options o{std::chrono::milliseconds(100), 2.0, 0.5, std::chrono::milliseconds(1000)};
  Backoff b(o, 42);
  double bases[] = {0.1, 0.2, 0.4, 0.8, 1.0, 1.0};
  for (double base : bases) {
    double d = std::chrono::duration<double>(b.Next()).count();
    EXPECT_GE(d, base);
    EXPECT_LT(d, base * 1.5 + 1e-9);
  }
  b.Reset();
  double d = std::chrono::duration<double>(b.Next()).count();
  EXPECT_GE(d, 0.1);
  EXPECT_LT(d, 0.15);
}

// Without jitter the delays are exactly initial × factor^n, then the cap (the device plugin's
// API-write retries: 200 ms doubling, uncapped).
TEST(BackoffTest, WithoutJitterDoublesExactly) {
  using std::chrono::milliseconds;
  using std::chrono::nanoseconds;
  Backoff uncapped({milliseconds(200), 2.0, 0.0, milliseconds::max()}, 0);
  std::vector<nanoseconds> got;
  for (int i = 0; i < 5; ++i) got.push_back(uncapped.Next());
  std::vector<nanoseconds> want = {milliseconds(200), milliseconds(400), milliseconds(800),
                                   milliseconds(1600), milliseconds(3200)};
  EXPECT_EQ(got, want);
  Backoff capped({milliseconds(200), 2.0, 0.0, milliseconds(1000)}, 0);
  got.clear();
  for (int i = 0; i < 5; ++i) got.push_back(capped.Next());
  want = {milliseconds(200), milliseconds(400), milliseconds(800), milliseconds(1000),
          milliseconds(1000)};
  EXPECT_EQ(got, want);
  capped.Reset();
  EXPECT_EQ(capped.Next(), milliseconds(200));
}

TEST(BackoffTest, SameSeedSameSequence) {
  Backoff a({}, 9), b({}, 9);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(a.Next(), b.Next());
}

TEST(StopSignalTest, WakesWaitersAndRunsCallbacks) {
  StopSignal s;
  int woken = 0;
  s.OnStop([&] { ++woken; });
  int64_t id = s.OnStop([&] { woken += 10; });
  s.Unregister(id);
  EXPECT_FALSE(s.WaitFor(std::chrono::milliseconds(1)));
  s.Stop();
  s.Stop();
  EXPECT_EQ(woken, 1);
  EXPECT_TRUE(s.WaitFor(std::chrono::hours(1)));
  s.OnStop([&] { woken += 100; });  // already stopped: runs at once
  EXPECT_EQ(woken, 101);
}

// The thread's CPU clock counts what this thread runs: not its sleep, not another thread's work.
TEST(ThreadCpuTimeTest, CountsThisThreadsWorkOnly) {
  using namespace std::chrono;
  const nanoseconds before_sleep = ThreadCpuTime();
  std::this_thread::sleep_for(milliseconds(60));
  EXPECT_LT(ThreadCpuTime() - before_sleep, milliseconds(30));

  // Spin for 40 ms of wall time: the CPU counted is positive and never above the wall time.
  const nanoseconds cpu0 = ThreadCpuTime();
  const auto wall0 = steady_clock::now();
  volatile uint64_t sink = 0;
  while (steady_clock::now() - wall0 < milliseconds(40)) sink = sink + 1;
  const nanoseconds spun = ThreadCpuTime() - cpu0;
  EXPECT_GT(spun, nanoseconds(0));
  // 1 ms of slack: CLOCK_MONOTONIC may be slewed by NTP, the CPU clock is not.
  EXPECT_LE(spun, duration_cast<nanoseconds>(steady_clock::now() - wall0) + milliseconds(1));

  // Another thread spins; this one waits in join and is charged (almost) nothing for it.
  nanoseconds other{0};
  const nanoseconds mine0 = ThreadCpuTime();
  std::thread t([&] {
    const nanoseconds c0 = ThreadCpuTime();
    const auto w0 = steady_clock::now();
    volatile uint64_t s = 0;
    while (steady_clock::now() - w0 < milliseconds(60)) s = s + 1;
    other = ThreadCpuTime() - c0;
  });
  t.join();
  EXPECT_GT(other, nanoseconds(0));
  EXPECT_LT(ThreadCpuTime() - mine0, other);
}

TEST(ManualClockTest, SleepAdvancesAndRecords) {
  ManualClock c;
  auto t0 = c.Now();
  EXPECT_TRUE(c.Sleep(std::chrono::seconds(3), nullptr));
  EXPECT_EQ(c.Now() - t0, std::chrono::seconds(3));
  ASSERT_EQ(c.sleeps().size(), 1u);
}

}  // namespace
}  // namespace fracgpu::base
