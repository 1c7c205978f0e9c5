// The parking loop's real adapters (monitor/park_host.h, issue 36 items 1 and 3): NVML's facts
// against the fake NVML and each of its knobs, the container's cgroup memory against a fake
// /proc and cgroup tree (v1, v2, unlimited, unreadable, hostile paths), the checkpoint calls
// loaded from the fake libcuda.so.1 (only in forked processes: a process that ran the fake's
// cuInit is a participant of the fake node), the metrics, and RunParkingLoop end to end: an
// agent process built from these adapters parks a libvgpu.so tenant and wakes it on its launch.
#include "monitor/park_host.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "../vgpu/harness.h"
#include "api/region.h"
#include "enforce/nvml_processes.h"
#include "node/checkpoint_eligibility.h"
#include "region_files.h"

namespace fracgpu::monitor::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kGpu = "GPU-11111111-1111-1111-1111-111111111111";
constexpr const char* kNvml = FRACGPU_FAKES_LIB "/libnvidia-ml.so.1";
constexpr const char* kCuda = FRACGPU_FAKES_LIB "/libcuda.so.1";

// ---- NVML's facts.

class NvmlFacts : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("FAKE_GPU_DEVICES", (std::string(kGpu) + ":4096").c_str(), 1);
    ::unsetenv("FAKE_GPU_STATE_DIR");
    for (const char* knob : {"FAKE_NVML_PERSISTENCE", "FAKE_NVML_MIG", "FAKE_NVML_MPS_PIDS",
                             "FAKE_NVML_FAIL", "FAKE_NVML_DRIVER_VERSION"})
      ::unsetenv(knob);
    auto n = NvmlParkFacts::Open(kNvml);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    nvml_ = std::move(*n);
  }
  void TearDown() override {
    for (const char* knob : {"FAKE_NVML_PERSISTENCE", "FAKE_NVML_MIG", "FAKE_NVML_MPS_PIDS",
                             "FAKE_NVML_FAIL", "FAKE_NVML_DRIVER_VERSION"})
      ::unsetenv(knob);
  }
  std::unique_ptr<NvmlParkFacts> nvml_;
};

TEST_F(NvmlFacts, TheDefaultsOfTheFakeAreAnEligibleGpu) {
  node::CheckpointFacts f = nvml_->GpuFacts(kGpu);
  EXPECT_EQ(f.unknown, "");
  EXPECT_EQ(f.driver_version, "580.95.05");
  EXPECT_TRUE(f.persistence_mode);
  EXPECT_FALSE(f.mig_enabled);
  EXPECT_FALSE(f.mps_active);
  auto free = nvml_->FreeBytes(kGpu);
  ASSERT_TRUE(free.ok()) << free.status().ToString();
  EXPECT_EQ(*free, 4096ull << 20);
}

TEST_F(NvmlFacts, EachKnobTurnsItsFact) {
  ::setenv("FAKE_NVML_DRIVER_VERSION", "575.57.08", 1);
  EXPECT_EQ(nvml_->GpuFacts(kGpu).driver_version, "575.57.08");
  ::setenv("FAKE_NVML_PERSISTENCE", "0", 1);
  EXPECT_FALSE(nvml_->GpuFacts(kGpu).persistence_mode);
  ::setenv("FAKE_NVML_PERSISTENCE", "1", 1);
  EXPECT_TRUE(nvml_->GpuFacts(kGpu).persistence_mode);
  ::setenv("FAKE_NVML_MIG", "1", 1);
  EXPECT_TRUE(nvml_->GpuFacts(kGpu).mig_enabled);
  ::setenv("FAKE_NVML_MIG", "0", 1);
  EXPECT_FALSE(nvml_->GpuFacts(kGpu).mig_enabled);
  // A GPU without MIG answers NVML_ERROR_NOT_SUPPORTED: no MIG, not an unknown fact.
  ::setenv("FAKE_NVML_MIG", "unsupported", 1);
  EXPECT_FALSE(nvml_->GpuFacts(kGpu).mig_enabled);
  EXPECT_EQ(nvml_->GpuFacts(kGpu).unknown, "");
  ::setenv("FAKE_NVML_MIG", "0", 1);
  ::setenv("FAKE_NVML_MPS_PIDS", "4242", 1);
  EXPECT_TRUE(nvml_->GpuFacts(kGpu).mps_active);
  ::setenv("FAKE_NVML_MPS_PIDS", "4242,4343", 1);
  EXPECT_TRUE(nvml_->GpuFacts(kGpu).mps_active);
  ::setenv("FAKE_NVML_MPS_PIDS", "", 1);
  EXPECT_FALSE(nvml_->GpuFacts(kGpu).mps_active);
  EXPECT_EQ(nvml_->GpuFacts(kGpu).unknown, "");
}

// A call that fails makes its fact unknown, and an unknown fact fails the first gate with the
// call named: never eligible.
TEST_F(NvmlFacts, AFailedCallIsAnUnknownFactAndIneligible) {
  for (const char* call :
       {"nvmlSystemGetDriverVersion", "nvmlDeviceGetPersistenceMode", "nvmlDeviceGetMigMode",
        "nvmlDeviceGetMPSComputeRunningProcesses_v3", "nvmlDeviceGetHandleByUUID"}) {
    ::setenv("FAKE_NVML_FAIL", call, 1);
    node::CheckpointFacts f = nvml_->GpuFacts(kGpu);
    EXPECT_NE(f.unknown.find(std::string(call)), std::string::npos) << call << ": " << f.unknown;
    EXPECT_NE(f.unknown.find("NVML error 999"), std::string::npos) << f.unknown;
    f.process_uses = {api::kSlotUsesRecorded};
    f.host_limit_known = true;
    node::CheckpointEligibility e = node::CheckpointEligible(f, {"580."});
    EXPECT_EQ(e.gate, node::CheckpointGate::kFactsUnknown) << call;
    EXPECT_NE(e.reason.find(call), std::string::npos) << e.reason;
  }
  ::setenv("FAKE_NVML_FAIL", "nvmlDeviceGetMemoryInfo", 1);
  auto free = nvml_->FreeBytes(kGpu);
  ASSERT_FALSE(free.ok());
  EXPECT_NE(free.status().message().find("nvmlDeviceGetMemoryInfo(" + std::string(kGpu) + ")"),
            std::string::npos)
      << free.status().message();
  ::unsetenv("FAKE_NVML_FAIL");
  // A GPU NVML does not know: its handle is not found (NVML_ERROR_NOT_FOUND, 6).
  node::CheckpointFacts f = nvml_->GpuFacts("GPU-99999999-9999-9999-9999-999999999999");
  EXPECT_NE(f.unknown.find("nvmlDeviceGetHandleByUUID(GPU-9999"), std::string::npos) << f.unknown;
  EXPECT_NE(f.unknown.find("NVML error 6"), std::string::npos) << f.unknown;
}

