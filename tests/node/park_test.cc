// node::Parker (src/node/park.h): the order of the checkpoint calls and what each failure
// undoes, first against a scripted driver (every call recorded, any answer injected), then
// against the fake driver across processes: an agent process parks a tenant's two processes
// by their pids, the memory shows free in the fake NVML, the tenant's call made while parked
// waits, and the wake brings its bytes back (issue 36 items 1, 3 and 5).
#include "node/park.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "api/nvml.h"
#include "api/region.h"
#include "vgpu/cuda_api.h"

namespace fracgpu::node {
namespace {

constexpr uint64_t kMiB = 1024ull * 1024ull;

CheckpointFacts Eligible(uint64_t device_bytes) {
  CheckpointFacts f;
  f.driver_version = "580.95.05";
  f.persistence_mode = true;
  f.process_uses = {api::kSlotUsesRecorded, api::kSlotUsesRecorded};
  f.device_bytes = device_bytes;
  f.host_limit_known = true;  // no host limit
  return f;
}

// A driver that records every call ("Lock 11") and answers from a table (default success);
// its processes' states follow the calls it accepted.
struct ScriptedDriver {
  std::vector<std::string> calls;
  std::map<std::string, int> answers;  // "Checkpoint 12" -> CUresult
  std::map<int, int> state;            // pid -> CUprocessState
  uint64_t free_bytes = 1000;
  uint64_t per_checkpoint_freed = 100;

