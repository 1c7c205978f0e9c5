// Shared region: open/initialise, robust locking, slot claim/release and dead-slot reaping.
// See region.h for the layout and invariants.
#include "vgpu/region.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

#include "vgpu/glibc_compat.h"  // first: pins old glibc symbol versions in libvgpu.so
#include "vgpu/wake.h"

namespace fracgpu::vgpu {
namespace {

void RecomputeSumsLocked(Region* r) {
  for (int d = 0; d < kMaxDevices; ++d) {
    r->devices[d].used.store(RegionSumSlots(r, d), std::memory_order_relaxed);
  }
}

void ClearBreakdown(RegionSlot* slot) {
  for (int d = 0; d < kMaxDevices; ++d) {
    slot->context_bytes[d].store(0, std::memory_order_relaxed);
    slot->module_bytes[d].store(0, std::memory_order_relaxed);
    slot->data_bytes[d].store(0, std::memory_order_relaxed);
  }
}

bool InitMutex(pthread_mutex_t* m) {
  pthread_mutexattr_t attr;
  if (pthread_mutexattr_init(&attr) != 0) return false;
  bool ok = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED) == 0 &&
            pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST) == 0 &&
            pthread_mutex_init(m, &attr) == 0;
  pthread_mutexattr_destroy(&attr);
  return ok;
}

}  // namespace

uint64_t RegionSumSlots(const Region* r, int device) noexcept {
  uint64_t sum = 0;
  for (int s = 0; s < kMaxSlots; ++s) {
    if (r->slots[s].state.load(std::memory_order_acquire) == kSlotActive) {
      sum += r->slots[s].used[device].load(std::memory_order_relaxed);
    }
  }
  return sum;
}

RegionError RegionValidate(const void* data, size_t size) noexcept {
  if (data == nullptr || size < sizeof(Region)) return RegionError::kBadLayout;
  const Region* r = static_cast<const Region*>(data);
  if (r->magic != kRegionMagic || r->version != kRegionVersion ||
      r->region_size != sizeof(Region) || r->slot_size != sizeof(RegionSlot) ||
      r->max_devices != kMaxDevices || r->max_slots != kMaxSlots ||
      r->device_count > static_cast<uint32_t>(kMaxDevices)) {
    return RegionError::kBadLayout;
  }
  return RegionError::kOk;
}

RegionError RegionOpen(const char* path, const RegionDevice* init, int init_count, uint32_t policy,
                       int32_t priority, RegionHandle* out) noexcept {
  int fd = ::open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return RegionError::kOpenFailed;
  // flock is released by the kernel if we die here, so a crashed initialiser blocks nobody.
  // Bounded: a process of the container that keeps the flock (it need not be ours) makes this
  // one fail closed after kRegionLockTimeoutNs, never hang.
  for (uint64_t waited_ns = 0; ::flock(fd, LOCK_EX | LOCK_NB) != 0;) {
    if ((errno != EWOULDBLOCK && errno != EINTR) || waited_ns >= kRegionLockTimeoutNs) {
      int saved = errno == EWOULDBLOCK ? ETIMEDOUT : errno;
      ::close(fd);
      errno = saved;
      return RegionError::kOpenFailed;
    }
    timespec step{0, 1000000};  // 1 ms
    ::nanosleep(&step, nullptr);
    waited_ns += 1000000;
  }
  RegionError result = RegionError::kOk;
  void* map = MAP_FAILED;
  bool fresh = false;
  // lseek rather than fstat: fstat is a GLIBC_2.33 symbol, libvgpu.so must run on 2.17.
  off_t file_size = ::lseek(fd, 0, SEEK_END);
  if (file_size < 0) {
    result = RegionError::kOpenFailed;
  } else if (file_size == 0) {
    fresh = true;
    ::fchmod(fd, 0666);  // every user of the container shares the file
    if (::ftruncate(fd, sizeof(Region)) != 0) result = RegionError::kOpenFailed;
  } else if (static_cast<size_t>(file_size) != sizeof(Region)) {
    result = RegionError::kBadLayout;
  }
  if (result == RegionError::kOk) {
    map = ::mmap(nullptr, sizeof(Region), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) result = RegionError::kOpenFailed;
  }
  if (result == RegionError::kOk) {
    Region* r = static_cast<Region*>(map);
    if (fresh || r->magic == 0) {
      // New file (zero-filled by ftruncate), or a previous initialiser died before the magic.
      std::memset(static_cast<void*>(r), 0, sizeof(Region));
      r->version = kRegionVersion;
      r->region_size = sizeof(Region);
      r->slot_size = sizeof(RegionSlot);
      r->max_devices = kMaxDevices;
      r->max_slots = kMaxSlots;
      r->policy = policy;
      r->priority = priority;
      int n = init_count < 0 ? 0 : (init_count > kMaxDevices ? kMaxDevices : init_count);
      r->device_count = static_cast<uint32_t>(n);
      for (int d = 0; d < n; ++d) {
        std::memcpy(r->devices[d].uuid, init[d].uuid, kUuidSize);
        r->devices[d].uuid[kUuidSize - 1] = '\0';
        r->devices[d].memory_limit = init[d].memory_limit;
        r->devices[d].sm_limit = init[d].sm_limit;
        r->devices[d].flags = init[d].flags;
      }
      if (!InitMutex(&r->lock)) {
        result = RegionError::kOpenFailed;
      } else {
        __atomic_store_n(&r->magic, kRegionMagic, __ATOMIC_RELEASE);
      }
    } else if (RegionValidate(r, sizeof(Region)) != RegionError::kOk) {
      result = RegionError::kBadLayout;
    }
  }
  ::flock(fd, LOCK_UN);
  if (result != RegionError::kOk) {
    int saved = errno;
    if (map != MAP_FAILED) ::munmap(map, sizeof(Region));
    ::close(fd);
    errno = saved;
    return result;
  }
  out->region = static_cast<Region*>(map);
  out->fd = fd;
  return RegionError::kOk;
}

