// Process state of libvgpu.so (see state.h).
#include "vgpu/state.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "api/limits.h"
#include "vgpu/accounting.h"
#include "vgpu/glibc_compat.h"
#include "vgpu/host_pid.h"
#include "vgpu/interpose.h"
#include "vgpu/limits.h"
#include "vgpu/platform.h"
#include "vgpu/sm_limiter.h"
#include "vgpu/table.h"
#include "vgpu/wake.h"

extern char** environ;

// The limits file's path is compiled in (docs/design/CONTRACT.md §3); there is deliberately no
// run-time override, so nothing a tenant can set moves it: platform::LimitsFilePath(), chosen
// at link time (platform.h). The test copy, libvgpu_testpath.so, reads the relative
// "fracgpu-limits.env" (resolved against the working directory, which survives `env -i`); it is
// never installed (docs/vgpu.md).

namespace fracgpu::vgpu {

std::atomic<bool> g_sm_limit_active{false};
std::atomic<uint64_t> g_context_epoch{0};

namespace {

constexpr size_t kMaxFileBytes = 64 * 1024;

struct DeviceState {
  uint64_t limit = 0;  // bytes, 0 = unlimited
  bool fail_closed = false;
  std::atomic<bool> fail_logged{false};
  // What this process has charged on the device: its region slot must hold at least this, and
  // the device total at least the slot. The region is tenant-writable; one that says less (a
  // tenant zeroing its usage to allocate again) makes the device fail closed (issue 32 item 5).
  std::atomic<uint64_t> own{0};
  std::atomic<bool> forged{false};
};

std::atomic<int> g_init{0};  // 0 none, 1 running, 2 done
Config g_config;
bool g_managed = false;     // some limit is configured: account and enforce
bool g_all_denied = false;  // region unusable: everything fails closed
RegionHandle g_region;
int g_dev_count = 0;
DeviceState g_dev[kMaxDevices];
std::atomic<RegionSlot*> g_slot{nullptr};
std::atomic<int> g_slot_claim{0};
std::atomic<bool> g_slot_logged{false};
constexpr int kMaxOrdinals = 64;
std::atomic<int> g_ordinal_cache[kMaxOrdinals];  // 0 unknown, else index + 3

// CLOCK_MONOTONIC: the clock RegionReapLocked stamps last_reap_ns with (region.h). Comparing
// it with another clock (the coarse one lags it by up to a tick) underflowed and reaped on
// every call. Read only off the hot path (cuMemGetInfo / nvmlDeviceGetMemoryInfo).
uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void ReadLimitsFile(Config* c) {
  // O_NONBLOCK: a FIFO at the path reads as empty (refused below) instead of blocking.
  int fd = ::open(platform::LimitsFilePath(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno != ENOENT) {
      c->file_present = true;
      c->file_bad = true;
      c->all_fail_closed = true;
      std::snprintf(c->error, sizeof(c->error),
                    "limits file %s exists but cannot be read (errno %d)",
                    platform::LimitsFilePath(), errno);
      c->error_count++;
    }
    return;
  }
  static char buf[kMaxFileBytes + 1];
  size_t len = 0;
  int read_errno = 0;
  while (len <= kMaxFileBytes) {
    ssize_t n = ::read(fd, buf + len, kMaxFileBytes + 1 - len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) read_errno = errno;  // a folder at the path: EISDIR
    if (n <= 0) break;
    len += static_cast<size_t>(n);
  }
  ::close(fd);
  if (read_errno != 0) {
    c->file_present = true;
    c->file_bad = true;
    c->all_fail_closed = true;
    std::snprintf(c->error, sizeof(c->error), "limits file %s cannot be read (errno %d)",
                  platform::LimitsFilePath(), read_errno);
    c->error_count++;
    return;
  }
  if (len > kMaxFileBytes) {
    c->file_present = true;
    c->file_bad = true;
    c->all_fail_closed = true;
    std::snprintf(c->error, sizeof(c->error), "limits file %s is larger than 64 KiB",
                  platform::LimitsFilePath());
    c->error_count++;
    return;
  }
  ParseLimitsFile(c, buf, len);
}

// Refuses CUDA for a limits directory that cannot be used (state.h: file_bad).
void RefuseLimitsDir(Config* c, const char* why, int err) {
  c->file_present = true;
  c->file_bad = true;
  c->all_fail_closed = true;
  if (c->error_count++ > 0) return;
  std::snprintf(c->error, sizeof(c->error), "limits directory %s: %s (errno %d)",
                platform::LimitsDirPath(), why, err);
}

// The limits directory (limits.h ParseLimitsDir), read when present: its entries by getdents64
// (no allocation: opendir mallocs), each file read whole into one static buffer of
// kMaxFileBytes. Anything but regular files ending in ".env" fails closed in the parser.
bool g_limits_from_dir = false;  // the limits came (or were refused) from the directory

void ReadLimitsDir(Config* c) {
  int dfd = ::open(platform::LimitsDirPath(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    if (errno == ENOENT) return;
    g_limits_from_dir = true;
    RefuseLimitsDir(c, "exists but cannot be opened", errno);
    return;
  }
  g_limits_from_dir = true;
  if (c->file_present) {  // a device plugin's file and a DRA claim's directory: which limit?
    ::close(dfd);
    RefuseLimitsDir(c, "present beside the limits file", 0);
    return;
  }
  static char names[kMaxFragments + 1][kFragmentNameMax];
  static char text[kMaxFileBytes + 1];
  static LimitsFragment files[kMaxFragments + 1];
  size_t count = 0, used = 0;
  alignas(8) char dents[4096];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, dfd, dents, sizeof(dents));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      RefuseLimitsDir(c, "cannot be listed", errno);
      ::close(dfd);
      return;
    }
    if (n == 0) break;
    for (long off = 0; off < n;) {
      struct Dirent64 {
        uint64_t ino;
        int64_t off;
        unsigned short reclen;
        unsigned char type;
        char name[1];
      };
      const auto* d = reinterpret_cast<const Dirent64*>(dents + off);
      off += d->reclen;
      if (std::strcmp(d->name, ".") == 0 || std::strcmp(d->name, "..") == 0) continue;
      if (count > kMaxFragments) continue;  // the parser refuses kMaxFragments + 1 files
      std::snprintf(names[count], kFragmentNameMax, "%s", d->name);
      if (std::strlen(d->name) >= kFragmentNameMax) names[count][0] = '\0';  // refused: bad name
      files[count].name = names[count];
      files[count].text = text + used;
      files[count].size = 0;
      // O_NONBLOCK: a FIFO reads as empty (refused by the parser) instead of blocking.
      const int fd = ::openat(dfd, d->name, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
      if (fd < 0) {
        RefuseLimitsDir(c, "holds a file that cannot be read", errno);
        ::close(dfd);
        return;
      }
      int read_errno = 0;
      while (used <= kMaxFileBytes) {
        const ssize_t r = ::read(fd, text + used, kMaxFileBytes + 1 - used);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) read_errno = errno;
        if (r <= 0) break;
        used += static_cast<size_t>(r);
        files[count].size += static_cast<size_t>(r);
      }
      ::close(fd);
      if (read_errno != 0 || used > kMaxFileBytes) {
        RefuseLimitsDir(
            c, read_errno != 0 ? "holds a file that cannot be read" : "holds more than 64 KiB",
            read_errno);
        ::close(dfd);
        return;
      }
      ++count;
    }
  }
  ::close(dfd);
  ParseLimitsDir(c, files, count);
}

