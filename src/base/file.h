#pragma once
// Reading a whole file with a size bound: the one copy for configuration, tokens, traces,
// checkpoints and sysfs facts (each caller names its own limit, so a wrong path such as
// /dev/zero or a runaway file cannot exhaust memory); and the one atomic whole-file write (the
// node plugins' limits files, ld.so.preload, CDI specs and checkpoint).

#include <cstddef>
#include <string>

#include "base/status.h"

namespace fracgpu::base {

/// How ReadFile opens a path.
struct ReadFileOptions {
  /// false: a symbolic link as the last component is refused (O_NOFOLLOW: "<path>: cannot open:
  /// Too many levels of symbolic links", kUnavailable), for files in folders another party writes.
  bool follow_symlinks = true;
  /// true: opened O_NONBLOCK, so a FIFO planted in the path reads as empty instead of blocking.
  /// Leave false for paths a user names (`--kubeconfig <(...)` is a pipe that must be waited for).
  bool nonblocking = false;
};

/// The whole content of the file at `path` (binary: bytes as stored, no newline translation),
/// read until end of file, so sysfs and /proc files, whose size is not known beforehand, work.
/// A file of exactly `max_bytes` bytes is read; a longer one is refused.
/// Errors, each naming the path:
///   kNotFound         the path does not exist ("<path>: cannot open: No such file or directory")
///   kUnavailable      it cannot be opened for another reason (permission, …) or a read fails
///                     ("<path>: cannot open: <reason>", "<path>: read error: <reason>")
///   kInvalidArgument  it holds more than max_bytes bytes ("<path>: larger than <n> bytes")
Result<std::string> ReadFile(const std::string& path, size_t max_bytes,
                             const ReadFileOptions& options = {});

/// Replaces the file at `path` with `content` atomically: writes "<path>.tmp" in the same
/// directory (created with mode 0600, then `mode` applied by fchmod, so umask does not apply),
/// fsyncs it and rename(2)s it over `path`. A reader sees the old file or the whole new one,
/// never a part. The directory must exist. Errors: kInternal naming the path and the reason
/// ("cannot write <path>.tmp: …", "cannot finish …" for fchmod/fsync, "cannot rename …");
/// the temporary file is removed on every failure.
Status WriteFileAtomically(const std::string& path, const std::string& content, unsigned mode);

}  // namespace fracgpu::base
