#include "base/file.h"

#include <fcntl.h>
#include <sys/stat.h>
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

Status WriteFileAtomically(const std::string& path, const std::string& content, unsigned mode) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Internal("cannot write " + tmp + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Internal("cannot write " + tmp + ": " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::fchmod(fd, mode) != 0 || ::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return Internal("cannot finish " + tmp + ": " + std::strerror(err));
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Internal("cannot rename " + tmp + " to " + path + ": " + std::strerror(err));
  }
  return Status::Ok();
}

}  // namespace fracgpu::base