bool NvmlUuid(unsigned index, char out[kUuidSize]) {
  nvmlDevice_t dev = nullptr;
  if (REAL(nvmlDeviceGetHandleByIndex_v2)(index, &dev) != NVML_SUCCESS) return false;
  char buf[kNvmlDeviceUuidBufferSize];
  if (REAL(nvmlDeviceGetUUID)(dev, buf, sizeof(buf)) != NVML_SUCCESS) return false;
  buf[kUuidSize - 1] = '\0';  // UUIDs are 40 characters; longer ones (MIG) are cut
  std::memcpy(out, buf, kUuidSize);
  return true;
}

// The container's devices, index i = CUDA_DEVICE_*_LIMIT_<i> (docs/design/CONTRACT.md §3–4).
int BuildDevices(const Config& c, RegionDevice out[kMaxDevices]) {
  std::memset(static_cast<void*>(out), 0, sizeof(RegionDevice) * kMaxDevices);
  int n = 0;
  const char* vis = c.visible_devices;
  bool nvml_ok = false;
  auto nvml_init = [&] {
    if (!nvml_ok) {
      ResolveNvml();
      nvml_ok = REAL(nvmlInit_v2)() == NVML_SUCCESS;
    }
    return nvml_ok;
  };
  if (vis[0] == '\0' || std::strcmp(vis, "all") == 0) {
    unsigned count = 0;
    if (nvml_init() && REAL(nvmlDeviceGetCount_v2)(&count) == NVML_SUCCESS) {
      for (unsigned i = 0; i < count && n < kMaxDevices; ++i) {
        if (!NvmlUuid(i, out[n].uuid)) out[n].uuid[0] = '\0';
        ++n;
      }
    } else {
      // No NVML: devices are known by CUDA ordinal only, as many as limits name.
      for (int i = 0; i < kMaxDevices; ++i)
        if (c.devices[i].memory_set || c.devices[i].sm_set || c.devices[i].fail_closed) n = i + 1;
      if (n == 0 && (c.global_memory_set || c.global_sm_set)) n = 1;
    }
  } else if (std::strcmp(vis, "none") != 0 && std::strcmp(vis, "void") != 0) {
    const char* p = vis;
    while (*p && n < kMaxDevices) {
      const char* end = std::strchr(p, ',');
      size_t len = end ? static_cast<size_t>(end - p) : std::strlen(p);
      char tok[kUuidSize] = {};
      std::memcpy(tok, p, len < kUuidSize - 1 ? len : kUuidSize - 1);
      bool digits = len > 0 && std::strspn(tok, "0123456789") == len;
      if (digits) {
        if (!(nvml_init() && NvmlUuid(static_cast<unsigned>(std::atoi(tok)), out[n].uuid))) {
          out[n].uuid[0] = '\0';
        }
      } else {
        std::memcpy(out[n].uuid, tok, kUuidSize);
      }
      ++n;
      p = end ? end + 1 : p + len;
    }
  }
  for (int i = 0; i < n; ++i) {
    bool fail = false;
    out[i].memory_limit = EffectiveMemoryLimit(c, i, &fail);
    out[i].sm_limit = EffectiveSmLimit(c, i);
    out[i].flags = fail ? kDeviceFailClosed : 0;
  }
  return n;
}

