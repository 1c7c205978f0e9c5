#include "monitor/region_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <new>

#include "vgpu/region.h"

namespace fracgpu::monitor {
namespace {

using vgpu::Region;

// An aligned private copy of one region (the file's bytes need not be aligned in the caller's
// buffer; Region holds atomics and a pthread mutex, so we read through an aligned copy).
struct AlignedDelete {
  void operator()(Region* r) const { ::operator delete(r, std::align_val_t(alignof(Region))); }
};
using RegionCopy = std::unique_ptr<Region, AlignedDelete>;

RegionCopy AllocateCopy() {
  return RegionCopy(
      static_cast<Region*>(::operator new(sizeof(Region), std::align_val_t(alignof(Region)))));
}

uint64_t SatAdd(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

void SetReason(std::string* out, const char* reason) {
  if (out != nullptr) *out = reason;
}

// The uuid field, up to its first NUL (never past kUuidSize), with anything but printable
// ASCII replaced by '?', so a hostile byte cannot break a label.
std::string SafeUuid(const char (&raw)[vgpu::kUuidSize]) {
  size_t n = 0;
  while (n < sizeof(raw) && raw[n] != '\0') ++n;
  std::string out(raw, n);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  return out;
}

// Names the header field RegionValidate refused (it only says kBadLayout).
Status DescribeBadLayout(const Region& r, std::string* reason) {
  auto field = [&](const char* name, uint64_t got, uint64_t want, const char* why) {
    SetReason(reason, why);
    return InvalidArgument(std::string("region ") + name + " is " + std::to_string(got) +
                           ", want " + std::to_string(want));
  };
  if (r.magic != vgpu::kRegionMagic)
    return field("magic", r.magic, vgpu::kRegionMagic, "bad_magic");
  if (r.version != vgpu::kRegionVersion)
    return field("version", r.version, vgpu::kRegionVersion, "bad_version");
  if (r.region_size != sizeof(Region))
    return field("region_size", r.region_size, sizeof(Region), "bad_layout");
  if (r.slot_size != sizeof(vgpu::RegionSlot))
    return field("slot_size", r.slot_size, sizeof(vgpu::RegionSlot), "bad_layout");
  if (r.max_devices != static_cast<uint32_t>(vgpu::kMaxDevices))
    return field("max_devices", r.max_devices, vgpu::kMaxDevices, "bad_layout");
  if (r.max_slots != static_cast<uint32_t>(vgpu::kMaxSlots))
    return field("max_slots", r.max_slots, vgpu::kMaxSlots, "bad_layout");
  SetReason(reason, "bad_layout");
  return InvalidArgument("region device_count is " + std::to_string(r.device_count) +
                         ", want <= " + std::to_string(vgpu::kMaxDevices));
}

Result<RegionContents> ParseAligned(const Region& r, std::string* reason) {
  if (vgpu::RegionValidate(&r, sizeof(Region)) != vgpu::RegionError::kOk)
    return DescribeBadLayout(r, reason);
  RegionContents out;
  // RegionValidate bounds device_count; clamp again so this loop never depends on it.
  const int devices = static_cast<int>(std::min<uint32_t>(r.device_count, vgpu::kMaxDevices));
  out.priority = r.priority;
  out.devices.resize(static_cast<size_t>(devices));
  for (int d = 0; d < devices; ++d) {
    const vgpu::RegionDevice& rd = r.devices[d];
    SliceDevice& sd = out.devices[static_cast<size_t>(d)];
    sd.index = d;
    sd.uuid = SafeUuid(rd.uuid);
    sd.memory_limit_bytes = rd.memory_limit;
    sd.sm_limit_percent = rd.sm_limit;
    sd.fail_closed = (rd.flags & vgpu::kDeviceFailClosed) != 0;
    sd.last_launch_ns = rd.last_launch_ns.load(std::memory_order_relaxed);
  }
  for (int s = 0; s < vgpu::kMaxSlots; ++s) {
    const vgpu::RegionSlot& slot = r.slots[s];
    if (slot.state.load(std::memory_order_relaxed) != vgpu::kSlotActive) continue;
    ++out.active_slots;
    if (slot.host_pid > 0) {
      out.host_pids.push_back(slot.host_pid);
    } else {
      ++out.slots_without_host_pid;
    }
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
  if (data == nullptr || size != sizeof(Region)) {
    SetReason(reason, "size");
    return InvalidArgument("region file size is " + std::to_string(size) + " bytes, want " +
                           std::to_string(sizeof(Region)));
  }
  RegionCopy copy = AllocateCopy();
  std::memcpy(static_cast<void*>(copy.get()), data, sizeof(Region));
  return ParseAligned(*copy, reason);
}

Result<RegionContents> ReadRegionFile(const std::string& path, std::string* reason) {
  // O_NONBLOCK: a FIFO planted in place of the file must not block the scan.
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    SetReason(reason, err == ENOENT ? "missing" : "unreadable");
    std::string msg = path + ": " + std::strerror(err);
    return err == ENOENT ? NotFound(msg) : Unavailable(msg);
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    SetReason(reason, "unreadable");
    return Unavailable(path + ": fstat: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    SetReason(reason, "not_regular");
    return InvalidArgument(path + ": not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) != sizeof(Region)) {
    SetReason(reason, "size");
    return InvalidArgument(path + ": size is " + std::to_string(st.st_size) + " bytes, want " +
                           std::to_string(sizeof(Region)));
  }
  RegionCopy copy = AllocateCopy();
  size_t got = 0;
  auto* bytes = reinterpret_cast<char*>(copy.get());
  while (got < sizeof(Region)) {
    ssize_t n = ::pread(fd, bytes + got, sizeof(Region) - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      SetReason(reason, "unreadable");
      return Unavailable(path + ": read: " + std::strerror(errno));
    }
    if (n == 0) {
      SetReason(reason, "truncated");
      return InvalidArgument(path + ": truncated while read at " + std::to_string(got) + " of " +
                             std::to_string(sizeof(Region)) + " bytes");
    }
    got += static_cast<size_t>(n);
  }
  auto parsed = ParseAligned(*copy, reason);
  if (!parsed.ok()) return parsed.status().WithPrefix(path);
  return parsed;
}

}  // namespace fracgpu::monitor
