#pragma once
// The shared region's functions in libvgpu.so: open (create and initialise), lock with
// dead-holder repair, claim / release / reap process slots. The layout itself (Region,
// RegionDevice, RegionSlot, the constants and the pinned offsets) is the cross-process
// contract in api/region.h; its names are brought into fracgpu::vgpu here. Standalone: only the
// C/C++ runtime and pthreads, no allocation, no exceptions.
#include <pthread.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "api/region.h"

namespace fracgpu::vgpu {

using api::kDeviceFailClosed;
using api::kLaunchStampPeriodNs;
using api::kMaxDevices;
using api::kMaxSlots;
using api::kRegionMagic;
using api::kRegionVersion;
using api::kSlotActive;
using api::kSlotFree;
using api::kSlotSharedPool;
using api::kSlotSharedVmmHandle;
using api::kSlotUnwakeable;
using api::kSlotUsedIpcEvent;
using api::kSlotUsedIpcMemory;
using api::kSlotUsedManagedMemory;
using api::kSlotUsesRecorded;
using api::kUuidSize;
using api::Region;
using api::RegionDevice;
using api::RegionSlot;

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
/// which the kernel drops if the initialiser dies, waited for at most kRegionLockTimeoutNs
/// (then kOpenFailed with errno ETIMEDOUT). Does not allocate heap memory.
/// Returns kOpenFailed (errno set) or kBadLayout.
RegionError RegionOpen(const char* path, const RegionDevice* init, int init_count, uint32_t policy,
                       int32_t priority, RegionHandle* out) noexcept;

/// Unmaps and closes. The slot, if any, must have been released first.
void RegionClose(RegionHandle* handle) noexcept;

/// Checks that `data` (`size` bytes, e.g. a file read by the monitor) is a version-2 region
/// this build understands: magic, version, region and slot sizes, device_count <= 16.
/// Returns kOk or kBadLayout.
RegionError RegionValidate(const void* data, size_t size) noexcept;

/// The longest a process waits for the region's lock or its initialisation flock (ns).
inline constexpr uint64_t kRegionLockTimeoutNs = 2'000'000'000;

/// Locks the region. If the previous holder died, repairs the sums (see the header comment)
/// before returning. Never blocks on a dead holder, and waits at most kRegionLockTimeoutNs on
/// a live one or on a lock word a tenant forged (issue 32 item 5); after such a time-out the
/// process only tries the lock (no wait) until it gets it again. Returns false when the lock
/// was not acquired or the mutex is unusable: the caller must fail closed (one line is written
/// to stderr the first time).
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