bool AnyLimitConfigured(const Config& c) {
  if (c.file_present || c.all_fail_closed || c.global_memory_set || c.global_sm_set) return true;
  for (const DeviceConfig& d : c.devices)
    if (d.memory_set || d.sm_set || d.fail_closed) return true;
  return false;
}

uint64_t MinLimit(uint64_t a, uint64_t b) {
  if (a == 0) return b;
  if (b == 0) return a;
  return a < b ? a : b;
}

void AtForkChild() {
  // The child owns no device memory of its parent and must claim its own slot.
  g_slot.store(nullptr, std::memory_order_relaxed);
  g_slot_claim.store(0, std::memory_order_relaxed);
  for (auto& d : g_dev) {  // the child charged nothing yet
    d.own.store(0, std::memory_order_relaxed);
    d.forged.store(false, std::memory_order_relaxed);
  }
  TableResetAfterFork();
  AccountingResetAfterFork();
  HostPidResetAfterFork();
  LaunchStampResetAfterFork();
}

void DoInit() {
  ReadLimitsFile(&g_config);
  ReadLimitsDir(&g_config);
  ApplyEnvironment(&g_config, environ);
  FinishConfig(&g_config);
  SetLogLevel(g_config.log_level);
  if (g_config.file_bad) {
    Log(kLogError, "%s (%s): CUDA refused to start (cuInit returns CUDA_ERROR_NOT_PERMITTED)",
        g_config.error, g_limits_from_dir ? platform::LimitsDirPath() : platform::LimitsFilePath());
  } else if (g_config.error_count > 0) {
    Log(kLogError, "bad configuration, failing closed: %s", g_config.error);
  }
  g_managed = AnyLimitConfigured(g_config);
  for (auto& c : g_ordinal_cache) c.store(0, std::memory_order_relaxed);
  pthread_atfork(nullptr, nullptr, AtForkChild);
  if (!g_managed) return;
  RegionDevice own[kMaxDevices];
  int own_count = BuildDevices(g_config, own);
  if (g_config.region_path[0] == '\0') {
    g_all_denied = true;
    return;
  }
  RegionError err =
      RegionOpen(g_config.region_path, own, own_count, static_cast<uint32_t>(g_config.policy),
                 g_config.priority, &g_region);
  if (err != RegionError::kOk) {
    Log(kLogError, "cannot use shared region %s (%s, errno %d): failing closed",
        g_config.region_path,
        err == RegionError::kBadLayout ? "foreign or corrupt layout" : "open failed", errno);
    g_all_denied = true;
    return;
  }
  Region* r = g_region.region;
  g_dev_count = static_cast<int>(r->device_count);
  // The wake trampolines watch the first device's park state: the agent parks only one-GPU
  // containers (docs/reclaim.md "Wake: calls libvgpu.so does not hook").
  if (g_dev_count > 0) WakeWatch(&r->devices[0].park_state);
  bool any_sm = false;
  for (int d = 0; d < g_dev_count; ++d) {
    const RegionDevice& rd = r->devices[d];
    uint64_t limit = rd.memory_limit;
    bool fail = (rd.flags & kDeviceFailClosed) != 0;
    int match = -1;
    for (int i = 0; i < own_count; ++i) {
      if (rd.uuid[0] ? strcasecmp(own[i].uuid, rd.uuid) == 0 : i == d) match = i;
    }
    if (match >= 0) {
      if (own[match].memory_limit != limit) {
        Log(kLogWarning,
            "device %s: limit %llu bytes here, %llu in the shared region; using the smaller",
            rd.uuid, static_cast<unsigned long long>(own[match].memory_limit),
            static_cast<unsigned long long>(limit));
      }
      limit = MinLimit(limit, own[match].memory_limit);
      fail = fail || (own[match].flags & kDeviceFailClosed) != 0;
    }
    g_dev[d].limit = limit;
    g_dev[d].fail_closed = fail;
    if (rd.sm_limit > 0 && rd.sm_limit < 100) any_sm = true;
  }
  if (own_count != g_dev_count) {
    Log(kLogWarning,
        "this process sees %d devices, the shared region %d; the region's list is used", own_count,
        g_dev_count);
  }
  g_sm_enforce = any_sm && g_config.policy != CorePolicy::kDisable;
  g_sm_cap_when_alone = g_config.policy != CorePolicy::kDefault;  // `force`
  g_node_dir = NodeDirPresent();
  // The launch hooks' slow path: SM pacing and/or priority (sm_limiter.h).
  g_sm_limit_active.store(g_sm_enforce || g_node_dir, std::memory_order_relaxed);
}

