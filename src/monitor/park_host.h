#pragma once
// The real adapters of the node agent's parking loop (monitor/parking.h, issue 36 items 1 and 3;
// docs/reclaim.md "Wired into fracgpu monitor"), and the loop `fracgpu monitor --park` runs on
// a thread of its own:
//
//   * the CUDA driver's checkpoint calls, loaded from libcuda.so.1 (cuda.h since CUDA 12.8:
//     cuCheckpointProcessGetState/Lock/Checkpoint/Restore/Unlock, each naming the target pid);
//   * NVML's facts of a GPU (driver version, persistence mode, MIG mode, MPS clients) and its
//     free memory, through an nvml::Library of the loop's own (NVML handles are not shared
//     across threads here);
//   * the host memory of the container (its cgroup's limit and use, cgroup v1 or v2), read from
//     the first CUDA process's /proc/<pid>/cgroup.
//
// Every fact that cannot be read is unknown, and an unknown fact fails closed: the container is
// ineligible and the reason names the call (node::CheckpointFacts::unknown, host_limit_known).
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "enforce/nvml_processes.h"
#include "metrics/registry.h"
#include "monitor/parking.h"
#include "monitor/pods.h"
#include "node/park.h"
#include "nvml/library.h"

namespace fracgpu::monitor {

/// Loads the checkpoint calls of the CUDA driver `library` (dlopen, normally "libcuda.so.1"):
/// cuInit and cuCheckpointProcessGetState, Lock, Checkpoint, Restore and Unlock (cuda.h 13.0
/// signatures, src/vgpu/cuda_api.h types; Lock takes CUcheckpointLockArgs{timeoutMs}, the others
/// no arguments), then calls cuInit(0) once: the agent is long-lived and pays its cost once.
/// The library stays loaded for the life of the process. Errors (kUnavailable): "cannot load
/// the CUDA driver <library>: <dlerror>", "the CUDA driver <library> lacks <symbol> (the
/// checkpoint API needs a CUDA 12.8 or newer driver)", "cuInit(0) of <library> failed:
/// CUresult <n>".
Result<node::CheckpointDriver> LoadCheckpointDriver(const std::string& library);

/// NVML's facts for node::CheckpointEligible, from an NVML this object opens and owns. Not
/// thread-safe: one thread (the parking loop) uses it.
class NvmlParkFacts {
 public:
  /// Opens NVML `library` (nvml::Library; nvmlDeviceGetHandleByUUID and
  /// nvmlDeviceGetMemoryInfo required). The fact getters are looked up but optional: one this
  /// NVML lacks makes its fact unknown. Errors: nvml::Library::Open's.
  static Result<std::unique_ptr<NvmlParkFacts>> Open(const std::string& library);

  /// The facts of GPU `uuid`: driver_version (nvmlSystemGetDriverVersion), persistence_mode
  /// (nvmlDeviceGetPersistenceMode == NVML_FEATURE_ENABLED), mig_enabled (nvmlDeviceGetMigMode's
  /// current mode == NVML_DEVICE_MIG_ENABLE), mps_active
  /// (nvmlDeviceGetMPSComputeRunningProcesses_v3 lists a process). The first call that fails (or an
  /// entry point this NVML lacks) is named in `unknown` ("<call> failed: NVML error <n> (<text>)");
  /// the other fields are then not meaningful. Host memory and the region's facts are left at their
  /// defaults.
  node::CheckpointFacts GpuFacts(const std::string& uuid) const;

  /// NVML's free memory of GPU `uuid`, bytes (nvmlDeviceGetHandleByUUID +
  /// nvmlDeviceGetMemoryInfo). Errors: kUnavailable with the call and NVML's error.
  Result<uint64_t> FreeBytes(const std::string& uuid) const;
  /// NVML's total memory of GPU `uuid`, bytes (nvmlDeviceGetMemoryInfo). Errors: FreeBytes'.
  Result<uint64_t> TotalBytes(const std::string& uuid) const;

 private:
  explicit NvmlParkFacts(std::unique_ptr<nvml::Library> lib);
  Result<nvmlDevice_t> Handle(const std::string& uuid) const;
  /// nvmlDeviceGetMemoryInfo of GPU `uuid` (FreeBytes and TotalBytes read it).
  Result<nvmlMemory_t> MemoryInfo(const std::string& uuid) const;

