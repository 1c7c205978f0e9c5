#pragma once
// The shared region's byte layout: one memory-mapped file per container
// (CUDA_DEVICE_MEMORY_SHARED_CACHE) through which every process of the container charges device
// memory against one limit. Written by libvgpu.so (vgpu/region.cc holds the functions that
// open, lock, claim and reap it); read by the monitor, the enforcer and `fracgpu inspect`
// (enforce/region_reader.h). Header-only, no dependencies (libvgpu.so includes it).
//
// Layout version 2 (kRegionVersion; docs/vgpu.md "The shared region"). Any change to these structs
// must bump the version; a reader refuses a file whose magic, version or sizes differ
// (vgpu::RegionValidate). Version 2 added RegionDevice::last_launch_ns, RegionSlot::host_pid and
// the per-slot breakdown context_bytes / module_bytes / data_bytes (see docs/vgpu.md "Region
// layout"). Naming the SM limiter's words of RegionDevice (next_ns .. count_ema, formerly
// reserved[0..5]) moved no byte, nor did naming RegionSlot::uses (formerly the first half of
// reserved[0], zero in every older file), nor did the reclaim words (Region::reclaim_lending,
// formerly pad; RegionSlot::reclaim_requests and reclaim_bytes, formerly reserved[0..1]): the
// offsets below are the ones version 2 was pinned with.
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

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace fracgpu::api {

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
  /// path), or of its latest driver call that asked for a wake while parked (so that the
  /// agent's idle clock restarts at a wake), 0 = never. Coarse: stamped by the first launch of
  /// each kLaunchStampPeriodNs window of a process (a timer thread of libvgpu.so opens the
  /// windows, so the launch path reads no clock); a reader's "seconds since last kernel" may be
  /// up to that late.
  std::atomic<uint64_t> last_launch_ns;
  // The SM limiter's live state (docs/sm-limiter.md, vgpu/sm_limiter.cc), shared by every
  // process of the container; plain words, accessed only through std::atomic_ref (relaxed).
  uint64_t next_ns;    ///< pacing horizon: earliest limiter-clock ns of the next launch
  uint64_t gap_ns;     ///< device time to leave between two launches (cost per launch / limit)
  uint64_t period_ns;  ///< limiter-clock ns at which the current control period started
  uint64_t launches;   ///< launches issued in the current period (all processes)
  uint64_t busy_ema;   ///< EMA of the container's busy ns per period (NVML), x1
  uint64_t count_ema;  ///< EMA of launches per period, x1024
  // Parking (issue 36, docs/reclaim.md; formerly reserved[0..1], zero in every older file: no
  // byte moved). Plain words, accessed only through std::atomic_ref (relaxed).
  /// kParkRunning, or kParkParked from just before the node agent's Lock of the container's
  /// processes on this device until after their Unlock. Written by the agent only.
  uint64_t park_state;
  /// Calls of the container's processes that met kParkParked on this device (RequestWakeIfParked):
  /// a count that only grows; the agent wakes the container when it passes the count it read at
  /// park. Written by libvgpu.so.
  uint64_t wake_requests;
};

/// RegionDevice::park_state values.
inline constexpr uint64_t kParkRunning = 0;
inline constexpr uint64_t kParkParked = 1;

/// libvgpu.so's side of the wake: a process about to call the driver on device `d` counts a
/// wake request when the device is parked (its call will then wait inside the driver until the
/// agent has restored and unlocked it). One relaxed load when not parked; no lock, no system
/// call.
inline void RequestWakeIfParked(RegionDevice& d) noexcept {
  if (std::atomic_ref<uint64_t>(d.park_state).load(std::memory_order_relaxed) != kParkRunning)
    std::atomic_ref<uint64_t>(d.wake_requests).fetch_add(1, std::memory_order_relaxed);
}

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
  /// What the process ever did that the CUDA checkpoint API cannot handle (kSlotUses* bits;
  /// NVIDIA/cuda-checkpoint README: no UVM, no IPC), for the node agent's eligibility check.
  /// Bits are only ever added while the slot lives; kSlotUsesRecorded is set at claim by a
  /// libvgpu.so that records them (a slot of an older one reads 0: unknown, not "none").
  std::atomic<uint32_t> uses;
  uint32_t pad2;
  // The reclaim request (issue 36 item 4, docs/reclaim.md "The fallback"; formerly reserved[0..1],
  // zero in every older file: no byte moved). Plain words, accessed only through std::atomic_ref;
  // cleared at claim. Written by libvgpu.so; the node agent trusts neither beyond the slice's
  // grant (it evicts at most min(bytes asked, what the slice lent, grant − the rest it holds)).
  /// Allocations of this process that libvgpu.so charged within the limit and the driver refused
  /// with CUDA_ERROR_OUT_OF_MEMORY on a device the agent marks in Region::reclaim_lending: a count
  /// that only grows (RaiseReclaimRequest). Each such allocation waits, bounded, for the agent to
  /// evict borrowers, then is retried.
  uint64_t reclaim_requests;
  /// The bytes of those allocations, summed: a total that only grows (the agent reads what it
  /// grew by since its last look).
  uint64_t reclaim_bytes;
  uint64_t reserved[13];  ///< unused (zero), kept for the SM limiter (per-process launches)
};