  int Answer(const std::string& call) {
    calls.push_back(call);
    auto it = answers.find(call);
    return it == answers.end() ? kCudaSuccess : it->second;
  }
  CheckpointDriver Driver() {
    CheckpointDriver d;
    d.get_state = [this](int pid, int* st) {
      *st = state[pid];
      return kCudaSuccess;
    };
    d.lock = [this](int pid, unsigned timeout_ms) {
      EXPECT_EQ(timeout_ms, 250u);
      const int rc = Answer("Lock " + std::to_string(pid));
      if (rc == kCudaSuccess) state[pid] = kProcessStateLocked;
      return rc;
    };
    d.checkpoint = [this](int pid) {
      const int rc = Answer("Checkpoint " + std::to_string(pid));
      if (rc == kCudaSuccess) {
        state[pid] = kProcessStateCheckpointed;
        free_bytes += per_checkpoint_freed;
      }
      return rc;
    };
    d.restore = [this](int pid) {
      const int rc = Answer("Restore " + std::to_string(pid));
      if (rc == kCudaSuccess) {
        state[pid] = kProcessStateLocked;
        free_bytes -= per_checkpoint_freed;
      }
      return rc;
    };
    d.unlock = [this](int pid) {
      const int rc = Answer("Unlock " + std::to_string(pid));
      if (rc == kCudaSuccess) state[pid] = kProcessStateRunning;
      return rc;
    };
    return d;
  }
};

struct Scenario {
  ScriptedDriver driver;
  std::vector<CheckpointFacts> facts;  // answered in turn (the last one repeated)
  size_t facts_read = 0;
  ParkTarget Target() {
    ParkTarget t;
    t.pids = {11, 12};
    t.facts = [this] { return facts[std::min(facts_read++, facts.size() - 1)]; };
    t.free_bytes = [this] { return driver.free_bytes; };
    return t;
  }
};

using Calls = std::vector<std::string>;

TEST(Parker, ParksAndWakesInOrder) {
  Scenario s;
  s.facts = {Eligible(200)};
  Parker p(s.driver.Driver(), {"580."}, 250);
  ParkResult r = p.Park(s.Target());
  EXPECT_EQ(r.outcome, ParkOutcome::kParked) << r.reason;
  EXPECT_EQ(r.released_bytes, 200u);
  EXPECT_EQ(s.driver.calls, (Calls{"Lock 11", "Lock 12", "Checkpoint 11", "Checkpoint 12"}));
  s.driver.calls.clear();
  r = p.Wake(s.Target(), 200);
  EXPECT_EQ(r.outcome, ParkOutcome::kAwake) << r.reason;
  EXPECT_EQ(s.driver.calls, (Calls{"Restore 11", "Restore 12", "Unlock 11", "Unlock 12"}));
  EXPECT_EQ(s.driver.state[11], kProcessStateRunning);
  EXPECT_EQ(s.driver.state[12], kProcessStateRunning);
}

TEST(Parker, AnIneligibleContainerIsNeverLocked) {
  Scenario s;
  CheckpointFacts managed = Eligible(200);
  managed.process_uses[1] |= api::kSlotUsedManagedMemory;
  s.facts = {managed};
  ParkResult r = Parker(s.driver.Driver(), {"580."}, 250).Park(s.Target());
  EXPECT_EQ(r.outcome, ParkOutcome::kIneligible);
  EXPECT_NE(r.reason.find("managed"), std::string::npos) << r.reason;
  EXPECT_TRUE(s.driver.calls.empty());
  // A driver off the allow-list: the same.
  Scenario t;
  t.facts = {Eligible(200)};
  r = Parker(t.driver.Driver(), {"575."}, 250).Park(t.Target());
  EXPECT_EQ(r.outcome, ParkOutcome::kIneligible);
  EXPECT_TRUE(t.driver.calls.empty());
}

TEST(Parker, ABusyProcessUnlocksTheOnesLockedAndSaysBusy) {
  Scenario s;
  s.facts = {Eligible(200)};
  s.driver.answers["Lock 12"] = kCudaErrorNotReady;
  ParkResult r = Parker(s.driver.Driver(), {"580."}, 250).Park(s.Target());
  EXPECT_EQ(r.outcome, ParkOutcome::kBusy);
  EXPECT_NE(r.reason.find("Lock of pid 12 answered CUresult 600"), std::string::npos) << r.reason;
  EXPECT_EQ(s.driver.calls, (Calls{"Lock 11", "Lock 12", "Unlock 11"}));
  EXPECT_EQ(s.driver.state[11], kProcessStateRunning);
  // Another error is a failure, undone the same way.
  Scenario t;
  t.facts = {Eligible(200)};
  t.driver.answers["Lock 12"] = 999;
  r = Parker(t.driver.Driver(), {"580."}, 250).Park(t.Target());
  EXPECT_EQ(r.outcome, ParkOutcome::kFailed);
  EXPECT_EQ(t.driver.calls, (Calls{"Lock 11", "Lock 12", "Unlock 11"}));
}

TEST(Parker, FactsThatChangeBeforeTheLockUnlockEveryProcess) {
  Scenario s;
  CheckpointFacts ipc = Eligible(200);
  ipc.process_uses[0] |= api::kSlotUsedIpcMemory;
  s.facts = {Eligible(200), ipc};  // IPC used between the first read and the Lock
  ParkResult r = Parker(s.driver.Driver(), {"580."}, 250).Park(s.Target());
  EXPECT_EQ(r.outcome, ParkOutcome::kIneligible);
  EXPECT_EQ(r.reason.rfind("after Lock: ", 0), 0u) << r.reason;
  EXPECT_EQ(s.driver.calls, (Calls{"Lock 11", "Lock 12", "Unlock 11", "Unlock 12"}));
}

TEST(Parker, AFailedCheckpointRestoresTheCheckpointedAndUnlocksAll) {
  Scenario s;
  s.facts = {Eligible(200)};
  s.driver.answers["Checkpoint 12"] = 999;
  ParkResult r = Parker(s.driver.Driver(), {"580."}, 250).Park(s.Target());
  EXPECT_EQ(r.outcome, ParkOutcome::kFailed);
  EXPECT_EQ(s.driver.calls, (Calls{"Lock 11", "Lock 12", "Checkpoint 11", "Checkpoint 12",
                                   "Restore 11", "Unlock 11", "Unlock 12"}));
  EXPECT_EQ(s.driver.free_bytes, 1000u);
}

TEST(Parker, LessMemoryReleasedThanHeldUndoesThePark) {
  Scenario s;
  s.facts = {Eligible(300)};  // the record says 300 bytes; NVML shows 200 released
  ParkResult r = Parker(s.driver.Driver(), {"580."}, 250).Park(s.Target());
  EXPECT_EQ(r.outcome, ParkOutcome::kFailed);
  EXPECT_NE(r.reason.find("NVML shows 200 bytes released, below the 300"), std::string::npos)
      << r.reason;
  EXPECT_EQ(s.driver.state[11], kProcessStateRunning);
  EXPECT_EQ(s.driver.state[12], kProcessStateRunning);
  EXPECT_EQ(s.driver.free_bytes, 1000u);
}

TEST(Parker, WakeNeverRestoresWithoutTheMemoryAndResumesAfterAPartialRestore) {
  Scenario s;
  s.facts = {Eligible(200)};
  Parker p(s.driver.Driver(), {"580."}, 250);
  ASSERT_EQ(p.Park(s.Target()).outcome, ParkOutcome::kParked);
  s.driver.calls.clear();
  s.driver.free_bytes = 150;  // a borrower took the rest
  ParkResult r = p.Wake(s.Target(), 200);
  EXPECT_EQ(r.outcome, ParkOutcome::kNoRoom);
  EXPECT_TRUE(s.driver.calls.empty()) << "Restore attempted without the memory";
  // The driver refuses the second process's restore (another process took memory since).
  s.driver.free_bytes = 1000;
  s.driver.answers["Restore 12"] = kCudaErrorOutOfMemory;
  r = p.Wake(s.Target(), 200);
  EXPECT_EQ(r.outcome, ParkOutcome::kNoRoom) << r.reason;
  EXPECT_EQ(s.driver.state[11], kProcessStateLocked);
  EXPECT_EQ(s.driver.state[12], kProcessStateCheckpointed);
  // The next wake restores only what is still parked, then unlocks both.
  s.driver.answers.clear();
  s.driver.calls.clear();
  r = p.Wake(s.Target(), 100);
  EXPECT_EQ(r.outcome, ParkOutcome::kAwake) << r.reason;
  EXPECT_EQ(s.driver.calls, (Calls{"Restore 12", "Unlock 11", "Unlock 12"}));
}

// ParkTarget::same (issue 36 review finding 1): a process that is no longer the one verified
// (exited, its PID reused) is never locked, restored nor unlocked; a wake restores the rest and
// names it; with every process gone it is awake without needing any room; the park reports the
// charge read with every process locked.
TEST(Parker, AProcessNoLongerTheOneVerifiedIsNeverTouched) {
  Scenario s;
  s.facts = {Eligible(200)};
  std::map<int, std::string> changed;
  auto target = [&] {
    ParkTarget t = s.Target();
    t.same = [&changed](int pid) { return changed.count(pid) ? changed[pid] : std::string(); };
    return t;
  };
  Parker p(s.driver.Driver(), {"580."}, 250);
  changed[12] = "its start time is 8, not 7";
  ParkResult r = p.Park(target());
  EXPECT_EQ(r.outcome, ParkOutcome::kIneligible) << r.reason;
  EXPECT_EQ(s.driver.calls, (Calls{"Lock 11", "Unlock 11"})) << "12 was touched";
  EXPECT_NE(r.reason.find("pid 12 is no longer the process verified: its start time is 8"),
            std::string::npos)
      << r.reason;

  changed.clear();
  s.driver.calls.clear();
  r = p.Park(target());
  ASSERT_EQ(r.outcome, ParkOutcome::kParked) << r.reason;
  EXPECT_EQ(r.charged_bytes, 200u);
  // 12 exits while parked and its PID is reused: the wake restores and unlocks 11 only.
  changed[12] = "no such process";
  s.driver.calls.clear();
  r = p.Wake(target(), 200);
  EXPECT_EQ(r.outcome, ParkOutcome::kAwake) << r.reason;
  EXPECT_EQ(s.driver.calls, (Calls{"Restore 11", "Unlock 11"}));
  EXPECT_EQ(r.gone, (std::vector<int>{12}));

  // Every process gone: nothing to restore, no room needed.
  ASSERT_EQ(p.Park(s.Target()).outcome, ParkOutcome::kParked);
  changed[11] = "no such process";
  s.driver.free_bytes = 0;
  s.driver.calls.clear();
  r = p.Wake(target(), 200);
  EXPECT_EQ(r.outcome, ParkOutcome::kAwake) << r.reason;
  EXPECT_TRUE(s.driver.calls.empty()) << s.driver.calls[0];
  EXPECT_EQ(r.gone, (std::vector<int>{11, 12}));
}

// ---- Against the fake driver, across processes.

template <typename F>
F Sym(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (!p) ADD_FAILURE() << "missing " << name;
  return reinterpret_cast<F>(p);
}

// The fake driver and NVML, loaded in a forked process.
struct Fakes {
  Fakes() {
    cuda = dlopen(FRACGPU_FAKES_LIB "/libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    nvml = dlopen(FRACGPU_FAKES_LIB "/libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cuda || !nvml) {
      ADD_FAILURE() << dlerror();
      return;
    }
#define CU(name) name = Sym<decltype(name)>(cuda, #name)
    CU(cuInit);
    CU(cuDeviceGet);
    CU(cuDevicePrimaryCtxRetain);
    CU(cuCtxSetCurrent);
    CU(cuMemAlloc_v2);
    CU(cuMemcpyHtoD_v2);
    CU(cuMemcpyDtoH_v2);
    CU(cuCheckpointProcessGetState);
    CU(cuCheckpointProcessLock);
    CU(cuCheckpointProcessCheckpoint);
    CU(cuCheckpointProcessRestore);
    CU(cuCheckpointProcessUnlock);
    CU(fakeCudaCheckpointAwaitWaiters);
#undef CU
    nvmlInit_v2 = Sym<decltype(nvmlInit_v2)>(nvml, "nvmlInit_v2");
    nvmlDeviceGetHandleByIndex_v2 =
        Sym<decltype(nvmlDeviceGetHandleByIndex_v2)>(nvml, "nvmlDeviceGetHandleByIndex_v2");
    nvmlDeviceGetMemoryInfo =
        Sym<decltype(nvmlDeviceGetMemoryInfo)>(nvml, "nvmlDeviceGetMemoryInfo");
  }
  void Start() {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    CUdevice dev = -1;
    ASSERT_EQ(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  }
  uint64_t FreeBytes() {
    EXPECT_EQ(nvmlInit_v2(), NVML_SUCCESS);
    nvmlDevice_t h = nullptr;
    EXPECT_EQ(nvmlDeviceGetHandleByIndex_v2(0, &h), NVML_SUCCESS);
    nvmlMemory_t m{};
    EXPECT_EQ(nvmlDeviceGetMemoryInfo(h, &m), NVML_SUCCESS);
    return m.free;
  }
  CheckpointDriver Driver() {
    CheckpointDriver d;
    d.get_state = [this](int pid, int* st) { return cuCheckpointProcessGetState(pid, st); };
    d.lock = [this](int pid, unsigned timeout_ms) {
      CUcheckpointLockArgs a{};
      a.timeoutMs = timeout_ms;
      return cuCheckpointProcessLock(pid, &a);
    };
    d.checkpoint = [this](int pid) { return cuCheckpointProcessCheckpoint(pid, nullptr); };
    d.restore = [this](int pid) { return cuCheckpointProcessRestore(pid, nullptr); };
    d.unlock = [this](int pid) { return cuCheckpointProcessUnlock(pid, nullptr); };
    return d;
  }
  static std::vector<unsigned char> Pattern(uint64_t mib, unsigned seed) {
    std::vector<unsigned char> v(mib * kMiB);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<unsigned char>(i * 13 + seed);
    return v;
  }

  void* cuda = nullptr;
  void* nvml = nullptr;
  CUcontext ctx = nullptr;
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuMemAlloc_v2)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*cuMemcpyHtoD_v2)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*cuMemcpyDtoH_v2)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*cuCheckpointProcessGetState)(int, CUprocessState*) = nullptr;
  CUresult (*cuCheckpointProcessLock)(int, CUcheckpointLockArgs*) = nullptr;
  CUresult (*cuCheckpointProcessCheckpoint)(int, CUcheckpointCheckpointArgs*) = nullptr;
  CUresult (*cuCheckpointProcessRestore)(int, CUcheckpointRestoreArgs*) = nullptr;
  CUresult (*cuCheckpointProcessUnlock)(int, CUcheckpointUnlockArgs*) = nullptr;
  int (*fakeCudaCheckpointAwaitWaiters)(int) = nullptr;
  decltype(&::nvmlInit_v2) nvmlInit_v2 = nullptr;
  decltype(&::nvmlDeviceGetHandleByIndex_v2) nvmlDeviceGetHandleByIndex_v2 = nullptr;
  decltype(&::nvmlDeviceGetMemoryInfo) nvmlDeviceGetMemoryInfo = nullptr;
};

