#include "monitor/priority.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <set>

#include "api/limits.h"
#include "api/node_gpu.h"
#include "api/region.h"
#include "base/file.h"
#include "base/strings.h"
#include "vgpu/limits.h"

namespace fracgpu::monitor {
namespace {

constexpr size_t kPriorityLimitsMaxBytes = 64 * 1024;
// The region's header and device table: everything before the slots.
constexpr size_t kRegionHead = offsetof(api::Region, slots);

template <typename T>
T LoadAt(const unsigned char* p, size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof v);
  return v;
}

// Reads the head of an untrusted region file; false unless it is a regular file of exactly
// sizeof(api::Region) bytes whose header matches this build's layout.
bool ReadRegionHead(const std::string& path, unsigned char* head) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
            static_cast<uint64_t>(st.st_size) == sizeof(api::Region) &&
            ::pread(fd, head, kRegionHead, 0) == static_cast<ssize_t>(kRegionHead);
  ::close(fd);
  if (!ok) return false;
  return LoadAt<uint32_t>(head, offsetof(api::Region, magic)) == api::kRegionMagic &&
         LoadAt<uint32_t>(head, offsetof(api::Region, version)) == api::kRegionVersion &&
         LoadAt<uint32_t>(head, offsetof(api::Region, region_size)) == sizeof(api::Region) &&
         LoadAt<uint32_t>(head, offsetof(api::Region, slot_size)) == sizeof(api::RegionSlot) &&
         LoadAt<uint32_t>(head, offsetof(api::Region, max_devices)) == api::kMaxDevices &&
         LoadAt<uint32_t>(head, offsetof(api::Region, max_slots)) == api::kMaxSlots &&
         LoadAt<uint32_t>(head, offsetof(api::Region, device_count)) <= api::kMaxDevices;
}

}  // namespace

std::optional<uint64_t> ReadNodeGpuFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  api::NodeGpu node{};
  struct stat st {};
  ssize_t got = -1;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      static_cast<uint64_t>(st.st_size) == sizeof(api::NodeGpu))
    got = ::pread(fd, &node, sizeof node, 0);
  ::close(fd);
  if (got != static_cast<ssize_t>(sizeof node) || node.magic != api::kNodeGpuMagic ||
      node.version != api::kNodeGpuVersion ||
      node.high_last_launch_check != ~node.high_last_launch_ns)
    return std::nullopt;
  return node.high_last_launch_ns;
}

PriorityPublisher::PriorityPublisher(std::string hook_path, std::string node_dir)
    : hook_path_(std::move(hook_path)), node_dir_(std::move(node_dir)) {}

void PriorityPublisher::Rescan() {
  containers_.clear();
  const std::string limits_dir = api::HostLimitsDir(hook_path_);
  DIR* d = ::opendir(limits_dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d)) {
    const std::string file = e->d_name;
    const std::string_view slot = api::SlotFromLimitsFileName(file);
    if (slot.empty() || slot.find('/') != std::string_view::npos) continue;
    auto text = base::ReadFile(api::JoinHostPath(limits_dir, file), kPriorityLimitsMaxBytes,
                               {.follow_symlinks = false, .nonblocking = true});
    if (!text.ok()) continue;
    auto config = std::make_unique<vgpu::Config>();
    vgpu::ParseLimitsFile(config.get(), text->data(), text->size());
    vgpu::FinishConfig(config.get());
    if (config->error_count > 0) continue;  // the enforcement reports it
    Container c;
    c.region_path = api::HostRegionFile(hook_path_, slot);
    c.uuids = base::SplitComma(config->visible_devices, {.drop_trailing_empty = true});
    if (c.uuids.size() > static_cast<size_t>(api::kMaxDevices)) c.uuids.resize(api::kMaxDevices);
    c.high = config->priority == 0;
    containers_.push_back(std::move(c));
  }
  ::closedir(d);
}