/// RegionSlot::uses bits.
inline constexpr uint32_t kSlotUsedManagedMemory = 1u << 0;  ///< cuMemAllocManaged succeeded
/// cuIpcGetMemHandle or cuIpcOpenMemHandle(_v2) succeeded
inline constexpr uint32_t kSlotUsedIpcMemory = 1u << 1;
/// cuIpcGetEventHandle or cuIpcOpenEventHandle succeeded
inline constexpr uint32_t kSlotUsedIpcEvent = 1u << 2;
/// cuMemExportToShareableHandle or cuMemImportFromShareableHandle (VMM) succeeded
inline constexpr uint32_t kSlotSharedVmmHandle = 1u << 3;
/// cuMemPoolExportToShareableHandle, cuMemPoolImportFromShareableHandle,
/// cuMemPoolExportPointer or cuMemPoolImportPointer succeeded (a pool shared between processes)
inline constexpr uint32_t kSlotSharedPool = 1u << 4;
/// The process holds a CUDA driver function that no wake trampoline guards (a build without
/// them, not x86-64; every trampoline slot taken; a `dlsym` answer of the driver whose symbol is
/// not plainly a function): its call while parked would wait inside the driver without asking for
/// the wake (docs/reclaim.md "Calls libvgpu.so does not hook"), so it must not be parked. An agent
/// that does not know this bit refuses the slot as unknown, which also keeps it running.
inline constexpr uint32_t kSlotUnwakeable = 1u << 5;
/// The slot's libvgpu.so records the bits above (set when the slot is claimed).
inline constexpr uint32_t kSlotUsesRecorded = 1u << 31;

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
  /// Bit d set: the node agent lends the never-allocated part of device d and answers the
  /// reclaim requests of the slots (RegionSlot::reclaim_requests), so an allocation the driver
  /// refuses for lack of physical memory waits for it (issue 36 item 4; formerly `pad`, zero in
  /// every older file: no byte moved). Written by the agent only (WriteReclaimLending, one
  /// 4-byte pwrite); read with std::atomic_ref. The agent sets only bit 0, of one-GPU slices
  /// whose grant it verified.
  uint32_t reclaim_lending;
  std::atomic<uint64_t> last_reap_ns;  ///< CLOCK_MONOTONIC of the last dead-slot sweep
  pthread_mutex_t lock;                ///< robust, process-shared
  RegionDevice devices[kMaxDevices];
  RegionSlot slots[kMaxSlots];
};

/// libvgpu.so's side of the reclaim: whether device `d` (region device index) is marked in
/// Region::reclaim_lending. One relaxed load; the failure path of an allocation only.
inline bool ReclaimLending(const Region& r, int d) noexcept {
  if (d < 0 || d >= 32) return false;
  // atomic_ref of a const object is C++26: the load writes nothing.
  const uint32_t mask = std::atomic_ref<uint32_t>(const_cast<uint32_t&>(r.reclaim_lending))
                            .load(std::memory_order_relaxed);
  return ((mask >> d) & 1u) != 0;
}

/// Counts one reclaim request of `bytes` in `slot` (RegionSlot::reclaim_bytes first, then
/// reclaim_requests with release order, so a reader that sees the count sees the bytes). Two
/// atomic adds; no lock, no system call.
inline void RaiseReclaimRequest(RegionSlot& slot, uint64_t bytes) noexcept {
  std::atomic_ref<uint64_t>(slot.reclaim_bytes).fetch_add(bytes, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(slot.reclaim_requests).fetch_add(1, std::memory_order_release);
}

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
static_assert(offsetof(RegionDevice, next_ns) == 80);  // was reserved[0] .. [5]
static_assert(offsetof(RegionDevice, gap_ns) == 88);
static_assert(offsetof(RegionDevice, period_ns) == 96);
static_assert(offsetof(RegionDevice, launches) == 104);
static_assert(offsetof(RegionDevice, busy_ema) == 112);
static_assert(offsetof(RegionDevice, count_ema) == 120);
static_assert(offsetof(RegionDevice, park_state) == 128);     // was reserved[0]: no byte moved
static_assert(offsetof(RegionDevice, wake_requests) == 136);  // was reserved[1]
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
static_assert(offsetof(RegionSlot, uses) == 536);              // was reserved[0]: no byte moved
static_assert(offsetof(RegionSlot, reclaim_requests) == 544);  // was reserved[0]: no byte moved
static_assert(offsetof(RegionSlot, reclaim_bytes) == 552);     // was reserved[1]
static_assert(offsetof(RegionSlot, reserved) == 560);
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
static_assert(offsetof(Region, reclaim_lending) == 36);  // was pad: no byte moved
static_assert(offsetof(Region, last_reap_ns) == 40);
static_assert(offsetof(Region, lock) == 48);
static_assert(offsetof(Region, devices) == 88);
static_assert(offsetof(Region, slots) == 2392);
static_assert(alignof(Region) == 8);
#endif

}  // namespace fracgpu::api