void RegionClose(RegionHandle* h) noexcept {
  if (h->region) ::munmap(h->region, sizeof(Region));
  if (h->fd >= 0) ::close(h->fd);
  h->region = nullptr;
  h->fd = -1;
}

namespace {
// Set after a lock attempt timed out: later attempts only try (fail at once while the lock
// stays unusable), and the first success clears it. Per process (not in the shared region).
std::atomic<bool> g_lock_broken{false};
std::atomic<bool> g_lock_logged{false};

void LogLockTimeout() {
  if (g_lock_logged.exchange(true, std::memory_order_relaxed)) return;
  static const char kMsg[] =
      "fracgpu: the shared region's lock was not acquired within 2 s (a process of this "
      "container holds it and does not release it, or its lock word was overwritten): failing "
      "closed, every allocation is refused until it is released\n";
  ssize_t ignored = ::write(2, kMsg, sizeof kMsg - 1);
  (void)ignored;
}
}  // namespace

bool RegionLock(Region* r) noexcept {
  int rc;
  if (g_lock_broken.load(std::memory_order_relaxed)) {
    rc = pthread_mutex_trylock(&r->lock);
  } else {
    // pthread_mutex_timedlock takes CLOCK_REALTIME (the clock-selecting variant needs glibc
    // 2.30; libvgpu.so runs on 2.17). A forged lock word names an owner that never unlocks and
    // is on no robust list, so pthread_mutex_lock would wait forever.
    timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += static_cast<time_t>(kRegionLockTimeoutNs / 1000000000ull);
    rc = pthread_mutex_timedlock(&r->lock, &deadline);
  }
  if (rc == EOWNERDEAD) {
    // The holder died mid-update: the slots are the truth, rebuild the sums from them.
    RegionReapLocked(r);
    RecomputeSumsLocked(r);
    pthread_mutex_consistent(&r->lock);
    rc = 0;
  }
  if (rc == 0) {
    g_lock_broken.store(false, std::memory_order_relaxed);
    return true;
  }
  // ETIMEDOUT, EBUSY while broken, or an error from a scribbled mutex (EINVAL,
  // ENOTRECOVERABLE, EDEADLK): fail closed.
  g_lock_broken.store(true, std::memory_order_relaxed);
  LogLockTimeout();
  return false;
}

void RegionUnlock(Region* r) noexcept { pthread_mutex_unlock(&r->lock); }

