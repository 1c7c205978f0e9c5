// The fake libcuda.so.1's checkpoint API (tests/fakes/cuda/fake_cuda.cc, "Checkpoint"): the
// per-process state machine and its CUDA_ERROR codes (cuda.h 13.0), Lock's timeout against work
// in flight (virtual clock) and a held API gate (real time), Checkpoint releasing the process's
// device memory (the fake NVML shows it free) and Restore bringing the bytes back, Restore
// refused without room (and the sticky failure of NVIDIA/cuda-checkpoint#44), a child process
// checkpointed on its own, another process (the node agent) parking and waking a tenant by its
// pid, and the not-supported knob.
//
// Every scenario runs in forked processes that load the fakes afresh (this process never
// touches them), each with its own FAKE_GPU_STATE_DIR: one 256 MiB GPU, contexts of 16 MiB.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "api/nvml.h"
#include "vgpu/cuda_api.h"

namespace {

constexpr uint64_t kMiB = 1024ull * 1024ull;
constexpr uint64_t kDeviceMiB = 256, kCtxMiB = 16;

template <typename F>
F Sym(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (!p) ADD_FAILURE() << "missing " << name;
  return reinterpret_cast<F>(p);
}

// The fake driver and NVML, loaded in this (forked) process.
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
    CU(cuMemFree_v2);
    CU(cuMemcpyHtoD_v2);
    CU(cuMemcpyDtoH_v2);
    CU(cuLaunchKernel);
    CU(cuCheckpointProcessGetState);
    CU(cuCheckpointProcessGetRestoreThreadId);
    CU(cuCheckpointProcessLock);
    CU(cuCheckpointProcessCheckpoint);
    CU(cuCheckpointProcessRestore);
    CU(cuCheckpointProcessUnlock);
    CU(fakeCudaSetKernelCostPs);
    CU(fakeClockNowNs);
    CU(fakeCudaCheckpointHoldGate);
    CU(fakeCudaCheckpointAwaitWaiters);
#undef CU
    nvmlInit_v2 = Sym<decltype(nvmlInit_v2)>(nvml, "nvmlInit_v2");
    nvmlDeviceGetHandleByIndex_v2 =
        Sym<decltype(nvmlDeviceGetHandleByIndex_v2)>(nvml, "nvmlDeviceGetHandleByIndex_v2");
    nvmlDeviceGetMemoryInfo =
        Sym<decltype(nvmlDeviceGetMemoryInfo)>(nvml, "nvmlDeviceGetMemoryInfo");
  }

  // cuInit, the primary context of device 0 made current.
  void Start() {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    CUdevice dev = -1;
    ASSERT_EQ(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  }

  // Device memory used on GPU 0 by every process, in MiB, as the fake NVML reports it.
  uint64_t NvmlUsedMiB() {
    EXPECT_EQ(nvmlInit_v2(), NVML_SUCCESS);
    nvmlDevice_t h = nullptr;
    EXPECT_EQ(nvmlDeviceGetHandleByIndex_v2(0, &h), NVML_SUCCESS);
    nvmlMemory_t m{};
    EXPECT_EQ(nvmlDeviceGetMemoryInfo(h, &m), NVML_SUCCESS);
    EXPECT_EQ(m.total, kDeviceMiB * kMiB);
    EXPECT_EQ(m.free + m.used, m.total);
    return m.used / kMiB;
  }

  CUprocessState State(int pid = getpid()) {
    CUprocessState st = -1;
    EXPECT_EQ(cuCheckpointProcessGetState(pid, &st), CUDA_SUCCESS);
    return st;
  }
  CUresult Lock(unsigned timeout_ms = 0) {
    CUcheckpointLockArgs a{};
    a.timeoutMs = timeout_ms;
    return cuCheckpointProcessLock(getpid(), &a);
  }
  CUresult Checkpoint() { return cuCheckpointProcessCheckpoint(getpid(), nullptr); }
  CUresult Restore() { return cuCheckpointProcessRestore(getpid(), nullptr); }
  CUresult Unlock() { return cuCheckpointProcessUnlock(getpid(), nullptr); }

  // `mib` MiB of device memory filled with Pattern(seed).
  CUdeviceptr Filled(uint64_t mib, unsigned seed) {
    CUdeviceptr p = 0;
    EXPECT_EQ(cuMemAlloc_v2(&p, mib * kMiB), CUDA_SUCCESS);
    std::vector<unsigned char> bytes = Pattern(mib, seed);
    EXPECT_EQ(cuMemcpyHtoD_v2(p, bytes.data(), bytes.size()), CUDA_SUCCESS);
    return p;
  }
  bool Holds(CUdeviceptr p, uint64_t mib, unsigned seed) {
    std::vector<unsigned char> back(mib * kMiB);
    EXPECT_EQ(cuMemcpyDtoH_v2(back.data(), p, back.size()), CUDA_SUCCESS);
    return back == Pattern(mib, seed);
  }
  static std::vector<unsigned char> Pattern(uint64_t mib, unsigned seed) {
    std::vector<unsigned char> v(mib * kMiB);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<unsigned char>(i * 7 + seed);
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
  CUresult (*cuMemFree_v2)(CUdeviceptr) = nullptr;
  CUresult (*cuMemcpyHtoD_v2)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*cuMemcpyDtoH_v2)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**) = nullptr;
  CUresult (*cuCheckpointProcessGetState)(int, CUprocessState*) = nullptr;
  CUresult (*cuCheckpointProcessGetRestoreThreadId)(int, int*) = nullptr;
  CUresult (*cuCheckpointProcessLock)(int, CUcheckpointLockArgs*) = nullptr;
  CUresult (*cuCheckpointProcessCheckpoint)(int, CUcheckpointCheckpointArgs*) = nullptr;
  CUresult (*cuCheckpointProcessRestore)(int, CUcheckpointRestoreArgs*) = nullptr;
  CUresult (*cuCheckpointProcessUnlock)(int, CUcheckpointUnlockArgs*) = nullptr;
  void (*fakeCudaSetKernelCostPs)(uint64_t) = nullptr;
  uint64_t (*fakeClockNowNs)() = nullptr;
  void (*fakeCudaCheckpointHoldGate)(int) = nullptr;
  int (*fakeCudaCheckpointAwaitWaiters)(int) = nullptr;
  decltype(&::nvmlInit_v2) nvmlInit_v2 = nullptr;
  decltype(&::nvmlDeviceGetHandleByIndex_v2) nvmlDeviceGetHandleByIndex_v2 = nullptr;
  decltype(&::nvmlDeviceGetMemoryInfo) nvmlDeviceGetMemoryInfo = nullptr;
};

