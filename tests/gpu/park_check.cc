// gpu_park_check: parks and wakes one CUDA process on a real GPU through fracgpu's own parking
// code (node::Parker over monitor::LoadCheckpointDriver, the node agent's real driver adapter,
// and monitor::NvmlParkFacts), and prints what it cost (issue 36 item 7; tests/gpu check 10,
// docs/reclaim.md "On a real GPU").
//
//   gpu_park_check --pid P [--region FILE | --no-region] [--allow-driver V]...
//                  [--lock-timeout-ms 10000] [--hold-ms 0]
//
// Lock + Checkpoint (Parker::Park), the figures while parked, then Restore + Unlock
// (Parker::Wake). Each driver call is timed around the adapter's own call. Output: one line
// per figure, "figure <name> <value>" (names below), then "result parked-and-woken"; errors on
// stderr, one line "gpu_park_check: <what>".
//
// Exit codes: 0 parked and woken; 1 the park or the wake failed (the reason names the call);
// 2 usage; 3 unsupported here (no libcuda.so.1, a driver without the checkpoint API, i.e. older
// than CUDA 12.8 / driver 550, or no NVML); 4 ineligible (a gate of node::CheckpointEligible:
// MIG, MPS, persistence mode, driver not allowed, ...); 5 busy (Lock timed out).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/region.h"
#include "enforce/nvml_processes.h"
#include "enforce/proc.h"
#include "monitor/park_host.h"
#include "monitor/region_reader.h"
#include "node/park.h"

namespace {

using fracgpu::Result;
using Clock = std::chrono::steady_clock;

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitUnsupported = 3;
constexpr int kExitIneligible = 4;
constexpr int kExitBusy = 5;

int Fail(int code, const std::string& what) {
  std::fprintf(stderr, "gpu_park_check: %s\n", what.c_str());
  return code;
}

// A "<Key>: <n> kB" line of a /proc file, in KiB; -1 when absent or unreadable.
long long ProcKib(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream s(line.substr(key.size() + 1));
    long long v = -1;
    s >> v;
    return v;
  }
  return -1;
}

// NVML's account of `pid` now: the GPU that lists it and its bytes there ("" and 0: unlisted).
struct PidOnGpu {
  std::string uuid;
  uint64_t bytes = 0;
  bool listed = false;
};

Result<PidOnGpu> FindPid(fracgpu::enforce::ProcessSource* processes, int pid) {
  std::vector<std::string> errors;
  auto sample = processes->Sample(&errors);
  if (!sample.ok()) return sample.status();
  PidOnGpu out;
  for (const auto& gpu : *sample) {
    for (const auto& p : gpu.processes) {
      if (static_cast<int>(p.host_pid) != pid) continue;
      if (out.listed)
        return fracgpu::InvalidArgument("NVML lists pid " + std::to_string(pid) +
                                        " on more than one GPU (" + out.uuid + ", " + gpu.uuid +
                                        "); the check parks a one-GPU process");
      out = {gpu.uuid, p.used_bytes, true};
    }
  }
  return out;
}

// One timed figure of a driver call: the sum over its calls, ns.
struct Timed {
  uint64_t ns = 0;
  int calls = 0;
};

template <typename F>
auto TimeIt(Timed* t, F&& f) {
  const auto start = Clock::now();
  auto r = f();
  t->ns += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
  ++t->calls;
  return r;
}

