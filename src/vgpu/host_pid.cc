// Host-PID detection (host_pid.h, docs/sm-limiter.md "Host PIDs"). Compiled once per copy of
// libvgpu.so: the test copy lets the fake NVML emulate a PID namespace.
#include "vgpu/host_pid.h"

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "vgpu/glibc_compat.h"  // first: pins old glibc symbol versions in libvgpu.so
#include "vgpu/interpose.h"
#include "vgpu/platform.h"
#include "vgpu/state.h"

namespace fracgpu::vgpu {
namespace {

std::atomic<int32_t> g_host_pid{0};
std::atomic<uint64_t> g_next_retry_ns{0};
// A fixed period, not base::Backoff: libvgpu.so is C ABI and links nothing of base/.
constexpr uint64_t kRetryPeriodNs = 1'000'000'000;

uint64_t CoarseNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

bool NvmlReady() {
  static std::atomic<bool> ok{false};
  if (ok.load(std::memory_order_acquire)) return true;
  ResolveNvml();
  if (REAL(nvmlInit_v2)() != NVML_SUCCESS) return false;
  ok.store(true, std::memory_order_release);
  return true;
}

bool Contains(const NvmlProcs& procs, unsigned pid) {
  for (unsigned i = 0; i < procs.count; ++i)
    if (procs.pid[i] == pid) return true;
  return false;
}

// True when an active slot other than `self` has claimed host PID `pid`. Caller holds the lock.
bool ClaimedByOther(const Region* r, const RegionSlot* self, unsigned pid) {
  for (const RegionSlot& s : r->slots) {
    if (&s == self || s.state.load(std::memory_order_acquire) != kSlotActive) continue;
    int32_t h = std::atomic_ref<const int32_t>(s.host_pid).load(std::memory_order_relaxed);
    if (h > 0 && static_cast<unsigned>(h) == pid) return true;
  }
  return false;
}

// Indices into `after` of the PIDs that may be this process. Caller holds the lock.
int Candidates(const Region* r, const RegionSlot* self, const NvmlProcs& after,
               const NvmlProcs* before, int out[kMaxNvmlProcs]) {
  int n = 0;
  for (unsigned i = 0; i < after.count; ++i) {
    if (before && before->ok && Contains(*before, after.pid[i])) continue;
    if (ClaimedByOther(r, self, after.pid[i])) continue;
    out[n++] = static_cast<int>(i);
  }
  return n;
}

void Set(RegionSlot* slot, int32_t pid, const char* how) {
  g_host_pid.store(pid, std::memory_order_relaxed);
  std::atomic_ref<int32_t>(slot->host_pid).store(pid, std::memory_order_relaxed);
  Log(kLogInfo, "host PID %d (%s)", static_cast<int>(pid), how);
}

// Candidates under the lock; a probe allocation when several remain. Caller holds the lock.
// Returns the host PID found or 0.
int32_t DecideLocked(Region* r, RegionSlot* slot, int dev, void* ctx, const NvmlProcs* before,
                     bool may_probe, bool* probed) {
  *probed = false;
  NvmlProcs after;
  ListNvmlProcesses(dev, &after);
  if (!after.ok) return 0;
  int cand[kMaxNvmlProcs];
  int n = Candidates(r, slot, after, before, cand);
  if (n == 0 && before) n = Candidates(r, slot, after, nullptr, cand);  // we were listed before
  if (n == 1) return static_cast<int32_t>(after.pid[cand[0]]);
  if (n == 0 || !may_probe || !ctx) return 0;
  // Several processes appeared at once: grow our own usage by the probe and see whose grew.
  CUdeviceptr probe = 0;
  if (REAL(cuCtxPushCurrent_v2)(static_cast<CUcontext>(ctx)) != CUDA_SUCCESS) return 0;
  *probed = true;
  NvmlProcs during;
  if (REAL(cuMemAlloc_v2)(&probe, kHostPidProbeBytes) == CUDA_SUCCESS) {
    ListNvmlProcesses(dev, &during);
    REAL(cuMemFree_v2)(probe);
  }
  CUcontext popped = nullptr;
  REAL(cuCtxPopCurrent_v2)(&popped);
  if (!during.ok) return 0;
  int32_t found = 0;
  int winners = 0;
  for (int k = 0; k < n; ++k) {
    unsigned pid = after.pid[cand[k]];
    unsigned long long was = after.used[cand[k]];
    for (unsigned j = 0; j < during.count; ++j) {
      if (during.pid[j] != pid) continue;
      unsigned long long now = during.used[j];
      if (was != kNvmlValueNotAvailable && now != kNvmlValueNotAvailable &&
          now >= was + kHostPidProbeBytes) {
        found = static_cast<int32_t>(pid);
        ++winners;
      }
    }
  }
  return winners == 1 ? found : 0;
}

// Finds and records the host PID; `before` may be null (retry).
void Decide(int dev, void* ctx, const NvmlProcs* before) {
  RegionSlot* slot = ClaimOwnSlot();
  Region* r = SharedRegion();
  if (!slot || !r) return;
  if (InHostPidNamespace()) {
    Set(slot, static_cast<int32_t>(getpid()), "host PID namespace");
    return;
  }
  // First without a probe; the probe is charged like any allocation (outside the lock: the
  // charge takes it), so it can never take the container above its limit.
  for (int round = 0; round < 2; ++round) {
    bool probe = round == 1;
    if (probe && Charge(dev, kHostPidProbeBytes) != CUDA_SUCCESS) return;
    int32_t pid = 0;
    bool probed = false;
    if (RegionLock(r)) {
      pid = DecideLocked(r, slot, dev, ctx, before, probe, &probed);
      if (pid > 0)
        Set(slot, pid, probed ? "probe allocation" : "the one unclaimed new NVML process");
      RegionUnlock(r);
    }
    if (probe) Uncharge(dev, kHostPidProbeBytes);
    if (pid > 0) return;
  }
  Log(kLogInfo, "host PID not known yet (several candidates); trying again later");
}

}  // namespace

void ListNvmlProcesses(int dev, NvmlProcs* out) noexcept {
  out->ok = false;
  out->count = 0;
  Region* r = SharedRegion();
  if (!r || dev < 0 || dev >= static_cast<int>(r->device_count) || !r->devices[dev].uuid[0]) return;
  if (!NvmlReady()) return;
  nvmlDevice_t handle = nullptr;
  if (REAL(nvmlDeviceGetHandleByUUID)(r->devices[dev].uuid, &handle) != NVML_SUCCESS) return;
  nvmlProcessInfo_t infos[kMaxNvmlProcs];  // on the stack: no allocation
  unsigned count = kMaxNvmlProcs;
  if (REAL(nvmlDeviceGetComputeRunningProcesses_v3)(handle, &count, infos) != NVML_SUCCESS) return;
  for (unsigned i = 0; i < count && i < static_cast<unsigned>(kMaxNvmlProcs); ++i) {
    out->pid[i] = infos[i].pid;
    out->used[i] = infos[i].usedGpuMemory;
    out->count = i + 1;
  }
  out->ok = true;
}

bool InHostPidNamespace() noexcept {
  if (platform::ForeignPidNamespaceForced()) return false;  // the test copy: see platform.h
  char link[64];
  ssize_t n = ::readlink("/proc/self/ns/pid", link, sizeof(link) - 1);
  if (n <= 0) return false;
  link[n] = '\0';
  return std::strcmp(link, "pid:[4026531836]") == 0;
}

int32_t OwnHostPid() noexcept { return g_host_pid.load(std::memory_order_relaxed); }

int32_t HostPidAtClaim() noexcept {
  int32_t known = g_host_pid.load(std::memory_order_relaxed);
  if (known > 0) return known;
  if (!InHostPidNamespace()) return 0;
  int32_t pid = static_cast<int32_t>(getpid());
  g_host_pid.store(pid, std::memory_order_relaxed);
  return pid;
}

void HostPidBeforeContext(int dev, NvmlProcs* before) noexcept {
  before->ok = false;
  before->count = 0;
  if (OwnHostPid() > 0 || InHostPidNamespace()) return;
  ListNvmlProcesses(dev, before);
}

void HostPidAfterContext(int dev, void* ctx, const NvmlProcs* before) noexcept {
  if (OwnHostPid() > 0) return;
  Decide(dev, ctx, before);
}

void HostPidRetry(int dev) noexcept {
  if (OwnHostPid() > 0) return;
  uint64_t now = CoarseNowNs();
  uint64_t next = g_next_retry_ns.load(std::memory_order_relaxed);
  if (now < next || !g_next_retry_ns.compare_exchange_strong(next, now + kRetryPeriodNs)) return;
  CUcontext ctx = nullptr;
  if (REAL(cuCtxGetCurrent)(&ctx) != CUDA_SUCCESS || !ctx) return;
  Decide(dev, ctx, nullptr);
}

void HostPidResetAfterFork() noexcept {
  g_host_pid.store(0, std::memory_order_relaxed);
  g_next_retry_ns.store(0, std::memory_order_relaxed);
}

}  // namespace fracgpu::vgpu
