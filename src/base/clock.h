#pragma once
// Time and cancellation seams for every long-running loop (docs/design/STYLE.md: time comes in
// through a small interface so tests can drive it). Real code uses RealClock; tests use a
// ManualClock that never blocks.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>

namespace fracgpu::base {

/// A one-shot stop signal shared by a long-running loop and whoever stops it. Stop() wakes
/// every waiter and runs every registered wake-up callback (used to interrupt a blocked watch).
/// Thread-safe.
class StopSignal {
 public:
  /// Sets the signal; idempotent.
  void Stop();
  bool stopped() const;
  /// Blocks up to `duration` or until Stop(); returns true when stopped.
  bool WaitFor(std::chrono::nanoseconds duration);
  /// Registers a callback run (once) by Stop(); runs it at once if already stopped.
  /// Returns an id for Unregister. The callback must not call Unregister.
  int64_t OnStop(std::function<void()> wake);
  /// Removes a callback. When Stop() is running callbacks at that moment, waits until they
  /// have returned, so after Unregister() no callback can touch what the caller frees next
  /// (Client::Watch's curl handles and stack flag).
  void Unregister(int64_t id);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;
  bool waking_ = false;  ///< Stop() is running the callbacks it took out of wakers_
  int64_t next_id_ = 0;
  std::map<int64_t, std::function<void()>> wakers_;
};

/// Wall time, monotonic time and interruptible sleep.
class Clock {
 public:
  virtual ~Clock() = default;
  /// Wall-clock time (annotations such as `hami.io/vgpu-time`, lock timestamps).
  virtual std::chrono::system_clock::time_point Now() = 0;
  /// Sleeps for `duration` unless `stop` is signalled first. Returns false when stopped.
  virtual bool Sleep(std::chrono::nanoseconds duration, StopSignal* stop) = 0;
};

/// The process clock. Thread-safe.
class RealClock : public Clock {
 public:
  std::chrono::system_clock::time_point Now() override;
  bool Sleep(std::chrono::nanoseconds duration, StopSignal* stop) override;
  /// A process-wide instance.
  static RealClock* Get();
};

/// CPU time the calling thread has used so far (POSIX CLOCK_THREAD_CPUTIME_ID: user + system,
/// nanoseconds); zero when the clock cannot be read. The difference of two calls on one thread is
/// the CPU that thread spent between them, which excludes time waiting for a CPU, a lock or I/O
/// (the wall-clock difference includes them). One clock_gettime, a system call on most kernels
/// (about a microsecond): fine per request, not per launch or allocation.
std::chrono::nanoseconds ThreadCpuTime();

/// Time the calling thread has spent runnable but waiting for a CPU so far, nanoseconds: the
/// second field ("time spent waiting on a runqueue") of Linux's /proc/thread-self/schedstat
/// (kernel Documentation/scheduler/sched-stats.rst; needs CONFIG_SCHED_INFO, on in the common
/// distribution kernels). The difference of two calls on one thread is the time it waited for
/// a CPU between them: the part of a latency that neither its own CPU (ThreadCpuTime) nor a
/// lock or I/O explains. It includes time throttled by a cgroup CPU quota, and not the
/// hypervisor's steal. Negative when the file cannot be read or the kernel keeps no such
/// account. One pread on a descriptor each thread opens once and keeps until it exits (a few
/// microseconds): fine per request, not per launch or allocation.
std::chrono::nanoseconds ThreadRunDelay();

/// A clock for tests: Now() is set by hand; Sleep() returns at once after advancing Now() by
/// the duration and recording it (so backoff sequences can be asserted). Thread-safe.
class ManualClock : public Clock {
 public:
  explicit ManualClock(std::chrono::system_clock::time_point start = {}) : now_(start) {}
  std::chrono::system_clock::time_point Now() override;
  bool Sleep(std::chrono::nanoseconds duration, StopSignal* stop) override;
  void Advance(std::chrono::nanoseconds duration);
  void Set(std::chrono::system_clock::time_point t);
  /// Every duration passed to Sleep(), in call order.
  std::vector<std::chrono::nanoseconds> sleeps() const;

 private:
  mutable std::mutex mu_;
  std::chrono::system_clock::time_point now_;
  std::vector<std::chrono::nanoseconds> sleeps_;
};

/// Exponential backoff with jitter (the shape client-go's wait.Backoff uses): the n-th delay
/// is min(cap, initial × factor^n) × (1 + jitter × U[0,1)). Not thread-safe.
class Backoff {
 public:
  struct Options {
    std::chrono::milliseconds initial{200};
    double factor = 2.0;
    double jitter = 0.5;  ///< fraction of the delay added at random
    std::chrono::milliseconds cap{30000};
  };
  /// Seeded from std::random_device at the first Next(): most callers make one per request
  /// and never retry, and reading random_device cost more than a request's own work on the
  /// scheduler's bind path (perf at 5,000 nodes, issue 37 item 1).
  explicit Backoff(Options options) : options_(options) {}
  Backoff(Options options, uint64_t seed) : options_(options), rng_(std::in_place, seed) {}
  /// The next delay; grows until Reset().
  std::chrono::nanoseconds Next();
  /// Back to the initial delay (after a success).
  void Reset() { attempt_ = 0; }
  const Options& options() const { return options_; }

 private:
  Options options_;
  int attempt_ = 0;
  std::optional<std::mt19937_64> rng_;  // made at the first Next() when no seed was given
};

}  // namespace fracgpu::base
