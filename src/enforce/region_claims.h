#pragma once
// A region file's per-process claims (src/api/region.h, layout version 2), read as untrusted
// input with the one region reader (enforce/region_reader.h: exactly sizeof(api::Region) bytes,
// no symlink, RegionValidate), active slots only.
// The claims are what libvgpu.so says each process holds; the enforcement core compares them
// with the driver's account, never believes them.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace fracgpu::enforce {

/// GPU UUID → host PID → bytes its active slot claims (slots without a host PID are keyed by
/// their PID, which is the host PID outside a PID namespace).
using Claims = std::map<std::string, std::map<uint32_t, uint64_t>>;

/// Reads the claims of the region file at `path`. Devices the region lists without a UUID are
/// named by `uuid_of_ordinal[d]` (the container's NVIDIA_VISIBLE_DEVICES order).
/// Errors: kNotFound (no file), kUnavailable (cannot open/read), kInvalidArgument (not a
/// regular file, wrong size, fails RegionValidate: e.g. a zeroed file, naming what is wrong).
Result<Claims> ReadRegionClaims(const std::string& path,
                                const std::vector<std::string>& uuid_of_ordinal);

}  // namespace fracgpu::enforce
