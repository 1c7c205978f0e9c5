#pragma once
// The fake GPU's VIRTUAL device clock (test code), shared by the fake libcuda.so.1, the fake
// libnvidia-ml.so.1 and — through the exported fakeClock* functions — the test copy of
// libvgpu.so. Design (docs/sm-limiter.md):
//
// * Time is simulated. Every process using the fake driver is a participant with its own
//   virtual time t (ns). It only moves forward through the driver: a launch costs
//   kLaunchOverheadNs of host time, a synchronisation moves t to the stream's end, and a
//   virtual sleep (fakeClockSleepUntilNs, used by libvgpu's pacer) moves t to its target.
// * Conservative discrete-event simulation: a participant may act (launch, synchronise,
//   query NVML, read the time) only when its t is the smallest of all live participants (ties:
//   FAKE_CLOCK_RANK; then slot), so every run of the same programs produces the same
//   schedule, whatever the OS does.
//   FAKE_CLOCK_PARTICIPANTS=N makes everyone wait until N processes have joined.
// * A kernel of grid G and block B with per-thread cost c (ps, fakeCudaSetKernelCostPs)
//   occupies min(G, SMs) SMs for ceil(G / SMs) × B × c / 1000 ns. It starts when its stream's
//   previous kernel ended (streams serialise) and enough SMs are free; kernels of different
//   processes run concurrently up to the device's SM count.
// * Busy time (time with at least one of the process's kernels running, NVML's definition of
//   utilisation) is kept per process in 10 ms buckets over the first 60 s, for NVML samples
//   and for tests.
//
// With FAKE_GPU_STATE_DIR set, the state lives in <dir>/clock (mmap'd, shared); otherwise in
// private memory (one participant).
//
// FAKE_CLOCK_REALTIME=1 ties the clock to the wall: t is CLOCK_REALTIME ns since the first
// participant joined (ClockState::epoch_ns), read at every turn (t never runs behind the
// wall), a launch costs the host time it really takes (no kLaunchOverheadNs), a
// synchronisation really sleeps until the stream's end, and NVML timestamps are CLOCK_REALTIME
// microseconds as the real NVML's are. This is for a program that paces itself with real
// sleeps and the real clock — the shipped libvgpu.so, or another interposer such as
// HAMi-core's (bench/beside_hami.sh) — where the virtual clock, which only moves through the
// driver, would never see the sleeps. Not deterministic; tests use the virtual clock.
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace fracgpu::fakes {

inline constexpr int kClockMaxParticipants = 32;
inline constexpr int kClockMaxInflight = 256;
inline constexpr uint64_t kBucketNs = 10'000'000;    ///< 10 ms
inline constexpr int kClockBuckets = 6000;           ///< 60 s
inline constexpr uint64_t kLaunchOverheadNs = 2000;  ///< host time one launch call takes

struct ClockParticipant {
  std::atomic<int32_t> pid;      ///< 0 = free
  std::atomic<uint32_t> active;  ///< 1 while the process lives
  std::atomic<uint64_t> t;       ///< virtual ns
  std::atomic<uint32_t> rank;    ///< tie-break at equal t (FAKE_CLOCK_RANK, else 1000 + slot)
  uint64_t busy_end;             ///< end of the process's last busy interval (merge overlap)
  uint64_t busy[kClockBuckets];  ///< busy ns per 10 ms bucket
};

struct ClockKernel {
  uint64_t start, end;
  uint32_t sms;
  int32_t device;
};

struct ClockState {
  std::atomic<uint32_t> spin;  ///< 0 free, else holder pid (short critical sections only)
  std::atomic<uint32_t> joined;
  std::atomic<uint32_t> gen;      ///< bumped whenever a participant's time moves (futex word)
  std::atomic<uint32_t> waiters;  ///< participants sleeping on `gen`
  ClockParticipant parts[kClockMaxParticipants];
  ClockKernel inflight[kClockMaxInflight];
  std::atomic<uint64_t> epoch_ns;  ///< FAKE_CLOCK_REALTIME: CLOCK_REALTIME ns at t = 0
};

/// This library's view of the clock: the mapping and this process's slot.
struct ClockView {
  ClockState* state = nullptr;
  int slot = -1;
  int expected = 0;       ///< FAKE_CLOCK_PARTICIPANTS; 0 = no turn-taking (plain tests)
  bool realtime = false;  ///< FAKE_CLOCK_REALTIME=1
};

inline ClockView& Clock() {
  static ClockView* v = [] {
    auto* view = new ClockView();
    const char* dir = std::getenv("FAKE_GPU_STATE_DIR");
    void* mem = MAP_FAILED;
    if (dir) {
      std::string path = std::string(dir) + "/clock";
      int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0600);
      if (fd >= 0) {
        // Every process truncates to the same size: contents are kept, a new file reads as 0.
        if (::ftruncate(fd, sizeof(ClockState)) == 0)
          mem = ::mmap(nullptr, sizeof(ClockState), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        ::close(fd);
      }
    }
    if (mem == MAP_FAILED) {
      mem = ::mmap(nullptr, sizeof(ClockState), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    }
    view->state = static_cast<ClockState*>(mem);
    if (const char* n = std::getenv("FAKE_CLOCK_PARTICIPANTS")) view->expected = std::atoi(n);
    const char* rt = std::getenv("FAKE_CLOCK_REALTIME");
    view->realtime = rt && std::strcmp(rt, "1") == 0;
    if (view->realtime) view->expected = 0;  // the wall orders events: no turn-taking
    return view;
  }();
  return *v;
}

/// getpid(), cached (glibc no longer caches it; the launch path calls this often).
inline int CachedPid() {
  static std::atomic<int> pid{0};
  static bool hooked = [] { return pthread_atfork(nullptr, nullptr, [] { pid.store(0); }) == 0; }();
  (void)hooked;
  int p = pid.load(std::memory_order_relaxed);
  if (p == 0) {
    p = ::getpid();
    pid.store(p, std::memory_order_relaxed);
  }
  return p;
}

inline void ClockLock(ClockState* s) {
  uint32_t me = static_cast<uint32_t>(CachedPid());
  for (;;) {
    uint32_t cur = 0;
    if (s->spin.compare_exchange_weak(cur, me, std::memory_order_acquire)) return;
    if (cur != 0 && ::kill(static_cast<pid_t>(cur), 0) != 0) {  // dead holder
      s->spin.compare_exchange_strong(cur, 0);
      continue;
    }
    sched_yield();
  }
}
inline void ClockUnlock(ClockState* s) { s->spin.store(0, std::memory_order_release); }

/// CLOCK_REALTIME in ns.
inline uint64_t RealtimeNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

/// FAKE_CLOCK_REALTIME: CLOCK_REALTIME ns at t = 0, fixed by the first caller.
inline uint64_t ClockEpochNs(ClockState* s) {
  uint64_t e = s->epoch_ns.load(std::memory_order_acquire);
  if (e != 0) return e;
  uint64_t now = RealtimeNs();
  return s->epoch_ns.compare_exchange_strong(e, now, std::memory_order_acq_rel) ? now : e;
}

/// The wall clock as t (ns since the epoch); 0 before it.
inline uint64_t ClockWallT(ClockState* s) {
  uint64_t e = ClockEpochNs(s), now = RealtimeNs();
  return now > e ? now - e : 0;
}

/// t as an NVML timestamp (microseconds): CLOCK_REALTIME in realtime mode, else virtual.
inline uint64_t ClockToNvmlUs(uint64_t t) {
  ClockView& v = Clock();
  return (v.realtime ? ClockEpochNs(v.state) + t : t) / 1000;
}

/// An NVML timestamp (microseconds, lastSeenTimeStamp) as t; 0 if before the epoch.
inline uint64_t ClockFromNvmlUs(uint64_t us) {
  ClockView& v = Clock();
  if (!v.realtime) return us * 1000;
  uint64_t ns = us * 1000, e = ClockEpochNs(v.state);
  return ns > e ? ns - e : 0;
}

/// Wakes participants waiting for their turn: call after moving a participant's time.
inline void ClockAdvanced(ClockState* s) {
  s->gen.fetch_add(1, std::memory_order_release);
  if (s->waiters.load(std::memory_order_acquire) > 0)
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&s->gen), FUTEX_WAKE, INT32_MAX, nullptr,
              nullptr, 0);
}

