#pragma once
// Child processes of the end-to-end tests: `fracgpu scheduler`, `fracgpu device-plugin` (a log
// file each) and the "containers" the fake kubelet starts (stdin/stdout pipes, output read
// line by line). Every wait is bounded by a deadline and woken by the condition it waits for.
#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace fracgpu::e2e {

/// The current environment (`environ`) as a map.
std::map<std::string, std::string> CurrentEnvironment();

/// Polls `pred` until it holds or `timeout` passes (for conditions outside this process, such
/// as a line in a child's log file, which nothing can notify us of); returns pred(). The poll
/// interval is 5 ms: a bounded wait on a condition, not a timing assumption.
bool PollUntil(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

/// A daemon child (scheduler, device plugin) whose stdout and stderr go to `log_path`.
/// The destructor stops it (SIGTERM, then SIGKILL after 10 s) and reaps it.
class Daemon {
 public:
  /// Starts `argv[0]` with `argv` and exactly `env`. Check running() for success.
  Daemon(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
         std::string log_path);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  /// The log so far.
  std::string Log() const;
  /// Waits until the log contains `needle`; false on timeout or when the process exited.
  bool WaitForLog(const std::string& needle, std::chrono::milliseconds timeout) const;
  /// Sends `sig`, waits for the exit (up to 10 s, then SIGKILL) and returns the wait status.
  int Stop(int sig);

 private:
  pid_t pid_ = -1;
  std::string log_path_;
};

/// A container process: stdin and stdout are pipes; stdout is read line by line on a thread.
class ContainerProcess {
 public:
  /// Starts `argv` with exactly `env`, working directory `cwd`; stderr goes to `stderr_path`.
  ContainerProcess(const std::vector<std::string>& argv,
                   const std::map<std::string, std::string>& env, const std::string& cwd,
                   const std::string& stderr_path);
  /// Kills (SIGKILL) a process still running and reaps it.
  ~ContainerProcess();
  ContainerProcess(const ContainerProcess&) = delete;
  ContainerProcess& operator=(const ContainerProcess&) = delete;

  bool started() const { return pid_ > 0; }
  /// Its host PID (-1 when it did not start).
  pid_t pid() const { return pid_; }
  /// The lines printed so far.
  std::vector<std::string> Lines() const;
  /// Waits until a printed line equals `line` or the process ended; true when seen.
  bool WaitForLine(const std::string& line, std::chrono::milliseconds timeout) const;
  /// Waits for the exit; the wait status, or nullopt on timeout.
  std::optional<int> WaitExit(std::chrono::milliseconds timeout) const;
  /// Closes its stdin (vgpu_app's `wait` op then returns and the process exits).
  void CloseStdin();
  /// SIGKILL and reap (idempotent).
  void Kill();

 private:
  void ReadLoop();

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int in_fd_ = -1;
  std::thread reader_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<std::string> lines_;
  std::optional<int> status_;
};

}  // namespace fracgpu::e2e
