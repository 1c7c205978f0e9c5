#pragma once
// The host directory of per-container regions: <hook>/vgpu/containers/<pod UID>_<container>/
// region.cache (docs/device-plugin.md §Allocate). Scanning lists the directories; removal of
// a directory whose pod is gone happens only after it stayed orphaned for a grace period.

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace fracgpu::monitor {

/// One per-container directory.
struct ContainerDir {
  std::string name;  ///< "<pod UID>_<container>"
  std::string path;  ///< <root>/<name>
  std::string pod_uid;
  std::string container;

  bool operator==(const ContainerDir&) const = default;
};

/// An entry of the root that is not a container directory (named for the log and metrics).
struct SkippedEntry {
  std::string name;
  std::string reason;  ///< "name" (not <uid>_<container>), "not_directory" (file or symlink)
};

/// Result of one scan.
struct DirScan {
  std::vector<ContainerDir> dirs;  ///< sorted by name
  std::vector<SkippedEntry> skipped;
};

/// Splits "<pod UID>_<container>" at the first '_' (a Kubernetes container name is a DNS
/// label, so it has no '_'; a UID has none either). Errors: kInvalidArgument naming `name` when
/// either side is empty, there is no '_', or a side holds '/', "..", a NUL or a control byte.
Result<ContainerDir> ParseContainerDirName(const std::string& name);

/// Lists the directories directly under `root` (symlinks are never followed: a symlink is
/// skipped as "not_directory"). A missing root gives an empty scan (no container started
/// yet). Errors: kUnavailable when `root` exists but cannot be read.
Result<DirScan> ScanContainerDirs(const std::string& root);

/// Decides when a directory of a pod that is gone may be removed: only after it was seen
/// orphaned in every poll for at least `grace` (monotonic time passed in by the caller), and
/// only on polls whose pod list succeeded. Not thread-safe.
class OrphanReaper {
 public:
  explicit OrphanReaper(std::chrono::nanoseconds grace) : grace_(grace) {}
  /// Updates the orphan timers from one poll: `dirs` now present, `live_uids` the UIDs of the
  /// node's pods (nullptr = the list failed: timers are kept, nothing is due). Returns the
  /// directories due for removal (orphaned for >= grace), in name order.
  std::vector<ContainerDir> Due(const std::vector<ContainerDir>& dirs,
                                const std::vector<std::string>* live_uids,
                                std::chrono::nanoseconds now);
  /// Forgets a directory (after removing it).
  void Forget(const std::string& name) { orphaned_since_.erase(name); }

 private:
  std::chrono::nanoseconds grace_;
  std::map<std::string, std::chrono::nanoseconds> orphaned_since_;
};

/// Removes a container directory (no symlink is followed). Errors: kUnavailable naming the
/// path and the error.
Status RemoveContainerDir(const ContainerDir& dir);

}  // namespace fracgpu::monitor
