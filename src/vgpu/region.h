#pragma once
// The shared region: one memory-mapped file per container (CUDA_DEVICE_MEMORY_SHARED_CACHE)
// through which every process of the container charges device memory against one limit.
// Shared by libvgpu.so (writer), the monitor and `fracgpu inspect` (readers). Standalone:
// only the C/C++ runtime and pthreads, no allocation, no exceptions.
//
// Layout version 2 (kRegionVersion; docs/vgpu.md "The shared region"). Any change to these structs
// must bump the version; a reader refuses a file whose magic, version or sizes differ
// (RegionValidate). Version 2 added RegionDevice::last_launch_ns, RegionSlot::host_pid and the
// per-slot breakdown context_bytes / module_bytes / data_bytes (see docs/vgpu.md "Region layout").
//
// Invariants, under `lock` (a process-shared, robust pthread mutex inside the mapping):
//   devices[d].used == Σ over active slots s of slots[s].used[d]
//   slots[s].used[d] == context_bytes[d] + module_bytes[d] + data_bytes[d]  (active slots)
//   devices[d].used <= limit(d) after every successful charge.
// A process that dies holding `lock` makes the next locker get EOWNERDEAD; RegionLock then
// recomputes every devices[d].used from the slots (the dead holder may have updated one
// side only) and marks the mutex consistent, so a dead holder never blocks the others.
// A slot records pid + process start time (/proc/<pid>/stat field 22): a reused PID has a
// different start time, so it never inherits a dead process's charges.
#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace fracgpu::vgpu {

inline constexpr uint32_t kRegionMagic = 0x52564746;  // "FGVR" little-endian
inline constexpr uint32_t kRegionVersion = 2;
inline constexpr int kMaxDevices = 16;
inline constexpr int kMaxSlots = 256;
inline constexpr int kUuidSize = 48;  ///< "GPU-" + 36 chars + NUL fits

/// RegionDevice::flags bits.
inline constexpr uint32_t kDeviceFailClosed = 1;  ///< bad configuration: every allocation OOMs

/// One GPU of the container (index = container-visible ordinal, docs/design/CONTRACT.md §4).
struct RegionDevice {
  char uuid[kUuidSize];        ///< "GPU-…" or "" when unknown (then matched by CUDA ordinal)
  uint64_t memory_limit;       ///< bytes; 0 = unlimited
  uint32_t sm_limit;           ///< percent 1..100; 0 = unlimited
  uint32_t flags;              ///< kDeviceFailClosed
  std::atomic<uint64_t> used;  ///< bytes charged by all active slots
  /// CLOCK_MONOTONIC ns of the container's latest kernel launch on this device (any launch
  /// path), 0 = never. Coarse: stamped at most every kLaunchStampPeriodNs per process, so the
  /// launch path stays cheap; a reader's "seconds since last kernel" may be up to that late.
  std::atomic<uint64_t> last_launch_ns;
  uint64_t reserved[8];  ///< for the SM limiter (utilisation, tokens)
};

/// Granularity of RegionDevice::last_launch_ns: a process re-stamps it only when its own
/// previous stamp is older than this (ns).
inline constexpr uint64_t kLaunchStampPeriodNs = 10'000'000;

/// RegionSlot::state values.
inline constexpr uint32_t kSlotFree = 0;
inline constexpr uint32_t kSlotActive = 1;

/// One process of the container.
struct RegionSlot {
  std::atomic<uint32_t> state;  ///< kSlotFree / kSlotActive
  int32_t pid;                  ///< in the container's PID namespace
  /// The same process's PID as the host and NVML see it; 0 = not known yet. Equal to pid
  /// when the process runs in the host's PID namespace (docs/sm-limiter.md "Host PIDs").
  int32_t host_pid;
  uint32_t pad;
  uint64_t start_time;                      ///< clock ticks after boot (/proc/<pid>/stat field 22)
  std::atomic<uint64_t> used[kMaxDevices];  ///< bytes charged by this process per device
  std::atomic<uint64_t> context_bytes[kMaxDevices];  ///< of used: CUDA context overhead
  /// of used: loaded modules and libraries (cuModuleLoad*, cuLibraryLoad*)
  std::atomic<uint64_t> module_bytes[kMaxDevices];
  /// of used: allocations (cuMemAlloc*, pools, arrays, cuMemCreate, ...)
  std::atomic<uint64_t> data_bytes[kMaxDevices];
  uint64_t reserved[16];  ///< for the SM limiter (per-process launches)
};

/// The whole file.
struct Region {
  uint32_t magic;         ///< kRegionMagic once initialised
  uint32_t version;       ///< kRegionVersion
  uint32_t region_size;   ///< sizeof(Region)
  uint32_t slot_size;     ///< sizeof(RegionSlot)
  uint32_t max_devices;   ///< kMaxDevices
  uint32_t max_slots;     ///< kMaxSlots
  uint32_t device_count;  ///< devices in use, <= kMaxDevices
  uint32_t policy;        ///< GPU_CORE_UTILIZATION_POLICY: 0 default, 1 force, 2 disable
  int32_t priority;       ///< CUDA_TASK_PRIORITY: 0 high, 1 low
  uint32_t pad;
  std::atomic<uint64_t> last_reap_ns;  ///< CLOCK_MONOTONIC of the last dead-slot sweep
  pthread_mutex_t lock;                ///< robust, process-shared
  RegionDevice devices[kMaxDevices];
  RegionSlot slots[kMaxSlots];
};

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

