// Fuzz target: the monitor's region reader (src/monitor/region_reader.h), which parses region
// files written inside tenants' containers (untrusted). Two modes per input:
//  * the raw bytes as a whole file (every size but sizeof(Region) must be refused cleanly);
//  * if the input starts with 'V': a Region-sized buffer with a valid header (device_count
//    from data[1], possibly out of range) whose devices and slots are overlaid with the input,
//    so the slot/device walk, the sums and the label sanitising see arbitrary values.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "monitor/region_reader.h"
#include "vgpu/region.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fracgpu::vgpu;
  std::string reason;
  (void)fracgpu::monitor::ParseRegion(data, size, &reason);
  if (size < 2 || data[0] != 'V') return 0;
  std::vector<uint64_t> storage(sizeof(Region) / sizeof(uint64_t) + 1, 0);
  auto* base = reinterpret_cast<unsigned char*>(storage.data());
  auto* r = reinterpret_cast<Region*>(base);
  // Overlay the input on the devices and, repeated, on the slots.
  size_t devices_at = static_cast<size_t>(reinterpret_cast<unsigned char*>(&r->devices[0]) - base);
  size_t slots_at = static_cast<size_t>(reinterpret_cast<unsigned char*>(&r->slots[0]) - base);
  std::memcpy(base + devices_at, data, std::min(size, slots_at - devices_at));
  for (size_t at = slots_at; at < sizeof(Region) && size > 0; at += size)
    std::memcpy(base + at, data, std::min(size, sizeof(Region) - at));
  r->magic = kRegionMagic;
  r->version = kRegionVersion;
  r->region_size = sizeof(Region);
  r->slot_size = sizeof(RegionSlot);
  r->max_devices = kMaxDevices;
  r->max_slots = kMaxSlots;
  r->device_count = data[1] % (kMaxDevices + 2);
  auto parsed = fracgpu::monitor::ParseRegion(base, sizeof(Region), &reason);
  if (parsed.ok()) {
    // Invariants the exporter relies on, whatever the bytes.
    if (parsed->devices.size() > static_cast<size_t>(kMaxDevices)) __builtin_trap();
    for (int32_t pid : parsed->host_pids)
      if (pid <= 0) __builtin_trap();
    if (parsed->active_slots < 0 || parsed->active_slots > kMaxSlots) __builtin_trap();
  }
  return 0;
}
