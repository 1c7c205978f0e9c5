#include "enforce/proc.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace fracgpu::enforce {
namespace {

constexpr size_t kMaxStatBytes = 4096;

bool IsHex(std::string_view s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// A pod UID as kubelet puts it into cgroup names: 8-4-4-4-12 lowercase hex, with '-' (cgroupfs)
// or '_' (systemd, which reserves '-' for nesting).
bool ToPodUid(std::string_view raw, std::string* out) {
  if (raw.size() != 36) return false;
  std::string uid(raw);
  for (size_t i = 0; i < uid.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash) {
      if (uid[i] != '-' && uid[i] != '_') return false;
      uid[i] = '-';
    } else if (!IsHex(uid.substr(i, 1))) {
      return false;
    }
  }
  *out = std::move(uid);
  return true;
}

// "kubepods-burstable-pod<uid>.slice", "kubelet-kubepods-pod<uid>.slice" → uid (systemd), or
// "pod<uid>" (cgroupfs). 0 = not a pod component, 1 = pod, -1 = pod-like but malformed.
int PodComponent(std::string_view c, std::string* uid) {
  std::string_view raw;
  if (c.size() > 6 && c.substr(c.size() - 6) == ".slice") {
    size_t p = c.rfind("-pod");
    if (p == std::string_view::npos || c.find("kubepods") == std::string_view::npos) return 0;
    raw = c.substr(p + 4, c.size() - 6 - (p + 4));
  } else if (c.size() > 3 && c.substr(0, 3) == "pod") {
    raw = c.substr(3);
  } else {
    return 0;
  }
  return ToPodUid(raw, uid) ? 1 : -1;
}

// "<runtime>-<id>.scope" (systemd) or "<id>" (cgroupfs). 1 = container, 0 = not one
// (e.g. CRI-O's "crio-conmon-<id>.scope", a pod's sandbox-less leftovers), -1 = malformed.
int ContainerComponent(std::string_view c, CgroupIdentity* id) {
  std::string_view core = c;
  std::string runtime;
  if (c.size() > 6 && c.substr(c.size() - 6) == ".scope") {
    core = c.substr(0, c.size() - 6);
    static constexpr std::pair<std::string_view, std::string_view> kPrefixes[] = {
        {"cri-containerd-", "containerd"}, {"crio-", "crio"}, {"docker-", "docker"}};
    bool found = false;
    for (const auto& [prefix, name] : kPrefixes) {
      if (core.substr(0, prefix.size()) == prefix) {
        core = core.substr(prefix.size());
        runtime = name;
        found = true;
        break;
      }
    }
    if (!found) return 0;
    if (core.substr(0, 7) == "conmon-") return 0;  // CRI-O's container monitor, not the container
  }
  if (core.size() != 64) return runtime.empty() ? 0 : -1;
  if (!IsHex(core)) return -1;
  id->container_id = std::string(core);
  id->runtime = runtime;
  return 1;
}

std::string Printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 160)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > 160) out += "…";
  return out;
}

}  // namespace

Result<CgroupIdentity> ParseCgroupFile(std::string_view text) {
  if (text.size() > kMaxCgroupFileBytes)
    return InvalidArgument("cgroup file: " + std::to_string(text.size()) + " bytes, more than " +
                           std::to_string(kMaxCgroupFileBytes));
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    // "<hierarchy-id>:<controllers>:<path>"; the path may itself hold ':'.
    size_t c1 = line.find(':');
    size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    std::string_view path = line.substr(c2 + 1);
    // Walk the components from the root; the first pod component decides.
    size_t p = 0;
    while (p <= path.size()) {
      size_t q = path.find('/', p);
      if (q == std::string_view::npos) q = path.size();
      std::string_view comp = path.substr(p, q - p);
      p = q + 1;
      std::string uid;
      int pod = PodComponent(comp, &uid);
      if (pod == 0) continue;
      if (pod < 0)
        return InvalidArgument("cgroup file line " + std::to_string(line_no) +
                               ": malformed pod UID in \"" + Printable(comp) + "\"");
      // The next component is the container's.
      size_t r = path.find('/', p);
      std::string_view next =
          p <= path.size() ? path.substr(p, (r == std::string_view::npos ? path.size() : r) - p)
                           : std::string_view();
      CgroupIdentity id;
      id.pod_uid = uid;
      int ctr = ContainerComponent(next, &id);
      if (ctr < 0)
        return InvalidArgument("cgroup file line " + std::to_string(line_no) +
                               ": malformed container ID in \"" + Printable(next) + "\"");
      if (ctr == 0) break;  // the pod's own cgroup, or conmon: not a container's process
      return id;
    }
  }
  return NotFound("no Kubernetes container in the cgroup file");
}

Result<uint64_t> ParseStatStartTime(std::string_view text) {
  size_t close = text.rfind(')');
  if (text.size() > kMaxStatBytes || close == std::string_view::npos || text.find('(') > close)
    return InvalidArgument("stat: no \"(comm)\"");
  // Fields after comm start at field 3 (state); starttime is field 22.
  std::string_view rest = text.substr(close + 1);
  int field = 2;
  size_t p = 0;
  while (p < rest.size()) {
    while (p < rest.size() && rest[p] == ' ') ++p;
    size_t q = p;
    while (q < rest.size() && rest[q] != ' ' && rest[q] != '\n') ++q;
    if (q == p) break;
    ++field;
    if (field == 22) {
      std::string_view v = rest.substr(p, q - p);
      if (v.empty() || v.size() > 20 || v.find_first_not_of("0123456789") != std::string_view::npos)
        return InvalidArgument("stat: starttime \"" + Printable(v) + "\" is not a number");
      return static_cast<uint64_t>(std::stoull(std::string(v)));
    }
    p = q;
  }
  return InvalidArgument("stat: fewer than 22 fields");
}

