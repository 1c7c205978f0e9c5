#include "base/clock.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <vector>

namespace fracgpu::base {

// The callbacks run outside the lock (a callback may take other locks), but waking_ stays set
// until they have returned: without it, a Watch that ends on its own while Stop() is between
// taking its callback and running it would Unregister (a no-op), free its curl multi handle
// and return, and the callback would then write to a dead stack frame and call
// curl_multi_wakeup on a freed handle (whose wake-up descriptor may already belong to someone
// else).
void StopSignal::Stop() {
  std::map<int64_t, std::function<void()>> wakers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    waking_ = true;
    wakers.swap(wakers_);
  }
  cv_.notify_all();
  for (auto& [id, wake] : wakers) wake();
  {
    std::lock_guard<std::mutex> lock(mu_);
    waking_ = false;
  }
  cv_.notify_all();
}

bool StopSignal::stopped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopped_;
}

bool StopSignal::WaitFor(std::chrono::nanoseconds duration) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, duration, [this] { return stopped_; });
}

int64_t StopSignal::OnStop(std::function<void()> wake) {
  std::unique_lock<std::mutex> lock(mu_);
  if (stopped_) {
    lock.unlock();
    wake();
    return -1;
  }
  int64_t id = next_id_++;
  wakers_.emplace(id, std::move(wake));
  return id;
}

void StopSignal::Unregister(int64_t id) {
  std::unique_lock<std::mutex> lock(mu_);
  wakers_.erase(id);
  // Bounded by the callbacks themselves (a flag store and curl_multi_wakeup).
  cv_.wait(lock, [this] { return !waking_; });
}

std::chrono::nanoseconds ThreadCpuTime() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return std::chrono::nanoseconds(0);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

namespace {

// The calling thread's /proc/thread-self/schedstat, opened on first use and closed when the
// thread exits (the path names the thread that opens it, so the descriptor is per thread). An
// open that failed for want of descriptors is tried again on the next call; one that failed
// because the file is not there (no /proc, a kernel without it) is not.
class SchedstatFile {
 public:
  SchedstatFile() { Open(); }
  ~SchedstatFile() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
    absent_ = true;
  }
  SchedstatFile(const SchedstatFile&) = delete;
  SchedstatFile& operator=(const SchedstatFile&) = delete;
  int fd() {
    if (fd_ < 0 && !absent_) Open();
    return fd_;
  }

 private:
  void Open() {
    fd_ = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) absent_ = errno != EMFILE && errno != ENFILE && errno != ENOMEM;
  }
  int fd_ = -1;
  bool absent_ = false;
};

}  // namespace

std::chrono::nanoseconds ThreadRunDelay() {
  thread_local SchedstatFile file;
  const int fd = file.fd();
  if (fd < 0) return std::chrono::nanoseconds(-1);
  // "<on-cpu ns> <run-queue wait ns> <timeslices>\n": three decimal integers, < 64 bytes.
  char buf[96];
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return std::chrono::nanoseconds(-1);
  buf[n] = '\0';
  char* end = nullptr;
  const unsigned long long on_cpu = std::strtoull(buf, &end, 10);
  // A running thread has run: "0 0 0" is a kernel that keeps no such accounting (schedstats
  // and delay accounting off, before Linux 5.14).
  if (end == buf || *end != ' ' || on_cpu == 0) return std::chrono::nanoseconds(-1);
  const char* second = end + 1;
  const unsigned long long wait = std::strtoull(second, &end, 10);
  if (end == second || (*end != ' ' && *end != '\n')) return std::chrono::nanoseconds(-1);
  return std::chrono::nanoseconds(static_cast<int64_t>(wait));
}

std::chrono::system_clock::time_point RealClock::Now() { return std::chrono::system_clock::now(); }

bool RealClock::Sleep(std::chrono::nanoseconds duration, StopSignal* stop) {
  if (stop == nullptr) {
    StopSignal never;
    never.WaitFor(duration);
    return true;
  }
  return !stop->WaitFor(duration);
}

RealClock* RealClock::Get() {
  static RealClock clock;
  return &clock;
}

std::chrono::system_clock::time_point ManualClock::Now() {
  std::lock_guard<std::mutex> lock(mu_);
  return now_;
}

bool ManualClock::Sleep(std::chrono::nanoseconds duration, StopSignal* stop) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    sleeps_.push_back(duration);
    now_ += std::chrono::duration_cast<std::chrono::system_clock::duration>(duration);
  }
  return stop == nullptr || !stop->stopped();
}

void ManualClock::Advance(std::chrono::nanoseconds duration) {
  std::lock_guard<std::mutex> lock(mu_);
  now_ += std::chrono::duration_cast<std::chrono::system_clock::duration>(duration);
}

void ManualClock::Set(std::chrono::system_clock::time_point t) {
  std::lock_guard<std::mutex> lock(mu_);
  now_ = t;
}

std::vector<std::chrono::nanoseconds> ManualClock::sleeps() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sleeps_;
}

std::chrono::nanoseconds Backoff::Next() {
  double base =
      std::chrono::duration<double>(options_.initial).count() * std::pow(options_.factor, attempt_);
  double cap = std::chrono::duration<double>(options_.cap).count();
  base = std::min(base, cap);
  if (base < cap) ++attempt_;
  if (!rng_) rng_.emplace(std::random_device{}());
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  double delay = base * (1.0 + options_.jitter * unit(*rng_));
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(delay));
}

}  // namespace fracgpu::base
