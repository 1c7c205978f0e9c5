#pragma once
// One temporary directory for every suite: created under $TEST_TMPDIR when CTest or the caller
// sets it (else /tmp), checked (a failed mkdtemp aborts the test binary with the path and errno,
// instead of running the test against an empty path), and removed with everything in it at
// destruction.

#include <stdlib.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace fracgpu::test_support {

/// How long a directory path may be and still hold a Unix socket path under it: sun_path holds
/// 108 bytes (unix(7)); 48 leaves room for "/<plugin>.sock"-style names below it.
inline constexpr size_t kSocketSafeDirLength = 48;

/// The parent directory for new temporary directories: $TEST_TMPDIR if set and non-empty, else
/// /tmp. With `socket_safe`, /tmp when $TEST_TMPDIR is too long to hold Unix sockets.
inline std::string TempParent(bool socket_safe = false) {
  const char* env = std::getenv("TEST_TMPDIR");
  std::string parent = env != nullptr && *env != '\0' ? env : "/tmp";
  if (socket_safe && parent.size() + 24 > kSocketSafeDirLength) parent = "/tmp";
  return parent;
}

/// A fresh directory `<TempParent()>/<prefix>XXXXXX`, removed recursively at destruction.
/// Aborts the process (message on stderr naming the template and errno) if it cannot be made.
class TempDir {
 public:
  /// `prefix`: the directory name's start (e.g. "fgdp-"); `socket_safe`: see TempParent.
  explicit TempDir(std::string_view prefix = "fracgpu-test-", bool socket_safe = false) {
    std::string tmpl = TempParent(socket_safe) + "/" + std::string(prefix) + "XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) {
      std::fprintf(stderr, "TempDir: mkdtemp(%s) failed: %s\n", tmpl.c_str(), std::strerror(errno));
      std::abort();
    }
    path_ = buf.data();
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  /// The directory's absolute path (no trailing slash).
  const std::string& path() const { return path_; }
  /// `path() + "/" + rel`.
  std::string Path(std::string_view rel) const { return path_ + "/" + std::string(rel); }
  /// Writes `content` to `rel` (parent directories created); returns false if it could not.
  bool Write(std::string_view rel, std::string_view content) const {
    const std::filesystem::path p = Path(rel);
    std::error_code ec;
    std::filesystem::create_directories(p.parent_path(), ec);
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << content;
    return static_cast<bool>(out.flush());
  }

 private:
  std::string path_;
};

}  // namespace fracgpu::test_support
