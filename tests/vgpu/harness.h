#pragma once
// Runs tests/vgpu/vgpu_app with libvgpu.so preloaded over the fake driver, in a private
// temporary directory (its own region file and fake-GPU state), and parses its output.
// Paths of the built artifacts come from compile definitions (tests/vgpu/CMakeLists.txt).
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "../support/temp_dir.h"

namespace fracgpu::vgpu::testing {

inline constexpr const char* kTwoGpus =
    "GPU-11111111-1111-1111-1111-111111111111:1024,GPU-22222222-2222-2222-2222-222222222222:2048";
inline constexpr const char* kUuid0 = "GPU-11111111-1111-1111-1111-111111111111";
inline constexpr const char* kUuid1 = "GPU-22222222-2222-2222-2222-222222222222";
inline constexpr unsigned long long kMiB = 1024ull * 1024ull;

/// A private working directory with a region file (test_support::TempDir: under $TEST_TMPDIR,
/// checked); removed at destruction.
class Sandbox {
 public:
  const std::string& dir() const { return tmp_.path(); }
  std::string region() const { return tmp_.path() + "/region.cache"; }
  /// Writes the limits file the test copy of libvgpu.so reads (relative to the cwd).
  void WriteLimitsFile(const std::string& text) const {
    std::ofstream(tmp_.path() + "/fracgpu-limits.env") << text;
  }
  /// Default environment: preload, fake libraries, two fake GPUs, private region.
  std::map<std::string, std::string> Env() const {
    return {{"LD_PRELOAD", FRACGPU_LIBVGPU_TESTPATH},
            {"LD_LIBRARY_PATH", FRACGPU_FAKES_LIB},
            {"FAKE_GPU_DEVICES", kTwoGpus},
            {"FAKE_GPU_STATE_DIR", tmp_.path()},
            {"CUDA_DEVICE_MEMORY_SHARED_CACHE", region()},
            {"LIBCUDA_LOG_LEVEL", "0"}};
  }

 private:
  test_support::TempDir tmp_{"fracgpu-vgpu-"};  // checked, under $TEST_TMPDIR, removed at the end
};

/// A running vgpu_app.
struct Child {
  pid_t pid = -1;
  int out = -1;  // its stdout
  int in = -1;   // its stdin
};

inline Child Spawn(const Sandbox& box, const std::map<std::string, std::string>& env,
                   const std::vector<std::string>& ops, const char* program = FRACGPU_VGPU_APP) {
  int out_pipe[2], in_pipe[2];
  // Close-on-exec: a child started later must not hold an earlier child's stdin open (that
  // child would never see end of file). dup2 below clears the flag on the child's 0 and 1.
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(in_pipe, O_CLOEXEC) != 0) return {};
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string prog = program;
  argv.push_back(prog.data());
  std::vector<std::string> op_copy = ops;
  for (auto& s : op_copy) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    dup2(in_pipe[0], 0);
    close(out_pipe[0]);
    close(in_pipe[1]);
    if (chdir(box.dir().c_str()) != 0) _exit(126);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(in_pipe[0]);
  return {pid, out_pipe[0], in_pipe[1]};
}

/// Reads one line of the child's output ("" at end of file).
inline std::string ReadLine(const Child& c) {
  std::string line;
  char ch;
  while (read(c.out, &ch, 1) == 1) {
    if (ch == '\n') return line;
    line += ch;
  }
  return line;
}

/// Waits for the child; returns everything it printed after what was already read.
inline std::vector<std::string> Finish(Child& c, int* status_out = nullptr) {
  if (c.in >= 0) close(c.in);
  c.in = -1;
  std::vector<std::string> lines;
  for (std::string l = ReadLine(c); !l.empty(); l = ReadLine(c)) lines.push_back(l);
  int status = 0;
  waitpid(c.pid, &status, 0);
  close(c.out);
  if (status_out) *status_out = status;
  return lines;
}

/// Runs vgpu_app to completion and returns its output lines.
inline std::vector<std::string> RunApp(const Sandbox& box,
                                       const std::map<std::string, std::string>& env,
                                       const std::vector<std::string>& ops) {
  Child c = Spawn(box, env, ops);
  return Finish(c);
}

/// vgpu_app `ops` under `env`, its output in *out; returns every line written on stderr, or
/// (with `prefix`) those that start with it, in order.
inline std::vector<std::string> StderrLines(const Sandbox& box,
                                            const std::map<std::string, std::string>& env,
                                            const std::vector<std::string>& ops,
                                            std::vector<std::string>* out,
                                            const std::string& prefix = "") {
  const std::string err_path = box.dir() + "/stderr.txt";
  int err_fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  int saved = ::dup(2);
  ::dup2(err_fd, 2);  // the child inherits it
  Child c = Spawn(box, env, ops);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(err_fd);
  *out = Finish(c);
  std::ifstream in(err_path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) lines.push_back(line);
  return lines;
}

/// vgpu_app `ops` under `env`, its output in *out; returns the lines libvgpu.so wrote on stderr
/// that start with "fracgpu: " (the refusal reports), in order.
inline std::vector<std::string> RefusalLines(const Sandbox& box,
                                             const std::map<std::string, std::string>& env,
                                             const std::vector<std::string>& ops,
                                             std::vector<std::string>* out) {
  return StderrLines(box, env, ops, out, "fracgpu: ");
}

/// Whitespace-separated fields of a line.
inline std::vector<std::string> Fields(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string f; in >> f;) out.push_back(f);
  return out;
}

/// The CUresult printed by op line `line` (second field), or -1.
inline int Rc(const std::string& line) {
  auto f = Fields(line);
  return f.size() >= 2 ? std::stoi(f[1]) : -1;
}

/// The figures of vgpu_app's "region 0 <host_pid> <used> <context> <module> <data> <last_launch>
/// <now> <device used>" line (this process's slot on one device, bytes); ok false for any other.
struct RegionLine {
  bool ok = false;
  unsigned long long used = 0, context = 0, module = 0, data = 0, device_used = 0;
};
inline RegionLine ParseRegionLine(const std::string& line) {
  auto f = Fields(line);
  RegionLine r;
  if (f.size() != 10 || f[0] != "region" || f[1] != "0") return r;
  r.ok = true;
  r.used = std::stoull(f[3]);
  r.context = std::stoull(f[4]);
  r.module = std::stoull(f[5]);
  r.data = std::stoull(f[6]);
  r.device_used = std::stoull(f[9]);
  return r;
}

}  // namespace fracgpu::vgpu::testing
