// The node agent's enforcement (monitor/enforcement.h) over the fake driver and NVML with real
// processes: a bypassing tenant over its limit is killed on the second poll with an Event
// naming the pod, the numbers and the action, after which its neighbour gets its full slice;
// report mode (pod annotation) keeps it running and reports once per episode; a zeroed region
// is detected; unreadable limits and host processes are reported, never killed; a pod
// container fracgpu gave no GPU is killed (the agent's default) or reported; graphics memory
// counts; the default slack; NVML errors keep the agent running. /proc/<pid>/cgroup is a copy of
// /proc's layout (the processes run on this host, in no pod); /proc/<pid>/stat is the real one.
#include "monitor/enforcement.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include "../support/temp_dir.h"
#include "monitor/agent_loop.h"

namespace fracgpu::monitor::testing {
namespace {

namespace fs = std::filesystem;
constexpr const char* kGpu = "GPU-11111111-1111-1111-1111-111111111111";
constexpr const char* kOtherGpu = "GPU-22222222-2222-2222-2222-222222222222";
const std::string kUidA = "aaaaaaaa-1111-4111-8111-000000000001";
const std::string kUidB = "bbbbbbbb-2222-4222-8222-000000000002";
const std::string kIdA(64, 'a');
const std::string kIdB(64, 'b');

struct RecordedEvent {
  PodRef pod;
  std::string reason, message;
};
class Events : public EventSink {
 public:
  void PodWarning(const PodRef& pod, const std::string& reason,
                  const std::string& message) override {
    events.push_back({pod, reason, message});
  }
  std::vector<RecordedEvent> events;
};

struct Proc {
  pid_t pid = -1;
  int out = -1;
  int in = -1;  // its stdin, kept open (vgpu_app's "wait" runs until it closes)
  std::string Line() {
    std::string l;
    char c;
    while (read(out, &c, 1) == 1 && c != '\n') l += c;
    return l;
  }
};

class EnforcementTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path();
    hook_ = dir_ + "/hook";
    proc_ = dir_ + "/proc";
    state_ = dir_ + "/state";
    for (const auto& d : {hook_ + "/vgpu/limits", hook_ + "/vgpu/containers", proc_, state_})
      fs::create_directories(d);
    // GPU 0 holds 2048 MiB: two 1000 MiB slices fit, a 1100 MiB bypass plus a full neighbour do
    // not.
    setenv("FAKE_GPU_DEVICES", (std::string(kGpu) + ":2048," + kOtherGpu + ":2048").c_str(), 1);
    setenv("FAKE_GPU_STATE_DIR", state_.c_str(), 1);
    auto n = enforce::NvmlProcesses::Open(std::string(FRACGPU_FAKES_LIB) + "/libnvidia-ml.so.1");
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    nvml_ = std::move(*n);
    pods_[kUidA] = PodRef{kUidA, "team-a", "pod-a", {{kIdA, "main"}}, "", ""};
    pods_[kUidB] = PodRef{kUidB, "team-b", "pod-b", {{kIdB, "main"}}, "", ""};
  }
  void TearDown() override {
    for (auto& p : procs_) {
      ::kill(p.pid, SIGKILL);
      waitpid(p.pid, nullptr, 0);
      close(p.out);
      close(p.in);
    }
  }
  // A fracgpu container: the plugin's limits file and region directory.
  void Container(const std::string& uid, const std::string& limit = "1000m") {
    std::ofstream(hook_ + "/vgpu/limits/" + uid + "_main.env")
        << "NVIDIA_VISIBLE_DEVICES=" << kGpu << "\nCUDA_DEVICE_MEMORY_LIMIT_0=" << limit << "\n";
    fs::create_directories(hook_ + "/vgpu/containers/" + uid + "_main");
  }
  std::string Region(const std::string& uid) {
    return hook_ + "/vgpu/containers/" + uid + "_main/region.cache";
  }
  // Starts `program ops…` as a process of container `uid` (cgroup "" = a host process).
  Proc Start(const std::string& program, const std::vector<std::string>& ops,
             const std::string& uid, const std::string& cid, const std::string& cgroup = "") {
    int p[2], q[2];
    EXPECT_EQ(pipe(p), 0);
    EXPECT_EQ(pipe(q), 0);
    std::vector<std::string> env_s = {
        "LD_PRELOAD=" FRACGPU_LIBVGPU,
        "LD_LIBRARY_PATH=" FRACGPU_FAKES_LIB,
        "FAKE_GPU_DEVICES=" + std::string(getenv("FAKE_GPU_DEVICES")),
        "FAKE_GPU_STATE_DIR=" + state_,
        "LIBCUDA_LOG_LEVEL=0",
        "CUDA_DEVICE_MEMORY_LIMIT_0=1000m",
        "NVIDIA_VISIBLE_DEVICES=" + std::string(kGpu),
        "CUDA_DEVICE_MEMORY_SHARED_CACHE=" + (uid.empty() ? dir_ + "/host.cache" : Region(uid))};
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
    // Its /proc entry: the real stat (start time), a kubelet-style cgroup.
    std::string d = proc_ + "/" + std::to_string(pid);
    fs::create_directories(d);
    std::string sd = uid;
    std::replace(sd.begin(), sd.end(), '-', '_');
    std::ofstream(d + "/cgroup")
        << (cgroup.empty() ? "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
                                 sd + ".slice/cri-containerd-" + cid + ".scope\n"
                           : cgroup);
    {
      std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
      std::ofstream(d + "/stat") << in.rdbuf();  // start time is fixed for the process's life
    }
    procs_.push_back({pid, p[0], q[1]});
    return procs_.back();
  }
  NodeEnforcer Enforcer(enforce::Policy policy = {}) {
    EnforcementOptions o;
    o.hook_path = hook_;
    o.proc_root = proc_;
    o.policy = policy;
    return NodeEnforcer(o, nvml_.get(), &events_, &registry_);
  }
  double Metric(const std::string& reason) {
    std::string text = registry_.Render();
    std::string key = "fracgpu_enforcement_violations_total{reason=\"" + reason + "\"} ";
    size_t p = text.find(key);
    return p == std::string::npos ? 0 : std::stod(text.substr(p + key.size()));
  }
  static bool Alive(pid_t pid) {
    int st = 0;
    return waitpid(pid, &st, WNOHANG) == 0;
  }
  static int WaitSignal(pid_t pid) {
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return -1;
    return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
  }