pid_t Spawn(const std::function<void()>& body) {
  pid_t pid = fork();
  if (pid == 0) {
    body();
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  return pid;
}
int Reap(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
struct Channel {
  Channel() { EXPECT_EQ(pipe(fd), 0); }
  void Send() { EXPECT_EQ(write(fd[1], "x", 1), 1); }
  void Receive() {
    char c;
    EXPECT_EQ(read(fd[0], &c, 1), 1);
  }
  int fd[2] = {-1, -1};
};

class ParkerOnTheFakeDriver : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fracgpu-park-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    setenv("FAKE_GPU_STATE_DIR", dir_.c_str(), 1);
    setenv("FAKE_GPU_DEVICES", "GPU-00000000-0000-4000-8000-0000000a4b10:512", 1);
    setenv("FAKE_CUDA_CTX_BYTES", std::to_string(16 * kMiB).c_str(), 1);
    for (const char* knob : {"FAKE_CUDA_CHECKPOINT", "FAKE_CUDA_CHECKPOINT_MIB_PER_S",
                             "FAKE_CUDA_CHECKPOINT_STICKY_OOM", "FAKE_CLOCK_PARTICIPANTS"})
      unsetenv(knob);
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string dir_;
};

// A notebook's kernel and a child it started, 16 + 64 and 16 + 32 MiB: parked by the agent
// (another process) through Parker, the 128 MiB free in NVML while parked; the kernel's call
// made while parked waits until the wake and finds its bytes; the child's bytes too.
TEST_F(ParkerOnTheFakeDriver, AnAgentParksATenantsProcessesAndItsNextCallWaitsForTheWake) {
  Channel ready_a, ready_b, parked, blocked, woken, done;
  auto tenant = [&](uint64_t mib, unsigned seed, Channel& ready, bool calls_while_parked) {
    return Spawn([&, mib, seed, calls_while_parked] {
      Fakes f;
      f.Start();
      CUdeviceptr p = 0;
      ASSERT_EQ(f.cuMemAlloc_v2(&p, mib * kMiB), CUDA_SUCCESS);
      const std::vector<unsigned char> bytes = Fakes::Pattern(mib, seed);
      ASSERT_EQ(f.cuMemcpyHtoD_v2(p, bytes.data(), bytes.size()), CUDA_SUCCESS);
      ready.Send();
      std::vector<unsigned char> back(bytes.size());
      if (calls_while_parked) {
        parked.Receive();
        std::thread call([&] {
          f.cuCtxSetCurrent(f.ctx);
          EXPECT_EQ(f.cuMemcpyDtoH_v2(back.data(), p, back.size()), CUDA_SUCCESS);
        });
        EXPECT_EQ(f.fakeCudaCheckpointAwaitWaiters(1), 1);  // the call waits at the gate
        blocked.Send();
        call.join();
      } else {
        done.Receive();
        ASSERT_EQ(f.cuMemcpyDtoH_v2(back.data(), p, back.size()), CUDA_SUCCESS);
      }
      EXPECT_TRUE(back == bytes);
    });
  };
  const pid_t kernel = tenant(64, 5, ready_a, true);
  const pid_t child = tenant(32, 6, ready_b, false);
  EXPECT_EQ(Reap(Spawn([&] {
              Fakes f;
              f.Start();  // the agent's own 16 MiB context
              ready_a.Receive();
              ready_b.Receive();
              const uint64_t held = (16 + 64 + 16 + 32) * kMiB;
              EXPECT_EQ(f.FreeBytes(), (512 - 16) * kMiB - held);
              ParkTarget t;
              t.pids = {kernel, child};
              t.facts = [&] { return Eligible(held); };
              t.free_bytes = [&] { return f.FreeBytes(); };
              Parker parker(f.Driver(), {"580."}, 1000);
              ParkResult r = parker.Park(t);
              ASSERT_EQ(r.outcome, ParkOutcome::kParked) << r.reason;
              EXPECT_EQ(r.released_bytes, held);
              EXPECT_EQ(f.FreeBytes(), (512 - 16) * kMiB);
              parked.Send();
              blocked.Receive();
              r = parker.Wake(t, held);
              ASSERT_EQ(r.outcome, ParkOutcome::kAwake) << r.reason;
              EXPECT_EQ(f.FreeBytes(), (512 - 16) * kMiB - held);
              done.Send();
            })),
            0);
  EXPECT_EQ(Reap(kernel), 0);
  EXPECT_EQ(Reap(child), 0);
}

// A wake without the memory attempts no Restore: a borrower holds the GPU; the tenant stays
// parked (CHECKPOINTED) until the borrower is gone, then wakes with its bytes.
TEST_F(ParkerOnTheFakeDriver, AWakeWithoutTheMemoryWaitsForTheBorrowerToLeave) {
  Channel ready, parked, borrowed, quit, borrower_gone, woken;
  const pid_t owner = Spawn([&] {
    Fakes f;
    f.Start();
    CUdeviceptr p = 0;
    ASSERT_EQ(f.cuMemAlloc_v2(&p, 256 * kMiB), CUDA_SUCCESS);
    const std::vector<unsigned char> bytes = Fakes::Pattern(256, 9);
    ASSERT_EQ(f.cuMemcpyHtoD_v2(p, bytes.data(), bytes.size()), CUDA_SUCCESS);
    ready.Send();
    woken.Receive();
    std::vector<unsigned char> back(bytes.size());
    ASSERT_EQ(f.cuMemcpyDtoH_v2(back.data(), p, back.size()), CUDA_SUCCESS);
    EXPECT_TRUE(back == bytes);
  });
  const pid_t borrower = Spawn([&] {
    parked.Receive();
    Fakes f;
    f.Start();
    CUdeviceptr p = 0;
    // 16 + 400 MiB of 512: fits only because the owner is parked.
    ASSERT_EQ(f.cuMemAlloc_v2(&p, 400 * kMiB), CUDA_SUCCESS);
    borrowed.Send();
    quit.Receive();
    _exit(::testing::Test::HasFailure() ? 1 : 0);  // evicted: its memory goes with it
  });
  ready.Receive();
  const uint64_t held = (16 + 256) * kMiB;
  // The agent runs in this test's process only through a forked child (the fakes must not be
  // loaded here): it parks, lets the borrower in, tries a wake, evicts, wakes.
  Channel evict;
  const pid_t agent = Spawn([&] {
    Fakes f;
    f.Start();
    ParkTarget t;
    t.pids = {owner};
    t.facts = [&] {
      CheckpointFacts facts = Eligible(held);
      facts.process_uses = {api::kSlotUsesRecorded};
      return facts;
    };
    t.free_bytes = [&] { return f.FreeBytes(); };
    Parker parker(f.Driver(), {"580."}, 1000);
    ParkResult r = parker.Park(t);
    ASSERT_EQ(r.outcome, ParkOutcome::kParked) << r.reason;
    parked.Send();
    borrowed.Receive();
    r = parker.Wake(t, r.released_bytes);
    EXPECT_EQ(r.outcome, ParkOutcome::kNoRoom) << r.reason;
    int st = -1;
    EXPECT_EQ(f.cuCheckpointProcessGetState(owner, &st), CUDA_SUCCESS);
    EXPECT_EQ(st, kProcessStateCheckpointed);
    evict.Send();
    borrower_gone.Receive();
    r = parker.Wake(t, held);
    EXPECT_EQ(r.outcome, ParkOutcome::kAwake) << r.reason;
    woken.Send();
  });
  evict.Receive();
  quit.Send();  // the borrower is evicted
  EXPECT_EQ(Reap(borrower), 0);
  borrower_gone.Send();  // the agent may wake the owner now
  EXPECT_EQ(Reap(agent), 0);
  EXPECT_EQ(Reap(owner), 0);
}

}  // namespace
}  // namespace fracgpu::node
