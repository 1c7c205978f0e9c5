#pragma once
// Host PID → pod UID + container, from /proc/<pid>/cgroup, PID-reuse safe (the start time of
// /proc/<pid>/stat is recorded with every mapping and checked before any action).
//
// cgroup path forms understood (one line per hierarchy; v2 is the single "0::<path>" line;
// v1 lines are "<id>:<controllers>:<path>", the first kubepods path wins):
//   systemd driver  …/kubepods[-<qos>]-pod<uid with '_'>.slice/<runtime>-<container id>.scope
//                   runtime prefix "cri-containerd" (containerd), "crio" (CRI-O), "docker"
//                   (cri-dockerd); a kubelet with a cgroup root adds "kubelet-" in front.
//   cgroupfs driver …/kubepods/[<qos>/]pod<uid>/<container id>
// Components before the pod's (e.g. "/../.." when the reader is in its own cgroup namespace)
// are skipped; components after the container's are ignored: a tenant may create cgroups
// below its own container's, never above it, so the first match from the root is the truth.
// Facts: kubelet's cgroup naming (pkg/kubelet/cm, cgroup_manager_linux.go) and the runtimes'
// scope names, as seen in real /proc/<pid>/cgroup files (docs/enforcement.md "Sources").

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace fracgpu::enforce {

/// What a process's cgroup says.
struct CgroupIdentity {
  std::string pod_uid;       ///< with dashes, e.g. "2ca4a155-3599-498d-bb9d-4446693fa3ea"
  std::string container_id;  ///< 64 hex digits (the CRI container ID without "<runtime>://")
  std::string runtime;       ///< "containerd", "crio", "docker", "" (cgroupfs: unknown)
  bool operator==(const CgroupIdentity&) const = default;
};

/// Upper bound on a /proc/<pid>/cgroup file read (bytes); longer files are refused.
inline constexpr size_t kMaxCgroupFileBytes = 64 * 1024;

/// Parses the text of /proc/<pid>/cgroup. Errors: kNotFound when no line names a Kubernetes
/// pod's container (a host process, a pod sandbox's own cgroup without container);
/// kInvalidArgument (naming the line) when the file is longer than kMaxCgroupFileBytes or a
/// kubepods path has a malformed pod UID or container ID.
Result<CgroupIdentity> ParseCgroupFile(std::string_view text);

/// Parses /proc/<pid>/stat: returns field 22 (starttime, clock ticks after boot). Errors:
/// kInvalidArgument when the text does not have the layout of proc(5) (comm in parentheses,
/// at least 22 fields, a decimal starttime).
Result<uint64_t> ParseStatStartTime(std::string_view text);

/// A process as mapped.
struct ProcessIdentity {
  CgroupIdentity cgroup;
  uint64_t start_time = 0;
};

/// Reads /proc (or a copy of its layout under `proc_root`, for tests).
class ProcReader {
 public:
  explicit ProcReader(std::string proc_root = "/proc") : root_(std::move(proc_root)) {}
  /// Start time of `pid`. Errors: kNotFound (the process is gone), kInvalidArgument (bad stat).
  Result<uint64_t> StartTime(uint32_t pid) const;
  /// Identity of `pid`: start time read before and after the cgroup file, so a PID reused in
  /// between is never mapped to the new process's cgroup under the old one's start time.
  /// Errors: kNotFound (gone, or reused while read: "exited"), ParseCgroupFile's.
  Result<ProcessIdentity> Identify(uint32_t pid) const;
  /// Parent PID of `pid` (field 4 of stat); errors as StartTime.
  Result<uint32_t> ParentPid(uint32_t pid) const;
  const std::string& root() const { return root_; }

 private:
  Result<std::string> ReadSmall(uint32_t pid, const char* file) const;
  std::string root_;
};

/// Maps PIDs with a cache keyed by (pid, start time): a cached entry is used only while the
/// process still has the start time it had when mapped.
class ProcResolver {
 public:
  explicit ProcResolver(const ProcReader* reader) : reader_(reader) {}
  /// As ProcReader::Identify, cached. Call Sweep() after each poll.
  Result<ProcessIdentity> Resolve(uint32_t pid);
  /// Forgets PIDs not resolved since the previous Sweep().
  void Sweep();

 private:
  const ProcReader* reader_;
  struct Entry {
    ProcessIdentity id;
    bool used = false;
  };
  std::map<uint32_t, Entry> cache_;
};

/// Sends SIGKILL to `pid` only if it still has `start_time` (0 = not checked): through a
/// pidfd (pidfd_open + pidfd_send_signal, Linux 5.3+, race-free after the check), else
/// kill(2) right after the check. Errors: kNotFound (gone or reused: nothing sent),
/// kPermissionDenied / kUnavailable with errno text.
Status KillIfSame(const ProcReader& reader, uint32_t pid, uint64_t start_time);

}  // namespace fracgpu::enforce
