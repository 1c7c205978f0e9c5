// The SM limiter (sm_limiter.h, docs/sm-limiter.md). Its clocks and node directory come from
// the platform seam (platform.h): the test copy of libvgpu.so links the fake's virtual clock.
#include "vgpu/sm_limiter.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "vgpu/glibc_compat.h"  // first: pins old glibc symbol versions in libvgpu.so
#include "vgpu/host_pid.h"
#include "vgpu/interpose.h"
#include "vgpu/platform.h"
#include "vgpu/state.h"

namespace fracgpu::vgpu {
namespace {

// Clocks and the node directory come from the platform seam (platform.h), chosen at link
// time: real ones in libvgpu.so, the fake driver's virtual clock in the test copy.
using platform::NvmlNowUs;
using platform::SleepUntilNs;

// One of the limiter's words of RegionDevice (plain uint64_t in the shared layout).
std::atomic_ref<uint64_t> Field(uint64_t& word) { return std::atomic_ref<uint64_t>(word); }

// Busy ns of the container's processes on device `dev` over the last `window_ns`, from
// nvmlDeviceGetProcessUtilization; false when NVML cannot say.
bool ContainerBusyNs(Region* r, int dev, uint64_t window_ns, uint64_t* busy) noexcept {
  static std::atomic<bool> nvml_ok{false};
  if (!nvml_ok.load(std::memory_order_relaxed)) {
    if (REAL(nvmlInit_v2)() != NVML_SUCCESS) return false;
    nvml_ok.store(true, std::memory_order_relaxed);
  }
  nvmlDevice_t handle = nullptr;
  if (REAL(nvmlDeviceGetHandleByUUID)(r->devices[dev].uuid, &handle) != NVML_SUCCESS) return false;
  // NVML samples cover at most the last second (its sampling buffer); after an idle gap the
  // period is longer, and the percentage then applies to that last second only.
  if (window_ns > 1'000'000'000ull) window_ns = 1'000'000'000ull;
  nvmlProcessUtilizationSample_t samples[64];  // on the stack: no allocation
  unsigned count = 64;
  uint64_t now_us = NvmlNowUs();
  uint64_t since = now_us > window_ns / 1000 ? now_us - window_ns / 1000 : 0;
  nvmlReturn_t rc = REAL(nvmlDeviceGetProcessUtilization)(handle, samples, &count, since);
  *busy = 0;
  if (rc == NVML_ERROR_NOT_FOUND) return true;  // nobody ran a kernel in the window
  if (rc != NVML_SUCCESS) return false;
  // NVML reports host PIDs: match each slot's host_pid; a slot whose host PID is not known
  // yet counts by its own pid only where the container shares the host's PID namespace.
  // Computed once; an atomic rather than a function-local static, whose guard would pull
  // libstdc++'s __cxa_guard (and glibc >= 2.34 symbols) into libvgpu.so.
  static std::atomic<int> host_ns_state{0};  // 0 unknown, 1 host namespace, 2 own namespace
  int ns = host_ns_state.load(std::memory_order_relaxed);
  if (ns == 0) {
    ns = InHostPidNamespace() ? 1 : 2;
    host_ns_state.store(ns, std::memory_order_relaxed);
  }
  bool host_ns = ns == 1;
  uint64_t pct = 0;
  for (unsigned k = 0; k < count && k < 64; ++k) {
    for (const RegionSlot& slot : r->slots) {
      if (slot.state.load(std::memory_order_relaxed) != kSlotActive) continue;
      int32_t host_pid =
          std::atomic_ref<const int32_t>(slot.host_pid).load(std::memory_order_relaxed);
      int32_t match = host_pid > 0 ? host_pid : (host_ns ? slot.pid : 0);
      if (match > 0 && static_cast<unsigned>(match) == samples[k].pid) {
        pct += samples[k].smUtil;
        break;
      }
    }
  }
  *busy = pct * window_ns / 100;
  return true;
}

// One control step: feeds back the measured utilisation of the period that just ended.
void Control(Region* r, int dev, uint64_t period_ns, uint32_t limit) noexcept {
  RegionDevice& d = r->devices[dev];
  uint64_t launches = Field(d.launches).exchange(0, std::memory_order_relaxed);
  uint64_t busy = 0;
  if (!ContainerBusyNs(r, dev, period_ns, &busy)) return;
  // EMAs with weight 1/2 per period; their ratio is the device time one launch costs.
  uint64_t busy_ema = (Field(d.busy_ema).load() + busy) / 2;
  uint64_t count_ema = (Field(d.count_ema).load() + launches * 1024) / 2;
  Field(d.busy_ema).store(busy_ema);
  Field(d.count_ema).store(count_ema);
  if (count_ema == 0) return;
  uint64_t cost = busy_ema * 1024 / count_ema;  // ns of device time per launch
  Field(d.gap_ns).store(cost * 100 / limit, std::memory_order_relaxed);
}

uint64_t ReadNodeStamp(const char* uuid, bool* usable, bool* contention_ok,
                       uint64_t* contended_until) noexcept {
  *usable = false;
  *contention_ok = false;
  char path[512];
  const char* dir = platform::NodeDirPath();
  size_t dl = strlen(dir), ul = strnlen(uuid, kUuidSize);
  if (ul == 0 || ul >= kUuidSize || dl + 1 + ul >= sizeof(path) || memchr(uuid, '/', ul)) return 0;
  memcpy(path, dir, dl);
  path[dl] = '/';
  memcpy(path + dl + 1, uuid, ul);
  path[dl + 1 + ul] = '\0';
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return 0;
  struct stat st;
  NodeGpu node;
  ssize_t got = -1;
  // The raw system call: glibc's fstat is a GLIBC_2.33 symbol, libvgpu.so must run on 2.17
  // (struct stat is the kernel's layout on x86_64 and aarch64).
  if (syscall(SYS_fstat, fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == sizeof(NodeGpu) &&
      (st.st_uid == 0 || st.st_uid == geteuid()) && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0)
    got = pread(fd, &node, sizeof node, 0);
  close(fd);
  if (got != static_cast<ssize_t>(sizeof node)) return 0;
  uint64_t stamp = api::NodeGpuStamp(node, static_cast<size_t>(got));
  *usable = stamp != 0 || (node.magic == kNodeGpuMagic && node.version == kNodeGpuVersion &&
                           node.high_last_launch_check == ~uint64_t{0});
  *contention_ok = api::NodeGpuContendedUntil(node, static_cast<size_t>(got), contended_until);
  return stamp;
}

// Per region device: what the node file said at the last read and when (limiter clock), so a
// launch reads the file at most once per kNodeFileRefreshNs; races between threads only repeat
// a read (each word is read back on its own; a mixed pair of two reads is harmless: both are
// the agent's).
struct NodeCache {
  std::atomic<uint64_t> stamp{0};
  std::atomic<uint64_t> contended_until{0};
  std::atomic<bool> contention_ok{false};
  std::atomic<uint64_t> read_at{0};
  std::atomic<bool> warned{false};
};
NodeCache g_node_cache[kMaxDevices];

NodeCache& RefreshNode(Region* r, int dev, uint64_t now) noexcept {
  NodeCache& c = g_node_cache[dev];
  uint64_t at = c.read_at.load(std::memory_order_relaxed);
  if (at != 0 && now >= at && now < at + kNodeFileRefreshNs) return c;
  c.read_at.store(now == 0 ? 1 : now, std::memory_order_relaxed);
  bool usable = false, contention_ok = false;
  uint64_t until = 0;
  uint64_t stamp = ReadNodeStamp(r->devices[dev].uuid, &usable, &contention_ok, &until);
  c.stamp.store(stamp, std::memory_order_relaxed);
  c.contended_until.store(until, std::memory_order_relaxed);
  c.contention_ok.store(contention_ok, std::memory_order_relaxed);
  if ((!usable || !contention_ok) && !c.warned.exchange(true, std::memory_order_relaxed))
    Log(kLogWarning,
        "node file for %.48s missing or not valid: priority not applied and the SM cap held on "
        "it (yet)",
        r->devices[dev].uuid);
  return c;
}

uint64_t HighStamp(Region* r, int dev, uint64_t now) noexcept {
  return RefreshNode(r, dev, now).stamp.load(std::memory_order_relaxed);
}

// GPU_CORE_UTILIZATION_POLICY=default (HAMi's utilization switch, cmd/vGPUmonitor/feedback.go
// CheckPriority): the cap applies only while the GPU is contended, i.e. while the node agent's
// file says two or more containers launched on it within api::kContentionActiveNs. Without the
// node directory, or a valid contention word, the GPU counts as contended (fail closed).
bool Contended(Region* r, int dev, uint64_t now) noexcept {
  if (!g_node_dir) return true;
  NodeCache& c = RefreshNode(r, dev, now);
  if (!c.contention_ok.load(std::memory_order_relaxed)) return true;
  return now < c.contended_until.load(std::memory_order_relaxed);
}

// Priority: a priority-1 launch waits while the node agent's file says a priority-0 container
// launched on this GPU within the last kPriorityIdleNs. A priority-0 process does nothing here:
// its launches are stamped in its own region (RegionDevice::last_launch_ns), which the agent
// reads. Each sleep is at most kPriorityIdleNs (the stamp is never in the future), and a stamp
// that is not fresh, invalid or in the future lets the launch through at once.
void ApplyPriority(Region* r, int dev) noexcept {
  if (r->priority == 0) return;
  for (;;) {
    uint64_t now = LimiterNowNs();  // first: in tests this waits for the simulation turn
    uint64_t last = HighStamp(r, dev, now);
    if (last == 0 || last > now || now - last >= kPriorityIdleNs) return;
    SleepUntilNs(last + kPriorityIdleNs);
  }
}

}  // namespace

bool g_sm_enforce = false;
bool g_sm_cap_when_alone = true;
bool g_node_dir = false;

bool NodeDirPresent() noexcept { return access(platform::NodeDirPath(), R_OK | X_OK) == 0; }

uint64_t LimiterNowNs() noexcept { return platform::NowNs(); }

namespace {
// The calling thread's last current context and its region device, valid while no context
// went away since (g_context_epoch): a launch then asks the driver only for the current
// context (cuCtxGetCurrent), not for its device, and skips the ordinal lookup. Initial-exec
// TLS: libvgpu.so is preloaded, so its TLS is static, and reading it is one %fs-relative load.
struct DeviceCache {
  CUcontext ctx = nullptr;
  uint64_t epoch = 0;
  int dev = kUnmanaged;
};
thread_local DeviceCache t_device_cache __attribute__((tls_model("initial-exec")));

int LaunchDeviceIndex() noexcept {
  CUcontext ctx = nullptr;
  if (REAL(cuCtxGetCurrent)(&ctx) != CUDA_SUCCESS || !ctx) return kUnmanaged;
  uint64_t epoch = g_context_epoch.load(std::memory_order_acquire);
  DeviceCache& c = t_device_cache;
  if (c.ctx == ctx && c.epoch == epoch) return c.dev;
  CUdevice ordinal = 0;
  int dev = CurrentDeviceIndex(&ordinal);
  c = DeviceCache{ctx, epoch, dev};
  return dev;
}
}  // namespace

void PaceLaunch() noexcept {
  int dev = LaunchDeviceIndex();
  Region* r = SharedRegion();
  if (dev < 0 || !r || dev >= static_cast<int>(r->device_count)) return;
  if (g_node_dir) ApplyPriority(r, dev);
  RegionDevice& d = r->devices[dev];
  uint32_t limit = d.sm_limit;
  if (!g_sm_enforce || limit == 0 || limit >= 100) return;
  ClaimOwnSlot();
  if (__builtin_expect(OwnHostPid() == 0, false)) HostPidRetry(dev);  // our samples must count
  uint64_t now = LimiterNowNs();
  // Control step, by whichever process first sees the period end.
  uint64_t period = Field(d.period_ns).load(std::memory_order_relaxed);
  if (period == 0) {
    Field(d.period_ns).compare_exchange_strong(period, now);
  } else if (now >= period + kControlPeriodNs &&
             Field(d.period_ns).compare_exchange_strong(period, now)) {
    Control(r, dev, now - period, limit);
  }
  // Policy default: a container alone on its GPU runs uncapped (the control step above keeps
  // measuring, so the cap is right from the first contended launch).
  if (!g_sm_cap_when_alone && !Contended(r, dev, now)) {
    Field(d.launches).fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // Pace: claim the next slot of the shared horizon (lock-free).
  uint64_t gap = Field(d.gap_ns).load(std::memory_order_relaxed);
  uint64_t next = Field(d.next_ns).load(std::memory_order_relaxed);
  uint64_t at;
  do {
    at = next;
    uint64_t floor = now > kBurstNs ? now - kBurstNs : 0;
    if (at < floor) at = floor;
  } while (!Field(d.next_ns).compare_exchange_weak(next, at + gap, std::memory_order_relaxed));
  Field(d.launches).fetch_add(1, std::memory_order_relaxed);
  if (at > now) SleepUntilNs(at);
}

}  // namespace fracgpu::vgpu