// RegionSlot::uses bits recorded before this process had a slot (RecordUnwakeable: a dlsym
// answer may come before the first CUDA call); EnsureSlot adds them at claim.
std::atomic<uint32_t> g_pending_uses{0};

RegionSlot* EnsureSlot() {
  RegionSlot* s = g_slot.load(std::memory_order_acquire);
  if (s) return s;
  int expected = 0;
  if (g_slot_claim.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
    pid_t pid = getpid();
    s = RegionClaimSlot(g_region.region, pid, ProcessStartTime(pid));
    if (s) {
      // What was recorded before the slot existed (RecordUnwakeable from a dlsym answer).
      if (uint32_t pending = g_pending_uses.load(std::memory_order_seq_cst))
        s->uses.fetch_or(pending, std::memory_order_relaxed);
      // Known at once in the host's PID namespace; otherwise found at the first context.
      int32_t host_pid = HostPidAtClaim();
      if (host_pid > 0)
        std::atomic_ref<int32_t>(s->host_pid).store(host_pid, std::memory_order_relaxed);
    }
    if (!s && !g_slot_logged.exchange(true)) {
      Log(kLogError, "no free slot in shared region %s (%d processes): failing closed",
          g_config.region_path, kMaxSlots);
    }
    g_slot.store(s, std::memory_order_seq_cst);  // seq_cst: RecordUnwakeable's pairing
    g_slot_claim.store(s ? 2 : 0, std::memory_order_release);
    return s;
  }
  while (g_slot_claim.load(std::memory_order_acquire) == 1) sched_yield();
  return g_slot.load(std::memory_order_acquire);
}

