#include "monitor/region_reader.h"

#include <algorithm>

#include "api/region.h"
#include "enforce/region_reader.h"

namespace fracgpu::monitor {
namespace {

using api::Region;

uint64_t SatAdd(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

void SetReason(std::string* out, const char* reason) {
  if (out != nullptr) *out = reason;
}

// The uuid field, up to its first NUL (never past kUuidSize), with anything but printable
// ASCII replaced by '?', so a hostile byte cannot break a label.
std::string SafeUuid(const char (&raw)[api::kUuidSize]) {
  size_t n = 0;
  while (n < sizeof(raw) && raw[n] != '\0') ++n;
  std::string out(raw, n);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  return out;
}

// The contents of a copy enforce::ReadRegion / CopyRegion validated.
RegionContents Summarize(const Region& r) {
  RegionContents out;
  // RegionValidate bounds device_count; clamp again so this loop never depends on it.
  const int devices = static_cast<int>(std::min<uint32_t>(r.device_count, api::kMaxDevices));
  out.priority = r.priority;
  out.reclaim_lending = r.reclaim_lending;
  out.devices.resize(static_cast<size_t>(devices));
  for (int d = 0; d < devices; ++d) {
    const api::RegionDevice& rd = r.devices[d];
    SliceDevice& sd = out.devices[static_cast<size_t>(d)];
    sd.index = d;
    sd.uuid = SafeUuid(rd.uuid);
    sd.memory_limit_bytes = rd.memory_limit;
    sd.sm_limit_percent = rd.sm_limit;
    sd.fail_closed = (rd.flags & api::kDeviceFailClosed) != 0;
    sd.last_launch_ns = rd.last_launch_ns.load(std::memory_order_relaxed);
    sd.park_state = rd.park_state;
    sd.wake_requests = rd.wake_requests;
  }
  for (int s = 0; s < api::kMaxSlots; ++s) {
    const api::RegionSlot& slot = r.slots[s];
    if (slot.state.load(std::memory_order_relaxed) != api::kSlotActive) continue;
    ++out.active_slots;
    if (slot.host_pid > 0) {
      out.host_pids.push_back(slot.host_pid);
    } else {
      ++out.slots_without_host_pid;
    }
    out.slot_uses.push_back(slot.uses.load(std::memory_order_relaxed));
    if (slot.reclaim_requests != 0)
      out.slot_reclaims.push_back(
          {s, slot.pid, slot.start_time, slot.reclaim_requests, slot.reclaim_bytes});
    for (int d = 0; d < devices; ++d) {
      SliceDevice& sd = out.devices[static_cast<size_t>(d)];
      sd.used_bytes = SatAdd(sd.used_bytes, slot.used[d].load(std::memory_order_relaxed));
      sd.context_bytes =
          SatAdd(sd.context_bytes, slot.context_bytes[d].load(std::memory_order_relaxed));
      sd.module_bytes =
          SatAdd(sd.module_bytes, slot.module_bytes[d].load(std::memory_order_relaxed));
      sd.data_bytes = SatAdd(sd.data_bytes, slot.data_bytes[d].load(std::memory_order_relaxed));
    }
  }
  std::sort(out.host_pids.begin(), out.host_pids.end());
  out.host_pids.erase(std::unique(out.host_pids.begin(), out.host_pids.end()), out.host_pids.end());
  return out;
}

}  // namespace

Result<RegionContents> ParseRegion(const void* data, size_t size, std::string* reason) {
  enforce::RegionReadInfo info;
  auto copy = enforce::CopyRegion(data, size, &info);
  if (!copy.ok()) {
    SetReason(reason, enforce::RegionFaultReason(info.fault));
    return copy.status();
  }
  return Summarize(**copy);
}

Result<RegionContents> ReadRegionFile(const std::string& path, std::string* reason) {
  enforce::RegionReadInfo info;
  auto copy = enforce::ReadRegion(path, {}, &info);
  if (!copy.ok()) {
    SetReason(reason, enforce::RegionFaultReason(info.fault));
    return copy.status();
  }
  return Summarize(**copy);
}

}  // namespace fracgpu::monitor
