// The node agent's parking loop (monitor/parking.h, issue 36 items 1 and 3): the decision table,
// the opt-in, the region write, and the loop end to end against a container's process run by
// libvgpu.so over the fake driver: it parks only an opted-in container idle for the configured
// time while a borrower is pending, writes park_state, releases the memory in NVML; the
// tenant's next launch asks for the wake through the region, the next poll wakes it, and its
// call completes with its charges unchanged.
#include "monitor/parking.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>

#include "../vgpu/harness.h"
#include "api/nvml.h"
#include "api/region.h"
#include "fake_apiserver.h"
#include "k8s/client.h"
#include "monitor/monitor.h"
#include "region_files.h"
#include "vgpu/cuda_api.h"

namespace fracgpu::monitor::testing {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kMin = 60'000'000'000ull;  // ns

ParkingOptions Options() {
  ParkingOptions o;
  o.idle_after = std::chrono::minutes(10);
  o.default_namespaces = {"notebooks"};
  o.allowed_drivers = {"580."};
  return o;
}

// A container that parks under Options(): every condition holds.
ParkInput Parkable() {
  ParkInput in;
  in.opted_in = true;
  in.borrower_pending = true;
  in.single_gpu = true;
  in.used_bytes = 64 * kMiB;
  in.processes = 2;
  in.idle_ns = 10 * kMin;
  return in;
}

TEST(DecideParking, ParksOnlyWhenEveryConditionHolds) {
  const ParkingOptions o = Options();
  EXPECT_EQ(DecideParking(Parkable(), o), ParkAction::kPark);
  struct Row {
    const char* name;
    std::function<void(ParkInput&)> change;
  };
  const Row rows[] = {
      {"not opted in", [](ParkInput& in) { in.opted_in = false; }},
      {"no borrower pending", [](ParkInput& in) { in.borrower_pending = false; }},
      {"two GPUs", [](ParkInput& in) { in.single_gpu = false; }},
      {"no memory held", [](ParkInput& in) { in.used_bytes = 0; }},
      {"no process", [](ParkInput& in) { in.processes = 0; }},
      {"a process without a host pid", [](ParkInput& in) { in.processes_without_host_pid = 1; }},
      {"idle 1 ns short", [](ParkInput& in) { in.idle_ns = 10 * kMin - 1; }},
  };
  for (const Row& row : rows) {
    ParkInput in = Parkable();
    row.change(in);
    EXPECT_EQ(DecideParking(in, o), ParkAction::kNone) << row.name;
  }
}

TEST(DecideParking, WakesAParkedContainerOnARequestOrAnOptOutOnly) {
  const ParkingOptions o = Options();
  ParkInput in = Parkable();
  in.parked = true;
  in.wake_requests = in.wake_baseline = 7;
  EXPECT_EQ(DecideParking(in, o), ParkAction::kNone);
  in.borrower_pending = false;  // no borrower left: it stays parked until it calls
  EXPECT_EQ(DecideParking(in, o), ParkAction::kNone);
  in.wake_requests = 8;
  EXPECT_EQ(DecideParking(in, o), ParkAction::kWake);
  in.wake_requests = 7;
  in.opted_in = false;
  EXPECT_EQ(DecideParking(in, o), ParkAction::kWake);
}

TEST(ParkOptedIn, TheAnnotationOverTheNamespaceDefault) {
  const ParkingOptions o = Options();
  PodRef pod{"u", "notebooks", "nb", {}, "", ""};
  EXPECT_TRUE(ParkOptedIn(&pod, o));
  pod.park = "false";
  EXPECT_FALSE(ParkOptedIn(&pod, o));
  pod.namespace_name = "team-a";
  pod.park = "";
  EXPECT_FALSE(ParkOptedIn(&pod, o));
  pod.park = "true";
  EXPECT_TRUE(ParkOptedIn(&pod, o));
  pod.park = "yes";  // only "true" opts in
  EXPECT_FALSE(ParkOptedIn(&pod, o));
  EXPECT_FALSE(ParkOptedIn(nullptr, o));
}

TEST(PodsFromList, ReadsTheParkAnnotation) {
  auto pods = PodsFromList(nlohmann::json::parse(R"({"items":[
    {"metadata":{"uid":"a","namespace":"n","name":"p",
                 "annotations":{"fracgpu.io/park":"true"}}},
    {"metadata":{"uid":"b","namespace":"n","name":"q","annotations":{"fracgpu.io/park":7}}}]})"));
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  ASSERT_EQ(pods->size(), 2u);
  EXPECT_EQ((*pods)[0].park, "true");
  EXPECT_EQ((*pods)[1].park, "");  // not a string: absent
}