// The slot's breakdown field for `kind` on `dev` (region.h version 2).
std::atomic<uint64_t>& Part(RegionSlot* slot, int dev, ChargeKind kind) {
  switch (kind) {
    case ChargeKind::kContext:
      return slot->context_bytes[dev];
    case ChargeKind::kModule:
      return slot->module_bytes[dev];
    case ChargeKind::kData:
      break;
  }
  return slot->data_bytes[dev];
}

// True when the last dead-slot sweep is at least a second old. Both sides are
// CLOCK_MONOTONIC; a stamp ahead of `now` (another process stamped after our read) is not due.
bool ReapDue(const Region* r) {
  uint64_t now = NowNs();
  uint64_t last = r->last_reap_ns.load(std::memory_order_relaxed);
  return now > last && now - last >= 1000000000ull;
}

void MaybeReapLocked(Region* r) {
  if (ReapDue(r)) RegionReapLocked(r);
}

__attribute__((destructor)) void ReleaseAtExit() {
  RegionSlot* s = g_slot.exchange(nullptr, std::memory_order_acq_rel);
  if (s && g_region.region) RegionReleaseSlot(g_region.region, s);
  for (auto& d : g_dev) d.own.store(0, std::memory_order_relaxed);  // the slot took it away
}

}  // namespace

bool LimitsFileRefused() noexcept {
  EnsureInit();
  return g_config.file_bad;
}

bool ProcessManaged() noexcept {
  EnsureInit();
  return g_managed;
}

void EnsureInit() noexcept {
  if (g_init.load(std::memory_order_acquire) == 2) return;
  int expected = 0;
  if (g_init.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
    DoInit();
    g_init.store(2, std::memory_order_release);
    return;
  }
  while (g_init.load(std::memory_order_acquire) != 2) sched_yield();
}