bool PriorityPublisher::Write(const std::string& uuid, const Published& value) {
  const uint64_t stamp = value.high_stamp;
  if (uuid.empty() || uuid.size() >= api::kUuidSize || uuid.find('/') != std::string::npos ||
      uuid == "." || uuid == "..")
    return false;
  const std::string path = api::JoinHostPath(node_dir_, uuid);
  api::NodeGpu node{};
  node.magic = api::kNodeGpuMagic;
  node.version = api::kNodeGpuVersion;
  node.high_last_launch_ns = stamp;
  node.high_last_launch_check = ~stamp;
  node.contended_until_ns = value.contended_until;
  node.contended_until_check = ~value.contended_until;
  // In place (one 64-byte pwrite; the check word catches a torn read), so a reader never
  // sees the file missing; no symlink followed, anything but a regular file refused.
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  bool ok = false;
  int err = errno;
  if (fd >= 0) {
    struct stat st {};
    ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
         ((st.st_mode & 07777) == 0644 || ::fchmod(fd, 0644) == 0) &&
         (static_cast<uint64_t>(st.st_size) == sizeof node || ::ftruncate(fd, sizeof node) == 0) &&
         ::pwrite(fd, &node, sizeof node, 0) == static_cast<ssize_t>(sizeof node);
    err = errno;
    ::close(fd);
  }
  bool& logged = write_failed_[uuid];
  if (!ok && !logged)
    spdlog::warn(
        "priority: cannot write node file {}: {} (priority-1 containers on {} run "
        "unheld)",
        path, std::strerror(err), uuid);
  logged = !ok;
  return ok;
}

void PriorityPublisher::Poll(uint64_t now_ns) {
  if (!scanned_ || now_ns < scanned_at_ || now_ns - scanned_at_ >= kRescanNs) {
    Rescan();
    scanned_ = true;
    scanned_at_ = now_ns;
    published_.clear();  // every file rewritten once per rescan: one removed or edited heals
    contended_until_.clear();
  }
  std::map<std::string, uint64_t> stamps;
  // Per GPU, the newest and second-newest last launch of distinct containers (contention).
  std::map<std::string, std::pair<uint64_t, uint64_t>> newest;
  auto head = std::make_unique<unsigned char[]>(kRegionHead);
  for (const Container& c : containers_) {
    for (const auto& uuid : c.uuids)
      if (!uuid.empty()) stamps.emplace(uuid, 0);
    // Every container's region: priority-0 ones for the priority stamp, all for contention.
    if (!ReadRegionHead(c.region_path, head.get())) continue;
    const uint32_t count = LoadAt<uint32_t>(head.get(), offsetof(api::Region, device_count));
    for (uint32_t d = 0; d < count && d < c.uuids.size(); ++d) {
      const size_t dev = offsetof(api::Region, devices) + d * sizeof(api::RegionDevice);
      char uuid[api::kUuidSize];
      std::memcpy(uuid, head.get() + dev + offsetof(api::RegionDevice, uuid), sizeof uuid);
      uuid[api::kUuidSize - 1] = '\0';
      // The region's own device list must name the GPU the limits file gives at that index.
      if (c.uuids[d].empty() || ::strcasecmp(uuid, c.uuids[d].c_str()) != 0) continue;
      const uint64_t last =
          LoadAt<uint64_t>(head.get(), dev + offsetof(api::RegionDevice, last_launch_ns));
      if (last == 0 || last > now_ns) continue;  // never, or in the future: forged
      auto& [first, second] = newest[c.uuids[d]];
      if (last > first) {
        second = first;
        first = last;
      } else if (last > second) {
        second = last;
      }
      if (!c.high) continue;
      uint64_t& s = stamps[c.uuids[d]];
      if (last > s) s = last;
    }
  }
  for (const auto& [uuid, stamp] : stamps) {
    Published value{stamp, 0};
    auto n = newest.find(uuid);
    if (n != newest.end() && n->second.second != 0)
      value.contended_until = n->second.second + api::kContentionActiveNs;
    auto it = published_.find(uuid);
    if (it != published_.end() && it->second == stamp &&
        contended_until_[uuid] == value.contended_until && !write_failed_[uuid])
      continue;
    if (Write(uuid, value)) {
      published_[uuid] = stamp;
      contended_until_[uuid] = value.contended_until;
    }
  }
}

}  // namespace fracgpu::monitor