// Runs `body` in a forked process; its exit status is 0 when no expectation failed there.
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

// A one-byte message between processes of one scenario.
struct Channel {
  Channel() { EXPECT_EQ(pipe(fd), 0); }
  void Send() { EXPECT_EQ(write(fd[1], "x", 1), 1); }
  void Receive() {
    char c;
    EXPECT_EQ(read(fd[0], &c, 1), 1);
  }
  int fd[2] = {-1, -1};
};

class FakeCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fracgpu-ckpt-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    setenv("FAKE_GPU_STATE_DIR", dir_.c_str(), 1);
    setenv("FAKE_GPU_DEVICES", "GPU-00000000-0000-4000-8000-00000000c4e0:256", 1);
    setenv("FAKE_CUDA_CTX_BYTES", std::to_string(kCtxMiB * kMiB).c_str(), 1);
    for (const char* knob : {"FAKE_CUDA_CHECKPOINT", "FAKE_CUDA_CHECKPOINT_MIB_PER_S",
                             "FAKE_CUDA_CHECKPOINT_STICKY_OOM", "FAKE_CLOCK_PARTICIPANTS"})
      unsetenv(knob);
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string dir_;
};

TEST_F(FakeCheckpoint, StateMachineAnswersCudaHsCodes) {
  EXPECT_EQ(Reap(Spawn([] {
              Fakes f;
              CUprocessState st = -1;
              EXPECT_EQ(f.cuCheckpointProcessGetState(getpid(), &st), CUDA_ERROR_NOT_INITIALIZED);
              f.Start();
              EXPECT_EQ(f.cuCheckpointProcessGetState(getpid(), nullptr), CUDA_ERROR_INVALID_VALUE);
              int tid = 0;
              EXPECT_EQ(f.cuCheckpointProcessGetRestoreThreadId(getpid(), &tid), CUDA_SUCCESS);
              EXPECT_EQ(tid, getpid());
              EXPECT_EQ(f.State(), CU_PROCESS_STATE_RUNNING);
              // From RUNNING only Lock is legal.
              EXPECT_EQ(f.Checkpoint(), CUDA_ERROR_ILLEGAL_STATE);
              EXPECT_EQ(f.Restore(), CUDA_ERROR_ILLEGAL_STATE);
              EXPECT_EQ(f.Unlock(), CUDA_ERROR_ILLEGAL_STATE);
              CUcheckpointLockArgs bad{};
              bad.reserved1[6] = 1;
              EXPECT_EQ(f.cuCheckpointProcessLock(getpid(), &bad), CUDA_ERROR_INVALID_VALUE);
              EXPECT_EQ(f.State(), CU_PROCESS_STATE_RUNNING);
              EXPECT_EQ(f.cuCheckpointProcessLock(getpid(), nullptr), CUDA_SUCCESS);
              EXPECT_EQ(f.State(), CU_PROCESS_STATE_LOCKED);
              // From LOCKED: Checkpoint or Unlock.
              EXPECT_EQ(f.Lock(), CUDA_ERROR_ILLEGAL_STATE);
              EXPECT_EQ(f.Restore(), CUDA_ERROR_ILLEGAL_STATE);
              EXPECT_EQ(f.Checkpoint(), CUDA_SUCCESS);
              EXPECT_EQ(f.State(), CU_PROCESS_STATE_CHECKPOINTED);
              // From CHECKPOINTED only Restore, which leaves it LOCKED.
              EXPECT_EQ(f.Lock(), CUDA_ERROR_ILLEGAL_STATE);
              EXPECT_EQ(f.Checkpoint(), CUDA_ERROR_ILLEGAL_STATE);
              EXPECT_EQ(f.Unlock(), CUDA_ERROR_ILLEGAL_STATE);
              EXPECT_EQ(f.Restore(), CUDA_SUCCESS);
              EXPECT_EQ(f.State(), CU_PROCESS_STATE_LOCKED);
              EXPECT_EQ(f.Unlock(), CUDA_SUCCESS);
              EXPECT_EQ(f.State(), CU_PROCESS_STATE_RUNNING);
              // A pid that is no process of the fake.
              EXPECT_EQ(f.cuCheckpointProcessGetState(999999999, &st), CUDA_ERROR_INVALID_VALUE);
            })),
            0);
}

