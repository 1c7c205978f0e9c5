#include "enforce/region_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "vgpu/region.h"

namespace fracgpu::enforce {
namespace {

using api::Region;

RegionCopy AllocateCopy() {
  return RegionCopy(
      static_cast<Region*>(::operator new(sizeof(Region), std::align_val_t(alignof(Region)))));
}

Status Fail(RegionReadInfo* info, RegionFault fault, Status status) {
  info->fault = fault;
  return status;
}

// Names the header field RegionValidate refused (it only says kBadLayout).
Status DescribeBadLayout(const Region& r, RegionReadInfo* info) {
  auto field = [&](const char* name, uint64_t got, uint64_t want, RegionFault fault) {
    return Fail(info, fault,
                InvalidArgument(std::string("region ") + name + " is " + std::to_string(got) +
                                ", want " + std::to_string(want)));
  };
  if (r.magic != api::kRegionMagic)
    return field("magic", r.magic, api::kRegionMagic, RegionFault::kBadMagic);
  if (r.version != api::kRegionVersion)
    return field("version", r.version, api::kRegionVersion, RegionFault::kBadVersion);
  if (r.region_size != sizeof(Region))
    return field("region_size", r.region_size, sizeof(Region), RegionFault::kBadLayout);
  if (r.slot_size != sizeof(api::RegionSlot))
    return field("slot_size", r.slot_size, sizeof(api::RegionSlot), RegionFault::kBadLayout);
  if (r.max_devices != static_cast<uint32_t>(api::kMaxDevices))
    return field("max_devices", r.max_devices, api::kMaxDevices, RegionFault::kBadLayout);
  if (r.max_slots != static_cast<uint32_t>(api::kMaxSlots))
    return field("max_slots", r.max_slots, api::kMaxSlots, RegionFault::kBadLayout);
  return Fail(info, RegionFault::kBadLayout,
              InvalidArgument("region device_count is " + std::to_string(r.device_count) +
                              ", want <= " + std::to_string(api::kMaxDevices)));
}

// Validates a filled copy; on success hands it back.
Result<RegionCopy> Validate(RegionCopy copy, RegionReadInfo* info) {
  info->magic = copy->magic;
  info->version = copy->version;
  if (vgpu::RegionValidate(copy.get(), sizeof(Region)) != vgpu::RegionError::kOk)
    return DescribeBadLayout(*copy, info);
  return copy;
}

}  // namespace

void RegionCopyDelete::operator()(Region* r) const {
  ::operator delete(r, std::align_val_t(alignof(Region)));
}

const char* RegionFaultReason(RegionFault fault) {
  switch (fault) {
    case RegionFault::kNone:
      return "";
    case RegionFault::kMissing:
      return "missing";
    case RegionFault::kOpen:
    case RegionFault::kStat:
    case RegionFault::kRead:
      return "unreadable";
    case RegionFault::kNotRegular:
      return "not_regular";
    case RegionFault::kSize:
      return "size";
    case RegionFault::kTruncated:
      return "truncated";
    case RegionFault::kBadMagic:
      return "bad_magic";
    case RegionFault::kBadVersion:
      return "bad_version";
    case RegionFault::kBadLayout:
      return "bad_layout";
  }
  return "";
}

Result<RegionCopy> CopyRegion(const void* data, size_t size, RegionReadInfo* info) {
  RegionReadInfo local;
  if (info == nullptr) info = &local;
  *info = RegionReadInfo{};
  if (data == nullptr || size != sizeof(Region)) {
    return Fail(info, RegionFault::kSize,
                InvalidArgument("region file size is " + std::to_string(size) + " bytes, want " +
                                std::to_string(sizeof(Region))));
  }
  RegionCopy copy = AllocateCopy();
  std::memcpy(static_cast<void*>(copy.get()), data, sizeof(Region));
  return Validate(std::move(copy), info);
}

Result<RegionCopy> ReadRegion(const std::string& path, const RegionReadOptions& options,
                              RegionReadInfo* info) {
  RegionReadInfo local;
  if (info == nullptr) info = &local;
  *info = RegionReadInfo{};
  // O_NONBLOCK: a FIFO planted in place of the file must not block the reader.
  int flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | (options.follow_symlink ? 0 : O_NOFOLLOW);
  int fd = ::open(path.c_str(), flags);
  if (fd < 0) {
    int err = errno;
    info->error_number = err;
    std::string msg = path + ": " + std::strerror(err);
    if (err == ENOENT) return Fail(info, RegionFault::kMissing, NotFound(msg));
    return Fail(info, RegionFault::kOpen, Unavailable(msg));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    info->error_number = errno;
    return Fail(info, RegionFault::kStat,
                Unavailable(path + ": fstat: " + std::strerror(info->error_number)));
  }
  info->file_size = static_cast<uint64_t>(st.st_size);
  if (!S_ISREG(st.st_mode)) {
    info->directory = S_ISDIR(st.st_mode);
    return Fail(info, RegionFault::kNotRegular, InvalidArgument(path + ": not a regular file"));
  }
  if (info->file_size != sizeof(Region)) {
    return Fail(info, RegionFault::kSize,
                InvalidArgument(path + ": size is " + std::to_string(st.st_size) + " bytes, want " +
                                std::to_string(sizeof(Region))));
  }
  RegionCopy copy = AllocateCopy();
  size_t got = 0;
  auto* bytes = reinterpret_cast<char*>(copy.get());
  while (got < sizeof(Region)) {
    ssize_t n = ::pread(fd, bytes + got, sizeof(Region) - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      info->error_number = errno;
      return Fail(info, RegionFault::kRead,
                  Unavailable(path + ": read: " + std::strerror(info->error_number)));
    }
    if (n == 0) {
      info->bytes_read = got;
      return Fail(info, RegionFault::kTruncated,
                  InvalidArgument(path + ": truncated while read at " + std::to_string(got) +
                                  " of " + std::to_string(sizeof(Region)) + " bytes"));
    }
    got += static_cast<size_t>(n);
  }
  auto valid = Validate(std::move(copy), info);
  if (!valid.ok()) return valid.status().WithPrefix(path);
  return valid;
}

}  // namespace fracgpu::enforce
