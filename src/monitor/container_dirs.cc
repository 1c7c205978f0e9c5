#include "monitor/container_dirs.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string_view>
#include <system_error>

#include "api/limits.h"

namespace fracgpu::monitor {
namespace {

bool SafePart(const std::string& s) {
  if (s.empty() || s == "." || s == ".." || s.find("..") != std::string::npos) return false;
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == '/') return false;
  }
  return true;
}

}  // namespace

Result<ContainerDir> ParseContainerDirName(const std::string& name) {
  std::string_view pod_uid, container;
  if (!api::SplitPodContainerSlot(name, &pod_uid, &container))
    return InvalidArgument("directory \"" + name + "\" is not <pod UID>_<container>: no '_'");
  ContainerDir d;
  d.name = name;
  d.pod_uid = pod_uid;
  d.container = container;
  if (!SafePart(d.pod_uid) || !SafePart(d.container))
    return InvalidArgument("directory \"" + name +
                           "\" is not <pod UID>_<container>: empty or unsafe part");
  return d;
}

Result<DirScan> ScanContainerDirs(const std::string& root) {
  namespace fs = std::filesystem;
  DirScan scan;
  std::error_code ec;
  fs::directory_iterator it(root, ec);
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory) return scan;
    return Unavailable("cannot read " + root + ": " + ec.message());
  }
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return Unavailable("cannot read " + root + ": " + ec.message());
    std::string name = it->path().filename().string();
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      scan.skipped.push_back({name, "not_directory"});
      continue;
    }
    auto parsed = ParseContainerDirName(name);
    if (!parsed.ok()) {
      scan.skipped.push_back({name, "name"});
      continue;
    }
    parsed->path = (fs::path(root) / name).string();
    scan.dirs.push_back(std::move(*parsed));
  }
  std::sort(scan.dirs.begin(), scan.dirs.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  std::sort(scan.skipped.begin(), scan.skipped.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return scan;
}

std::vector<ContainerDir> OrphanReaper::Due(const std::vector<ContainerDir>& dirs,
                                            const std::vector<std::string>* live_uids,
                                            std::chrono::nanoseconds now) {
  std::vector<ContainerDir> due;
  std::set<std::string> present;
  for (const auto& d : dirs) present.insert(d.name);
  // Directories that disappeared by themselves are forgotten.
  for (auto it = orphaned_since_.begin(); it != orphaned_since_.end();) {
    it = present.count(it->first) ? std::next(it) : orphaned_since_.erase(it);
  }
  if (live_uids == nullptr) return due;  // no authoritative list: decide nothing
  std::set<std::string> live(live_uids->begin(), live_uids->end());
  for (const auto& d : dirs) {
    if (live.count(d.pod_uid)) {
      orphaned_since_.erase(d.name);  // the pod exists: never removed, timer reset
      continue;
    }
    auto [it, inserted] = orphaned_since_.emplace(d.name, now);
    if (!inserted && now - it->second >= grace_) due.push_back(d);
    if (inserted && grace_.count() <= 0) due.push_back(d);
  }
  return due;
}

Status RemoveContainerDir(const ContainerDir& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir.path, ec);  // removes symlinks themselves, never their targets
  if (ec) return Unavailable("cannot remove " + dir.path + ": " + ec.message());
  return Status::Ok();
}

}  // namespace fracgpu::monitor
