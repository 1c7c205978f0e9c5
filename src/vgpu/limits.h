#pragma once
// Parsing of libvgpu.so's configuration: the read-only limits file the device plugin mounts
// (docs/design/CONTRACT.md §3, /etc/fracgpu/limits.env) and the environment
// (docs/design/CONTRACT.md §4). Pure functions over caller-provided buffers: no allocation, no I/O,
// no exceptions (they run inside arbitrary host processes), fuzzed by
// tests/fuzz/vgpu_limits_fuzz.cc.
//
// Precedence: when the limits file exists, every key of docs/design/CONTRACT.md §3 (memory and SM
// limits, shared cache path, policy, priority, NVIDIA_VISIBLE_DEVICES) comes from the file alone
// and the environment is ignored for all of them, so `env -i`, an edited environment or a private
// CUDA_DEVICE_MEMORY_SHARED_CACHE cannot lift or split a limit. Without the file, the same
// keys come from the environment. LIBCUDA_LOG_LEVEL always comes from the environment.
//
// Strictness: a malformed value never means "unlimited". A bad per-device memory or SM limit
// fails that device closed (every allocation on it returns CUDA_ERROR_OUT_OF_MEMORY); a bad
// global limit, a malformed file line or an unusable shared-cache path fails every device
// closed. The first error is kept in Config::error for one log line.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "vgpu/region.h"

