// `fracgpu run`: fail-closed start and the driver-truth watch (see run_watch.h).
#include "run/run_watch.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "base/strings.h"
#include "enforce/enforce.h"
#include "enforce/nvml_processes.h"
#include "enforce/proc.h"
#include "enforce/region_claims.h"

namespace fracgpu::run {
namespace {

std::atomic<pid_t> g_child{0};

void Forward(int sig) {
  pid_t c = g_child.load();
  if (c > 0) ::kill(c, sig);
}

uint64_t NowNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Whether `pid` descends from this process (run is the subreaper: orphans of the command are
// reparented here, so the chain always ends at us while they live).
bool InTree(const enforce::ProcReader& proc, uint32_t pid) {
  const uint32_t self = static_cast<uint32_t>(::getpid());
  for (int depth = 0; depth < 128 && pid > 1; ++depth) {
    auto parent = proc.ParentPid(pid);
    if (!parent.ok()) return false;
    if (*parent == self) return true;
    pid = *parent;
  }
  return false;
}

}  // namespace

Status ProbeLibrary(const std::string& library) {
  struct stat st {};
  if (::stat(library.c_str(), &st) != 0)
    return NotFound(fmt::format("libvgpu.so at {}: {}", library, std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    return InvalidArgument(fmt::format("libvgpu.so at {}: not a regular file", library));
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return Unavailable(fmt::format("pipe: {}", std::strerror(errno)));
  pid_t pid = ::fork();
  if (pid < 0) return Unavailable(fmt::format("fork: {}", std::strerror(errno)));
  if (pid == 0) {
    ::close(p[0]);
    void* h = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* e = ::dlerror();
      std::string msg = e ? e : "dlopen failed";
      ssize_t w = ::write(p[1], msg.data(), msg.size());
      (void)w;
      ::_exit(1);
    }
    ::_exit(0);
  }
  ::close(p[1]);
  std::string msg;
  char buf[512];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0 && msg.size() < 4096;)
    msg.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  if (msg.empty()) msg = "the probe process died";
  return InvalidArgument(fmt::format("libvgpu.so at {} cannot be loaded: {}", library, msg));
}

namespace {

constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

// What RunWatched created, undone on every return: the region directory is removed (unless
// kept), then the signal mask is restored (a signal held until then is handled after).
struct RunCleanup {
  std::string dir;
  bool keep = false;
  bool restore_mask = false;
  sigset_t old_mask{};
  RunCleanup() = default;
  RunCleanup(const RunCleanup&) = delete;
  RunCleanup& operator=(const RunCleanup&) = delete;
  ~RunCleanup() {
    if (!dir.empty() && keep) {
      std::fprintf(stderr, "fracgpu run: kept the region directory %s (--keep-region)\n",
                   dir.c_str());
    } else if (!dir.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
      if (ec)
        std::fprintf(stderr, "fracgpu run: cannot remove %s: %s\n", dir.c_str(),
                     ec.message().c_str());
    }
    if (restore_mask) ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  }
};

}  // namespace

int RunWatched(const RunOptions& options_in, const WatchOptions& watch,
               const std::vector<std::string>& argv) {
  RunOptions options = options_in;
  auto env = BuildRunEnvironment(options);
  if (!env.ok()) {
    std::fprintf(stderr, "fracgpu run: %s\n", env.status().message().c_str());
    return kRunExitRefused;
  }
  if (Status st = ProbeLibrary(options.library); !st.ok()) {
    std::fprintf(stderr, "fracgpu run: %s; refusing to run without limits\n", st.message().c_str());
    return kRunExitRefused;
  }
  std::unique_ptr<enforce::NvmlProcesses> nvml;
  std::map<std::string, uint64_t> limits;  // GPU UUID → bytes
  std::vector<std::string> uuid_of_ordinal;
  if (watch.watch) {
    auto n = enforce::NvmlProcesses::Open(watch.nvml_library);
    if (!n.ok()) {
      std::fprintf(stderr,
                   "fracgpu run: cannot watch the driver's account (%s); refusing (--no-watch runs "
                   "with libvgpu.so only)\n",
                   n.status().message().c_str());
      return kRunExitRefused;
    }
    nvml = std::move(*n);
    std::vector<std::string> errors;
    auto gpus = nvml->Sample(&errors);
    if (!gpus.ok()) {
      std::fprintf(stderr, "fracgpu run: %s; refusing\n", gpus.status().message().c_str());
      return kRunExitRefused;
    }
    // Every piece as written, empty ones included ("" → {""}), as BuildRunEnvironment checked.
    std::vector<std::string> mems = base::SplitComma(options.gpumem);
    std::vector<std::string> devs = base::SplitComma(options.devices);
    if (options.devices.empty()) {
      devs.clear();
      for (size_t i = 0; i < mems.size(); ++i) devs.push_back(std::to_string(i));
    }
    for (size_t i = 0; i < devs.size() && i < mems.size(); ++i) {
      uint32_t index = static_cast<uint32_t>(std::stoul(devs[i]));
      std::string uuid;
      for (const auto& g : *gpus)
        if (g.index == index) uuid = g.uuid;
      if (uuid.empty()) {
        std::fprintf(
            stderr,
            "fracgpu run: --devices: GPU %u is not on this machine (NVML lists %zu); refusing\n",
            index, gpus->size());
        return kRunExitRefused;
      }
      uuid_of_ordinal.push_back(uuid);
      limits[uuid] = std::stoull(mems[i]) * 1024ull * 1024ull;
    }
  }

  // From here on something is created: hold the forwarded signals until the child's pid is
  // known (then they reach the command), and undo what was created on every return.
  RunCleanup cleanup;
  sigset_t forwarded;
  sigemptyset(&forwarded);
  for (int sig : kForwardedSignals) sigaddset(&forwarded, sig);
  ::sigprocmask(SIG_BLOCK, &forwarded, &cleanup.old_mask);
  cleanup.restore_mask = true;
  if (options.region.empty()) {
    const char* tmpdir = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/fracgpu-run-XXXXXX";
    if (!::mkdtemp(tmpl.data())) {
      std::fprintf(stderr, "fracgpu run: cannot create a region directory %s: %s\n", tmpl.c_str(),
                   std::strerror(errno));
      return kRunExitRefused;
    }
    cleanup.dir = tmpl;
    cleanup.keep = options.keep_region;
    options.region = tmpl + "/region.cache";
    env = BuildRunEnvironment(options);
    std::fprintf(stderr, "fracgpu run: region %s (inspect it with `fracgpu inspect %s`)\n",
                 options.region.c_str(), options.region.c_str());
  }

  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  int exec_pipe[2];
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "fracgpu run: pipe: %s\n", std::strerror(errno));
    return kRunExitRefused;
  }
  std::vector<std::string> args_copy = argv;
  std::vector<char*> args;
  for (auto& a : args_copy) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t child = ::fork();
  if (child < 0) {
    std::fprintf(stderr, "fracgpu run: fork: %s\n", std::strerror(errno));
    return kRunExitRefused;
  }
  if (child == 0) {
    ::sigprocmask(SIG_SETMASK, &cleanup.old_mask, nullptr);
    ::close(exec_pipe[0]);
    for (const auto& [k, v] : env.value()) ::setenv(k.c_str(), v.c_str(), 1);
    ::execvp(args[0], args.data());
    int e = errno;
    ssize_t w = ::write(exec_pipe[1], &e, sizeof e);
    (void)w;
    ::_exit(127);
  }
  ::close(exec_pipe[1]);
  int exec_errno = 0;
  if (::read(exec_pipe[0], &exec_errno, sizeof exec_errno) ==
      static_cast<ssize_t>(sizeof exec_errno)) {
    ::close(exec_pipe[0]);
    ::waitpid(child, nullptr, 0);
    std::fprintf(stderr, "fracgpu run: cannot run %s: %s\n", args[0], std::strerror(exec_errno));
    return 127;
  }
  ::close(exec_pipe[0]);
  g_child.store(child);
  // Not base::SignalWatcher: these signals are forwarded to the child, not turned into a stop.
  struct sigaction sa {};
  sa.sa_handler = Forward;
  for (int sig : kForwardedSignals) ::sigaction(sig, &sa, nullptr);
  ::sigprocmask(SIG_SETMASK, &cleanup.old_mask,
                nullptr);  // a signal held until now is forwarded here
  cleanup.restore_mask = false;