  test_support::TempDir tmp_{"fracgpu-enforce-"};  // removed after TearDown killed the apps
  std::string dir_, hook_, proc_, state_;
  std::unique_ptr<enforce::NvmlProcesses> nvml_;
  std::map<std::string, PodRef> pods_;
  std::vector<Proc> procs_;
  Events events_;
  metrics::Registry registry_;
};

TEST_F(EnforcementTest, BypassOverTheLimitIsKilledWithAnEventAndTheNeighbourGetsItsSlice) {
  Container(kUidA);
  Container(kUidB);
  Proc a = Start(FRACGPU_BYPASS_APP, {"bypass:1100", "hold:15000"}, kUidA, kIdA);
  ASSERT_EQ(a.Line().rfind("over ", 0), 0u);
  NodeEnforcer e = Enforcer();
  auto first = e.Poll(1, pods_);
  EXPECT_TRUE(Alive(a.pid));  // one poll over: not yet
  EXPECT_TRUE(events_.events.empty());
  auto second = e.Poll(2, pods_);
  EXPECT_EQ(WaitSignal(a.pid), SIGKILL);
  ASSERT_FALSE(events_.events.empty());
  const RecordedEvent* kill_event = nullptr;
  for (const auto& ev : events_.events)
    if (ev.reason == "GPUProcessKilled") kill_event = &ev;
  ASSERT_NE(kill_event, nullptr);
  EXPECT_EQ(kill_event->pod.name, "pod-a");
  EXPECT_EQ(kill_event->pod.namespace_name, "team-a");
  EXPECT_NE(kill_event->message.find("uses 1100.0 MiB of 1000.0 MiB (+100.0 MiB)"),
            std::string::npos)
      << kill_event->message;
  EXPECT_NE(kill_event->message.find("killed pid " + std::to_string(a.pid)), std::string::npos)
      << kill_event->message;
  EXPECT_EQ(Metric("memory_over_limit"), 1);
  EXPECT_NE(
      registry_.Render().find("fracgpu_enforcement_kills_total{reason=\"memory_over_limit\"} 1"),
      std::string::npos);
  // The neighbour now allocates its whole 1000 MiB slice through libvgpu.so.
  Proc b = Start(FRACGPU_VGPU_APP, {"init", "alloc:1048576000", "wait"}, kUidB, kIdB);
  EXPECT_EQ(b.Line(), "init 0");
  EXPECT_EQ(b.Line().rfind("alloc 0", 0), 0u);
  EXPECT_EQ(b.Line(), "ready");  // holds its slice while the agent keeps polling
  for (int i = 0; i < 4; ++i) e.Poll(3 + i, pods_);
  for (const auto& ev : events_.events)
    EXPECT_EQ(ev.pod.name, "pod-a") << ev.message;  // B is compliant
}