namespace fracgpu::vgpu {

inline constexpr size_t kPathMax = 512;
inline constexpr size_t kVisibleMax = 1024;
inline constexpr size_t kErrorMax = 256;
/// Longest file name in the limits directory (ParseLimitsDir), terminator included.
inline constexpr size_t kFragmentNameMax = 96;
/// Most files the limits directory may hold (ParseLimitsDir): a claim-wide file per claim and
/// one file per GPU.
inline constexpr size_t kMaxFragments = 32;
/// How long an allocation the driver refuses for lack of physical memory waits for the node
/// agent to evict borrowers (docs/reclaim.md "The fallback"), milliseconds: environment only,
/// `FRACGPU_RECLAIM_WAIT_MS` = 0..kMaxReclaimWaitMs (0: never wait). The default covers a
/// borrower's graceful termination (30 s, monitor::kBorrowerGraceSeconds) plus the agent's
/// polls.
inline constexpr char kEnvReclaimWaitMs[] = "FRACGPU_RECLAIM_WAIT_MS";
inline constexpr uint32_t kDefaultReclaimWaitMs = 40'000;
inline constexpr uint32_t kMaxReclaimWaitMs = 600'000;

/// Default shared region path (docs/design/CONTRACT.md §4).
inline constexpr const char* kDefaultRegionPath = "/tmp/cudevshr.cache";

/// GPU_CORE_UTILIZATION_POLICY values (docs/design/CONTRACT.md §4).
enum class CorePolicy : uint32_t { kDefault = 0, kForce = 1, kDisable = 2 };

/// Limits of one container-visible device index i (CUDA_DEVICE_*_LIMIT_<i>).
struct DeviceConfig {
  bool memory_set = false;
  uint64_t memory_bytes = 0;  ///< bytes; 0 = unlimited
  bool sm_set = false;
  uint32_t sm_percent = 0;  ///< 1..99 limit; 0 or 100 = unlimited
  bool fail_closed = false;
};

/// Everything libvgpu.so reads, after precedence and validation.
struct Config {
  DeviceConfig devices[kMaxDevices];
  bool global_memory_set = false;
  uint64_t global_memory_bytes = 0;
  bool global_sm_set = false;
  uint32_t global_sm_percent = 0;
  bool all_fail_closed = false;  ///< a global error: every device fails closed
  char region_path[kPathMax] = {};
  char visible_devices[kVisibleMax] = {};  ///< NVIDIA_VISIBLE_DEVICES, "" if unset
  CorePolicy policy = CorePolicy::kDefault;
  int32_t priority = 1;
  int log_level = 2;
  /// kEnvReclaimWaitMs (environment only; a bad value keeps the default and is reported).
  uint32_t reclaim_wait_ms = kDefaultReclaimWaitMs;
  bool file_present = false;
  int error_count = 0;
  char error[kErrorMax] = {};  ///< first error, e.g. `CUDA_DEVICE_MEMORY_LIMIT_0="3Gb": …`
  /// The limits file breaks its grammar (any error found in it, or it cannot be read): the
  /// process must not start CUDA at all (cuInit refuses, hooks_query.cc), besides failing closed.
  bool file_bad = false;
  int file_line = 0;  ///< the line being parsed (1-based; for the error's "line N")
  /// The limits-directory file being parsed (ParseLimitsDir; "" for the single limits file), so
  /// an error names it.
  char file_name[kFragmentNameMax] = {};
};

/// Where a key came from (for error messages).
enum class Source { kFile, kEnvironment };

/// Parses a memory limit: decimal digits with an optional k/K, m/M or g/G suffix (KiB, MiB,
/// GiB); a bare number is bytes; "0" means unlimited. No sign, space or other suffix.
/// Returns false on a malformed value or overflow of 64 bits.
bool ParseMemoryLimit(std::string_view text, uint64_t* bytes) noexcept;

/// Parses an SM limit: decimal integer 0..100 (percent). Returns false otherwise.
bool ParseSmLimit(std::string_view text, uint32_t* percent) noexcept;

/// Applies one KEY=VALUE (already split) to `config`; unknown keys are ignored. Records
/// errors as described above. `source` only changes the wording of messages.
void ApplyKey(Config* config, std::string_view key, std::string_view value, Source source) noexcept;

/// Parses the limits file's text (`size` bytes), strictly (issue 32 item 4): one KEY=VALUE per
/// line, blank lines and lines starting with '#' ignored, a trailing '\r' tolerated. KEY is one
/// of the docs/design/CONTRACT.md §3 keys exactly as the device plugin writes them (upper case,
/// no `export `, no spaces), each at most once, and the file names at least one memory limit.
/// Anything else — a line without '=', an unknown or lower-case key, a duplicated key, a bad
/// value, an empty or comment-only file — fails every device closed and sets file_bad, the
/// error naming the line, key and value. Sets config->file_present.
void ParseLimitsFile(Config* config, const char* text, size_t size) noexcept;

/// One file of the limits directory (api::kLimitsDirPath): its name and `size` bytes of text.
struct LimitsFragment {
  const char* name = nullptr;  ///< the file name, NUL-terminated (no folder)
  const char* text = nullptr;
  size_t size = 0;
};

/// Parses the limits directory a DRA container gets instead of the limits file (docs/dra.md
/// "Per-request devices"): each CDI device of a claim mounts one file per GPU, a claim-wide CDI
/// edit one common file, so a container that names some of a claim's requests gets exactly
/// their GPUs. `files` in any order (merged in file-name order); each file has the limits
/// file's line grammar (ParseLimitsFile) and is one of two kinds:
///  - a GPU file: `NVIDIA_VISIBLE_DEVICES=<one UUID>`, `CUDA_DEVICE_MEMORY_LIMIT_0` and
///    optionally `CUDA_DEVICE_SM_LIMIT_0`, nothing else;
///  - a common file: any of CUDA_DEVICE_MEMORY_SHARED_CACHE, GPU_CORE_UTILIZATION_POLICY,
///    CUDA_TASK_PRIORITY, and no limit or GPU key.
/// The result is the Config of one limits file naming the GPUs (in file-name order) with their
/// limits as devices 0..n-1. Refused (file_bad and every device fail closed, the error naming
/// the file, line, key and value): no file, more than kMaxFragments files or kMaxDevices GPUs, a
/// name that is empty, too long (kFragmentNameMax), holds '/' or does not end in ".env", any
/// error of the line grammar, a file of neither kind, the same GPU UUID in two files, a common key
/// in two files, no GPU file. Sets config->file_present. Pure: no allocation, no I/O.
void ParseLimitsDir(Config* config, const LimitsFragment* files, size_t count) noexcept;

/// Reads the keys of docs/design/CONTRACT.md §4 from `envp` (a NULL-terminated environ array),
/// honouring the precedence above (only LIBCUDA_LOG_LEVEL and FRACGPU_RECLAIM_WAIT_MS when
/// config->file_present: neither lifts a limit).
void ApplyEnvironment(Config* config, char* const* envp) noexcept;

/// Fills defaults (region path) after the file and the environment were applied.
void FinishConfig(Config* config) noexcept;

/// The effective memory limit in bytes of device index `i` (0 = unlimited), and whether it
/// must fail closed.
uint64_t EffectiveMemoryLimit(const Config& config, int i, bool* fail_closed) noexcept;
/// The effective SM limit of device index `i` in percent (0 = unlimited).
uint32_t EffectiveSmLimit(const Config& config, int i) noexcept;

}  // namespace fracgpu::vgpu
