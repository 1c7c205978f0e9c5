#include "enforce/region_claims.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "vgpu/region.h"

namespace fracgpu::enforce {

Result<Claims> ReadRegionClaims(const std::string& path,
                                const std::vector<std::string>& uuid_of_ordinal) {
  using vgpu::Region;
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT) return NotFound(path + ": no region file");
    return Unavailable(path + ": " + std::strerror(e));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(path + ": not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) != sizeof(Region)) {
    ::close(fd);
    return InvalidArgument(path + ": size " + std::to_string(st.st_size) + " bytes, expected " +
                           std::to_string(sizeof(Region)));
  }
  auto r = std::make_unique<Region>();  // ≈ 400 KiB: on the heap
  ssize_t n = ::pread(fd, r.get(), sizeof(Region), 0);
  ::close(fd);
  if (n != static_cast<ssize_t>(sizeof(Region)))
    return InvalidArgument(path + ": truncated while read");
  if (vgpu::RegionValidate(r.get(), sizeof(Region)) != vgpu::RegionError::kOk) {
    char magic[16];
    std::snprintf(magic, sizeof magic, "0x%x", r->magic);
    return InvalidArgument(path + ": not a valid region (magic " + magic + ", version " +
                           std::to_string(r->version) + ")");
  }
  Claims claims;
  const uint32_t devices = r->device_count < static_cast<uint32_t>(vgpu::kMaxDevices)
                               ? r->device_count
                               : vgpu::kMaxDevices;
  for (const vgpu::RegionSlot& s : r->slots) {
    if (s.state.load(std::memory_order_relaxed) != vgpu::kSlotActive) continue;
    int32_t pid = s.host_pid > 0 ? s.host_pid : s.pid;
    if (pid <= 0) continue;
    for (uint32_t d = 0; d < devices; ++d) {
      std::string uuid(r->devices[d].uuid, strnlen(r->devices[d].uuid, vgpu::kUuidSize));
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
