#pragma once
// The one reader of a container's region file (api/region.h, layout version 2, docs/vgpu.md
// "The shared region"), for every process outside libvgpu.so: the monitor's slice metrics
// (monitor/region_reader.h), the enforcer's claims (enforce/region_claims.h) and
// `fracgpu inspect` (run/run_inspect.h). The file is written inside a tenant's container,
// so it is UNTRUSTED input: opened O_RDONLY|O_NONBLOCK (a FIFO planted in its place never
// blocks) and, unless the caller asks otherwise, O_NOFOLLOW; it must be a regular file of
// exactly sizeof(api::Region) bytes, copied with bounded preads (never more than that many
// bytes, never mapped, never locked, never written) into an aligned private copy, which must
// pass vgpu::RegionValidate. Callers then read the copy as numbers they do not trust.
//
// Each caller words its own errors from RegionReadInfo (what failed, errno, size, header);
// the Status returned is the monitor's wording (path first, the field and value named).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "api/region.h"
#include "base/status.h"

namespace fracgpu::enforce {

/// Frees a RegionCopy (allocated with alignof(api::Region)).
struct RegionCopyDelete {
  void operator()(api::Region* r) const;
};
/// A private, aligned copy of one region file's bytes (never the shared mapping).
using RegionCopy = std::unique_ptr<api::Region, RegionCopyDelete>;

/// What went wrong reading a region; kNone on success.
enum class RegionFault {
  kNone,
  kMissing,     ///< open: ENOENT
  kOpen,        ///< open failed otherwise (error_number; ELOOP for a symlink under O_NOFOLLOW)
  kStat,        ///< fstat failed (error_number)
  kNotRegular,  ///< a directory (directory = true), FIFO, device, socket
  kSize,        ///< not exactly sizeof(api::Region) bytes (file_size)
  kRead,        ///< pread failed (error_number)
  kTruncated,   ///< the file shrank while read (bytes_read)
  kBadMagic,    ///< header magic != kRegionMagic (magic)
  kBadVersion,  ///< header version != kRegionVersion (version)
  kBadLayout,   ///< region_size, slot_size, max_devices, max_slots or device_count refused
};

/// Details of a read, for callers that word their own errors. Fields not named by the fault
/// are 0 / false.
struct RegionReadInfo {
  RegionFault fault = RegionFault::kNone;
  int error_number = 0;    ///< errno of kOpen / kMissing / kStat / kRead
  bool directory = false;  ///< kNotRegular: the path is a directory
  uint64_t file_size = 0;  ///< st_size once fstat succeeded
  size_t bytes_read = 0;   ///< kTruncated: bytes copied before end of file
  uint32_t magic = 0;      ///< header magic once the bytes were copied
  uint32_t version = 0;    ///< header version once the bytes were copied
};

/// How to open the file.
struct RegionReadOptions {
  /// Follow a symlink in the last path component (O_NOFOLLOW off). Only for a path an operator
  /// names on the command line (`fracgpu inspect`); never for paths a tenant can replace.
  bool follow_symlink = false;
};

/// The metrics label of a fault (fracgpu_monitor_region_skipped_total{reason}): "missing",
/// "unreadable" (kOpen, kStat, kRead), "not_regular", "size", "truncated", "bad_magic",
/// "bad_version", "bad_layout"; "" for kNone.
const char* RegionFaultReason(RegionFault fault);

/// Copies `size` bytes at `data` (need not be aligned) and validates them.
/// Errors (kInvalidArgument): "region file size is <n> bytes, want <sizeof(Region)>";
/// a refused layout: "region <field> is <value>, want <value>" (magic, version, region_size,
/// slot_size, max_devices, max_slots; device_count "want <= 16").
Result<RegionCopy> CopyRegion(const void* data, size_t size, RegionReadInfo* info = nullptr);

/// Reads and validates the region file at `path` (see the header comment).
/// Errors: kNotFound "<path>: <strerror>" (no such file); kUnavailable "<path>: <strerror>"
/// (cannot open), "<path>: fstat: …", "<path>: read: …"; kInvalidArgument "<path>: not a
/// regular file", "<path>: size is <n> bytes, want <m>", "<path>: truncated while read at <k>
/// of <m> bytes", "<path>: " + CopyRegion's layout message.
Result<RegionCopy> ReadRegion(const std::string& path, const RegionReadOptions& options = {},
                              RegionReadInfo* info = nullptr);

}  // namespace fracgpu::enforce
