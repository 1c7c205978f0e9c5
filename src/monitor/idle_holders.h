#pragma once
// The node agent's idle-holder record (issue 36 item 4; docs/reclaim.md "The fallback",
// docs/monitor.md "Idle holders"): from each metrics poll's slices (monitor.h Snapshot, the
// regions libvgpu.so keeps), the pods that hold GPU memory while idle, published on the node as
// `fracgpu.io/idle-holders` (core/idle_holders.h) for the dashboard, which shows it to every
// viewer.
//
// The region is the tenant's to write, so it names neither the GPU nor, alone, the bytes of an
// entry (the attack finding on the idle-holder record; as the idle-lending fallback, parking.h
// FallbackTruth): a container counts on its grant's one GPU (IdleHolderSources::grant, the
// limits file written from the scheduler's signed decision) when that GPU is one of the node's
// (NVML's device list of the same poll) and its region names it; it holds min(the grant's
// memory, max(the region's live bytes, NVML's usedGpuMemory of its own verified processes
// there)), or min(grant, region) while NVML's processes cannot be read. No readable one-GPU
// grant, or a region naming another GPU: nothing from that container (fail closed).
//
// A pod is an idle holder on a GPU when every container of it counted there has launched no
// kernel for `idle_after` (the parking loop's notion, --park-idle: the region's last launch,
// clamped into [first seen by this agent, now]; a slice that never launched counts from first
// seen, as the fallback lending does) and they hold at least `min_mib` together. The record is
// written when the set of holders changes (at most once per `min_gap`), when only their MiB
// changed (at most once per `change_gap`), and every `refresh` while it lists anyone, so readers
// can judge freshness (core::IdleHoldersFresh); the idle seconds are as of each write (a reader
// adds the time since). It is removed when nobody holds memory idle, at the first poll (a record
// an earlier agent left) and by Remove() at exit. A failed write is logged once per distinct
// error and retried after `min_gap`.
//
//   IdleHolderPublisher p(options, MakeIdleHolderSources(...), [&](const std::string& v) {
//     return PatchIdleHolders(client, node, v); });
//   p.Poll(monitor.snapshot(), MonotonicNowNs(), unix_now);   // after each metrics poll
//
// Not thread-safe: one thread polls.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/idle_holders.h"
#include "enforce/enforce.h"
#include "enforce/nvml_processes.h"
#include "k8s/client.h"
#include "monitor/container_dirs.h"
#include "monitor/monitor.h"
#include "monitor/parking.h"
#include "monitor/pods.h"

