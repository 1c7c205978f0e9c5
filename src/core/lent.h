#pragma once
// The lent-memory record of a node, `fracgpu.io/lent-memory` (core::kAnnotationLentMemory;
// docs/design/CONTRACT.md §2 node table, docs/reclaim.md "Lending"): how many MiB of each GPU
// the node agent lends to borrower pods because the owner of a slice there is parked (issue 36
// item 2). The agent writes it (every 30 s while it lends); the scheduler reads it through
// core::ClusterState and counts the lent MiB as room for borrower pods only
// (PodRequest::borrower), and only while the record is fresh (LentFresh): a dead agent lends
// nothing.
//
// The value is `<unix seconds>;<gpu uuid>:<MiB>,<gpu uuid>:<MiB>…`, e.g.
// `1764921600;GPU-00000000-0000-4000-8000-000000000000:16384`; `<unix seconds>;` alone lends
// nothing. Like the decoders of core/codec.h the parser takes outside input (any tenant able to
// patch a node could write it): it bounds everything while reading, returns kInvalidArgument
// naming the field and value (without the annotation key: callers add it with
// Status::WithPrefix), and never crashes (fuzzed: tests/fuzz/lent_memory_fuzz.cc).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace fracgpu::core {

/// Longest value ParseLentMemory reads, bytes (64 GPUs × ~70 bytes fit with room).
inline constexpr size_t kLentMaxBytes = 8192;
/// Most GPUs one record may name.
inline constexpr size_t kLentMaxGpus = 64;
/// Largest MiB one GPU may lend (devmem's bound in core/codec.h: int32).
inline constexpr int64_t kLentMaxMib = 2147483647;
/// Longest GPU UUID accepted, bytes (NVML's are 40: "GPU-" + 36).
inline constexpr size_t kLentMaxUuid = 96;
/// How old a record may be and still lend, seconds: the agent republishes every 30 s, so three
/// periods; an older record counts as nothing lent (LentFresh).
inline constexpr int64_t kLentFreshSeconds = 90;

/// Memory one GPU lends.
struct LentGpu {
  std::string uuid;  ///< the GPU's UUID as in `hami.io/node-nvidia-register` ("GPU-…")
  int64_t mib = 0;   ///< MiB lent, 0..kLentMaxMib

  bool operator==(const LentGpu&) const = default;
};

/// A decoded lent-memory record.
struct LentMemory {
  int64_t at_unix = 0;        ///< when the agent wrote it, Unix seconds (≥ 1)
  std::vector<LentGpu> gpus;  ///< at most kLentMaxGpus, distinct UUIDs, in written order

  bool operator==(const LentMemory&) const = default;
};

/// Encodes the record (see the file comment). Preconditions: what ParseLentMemory accepts
/// (true of every value it returns); the encoding is canonical (decimal without leading zeros).
std::string FormatLentMemory(const LentMemory& lent);

/// The envelope the node agent's timed records share (fracgpu.io/lent-memory here,
/// fracgpu.io/idle-holders in core/idle_holders.h): "<unix seconds>;<entries>".
struct TimedRecord {
  int64_t at_unix = 0;       ///< the time, 1..2^53
  std::string_view entries;  ///< what follows the ';' (views the parsed value), maybe ""
};

/// Splits `value` at its first ';' and reads the time before it. Errors (kInvalidArgument): no
/// ';' ("value … has no ';': want " + `want`), a time that is not a decimal integer 1..2^53 (no
/// sign, no leading zero), each naming the value.
Result<TimedRecord> ParseTimedRecord(std::string_view value, std::string_view want);

/// Decodes a record. Errors (kInvalidArgument), each naming the field and value: longer than
/// kLentMaxBytes; no ';' after the time; a time that is not a decimal integer 1..2^53 (no sign,
/// no leading zero); an entry without exactly one ':'; a UUID that is not "GPU-" followed by
/// 1..kLentMaxUuid-4 characters of [0-9A-Za-z-]; MiB not a decimal integer 0..kLentMaxMib;
/// the same UUID twice (compared as written); more than kLentMaxGpus entries; an empty entry
/// (",," or a trailing ',').
Result<LentMemory> ParseLentMemory(std::string_view value);

/// Whether a record written at `at_unix` still lends at `now_unix` (both Unix seconds): it is
/// at most `window_s` old, and not more than `window_s` in the future (clock skew between the
/// node and the scheduler). at_unix ≤ 0 (no record) is never fresh: fail closed.
inline bool LentFresh(int64_t at_unix, int64_t now_unix, int64_t window_s = kLentFreshSeconds) {
  if (at_unix <= 0) return false;
  return now_unix - at_unix <= window_s && at_unix - now_unix <= window_s;
}

}  // namespace fracgpu::core