void Figure(const char* name, long long v) { std::printf("figure %s %lld\n", name, v); }
void FigureMs(const char* name, uint64_t ns) {
  std::printf("figure %s %.3f\n", name, static_cast<double>(ns) / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Parks and wakes one CUDA process with node::Parker over the real driver (issue 36 item 7)"};
  int pid = 0;
  std::string region_path;
  bool no_region = false;
  std::vector<std::string> allowed;
  unsigned lock_timeout_ms = 10000;
  unsigned hold_ms = 0;
  std::string cuda_library = "libcuda.so.1";
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string proc_root = "/proc";
  std::string cgroup_root = "/sys/fs/cgroup";
  app.add_option("--pid", pid, "host pid of the CUDA process to park")
      ->required()
      ->check(CLI::Range(1, 1 << 30));
  auto* region_opt = app.add_option(
      "--region", region_path,
      "the process's region file (libvgpu.so's CUDA_DEVICE_MEMORY_SHARED_CACHE): its use record "
      "and charged bytes are the eligibility facts, as the node agent reads them");
  auto* no_region_opt = app.add_flag(
      "--no-region", no_region,
      "the process runs without libvgpu.so: the caller vouches that it never used managed "
      "memory, IPC or shared handles; the charged bytes are NVML's for the pid");
  region_opt->excludes(no_region_opt);
  app.add_option("--allow-driver", allowed,
                 "driver versions or prefixes ending in '.' allowed to park (--park-drivers)")
      ->required();
  app.add_option("--lock-timeout-ms", lock_timeout_ms, "cuCheckpointProcessLock's timeout, ms")
      ->check(CLI::Range(1u, 600000u));
  app.add_option("--hold-ms", hold_ms, "stay parked this long before waking, ms")
      ->check(CLI::Range(0u, 600000u));
  app.add_option("--cuda-library", cuda_library, "the CUDA driver to dlopen");
  app.add_option("--nvml-library", nvml_library, "NVML to dlopen");
  app.add_option("--proc-root", proc_root, "where /proc is");
  app.add_option("--cgroup-root", cgroup_root, "where the cgroup hierarchy is mounted");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kExitUsage;
  }
  if (region_path.empty() && !no_region)
    return Fail(kExitUsage, "give --region FILE (a process under libvgpu.so) or --no-region");

  // The node agent's own adapters: the driver's checkpoint calls and NVML.
  auto driver = fracgpu::monitor::LoadCheckpointDriver(cuda_library);
  if (!driver.ok()) return Fail(kExitUnsupported, "unsupported: " + driver.status().message());
  auto nvml = fracgpu::monitor::NvmlParkFacts::Open(nvml_library);
  if (!nvml.ok()) return Fail(kExitUnsupported, "unsupported: " + nvml.status().message());
  auto processes = fracgpu::enforce::NvmlProcesses::Open(nvml_library);
  if (!processes.ok())
    return Fail(kExitUnsupported, "unsupported: " + processes.status().message());

  auto where = FindPid(processes->get(), pid);
  if (!where.ok()) return Fail(kExitFailed, where.status().message());
  if (!where->listed)
    return Fail(kExitFailed, "NVML lists pid " + std::to_string(pid) + " on no GPU");
  const std::string uuid = where->uuid;

  const fracgpu::enforce::ProcReader proc(proc_root);
  auto start_time = proc.StartTime(static_cast<uint32_t>(pid));
  if (!start_time.ok()) return Fail(kExitFailed, start_time.status().message());

  // The facts as the agent's ParkController builds them (monitor/parking.cc): NVML's and the
  // cgroup's (MakeParkHost's), then the region's record.
  std::string facts_error;
  auto facts = [&]() {
    fracgpu::node::CheckpointFacts f = (*nvml)->GpuFacts(uuid);
    const fracgpu::monitor::HostMemory m =
        fracgpu::monitor::ReadCgroupMemory(proc_root, cgroup_root, pid);
    f.host_limit_known = m.known;
    f.host_limit_bytes = m.limit_bytes;
    f.host_used_bytes = m.used_bytes;
    if (!m.known) facts_error = m.reason;
    if (no_region) {
      f.process_uses = {fracgpu::api::kSlotUsesRecorded};
      auto now = FindPid(processes->get(), pid);
      f.device_bytes = now.ok() ? now->bytes : 0;
      if (!now.ok() && f.unknown.empty()) f.unknown = now.status().message();
      return f;
    }
    auto region = fracgpu::monitor::ReadRegionFile(region_path);
    if (!region.ok()) {
      if (f.unknown.empty()) f.unknown = "region " + region_path + ": " + region.status().message();
      return f;
    }
    bool ours = false;
    for (int32_t p : region->host_pids) ours = ours || p == pid;
    if (!ours || region->devices.size() != 1) {
      if (f.unknown.empty())
        f.unknown = "region " + region_path + " does not hold pid " + std::to_string(pid) +
                    " on one GPU (" + std::to_string(region->devices.size()) + " devices)";
      return f;
    }
    f.process_uses = region->slot_uses;
    f.device_bytes = region->devices[0].used_bytes;
    return f;
  };

  Timed lock_t, checkpoint_t, restore_t, unlock_t;
  fracgpu::node::CheckpointDriver timed = *driver;
  timed.lock = [&, inner = driver->lock](int p, unsigned ms) {
    return TimeIt(&lock_t, [&] { return inner(p, ms); });
  };
  timed.checkpoint = [&, inner = driver->checkpoint](int p) {
    return TimeIt(&checkpoint_t, [&] { return inner(p); });
  };
  timed.restore = [&, inner = driver->restore](int p) {
    return TimeIt(&restore_t, [&] { return inner(p); });
  };
  timed.unlock = [&, inner = driver->unlock](int p) {
    return TimeIt(&unlock_t, [&] { return inner(p); });
  };

  fracgpu::node::ParkTarget target;
  target.pids = {pid};
  target.facts = facts;
  target.free_bytes = [&]() -> uint64_t {
    auto f = (*nvml)->FreeBytes(uuid);
    return f.ok() ? *f : 0;
  };
  target.same = [&](int p) -> std::string {
    auto now = proc.StartTime(static_cast<uint32_t>(p));
    if (!now.ok()) return now.status().message();
    return *now == *start_time ? "" : "started again";
  };
  const fracgpu::node::Parker parker(timed, allowed, lock_timeout_ms);

  const std::string status = proc_root + "/" + std::to_string(pid) + "/status";
  const std::string meminfo = proc_root + "/meminfo";
  const long long rss_before = ProcKib(status, "VmRSS");
  const long long avail_before = ProcKib(meminfo, "MemAvailable");
  const uint64_t nvml_before = where->bytes;
  const uint64_t free_before = target.free_bytes();

  const auto park_start = Clock::now();
  const fracgpu::node::ParkResult parked = parker.Park(target);
  const auto park_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - park_start).count();
  std::printf("gpu %s pid %d\n", uuid.c_str(), pid);
  switch (parked.outcome) {
    case fracgpu::node::ParkOutcome::kParked:
      break;
    case fracgpu::node::ParkOutcome::kIneligible:
      return Fail(kExitIneligible, "ineligible: " + parked.reason +
                                       (facts_error.empty() ? "" : " (" + facts_error + ")"));
    case fracgpu::node::ParkOutcome::kBusy:
      return Fail(kExitBusy, "busy: " + parked.reason);
    default:
      return Fail(kExitFailed, "park failed: " + parked.reason);
  }

  // Parked: the host copy and what NVML shows.
  const long long rss_parked = ProcKib(status, "VmRSS");
  const long long avail_parked = ProcKib(meminfo, "MemAvailable");
  auto while_parked = FindPid(processes->get(), pid);
  const uint64_t free_parked = target.free_bytes();
  if (hold_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));

  const auto wake_start = Clock::now();
  const fracgpu::node::ParkResult woken = parker.Wake(target, parked.released_bytes);
  const auto wake_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - wake_start).count();
  const long long rss_after = ProcKib(status, "VmRSS");
  const long long avail_after = ProcKib(meminfo, "MemAvailable");
  auto after = FindPid(processes->get(), pid);

  Figure("charged_bytes", static_cast<long long>(parked.charged_bytes));
  Figure("released_bytes", static_cast<long long>(parked.released_bytes));
  Figure("nvml_pid_bytes_before", static_cast<long long>(nvml_before));
  Figure("nvml_pid_listed_parked", while_parked.ok() && while_parked->listed ? 1 : 0);
  Figure("nvml_pid_bytes_parked",
         while_parked.ok() ? static_cast<long long>(while_parked->bytes) : -1);
  Figure("nvml_pid_bytes_after", after.ok() ? static_cast<long long>(after->bytes) : -1);
  Figure("nvml_free_bytes_before", static_cast<long long>(free_before));
  Figure("nvml_free_bytes_parked", static_cast<long long>(free_parked));
  FigureMs("lock_ms", lock_t.ns);
  FigureMs("checkpoint_ms", checkpoint_t.ns);
  FigureMs("restore_ms", restore_t.ns);
  FigureMs("unlock_ms", unlock_t.ns);
  FigureMs("park_ms", static_cast<uint64_t>(park_ns));
  FigureMs("wake_ms", static_cast<uint64_t>(wake_ns));
  Figure("vmrss_kib_before", rss_before);
  Figure("vmrss_kib_parked", rss_parked);
  Figure("vmrss_kib_after", rss_after);
  Figure("memavailable_kib_before", avail_before);
  Figure("memavailable_kib_parked", avail_parked);
  Figure("memavailable_kib_after", avail_after);
  if (woken.outcome != fracgpu::node::ParkOutcome::kAwake)
    return Fail(kExitFailed, "wake failed (the process may still be parked): " + woken.reason);
  std::printf("result parked-and-woken\n");
  return 0;
}
