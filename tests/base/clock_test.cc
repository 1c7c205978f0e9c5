#include "base/clock.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
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

// The run-queue wait counts the time this thread was ready to run but another held its CPU.
// Both threads pinned to one CPU and spinning: this thread is off its CPU only while it waits
// for it, so its wait is its wall time less its CPU time (computed from the two other clocks),
// up to the hypervisor's steal and interrupt time, which the CPU clock leaves out: so the wait
// is bounded above by wall less CPU, and the rival's spinning makes it a large part of it.
TEST(ThreadRunDelayTest, CountsTheWaitForACpu) {
  using namespace std::chrono;
  if (ThreadRunDelay() < nanoseconds(0)) GTEST_SKIP() << "/proc/thread-self/schedstat unreadable";
  // Over a sleep, the wait never exceeds the time off the CPU.
  {
    const auto wall0 = steady_clock::now();
    const nanoseconds cpu0 = ThreadCpuTime();
    const nanoseconds d0 = ThreadRunDelay();
    std::this_thread::sleep_for(milliseconds(30));
    const nanoseconds d = ThreadRunDelay() - d0;
    const nanoseconds cpu = ThreadCpuTime() - cpu0;
    const auto wall = duration_cast<nanoseconds>(steady_clock::now() - wall0);
    EXPECT_GE(d, nanoseconds(0));
    EXPECT_LE(d, wall - cpu + milliseconds(1));
  }

  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  int last = CPU_SETSIZE - 1;  // the last allowed CPU: CPU 0 takes most interrupts
  while (last >= 0 && !CPU_ISSET(last, &allowed)) --last;
  ASSERT_GE(last, 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(last, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  std::atomic<bool> stop{false}, started{false};
  std::thread rival([&] {
    (void)sched_setaffinity(0, sizeof(one), &one);
    started = true;
    volatile uint64_t s = 0;
    while (!stop) s = s + 1;
  });
  while (!started) std::this_thread::yield();
  // Read nested as SchedulerService::Timed reads them: wall, CPU, wait ... wait, CPU, wall.
  const auto wall0 = steady_clock::now();
  const nanoseconds cpu0 = ThreadCpuTime();
  const nanoseconds delay0 = ThreadRunDelay();
  volatile uint64_t sink = 0;
  while (steady_clock::now() - wall0 < milliseconds(200)) sink = sink + 1;
  const nanoseconds delay = ThreadRunDelay() - delay0;
  const nanoseconds cpu = ThreadCpuTime() - cpu0;
  const auto wall = duration_cast<nanoseconds>(steady_clock::now() - wall0);
  stop = true;
  rival.join();
  ASSERT_EQ(sched_setaffinity(0, sizeof(allowed), &allowed), 0);
  const nanoseconds off_cpu = wall - cpu;
  // Sharing one CPU with a spinning rival, this thread waited for a good part of the 200 ms,
  // and never longer than it was off its CPU.
  EXPECT_GT(delay, milliseconds(40)) << "off the CPU " << off_cpu.count() << " ns";
  EXPECT_GT(delay, off_cpu / 4) << "off the CPU " << off_cpu.count() << " ns";
  EXPECT_LE(delay, off_cpu + milliseconds(1)) << "off the CPU " << off_cpu.count() << " ns";
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