void FormatUuid(const unsigned char b[16], char out[kUuidSize]) noexcept {
  std::snprintf(out, kUuidSize,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
}

int DeviceIndexForUuid(const char* uuid) noexcept {
  EnsureInit();
  if (!g_region.region) return -1;
  for (int d = 0; d < g_dev_count; ++d)
    if (g_region.region->devices[d].uuid[0] &&
        strcasecmp(g_region.region->devices[d].uuid, uuid) == 0)
      return d;
  return -1;
}

int DeviceIndexForOrdinal(CUdevice ordinal) noexcept {
  EnsureInit();
  if (!g_managed) return kUnmanaged;
  if (g_all_denied) return kDenied;
  if (ordinal >= 0 && ordinal < kMaxOrdinals) {
    int cached = g_ordinal_cache[ordinal].load(std::memory_order_relaxed);
    if (cached != 0) return cached - 3;
  }
  CUuuid raw;
  if (REAL(cuDeviceGetUuid_v2)(&raw, ordinal) != CUDA_SUCCESS) return kDenied;  // not cached
  char uuid[kUuidSize];
  FormatUuid(reinterpret_cast<const unsigned char*>(raw.bytes), uuid);
  int result = kDenied;
  for (int d = 0; d < g_dev_count; ++d) {
    const char* ru = g_region.region->devices[d].uuid;
    if (ru[0] ? strcasecmp(ru, uuid) == 0 : d == ordinal) {
      result = d;
      break;
    }
  }
  if (ordinal >= 0 && ordinal < kMaxOrdinals)
    g_ordinal_cache[ordinal].store(result + 3, std::memory_order_relaxed);
  return result;
}

int CurrentDeviceIndex(CUdevice* ordinal) noexcept {
  CUdevice dev = -1;
  if (REAL(cuCtxGetDevice)(&dev) != CUDA_SUCCESS) {
    *ordinal = -1;
    return kUnmanaged;
  }
  *ordinal = dev;
  return DeviceIndexForOrdinal(dev);
}

namespace {

// "5000 MiB", or "2.5 MiB" when not a whole number of MiB.
void FormatMiB(char* out, size_t cap, uint64_t bytes) noexcept {
  if (bytes % (1ull << 20) == 0) {
    std::snprintf(out, cap, "%llu MiB", static_cast<unsigned long long>(bytes >> 20));
  } else {
    std::snprintf(out, cap, "%.1f MiB", static_cast<double>(bytes) / 1048576.0);
  }
}

// The one line of a refused allocation (cold: only ever on a refusal). write(2), no heap.
__attribute__((cold, noinline)) void ReportRefusal(const char* api, int dev, uint64_t bytes,
                                                   uint64_t used, uint64_t limit) noexcept {
  if (!LogEnabled(kLogWarning)) return;
  char asked[32], have[32], cap[32], line[256];
  FormatMiB(asked, sizeof(asked), bytes);
  FormatMiB(have, sizeof(have), used);
  FormatMiB(cap, sizeof(cap), limit);
  int n = std::snprintf(line, sizeof(line),
                        "fracgpu: %s of %s refused: %s used of the %s limit on GPU %d\n", api,
                        asked, have, cap, dev);
  if (n <= 0) return;
  size_t len = static_cast<size_t>(n) < sizeof(line) ? static_cast<size_t>(n) : sizeof(line) - 1;
  if (line[len - 1] != '\n') line[len - 1] = '\n';
  ssize_t ignored = ::write(2, line, len);
  (void)ignored;
}

}  // namespace

CUresult Charge(int dev, uint64_t bytes, ChargeKind kind, const char* api) noexcept {
  if (dev < 0 || dev >= g_dev_count) return CUDA_ERROR_OUT_OF_MEMORY;
  DeviceState& d = g_dev[dev];
  if (d.fail_closed) {
    if (!d.fail_logged.exchange(true)) {
      Log(kLogError, "device %d fails closed (bad configuration): refusing every allocation", dev);
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  RegionSlot* slot = EnsureSlot();
  Region* r = g_region.region;
  if (!slot || !RegionLock(r)) return CUDA_ERROR_OUT_OF_MEMORY;
  RequestWakeIfParked(r->devices[dev]);  // an allocation of a parked container wakes it
  // No periodic reaping here: a sweep costs a kill() and a /proc read per slot, and a
  // steady-state allocation makes no system call. Dead slots are swept when they are in the
  // way (below), when a slot is claimed, and at most once a second by DeviceUsed.
  uint64_t used = r->devices[dev].used.load(std::memory_order_relaxed);
  const uint64_t mine = slot->used[dev].load(std::memory_order_relaxed);
  const uint64_t own = d.own.load(std::memory_order_relaxed);
  if (d.forged.load(std::memory_order_relaxed) || mine < own || used < mine) {
    RegionUnlock(r);
    if (!d.forged.exchange(true)) {
      Log(kLogError,
          "device %d fails closed: the container's region says %llu bytes in use (this "
          "process's slot %llu) while this process holds %llu: it was altered",
          dev, static_cast<unsigned long long>(used), static_cast<unsigned long long>(mine),
          static_cast<unsigned long long>(own));
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  auto over = [&] { return d.limit != 0 && (used > d.limit || bytes > d.limit - used); };
  if (over()) {
    RegionReapLocked(r);  // a dead process's charges must never cause a false OOM
    used = r->devices[dev].used.load(std::memory_order_relaxed);
  }
  if (over()) {
    RegionUnlock(r);
    if (api) ReportRefusal(api, dev, bytes, used, d.limit);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  std::atomic<uint64_t>& part = Part(slot, dev, kind);
  part.store(part.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
  slot->used[dev].store(slot->used[dev].load(std::memory_order_relaxed) + bytes,
                        std::memory_order_relaxed);
  r->devices[dev].used.store(used + bytes, std::memory_order_relaxed);
  d.own.store(own + bytes, std::memory_order_relaxed);
  RegionUnlock(r);
  return CUDA_SUCCESS;
}

void Uncharge(int dev, uint64_t bytes, ChargeKind kind) noexcept {
  if (dev < 0 || dev >= g_dev_count || bytes == 0) return;
  RegionSlot* slot = g_slot.load(std::memory_order_acquire);
  Region* r = g_region.region;
  if (!slot || !RegionLock(r)) return;
  std::atomic<uint64_t>& part = Part(slot, dev, kind);
  uint64_t have = part.load(std::memory_order_relaxed);
  uint64_t mine = slot->used[dev].load(std::memory_order_relaxed);
  uint64_t take = bytes < have ? bytes : have;
  if (take > mine) take = mine;
  part.store(have - take, std::memory_order_relaxed);
  slot->used[dev].store(mine - take, std::memory_order_relaxed);
  uint64_t used = r->devices[dev].used.load(std::memory_order_relaxed);
  r->devices[dev].used.store(used >= take ? used - take : 0, std::memory_order_relaxed);
  uint64_t own = g_dev[dev].own.load(std::memory_order_relaxed);
  g_dev[dev].own.store(own >= take ? own - take : 0, std::memory_order_relaxed);
  RegionUnlock(r);
}

uint64_t ReclaimWaitNs(int dev) noexcept {
  Region* r = g_region.region;
  if (!r || dev < 0 || dev >= g_dev_count || g_config.reclaim_wait_ms == 0) return 0;
  if (!g_slot.load(std::memory_order_acquire) || !ReclaimLending(*r, dev)) return 0;
  return static_cast<uint64_t>(g_config.reclaim_wait_ms) * 1'000'000ull;
}

void RequestReclaim(uint64_t bytes) noexcept {
  if (RegionSlot* slot = g_slot.load(std::memory_order_acquire)) RaiseReclaimRequest(*slot, bytes);
}

uint64_t DeviceUsed(int dev) noexcept {
  if (dev < 0 || dev >= g_dev_count) return 0;
  Region* r = g_region.region;
  if (ReapDue(r) && RegionLock(r)) {
    MaybeReapLocked(r);
    RegionUnlock(r);
  }
  return r->devices[dev].used.load(std::memory_order_relaxed);
}

const char* DeviceUuid(int dev) noexcept {
  return dev >= 0 && dev < g_dev_count ? g_region.region->devices[dev].uuid : "";
}

void RecordUse(uint32_t bit) noexcept {
  EnsureInit();  // one acquire load; a process's first CUDA call may be the recorded one
  RegionSlot* slot = ClaimOwnSlot();
  if (slot && (slot->uses.load(std::memory_order_relaxed) & bit) == 0)
    slot->uses.fetch_or(bit, std::memory_order_relaxed);
}

uint64_t ProcessCharged(int dev) noexcept {
  RegionSlot* s = g_slot.load(std::memory_order_acquire);
  return s && dev >= 0 && dev < kMaxDevices ? s->used[dev].load(std::memory_order_relaxed) : 0;
}

uint64_t ProcessCharged(int dev, ChargeKind kind) noexcept {
  RegionSlot* s = g_slot.load(std::memory_order_acquire);
  return s && dev >= 0 && dev < kMaxDevices ? Part(s, dev, kind).load(std::memory_order_relaxed)
                                            : 0;
}

uint64_t DeviceLimit(int dev) noexcept {
  return dev >= 0 && dev < g_dev_count ? g_dev[dev].limit : 0;
}

Region* SharedRegion() noexcept { return g_region.region; }

RegionSlot* ClaimOwnSlot() noexcept { return g_region.region ? EnsureSlot() : nullptr; }

void RecordUnwakeable() noexcept {
  // No EnsureInit here: called from the dlsym hook, possibly inside the dynamic loader. The
  // pending word reaches the slot when it is claimed; a slot already claimed gets it now (both
  // sides seq_cst, so one of them sees the other's write).
  if (g_pending_uses.fetch_or(kSlotUnwakeable, std::memory_order_seq_cst) & kSlotUnwakeable) return;
  if (RegionSlot* s = g_slot.load(std::memory_order_seq_cst))
    s->uses.fetch_or(kSlotUnwakeable, std::memory_order_relaxed);
}

}  // namespace fracgpu::vgpu