/// Leaves the simulation (process exit): others no longer wait for us.
inline void ClockLeave() {
  ClockView& v = Clock();
  if (v.slot >= 0 && v.state->parts[v.slot].pid.load() == CachedPid()) {
    v.state->parts[v.slot].active.store(0, std::memory_order_release);
    ClockAdvanced(v.state);
  }
}

/// This process's participant slot (joins on first use; a fork child joins afresh).
inline ClockParticipant& Me() {
  ClockView& v = Clock();
  int pid = CachedPid();
  if (v.slot >= 0 && v.state->parts[v.slot].pid.load(std::memory_order_relaxed) == pid)
    return v.state->parts[v.slot];
  ClockState* s = v.state;
  ClockLock(s);
  int found = -1;
  for (int i = 0; i < kClockMaxParticipants; ++i)
    if (s->parts[i].pid.load() == pid) found = i;
  for (int i = 0; found < 0 && i < kClockMaxParticipants; ++i) {
    int32_t p = s->parts[i].pid.load();
    if (p == 0 || (p != pid && !s->parts[i].active.load())) {
      ClockParticipant& cp = s->parts[i];
      for (uint64_t& b : cp.busy) b = 0;
      cp.busy_end = 0;
      cp.t.store(0);
      const char* rank = std::getenv("FAKE_CLOCK_RANK");
      cp.rank.store(rank ? static_cast<uint32_t>(std::atoi(rank))
                         : 1000u + static_cast<uint32_t>(i));
      cp.pid.store(pid);
      cp.active.store(1);
      s->joined.fetch_add(1);
      found = i;
      std::atexit(ClockLeave);
    }
  }
  ClockUnlock(s);
  ClockAdvanced(s);             // a new participant: waiters re-check (FAKE_CLOCK_PARTICIPANTS)
  if (found < 0) std::abort();  // more than kClockMaxParticipants processes: test bug
  v.slot = found;
  return s->parts[found];
}