// An older NVML without nvmlSystemGetDriverVersion (the fake built as one): unknown, named.
TEST(NvmlFactsOlderDriver, AnEntryPointItLacksIsAnUnknownFact) {
  ::setenv("FAKE_GPU_DEVICES", (std::string(kGpu) + ":4096").c_str(), 1);
  auto n = NvmlParkFacts::Open(FRACGPU_FAKES_LIB "/../lib-without-facts/libnvidia-ml.so.1");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  node::CheckpointFacts f = (*n)->GpuFacts(kGpu);
  EXPECT_NE(f.unknown.find("lacks entry point nvmlSystemGetDriverVersion"), std::string::npos)
      << f.unknown;
}

// ---- The container's cgroup memory.

class CgroupMemory : public ::testing::Test {
 protected:
  std::string proc() const { return dir_.path() + "/proc"; }
  std::string cg() const { return dir_.path() + "/cgroup"; }
  void Write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << text;
  }
  void CgroupFile(int pid, const std::string& text) {
    Write(proc() + "/" + std::to_string(pid) + "/cgroup", text);
  }
  TempDir dir_;
};

TEST_F(CgroupMemory, CgroupV1LimitAndUse) {
  CgroupFile(101, "12:cpu,cpuacct:/kubepods/pod1/c1\n11:memory:/kubepods/pod1/c1\n0::/ignored\n");
  Write(cg() + "/memory/kubepods/pod1/c1/memory.limit_in_bytes", "1073741824\n");
  Write(cg() + "/memory/kubepods/pod1/c1/memory.usage_in_bytes", "104857600\n");
  HostMemory m = ReadCgroupMemory(proc(), cg(), 101);
  EXPECT_TRUE(m.known) << m.reason;
  EXPECT_EQ(m.limit_bytes, 1073741824u);
  EXPECT_EQ(m.used_bytes, 104857600u);
  // v1's "no limit" (PAGE_COUNTER_MAX pages of 4 KiB): none.
  Write(cg() + "/memory/kubepods/pod1/c1/memory.limit_in_bytes", "9223372036854771712\n");
  m = ReadCgroupMemory(proc(), cg(), 101);
  EXPECT_TRUE(m.known) << m.reason;
  EXPECT_EQ(m.limit_bytes, 0u);
}

TEST_F(CgroupMemory, CgroupV2LimitAndUse) {
  CgroupFile(102, "0::/kubepods.slice/pod2/cri-containerd-abc.scope\n");
  const std::string d = cg() + "/kubepods.slice/pod2/cri-containerd-abc.scope";
  Write(d + "/memory.max", "2147483648\n");
  Write(d + "/memory.current", "5242880\n");
  HostMemory m = ReadCgroupMemory(proc(), cg(), 102);
  EXPECT_TRUE(m.known) << m.reason;
  EXPECT_EQ(m.limit_bytes, 2147483648u);
  EXPECT_EQ(m.used_bytes, 5242880u);
  Write(d + "/memory.max", "max\n");
  m = ReadCgroupMemory(proc(), cg(), 102);
  EXPECT_TRUE(m.known) << m.reason;
  EXPECT_EQ(m.limit_bytes, 0u);  // unlimited
  EXPECT_EQ(m.used_bytes, 5242880u);
}

TEST_F(CgroupMemory, WhatCannotBeReadIsUnknownWithTheReason) {
  std::filesystem::create_directories(proc());
  std::filesystem::create_directories(cg());
  // No such process.
  HostMemory m = ReadCgroupMemory(proc(), cg(), 103);
  EXPECT_FALSE(m.known);
  EXPECT_NE(m.reason.find("open " + proc() + "/103: "), std::string::npos) << m.reason;
  EXPECT_FALSE(ReadCgroupMemory(proc(), cg(), 0).known);
  EXPECT_FALSE(ReadCgroupMemory(proc(), cg(), -5).known);
  // The cgroup files missing.
  CgroupFile(104, "0::/gone\n");
  m = ReadCgroupMemory(proc(), cg(), 104);
  EXPECT_FALSE(m.known);
  EXPECT_NE(m.reason.find("open " + cg() + "/gone: "), std::string::npos) << m.reason;
  // A value that is no number: the file and the value named.
  CgroupFile(105, "0::/bad\n");
  Write(cg() + "/bad/memory.max", "12abc\n");
  Write(cg() + "/bad/memory.current", "1\n");
  m = ReadCgroupMemory(proc(), cg(), 105);
  EXPECT_FALSE(m.known);
  EXPECT_NE(m.reason.find("memory.max holds '12abc'"), std::string::npos) << m.reason;
  // A value file too long.
  Write(cg() + "/bad/memory.max", std::string(100, '1'));
  m = ReadCgroupMemory(proc(), cg(), 105);
  EXPECT_FALSE(m.known);
  EXPECT_NE(m.reason.find("longer than 32 bytes"), std::string::npos) << m.reason;
  // No memory line at all.
  CgroupFile(106, "3:cpu:/x\n");
  m = ReadCgroupMemory(proc(), cg(), 106);
  EXPECT_FALSE(m.known);
  EXPECT_NE(m.reason.find("names no memory cgroup"), std::string::npos) << m.reason;
  // A /proc/<pid>/cgroup over 64 KiB.
  CgroupFile(107, std::string(70 * 1024, 'x'));
  m = ReadCgroupMemory(proc(), cg(), 107);
  EXPECT_FALSE(m.known);
  EXPECT_NE(m.reason.find("longer than 65536 bytes"), std::string::npos) << m.reason;
}

