#pragma once
// The idle-holder record of a node, `fracgpu.io/idle-holders` (core::kAnnotationIdleHolders;
// docs/reclaim.md "The fallback", docs/ui.md "Idle holders"): which pods hold GPU memory on the
// node while they have launched no kernel for the agent's idle time (issue 36 item 4). The node
// agent (`fracgpu monitor`, monitor/idle_holders.h) writes it; the UI reads it and shows each
// GPU's idle holders on the dashboard while the record is fresh (IdleHoldersFresh).
//
// The value is `<unix seconds>;<entry>,<entry>…` with entry
// `<pod uid>:<gpu uuid>:<MiB held>:<idle seconds>`, e.g.
// `1764921600;5f0c…-1d2e:GPU-00000000-0000-4000-8000-000000000000:14336:11400`; `<unix seconds>;`
// alone names no holder. The pod is named by its UID, not its name: a Node's annotations are
// readable by anyone who may get nodes, and the UI resolves the UID to a namespace and name only
// for a viewer allowed to see that namespace. The idle seconds are as of the record's time: a
// reader adds its own clock's distance from it. Like core/lent.h the parser takes outside input
// (anyone able to patch a node could write it): it bounds everything while reading, returns
// kInvalidArgument naming the field and value (without the annotation key: callers add it with
// Status::WithPrefix), and never crashes (fuzzed: tests/fuzz/idle_holders_fuzz.cc).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "core/lent.h"

namespace fracgpu::core {

/// Longest value ParseIdleHolders reads, bytes (kIdleHoldersMaxEntries × ~110 fit with room).
inline constexpr size_t kIdleHoldersMaxBytes = 32768;
/// Most entries one record may hold (the agent keeps the largest holders beyond it).
inline constexpr size_t kIdleHoldersMaxEntries = 256;
/// Longest pod UID accepted, bytes (Kubernetes' are RFC 4122 UUIDs, 36).
inline constexpr size_t kIdleHoldersMaxPodUid = 64;
/// Largest MiB one entry may hold (devmem's bound in core/codec.h: int32).
inline constexpr int64_t kIdleHoldersMaxMib = 2147483647;
/// Largest idle time one entry may carry, seconds (int32: about 68 years).
inline constexpr int64_t kIdleHoldersMaxIdleSeconds = 2147483647;
/// How often the agent rewrites an unchanged record, seconds (so readers can judge freshness).
inline constexpr int64_t kIdleHoldersRefreshSeconds = 60;
/// How old a record may be and still be shown, seconds: three refresh periods (IdleHoldersFresh).
inline constexpr int64_t kIdleHoldersFreshSeconds = 3 * kIdleHoldersRefreshSeconds;

/// One pod holding memory on one GPU while idle.
struct IdleHolder {
  std::string pod_uid;   ///< metadata.uid of the pod: 1..kIdleHoldersMaxPodUid of [0-9A-Za-z-]
  std::string gpu_uuid;  ///< the GPU's UUID as in `hami.io/node-nvidia-register` ("GPU-…")
  int64_t mib = 0;       ///< MiB the pod's containers hold there (live bytes, rounded down)
  int64_t idle_s = 0;    ///< seconds since its last kernel launch there, as of the record's time

  bool operator==(const IdleHolder&) const = default;
};

/// A decoded idle-holder record.
struct IdleHolders {
  int64_t at_unix = 0;              ///< when the agent wrote it, Unix seconds (≥ 1)
  std::vector<IdleHolder> holders;  ///< at most kIdleHoldersMaxEntries, distinct (pod, GPU)

  bool operator==(const IdleHolders&) const = default;
};

/// Encodes the record (see the file comment). Preconditions: what ParseIdleHolders accepts
/// (true of every value it returns); the encoding is canonical (decimal without leading zeros,
/// entries in the given order).
std::string FormatIdleHolders(const IdleHolders& record);

/// Decodes a record. Errors (kInvalidArgument), each naming the field and value: longer than
/// kIdleHoldersMaxBytes; no ';' after the time; a time that is not a decimal integer 1..2^53 (no
/// sign, no leading zero); an entry without exactly four ':'-separated fields; a pod UID that is
/// not 1..kIdleHoldersMaxPodUid of [0-9A-Za-z-]; a GPU UUID that is not "GPU-" followed by
/// 1..kLentMaxUuid-4 of [0-9A-Za-z-]; MiB not a decimal 0..kIdleHoldersMaxMib; idle seconds not
/// a decimal 0..kIdleHoldersMaxIdleSeconds; the same (pod, GPU) twice; more than
/// kIdleHoldersMaxEntries entries; an empty entry.
Result<IdleHolders> ParseIdleHolders(std::string_view value);

/// Whether ParseIdleHolders accepts `holder` as an entry: the pod UID and GPU UUID have the
/// record's shape and MiB and idle seconds are within their bounds (the agent leaves out what
/// does not: a region is the tenant's to write).
bool IdleHolderWritable(const IdleHolder& holder);

/// Whether a record written at `at_unix` is shown at `now_unix` (Unix seconds): at most
/// kIdleHoldersFreshSeconds old and not more than that ahead (clock skew); at_unix ≤ 0 never.
inline bool IdleHoldersFresh(int64_t at_unix, int64_t now_unix) {
  return LentFresh(at_unix, now_unix, kIdleHoldersFreshSeconds);
}

}  // namespace fracgpu::core
