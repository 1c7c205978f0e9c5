// scripts/sandbox.sh (`make sandbox`) end to end on its fake cluster: `sandbox.sh --for 1
// --cluster fake` shows the refused allocation and the region; brings up the fake cluster
// (tests/e2e/fake_cluster_main.cc), `fracgpu ui` and the gateway stand-in on 127.0.0.1 only;
// creates a notebook through the UI's HTTP API (¼ of a GPU: gpumem-percentage 25, gpucores 25)
// and prints its pod's journey: admitted by the webhook, bound to a GPU with its slice,
// Allocate's limits, what the container sees; before that, the parking demo on node-e (a
// notebook parked, a borrower on its memory, the wake: docs/reclaim.md). The MiB
// expected are computed here from the request and the sandbox cluster's GPU sizes as
// documented (README "Try it without a GPU or a cluster"), not read from the code under test.
// Then it stops within its bound: exit 0, every port closed, its folder removed and no process
// left that names it. (The same walk-through on the real cluster, the sandbox's choice when run as
// root with the real Kubernetes binaries, is tests/realcluster/test_sandbox.py.)

#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "../support/files.h"

namespace {

// The port of the first "http://127.0.0.1:<port>" after `marker` in `out`, or 0.
int PortAfter(const std::string& out, const std::string& marker) {
  size_t at = out.find(marker);
  if (at == std::string::npos) return 0;
  const std::string prefix = "http://127.0.0.1:";
  size_t p = out.find(prefix, at);
  if (p == std::string::npos) return 0;
  return std::atoi(out.c_str() + p + prefix.size());
}

bool Listening(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// Processes (other than this one) whose command line, environment or working directory
// mentions `needle`: "<pid> <command line>" each.
std::vector<std::string> ProcessesNaming(const std::string& needle) {
  std::vector<std::string> out;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return out;
  const std::string self = std::to_string(::getpid());
  while (dirent* e = ::readdir(proc)) {
    std::string pid = e->d_name;
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos || pid == self)
      continue;
    const std::string dir = "/proc/" + pid;
    std::string cmdline = fracgpu::test_support::ReadWholeFile(dir + "/cmdline");
    std::string environ = fracgpu::test_support::ReadWholeFile(dir + "/environ");
    std::error_code ec;
    std::string cwd = std::filesystem::read_symlink(dir + "/cwd", ec).string();
    if (cmdline.find(needle) != std::string::npos || environ.find(needle) != std::string::npos ||
        cwd.find(needle) != std::string::npos) {
      for (auto& c : cmdline) c = c == '\0' ? ' ' : c;
      out.push_back(pid + " " + cmdline);
    }
  }
  ::closedir(proc);
  return out;
}

// Runs `argv` with stdout+stderr into one pipe, reads it to EOF within `limit` (every writer,
// grandchildren included, must close it); on the deadline kills the process group. Returns the
// wait status (-1 when killed at the deadline).
int RunWithDeadline(const std::vector<std::string>& argv, std::chrono::seconds limit,
                    std::string* out) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::close(fds[1]);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  bool timed_out = false;
  char buf[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    ssize_t got = ::read(fds[0], buf, sizeof buf);
    if (got <= 0) break;
    out->append(buf, static_cast<size_t>(got));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(-pid, SIGKILL);
  int st = 0;
  ::waitpid(pid, &st, 0);
  return timed_out ? -1 : st;
}

TEST(Sandbox, ShowsTheRefusalAndANotebookGettingItsSliceThenStopsCleanly) {
  std::string out;
  const int st = RunWithDeadline({"bash", std::string(FRACGPU_SOURCE_DIR) + "/scripts/sandbox.sh",
                                  "--build", FRACGPU_BUILD_DIR, "--for", "1", "--cluster", "fake"},
                                 std::chrono::seconds(150), &out);
  ASSERT_NE(st, -1)
      << "sandbox.sh --for 1 (or a process it left holding its output) ran past 150 s:\n"
      << out;
  ASSERT_TRUE(WIFEXITED(st)) << out;
  EXPECT_EQ(WEXITSTATUS(st), 0) << out;

  // Part 2's cluster, said before part 1.
  EXPECT_NE(out.find("sandbox: part 2 runs the fake cluster (fake-cluster, "
                     "tests/e2e/fake_cluster_main.cc): --cluster "
                     "fake\n== 1. fracgpu run"),
            std::string::npos)
      << out;

  // 1. fracgpu run: granted, then refused at the limit; the region's inspect table.
  EXPECT_NE(out.find("alloc 600 MiB: CUDA_SUCCESS (granted)\n"), std::string::npos) << out;
  EXPECT_NE(
      out.find(
          "alloc 600 MiB: CUDA_ERROR_OUT_OF_MEMORY (refused: 1200 MiB > the 1000 MiB limit)\n"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("region v2  devices 1"), std::string::npos) << out;  // fracgpu inspect
  EXPECT_NE(out.find("1000.0"), std::string::npos) << out;                // the limit, MiB

  // 2. The cluster as documented, with its four seeded slices running.
  const std::map<std::string, int64_t> gpu_mib = {
      {"GPU-aaaa0000-0000-4000-8000-000000000000", 40960},
      {"GPU-aaaa0001-0000-4000-8000-000000000000", 40960},
      {"GPU-bbbb0000-0000-4000-8000-000000000000", 15360},
      {"GPU-cccc0000-0000-4000-8000-000000000000", 81920},
      {"GPU-cccc0001-0000-4000-8000-000000000000", 81920},
      {"GPU-cccc0002-0000-4000-8000-000000000000", 81920},
      {"GPU-eeee0000-0000-4000-8000-000000000000", 1024}};
  const std::string cordoned = "GPU-cccc0002-0000-4000-8000-000000000000";
  for (const auto& [uuid, mib] : gpu_mib) {
    EXPECT_NE(out.find(" " + uuid + " (" + std::to_string(mib) + " MiB)"), std::string::npos)
        << uuid << "\n"
        << out;
  }
  EXPECT_NE(out.find("  team-b/train: node-a GPU 1 GPU-aaaa0001-0000-4000-8000-000000000000 (40960 "
                     "MiB): 30720 MiB, "
                     "0 % of the SMs, running\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("fake cluster: ready"), std::string::npos) << out;
  // The dashboard's type filter offers one type per model, not one per GPU: the fake NVML names
  // a 40960 MiB GPU as an A100-SXM4-40GB, 15360 MiB a T4, 81920 MiB an A100-SXM4-80GB (NVML's
  // product names); the device plugin prefixes "NVIDIA-" where the name lacks it (HAMi's type).
  EXPECT_NE(out.find("GPU types:       NVIDIA A100-SXM4-40GB (2 GPUs), NVIDIA A100-SXM4-80GB (3 "
                     "GPUs), NVIDIA-Fake GPU 1GB (1 GPU), NVIDIA-Tesla T4 (1 GPU)\n"),
            std::string::npos)
      << out;

  // 2b. The parking demo on node-e (docs/reclaim.md), in its order: the borrower refused while
  // the notebook holds the GPU, the park and what the node lends, the borrower placed on it; then
  // the wake: the Event on the evicted borrower, the node lending nothing again and the
  // notebook's call returning with its bytes intact. Those last three come from three sources
  // (the Event watch, the node watch, the sandbox's own line after the call returns), so they
  // are checked after the borrower ran, in any order among themselves: CI once saw the node's
  // record change before the Event arrived (the agent stops lending when the owner asks for its
  // memory back, before it evicts).
  const std::string kE = "node-e GPU 0 GPU-eeee0000-0000-4000-8000-000000000000 (1024 MiB)";
  const std::vector<std::string> park_steps = {
      "scheduler: pod team-a/nb-idle bound to node-e: " + kE + ": 1024 MiB, 0 % of the SMs\n",
      "scheduler: pod team-a/batch-borrow unschedulable: no node fits;",
      "agent: node-e parked idle memory; lends " + kE + ": 768 MiB to borrowers\n",
      "scheduler: pod team-a/batch-borrow bound to node-e: " + kE + ": 512 MiB, 0 % of the SMs\n",
      "pod team-a/batch-borrow: Running on node-e\n"};
  size_t from = 0;
  for (const auto& step : park_steps) {
    size_t at = out.find(step, from);
    EXPECT_NE(at, std::string::npos) << "after offset " << from << ": " << step << "\n" << out;
    if (at == std::string::npos) break;  // the checks below still run (ports, folders left)
    from = at + step.size();
  }
  for (const std::string& wake_step :
       {std::string("agent: Event GPUMemoryReclaimed on pod team-a/batch-borrow: evicted: it "
                    "borrowed 512 MiB of GPU GPU-eeee0000-0000-4000-8000-000000000000 on node "
                    "node-e"),
        std::string("agent: node-e lends nothing (its parked memory is back with its owner)\n"),
        std::string("container: team-a/nb-idle/main: its first CUDA call after idle (a 4 KiB "
                    "read) waited ")}) {
    EXPECT_NE(out.find(wake_step, from), std::string::npos)
        << "after offset " << from << ": " << wake_step << "\n"
        << out;
  }
  EXPECT_NE(out.find(" for the wake (the borrower evicted first); the bytes it wrote came back "
                     "intact, its charge unchanged (768 MiB)\n",
                     from),
            std::string::npos)
      << out;

  // 3. The notebook: created through the UI (SubjectAccessReview allowed), its pod through the
  // webhook, bound with its slice, Allocate's limits, and the UI lists it Ready.
  EXPECT_NE(out.find("preview: fits now: takes 1 GPU on one node"), std::string::npos) << out;
  EXPECT_NE(
      out.find("API server: SubjectAccessReview: may alice create notebooks in team-a? allowed"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("HTTP 201: Notebook team-a/demo created"), std::string::npos) << out;
  EXPECT_NE(out.find("notebook controller: Notebook team-a/demo → pod team-a/demo-0 from its "
                     "spec.template.spec "
                     "(nvidia.com/gpu=1, nvidia.com/gpucores=25, nvidia.com/gpumem-percentage=25)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("webhook: pod team-a/demo-0 admitted: spec.schedulerName=fracgpu-scheduler"),
            std::string::npos)
      << out;
  // "scheduler: pod team-a/demo-0 bound to <node>: <node> GPU <i> <uuid> (<MiB> MiB): <MiB> MiB,
  // <cores> % of the SMs"
  const std::string bound_at = "scheduler: pod team-a/demo-0 bound to ";
  size_t b = out.find(bound_at);
  ASSERT_NE(b, std::string::npos) << out;
  const std::string line = out.substr(b + bound_at.size(), out.find('\n', b) - b - bound_at.size());
  const std::string node = line.substr(0, line.find(':'));
  const size_t u = line.find("GPU-");
  ASSERT_NE(u, std::string::npos) << line;
  const std::string uuid = line.substr(u, line.find(' ', u) - u);
  ASSERT_TRUE(gpu_mib.count(uuid)) << line;
  EXPECT_NE(uuid, cordoned);
  EXPECT_EQ(line.rfind(node + ": " + node + " GPU ", 0), 0u) << line;
  const int64_t want_mib =
      gpu_mib.at(uuid) * 25 / 100;  // nvidia.com/gpumem-percentage: 25 of the card
  const std::string mib = std::to_string(want_mib);
  EXPECT_NE(line.find(uuid + " (" + std::to_string(gpu_mib.at(uuid)) + " MiB): " + mib +
                      " MiB, 25 % of the SMs"),
            std::string::npos)
      << line;
  EXPECT_NE(out.find("kubelet: " + node +
                     " Allocate for team-a/demo-0 container demo: NVIDIA_VISIBLE_DEVICES=" + uuid +
                     ", CUDA_DEVICE_MEMORY_LIMIT_0=" + mib + "m (" + mib +
                     " MiB), CUDA_DEVICE_SM_LIMIT=25 (%)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("container: team-a/demo-0/demo under libvgpu.so: cuMemGetInfo " + mib +
                     " MiB total, " + mib + " MiB free"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("pod team-a/demo-0: Running on " + node), std::string::npos) << out;
  EXPECT_NE(out.find("notebook team-a/demo: Ready\n"), std::string::npos) << out;
  EXPECT_NE(out.find("sandbox: stopping after 1 s"), std::string::npos) << out;

  // Stopped: nothing listens on the loopback ports any more (API server, UI, gateway), the
  // folder is gone, no process names it.
  const int api = PortAfter(out, "fake API server: ");
  const int ui = PortAfter(out, "fake-cluster gateway --to ");
  const int gateway = PortAfter(out, "fracgpu ui: ");
  for (int port : {api, ui, gateway}) {
    EXPECT_GT(port, 0) << out;
    if (port > 0) {
      EXPECT_FALSE(Listening(port)) << port;
    }
  }
  const std::string files = "sandbox: files in ";
  size_t at = out.find(files);
  ASSERT_NE(at, std::string::npos) << out;
  const std::string dir = out.substr(at + files.size(), out.find('\n', at) - at - files.size());
  EXPECT_EQ(dir.rfind("/tmp/fracgpu-sandbox-", 0), 0u) << dir;
  EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
  std::vector<std::string> left = ProcessesNaming(dir);
  std::string listing;
  for (const auto& p : left) listing += p + "\n";
  EXPECT_TRUE(left.empty()) << "still running:\n" << listing;
  // The `fracgpu run` region folder is gone too.
  const std::string run_dir = "/tmp/fracgpu-run-";
  if (size_t r = out.find(run_dir); r != std::string::npos) {
    const std::string region = out.substr(r, out.find('/', r + run_dir.size()) - r);
    EXPECT_FALSE(std::filesystem::exists(region)) << region;
  }
  // Nothing in the output points anywhere but loopback.
  EXPECT_EQ(out.find("0.0.0.0"), std::string::npos) << out;
}

}  // namespace