TEST_F(FakeCheckpoint, CheckpointFreesTheMemoryAndRestoreBringsTheBytesBack) {
  // 320 MiB/s: the 16 MiB context and 64 MiB of data take 250 ms of virtual time each way.
  setenv("FAKE_CUDA_CHECKPOINT_MIB_PER_S", "320", 1);
  EXPECT_EQ(Reap(Spawn([] {
              Fakes f;
              f.Start();
              CUdeviceptr p = f.Filled(64, 11);
              EXPECT_EQ(f.NvmlUsedMiB(), kCtxMiB + 64);
              ASSERT_EQ(f.Lock(), CUDA_SUCCESS);
              uint64_t t0 = f.fakeClockNowNs();
              ASSERT_EQ(f.Checkpoint(), CUDA_SUCCESS);
              EXPECT_EQ(f.fakeClockNowNs() - t0, 250'000'000u);
              EXPECT_EQ(f.NvmlUsedMiB(), 0u);  // the whole process's memory is free
              // The device bytes are gone (the fake overwrites them with 0xDB).
              EXPECT_EQ(*reinterpret_cast<unsigned char*>(p + 12345), 0xDB);
              uint64_t t1 = f.fakeClockNowNs();
              ASSERT_EQ(f.Restore(), CUDA_SUCCESS);
              EXPECT_EQ(f.fakeClockNowNs() - t1, 250'000'000u);
              EXPECT_EQ(f.NvmlUsedMiB(), kCtxMiB + 64);
              ASSERT_EQ(f.Unlock(), CUDA_SUCCESS);
              EXPECT_TRUE(f.Holds(p, 64, 11));
              EXPECT_EQ(f.cuMemFree_v2(p), CUDA_SUCCESS);
              EXPECT_EQ(f.NvmlUsedMiB(), kCtxMiB);
            })),
            0);
}

