#pragma once
// The node agent's idle-holder record (issue 36 item 4; docs/reclaim.md "The fallback",
// docs/monitor.md "Idle holders"): from each metrics poll's slices (monitor.h Snapshot, the
// regions libvgpu.so keeps), the pods that hold GPU memory while idle, published on the node as
// `fracgpu.io/idle-holders` (core/idle_holders.h) for the dashboard.
//
// A pod is an idle holder on a GPU when every slice of it there has launched no kernel for
// `idle_after` (the parking loop's notion, --park-idle: the region's last launch; a slice that
// never launched counts from the first poll that saw it, as the fallback lending does) and its
// slices there hold at least `min_mib` of live bytes together. The record is written when the set
// of holders changes (at most once per `min_gap`), when only their MiB changed (at most once per
// `change_gap`), and every `refresh` while it lists anyone, so readers can judge freshness
// (core::IdleHoldersFresh); the idle seconds are as of each write (a reader adds the time since).
// It is removed when nobody holds memory idle, at the first poll (a record an earlier agent left)
// and by Remove() at exit. A failed write is logged once per distinct error and retried after
// `min_gap`.
//
//   IdleHolderPublisher p(options, [&](const std::string& v) {
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
#include "k8s/client.h"
#include "monitor/monitor.h"

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

/// The idle holders of a snapshot at CLOCK_MONOTONIC `now_ns`, one per (pod UID, GPU UUID), in
/// (GPU UUID, pod UID) order; at most core::kIdleHoldersMaxEntries (the largest kept). MiB is
/// the slices' live bytes summed, rounded down; idle the least idle of the pod's slices there,
/// whole seconds. `first_seen_ns` (slice key → when first seen, CLOCK_MONOTONIC) is the start of
/// a never-launched slice's idle time: updated (new slices added, gone ones dropped). A slice
/// whose pod UID or GPU UUID the record's grammar refuses, or whose last launch is in the future
/// (written by the tenant), is not listed and keeps its pod off that GPU's list.
std::vector<core::IdleHolder> IdleHoldersOf(const Snapshot& snap, uint64_t now_ns,
                                            const IdleHolderOptions& options,
                                            std::map<std::string, uint64_t>* first_seen_ns);

/// Publishes the record through `write` (a value, or "" to remove the annotation).
class IdleHolderPublisher {
 public:
  using Write = std::function<Status(const std::string& value)>;
  IdleHolderPublisher(IdleHolderOptions options, Write write);

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
