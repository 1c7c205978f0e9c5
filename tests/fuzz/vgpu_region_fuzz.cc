// Fuzz target: the shared-region reader used by the monitor and `fracgpu inspect`
// (RegionValidate, then summing the slots of an accepted region).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "vgpu/region.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fracgpu::vgpu;
  // A region-sized, aligned buffer: the fuzz input overlays its start (magic, sizes, devices).
  std::vector<uint64_t> storage(sizeof(Region) / sizeof(uint64_t) + 1, 0);
  std::memcpy(storage.data(), data, size < sizeof(Region) ? size : sizeof(Region));
  if (size >= 4 && data[0] == 'V') {  // also exercise a well-formed header with fuzzed slots
    Region* r = reinterpret_cast<Region*>(storage.data());
    r->magic = kRegionMagic;
    r->version = kRegionVersion;
    r->region_size = sizeof(Region);
    r->slot_size = sizeof(RegionSlot);
    r->max_devices = kMaxDevices;
    r->max_slots = kMaxSlots;
    r->device_count = data[1] % (kMaxDevices + 2);
  }
  if (RegionValidate(storage.data(), size < sizeof(Region) ? size : sizeof(Region)) ==
          RegionError::kOk ||
      RegionValidate(storage.data(), sizeof(Region)) == RegionError::kOk) {
    const Region* r = reinterpret_cast<const Region*>(storage.data());
    uint64_t total = 0;
    for (uint32_t d = 0; d < r->device_count; ++d) total += RegionSumSlots(r, static_cast<int>(d));
    (void)total;
  }
  return 0;
}