// Graphics (OpenGL / Vulkan) memory counts (issue 32 item 6): a process of container A that
// holds 1100 MiB through a graphics context, which NVML lists only among the graphics
// processes (nvmlDeviceGetGraphicsRunningProcesses_v3; the fake's gfx-<pid> file), is killed.
TEST_F(EnforcementTest, GraphicsMemoryOverTheLimitIsKilled) {
  Container(kUidA);
  Proc a = Start(FRACGPU_BYPASS_APP, {"pid", "hold:15000"}, kUidA, kIdA);
  ASSERT_EQ(a.Line(), "pid " + std::to_string(a.pid));
  std::ofstream(state_ + "/gfx-" + std::to_string(a.pid)) << "0 " << 1100 * 1024 * 1024 << "\n";
  NodeEnforcer e = Enforcer();
  e.Poll(1, pods_);
  EXPECT_TRUE(Alive(a.pid));
  e.Poll(2, pods_);
  EXPECT_EQ(WaitSignal(a.pid), SIGKILL);
  EXPECT_EQ(Metric("memory_over_limit"), 1);
}

TEST_F(EnforcementTest, ReportModeKeepsItRunningAndReportsOncePerEpisode) {
  Container(kUidA);
  pods_[kUidA].enforcement = "report";
  Proc a = Start(FRACGPU_BYPASS_APP, {"bypass:1100", "hold:15000"}, kUidA, kIdA);
  ASSERT_EQ(a.Line().rfind("over ", 0), 0u);
  NodeEnforcer e = Enforcer();
  for (int i = 0; i < 6; ++i) e.Poll(i, pods_);
  EXPECT_TRUE(Alive(a.pid));
  int memory_events = 0, mismatch_events = 0;
  for (const auto& ev : events_.events) {
    memory_events += ev.reason == "GPUMemoryOverLimit";
    mismatch_events += ev.reason == "GPURegionMismatch";
    EXPECT_EQ(ev.message.find("killed"), std::string::npos);
  }
  EXPECT_EQ(memory_events, 1);
  EXPECT_EQ(mismatch_events, 1);  // the bypassed bytes never reached the region
  EXPECT_EQ(Metric("memory_over_limit"), 1);
  EXPECT_EQ(Metric("region_mismatch"), 1);
}

TEST_F(EnforcementTest, TenantThatZeroesItsRegionIsDetectedAndActedOn) {
  Container(kUidA);
  Proc a = Start(FRACGPU_VGPU_APP, {"init", "alloc:524288000", "wait"}, kUidA, kIdA);
  EXPECT_EQ(a.Line(), "init 0");
  EXPECT_EQ(a.Line().rfind("alloc 0", 0), 0u);
  EXPECT_EQ(a.Line(), "ready");
  enforce::Policy kill_tamper;
  kill_tamper.region_mismatch = enforce::Action::kKill;
  NodeEnforcer e = Enforcer(kill_tamper);
  e.Poll(1, pods_);
  e.Poll(2, pods_);
  EXPECT_TRUE(events_.events.empty());  // compliant: nothing
  // The tenant overwrites its own writable region with zeros.
  Proc z = Start(FRACGPU_BYPASS_APP, {"zero:" + Region(kUidA)}, kUidA, kIdA);
  EXPECT_EQ(z.Line().rfind("zero ", 0), 0u);
  e.Poll(3, pods_);
  e.Poll(4, pods_);
  ASSERT_EQ(events_.events.size(), 1u);
  EXPECT_EQ(events_.events[0].reason, "GPUProcessKilled");
  EXPECT_NE(events_.events[0].message.find("region_mismatch"), std::string::npos)
      << events_.events[0].message;
  EXPECT_NE(events_.events[0].message.find("not a valid region (magic 0x0"), std::string::npos)
      << events_.events[0].message;
  EXPECT_EQ(WaitSignal(a.pid), SIGKILL);
  EXPECT_EQ(Metric("region_mismatch"), 1);
}