TEST_F(FakeCheckpoint, LockWaitsForWorkInFlightAndTimesOutOnTheVirtualClock) {
  EXPECT_EQ(Reap(Spawn([] {
              Fakes f;
              f.Start();
              // One block of 50,000 threads at 1 us each: a 50 ms kernel.
              f.fakeCudaSetKernelCostPs(1'000'000);
              uint64_t t0 = f.fakeClockNowNs();
              ASSERT_EQ(f.cuLaunchKernel(reinterpret_cast<CUfunction>(1), 1, 1, 1, 50'000, 1, 1, 0,
                                         nullptr, nullptr, nullptr),
                        CUDA_SUCCESS);
              const uint64_t launched = t0 + 2'000;  // the fake's launch overhead
              EXPECT_EQ(f.Lock(10), CUDA_ERROR_NOT_READY);
              EXPECT_EQ(f.State(), CU_PROCESS_STATE_RUNNING);
              EXPECT_EQ(f.fakeClockNowNs(), launched + 10'000'000);
              EXPECT_EQ(f.Lock(100), CUDA_SUCCESS);  // 40 ms left: it waits for the kernel
              EXPECT_EQ(f.State(), CU_PROCESS_STATE_LOCKED);
              EXPECT_EQ(f.fakeClockNowNs(), launched + 50'000'000);
              EXPECT_EQ(f.Unlock(), CUDA_SUCCESS);
            })),
            0);
}

TEST_F(FakeCheckpoint, LockTimesOutWhileTheApiGateIsHeld) {
  EXPECT_EQ(Reap(Spawn([] {
              Fakes f;
              f.Start();
              f.fakeCudaCheckpointHoldGate(1);
              EXPECT_EQ(f.Lock(20), CUDA_ERROR_NOT_READY);
              EXPECT_EQ(f.State(), CU_PROCESS_STATE_RUNNING);
              // Without a timeout Lock waits for the gate.
              std::thread releaser([&] { f.fakeCudaCheckpointHoldGate(0); });
              EXPECT_EQ(f.Lock(0), CUDA_SUCCESS);
              releaser.join();
              EXPECT_EQ(f.State(), CU_PROCESS_STATE_LOCKED);
              EXPECT_EQ(f.Unlock(), CUDA_SUCCESS);
            })),
            0);
}

TEST_F(FakeCheckpoint, CallsOfALockedProcessBlockUntilUnlock) {
  EXPECT_EQ(Reap(Spawn([] {
              Fakes f;
              f.Start();
              ASSERT_EQ(f.Lock(), CUDA_SUCCESS);
              CUresult got = -1;
              CUdeviceptr p = 0;
              std::thread caller([&] {
                f.cuCtxSetCurrent(f.ctx);
                got = f.cuMemAlloc_v2(&p, 8 * kMiB);
              });
              EXPECT_EQ(f.fakeCudaCheckpointAwaitWaiters(1), 1);  // blocked at the gate
              EXPECT_EQ(f.NvmlUsedMiB(), kCtxMiB);                // nothing allocated yet
              EXPECT_EQ(f.Unlock(), CUDA_SUCCESS);
              caller.join();
              EXPECT_EQ(got, CUDA_SUCCESS);
              EXPECT_EQ(f.NvmlUsedMiB(), kCtxMiB + 8);
            })),
            0);
}

