// The wake request of a parked container (issue 36 item 3, docs/reclaim.md "Wake"): libvgpu.so
// counts RegionDevice::wake_requests when a process of a parked container launches a kernel or
// allocates, before its call waits inside the (fake) driver; the agent sees the count grow and
// wakes it, and the call then completes. Not parked, the count does not move.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "harness.h"
#include "map_region.h"
#include "vgpu/cuda_api.h"
#include "vgpu/region.h"

namespace fracgpu::vgpu::testing {
namespace {

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

void ParkedCallAsksForTheWake(const std::string& call) {
  Sandbox box;
  auto env = box.Env();
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "512m";
  Child tenant = Spawn(box, env, {"init", "alloc:67108864", "launch:1", "wait", call});
  EXPECT_EQ(Rc(ReadLine(tenant)), 0);  // init
  EXPECT_EQ(Rc(ReadLine(tenant)), 0);  // alloc
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
  close(tenant.in);
  tenant.in = -1;
  ASSERT_TRUE(AwaitWakeRequest(r, seen)) << call << " of a parked container asked no wake";
  // The agent wakes it; the call that waited completes.
  ASSERT_EQ(AgentCall(box, tenant.pid, false), 0);
  std::atomic_ref<uint64_t>(r->devices[0].park_state).store(api::kParkRunning);
  std::vector<std::string> rest = Finish(tenant);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(Rc(rest[0]), 0) << rest[0];
  munmap(r, sizeof(Region));
}

TEST(VgpuParkWake, ALaunchOfAParkedContainerAsksTheAgentToWakeIt) {
  ParkedCallAsksForTheWake("launch:1");
}

TEST(VgpuParkWake, AnAllocationOfAParkedContainerAsksTheAgentToWakeIt) {
  ParkedCallAsksForTheWake("alloc:1048576");
}

}  // namespace
}  // namespace fracgpu::vgpu::testing