TEST_F(EnforcementTest, UnreadableLimitsAndForeignProcessesAreReportedNeverKilled) {
  Container(kUidA);
  // A's limits file cannot be read (a directory where the file should be).
  fs::remove(hook_ + "/vgpu/limits/" + kUidA + "_main.env");
  fs::create_directories(hook_ + "/vgpu/limits/" + kUidA + "_main.env");
  Container(kUidB);  // names GPU 0: managed
  Proc a = Start(FRACGPU_BYPASS_APP, {"bypass:1100", "hold:15000"}, kUidA, kIdA);
  ASSERT_EQ(a.Line().rfind("over ", 0), 0u);
  Proc host = Start(FRACGPU_BYPASS_APP, {"bypass:100", "hold:15000"}, "", "",
                    "0::/system.slice/trainer.service\n");
  ASSERT_EQ(host.Line().rfind("over ", 0), 0u);
  enforce::Policy harsh;
  harsh.unmanaged = enforce::Action::kKill;
  harsh.region_mismatch = enforce::Action::kKill;
  NodeEnforcer e = Enforcer(harsh);
  for (int i = 0; i < 4; ++i) e.Poll(i, pods_);
  EXPECT_TRUE(Alive(a.pid));
  EXPECT_TRUE(Alive(host.pid));
  // A's process: its container's limits cannot be read; the host process: in no container.
  EXPECT_EQ(Metric("limits_unreadable"), 1) << registry_.Render();
  EXPECT_EQ(Metric("unmanaged_process"), 1) << registry_.Render();
  bool named = false;
  for (const auto& ev : events_.events) {
    if (ev.reason == "GPULimitsUnreadable" && ev.pod.name == "pod-a") named = true;
  }
  EXPECT_TRUE(named);
  EXPECT_EQ(registry_.Render().find("fracgpu_enforcement_kills_total{"), std::string::npos);
}

// A process holding a GPU it was not given (issue 32 item 6): a pod with no GPU request that set
// NVIDIA_VISIBLE_DEVICES=all, and a sidecar without limits in a fracgpu pod, are killed under
// the agent's default (--enforce-unmanaged kill), only reported under `report`; a host process
// stays reported only (UnreadableLimitsAndForeignProcessesAreReportedNeverKilled).
TEST_F(EnforcementTest, PodContainersHoldingGpusTheyWereNotGivenAreKilled) {
  const std::string uid_c = "cccccccc-3333-4333-8333-000000000003";
  const std::string id_c(64, 'c'), id_side(64, 'd');
  pods_[uid_c] = PodRef{uid_c, "team-c", "pod-c", {{id_c, "main"}}, "", ""};
  pods_[kUidA].container_names[id_side] = "sidecar";
  Container(kUidA);  // GPU 0 is managed
  for (const std::string mode : {"report", "kill"}) {
    SCOPED_TRACE(mode);
    Proc c = Start(FRACGPU_BYPASS_APP, {"bypass:100", "hold:15000"}, uid_c, id_c);
    ASSERT_EQ(c.Line().rfind("over ", 0), 0u);
    Proc side = Start(FRACGPU_BYPASS_APP, {"bypass:100", "hold:15000"}, kUidA, id_side);
    ASSERT_EQ(side.Line().rfind("over ", 0), 0u);
    enforce::Policy policy;
    ASSERT_TRUE(enforce::ParseAction(mode, &policy.unmanaged));
    NodeEnforcer e = Enforcer(policy);
    e.Poll(1, pods_);
    EXPECT_TRUE(Alive(c.pid));  // confirmed on the second poll
    e.Poll(2, pods_);
    if (mode == "kill") {
      EXPECT_EQ(WaitSignal(c.pid), SIGKILL);
      EXPECT_EQ(WaitSignal(side.pid), SIGKILL);
    } else {
      e.Poll(3, pods_);
      EXPECT_TRUE(Alive(c.pid));
      EXPECT_TRUE(Alive(side.pid));
      EXPECT_EQ(Metric("unmanaged_process"), 2);  // reported, once per episode
      for (pid_t pid : {c.pid, side.pid}) {       // gone before the kill round starts
        ::kill(pid, SIGKILL);
        WaitSignal(pid);
      }
    }
  }
  EXPECT_NE(
      registry_.Render().find("fracgpu_enforcement_kills_total{reason=\"unmanaged_process\"} 2"),
      std::string::npos)
      << registry_.Render();
}

