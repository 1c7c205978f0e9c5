#pragma once
// `fracgpu run` and `fracgpu inspect` (issue 3, Build 5): run a command on this machine under
// libvgpu.so limits, and print a region file's per-process, per-device usage.
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "enforce/region_reader.h"
#include "vgpu/region.h"

namespace fracgpu::run {

// The region layout libvgpu.so writes and these commands read (api/region.h, vgpu/region.h).
using vgpu::kDeviceFailClosed;
using vgpu::kMaxDevices;
using vgpu::kRegionVersion;
using vgpu::kSlotActive;
using vgpu::kUuidSize;
using vgpu::Region;
using vgpu::RegionDevice;
using vgpu::RegionSlot;
using vgpu::SlotProcessAlive;

/// What `fracgpu run` was asked for.
struct RunOptions {
  std::string gpumem;   ///< "3000" or "3000,4000": MiB per device, in --devices order
  int gpucores = 0;     ///< percent 0..100; 0 = no SM limit
  std::string devices;  ///< "0,1": NVML indices; "" = device 0 .. (number of gpumem values - 1)
  std::string library;  ///< path of libvgpu.so
  std::string region;  ///< path of the private region file; "" = RunWatched creates one (see there)
  bool keep_region =
      false;  ///< --keep-region: leave the directory RunWatched created (for inspect)
};

/// The environment `fracgpu run` adds (docs/design/CONTRACT.md §4 keys). Errors (kInvalidArgument)
/// name the flag and the value, e.g. `--gpumem: "3g" is not a whole number of MiB`.
Result<std::vector<std::pair<std::string, std::string>>> BuildRunEnvironment(
    const RunOptions& options);

/// A human-readable table of a region: devices (UUID, limit, used, MiB) and active slots
/// (pid, per-device MiB, alive?). `region` must have passed RegionValidate.
std::string FormatRegion(const Region& region);

/// libvgpu.so next to the running fracgpu executable (<dir>/lib/libvgpu.so, as the build
/// tree lays it out), else /usr/local/vgpu/libvgpu.so.
std::string DefaultLibrary();

/// Reads and validates a region file with the hardened reader (enforce/region_reader.h),
/// following a symlink. Errors name the path and what is wrong: kNotFound `region file "<path>":
/// cannot open: <strerror>`; kInvalidArgument `…: is a directory, not a region file`, `…: not a
/// regular file`, `…: cannot read: <strerror>`, `…: not a fracgpu v2 region (<n> bytes,
/// expected <sizeof(Region)>)` (wrong size, truncated, or a layout RegionValidate refuses).
Result<enforce::RegionCopy> ReadRegionFile(const std::string& path);

}  // namespace fracgpu::run