namespace fracgpu::monitor {

/// Least MiB a pod must hold on a GPU to be listed: 1 GiB, above a bare CUDA context (about
/// 300–500 MiB), so the view names the holders worth a nudge or a park.
inline constexpr int64_t kIdleHolderMinMib = 1024;

/// When a pod counts as an idle holder, and how often the record may be written.
struct IdleHolderOptions {
  std::chrono::nanoseconds idle_after = std::chrono::minutes(30);  ///< --park-idle
  int64_t min_mib = kIdleHolderMinMib;                             ///< least MiB held on one GPU
  /// A record listing anyone is rewritten this often (core::kIdleHoldersRefreshSeconds).
  std::chrono::nanoseconds refresh = std::chrono::seconds(core::kIdleHoldersRefreshSeconds);
  /// Shortest time between two writes (a change of the set of holders waits for it).
  std::chrono::nanoseconds min_gap = std::chrono::seconds(10);
  /// Shortest time between two writes when only the MiB held changed.
  std::chrono::nanoseconds change_gap = std::chrono::seconds(60);
};

/// Where an entry's GPU and bytes come from besides the region (which the tenant writes). Tests
/// pass fakes; MakeIdleHolderSources the agent's adapters.
struct IdleHolderSources {
  /// The grant of the container slice whose region directory is `dir_name` ("<pod
  /// UID>_<container>"): its one GPU and its memory (ReadSliceGrant). Null or an error (no limits
  /// file, several GPUs, no limit): the container contributes nothing.
  std::function<Result<SliceGrant>(const std::string& dir_name)> grant;
  /// NVML's process lists of every GPU with each process's device memory (ParkHost::gpu_processes,
  /// enforce::ProcessSource::Sample); read at most once per poll, only for an idle container.
  /// Null, an error, the GPU missing or not listable: the driver's figure is unknown.
  std::function<Result<std::vector<enforce::GpuSample>>()> gpu_processes;
  /// Whether host pid `pid` is a process of container `dir` (ParkHost::verify_process, called
  /// with on_gpu false): ok = it is; kPermissionDenied or kNotFound = it is not (another pod or
  /// container, gone); another error = cannot be told, and the driver's figure is unknown.
  std::function<Result<uint64_t>(int pid, const ContainerDir& dir, const PodRef* pod,
                                 const std::string& uuid, bool on_gpu)>
      verify_process;
  /// The node's pods by UID (they name a process's container); asked at most once per poll,
  /// only when NVML lists a process on an idle container's GPU. Null or an error: unknown (a
  /// process of the pod cannot be told).
  std::function<Result<std::map<std::string, PodRef>>()> pods;
};

/// The agent's sources: grant, verify_process and gpu_processes of MakeParkHost (park_host.h:
/// ReadSliceGrant under `limits_dir`, enforce::ProcReader under `proc_root`, `processes`'s
/// Sample; its NVML facts are not used); pods from `lister`'s ListNodePods(`node`). `processes`
/// and `lister` are not owned and must outlive the sources; either may be null (unknown).
IdleHolderSources MakeIdleHolderSources(enforce::ProcessSource* processes, std::string proc_root,
                                        std::string limits_dir, PodLister* lister,
                                        std::string node);

/// The idle holders of a snapshot at CLOCK_MONOTONIC `now_ns`, one per (pod UID, GPU UUID), in
/// (GPU UUID, pod UID) order; at most core::kIdleHoldersMaxEntries (the largest kept). Each
/// container of `snap.slices` counts on its grant's GPU only (`sources`, see the file comment):
/// MiB is the sum over the pod's containers there of min(grant, max(region live, NVML's of its
/// verified processes)) — min(grant, region live) where NVML's is unknown — rounded down; idle
/// the least idle of them, whole seconds, each from the region's last launch clamped into
/// [first seen, now] (a launch in the future is now: not idle). A GPU not in `snap.gpus` (the
/// node's GPUs as NVML lists them) is never named. `first_seen_ns` (container and GPU → when
/// first seen, CLOCK_MONOTONIC) is updated (new ones added, gone ones dropped). A pod UID or GPU
/// UUID the record's grammar refuses is not listed.
std::vector<core::IdleHolder> IdleHoldersOf(const Snapshot& snap, uint64_t now_ns,
                                            const IdleHolderOptions& options,
                                            const IdleHolderSources& sources,
                                            std::map<std::string, uint64_t>* first_seen_ns);

/// Publishes the record through `write` (a value, or "" to remove the annotation).
class IdleHolderPublisher {
 public:
  using Write = std::function<Status(const std::string& value)>;
  /// `sources`: where the entries' GPUs and bytes come from (IdleHoldersOf).
  IdleHolderPublisher(IdleHolderOptions options, IdleHolderSources sources, Write write);

  /// One step after a metrics poll: computes the holders of `snap` at CLOCK_MONOTONIC `now_ns`
  /// and writes the record stamped `now_unix` (Unix seconds) when due (see the file comment).
  void Poll(const Snapshot& snap, uint64_t now_ns, int64_t now_unix);
  /// Removes the record unless it is known to be absent (at exit).
  void Remove();

  /// Writes attempted so far (successful or not).
  int64_t writes() const { return writes_; }
  /// The holders of the last Poll.
  const std::vector<core::IdleHolder>& holders() const { return holders_; }

 private:
  bool Send(const std::string& value, uint64_t now_ns);

  IdleHolderOptions options_;
  IdleHolderSources sources_;
  Write write_;
  std::map<std::string, uint64_t> first_seen_ns_;
  std::vector<core::IdleHolder> holders_;
  /// What the node carries, as last written: nullopt = unknown (before the first write, or
  /// after a failed one); an empty vector = no annotation.
  std::optional<std::vector<core::IdleHolder>> published_;
  bool attempted_ = false;      ///< a write was tried (last_write_ns_ is set)
  uint64_t last_write_ns_ = 0;  ///< CLOCK_MONOTONIC of the last attempt
  int64_t writes_ = 0;
  std::string last_error_;  ///< logged once per distinct error
};

/// Writes `value` as the node's `fracgpu.io/idle-holders` annotation (one merge patch of
/// /api/v1/nodes/<node>); "" removes it (patched to null). Errors: the client's.
Status PatchIdleHolders(k8s::Client* client, const std::string& node, const std::string& value);

}  // namespace fracgpu::monitor