TEST_F(CgroupMemory, AHostilePathLeadsNowhereOutsideTheRoot) {
  // ".." (what a reader in another cgroup namespace sees too): refused, nothing read.
  Write(dir_.path() + "/etc/memory.max", "1\n");
  Write(dir_.path() + "/etc/memory.current", "1\n");
  CgroupFile(108, "0::/../etc\n");
  HostMemory m = ReadCgroupMemory(proc(), cg(), 108);
  EXPECT_FALSE(m.known);
  EXPECT_NE(m.reason.find("'..' component"), std::string::npos) << m.reason;
  CgroupFile(108, "0::relative/path\n");
  m = ReadCgroupMemory(proc(), cg(), 108);
  EXPECT_FALSE(m.known);
  EXPECT_NE(m.reason.find("not absolute"), std::string::npos) << m.reason;
  // A symlink inside the tree pointing out of it is not followed.
  std::filesystem::create_directories(cg());
  std::filesystem::create_directory_symlink(dir_.path() + "/etc", cg() + "/escape");
  CgroupFile(109, "0::/escape\n");
  m = ReadCgroupMemory(proc(), cg(), 109);
  EXPECT_FALSE(m.known);
  EXPECT_NE(m.reason.find("escape"), std::string::npos) << m.reason;
  // The value file itself a symlink: not followed either.
  std::filesystem::create_directories(cg() + "/link");
  std::filesystem::create_symlink(dir_.path() + "/etc/memory.max", cg() + "/link/memory.max");
  Write(cg() + "/link/memory.current", "1\n");
  CgroupFile(110, "0::/link\n");
  m = ReadCgroupMemory(proc(), cg(), 110);
  EXPECT_FALSE(m.known);
  EXPECT_NE(m.reason.find("link/memory.max"), std::string::npos) << m.reason;
}

// ---- The checkpoint calls from the fake libcuda.so.1, in forked processes.

