#include "enforce/region_claims.h"

#include <cstdio>
#include <cstring>

#include "api/region.h"
#include "enforce/region_reader.h"

namespace fracgpu::enforce {
namespace {

// The claims' own wording of a read error (the monitor's enforcement events quote it).
Status ClaimsError(const std::string& path, const RegionReadInfo& info, const Status& status) {
  switch (info.fault) {
    case RegionFault::kMissing:
      return NotFound(path + ": no region file");
    case RegionFault::kOpen:
      return status;  // kUnavailable "<path>: <strerror>"
    case RegionFault::kStat:
    case RegionFault::kNotRegular:
      return InvalidArgument(path + ": not a regular file");
    case RegionFault::kSize:
      return InvalidArgument(path + ": size " + std::to_string(info.file_size) +
                             " bytes, expected " + std::to_string(sizeof(api::Region)));
    case RegionFault::kRead:
    case RegionFault::kTruncated:
      return InvalidArgument(path + ": truncated while read");
    case RegionFault::kBadMagic:
    case RegionFault::kBadVersion:
    case RegionFault::kBadLayout:
    case RegionFault::kNone:
      break;
  }
  char magic[16];
  std::snprintf(magic, sizeof magic, "0x%x", info.magic);
  return InvalidArgument(path + ": not a valid region (magic " + magic + ", version " +
                         std::to_string(info.version) + ")");
}

}  // namespace

Result<Claims> ReadRegionClaims(const std::string& path,
                                const std::vector<std::string>& uuid_of_ordinal) {
  RegionReadInfo info;
  auto read = ReadRegion(path, {}, &info);
  if (!read.ok()) return ClaimsError(path, info, read.status());
  const api::Region* r = read->get();
  Claims claims;
  const uint32_t devices = r->device_count < static_cast<uint32_t>(api::kMaxDevices)
                               ? r->device_count
                               : api::kMaxDevices;
  for (const api::RegionSlot& s : r->slots) {
    if (s.state.load(std::memory_order_relaxed) != api::kSlotActive) continue;
    int32_t pid = s.host_pid > 0 ? s.host_pid : s.pid;
    if (pid <= 0) continue;
    for (uint32_t d = 0; d < devices; ++d) {
      std::string uuid(r->devices[d].uuid, strnlen(r->devices[d].uuid, api::kUuidSize));
      if (uuid.empty() && d < uuid_of_ordinal.size()) uuid = uuid_of_ordinal[d];
      if (uuid.empty()) continue;
      uint64_t& sum = claims[uuid][static_cast<uint32_t>(pid)];
      uint64_t add = s.used[d].load(std::memory_order_relaxed);
      sum = sum + add < sum ? UINT64_MAX : sum + add;
    }
  }
  return claims;
}

}  // namespace fracgpu::enforce