  enforce::Policy policy;
  policy.memory = enforce::Action::kKill;
  policy.region_mismatch = enforce::Action::kReport;
  policy.unmanaged = enforce::Action::kNone;  // other users' processes on a shared workstation
  policy.sm = enforce::Action::kNone;         // the SM limiter's business
  policy.confirm_polls = watch.confirm_polls;
  enforce::Enforcer enforcer(policy);
  enforce::ProcReader proc;
  const enforce::ContainerId tree{"fracgpu-run", "command"};
  bool killed = false, without_library = false;
  int child_status = 0;
  bool done = false;
  std::set<uint32_t> reported_without_library;
  // Processes already sent SIGKILL (pid, start time): until the kernel reaps them they still
  // appear in /proc and in NVML's list, and a second kill or line for them would be noise.
  std::set<std::pair<uint32_t, uint64_t>> sigkilled;
  while (!done) {
    bool killed_now = false;
    for (pid_t w; (w = ::waitpid(-1, &child_status, WNOHANG)) > 0;) {
      if (w == child) {
        done = true;
        break;
      }
      child_status = 0;
    }
    if (done) break;
    if (nvml) {
      std::vector<std::string> errors;
      auto gpus = nvml->Sample(&errors);
      enforce::Observation obs;
      obs.now_ns = NowNs();
      if (gpus.ok()) obs.gpus = std::move(*gpus);
      enforce::ContainerState c;
      c.id = tree;
      c.memory_limit_bytes = limits;
      // No region yet (no process initialised libvgpu.so) or an unusable one: no claims.
      if (auto claims = enforce::ReadRegionClaims(options.region, uuid_of_ordinal); claims.ok())
        c.claims = std::move(*claims);
      for (auto& g : obs.gpus) {
        g.managed = limits.count(g.uuid) > 0;
        if (!g.managed) continue;
        for (const auto& p : g.processes) {
          if (obs.owners.count(p.host_pid) || !InTree(proc, p.host_pid)) continue;
          auto start = proc.StartTime(p.host_pid);
          if (!start.ok()) {
            obs.exited.insert(p.host_pid);
            continue;
          }
          obs.owners[p.host_pid] = enforce::ProcessOwner{tree, *start};
        }
      }
      obs.containers.push_back(std::move(c));
      for (const enforce::Finding& f : enforcer.Evaluate(obs)) {
        if (f.reason == enforce::Reason::kMemoryOverLimit && f.action == enforce::Action::kKill) {
          if (sigkilled.count({f.pid, f.start_time})) continue;  // dying: SIGKILL already sent
          Status st = enforce::KillIfSame(proc, f.pid, f.start_time);
          if (st.ok()) {
            sigkilled.insert({f.pid, f.start_time});
            std::fprintf(stderr, "fracgpu run: killed pid %u: %s\n", f.pid, f.Describe().c_str());
          } else if (st.code() != StatusCode::kNotFound) {
            std::fprintf(stderr, "fracgpu run: cannot kill pid %u: %s\n", f.pid,
                         st.message().c_str());
          }
          if (st.ok()) killed = killed_now = true;
        } else if (f.reason == enforce::Reason::kRegionMismatch && f.new_episode) {
          if (f.claimed_bytes == 0 && !reported_without_library.count(f.pid)) {
            reported_without_library.insert(f.pid);
            without_library = true;
            std::fprintf(stderr,
                         "fracgpu run: pid %u holds %.1f MiB on %s that libvgpu.so never charged "
                         "(it went around the "
                         "library)\n",
                         f.pid, static_cast<double>(f.process_bytes) / 1048576.0,
                         f.gpu_uuid.c_str());
          } else if (f.claimed_bytes != 0) {
            std::fprintf(stderr, "fracgpu run: warning: %s\n", f.Describe().c_str());
          }
        }
      }
    }
    // Right after a kill, look again soon: the killed child is reaped (and run exits) at once.
    uint32_t sleep_ms = killed_now ? 5 : watch.poll_ms;
    timespec ts{static_cast<time_t>(sleep_ms / 1000),
                static_cast<long>(sleep_ms % 1000) * 1'000'000L};
    while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  }
  g_child.store(0);
  if (killed) return kRunExitKilled;
  if (without_library) {
    std::fprintf(
        stderr,
        "fracgpu run: exiting %d: a process ran on the GPU without libvgpu.so's accounting\n",
        kRunExitUnlimited);
    return kRunExitUnlimited;
  }
  if (WIFSIGNALED(child_status)) return 128 + WTERMSIG(child_status);
  return WIFEXITED(child_status) ? WEXITSTATUS(child_status) : 1;
}

}  // namespace fracgpu::run