/// True if `pid` has exited but is not reaped yet (a crashed child the test still holds):
/// kill(pid, 0) succeeds on a zombie, so /proc/<pid>/stat's state field is read.
inline bool Zombie(int pid) {
  char path[64], buf[256];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  int fd = ::open(path, O_RDONLY);
  if (fd < 0) return true;
  ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return true;
  buf[n] = '\0';
  const char* paren = std::strrchr(buf, ')');
  return paren && paren[1] == ' ' && paren[2] == 'Z';
}

/// Blocks (on a futex) until this process's virtual time is the smallest of all live
/// participants, then takes the clock's spinlock. Pair with ClockUnlock.
inline void ClockTurn() {
  ClockView& v = Clock();
  ClockParticipant& me = Me();
  ClockState* s = v.state;
  int my = v.slot;
  bool slow = false;
  for (;;) {
    if (v.expected <= 0) break;  // not a simulation: never wait for other processes
    uint32_t gen = s->gen.load(std::memory_order_acquire);
    bool mine = static_cast<int>(s->joined.load()) >= v.expected;
    uint64_t t = me.t.load();
    for (int i = 0; mine && i < kClockMaxParticipants; ++i) {
      if (i == my) continue;
      const ClockParticipant& p = s->parts[i];
      if (!p.active.load() || p.pid.load() == 0) continue;
      uint64_t pt = p.t.load();
      if (pt < t || (pt == t && p.rank.load() < me.rank.load()) ||
          (pt == t && p.rank.load() == me.rank.load() && i < my)) {
        if (::kill(p.pid.load(), 0) != 0 || (slow && Zombie(p.pid.load()))) {
          const_cast<ClockParticipant&>(p).active.store(0);
          continue;
        }
        mine = false;
      }
    }
    if (mine) break;
    // Sleep until someone's time moves (10 ms timeout: a participant that died unseen).
    s->waiters.fetch_add(1, std::memory_order_acq_rel);
    timespec timeout{0, 10'000'000};
    long rc = ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&s->gen), FUTEX_WAIT, gen, &timeout,
                        nullptr, 0);
    slow = rc != 0 && errno == ETIMEDOUT;  // nothing moved for 10 ms: look for crashed processes
    s->waiters.fetch_sub(1, std::memory_order_acq_rel);
  }
  ClockLock(s);
  if (v.realtime) {  // t follows the wall (never backwards: a queued kernel may be ahead)
    uint64_t w = ClockWallT(s);
    if (me.t.load() < w) me.t.store(w);
  }
}