TEST(WriteParkState, WritesTheDevicesWordAndRefusesWhatIsNotARegion) {
  TempDir dir;
  const std::string path = dir.path() + "/region.cache";
  {
    vgpu::RegionHandle h = MakeRegion(path, {{"GPU-a", 0, 0}, {"GPU-b", 0, 0}});
    vgpu::RegionClose(&h);
  }
  ASSERT_TRUE(WriteParkState(path, 1, api::kParkParked).ok());
  auto r = ReadRegionFile(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->devices[0].park_state, api::kParkRunning);
  EXPECT_EQ(r->devices[1].park_state, api::kParkParked);
  EXPECT_EQ(r->devices[1].wake_requests, 0u);
  ASSERT_TRUE(WriteParkState(path, 1, api::kParkRunning).ok());
  EXPECT_EQ(ReadRegionFile(path)->devices[1].park_state, api::kParkRunning);

  EXPECT_EQ(WriteParkState(path, 16, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteParkState(path, -1, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteParkState(dir.path() + "/absent", 0, 1).code(), StatusCode::kUnavailable);
  const std::string link = dir.path() + "/link";
  ASSERT_EQ(symlink(path.c_str(), link.c_str()), 0);
  EXPECT_EQ(WriteParkState(link, 0, 1).code(), StatusCode::kUnavailable);  // O_NOFOLLOW
  const std::string small = dir.path() + "/small";
  { std::ofstream(small) << "x"; }
  Status s = WriteParkState(small, 0, 1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("1 bytes"), std::string::npos) << s.message();
  EXPECT_EQ(std::filesystem::file_size(small), 1u);  // untouched
}

TEST(BorrowerPending, OnlyAnUnscheduledPendingPodAnnotatedAsBorrower) {
  fakes::FakeApiServer api;
  k8s::Config config;
  config.server = api.url();
  k8s::ClientOptions options;
  options.retries = 0;
  auto client = k8s::Client::Create(config, options);
  ASSERT_TRUE(client.ok());
  auto pod = [](const std::string& name, const std::string& node, const std::string& phase,
                const std::string& borrower) {
    nlohmann::json p = {{"apiVersion", "v1"},
                        {"kind", "Pod"},
                        {"metadata", {{"name", name}, {"namespace", "batch"}}},
                        {"spec", {{"containers", nlohmann::json::array()}}},
                        {"status", {{"phase", phase}}}};
    if (!node.empty()) p["spec"]["nodeName"] = node;
    if (!borrower.empty()) p["metadata"]["annotations"] = {{kBorrowerAnnotation, borrower}};
    return p;
  };
  api.Put("pods", pod("plain", "", "Pending", ""));
  api.Put("pods", pod("running", "n1", "Running", "true"));
  api.Put("pods", pod("scheduled", "n1", "Pending", "true"));  // has its node already
  api.Put("pods", pod("other", "", "Pending", "false"));
  auto r = BorrowerPending(client->get());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(*r);
  api.Put("pods", pod("borrower", "", "Pending", "true"));
  r = BorrowerPending(client->get());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(*r);
}

// ---- The loop against a tenant run by libvgpu.so over the fake driver.

constexpr const char* kOneGpu = "GPU-11111111-1111-1111-1111-111111111111:1024";
constexpr const char* kUuid = "GPU-11111111-1111-1111-1111-111111111111";
constexpr const char* kUid = "7d1c0c6e-0000-4000-8000-0000000000a1";

// Runs `body` in a forked process that loaded the fake driver and NVML (never this test's
// process: each process of the fakes is a participant of the fake node); returns its result.
int64_t InFakeProcess(const std::function<int64_t(void* cuda, void* nvml)>& body) {
  int fd[2];
  if (pipe(fd) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    void* cuda = dlopen(FRACGPU_FAKES_LIB "/libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    void* nvml = dlopen(FRACGPU_FAKES_LIB "/libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    int64_t v = -1;
    if (cuda && nvml) {
      auto init = reinterpret_cast<CUresult (*)(unsigned)>(dlsym(cuda, "cuInit"));
      if (init && init(0) == CUDA_SUCCESS) v = body(cuda, nvml);
    }
    if (write(fd[1], &v, sizeof(v)) != sizeof(v)) _exit(2);
    _exit(0);
  }
  close(fd[1]);
  int64_t v = -1;
  if (read(fd[0], &v, sizeof(v)) != sizeof(v)) v = -1;
  close(fd[0]);
  waitpid(pid, nullptr, 0);
  return v;
}

template <typename F>
F Fn(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

// The checkpoint calls, each made by a process of its own (as the agent's would be).
node::CheckpointDriver FakeDriver() {
  node::CheckpointDriver d;
  d.get_state = [](int pid, int* state) {
    int64_t v = InFakeProcess([pid](void* cuda, void*) -> int64_t {
      CUprocessState st{};
      auto f = Fn<CUresult (*)(int, CUprocessState*)>(cuda, "cuCheckpointProcessGetState");
      CUresult rc = f(pid, &st);
      return rc == CUDA_SUCCESS ? 1000 + static_cast<int64_t>(st) : rc;
    });
    if (v >= 1000) *state = static_cast<int>(v - 1000);
    return v >= 1000 ? 0 : static_cast<int>(v);
  };
  d.lock = [](int pid, unsigned timeout_ms) {
    return static_cast<int>(InFakeProcess([=](void* cuda, void*) -> int64_t {
      CUcheckpointLockArgs a{};
      a.timeoutMs = timeout_ms;
      return Fn<CUresult (*)(int, CUcheckpointLockArgs*)>(cuda, "cuCheckpointProcessLock")(pid, &a);
    }));
  };
  d.checkpoint = [](int pid) {
    return static_cast<int>(InFakeProcess([=](void* cuda, void*) -> int64_t {
      return Fn<CUresult (*)(int, CUcheckpointCheckpointArgs*)>(
          cuda, "cuCheckpointProcessCheckpoint")(pid, nullptr);
    }));
  };
  d.restore = [](int pid) {
    return static_cast<int>(InFakeProcess([=](void* cuda, void*) -> int64_t {
      return Fn<CUresult (*)(int, CUcheckpointRestoreArgs*)>(cuda, "cuCheckpointProcessRestore")(
          pid, nullptr);
    }));
  };
  d.unlock = [](int pid) {
    return static_cast<int>(InFakeProcess([=](void* cuda, void*) -> int64_t {
      return Fn<CUresult (*)(int, CUcheckpointUnlockArgs*)>(cuda, "cuCheckpointProcessUnlock")(
          pid, nullptr);
    }));
  };
  return d;
}

uint64_t FakeFreeBytes() {
  return static_cast<uint64_t>(InFakeProcess([](void*, void* nvml) -> int64_t {
    if (Fn<nvmlReturn_t (*)()>(nvml, "nvmlInit_v2")() != NVML_SUCCESS) return -1;
    nvmlDevice_t h = nullptr;
    if (Fn<nvmlReturn_t (*)(unsigned, nvmlDevice_t*)>(nvml, "nvmlDeviceGetHandleByIndex_v2")(
            0, &h) != NVML_SUCCESS)
      return -1;
    nvmlMemory_t m{};
    if (Fn<nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*)>(nvml, "nvmlDeviceGetMemoryInfo")(h, &m) !=
        NVML_SUCCESS)
      return -1;
    return static_cast<int64_t>(m.free);
  }));
}

class ParkingLoop : public ::testing::Test {
 protected:
  void SetUp() override {
    hook_ = box_.dir() + "/hook";
    dir_.name = std::string(kUid) + "_main";
    dir_.pod_uid = kUid;
    dir_.container = "main";
    dir_.path = hook_ + "/vgpu/containers/" + dir_.name;
    std::filesystem::create_directories(dir_.path);
    // The agent's helper processes see the same fake node as the container.
    ::setenv("FAKE_GPU_DEVICES", kOneGpu, 1);
    ::setenv("FAKE_GPU_STATE_DIR", box_.dir().c_str(), 1);
    pods_[kUid] = PodRef{kUid, "notebooks", "nb-1", {}, "", ""};
  }
  // A notebook's kernel process: a 64 MiB allocation and a launch, then idle until its stdin
  // closes, then `last`.
  vgpu::testing::Child StartTenant(const std::string& last) {
    auto env = box_.Env();
    env["FAKE_GPU_DEVICES"] = kOneGpu;
    env["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = dir_.path + "/region.cache";
    env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "512m";
    env["GPU_CORE_UTILIZATION_POLICY"] = "disable";
    vgpu::testing::Child c =
        vgpu::testing::Spawn(box_, env, {"init", "alloc:67108864", "launch:1", "wait", last});
    EXPECT_EQ(vgpu::testing::Rc(vgpu::testing::ReadLine(c)), 0);  // init
    EXPECT_EQ(vgpu::testing::Rc(vgpu::testing::ReadLine(c)), 0);  // alloc
    EXPECT_EQ(vgpu::testing::ReadLine(c), "launch 0");
    EXPECT_EQ(vgpu::testing::ReadLine(c), "ready");
    return c;
  }
  ParkController Controller() {
    ParkHost host;
    host.driver = FakeDriver();
    host.facts = [](const std::string& uuid, const std::string& pod_uid,
                    const std::vector<int>& pids) {
      EXPECT_FALSE(pids.empty());
      EXPECT_EQ(uuid, kUuid);
      EXPECT_EQ(pod_uid, kUid);
      node::CheckpointFacts f;
      f.driver_version = "580.95.05";
      f.persistence_mode = true;
      f.host_limit_known = true;
      f.host_limit_bytes = 0;  // no limit
      return f;
    };
    host.free_bytes = [](const std::string&) { return FakeFreeBytes(); };
    return ParkController(Options(), std::move(host));
  }
  RegionContents Region() {
    auto r = ReadRegionFile(dir_.path + "/region.cache");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : RegionContents{};
  }

  vgpu::testing::Sandbox box_;
  std::string hook_;
  ContainerDir dir_;
  std::map<std::string, PodRef> pods_;
};

TEST_F(ParkingLoop, ParksAnIdleOptedInNotebookForABorrowerAndItsNextLaunchWakesIt) {
  vgpu::testing::Child tenant = StartTenant("launch:1");
  const RegionContents before = Region();
  ASSERT_EQ(before.devices.size(), 1u);
  const uint64_t held = before.devices[0].used_bytes;
  ASSERT_GE(held, 64 * kMiB);
  const uint64_t launched = before.devices[0].last_launch_ns;
  ASSERT_NE(launched, 0u);
  const uint64_t free_running = FakeFreeBytes();

  ParkController c = Controller();
  // Idle 9 minutes: not yet. Idle 10 without a borrower, or opted out: no.
  c.Poll(launched + 9 * kMin, {dir_}, pods_, true);
  EXPECT_TRUE(c.parked().empty());
  c.Poll(launched + 10 * kMin, {dir_}, pods_, false);
  EXPECT_TRUE(c.parked().empty());
  pods_[kUid].park = "false";
  c.Poll(launched + 10 * kMin, {dir_}, pods_, true);
  EXPECT_TRUE(c.parked().empty());
  EXPECT_EQ(Region().devices[0].park_state, api::kParkRunning);
  EXPECT_EQ(FakeFreeBytes(), free_running);

  // Opted in (the namespace default), idle 10 minutes, a borrower pending: parked.
  pods_[kUid].park = "";
  c.Poll(launched + 10 * kMin, {dir_}, pods_, true);
  ASSERT_EQ(c.parked().count(dir_.name), 1u) << c.last_outcome().at(dir_.name);
  EXPECT_EQ(c.parked().at(dir_.name).released_bytes, held);
  EXPECT_EQ(Region().devices[0].park_state, api::kParkParked);
  EXPECT_EQ(FakeFreeBytes(), free_running + held);
  const uint64_t requests = Region().devices[0].wake_requests;

  // Parked, no call: it stays parked, borrower or not.
  c.Poll(launched + 20 * kMin, {dir_}, pods_, false);
  EXPECT_EQ(c.parked().count(dir_.name), 1u);

  // The notebook's next launch asks for the wake (and waits in the driver); the next poll
  // wakes it; the launch completes; its charges are those it had.
  close(tenant.in);
  tenant.in = -1;
  for (int i = 0; i < 1000 && Region().devices[0].wake_requests == requests; ++i)
    std::this_thread::sleep_for(10ms);
  ASSERT_GT(Region().devices[0].wake_requests, requests) << "the launch asked no wake";
  c.Poll(launched + 21 * kMin, {dir_}, pods_, false);
  EXPECT_TRUE(c.parked().empty()) << c.last_outcome().at(dir_.name);
  EXPECT_EQ(c.last_outcome().at(dir_.name), "awake");
  std::vector<std::string> rest = vgpu::testing::Finish(tenant);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(vgpu::testing::Rc(rest[0]), 0) << rest[0];
}

TEST_F(ParkingLoop, AnIneligibleNotebookIsNeverLockedAndItsStateIsReset) {
  vgpu::testing::Child tenant = StartTenant("launch:1");
  const uint64_t launched = Region().devices[0].last_launch_ns;
  ParkHost host;
  host.driver = FakeDriver();
  int locks = 0;
  auto lock = host.driver.lock;
  host.driver.lock = [&](int pid, unsigned t) {
    ++locks;
    return lock(pid, t);
  };
  host.facts = [](const std::string&, const std::string&, const std::vector<int>&) {
    node::CheckpointFacts f;
    f.driver_version = "575.57.08";  // not on the allow-list
    f.persistence_mode = true;
    f.host_limit_known = true;
    return f;
  };
  host.free_bytes = [](const std::string&) { return FakeFreeBytes(); };
  ParkController c(Options(), std::move(host));
  c.Poll(launched + 10 * kMin, {dir_}, pods_, true);
  EXPECT_TRUE(c.parked().empty());
  EXPECT_EQ(locks, 0);
  EXPECT_NE(c.last_outcome().at(dir_.name).find("ineligible"), std::string::npos)
      << c.last_outcome().at(dir_.name);
  EXPECT_EQ(Region().devices[0].park_state, api::kParkRunning);
  std::vector<std::string> rest = vgpu::testing::Finish(tenant);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(vgpu::testing::Rc(rest[0]), 0) << rest[0];
}

}  // namespace
}  // namespace fracgpu::monitor::testing