// Runs `body` in a forked process; returns what it wrote to its pipe (its answer).
std::string InChild(const std::function<std::string()>& body) {
  int fd[2];
  if (pipe(fd) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    std::string out = body();
    size_t at = 0;
    while (at < out.size()) {
      ssize_t n = write(fd[1], out.data() + at, out.size() - at);
      if (n <= 0) _exit(2);
      at += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fd[1]);
  std::string out;
  char buf[512];
  for (ssize_t n; (n = read(fd[0], buf, sizeof(buf))) > 0;) out.append(buf, n);
  close(fd[0]);
  waitpid(pid, nullptr, 0);
  return out;
}

TEST(LoadCheckpointDriver, NamesTheLibraryAndTheMissingSymbol) {
  EXPECT_EQ(InChild([] {
              auto d = LoadCheckpointDriver("/nonexistent/libcuda.so.1");
              return d.ok() ? std::string("loaded") : d.status().message();
            }).find("cannot load the CUDA driver /nonexistent/libcuda.so.1"),
            0u);
  // A library that is no driver (the fake NVML): the first symbol it lacks is named.
  const std::string lacks = InChild([] {
    auto d = LoadCheckpointDriver(kNvml);
    return d.ok() ? std::string("loaded") : d.status().message();
  });
  EXPECT_EQ(lacks, "the CUDA driver " + std::string(kNvml) +
                       " lacks cuInit (the checkpoint API needs a CUDA 12.8 or newer driver)");
}

TEST(LoadCheckpointDriver, CallsTheFakeDriversCheckpointApi) {
  vgpu::testing::Sandbox box;
  ::setenv("FAKE_GPU_DEVICES", (std::string(kGpu) + ":1024").c_str(), 1);
  ::setenv("FAKE_GPU_STATE_DIR", box.dir().c_str(), 1);
  const std::string out = InChild([] {
    auto d = LoadCheckpointDriver(kCuda);
    if (!d.ok()) return d.status().message();
    // Its own process (a fake process since cuInit): RUNNING; a pid that is no fake process:
    // CUDA_ERROR_INVALID_VALUE (1) from each call.
    int state = -1;
    int rc = d->get_state(getpid(), &state);
    return std::to_string(rc) + " " + std::to_string(state) + " " +
           std::to_string(d->lock(999999, 100)) + " " + std::to_string(d->checkpoint(999999)) +
           " " + std::to_string(d->restore(999999)) + " " + std::to_string(d->unlock(999999));
  });
  ::unsetenv("FAKE_GPU_STATE_DIR");
  EXPECT_EQ(out, "0 0 1 1 1 1");
}

// ---- Metrics.

TEST(ParkingMetrics, OneSeriesPerParkedSliceAndTheNodesSum) {
  metrics::Registry reg;
  ParkedSlices parked;
  RegisterParkingMetrics(&reg, "n1", &parked);
  std::string text = reg.Render();
  EXPECT_NE(text.find("fracgpu_parked_bytes{node=\"n1\"} 0\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("fracgpu_container_parked{"), std::string::npos) << text;
  parked.Publish({{"team-a", "nb", "main", kGpu, 64ull << 20}, {"", "uid-2", "c", kGpu, 1024}});
  text = reg.Render();
  const std::string labels =
      "{node=\"n1\",namespace=\"team-a\",pod=\"nb\",container=\"main\","
      "device_uuid=\"" +
      std::string(kGpu) + "\"}";
  EXPECT_NE(text.find("fracgpu_container_parked" + labels + " 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("fracgpu_container_parked_bytes" + labels + " 67108864\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("fracgpu_parked_bytes{node=\"n1\"} 67109888\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE fracgpu_container_parked gauge"), std::string::npos) << text;
  EXPECT_EQ(text.find("fracgpu_gpu_idle_lent_bytes{"), std::string::npos) << text;
  EXPECT_NE(text.find("fracgpu_park_refusals_total{node=\"n1\"} 0\n"), std::string::npos) << text;
  parked.PublishCounts(0, 0, 3);
  parked.PublishIdleLent({{kGpu, 668ull << 20}});
  text = reg.Render();
  EXPECT_NE(text.find("fracgpu_park_refusals_total{node=\"n1\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("fracgpu_gpu_idle_lent_bytes{node=\"n1\",device_uuid=\"" + std::string(kGpu) +
                      "\"} 700448768\n"),
            std::string::npos)
      << text;
}

// ---- The grant and the processes a region names, verified (issue 36 review findings 1-3).

// The limits file the device plugin wrote from the signed decision: one GPU and its limit, or
// nothing parks.
TEST(ReadSliceGrant, OneGpuAndItsLimitFromTheLimitsFile) {
  TempDir dir;
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir.path() + "/" + name + ".env") << text;
  };
  write("u_main",
        "NVIDIA_VISIBLE_DEVICES=" + std::string(kGpu) + "\nCUDA_DEVICE_MEMORY_LIMIT_0=1000m\n");
  auto g = ReadSliceGrant(dir.path(), "u_main");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->uuid, kGpu);
  EXPECT_EQ(g->bytes, 1000 * kMiB);
  write("two_main", "NVIDIA_VISIBLE_DEVICES=" + std::string(kGpu) + "," + kGpu +
                        "\nCUDA_DEVICE_MEMORY_LIMIT=1000m\n");
  EXPECT_FALSE(ReadSliceGrant(dir.path(), "two_main").ok());
  write("nolimit_main", "NVIDIA_VISIBLE_DEVICES=" + std::string(kGpu) + "\n");
  EXPECT_FALSE(ReadSliceGrant(dir.path(), "nolimit_main").ok());
  write("bad_main",
        "NVIDIA_VISIBLE_DEVICES=" + std::string(kGpu) + "\nCUDA_DEVICE_MEMORY_LIMIT_0=1Gb\n");
  EXPECT_FALSE(ReadSliceGrant(dir.path(), "bad_main").ok());
  EXPECT_EQ(ReadSliceGrant(dir.path(), "none_main").status().code(), StatusCode::kNotFound);
  std::filesystem::create_symlink(dir.path() + "/u_main.env", dir.path() + "/link_main.env");
  EXPECT_FALSE(ReadSliceGrant(dir.path(), "link_main").ok());
}

// NVML's process list, scripted.
class ListedProcesses final : public enforce::ProcessSource {
 public:
  Result<std::vector<enforce::GpuSample>> Sample(std::vector<std::string>*) override {
    return gpus;
  }
  std::vector<enforce::GpuSample> gpus;
};

// MakeParkHost's verify_process: the enforcement's mapping of a pid (its /proc/<pid>/cgroup
// and stat under a fake /proc) to the pod and container, and NVML's list of the GPU.
TEST(ParkHostVerify, APidOfAnotherPodOrContainerOrNotOnTheGpuIsRefused) {
  TempDir root;
  const std::string proc = root.path() + "/proc";
  const std::string uid = "7d1c0c6e-0000-4000-8000-0000000000c3";
  const std::string other = "7d1c0c6e-0000-4000-8000-0000000000c4";
  const std::string cid(64, 'a'), sidecar(64, 'b');
  auto process = [&](int pid, const std::string& pod, const std::string& container) {
    WriteFakeProcess(proc, pid, pod, container);
  };
  process(11, uid, cid);      // the container's own
  process(12, other, cid);    // another pod's
  process(13, uid, sidecar);  // another container of the pod
  process(14, uid, cid);      // the container's, not on the GPU
  ListedProcesses nvml;
  nvml.gpus.resize(2);
  nvml.gpus[0].uuid = kGpu;
  nvml.gpus[0].processes = {{11, 64 * kMiB}, {12, 64 * kMiB}, {13, 64 * kMiB}};
  nvml.gpus[1].uuid = "GPU-22222222-2222-2222-2222-222222222222";
  nvml.gpus[1].processes = {{14, 64 * kMiB}};
  ParkHost host =
      MakeParkHost({}, nullptr, &nvml, proc, root.path() + "/cgroup", root.path() + "/limits");
  ContainerDir dir;
  dir.name = uid + "_main";
  dir.pod_uid = uid;
  dir.container = "main";
  PodRef pod{uid, "notebooks", "nb", {{cid, "main"}, {sidecar, "sidecar"}}, "", ""};
  auto verify = [&](int pid, const PodRef* p, bool on_gpu) {
    return host.verify_process(pid, dir, p, kGpu, on_gpu);
  };
  auto ok = verify(11, &pod, true);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, 1011u);
  EXPECT_EQ(*host.start_time(11), 1011u);
  EXPECT_FALSE(verify(12, &pod, true).ok());
  EXPECT_NE(verify(12, &pod, false).status().message().find("pod " + other), std::string::npos);
  EXPECT_NE(verify(13, &pod, false).status().message().find("container sidecar"),
            std::string::npos);
  EXPECT_NE(verify(14, &pod, true).status().message().find("NVML lists it on no GPU"),
            std::string::npos);
  EXPECT_TRUE(verify(14, &pod, false).ok());     // a checkpointed process: cgroup only
  EXPECT_FALSE(verify(11, nullptr, true).ok());  // the pod unknown: its container cannot be named
  PodRef unnamed{uid, "notebooks", "nb", {}, "", ""};
  EXPECT_FALSE(verify(11, &unnamed, true).ok());
  EXPECT_FALSE(verify(99, &pod, true).ok());  // no such process
  EXPECT_FALSE(host.start_time(99).ok());
  EXPECT_FALSE(verify(-1, &pod, true).ok());
}

// ---- OrphanWaker against a scripted driver: what an earlier agent left parked.

class Orphans : public ::testing::Test {
 protected:
  void SetUp() override {
    d_.name = "uid-9_main";
    d_.pod_uid = "uid-9";
    d_.container = "main";
    d_.path = dir_.path() + "/" + d_.name;
    std::filesystem::create_directories(d_.path);
    vgpu::RegionHandle h = MakeRegion(d_.path + "/region.cache", {{kGpu, 0, 0}});
    SetSlot(h.region, 0, 11, 1011, {{0, 0, 64 * kMiB}});
    SetSlot(h.region, 1, 12, 1012, {{0, 0, 64 * kMiB}});
    vgpu::RegionClose(&h);
    ASSERT_TRUE(WriteParkState(d_.path + "/region.cache", 0, api::kParkParked).ok());
    host_.driver.get_state = [this](int pid, int* state) {
      calls_.push_back("state " + std::to_string(pid));
      auto it = states_.find(pid);
      if (it == states_.end()) return 1;  // CUDA_ERROR_INVALID_VALUE
      *state = it->second;
      return 0;
    };
    host_.driver.lock = [this](int pid, unsigned) {
      calls_.push_back("lock " + std::to_string(pid));
      return 0;
    };
    host_.driver.checkpoint = [this](int pid) {
      calls_.push_back("checkpoint " + std::to_string(pid));
      return 0;
    };
    host_.driver.restore = [this](int pid) {
      calls_.push_back("restore " + std::to_string(pid));
      states_[pid] = node::kProcessStateLocked;
      return 0;
    };
    host_.driver.unlock = [this](int pid) {
      calls_.push_back("unlock " + std::to_string(pid));
      states_[pid] = node::kProcessStateRunning;
      return 0;
    };
    host_.free_bytes = [this](const std::string&) { return free_; };
    // The slice's grant (its limits file): the GPU and 128 MiB; its own processes 1011 and 1012.
    host_.grant = [this](const std::string&) { return grant_; };
    host_.verify_process = [](int pid, const ContainerDir& d, const PodRef* pod,
                              const std::string& uuid, bool on_gpu) -> Result<uint64_t> {
      EXPECT_EQ(d.name, "uid-9_main");
      EXPECT_NE(pod, nullptr);
      EXPECT_EQ(uuid, kGpu);
      EXPECT_FALSE(on_gpu);  // a checkpointed process has no context NVML lists
      if (pid != 1011 && pid != 1012) return PermissionDenied("its cgroup is another pod's");
      return uint64_t{500};
    };
    host_.start_time = [](int) { return Result<uint64_t>(uint64_t{500}); };
    pods_["uid-9"] = PodRef{"uid-9", "notebooks", "nb", {}, "", ""};
    options_.allowed_drivers = {"580."};
  }
  uint64_t ParkState() {
    return ReadRegionFile(d_.path + "/region.cache")->devices.at(0).park_state;
  }
  std::set<std::string> Poll() {
    OrphanWaker w(host_, options_);
    ParkController none(options_, host_);
    return w.Poll({d_}, none, pods_, 1);
  }
  void Slot(int s, int32_t host_pid, uint64_t bytes) {
    vgpu::RegionHandle h{};
    ASSERT_EQ(vgpu::RegionOpen((d_.path + "/region.cache").c_str(), nullptr, 0, 0, 1, &h),
              vgpu::RegionError::kOk);
    SetSlot(h.region, s, 10 + s, host_pid, {{0, 0, bytes}});
    vgpu::RegionClose(&h);
  }

  TempDir dir_;
  ContainerDir d_;
  ParkHost host_;
  ParkingOptions options_;
  std::map<int, int> states_;
  std::vector<std::string> calls_;
  uint64_t free_ = 0;
  Result<SliceGrant> grant_ = SliceGrant{kGpu, 128 * kMiB};
  std::map<std::string, PodRef> pods_;
};

TEST_F(Orphans, RunningProcessesOnlyResetTheMark) {
  states_ = {{1011, node::kProcessStateRunning}, {1012, node::kProcessStateRunning}};
  EXPECT_TRUE(Poll().empty());
  EXPECT_EQ(ParkState(), api::kParkRunning);
  EXPECT_EQ(calls_, (std::vector<std::string>{"state 1011", "state 1012"}));
}

TEST_F(Orphans, CheckpointedProcessesWaitForTheirMemoryThenWake) {
  states_ = {{1011, node::kProcessStateCheckpointed}, {1012, node::kProcessStateCheckpointed}};
  free_ = 128 * kMiB - 1;  // the region charges 128 MiB
  EXPECT_EQ(Poll(), (std::set<std::string>{"uid-9_main"}));
  EXPECT_EQ(ParkState(), api::kParkParked);
  for (const std::string& c : calls_) EXPECT_EQ(c.rfind("state ", 0), 0u) << c;  // no Restore
  free_ = 128 * kMiB;
  calls_.clear();
  EXPECT_TRUE(Poll().empty());
  EXPECT_EQ(ParkState(), api::kParkRunning);
  EXPECT_EQ(calls_,
            (std::vector<std::string>{"state 1011", "state 1012", "state 1011", "restore 1011",
                                      "state 1012", "restore 1012", "unlock 1011", "unlock 1012"}));
}

// An agent that died between Lock and Checkpoint: nothing was released, Unlock needs no room.
TEST_F(Orphans, LockedOnlyProcessesAreUnlockedWithoutRoom) {
  states_ = {{1011, node::kProcessStateLocked}, {1012, node::kProcessStateRunning}};
  free_ = 0;
  EXPECT_TRUE(Poll().empty());
  EXPECT_EQ(ParkState(), api::kParkRunning);
  EXPECT_EQ(calls_,
            (std::vector<std::string>{"state 1011", "state 1012", "state 1011", "unlock 1011"}));
}

// Attack review finding 2: a tenant marks its region parked and names another pod's process,
// checkpointed by this agent: the waker touches nothing (not even GetState) and keeps the mark.
TEST_F(Orphans, AForgedMarkNamingAnotherPodsProcessTouchesNothing) {
  Slot(1, 4242, 0);  // a victim's pid, 0 bytes charged
  states_ = {{1011, node::kProcessStateRunning},
             {1012, node::kProcessStateRunning},
             {4242, node::kProcessStateCheckpointed}};
  free_ = 0;
  EXPECT_EQ(Poll(), (std::set<std::string>{"uid-9_main"}));
  EXPECT_TRUE(calls_.empty()) << calls_[0];
  EXPECT_EQ(ParkState(), api::kParkParked);
  // Without a grant (no limits file) or a pod list, nothing either.
  Slot(1, 1012, 0);
  grant_ = Result<SliceGrant>(NotFound("no limits file"));
  EXPECT_EQ(Poll(), (std::set<std::string>{"uid-9_main"}));
  EXPECT_TRUE(calls_.empty()) << calls_[0];
}

// Finding 2: the room a restore needs is the grant's, on the grant's GPU, never what the region
// charges (0 here, forged): with 0 bytes free nothing is restored.
TEST_F(Orphans, TheRoomIsTheGrantsNotTheRegions) {
  Slot(0, 1011, 0);
  Slot(1, 1012, 0);
  std::vector<std::string> asked;
  host_.free_bytes = [&](const std::string& uuid) {
    asked.push_back(uuid);
    return free_;
  };
  states_ = {{1011, node::kProcessStateCheckpointed}, {1012, node::kProcessStateCheckpointed}};
  free_ = 128 * kMiB - 1;
  EXPECT_EQ(Poll(), (std::set<std::string>{"uid-9_main"}));
  for (const std::string& c : calls_) EXPECT_EQ(c.rfind("state ", 0), 0u) << c;  // no Restore
  EXPECT_EQ(asked, (std::vector<std::string>{kGpu}));
  free_ = 128 * kMiB;
  EXPECT_TRUE(Poll().empty());
  EXPECT_EQ(ParkState(), api::kParkRunning);
}

// Issue 36 review, lesser finding "the orphan waker does not evict borrowers": an earlier agent
// lent the parked memory; the new agent evicts the borrowers of the grant's GPU for what NVML
// lacks of the grant (never more), once, never restores without the room, and restores at the
// first poll that finds it (0.2 s later, not after the 60 s timeout).
TEST_F(Orphans, AWakeWithoutRoomEvictsTheGrantsGpuBorrowersFirst) {
  states_ = {{1011, node::kProcessStateCheckpointed}, {1012, node::kProcessStateCheckpointed}};
  std::vector<std::tuple<std::string, uint64_t, std::string>> evicted;
  host_.reclaim = [&](const std::string& uuid, uint64_t need, const std::string& owner) {
    evicted.emplace_back(uuid, need, owner);
    return Result<int>(1);
  };
  options_.reclaim_timeout = std::chrono::seconds(60);
  OrphanWaker w(host_, options_);
  ParkController none(options_, host_);
  const uint64_t t0 = 1'000'000'000ull;
  free_ = 28 * kMiB;  // the grant is 128 MiB: 100 MiB missing
  EXPECT_EQ(w.Poll({d_}, none, pods_, t0), (std::set<std::string>{"uid-9_main"}));
  using E = std::vector<std::tuple<std::string, uint64_t, std::string>>;
  EXPECT_EQ(evicted, (E{{kGpu, 100 * kMiB, "notebooks/nb"}}));
  EXPECT_EQ(w.evictions(), 1u);
  for (const std::string& c : calls_) EXPECT_EQ(c.rfind("state ", 0), 0u) << c;  // no Restore
  // The borrower terminating: no second eviction, still no Restore.
  EXPECT_EQ(w.Poll({d_}, none, pods_, t0 + 200'000'000ull), (std::set<std::string>{"uid-9_main"}));
  EXPECT_EQ(evicted.size(), 1u);
  for (const std::string& c : calls_) EXPECT_EQ(c.rfind("state ", 0), 0u) << c;
  // Its memory free: woken at this poll.
  free_ = 128 * kMiB;
  EXPECT_TRUE(w.Poll({d_}, none, pods_, t0 + 400'000'000ull).empty());
  EXPECT_EQ(ParkState(), api::kParkRunning);
  EXPECT_NE(std::find(calls_.begin(), calls_.end(), "restore 1011"), calls_.end());
  EXPECT_EQ(evicted.size(), 1u);
  EXPECT_EQ(w.reclaim_timeouts(), 0u);
}

// The memory never comes free: at the timeout it is said and counted, the next poll evicts
// again, and nothing is ever restored. A forged region charging 0 does not shrink the need:
// the grant's.
TEST_F(Orphans, AnEvictionThatFreesNothingInTimeIsRetriedAndNeverRestored) {
  Slot(0, 1011, 0);
  Slot(1, 1012, 0);
  states_ = {{1011, node::kProcessStateCheckpointed}, {1012, node::kProcessStateCheckpointed}};
  std::vector<uint64_t> needs;
  host_.reclaim = [&](const std::string&, uint64_t need, const std::string&) {
    needs.push_back(need);
    return Result<int>(0);
  };
  options_.reclaim_timeout = std::chrono::seconds(60);
  OrphanWaker w(host_, options_);
  ParkController none(options_, host_);
  free_ = 0;
  const uint64_t s = 1'000'000'000ull;
  w.Poll({d_}, none, pods_, s);
  w.Poll({d_}, none, pods_, 60 * s);  // 59 s after: waiting
  EXPECT_EQ(needs, (std::vector<uint64_t>{128 * kMiB}));
  w.Poll({d_}, none, pods_, 61 * s);  // 60 s: the timeout
  EXPECT_EQ(w.reclaim_timeouts(), 1u);
  EXPECT_EQ(needs.size(), 1u);
  w.Poll({d_}, none, pods_, 61 * s + 200'000'000ull);  // evicting again
  EXPECT_EQ(needs, (std::vector<uint64_t>{128 * kMiB, 128 * kMiB}));
  for (const std::string& c : calls_) EXPECT_EQ(c.rfind("state ", 0), 0u) << c;
  EXPECT_EQ(ParkState(), api::kParkParked);
  // Without a reclaim (no API client), it only waits, as before.
  host_.reclaim = nullptr;
  OrphanWaker plain(host_, options_);
  EXPECT_EQ(plain.Poll({d_}, none, pods_, s), (std::set<std::string>{"uid-9_main"}));
  EXPECT_EQ(plain.evictions(), 0u);
}

TEST_F(Orphans, AProcessTheDriverCannotAnswerForKeepsTheMark) {
  states_ = {{1011, node::kProcessStateRunning}};  // 1012: CUDA_ERROR_INVALID_VALUE
  EXPECT_EQ(Poll(), (std::set<std::string>{"uid-9_main"}));
  EXPECT_EQ(ParkState(), api::kParkParked);
}

// ---- RunParkingLoop end to end: an agent process (the real adapters over the fake driver and
// NVML, a fake /proc and cgroup tree for the tenant) parks an idle opted-in notebook while a
// borrower is pending, and wakes it on its next launch.

class StaticPods final : public PodLister {
 public:
  explicit StaticPods(std::vector<PodRef> pods) : pods_(std::move(pods)) {}
  Result<std::vector<PodRef>> ListNodePods(const std::string&) override { return pods_; }

 private:
  std::vector<PodRef> pods_;
};

// The cluster-wide borrower query is made only while a pod of the node opts in; one poll each
// (the loop stopped before it starts runs exactly one).
TEST(RunParkingLoop, AsksForABorrowerOnlyWhileAPodOfTheNodeOptsIn) {
  TempDir dir;
  ParkingOptions o;
  o.default_namespaces = {"notebooks"};
  o.allowed_drivers = {"580."};
  auto run = [&](PodRef pod) {
    ParkController controller(o, ParkHost{});
    StaticPods pods({pod});
    int asks = 0;
    ParkingLoopSources sources;
    sources.containers_root = dir.path();
    sources.node_name = "n1";
    sources.pods = &pods;
    sources.opted_in = [&o](const PodRef& p) { return ParkOptedIn(&p, o); };
    sources.borrower_pending = [&asks] {
      ++asks;
      return Result<std::vector<PendingBorrower>>(std::vector<PendingBorrower>{{"b/b", 1, 0}});
    };
    base::StopSignal stop;
    stop.Stop();
    RunParkingLoop(&controller, sources, 20ms, &stop, nullptr);
    return asks;
  };
  EXPECT_EQ(run(PodRef{"u1", "team-a", "train", {}, "", ""}), 0);
  EXPECT_EQ(run(PodRef{"u1", "notebooks", "nb", {}, "", "false"}), 0);
  EXPECT_EQ(run(PodRef{"u1", "notebooks", "nb", {}, "", ""}), 1);
  EXPECT_EQ(run(PodRef{"u1", "team-a", "nb", {}, "", "true"}), 1);
}

class RunParkingLoopTest : public ::testing::Test {
 protected:
  static constexpr const char* kUid = "7d1c0c6e-0000-4000-8000-0000000000b2";
  static constexpr const char* kCid =
      "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

  void SetUp() override {
    root_ = box_.dir() + "/hook/vgpu/containers";
    name_ = std::string(kUid) + "_main";
    std::filesystem::create_directories(root_ + "/" + name_);
    region_ = root_ + "/" + name_ + "/region.cache";
    ::setenv("FAKE_GPU_DEVICES", (std::string(kGpu) + ":1024").c_str(), 1);
    ::setenv("FAKE_GPU_STATE_DIR", box_.dir().c_str(), 1);
    // A notebook's kernel process: 64 MiB and a launch, then idle until its stdin closes, then
    // one more launch.
    auto env = box_.Env();
    env["FAKE_GPU_DEVICES"] = std::string(kGpu) + ":1024";
    env["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = region_;
    env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "512m";
    env["GPU_CORE_UTILIZATION_POLICY"] = "disable";
    tenant_ =
        vgpu::testing::Spawn(box_, env, {"init", "alloc:67108864", "launch:1", "wait", "launch:1"});
    ASSERT_EQ(vgpu::testing::Rc(vgpu::testing::ReadLine(tenant_)), 0);  // init
    ASSERT_EQ(vgpu::testing::Rc(vgpu::testing::ReadLine(tenant_)), 0);  // alloc
    ASSERT_EQ(vgpu::testing::ReadLine(tenant_), "launch 0");
    ASSERT_EQ(vgpu::testing::ReadLine(tenant_), "ready");
    // The tenant's container cgroup (v2, 1 GiB limit, 100 MiB in use): room for the host copy.
    proc_ = box_.dir() + "/proc";
    cg_ = box_.dir() + "/cgroup";
    // Its cgroup is the pod's container's (cgroupfs driver), as the enforcement maps it.
    const std::string cgroup = "/kubepods/pod" + std::string(kUid) + "/" + kCid;
    std::filesystem::create_directories(proc_ + "/" + std::to_string(tenant_.pid));
    std::ofstream(proc_ + "/" + std::to_string(tenant_.pid) + "/cgroup") << "0::" << cgroup << "\n";
    std::ofstream(proc_ + "/" + std::to_string(tenant_.pid) + "/stat")
        << tenant_.pid << " (vgpu_app) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 12345 0 0\n";
    std::filesystem::create_directories(cg_ + cgroup);
    std::ofstream(cg_ + cgroup + "/memory.max") << "1073741824\n";
    std::ofstream(cg_ + cgroup + "/memory.current") << "104857600\n";
    // Its grant: the device plugin's limits file.
    limits_ = box_.dir() + "/hook/vgpu/limits";
    std::filesystem::create_directories(limits_);
    std::ofstream(limits_ + "/" + name_ + ".env")
        << "NVIDIA_VISIBLE_DEVICES=" << kGpu << "\nCUDA_DEVICE_MEMORY_LIMIT_0=512m\n";
  }
  void TearDown() override {
    if (agent_ > 0) Stop();
    if (tenant_.pid > 0) vgpu::testing::Finish(tenant_);
    ::unsetenv("FAKE_GPU_STATE_DIR");
  }

  RegionContents Region() {
    auto r = ReadRegionFile(region_);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : RegionContents{};
  }

  // The agent: a forked process (it loads the fake driver) running RunParkingLoop with the real
  // adapters, the tenant idle for 10 minutes of the fake's virtual time, a borrower pending; it
  // stops when its pipe closes and writes the last outcome of the notebook to agent.log.
  void StartAgent(bool borrower = true) {
    const uint64_t launched = Region().devices.at(0).last_launch_ns;
    free_before_ = FreeBytes();
    int stop_pipe[2];
    ASSERT_EQ(pipe(stop_pipe), 0);
    agent_ = fork();
    if (agent_ == 0) {
      close(stop_pipe[1]);
      close(tenant_.in);  // the tenant must see its stdin close when the test closes it
      close(tenant_.out);
      auto driver = LoadCheckpointDriver(kCuda);
      auto nvml = NvmlParkFacts::Open(kNvml);
      auto processes = enforce::NvmlProcesses::Open(kNvml);
      if (!driver.ok() || !nvml.ok() || !processes.ok()) _exit(3);
      ParkingOptions o;
      o.idle_after = std::chrono::minutes(10);
      o.default_namespaces = {"notebooks"};
      o.allowed_drivers = {"580."};
      const ParkHost host =
          MakeParkHost(std::move(*driver), nvml->get(), processes->get(), proc_, cg_, limits_);
      ParkController controller(o, host);
      StaticPods pods({PodRef{kUid, "notebooks", "nb-1", {{kCid, "main"}}, "", ""}});
      ParkingLoopSources sources;
      sources.containers_root = root_;
      sources.node_name = "n1";
      sources.pods = &pods;
      sources.borrower_pending = [borrower] {
        std::vector<PendingBorrower> b;
        if (borrower) b.push_back({"batch/borrower", 1, 0});  // 1 MiB: fits what a park lends
        return Result<std::vector<PendingBorrower>>(b);
      };
      sources.host = &host;
      sources.options = &o;
      sources.now = [launched] { return launched + 10 * 60'000'000'000ull; };
      base::StopSignal stop;
      std::thread stopper([&] {
        char c;
        while (read(stop_pipe[0], &c, 1) > 0) {
        }
        stop.Stop();
      });
      ParkedSlices parked;
      RunParkingLoop(&controller, sources, 20ms, &stop, &parked);
      stopper.join();
      std::ofstream(box_.dir() + "/agent.log")
          << (controller.last_outcome().count(name_) ? controller.last_outcome().at(name_) : "none")
          << "\n";
      _exit(controller.parked().empty() && parked.Get().empty() ? 0 : 4);
    }
    close(stop_pipe[0]);
    stop_fd_ = stop_pipe[1];
  }

  // The fake GPU's free bytes as NVML reports them (0 when NVML cannot answer).
  static uint64_t FreeBytes() {
    auto nvml = NvmlParkFacts::Open(kNvml);
    if (!nvml.ok()) return 0;
    auto free = (*nvml)->FreeBytes(kGpu);
    return free.ok() ? *free : 0;
  }

  // Waits (bounded) until an agent wrote park_state = `state`; for kParkParked also until the
  // checkpoint itself released the notebook's 64 MiB (NVML): park_state is written before the
  // Lock, so a call the tenant makes between the two runs unparked and the park is undone.
  bool WaitParked(uint64_t state = api::kParkParked) {
    for (int i = 0; i < 3000; ++i) {
      auto r = ReadRegionFile(region_);
      if (r.ok() && r->devices.size() == 1 && r->devices[0].park_state == state &&
          (state != api::kParkParked || FreeBytes() >= free_before_ + 64 * kMiB))
        return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

  // Stops the agent; its exit status (0: nothing left parked) and last outcome.
  std::pair<int, std::string> Stop() {
    close(stop_fd_);
    int status = 0;
    waitpid(agent_, &status, 0);
    agent_ = -1;
    std::ifstream in(box_.dir() + "/agent.log");
    std::string outcome;
    std::getline(in, outcome);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, outcome};
  }

  vgpu::testing::Sandbox box_;
  std::string root_, name_, region_, proc_, cg_, limits_;
  vgpu::testing::Child tenant_;
  pid_t agent_ = -1;
  int stop_fd_ = -1;
  uint64_t free_before_ = 0;  // NVML's free bytes when StartAgent ran
};

TEST_F(RunParkingLoopTest, ParksAnIdleNotebookAndItsNextLaunchWakesIt) {
  const uint64_t requests = Region().devices.at(0).wake_requests;
  StartAgent();
  ASSERT_TRUE(WaitParked()) << "the agent never parked the notebook";

  // Its next launch asks for the wake and waits in the driver; the agent wakes it; it completes.
  close(tenant_.in);
  tenant_.in = -1;
  std::vector<std::string> rest = vgpu::testing::Finish(tenant_);
  tenant_.pid = -1;
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(vgpu::testing::Rc(rest[0]), 0) << rest[0];
  // The agent writes park_state back after the Unlock that let the launch complete, so the
  // tenant may exit before that write lands: wait for it (bounded) instead of reading once.
  EXPECT_TRUE(WaitParked(api::kParkRunning)) << "park_state never went back to running";
  const RegionContents after = Region();
  EXPECT_GT(after.devices.at(0).wake_requests, requests);
  EXPECT_EQ(after.devices.at(0).park_state, api::kParkRunning);
  auto [rc, outcome] = Stop();
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(outcome, "awake");
}

// Stopping the agent (SIGTERM in the monitor) wakes what it parked: the notebook is running
// again although it made no call, and its next launch completes at once.
TEST_F(RunParkingLoopTest, StoppingTheLoopWakesWhatItParked) {
  StartAgent();
  ASSERT_TRUE(WaitParked()) << "the agent never parked the notebook";
  auto [rc, outcome] = Stop();
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(outcome, "awake");
  EXPECT_EQ(Region().devices.at(0).park_state, api::kParkRunning);
  close(tenant_.in);
  tenant_.in = -1;
  std::vector<std::string> rest = vgpu::testing::Finish(tenant_);
  tenant_.pid = -1;
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(vgpu::testing::Rc(rest[0]), 0) << rest[0];
}

// An agent killed while the notebook is parked (SIGKILL: no wake at exit) leaves it parked; the
// next agent wakes it at its first poll although it holds no record of it and no borrower is
// pending, and the notebook's next launch completes.
TEST_F(RunParkingLoopTest, TheNextAgentWakesWhatAKilledOneLeftParked) {
  // WaitParked waits for the checkpoint itself, so the kill comes after the park, not inside it.
  StartAgent();
  ASSERT_TRUE(WaitParked()) << "the agent never parked the notebook";
  ASSERT_EQ(kill(agent_, SIGKILL), 0);
  waitpid(agent_, nullptr, 0);
  agent_ = -1;
  close(stop_fd_);
  EXPECT_EQ(Region().devices.at(0).park_state, api::kParkParked);  // nobody woke it

  StartAgent(/*borrower=*/false);
  ASSERT_TRUE(WaitParked(api::kParkRunning)) << "the second agent never woke the notebook";
  close(tenant_.in);
  tenant_.in = -1;
  std::vector<std::string> rest = vgpu::testing::Finish(tenant_);
  tenant_.pid = -1;
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(vgpu::testing::Rc(rest[0]), 0) << rest[0];
  auto [rc, outcome] = Stop();
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(outcome, "none");  // its controller never acted: the orphan waker did
}

}  // namespace
}  // namespace fracgpu::monitor::testing