  std::unique_ptr<nvml::Library> lib_;
};

/// A container's host memory: its memory cgroup's limit and use.
struct HostMemory {
  bool known = false;        ///< both files were read
  uint64_t limit_bytes = 0;  ///< 0 = no limit
  uint64_t used_bytes = 0;
  std::string reason;  ///< why not known: the file or line and the value refused
};

/// Reads the memory cgroup of process `pid` from `<proc_root>/<pid>/cgroup` (64 KiB at most):
/// a cgroup v1 line "N:...memory...:/path" → `<cgroup_root>/memory/<path>/memory.limit_in_bytes`
/// (a limit ≥ 2^62 is none) and memory.usage_in_bytes; otherwise the v2 line "0::/path" →
/// `<cgroup_root>/<path>/memory.max` ("max" is none) and memory.current. The path must be
/// absolute, without "." or ".." components, and every component is opened with O_NOFOLLOW
/// (no symlink leads out of `cgroup_root`); values are at most 32 bytes of decimal digits. Any
/// failure: known = false with the reason.
HostMemory ReadCgroupMemory(const std::string& proc_root, const std::string& cgroup_root, int pid);

/// Builds the ParkHost over `driver`, `nvml` and `processes` (not owned; must outlive the
/// host): facts are nvml->GpuFacts plus the host memory of the first pid's cgroup
/// (ReadCgroupMemory; no pid: unknown); free_bytes is nvml->FreeBytes, 0 when NVML fails (a park
/// then sees nothing released and is undone; a wake sees no room), logged; total_bytes is
/// nvml->TotalBytes, 0 (unknown) when NVML fails; grant is
/// ReadSliceGrant under `limits_dir` (<hook>/vgpu/limits); verify_process maps the pid with the
/// enforcement's mapping (enforce::ProcReader::Identify under `proc_root`, NamedContainer): its
/// pod UID and container must be the directory's, and with on_gpu `processes` must list it on
/// the GPU; start_time is enforce::ProcReader::StartTime; gpu_processes is `processes`'s Sample
/// (no `processes`: unavailable, and the idle-lending fallback lends nothing).
ParkHost MakeParkHost(node::CheckpointDriver driver, NvmlParkFacts* nvml,
                      enforce::ProcessSource* processes, std::string proc_root,
                      std::string cgroup_root, std::string limits_dir);

/// One slice parked, as published to /metrics.
struct ParkedSample {
  std::string namespace_name;  ///< "" when the pod is unknown
  std::string pod;             ///< the pod's name; its UID when unknown
  std::string container;
  std::string device_uuid;
  uint64_t bytes = 0;  ///< device memory the park released
};

/// What the parking thread publishes after each poll for the scrape. Thread-safe.
class ParkedSlices {
 public:
  void Publish(std::vector<ParkedSample> slices);
  std::vector<ParkedSample> Get() const;
  /// The controller's running counts (ParkController::evictions, reclaim_timeouts, refusals).
  void PublishCounts(uint64_t evictions, uint64_t reclaim_timeouts, uint64_t refusals = 0);
  uint64_t evictions() const;
  uint64_t reclaim_timeouts() const;
  uint64_t refusals() const;
  /// What idle running slices lend, bytes by GPU UUID (ParkController::idle_lent).
  void PublishIdleLent(std::map<std::string, uint64_t> bytes);
  std::map<std::string, uint64_t> idle_lent() const;

 private:
  mutable std::mutex mu_;
  std::vector<ParkedSample> slices_;
  uint64_t evictions_ = 0;
  uint64_t reclaim_timeouts_ = 0;
  uint64_t refusals_ = 0;
  std::map<std::string, uint64_t> idle_lent_;
};

/// Describes fracgpu_container_parked, fracgpu_container_parked_bytes (per parked slice),
/// fracgpu_parked_bytes (the node's sum), fracgpu_gpu_idle_lent_bytes (per GPU: the
/// never-allocated part idle running slices lend, docs/reclaim.md "The fallback"), the counters
/// fracgpu_borrowers_evicted_total, fracgpu_wake_reclaim_timeouts_total and
/// fracgpu_park_refusals_total (parks refused, a grant or process not verified) on `registry` and
/// renders them from `parked` (not owned; must outlive the registry's scrapes), labelled with
/// `node`.
void RegisterParkingMetrics(metrics::Registry* registry, const std::string& node,
                            const ParkedSlices* parked);

/// Wakes containers whose region says parked (park_state = kParkParked) but that the loop's
/// controller does not hold: a previous agent that crashed or was killed left them, and their
/// next CUDA call would wait in the driver for ever. The region (and its mark) is the tenant's
/// to write, so the GPU and the room come from the slice's grant (ParkHost::grant), never from
/// the region, and each pid the region names must be a process of the container
/// (ParkHost::verify_process, its cgroup; a checkpointed process holds no context NVML lists);
/// a slice whose grant is unknown, or a pid not verified, is left marked and untouched. For each
/// such container (one GPU): the driver's state of every verified process; those CHECKPOINTED
/// or LOCKED are woken with node::Parker::Wake (never a Restore without NVML showing the grant's
/// whole memory free on its GPU; when every one is only LOCKED, nothing was released and no room
/// is needed), then park_state is written back to running; with none (the agent died before its
/// Lock, or the processes are gone) park_state is only reset; a process whose state the driver
/// cannot give keeps the container marked. A wake NVML has no room for evicts the borrowers of
/// the grant's GPU first (ParkHost::reclaim, for what NVML lacks of the grant's memory: at most
/// the grant), once, then waits poll after poll (each poll tries the wake and restores at the
/// first that finds the room) up to ParkingOptions::reclaim_timeout, past which it says so,
/// counts it and evicts again; Restore is never attempted without the room (Parker::Wake). Not
/// thread-safe: the loop's thread.
class OrphanWaker {
 public:
  /// `host`: the controller's driver and NVML (facts unused). `options`: its allow-list and
  /// lock timeout (Parker's).
  OrphanWaker(ParkHost host, const ParkingOptions& options);