// Owner: 16 + 128 MiB, checkpointed; then a filler takes 16 + 192 MiB of the 256.
void RestoreWithoutRoom(bool sticky) {
  Channel parked, filled, retry, freed;
  pid_t owner = Spawn([&] {
    Fakes f;
    f.Start();
    CUdeviceptr p = f.Filled(128, 5);
    ASSERT_EQ(f.Lock(), CUDA_SUCCESS);
    ASSERT_EQ(f.Checkpoint(), CUDA_SUCCESS);
    parked.Send();
    filled.Receive();
    EXPECT_EQ(f.NvmlUsedMiB(), kCtxMiB + 192);  // the filler's; 144 needed, 48 free
    EXPECT_EQ(f.Restore(), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT_EQ(f.State(), CU_PROCESS_STATE_CHECKPOINTED);
    EXPECT_EQ(f.NvmlUsedMiB(), kCtxMiB + 192);  // nothing was taken
    retry.Send();
    freed.Receive();
    EXPECT_EQ(f.NvmlUsedMiB(), 0u);
    if (sticky) {
      EXPECT_EQ(f.Restore(), CUDA_ERROR_OPERATING_SYSTEM);
      EXPECT_EQ(f.State(), CU_PROCESS_STATE_CHECKPOINTED);
      EXPECT_EQ(f.Unlock(), CUDA_ERROR_ILLEGAL_STATE);
      EXPECT_EQ(f.NvmlUsedMiB(), 0u);
      return;
    }
    EXPECT_EQ(f.Restore(), CUDA_SUCCESS);
    EXPECT_EQ(f.Unlock(), CUDA_SUCCESS);
    EXPECT_EQ(f.NvmlUsedMiB(), kCtxMiB + 128);
    EXPECT_TRUE(f.Holds(p, 128, 5));
  });
  pid_t filler = Spawn([&] {
    parked.Receive();
    Fakes f;
    f.Start();
    CUdeviceptr p = f.Filled(192, 9);  // fits only because the owner's memory is free
    filled.Send();
    retry.Receive();
    EXPECT_EQ(f.cuMemFree_v2(p), CUDA_SUCCESS);
    _exit(::testing::Test::HasFailure() ? 1 : 0);  // its context goes with it
  });
  EXPECT_EQ(Reap(filler), 0);
  freed.Send();
  EXPECT_EQ(Reap(owner), 0);
}

TEST_F(FakeCheckpoint, RestoreWithoutRoomIsRefusedAndSucceedsOnceThereIsRoom) {
  RestoreWithoutRoom(false);
}

TEST_F(FakeCheckpoint, StickyKnobBreaksTheProcessAfterARefusedRestore) {
  setenv("FAKE_CUDA_CHECKPOINT_STICKY_OOM", "1", 1);
  RestoreWithoutRoom(true);
}

TEST_F(FakeCheckpoint, AForkedChildIsCheckpointedSeparately) {
  EXPECT_EQ(Reap(Spawn([] {
              Channel child_ready, parent_parked, child_parked, done;
              pid_t child = Spawn([&] {  // forked before this process loads the driver
                Fakes f;
                f.Start();
                CUdeviceptr p = f.Filled(32, 3);
                child_ready.Send();
                parent_parked.Receive();
                EXPECT_EQ(f.State(), CU_PROCESS_STATE_RUNNING);
                EXPECT_EQ(f.State(getppid()), CU_PROCESS_STATE_CHECKPOINTED);
                EXPECT_TRUE(f.Holds(p, 32, 3));  // untouched by the parent's checkpoint
                ASSERT_EQ(f.Lock(), CUDA_SUCCESS);
                ASSERT_EQ(f.Checkpoint(), CUDA_SUCCESS);
                child_parked.Send();
                done.Receive();
                ASSERT_EQ(f.Restore(), CUDA_SUCCESS);
                ASSERT_EQ(f.Unlock(), CUDA_SUCCESS);
                EXPECT_TRUE(f.Holds(p, 32, 3));
              });
              Fakes f;
              f.Start();
              CUdeviceptr p = f.Filled(64, 4);
              child_ready.Receive();
              EXPECT_EQ(f.NvmlUsedMiB(), 2 * kCtxMiB + 64 + 32);
              ASSERT_EQ(f.Lock(), CUDA_SUCCESS);
              ASSERT_EQ(f.Checkpoint(), CUDA_SUCCESS);
              // The parent's checkpoint frees only its own memory; the child is still RUNNING.
              EXPECT_EQ(f.NvmlUsedMiB(), kCtxMiB + 32);
              EXPECT_EQ(f.State(child), CU_PROCESS_STATE_RUNNING);
              parent_parked.Send();
              child_parked.Receive();
              EXPECT_EQ(f.NvmlUsedMiB(), 0u);
              EXPECT_EQ(f.State(child), CU_PROCESS_STATE_CHECKPOINTED);
              done.Send();
              EXPECT_EQ(Reap(child), 0);
              ASSERT_EQ(f.Restore(), CUDA_SUCCESS);
              ASSERT_EQ(f.Unlock(), CUDA_SUCCESS);
              EXPECT_TRUE(f.Holds(p, 64, 4));
            })),
            0);
}

// The node agent's view: another process (the agent) locks, checkpoints, restores and unlocks
// the tenant by its pid, as cuda-checkpoint does; the tenant carries the calls out (its serving
// thread stands for the driver's restore thread). The tenant's own CUDA call made while it is
// parked waits and then finds its bytes intact; the memory is free while it is parked.
TEST_F(FakeCheckpoint, AnotherProcessParksAndWakesTheTenantByItsPid) {
  setenv("FAKE_CUDA_CHECKPOINT_MIB_PER_S", "320", 1);  // 80 MiB each way: 250 ms virtual
  Channel ready, parked, woken;
  pid_t tenant = Spawn([&] {
    Fakes f;
    f.Start();
    CUdeviceptr p = f.Filled(64, 11);
    ready.Send();
    parked.Receive();
    EXPECT_EQ(f.State(), CU_PROCESS_STATE_CHECKPOINTED);
    bool holds = false;
    std::thread call([&] {
      f.cuCtxSetCurrent(f.ctx);
      holds = f.Holds(p, 64, 11);  // blocks until the agent has restored and unlocked
    });
    EXPECT_EQ(f.fakeCudaCheckpointAwaitWaiters(1), 1);
    woken.Send();  // the agent may wake it now
    call.join();
    EXPECT_TRUE(holds);
    EXPECT_EQ(f.State(), CU_PROCESS_STATE_RUNNING);
  });
  EXPECT_EQ(Reap(Spawn([&] {
              Fakes f;
              f.Start();  // the agent's own 16 MiB context
              ready.Receive();
              EXPECT_EQ(f.NvmlUsedMiB(), 2 * kCtxMiB + 64);
              CUcheckpointLockArgs lock{};
              lock.timeoutMs = 1000;
              const uint64_t t0 = f.fakeClockNowNs();
              ASSERT_EQ(f.cuCheckpointProcessLock(tenant, &lock), CUDA_SUCCESS);
              EXPECT_EQ(f.State(tenant), CU_PROCESS_STATE_LOCKED);
              ASSERT_EQ(f.cuCheckpointProcessCheckpoint(tenant, nullptr), CUDA_SUCCESS);
              EXPECT_EQ(f.State(tenant), CU_PROCESS_STATE_CHECKPOINTED);
              EXPECT_EQ(f.NvmlUsedMiB(), kCtxMiB);  // only the agent's context is left
              // The caller waited for the tenant's copy: 80 MiB at 320 MiB/s.
              EXPECT_GE(f.fakeClockNowNs() - t0, 250'000'000u);
              // Illegal transitions are the tenant's answers, unchanged by the forwarding.
              EXPECT_EQ(f.cuCheckpointProcessUnlock(tenant, nullptr), CUDA_ERROR_ILLEGAL_STATE);
              CUcheckpointUnlockArgs bad{};
              bad.reserved[3] = 1;
              EXPECT_EQ(f.cuCheckpointProcessUnlock(tenant, &bad), CUDA_ERROR_INVALID_VALUE);
              parked.Send();
              woken.Receive();
              ASSERT_EQ(f.cuCheckpointProcessRestore(tenant, nullptr), CUDA_SUCCESS);
              EXPECT_EQ(f.NvmlUsedMiB(), 2 * kCtxMiB + 64);
              ASSERT_EQ(f.cuCheckpointProcessUnlock(tenant, nullptr), CUDA_SUCCESS);
            })),
            0);
  EXPECT_EQ(Reap(tenant), 0);
  // A pid that no longer runs is no fake process.
  EXPECT_EQ(Reap(Spawn([&] {
              Fakes f;
              f.Start();
              EXPECT_EQ(f.cuCheckpointProcessLock(tenant, nullptr), CUDA_ERROR_INVALID_VALUE);
            })),
            0);
}

// A Lock from another process gives up after its timeout while the tenant is inside a long
// call (its API gate held), and leaves it RUNNING: "busy, retry later" (issue 36 item 1).
TEST_F(FakeCheckpoint, AnotherProcesssLockTimesOutWhileTheTenantIsBusy) {
  Channel ready, tried;
  pid_t tenant = Spawn([&] {
    Fakes f;
    f.Start();
    f.fakeCudaCheckpointHoldGate(1);
    ready.Send();
    tried.Receive();
    EXPECT_EQ(f.State(), CU_PROCESS_STATE_RUNNING);
    f.fakeCudaCheckpointHoldGate(0);
  });
  EXPECT_EQ(Reap(Spawn([&] {
              Fakes f;
              f.Start();
              ready.Receive();
              CUcheckpointLockArgs lock{};
              lock.timeoutMs = 50;
              EXPECT_EQ(f.cuCheckpointProcessLock(tenant, &lock), CUDA_ERROR_NOT_READY);
              EXPECT_EQ(f.State(tenant), CU_PROCESS_STATE_RUNNING);
              tried.Send();
            })),
            0);
  EXPECT_EQ(Reap(tenant), 0);
}

TEST_F(FakeCheckpoint, NotSupportedKnobAnswersEveryCall) {
  setenv("FAKE_CUDA_CHECKPOINT", "unsupported", 1);
  EXPECT_EQ(Reap(Spawn([] {
              Fakes f;
              f.Start();
              CUprocessState st;
              int tid;
              EXPECT_EQ(f.cuCheckpointProcessGetState(getpid(), &st), CUDA_ERROR_NOT_SUPPORTED);
              EXPECT_EQ(f.cuCheckpointProcessGetRestoreThreadId(getpid(), &tid),
                        CUDA_ERROR_NOT_SUPPORTED);
              EXPECT_EQ(f.Lock(), CUDA_ERROR_NOT_SUPPORTED);
              EXPECT_EQ(f.Checkpoint(), CUDA_ERROR_NOT_SUPPORTED);
              EXPECT_EQ(f.Restore(), CUDA_ERROR_NOT_SUPPORTED);
              EXPECT_EQ(f.Unlock(), CUDA_ERROR_NOT_SUPPORTED);
            })),
            0);
}

}  // namespace
