// bench_kill_latency — the node agent's kill latency at its defaults on a fake 8-GPU node with 64
// containers (issue 32 item 6): time from a bypassing process's allocation past its limit
// becoming visible in the driver's account to its death by SIGKILL from the agent.
//
// The node: the fake driver and NVML with 8 GPUs of 16 GiB; 64 fracgpu containers (8 per GPU,
// limits files and regions as the device plugin lays them out, a kubelet-style cgroup in a
// /proc copy), each with one compliant process holding 100 MiB through libvgpu.so. The agent is
// `fracgpu monitor`'s own loop (monitor::RunAgentLoop: metrics poll, enforcement poll) with
// the real NVML process source over the fake, the real limits and region readers and the real
// kill, on a thread of this process. Each run starts the issue-14 bypass (enforce_bypass_app
// bypass:1100, 1100 MiB around libvgpu.so in a 1000 MiB container; it prints "over <CLOCK_MONOTONIC
// ns>" once the fake driver holds the memory, i.e. once NVML lists it) in one container after a
// random pause, and waits for it to be reaped. Prints p50/p95/p99/max in ms.
//
//   build/release/bench/bench_kill_latency [runs=200] [enforce_interval_s] [confirm_polls]
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../tests/support/temp_dir.h"
#include "enforce/nvml_processes.h"
#include "metrics/registry.h"
#include "monitor/agent_loop.h"
#include "monitor/nvml_stats.h"

namespace {

namespace fs = std::filesystem;
using namespace fracgpu;
constexpr int kGpus = 8, kContainersPerGpu = 8, kContainers = kGpus * kContainersPerGpu;

std::string Uuid(int g) {
  char b[64];
  std::snprintf(b, sizeof b, "GPU-%08d-0000-0000-0000-000000000000", g);
  return b;
}
std::string PodUid(int c) {
  char b[64];
  std::snprintf(b, sizeof b, "%08x-0000-4000-8000-000000000000", c);
  return b;
}
std::string ContainerId(int c, int k) {
  char b[80];
  std::snprintf(b, sizeof b, "%064x", c * 1000 + k);
  return b;
}

struct Proc {
  pid_t pid = -1;
  int out = -1;
  int in = -1;
  std::string Line() const {
    std::string l;
    char ch;
    while (read(out, &ch, 1) == 1 && ch != '\n') l += ch;
    return l;
  }
};

class Node {
 public:
  Node() {
    for (const auto& d : {hook_ + "/vgpu/limits", hook_ + "/vgpu/containers", proc_, state_})
      fs::create_directories(d);
    std::string devices;
    for (int g = 0; g < kGpus; ++g) devices += (g ? "," : "") + Uuid(g) + ":16384";
    setenv("FAKE_GPU_DEVICES", devices.c_str(), 1);
    setenv("FAKE_GPU_STATE_DIR", state_.c_str(), 1);
    for (int c = 0; c < kContainers; ++c) {
      std::ofstream(hook_ + "/vgpu/limits/" + PodUid(c) + "_main.env")
          << "NVIDIA_VISIBLE_DEVICES=" << Uuid(Gpu(c)) << "\nCUDA_DEVICE_MEMORY_LIMIT_0=1000m\n";
      fs::create_directories(hook_ + "/vgpu/containers/" + PodUid(c) + "_main");
    }
  }
  ~Node() {
    for (auto& p : procs_) {
      ::kill(p.pid, SIGKILL);
      waitpid(p.pid, nullptr, 0);
      close(p.out);
      close(p.in);
    }
  }
  static int Gpu(int c) { return c / kContainersPerGpu; }
  std::string hook() const { return hook_; }
  std::string proc() const { return proc_; }