// The byte layout of version 2, pinned: libvgpu.so of one build, the monitor, the enforcer and
// `fracgpu inspect` of another read the same file, so a field that moves must fail the build
// (and then take a new kRegionVersion). Values for x86_64 Linux (LP64, glibc's
// 40-byte pthread_mutex_t), read off this layout with offsetof when it was pinned.
#if defined(__x86_64__)
static_assert(sizeof(RegionDevice) == 144);
static_assert(offsetof(RegionDevice, uuid) == 0);
static_assert(offsetof(RegionDevice, memory_limit) == 48);
static_assert(offsetof(RegionDevice, sm_limit) == 56);
static_assert(offsetof(RegionDevice, flags) == 60);
static_assert(offsetof(RegionDevice, used) == 64);
static_assert(offsetof(RegionDevice, last_launch_ns) == 72);
static_assert(offsetof(RegionDevice, reserved) == 80);
static_assert(sizeof(RegionSlot) == 664);
static_assert(offsetof(RegionSlot, state) == 0);
static_assert(offsetof(RegionSlot, pid) == 4);
static_assert(offsetof(RegionSlot, host_pid) == 8);
static_assert(offsetof(RegionSlot, pad) == 12);
static_assert(offsetof(RegionSlot, start_time) == 16);
static_assert(offsetof(RegionSlot, used) == 24);
static_assert(offsetof(RegionSlot, context_bytes) == 152);
static_assert(offsetof(RegionSlot, module_bytes) == 280);
static_assert(offsetof(RegionSlot, data_bytes) == 408);
static_assert(offsetof(RegionSlot, reserved) == 536);
static_assert(sizeof(Region) == 172376);
static_assert(offsetof(Region, magic) == 0);
static_assert(offsetof(Region, version) == 4);
static_assert(offsetof(Region, region_size) == 8);
static_assert(offsetof(Region, slot_size) == 12);
static_assert(offsetof(Region, max_devices) == 16);
static_assert(offsetof(Region, max_slots) == 20);
static_assert(offsetof(Region, device_count) == 24);
static_assert(offsetof(Region, policy) == 28);
static_assert(offsetof(Region, priority) == 32);
static_assert(offsetof(Region, pad) == 36);
static_assert(offsetof(Region, last_reap_ns) == 40);
static_assert(offsetof(Region, lock) == 48);
static_assert(offsetof(Region, devices) == 88);
static_assert(offsetof(Region, slots) == 2392);
static_assert(alignof(Region) == 8);
#endif

/// Result codes of the region functions (no Status: libvgpu.so is standalone).
enum class RegionError {
  kOk = 0,
  kOpenFailed,  ///< open/ftruncate/mmap failed (errno kept)
  kBadLayout,   ///< magic, version or sizes do not match this build
  kNoSlot,      ///< every slot is taken by a live process
};

/// An open region (a mapping of the file).
struct RegionHandle {
  Region* region = nullptr;
  int fd = -1;
};

/// Opens the region file at `path`, creating and initialising it (devices from `init`,
/// `init_count` entries) if it is new or empty; initialisation runs under flock(LOCK_EX),
/// which the kernel drops if the initialiser dies. Does not allocate heap memory.
/// Returns kOpenFailed (errno set) or kBadLayout.
RegionError RegionOpen(const char* path, const RegionDevice* init, int init_count, uint32_t policy,
                       int32_t priority, RegionHandle* out) noexcept;

/// Unmaps and closes. The slot, if any, must have been released first.
void RegionClose(RegionHandle* handle) noexcept;

/// Checks that `data` (`size` bytes, e.g. a file read by the monitor) is a version-2 region
/// this build understands: magic, version, region and slot sizes, device_count <= 16.
/// Returns kOk or kBadLayout.
RegionError RegionValidate(const void* data, size_t size) noexcept;

/// Locks the region. If the previous holder died, repairs the sums (see the header comment)
/// before returning. Never blocks on a dead holder. Returns false only if the mutex is
/// unusable (then the caller must fail closed).
bool RegionLock(Region* region) noexcept;
/// Unlocks the region.
void RegionUnlock(Region* region) noexcept;

/// Start time of process `pid` in clock ticks after boot, from /proc/<pid>/stat field 22;
/// 0 if the process does not exist or /proc cannot be read.
uint64_t ProcessStartTime(pid_t pid) noexcept;

/// True if the slot's process is still the one that claimed it (same pid, same start time).
bool SlotProcessAlive(const RegionSlot& slot) noexcept;

/// Frees the slots of dead processes and subtracts their charges. Caller holds the lock.
/// Returns the number of slots reclaimed.
int RegionReapLocked(Region* region) noexcept;

/// Claims a slot for (pid, start_time), reclaiming dead slots if none is free. Takes the lock.
/// Returns the slot or nullptr (kNoSlot).
RegionSlot* RegionClaimSlot(Region* region, pid_t pid, uint64_t start_time) noexcept;

/// Returns the slot's charges and frees it. Takes the lock.
void RegionReleaseSlot(Region* region, RegionSlot* slot) noexcept;

/// Σ of slots[*].used[device] over active slots (lock-free read, for checks and readers).
uint64_t RegionSumSlots(const Region* region, int device) noexcept;

}  // namespace fracgpu::vgpu