// Not base::ReadFile: a process that exits between open and read is "process gone"
// (kNotFound on ESRCH as well as ENOENT), and reading stops just past kMaxCgroupFileBytes with
// what was read, so the parser's own refusal (ParseCgroupFile: the size in its message) applies.
Result<std::string> ProcReader::ReadSmall(uint32_t pid, const char* file) const {
  std::string path = root_ + "/" + std::to_string(pid) + "/" + file;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT || e == ESRCH) return NotFound(path + ": process gone");
    return Unavailable(path + ": " + std::strerror(e));
  }
  std::string out;
  char buf[4096];
  while (out.size() <= kMaxCgroupFileBytes) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      int e = errno;
      ::close(fd);
      if (e == ESRCH) return NotFound(path + ": process gone");
      return Unavailable(path + ": " + std::strerror(e));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

Result<uint64_t> ProcReader::StartTime(uint32_t pid) const {
  auto text = ReadSmall(pid, "stat");
  if (!text.ok()) return text.status();
  return ParseStatStartTime(*text);
}

Result<uint32_t> ProcReader::ParentPid(uint32_t pid) const {
  auto text = ReadSmall(pid, "stat");
  if (!text.ok()) return text.status();
  size_t close = text->rfind(')');
  if (close == std::string::npos) return InvalidArgument("stat: no \"(comm)\"");
  unsigned ppid = 0;
  char state = 0;
  if (std::sscanf(text->c_str() + close + 1, " %c %u", &state, &ppid) != 2)
    return InvalidArgument("stat: no ppid");
  return static_cast<uint32_t>(ppid);
}

Result<ProcessIdentity> ProcReader::Identify(uint32_t pid) const {
  auto before = StartTime(pid);
  if (!before.ok()) return before.status();
  auto cg = ReadSmall(pid, "cgroup");
  if (!cg.ok()) return cg.status();
  auto after = StartTime(pid);
  if (!after.ok()) return after.status();
  if (*after != *before)
    return NotFound("pid " + std::to_string(pid) + " exited and was reused while read");
  auto id = ParseCgroupFile(*cg);
  if (!id.ok()) return id.status().WithPrefix("pid " + std::to_string(pid));
  return ProcessIdentity{*id, *before};
}

Result<ProcessIdentity> ProcResolver::Resolve(uint32_t pid) {
  auto now = reader_->StartTime(pid);
  if (!now.ok()) {
    cache_.erase(pid);
    return now.status();
  }
  auto it = cache_.find(pid);
  if (it != cache_.end() && it->second.id.start_time == *now) {
    it->second.used = true;
    return it->second.id;
  }
  auto id = reader_->Identify(pid);
  if (!id.ok()) {
    cache_.erase(pid);
    return id.status();
  }
  cache_[pid] = Entry{*id, true};
  return *id;
}

void ProcResolver::Sweep() {
  for (auto it = cache_.begin(); it != cache_.end();) {
    if (!it->second.used) {
      it = cache_.erase(it);
    } else {
      it->second.used = false;
      ++it;
    }
  }
}

Status KillIfSame(const ProcReader& reader, uint32_t pid, uint64_t start_time) {
  if (pid == 0 || pid == 1) return InvalidArgument("refusing to signal pid " + std::to_string(pid));
  std::string who = "pid " + std::to_string(pid);
#ifdef SYS_pidfd_open
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
  if (pidfd >= 0) {
    // The pidfd pins the process: once its start time matches, the signal reaches it or nobody.
    if (start_time != 0) {
      auto now = reader.StartTime(pid);
      if (!now.ok() || *now != start_time) {
        ::close(pidfd);
        return NotFound(who + " is gone or was reused (start time changed): not signalled");
      }
    }
    long rc = ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
    int e = errno;
    ::close(pidfd);
    if (rc == 0) return Status::Ok();
    if (e == ESRCH) return NotFound(who + " exited before the signal");
    if (e != ENOSYS)
      return e == EPERM ? PermissionDenied(who + ": " + std::strerror(e))
                        : Unavailable(who + ": " + std::strerror(e));
  } else if (errno == ESRCH) {
    return NotFound(who + " is gone");
  }
#endif
  if (start_time != 0) {
    auto now = reader.StartTime(pid);
    if (!now.ok() || *now != start_time)
      return NotFound(who + " is gone or was reused (start time changed): not signalled");
  }
  if (::kill(static_cast<pid_t>(pid), SIGKILL) != 0) {
    int e = errno;
    if (e == ESRCH) return NotFound(who + " exited before the signal");
    return e == EPERM ? PermissionDenied(who + ": " + std::strerror(e))
                      : Unavailable(who + ": " + std::strerror(e));
  }
  return Status::Ok();
}

}  // namespace fracgpu::enforce
