#include "base/file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace fracgpu::base {

Result<std::string> ReadFile(const std::string& path, size_t max_bytes,
                             const ReadFileOptions& options) {
  int flags = O_RDONLY | O_CLOEXEC;
  if (!options.follow_symlinks) flags |= O_NOFOLLOW;
  if (options.nonblocking) flags |= O_NONBLOCK;
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) {
    const int err = errno;
    return Status(err == ENOENT ? StatusCode::kNotFound : StatusCode::kUnavailable,
                  path + ": cannot open: " + std::strerror(err));
  }
  std::string text;
  char buf[16 * 1024];
  while (true) {
    // One byte past the limit is enough to tell "exactly max_bytes" from "longer".
    const size_t left = max_bytes - text.size();
    const ssize_t n = ::read(fd, buf, left < sizeof buf ? left + 1 : sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return Unavailable(path + ": read error: " + std::strerror(err));
    }
    if (n == 0) break;
    if (static_cast<size_t>(n) > max_bytes - text.size()) {
      ::close(fd);
      return InvalidArgument(path + ": larger than " + std::to_string(max_bytes) + " bytes");
    }
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

}  // namespace fracgpu::base