// The agent's default slack (monitor/agent_loop.h kDefaultMemorySlackMiB, 64 MiB; issue 32
// item 6): a container filled to its limit through libvgpu.so whose driver account then grows
// by memory libvgpu.so cannot see (lazily loaded kernel code, cuCtxSetLimit heap; here 48 MiB
// held around it) is neither killed nor reported; 100 MiB more is killed.
TEST_F(EnforcementTest, DefaultSlackCoversUnchargedDriverMemoryOfAFullContainer) {
  Container(kUidA);
  Proc full = Start(FRACGPU_VGPU_APP, {"init", "alloc:1048576000", "wait"}, kUidA, kIdA);
  EXPECT_EQ(full.Line(), "init 0");
  EXPECT_EQ(full.Line().rfind("alloc 0", 0), 0u);
  EXPECT_EQ(full.Line(), "ready");
  Proc code = Start(FRACGPU_BYPASS_APP, {"bypass:48", "hold:15000"}, kUidA, kIdA);
  ASSERT_EQ(code.Line().rfind("over ", 0), 0u);
  enforce::Policy policy;
  policy.region_mismatch = enforce::Action::kKill;
  policy.memory_slack_bytes = static_cast<uint64_t>(kDefaultMemorySlackMiB * 1024 * 1024);
  NodeEnforcer e = Enforcer(policy);
  for (int i = 0; i < 4; ++i) e.Poll(i, pods_);
  EXPECT_TRUE(Alive(full.pid));
  EXPECT_TRUE(Alive(code.pid));
  EXPECT_TRUE(events_.events.empty()) << events_.events[0].message;
  Proc more = Start(FRACGPU_BYPASS_APP, {"bypass:100", "hold:15000"}, kUidA, kIdA);
  ASSERT_EQ(more.Line().rfind("over ", 0), 0u);
  e.Poll(5, pods_);
  e.Poll(6, pods_);
  EXPECT_EQ(WaitSignal(more.pid), SIGKILL);
  EXPECT_TRUE(Alive(full.pid));
}

TEST_F(EnforcementTest, NvmlErrorsAndExitedProcessesKeepTheAgentRunning) {
  class Failing : public enforce::ProcessSource {
   public:
    Result<std::vector<enforce::GpuSample>> Sample(std::vector<std::string>* errors) override {
      if (++calls % 2 == 1) return Unavailable("nvmlDeviceGetCount_v2: GPU is lost (15)");
      enforce::GpuSample g;
      g.uuid = kGpu;
      g.processes.push_back({999999, 5000ull << 20});  // listed, but gone from /proc
      g.processes_ok = true;
      enforce::GpuSample h;
      h.uuid = kOtherGpu;
      h.processes_ok = false;
      errors->push_back("nvmlDeviceGetComputeRunningProcesses_v3(" + std::string(kOtherGpu) +
                        "): Unknown Error (999)");
      return std::vector<enforce::GpuSample>{g, h};
    }
    int calls = 0;
  } failing;
  Container(kUidA);
  EnforcementOptions o;
  o.hook_path = hook_;
  o.proc_root = proc_;
  NodeEnforcer e(o, &failing, &events_, &registry_);
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(e.Poll(i, pods_).empty());
  EXPECT_NE(registry_.Render().find("fracgpu_monitor_errors_total{source=\"nvml_processes\"} 6"),
            std::string::npos)
      << registry_.Render();
  EXPECT_TRUE(events_.events.empty());
}

}  // namespace
}  // namespace fracgpu::monitor::testing