/// Adds the busy interval [start, end) to the participant's buckets (overlap with the previous
/// interval merged: utilisation counts time with at least one kernel running).
inline void ClockAddBusy(ClockParticipant& p, uint64_t start, uint64_t end) {
  if (start < p.busy_end) start = p.busy_end;
  if (end <= start) return;
  p.busy_end = end;
  for (uint64_t t = start; t < end;) {
    uint64_t b = t / kBucketNs;
    uint64_t stop = (b + 1) * kBucketNs;
    if (stop > end) stop = end;
    if (b < static_cast<uint64_t>(kClockBuckets)) p.busy[b] += stop - t;
    t = stop;
  }
}

/// Busy ns of participant `p` in [from, to), bucket-resolution at the ends (10 ms) — exact
/// when from and to are multiples of 10 ms; pro-rated otherwise.
inline uint64_t ClockBusy(const ClockParticipant& p, uint64_t from, uint64_t to) {
  uint64_t total = 0;
  for (uint64_t b = from / kBucketNs;
       b * kBucketNs < to && b < static_cast<uint64_t>(kClockBuckets); ++b) {
    uint64_t lo = b * kBucketNs, hi = lo + kBucketNs;
    uint64_t a = from > lo ? from : lo, z = to < hi ? to : hi;
    if (z <= a) continue;
    total += p.busy[b] * (z - a) / kBucketNs;
  }
  return total;
}

/// Schedules a kernel on `device` (SM count `sm_count`) needing `sms` SMs for `dur` ns, not
/// before `ready`. Caller holds the turn. Returns its end time.
inline uint64_t ClockSchedule(int device, int sm_count, uint32_t sms, uint64_t dur,
                              uint64_t ready) {
  ClockState* s = Clock().state;
  uint64_t now = Me().t.load();
  // Drop finished kernels that can no longer matter (everyone's time is >= now).
  for (auto& k : s->inflight)
    if (k.sms && k.end <= now) k.sms = 0;
  auto fits = [&](uint64_t at) {
    // SM use is piecewise constant; check at `at` and at every kernel start within the span.
    uint64_t points[kClockMaxInflight + 1];
    int n = 0;
    points[n++] = at;
    for (auto& k : s->inflight)
      if (k.sms && k.device == device && k.start > at && k.start < at + dur) points[n++] = k.start;
    for (int i = 0; i < n; ++i) {
      uint64_t used = 0;
      for (auto& k : s->inflight)
        if (k.sms && k.device == device && k.start <= points[i] && k.end > points[i]) used += k.sms;
      if (used + sms > static_cast<uint64_t>(sm_count)) return false;
    }
    return true;
  };
  uint64_t start = ready;
  if (!fits(start)) {
    uint64_t best = UINT64_MAX;
    for (auto& k : s->inflight)
      if (k.sms && k.device == device && k.end > start && k.end < best && fits(k.end)) best = k.end;
    if (best != UINT64_MAX) start = best;
  }
  for (auto& k : s->inflight) {
    if (k.sms == 0) {
      k = ClockKernel{start, start + dur, sms, device};
      break;
    }
  }
  return start + dur;
}

}  // namespace fracgpu::fakes