  /// Wakes the orphans among `dirs` (their regions under <dir.path>/region.cache) that
  /// `controller` does not hold, at CLOCK_MONOTONIC `now_ns`; `pods` (by UID) name the
  /// containers of the processes. Returns the names of those still parked (no room, a failed
  /// call, not verified): the caller keeps them out of the controller's poll, which would
  /// otherwise take them for running containers. Each outcome is logged when it changes.
  std::set<std::string> Poll(const std::vector<ContainerDir>& dirs,
                             const ParkController& controller,
                             const std::map<std::string, PodRef>& pods, uint64_t now_ns);

  /// Borrowers evicted so far for orphans' wakes.
  uint64_t evictions() const { return evictions_; }
  /// Orphans' wakes whose eviction did not free the memory within reclaim_timeout, so far.
  uint64_t reclaim_timeouts() const { return reclaim_timeouts_; }

 private:
  ParkHost host_;
  node::Parker parker_;
  uint64_t reclaim_timeout_ns_ = 0;
  std::map<std::string, std::string> last_;        // directory → last outcome logged
  std::map<std::string, uint64_t> reclaim_since_;  // directory → when its borrowers were evicted
  uint64_t evictions_ = 0;
  uint64_t reclaim_timeouts_ = 0;
};

/// Where the parking loop reads the node and the cluster.
struct ParkingLoopSources {
  std::string containers_root;  ///< <hook>/vgpu/containers
  std::string node_name;
  PodLister* pods = nullptr;  ///< not owned; the node's pods, listed every pods_period
  /// The pending borrowers that could use this node (monitor::PendingBorrowers over the loop's
  /// client); asked every borrower_period, and only while a pod of the node opts in
  /// (`opted_in`): a node without one puts no cluster-wide list on the API server. An error
  /// counts as "no borrower" (nothing parks) and is logged.
  std::function<Result<std::vector<PendingBorrower>>()> borrower_pending;
  /// Whether a pod opts in (monitor::ParkOptedIn under the loop's options); null: every pod.
  std::function<bool(const PodRef&)> opted_in;
  /// CLOCK_MONOTONIC now, ns (the clock libvgpu.so stamps last_launch_ns with); null:
  /// MonotonicNowNs. Tests pass the fake driver's virtual time.
  std::function<uint64_t()> now;
  /// The controller's host: with it, each poll first wakes what an earlier agent left parked
  /// (OrphanWaker); null: not done.
  const ParkHost* host = nullptr;
  /// The controller's options (with `host`).
  const ParkingOptions* options = nullptr;
  std::chrono::nanoseconds pods_period = std::chrono::seconds(5);
  std::chrono::nanoseconds borrower_period = std::chrono::seconds(5);
  /// Publishes the node's lent-memory record: `value` is core::FormatLentMemory's, "" removes
  /// it (monitor::PatchLentMemory over the loop's client); null: nothing is published.
  std::function<Status(const std::string& value)> lend;
  /// Unix seconds now, the record's stamp; null: the system clock.
  std::function<int64_t()> unix_now;
  /// How often the record is written again while the node lends (the scheduler counts it for
  /// core::kLentFreshSeconds, three periods): --park-lend-interval.
  std::chrono::nanoseconds lend_period = std::chrono::seconds(30);
};

/// Polls `controller` every `interval` (the wake latency is at most one interval plus the
/// wake's own time) until `stop`: scans the region directories, lists the pods and asks for a
/// borrower at their periods (a failed list keeps the last one), and publishes the parked
/// slices to `parked` (may be null) after each poll. With `sources.lend`, the node's lent
/// memory (LentFromParked) after each poll where it changed (a park or a wake) and every
/// lend_period while it lends; nothing lent: the record is removed (once; at start too, for a
/// record an earlier agent left). A failed write is logged and tried again a second later at
/// the earliest. Returns when stopped, after waking what it parked and removing the record
/// (nothing is lent without an agent to evict borrowers); a container whose wake lacks room
/// stays parked (its next call waits in the driver until an agent wakes it).
void RunParkingLoop(ParkController* controller, const ParkingLoopSources& sources,
                    std::chrono::nanoseconds interval, base::StopSignal* stop,
                    ParkedSlices* parked);

}  // namespace fracgpu::monitor