  // Starts `program ops…` as process `k` of container `c` (libvgpu.so preloaded).
  Proc Start(const std::string& program, const std::vector<std::string>& ops, int c, int k,
             bool keep = true) {
    int p[2], q[2];
    if (pipe(p) != 0 || pipe(q) != 0) std::abort();
    std::vector<std::string> env_s = {"LD_PRELOAD=" FRACGPU_LIBVGPU,
                                      "LD_LIBRARY_PATH=" FRACGPU_FAKES_LIB,
                                      std::string("FAKE_GPU_DEVICES=") + getenv("FAKE_GPU_DEVICES"),
                                      "FAKE_GPU_STATE_DIR=" + state_,
                                      "LIBCUDA_LOG_LEVEL=0",
                                      "CUDA_VISIBLE_DEVICES=" + std::to_string(Gpu(c)),
                                      "CUDA_DEVICE_MEMORY_LIMIT_0=1000m",
                                      "NVIDIA_VISIBLE_DEVICES=" + Uuid(Gpu(c)),
                                      "CUDA_DEVICE_MEMORY_SHARED_CACHE=" + hook_ +
                                          "/vgpu/containers/" + PodUid(c) + "_main/region.cache"};
    std::vector<char*> envp;
    for (auto& s : env_s) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv_s = {program};
    argv_s.insert(argv_s.end(), ops.begin(), ops.end());
    std::vector<char*> argv;
    for (auto& s : argv_s) argv.push_back(s.data());
    argv.push_back(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
      dup2(p[1], 1);
      dup2(q[0], 0);
      close(p[0]);
      close(q[1]);
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    close(p[1]);
    close(q[0]);
    std::string d = proc_ + "/" + std::to_string(pid);
    fs::create_directories(d);
    std::string sd = PodUid(c);
    std::replace(sd.begin(), sd.end(), '-', '_');
    std::ofstream(d + "/cgroup") << "0::/kubepods.slice/kubepods-burstable.slice/"
                                    "kubepods-burstable-pod"
                                 << sd << ".slice/cri-containerd-" << ContainerId(c, k)
                                 << ".scope\n";
    {
      std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
      std::ofstream(d + "/stat") << in.rdbuf();
    }
    Proc proc{pid, p[0], q[1]};
    if (keep) procs_.push_back(proc);
    return proc;
  }

 private:
  test_support::TempDir tmp_{"fracgpu-bench-kill-"};
  std::string dir_ = tmp_.path();
  std::string hook_ = dir_ + "/hook", proc_ = dir_ + "/proc", state_ = dir_ + "/state";
  std::vector<Proc> procs_;
};

uint64_t NowNs() { return monitor::MonotonicNowNs(); }

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 200;
  const double enforce_s = argc > 2 ? std::atof(argv[2]) : monitor::kDefaultEnforceIntervalS;
  const int confirm = argc > 3 ? std::atoi(argv[3]) : monitor::kDefaultConfirmPolls;
  Node node;
  // 64 compliant processes, one per container, 100 MiB each through libvgpu.so.
  for (int c = 0; c < kContainers; ++c) {
    Proc p = node.Start(FRACGPU_VGPU_APP, {"init", "alloc:104857600", "wait"}, c, 0);
    std::string a = p.Line(), b = p.Line(), r = p.Line();
    if (a != "init 0" || b.rfind("alloc 0", 0) != 0 || r != "ready") {
      std::fprintf(stderr, "container %d: background process failed: %s / %s / %s\n", c, a.c_str(),
                   b.c_str(), r.c_str());
      return 1;
    }
  }
  auto nvml = enforce::NvmlProcesses::Open(std::string(FRACGPU_FAKES_LIB) + "/libnvidia-ml.so.1");
  auto stats = monitor::NvmlGpuStats::Open(std::string(FRACGPU_FAKES_LIB) + "/libnvidia-ml.so.1");
  if (!nvml.ok() || !stats.ok()) {
    std::fprintf(stderr, "fake NVML: %s %s\n", nvml.status().ToString().c_str(),
                 stats.status().ToString().c_str());
    return 1;
  }
  monitor::MonitorOptions mo;
  mo.node_name = "bench";
  mo.hook_path = node.hook();
  mo.node_dir = "";
  metrics::Registry enforcement_registry;
  monitor::Monitor mon(mo, stats->get(), nullptr);
  monitor::EnforcementOptions eo;
  eo.hook_path = node.hook();
  eo.proc_root = node.proc();
  eo.policy.confirm_polls = confirm;
  eo.policy.memory_slack_bytes =
      static_cast<uint64_t>(monitor::kDefaultMemorySlackMiB * 1024 * 1024);
  monitor::NodeEnforcer enforcer(eo, nvml->get(), nullptr, &enforcement_registry);
  monitor::AgentSchedule schedule;
  schedule.enforce_period = std::chrono::nanoseconds(static_cast<int64_t>(enforce_s * 1e9));
  base::StopSignal stop;
  std::thread agent([&] { monitor::RunAgentLoop(&mon, &enforcer, schedule, &stop); });

  std::mt19937 rng(32);
  std::uniform_int_distribution<int> pause_ms(0, 400), container(0, kContainers - 1);
  std::vector<double> ms;
  int missed = 0;
  for (int i = 0; i < runs; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms(rng)));
    int c = container(rng);
    Proc b = node.Start(FRACGPU_BYPASS_APP, {"bypass:1100", "hold:30000"}, c, 1 + i, false);
    std::string line = b.Line();
    if (line.rfind("over ", 0) != 0) {
      std::fprintf(stderr, "run %d: bypass said \"%s\"\n", i, line.c_str());
      ::kill(b.pid, SIGKILL);
      waitpid(b.pid, nullptr, 0);
      close(b.out);
      close(b.in);
      ++missed;
      continue;
    }
    const uint64_t over = std::strtoull(line.c_str() + 5, nullptr, 10);
    int status = 0;
    uint64_t dead = 0;
    for (;;) {
      if (waitpid(b.pid, &status, WNOHANG) == b.pid) {
        dead = NowNs();
        break;
      }
      if (NowNs() - over > 10'000'000'000ull) {  // not killed within 10 s: a miss
        ::kill(b.pid, SIGKILL);
        waitpid(b.pid, &status, 0);
        break;
      }
      usleep(200);
    }
    close(b.out);
    close(b.in);
    fs::remove_all(node.proc() + "/" + std::to_string(b.pid));
    if (dead == 0 || !WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
      ++missed;
      continue;
    }
    ms.push_back(static_cast<double>(dead - over) / 1e6);
  }
  stop.Stop();
  agent.join();
  if (ms.empty()) {
    std::fprintf(stderr, "no run was killed\n");
    return 1;
  }
  std::sort(ms.begin(), ms.end());
  auto q = [&](double f) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(f * static_cast<double>(ms.size())))];
  };
  std::printf(
      "| enforce interval | confirm polls | runs killed | p50 ms | p95 ms | p99 ms | max ms |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  std::printf("| %.2f s | %d | %zu/%d | %.0f | %.0f | %.0f | %.0f |\n", enforce_s, confirm,
              ms.size(), runs, q(0.5), q(0.95), q(0.99), ms.back());
  return missed == 0 ? 0 : 2;
}