uint64_t ProcessStartTime(pid_t pid) noexcept {
  char path[64];
  char buf[1024];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  // Field 2 (comm) may contain spaces and parentheses: skip to the last ')'.
  char* p = std::strrchr(buf, ')');
  if (!p) return 0;
  ++p;
  // After ')' come fields 3, 4, …; field 22 is the 20th of those.
  for (int field = 3; field < 22; ++field) {
    p = std::strchr(p + 1, ' ');
    if (!p) return 0;
  }
  uint64_t v = 0;
  for (++p; *p >= '0' && *p <= '9'; ++p) v = v * 10 + static_cast<uint64_t>(*p - '0');
  return v;
}

bool SlotProcessAlive(const RegionSlot& slot) noexcept {
  if (slot.pid <= 0) return false;
  if (::kill(slot.pid, 0) != 0 && errno == ESRCH) return false;
  uint64_t start = ProcessStartTime(slot.pid);
  // /proc unreadable (e.g. another PID namespace): trust kill(); otherwise compare times.
  return start == 0 || start == slot.start_time;
}

int RegionReapLocked(Region* r) noexcept {
  int reaped = 0;
  for (int s = 0; s < kMaxSlots; ++s) {
    RegionSlot& slot = r->slots[s];
    if (slot.state.load(std::memory_order_acquire) != kSlotActive) continue;
    if (SlotProcessAlive(slot)) continue;
    for (int d = 0; d < kMaxDevices; ++d) {
      uint64_t u = slot.used[d].exchange(0, std::memory_order_relaxed);
      uint64_t cur = r->devices[d].used.load(std::memory_order_relaxed);
      r->devices[d].used.store(cur >= u ? cur - u : 0, std::memory_order_relaxed);
    }
    ClearBreakdown(&slot);
    slot.pid = 0;
    slot.host_pid = 0;
    slot.uses.store(0, std::memory_order_relaxed);
    slot.start_time = 0;
    slot.state.store(kSlotFree, std::memory_order_release);
    ++reaped;
  }
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  r->last_reap_ns.store(
      static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec),
      std::memory_order_relaxed);
  return reaped;
}

RegionSlot* RegionClaimSlot(Region* r, pid_t pid, uint64_t start_time) noexcept {
  if (!RegionLock(r)) return nullptr;
  RegionSlot* found = nullptr;
  for (int attempt = 0; attempt < 2 && !found; ++attempt) {
    if (attempt == 1) RegionReapLocked(r);
    for (int s = 0; s < kMaxSlots; ++s) {
      if (r->slots[s].state.load(std::memory_order_acquire) == kSlotFree) {
        found = &r->slots[s];
        break;
      }
    }
  }
  if (found) {
    for (int d = 0; d < kMaxDevices; ++d) found->used[d].store(0, std::memory_order_relaxed);
    ClearBreakdown(found);
    found->host_pid = 0;
    // A new process has asked for nothing (an older library left these words as they were).
    std::atomic_ref<uint64_t>(found->reclaim_requests).store(0, std::memory_order_relaxed);
    std::atomic_ref<uint64_t>(found->reclaim_bytes).store(0, std::memory_order_relaxed);
    // A build without wake trampolines (not x86-64) hands out unguarded driver functions: the
    // agent must never park its processes (kSlotUnwakeable).
    found->uses.store(kSlotUsesRecorded | (kHaveWakeTrampolines ? 0u : kSlotUnwakeable),
                      std::memory_order_relaxed);
    found->pid = pid;
    found->start_time = start_time;
    found->state.store(kSlotActive, std::memory_order_release);
  }
  RegionUnlock(r);
  return found;
}

void RegionReleaseSlot(Region* r, RegionSlot* slot) noexcept {
  if (!RegionLock(r)) return;
  if (slot->state.load(std::memory_order_acquire) == kSlotActive) {
    for (int d = 0; d < kMaxDevices; ++d) {
      uint64_t u = slot->used[d].exchange(0, std::memory_order_relaxed);
      uint64_t cur = r->devices[d].used.load(std::memory_order_relaxed);
      r->devices[d].used.store(cur >= u ? cur - u : 0, std::memory_order_relaxed);
    }
    ClearBreakdown(slot);
    slot->uses.store(0, std::memory_order_relaxed);
    slot->pid = 0;
    slot->host_pid = 0;
    slot->state.store(kSlotFree, std::memory_order_release);
  }
  RegionUnlock(r);
}

}  // namespace fracgpu::vgpu
