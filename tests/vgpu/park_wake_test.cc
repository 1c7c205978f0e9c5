// The wake request of a parked container (issue 36 item 3, docs/reclaim.md "Wake"): libvgpu.so
// counts RegionDevice::wake_requests when a process of a parked container calls the driver (a
// launch, an allocation, a hooked query, an unhooked copy), before its call waits inside the (fake)
// driver; the agent sees the count grow and wakes it, and the call then completes. Not parked, the
// count does not move.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "harness.h"
#include "map_region.h"
#include "vgpu/cuda_api.h"
#include "vgpu/region.h"

namespace fracgpu::vgpu::testing {
namespace {

uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t WakeRequests(Region* r) {
  return std::atomic_ref<uint64_t>(r->devices[0].wake_requests).load();
}

// Waits (real time, at most 10 s) until the count passes `seen`.
bool AwaitWakeRequest(Region* r, uint64_t seen) {
  for (int i = 0; i < 1000; ++i) {
    if (WakeRequests(r) > seen) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// The agent: a process of its own that loads the fake driver (this test's process must not)
// and parks or wakes `pid`; exit status 0 when every call succeeded.
int AgentCall(const Sandbox& box, pid_t pid, bool park) {
  pid_t agent = fork();
  if (agent == 0) {
    setenv("FAKE_GPU_STATE_DIR", box.dir().c_str(), 1);
    setenv("FAKE_GPU_DEVICES", kTwoGpus, 1);
    void* cuda = dlopen(FRACGPU_FAKES_LIB "/libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cuda) _exit(10);
    auto init = reinterpret_cast<CUresult (*)(unsigned)>(dlsym(cuda, "cuInit"));
    auto lock = reinterpret_cast<CUresult (*)(int, CUcheckpointLockArgs*)>(
        dlsym(cuda, "cuCheckpointProcessLock"));
    auto ckpt = reinterpret_cast<CUresult (*)(int, CUcheckpointCheckpointArgs*)>(
        dlsym(cuda, "cuCheckpointProcessCheckpoint"));
    auto restore = reinterpret_cast<CUresult (*)(int, CUcheckpointRestoreArgs*)>(
        dlsym(cuda, "cuCheckpointProcessRestore"));
    auto unlock = reinterpret_cast<CUresult (*)(int, CUcheckpointUnlockArgs*)>(
        dlsym(cuda, "cuCheckpointProcessUnlock"));
    if (!init || !lock || !ckpt || !restore || !unlock || init(0) != CUDA_SUCCESS) _exit(11);
    if (park) {
      CUcheckpointLockArgs a{};
      a.timeoutMs = 1000;
      if (lock(pid, &a) != CUDA_SUCCESS) _exit(12);
      if (ckpt(pid, nullptr) != CUDA_SUCCESS) _exit(13);
    } else {
      if (restore(pid, nullptr) != CUDA_SUCCESS) _exit(14);
      if (unlock(pid, nullptr) != CUDA_SUCCESS) _exit(15);
    }
    _exit(0);
  }
  int status = 0;
  waitpid(agent, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A tenant runs `setup` (each answering rc 0, or the line `setup_line` for a "lookup"), is parked,
// then makes `call`: the call must raise the wake request before it waits in the driver, and
// once the agent wakes the container it completes with `done` (the start of its output line).
void ParkedCallAsksForTheWake(const std::string& call, const std::string& done,
                              const std::string& lookup = "", const std::string& lookup_line = "") {
  Sandbox box;
  auto env = box.Env();
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "512m";
  std::vector<std::string> ops = {"init", "alloc:67108864"};
  if (!lookup.empty()) ops.push_back(lookup);
  ops.insert(ops.end(), {"launch:1", "wait", call});
  Child tenant = Spawn(box, env, ops);
  EXPECT_EQ(Rc(ReadLine(tenant)), 0);  // init
  EXPECT_EQ(Rc(ReadLine(tenant)), 0);  // alloc
  if (!lookup.empty()) {
    EXPECT_EQ(ReadLine(tenant), lookup_line);
  }
  EXPECT_EQ(ReadLine(tenant), "launch 0");
  EXPECT_EQ(ReadLine(tenant), "ready");
  Region* r = MapRegion(box.region());
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(WakeRequests(r), 0u) << "calls of a running container asked for a wake";
  // Park: the state first (a call between it and the Lock asks for a wake), then the driver.
  std::atomic_ref<uint64_t>(r->devices[0].park_state).store(api::kParkParked);
  ASSERT_EQ(AgentCall(box, tenant.pid, true), 0);
  const uint64_t seen = WakeRequests(r);
  // The tenant's next call (after an idle spell: the launch stamp is due).
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const uint64_t before_call = MonotonicNs();
  close(tenant.in);
  tenant.in = -1;
  ASSERT_TRUE(AwaitWakeRequest(r, seen)) << call << " of a parked container asked no wake";
  // The idle clock restarts at the wake, whatever the call (a copy or a query launches
  // nothing): last_launch_ns is at least the call's time, so the agent does not park the
  // container again at its next poll (issue 36 review, ping-pong).
  EXPECT_GE(r->devices[0].last_launch_ns.load(), before_call)
      << call << ": the idle clock still counts the parked time";
  // The agent wakes it; the call that waited completes.
  ASSERT_EQ(AgentCall(box, tenant.pid, false), 0);
  std::atomic_ref<uint64_t>(r->devices[0].park_state).store(api::kParkRunning);
  std::vector<std::string> rest = Finish(tenant);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].substr(0, done.size()), done) << rest[0];
  munmap(r, sizeof(Region));
}

TEST(VgpuParkWake, ALaunchOfAParkedContainerAsksTheAgentToWakeIt) {
  ParkedCallAsksForTheWake("launch:1", "launch 0");
}

TEST(VgpuParkWake, AnAllocationOfAParkedContainerAsksTheAgentToWakeIt) {
  ParkedCallAsksForTheWake("alloc:1048576", "alloc 0");
}

// A hooked entry point that neither launches nor allocates (cuMemGetInfo): every driver call a
// hook makes checks the park state (REAL, src/vgpu/interpose.h).
TEST(VgpuParkWake, AQueryOfAParkedContainerAsksTheAgentToWakeIt) {
  ParkedCallAsksForTheWake("info", "info 0 ");
}

// Entry points libvgpu.so does not hook (memory copies) are handed out behind the wake
// trampoline (src/vgpu/wake.h), from cuGetProcAddress as the runtime asks, and from dlsym of
// libcuda.so.1; the copy waits in the driver until the wake and its bytes arrive intact (every
// argument register survives the trampoline's slow path).
TEST(VgpuParkWake, AnUnhookedCopyFromCuGetProcAddressAsksTheAgentToWakeIt) {
  ParkedCallAsksForTheWake("copy", "copy 0 1", "lookup:g", "lookup 0 wake wake");
}

TEST(VgpuParkWake, AnUnhookedCopyFromDlsymAsksTheAgentToWakeIt) {
  ParkedCallAsksForTheWake("copy", "copy 0 1", "lookup:d", "lookup 0 wake wake");
}

// A program linked with -lcuda binds the names libvgpu.so does not hook to its exported stubs
// (src/vgpu/wake.cc, one per name of data/cuda/libcuda_exports.txt), which are in libvgpu.so.
TEST(VgpuParkWake, AnUnhookedCopyBoundAtLinkTimeAsksTheAgentToWakeIt) {
  ParkedCallAsksForTheWake("copy", "copy 0 1", "lookup:l", "lookup 0 vgpu vgpu");
}

// Issue 36 review of the trampolines. A data object of the driver (the fake's
// cuFakeDriverData) comes back from dlsym as it is, never as a trampoline: its reader gets the
// data, not our code bytes.
TEST(VgpuWakeTrampolines, ADriverDataObjectFromDlsymIsNotWrapped) {
  Sandbox box;
  auto out = RunApp(box, box.Env(), {"dlsymdata"});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], "dlsymdata driver 123456789abcdef");
}

// One slot per function: the same unhooked function asked for 4096 times (more than the 2048
// slots) by 8 threads at once, through cuGetProcAddress_v2 and dlsym, is one trampoline, and
// still a trampoline at the end (a slot per answer would have run out and handed it out bare).
TEST(VgpuWakeTrampolines, TheSameFunctionAskedConcurrentlyTakesOneSlot) {
  Sandbox box;
  auto out = RunApp(box, box.Env(), {"samefn:8:512"});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], "samefn 0 1 wake");
}

// A library's constructor (inside the dynamic loader's lock) calls the driver while this
// thread's first CUDA call is resolving libcuda.so.1: both complete (no thread waits for another's
// resolution), and the constructor's call gets the driver's answer, not an error.
TEST(VgpuWakeTrampolines, AConstructorCallingTheDriverDuringResolutionDoesNotDeadlock) {
  Sandbox box;
  int status = 0;
  Child c = Spawn(box, box.Env(), {std::string("ctorrace:") + FRACGPU_VGPU_CTOR_PLUGIN});
  auto out = Finish(c, &status);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status) << " (deadlock: alarm)";
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], "ctorrace 0 0");
}

// The driver's own initialisation calls back into an entry point (its exported stub in
// libvgpu.so) while libvgpu.so's first resolution is loading it: the call is resolved from the
// driver already mapped (RTLD_NOLOAD) and gets the driver's answer, not CUDA_ERROR_NOT_FOUND
// (before the fix: 500), and the outer call completes.
TEST(VgpuWakeTrampolines, ADriverCallingBackDuringItsOwnLoadIsResolved) {
  Sandbox box;
  auto env = box.Env();
  env["FAKE_CUDA_CTOR_CALL"] = "1";
  Child c = Spawn(box, env, {}, FRACGPU_VGPU_NOLOAD_APP);
  auto out = Finish(c);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], "noload 0 0");
}

}  // namespace
}  // namespace fracgpu::vgpu::testing
