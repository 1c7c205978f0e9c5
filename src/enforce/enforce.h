#pragma once
// The enforcement core (docs/enforcement.md): from what the driver says (NVML's per-process
// used memory and per-process SM utilisation, host PIDs), which container each process belongs
// to, and each container's limits and region claims, decide whether every fracgpu container is
// within its slice, and what to do when it is not. No I/O of its own: the node agent
// (`fracgpu monitor`) and `fracgpu run` gather the inputs and carry out the actions, and the
// tests drive it directly.
//
//   enforce::Enforcer e(policy);
//   for (const Finding& f : e.Evaluate(observation)) {
//     if (f.new_episode) Report(f);           // Event, metric, log line: once per episode
//     if (f.action == Action::kKill) Kill(f.pid, f.start_time);
//   }
//
// The driver's account is the truth: libvgpu.so charges context, module and data memory into
// the region before the driver allocates it, so a compliant container's driver total never
// exceeds its limit (context memory is "within the limit by construction"), and a process's
// driver usage never exceeds its region claim. A container over its limit, or a process whose
// driver usage exceeds what its region claims, went around libvgpu.so (or edited its region).
//
// Not thread-safe: one Evaluate() at a time (the caller's poll loop).

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace fracgpu::enforce {

/// A Kubernetes container (the unit a fracgpu limit applies to). `fracgpu run` uses one
/// synthetic container for its child's process tree.
struct ContainerId {
  std::string pod_uid;
  std::string container;  ///< container name
  auto operator<=>(const ContainerId&) const = default;
  bool operator==(const ContainerId&) const = default;
};

/// One process on one GPU as the driver reports it (nvmlDeviceGetComputeRunningProcesses).
struct DriverProcess {
  uint32_t host_pid = 0;
  uint64_t used_bytes = 0;  ///< nvmlProcessInfo_t.usedGpuMemory, bytes
};

/// One GPU at one poll.
struct GpuSample {
  std::string uuid;     ///< "GPU-…"
  bool managed = true;  ///< a GPU this node's fracgpu manages; unmanaged GPUs are never looked at
  /// false: NVML could not list the processes this poll; the GPU's episodes are neither
  /// advanced nor ended (the caller reports the NVML error).
  bool processes_ok = true;
  std::vector<DriverProcess> processes;
  /// SM utilisation ratio (0..1) per host PID since the previous poll; empty when NVML has no
  /// per-process utilisation (then no SM finding is made for this GPU).
  std::optional<std::map<uint32_t, double>> sm_utilization;
  uint32_t index = 0;  ///< NVML index
};

/// A process the caller mapped to a container (from /proc/<pid>/cgroup on the node, from the
/// child's process tree in `fracgpu run`), with the start time it had when mapped, so an
/// action can check the PID was not reused.
struct ProcessOwner {
  ContainerId container;
  uint64_t start_time = 0;  ///< clock ticks after boot (/proc/<pid>/stat field 22); 0 = unknown
};

/// What to do about a confirmed finding.
enum class Action {
  kNone,    ///< not even reported
  kReport,  ///< Event, metric, log line (once per episode)
  kKill,    ///< report, and SIGKILL the process that took the container over (memory only)
};

/// A fracgpu container's limits (from its read-only limits file, the trusted side) and its
/// region's claims (tenant-writable, so only compared, never believed).
struct ContainerState {
  ContainerId id;
  /// false: the limits file exists but could not be read or parsed; its processes are
  /// reported ("limits_unreadable") and never killed.
  bool limits_ok = true;
  std::string limits_error;  ///< why, when !limits_ok
  std::map<std::string, uint64_t>
      memory_limit_bytes;  ///< GPU UUID → bytes; absent or 0 = unlimited
  std::map<std::string, uint32_t>
      sm_limit_percent;  ///< GPU UUID → 1..100; absent, 0 or 100 = unlimited
  /// false: the region file is missing, unreadable or fails validation (e.g. zeroed by the
  /// tenant) while the container has processes on a GPU.
  bool region_ok = true;
  std::string region_error;  ///< why, when !region_ok
  /// GPU UUID → host PID → bytes the region's active slot of that process claims.
  std::map<std::string, std::map<uint32_t, uint64_t>> claims;
  /// Per-pod opt-in override of the memory action (annotation fracgpu.io/enforcement);
  /// empty = the policy's.
  std::optional<Action> memory_action;
};

/// Everything one poll saw.
struct Observation {
  uint64_t now_ns = 0;  ///< CLOCK_MONOTONIC, ns
  std::vector<GpuSample> gpus;
  std::map<uint32_t, ProcessOwner>
      owners;                 ///< host PID → container; absent = in no container we know
  std::set<uint32_t> exited;  ///< host PIDs NVML listed that were gone when mapped (ignored)
  /// Host PIDs of processes that are, for sure, in a Kubernetes pod container that has no
  /// fracgpu limits (a pod with no GPU request that set NVIDIA_VISIBLE_DEVICES=all) → their
  /// start time. Only these unmanaged processes may be killed (Policy::unmanaged); a process
  /// in no pod (the host's, a driver daemon) or one the caller cannot place is only reported.
  std::map<uint32_t, uint64_t> foreign_pod_processes;
  std::vector<ContainerState> containers;  ///< every fracgpu container of the node
};

/// Kinds of finding; the `reason` label of fracgpu_enforcement_violations_total.
enum class Reason {
  kMemoryOverLimit,   ///< "memory_over_limit": the driver's Σ for the container > its limit
  kRegionMismatch,    ///< "region_mismatch": driver usage > region claim, or region invalid
  kUnmanagedProcess,  ///< "unmanaged_process": a process on a managed GPU in no fracgpu container
  kSmOverLimit,       ///< "sm_over_limit": Σ SM utilisation > limit for the whole window
  kLimitsUnreadable,  ///< "limits_unreadable": a container whose limits file cannot be read
};

/// The label value of `r` (see Reason).
const char* ReasonName(Reason r);
/// "none", "report", "kill".
const char* ActionName(Action a);
/// Parses "report" / "kill" / "none" (the annotation and the flag); false otherwise.
bool ParseAction(const std::string& text, Action* out);

/// What the policy says, per reason.
struct Policy {
  Action memory = Action::kKill;  ///< memory over the limit
  Action region_mismatch = Action::kReport;
  /// A process on a managed GPU in no fracgpu container: kKill kills it only when it is in
  /// Observation::foreign_pod_processes (a pod container fracgpu gave no GPU); any other is
  /// reported.
  Action unmanaged = Action::kReport;
  Action sm = Action::kReport;  ///< never kKill (treated as kReport)
  /// Consecutive polls a memory, region or unmanaged finding must persist before it is
  /// confirmed (reported or acted on). 2 = the default for memory (ignores one
  /// poll's race between reading NVML and reading the region).
  int confirm_polls = 2;
  /// Bytes a container may exceed its memory limit, or a process its claim, without a
  /// finding (0: exact; a real card rounds allocations to its page size, libvgpu.so charges
  /// the rounded size, so 0 holds there too).
  uint64_t memory_slack_bytes = 0;
  /// A process with at most this much driver memory is not reported as unmanaged or as a
  /// mismatch (0: any).
  uint64_t ignore_below_bytes = 0;
  uint64_t sm_window_ns = 10'000'000'000ull;  ///< SM over the limit this long → finding
  double sm_slack_ratio = 0.05;               ///< allowed above the SM limit (ratio of the GPU)
};

/// One finding of one poll.
struct Finding {
  Reason reason = Reason::kMemoryOverLimit;
  std::string gpu_uuid;
  std::optional<ContainerId> container;  ///< empty for kUnmanagedProcess
  /// The process acted on or named: for memory, the one that pushed the container over (the
  /// largest usage above its own region claim, then the largest growth since the container's
  /// last poll within its limit, then the largest usage); for a mismatch, the process with the
  /// largest excess.
  uint32_t pid = 0;
  uint64_t start_time = 0;   ///< of `pid` when mapped (0 unknown)
  uint64_t used_bytes = 0;   ///< memory/unmanaged: driver bytes (container Σ, or the process's)
  uint64_t limit_bytes = 0;  ///< memory: the limit
  uint64_t claimed_bytes =
      0;  ///< mismatch: what the region claims for `pid` (Σ when region invalid)
  uint64_t process_bytes = 0;     ///< driver bytes of `pid`
  double sm_ratio = 0;            ///< SM: Σ utilisation ratio of the container
  double sm_limit_ratio = 0;      ///< SM: limit ratio
  int polls = 0;                  ///< consecutive polls this finding has been seen
  bool confirmed = false;         ///< persisted long enough (polls / SM window)
  bool new_episode = false;       ///< first confirmed poll of this episode: report now
  Action action = Action::kNone;  ///< kKill: kill `pid` now (every confirmed poll until it is gone)
  std::string detail;             ///< e.g. the limits file's or region's error

  /// One line with the numbers, e.g. "memory_over_limit on GPU-…: pod p container c uses
  /// 1100.0 MiB of 1000.0 MiB (+100.0 MiB), pushed over by pid 42".
  std::string Describe() const;
};

/// The stateful decider (episodes, consecutive polls, SM windows).
class Enforcer {
 public:
  explicit Enforcer(Policy policy = {}) : policy_(policy) {}
  /// Decides one poll. Returns every current finding whose action is not kNone, confirmed or
  /// not (unconfirmed ones have action kNone and new_episode false), sorted by reason, GPU,
  /// container, pid. Never kills a process of a container whose limits are unreadable, one on
  /// an unmanaged GPU, or one in no fracgpu container unless it is in
  /// Observation::foreign_pod_processes and Policy::unmanaged is kKill.
  std::vector<Finding> Evaluate(const Observation& observation);
  const Policy& policy() const { return policy_; }

 private:
  struct Episode {
    int polls = 0;
    uint64_t since_ns = 0;
    bool reported = false;
  };
  Finding Track(const std::string& key, Finding f, uint64_t now_ns, bool sm,
                std::set<std::string>* seen);

  Policy policy_;
  std::map<std::string, Episode> episodes_;
  // (GPU, pid) → bytes at the last poll its container was within its limit: "which process
  // pushed it over" is the one that grew most since then.
  std::map<std::pair<std::string, uint32_t>, uint64_t> baseline_used_;
};

}  // namespace fracgpu::enforce
