#include "process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

extern char** environ;

namespace fracgpu::e2e {
namespace {

// argv/envp arrays for execve, owning their strings.
struct ExecArgs {
  std::vector<std::string> strings_argv, strings_env;
  std::vector<char*> argv, envp;
  ExecArgs(const std::vector<std::string>& a, const std::map<std::string, std::string>& env)
      : strings_argv(a) {
    for (const auto& [k, v] : env) strings_env.push_back(k + "=" + v);
    for (auto& s : strings_argv) argv.push_back(s.data());
    argv.push_back(nullptr);
    for (auto& s : strings_env) envp.push_back(s.data());
    envp.push_back(nullptr);
  }
};

// In the child after fork: die with the test process, so no daemon outlives a crashed test.
void DieWithParent() { prctl(PR_SET_PDEATHSIG, SIGKILL); }

}  // namespace

std::map<std::string, std::string> CurrentEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string s = *e;
    auto eq = s.find('=');
    if (eq != std::string::npos) env[s.substr(0, eq)] = s.substr(eq + 1);
  }
  return env;
}

bool PollUntil(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

Daemon::Daemon(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
               std::string log_path)
    : log_path_(std::move(log_path)) {
  ExecArgs args(argv, env);
  int fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    DieWithParent();
    if (getppid() != parent) _exit(126);
    dup2(fd, 1);
    dup2(fd, 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    execve(args.argv[0], args.argv.data(), args.envp.data());
    _exit(127);
  }
  ::close(fd);
  pid_ = pid;
}

Daemon::~Daemon() {
  if (pid_ > 0) Stop(SIGTERM);
}

std::string Daemon::Log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Daemon::WaitForLog(const std::string& needle, std::chrono::milliseconds timeout) const {
  return PollUntil(
             [&] {
               if (Log().find(needle) != std::string::npos) return true;
               // Exited (a zombie, not reaped here): nothing more will be written.
               if (pid_ <= 0) return true;
               siginfo_t info{};
               return waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) ==
                          0 &&
                      info.si_pid != 0;
             },
             timeout) &&
         Log().find(needle) != std::string::npos;
}

int Daemon::Stop(int sig) {
  if (pid_ <= 0) return -1;
  kill(pid_, sig);
  int status = 0;
  bool exited =
      PollUntil([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, std::chrono::seconds(10));
  if (!exited) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
  }
  pid_ = -1;
  return status;
}

ContainerProcess::ContainerProcess(const std::vector<std::string>& argv,
                                   const std::map<std::string, std::string>& env,
                                   const std::string& cwd, const std::string& stderr_path) {
  ExecArgs args(argv, env);
  int out_pipe[2], in_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return;
  if (pipe2(in_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return;
  }
  int err = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    DieWithParent();
    if (getppid() != parent) _exit(126);
    dup2(out_pipe[1], 1);
    dup2(in_pipe[0], 0);
    if (err >= 0) dup2(err, 2);
    if (chdir(cwd.c_str()) != 0) _exit(126);
    execve(args.argv[0], args.argv.data(), args.envp.data());
    _exit(127);
  }
  ::close(out_pipe[1]);
  ::close(in_pipe[0]);
  if (err >= 0) ::close(err);
  if (pid < 0) {
    ::close(out_pipe[0]);
    ::close(in_pipe[1]);
    return;
  }
  pid_ = pid;
  out_fd_ = out_pipe[0];
  in_fd_ = in_pipe[1];
  reader_ = std::thread([this] { ReadLoop(); });
}

ContainerProcess::~ContainerProcess() { Kill(); }

void ContainerProcess::ReadLoop() {
  std::string line;
  char buf[512];
  for (;;) {
    ssize_t n = ::read(out_fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    std::lock_guard<std::mutex> lock(mu_);
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] == '\n') {
        lines_.push_back(line);
        line.clear();
      } else {
        line.push_back(buf[i]);
      }
    }
    cv_.notify_all();
  }
  int status = 0;
  waitpid(pid_, &status, 0);
  std::lock_guard<std::mutex> lock(mu_);
  if (!line.empty()) lines_.push_back(line);
  status_ = status;
  cv_.notify_all();
}

std::vector<std::string> ContainerProcess::Lines() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lines_;
}

bool ContainerProcess::WaitForLine(const std::string& line,
                                   std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  auto seen = [&] {
    for (const auto& l : lines_) {
      if (l == line) return true;
    }
    return false;
  };
  cv_.wait_for(lock, timeout, [&] { return seen() || status_.has_value(); });
  return seen();
}

std::optional<int> ContainerProcess::WaitExit(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return status_.has_value(); });
  return status_;
}

void ContainerProcess::CloseStdin() {
  std::lock_guard<std::mutex> lock(mu_);
  if (in_fd_ >= 0) ::close(in_fd_);
  in_fd_ = -1;
}

void ContainerProcess::Kill() {
  if (pid_ <= 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!status_) kill(pid_, SIGKILL);
  }
  if (reader_.joinable()) reader_.join();
  CloseStdin();
  if (out_fd_ >= 0) ::close(out_fd_);
  out_fd_ = -1;
}

}  // namespace fracgpu::e2e
