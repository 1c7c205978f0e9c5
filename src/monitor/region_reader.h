#pragma once
// The monitor's view of a container's region file (src/api/region.h, layout version 2,
// docs/vgpu.md "The shared region"), read as UNTRUSTED input: the file is written by libvgpu.so
// inside a tenant's container, so a tenant can put anything in it. The bytes come from the one
// hardened region reader (enforce/region_reader.h: exactly sizeof(api::Region) bytes, no
// symlink, regular file only, vgpu::RegionValidate); this summary reads only active slots,
// clamps counts, never takes the region's lock and never trusts a number: sums saturate at
// UINT64_MAX, non-positive host PIDs are dropped, a used total above the limit is reported as
// it is.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace fracgpu::monitor {

/// What one container slice holds on one of its GPUs (one RegionDevice plus the sums over the
/// active slots of that device).
struct SliceDevice {
  int index = 0;                    ///< container-visible ordinal (RegionDevice index)
  std::string uuid;                 ///< "GPU-…"; "" when the region does not name it
  uint64_t memory_limit_bytes = 0;  ///< 0 = unlimited
  uint32_t sm_limit_percent = 0;    ///< as written: 1..100, 0 = unlimited (not clamped)
  uint64_t used_bytes = 0;          ///< Σ active slots used[d] (saturating)
  uint64_t context_bytes = 0;       ///< Σ active slots context_bytes[d]
  uint64_t module_bytes = 0;        ///< Σ active slots module_bytes[d]
  uint64_t data_bytes = 0;          ///< Σ active slots data_bytes[d]
  uint64_t last_launch_ns = 0;      ///< CLOCK_MONOTONIC ns of the latest launch; 0 = never
  bool fail_closed = false;         ///< kDeviceFailClosed set (bad configuration in the container)
  uint64_t park_state = 0;     ///< RegionDevice::park_state as written (api::kParkRunning/Parked)
  uint64_t wake_requests = 0;  ///< RegionDevice::wake_requests as written (a count)

  bool operator==(const SliceDevice&) const = default;
};

/// One active slot's reclaim request words (api::RegionSlot::reclaim_requests, reclaim_bytes;
/// issue 36 item 4), as written: the tenant's, trusted for nothing but to notice a change.
struct SlotReclaim {
  int slot = 0;             ///< the slot's index in the region
  int32_t pid = 0;          ///< RegionSlot::pid (with start_time: which process)
  uint64_t start_time = 0;  ///< RegionSlot::start_time
  uint64_t requests = 0;    ///< reclaim_requests: a count
  uint64_t bytes = 0;       ///< reclaim_bytes: the bytes asked, summed

  bool operator==(const SlotReclaim&) const = default;
};

/// The parsed content of one region file.
struct RegionContents {
  std::vector<SliceDevice> devices;  ///< device_count entries (RegionValidate bounds it to 16)
  std::vector<int32_t> host_pids;    ///< host PIDs (> 0) of active slots, ascending, unique
  int active_slots = 0;              ///< slots with state == kSlotActive
  int slots_without_host_pid = 0;    ///< active slots whose host_pid is 0 or negative
  /// RegionSlot::uses of each active slot, in slot order (api::kSlotUses* bits; the facts of
  /// the parking eligibility, node/checkpoint_eligibility.h).
  std::vector<uint32_t> slot_uses;
  int32_t priority = 0;          ///< CUDA_TASK_PRIORITY as written (0 high, 1 low)
  uint32_t reclaim_lending = 0;  ///< Region::reclaim_lending as written (bit d: device d)
  /// The active slots whose reclaim_requests is not 0, in slot order.
  std::vector<SlotReclaim> slot_reclaims;

  bool operator==(const RegionContents&) const = default;
};

/// Parses `size` bytes of a region file (a copy the caller owns; `data` need not be aligned).
/// Errors (kInvalidArgument, the message names the field and the value): size different from
/// sizeof(api::Region); a layout RegionValidate refuses (magic, version, region_size,
/// slot_size, max_devices, max_slots, device_count are named with their values).
/// On error, `*reason` (when not null) gets a short label for metrics: "size", "bad_magic",
/// "bad_version", "bad_layout".
Result<RegionContents> ParseRegion(const void* data, size_t size, std::string* reason = nullptr);

/// Reads the region file at `path`: open O_RDONLY|O_NOFOLLOW|O_NONBLOCK, must be a regular
/// file of exactly sizeof(api::Region) bytes, copied with one bounded pread, then ParseRegion.
/// Errors: kNotFound (no such file), kUnavailable (cannot open or read, errno text),
/// kInvalidArgument (not a regular file, wrong size, truncated while read, bad layout).
/// Never locks, never maps, never writes. On error, `*reason` (when not null) gets a short
/// label for the `reason` label of fracgpu_monitor_region_skipped_total: "missing",
/// "unreadable", "not_regular", "size", "truncated", or ParseRegion's.
Result<RegionContents> ReadRegionFile(const std::string& path, std::string* reason = nullptr);

}  // namespace fracgpu::monitor
