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

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>
#include <tuple>

#include "../vgpu/harness.h"
#include "api/limits.h"
#include "api/nvml.h"
#include "api/region.h"
#include "core/annotations.h"
#include "core/codec.h"
#include "core/request.h"
#include "enforce/proc.h"
#include "fake_apiserver.h"
#include "k8s/client.h"
#include "monitor/borrowers.h"
#include "monitor/monitor.h"
#include "monitor/park_host.h"
#include "region_files.h"
#include "test_client.h"
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

// A pending pod of namespace "batch" (no node unless `node`), annotated a borrower unless
// `borrower` is empty, asking one GPU with `gpumem` MiB (0: none given), `spec` merged in.
nlohmann::json PendingPod(const std::string& name, const nlohmann::json& spec = {},
                          int64_t gpumem = 512, const std::string& borrower = "true",
                          const std::string& node = "", const std::string& phase = "Pending") {
  nlohmann::json limits = {{"nvidia.com/gpu", 1}};
  if (gpumem > 0) limits["nvidia.com/gpumem"] = gpumem;
  nlohmann::json p = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"namespace", "batch"}}},
      {"spec", {{"containers", {{{"name", "main"}, {"resources", {{"limits", limits}}}}}}}},
      {"status", {{"phase", phase}}}};
  if (!node.empty()) p["spec"]["nodeName"] = node;
  if (!borrower.empty()) p["metadata"]["annotations"] = {{core::kAnnotationBorrower, borrower}};
  if (spec.is_object()) p["spec"].update(spec);
  return p;
}

// Node n1 of the tests below: zone a, a NoSchedule taint dedicated=gpu, a PreferNoSchedule one
// (which keeps nobody off).
nlohmann::json NodeN1() {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", "n1"}, {"labels", {{"zone", "a"}, {"gpu", "a100"}}}}},
          {"spec",
           {{"taints",
             {{{"key", "dedicated"}, {"value", "gpu"}, {"effect", "NoSchedule"}},
              {{"key", "soft"}, {"effect", "PreferNoSchedule"}}}}}}};
}

const nlohmann::json kTolerates = {
    {"tolerations", {{{"key", "dedicated"}, {"operator", "Equal"}, {"value", "gpu"}}}}};

nlohmann::json Affinity(const nlohmann::json& terms) {
  return {
      {"affinity",
       {{"nodeAffinity",
         {{"requiredDuringSchedulingIgnoredDuringExecution", {{"nodeSelectorTerms", terms}}}}}}}};
}

nlohmann::json With(nlohmann::json a, const nlohmann::json& b) {
  a.update(b);
  return a;
}

// Issue 36 review, lesser finding "any pending borrower anywhere makes every node park": only a
// borrower that could be placed on this node counts, with what it asks per GPU.
TEST(PendingBorrowers, OnlyUnscheduledBorrowersThatCouldUseThisNode) {
  fakes::FakeApiServer api;
  auto client = fakes::NoRetryClient(api.url());
  ASSERT_TRUE(client.ok());
  api.Put("nodes", NodeN1());
  api.Put("pods", PendingPod("plain", kTolerates, 512, ""));
  api.Put("pods", PendingPod("running", kTolerates, 512, "true", "n1", "Running"));
  api.Put("pods", PendingPod("scheduled", kTolerates, 512, "true", "n1"));  // has its node
  api.Put("pods", PendingPod("not-a-borrower", kTolerates, 512, "false"));
  api.Put("pods", PendingPod("untolerated", {}, 512));
  api.Put("pods", PendingPod("other-zone", With(kTolerates, {{"nodeSelector", {{"zone", "b"}}}})));
  api.Put(
      "pods",
      PendingPod("other-effect",
                 {{"tolerations",
                   {{{"key", "dedicated"}, {"operator", "Exists"}, {"effect", "NoExecute"}}}}}));
  api.Put("pods",
          PendingPod(
              "not-in",
              With(kTolerates,
                   Affinity({{{"matchExpressions",
                               {{{"key", "zone"}, {"operator", "NotIn"}, {"values", {"a"}}}}}}}))));
  api.Put("pods", PendingPod("no-gpu", With(kTolerates, {{"containers", {{{"name", "main"}}}}})));
  auto r = PendingBorrowers(client->get(), "n1");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->empty()) << (*r)[0].name;

  api.Put("pods", PendingPod("fits", With(kTolerates, {{"nodeSelector", {{"zone", "a"}}}}), 768));
  api.Put("pods",
          PendingPod(
              "any-taint",
              With({{"tolerations", {{{"operator", "Exists"}}}}},
                   Affinity(
                       {{{"matchExpressions",
                          {{{"key", "zone"}, {"operator", "In"}, {"values", {"b"}}}}}},
                        {{"matchFields",
                          {{{"key", "metadata.name"}, {"operator", "In"}, {"values", {"n1"}}}}}}})),
              0));  // no gpumem: the whole card, 100 %
  r = PendingBorrowers(client->get(), "n1");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  std::map<std::string, std::pair<int64_t, int32_t>> got;
  for (const PendingBorrower& b : *r) got[b.name] = {b.mem_mib, b.mem_percent};
  EXPECT_EQ(got, (std::map<std::string, std::pair<int64_t, int32_t>>{
                     {"batch/fits", {768, 0}}, {"batch/any-taint", {0, 100}}}));

  // Another node (no such labels or taints here): "fits" asks zone a, n2 is zone b.
  api.Put("nodes", {{"apiVersion", "v1"},
                    {"kind", "Node"},
                    {"metadata", {{"name", "n2"}, {"labels", {{"zone", "b"}}}}}});
  r = PendingBorrowers(client->get(), "n2");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 5u);  // untolerated, other-zone, other-effect, not-in, any-taint; not fits
  for (const PendingBorrower& b : *r) EXPECT_NE(b.name, "batch/fits");
  // The node unreadable: an error (nothing parks).
  EXPECT_FALSE(PendingBorrowers(client->get(), "gone").ok());
}

TEST(BorrowerNodeMismatch, TheSchedulersNodeFiltersAndWhatItCannotTell) {
  const NodeView node = *ParseNodeView(NodeN1());
  ASSERT_EQ(node.taints.size(), 1u);  // PreferNoSchedule keeps nobody off
  auto why = [&](const nlohmann::json& spec) {
    return BorrowerNodeMismatch(PendingPod("p", spec), node);
  };
  auto expr = [](const std::string& key, const std::string& op, nlohmann::json values) {
    nlohmann::json e = {{"key", key}, {"operator", op}};
    if (!values.is_null()) e["values"] = values;
    return Affinity({{{"matchExpressions", {e}}}});
  };
  EXPECT_EQ(why(kTolerates), "");
  EXPECT_EQ(why({}), "the node's taint dedicated=gpu:NoSchedule is not tolerated");
  EXPECT_NE(why({{"tolerations", {{{"key", "dedicated"}, {"value", "cpu"}}}}}), "");
  EXPECT_EQ(why({{"tolerations", {{{"key", "dedicated"}, {"operator", "Exists"}}}}}), "");
  EXPECT_EQ(why({{"tolerations", {{{"operator", "Exists"}, {"effect", "NoSchedule"}}}}}), "");
  EXPECT_NE(why({{"tolerations", {{{"key", "other"}, {"operator", "Exists"}}}}}), "");
  // An operator k8s.io/api does not define here: counted as tolerating (may park).
  EXPECT_EQ(why({{"tolerations", {{{"key", "dedicated"}, {"operator", "Gt"}, {"value", "1"}}}}}),
            "");
  EXPECT_EQ(why(With(kTolerates, {{"nodeName", "n1"}})), "");
  EXPECT_EQ(why(With(kTolerates, {{"nodeName", "n9"}})), "spec.nodeName is n9");
  EXPECT_EQ(why(With(kTolerates, {{"nodeSelector", {{"zone", "a"}, {"gpu", "a100"}}}})), "");
  EXPECT_EQ(why(With(kTolerates, {{"nodeSelector", {{"zone", "a"}, {"gpu", "h100"}}}})),
            "spec.nodeSelector gpu=h100: the node's is a100");
  EXPECT_EQ(why(With(kTolerates, {{"nodeSelector", {{"rack", "1"}}}})),
            "spec.nodeSelector rack=1: the node has no such label");
  EXPECT_EQ(why(With(kTolerates, expr("zone", "In", {"a", "b"}))), "");
  EXPECT_NE(why(With(kTolerates, expr("zone", "In", {"b"}))), "");
  EXPECT_EQ(why(With(kTolerates, expr("zone", "NotIn", {"b"}))), "");
  EXPECT_EQ(why(With(kTolerates, expr("zone", "Exists", nullptr))), "");
  EXPECT_NE(why(With(kTolerates, expr("rack", "Exists", nullptr))), "");
  EXPECT_EQ(why(With(kTolerates, expr("rack", "DoesNotExist", nullptr))), "");
  EXPECT_NE(why(With(kTolerates, expr("zone", "DoesNotExist", nullptr))), "");
  EXPECT_NE(why(With(kTolerates, expr("gpu", "Gt", {"1"}))), "");  // "a100" is no integer
  // Unknown operator: cannot tell, may park.
  EXPECT_EQ(why(With(kTolerates, expr("zone", "Near", {"a"}))), "");
  // No term, or an empty term, matches nothing.
  EXPECT_NE(why(With(kTolerates, Affinity(nlohmann::json::array()))), "");
  EXPECT_NE(why(With(kTolerates, Affinity({nlohmann::json::object()}))), "");
  // matchFields on another field than metadata.name: cannot tell, may park.
  EXPECT_EQ(
      why(With(kTolerates,
               Affinity({{{"matchFields",
                           {{{"key", "spec.podCIDR"}, {"operator", "In"}, {"values", {"x"}}}}}}}))),
      "");
  // Malformed fields never match.
  EXPECT_NE(why(With(kTolerates, {{"nodeSelector", {{"zone", 1}}}})), "");
  EXPECT_FALSE(ParseNodeView({{"metadata", {{"labels", {{"a", "b"}}}}}}).ok());
  auto bad = ParseNodeView({{"metadata", {{"name", "n"}, {"labels", {{"a", 1}}}}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("label a is a number"), std::string::npos)
      << bad.status().message();
  // What a borrower needs on one GPU.
  EXPECT_EQ(BorrowerNeedBytes({"b", 512, 0}, 0), 512 * kMiB);
  EXPECT_EQ(BorrowerNeedBytes({"b", 0, 50}, 1000 * kMiB), 500 * kMiB);
  EXPECT_EQ(BorrowerNeedBytes({"b", 100, 50}, 1000 * kMiB), 500 * kMiB);
  EXPECT_EQ(BorrowerNeedBytes({"b", 0, 100}, 0), 0u);  // the card's size unknown: may park
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

// The verifications a park needs (ParkHost::grant, verify_process, start_time) for the tenant
// these tests run: its grant is GPU `uuid` with 512 MiB; every pid its region names is taken as
// the container's own (the real mapping is park_host_test's ParkHostVerify), with its start time
// from /proc.
void TrustTenant(ParkHost* host, const std::string& uuid = kUuid) {
  host->grant = [uuid](const std::string&) {
    return Result<SliceGrant>(SliceGrant{uuid, 512 * kMiB});
  };
  host->start_time = [](int pid) {
    return enforce::ProcReader().StartTime(static_cast<uint32_t>(pid));
  };
  host->verify_process = [](int pid, const ContainerDir&, const PodRef*, const std::string&, bool) {
    return enforce::ProcReader().StartTime(static_cast<uint32_t>(pid));
  };
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
    TrustTenant(&host);
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
  EXPECT_EQ(c.parked().at(dir_.name).lent_bytes, held);  // min(released, charged, the grant)
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
  TrustTenant(&host);
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

// ---- Lending the parked memory and evicting its borrowers on the wake (issue 36 items 2-3).

// A borrower pod on node n1 holding `mib` MiB of kUuid, created at `created`.
nlohmann::json BorrowerPod(const std::string& name, int mib, const std::string& created) {
  core::PodGrants grants = {{{kUuid, "NVIDIA", mib, 0}}};
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name},
            {"namespace", "batch"},
            {"uid", "uid-" + name},
            {"creationTimestamp", created},
            {"annotations",
             {{core::kAnnotationBorrower, "true"},
              {core::kAnnotationVgpuDevicesAllocated, core::EncodePodGrants(grants)}}}}},
          {"spec", {{"nodeName", "n1"}, {"containers", nlohmann::json::array()}}},
          {"status", {{"phase", "Running"}}}};
}

class Reclaim : public ParkingLoop {
 protected:
  void SetUp() override {
    ParkingLoop::SetUp();
    auto c = fakes::NoRetryClient(api_.url());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(*c);
  }
  // The notebook: 64 MiB, a pattern written to a buffer of it, a launch; idle until its stdin
  // closes, then it reads the pattern back ("peek <rc> <intact>").
  vgpu::testing::Child StartNotebook() {
    auto env = box_.Env();
    env["FAKE_GPU_DEVICES"] = kOneGpu;
    env["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = dir_.path + "/region.cache";
    env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "512m";
    env["GPU_CORE_UTILIZATION_POLICY"] = "disable";
    vgpu::testing::Child c = vgpu::testing::Spawn(
        box_, env, {"init", "alloc:67108864", "lookup:d", "poke", "launch:1", "wait", "peek"});
    EXPECT_EQ(vgpu::testing::Rc(vgpu::testing::ReadLine(c)), 0);  // init
    EXPECT_EQ(vgpu::testing::Rc(vgpu::testing::ReadLine(c)), 0);  // alloc
    EXPECT_EQ(vgpu::testing::Rc(vgpu::testing::ReadLine(c)), 0);  // lookup
    EXPECT_EQ(vgpu::testing::ReadLine(c), "poke 0");
    EXPECT_EQ(vgpu::testing::ReadLine(c), "launch 0");
    EXPECT_EQ(vgpu::testing::ReadLine(c), "ready");
    return c;
  }
  // A borrower's process (a container of its own) taking all but 16 MiB of what NVML shows
  // free, until its stdin closes; then it frees it and exits.
  vgpu::testing::Child StartBorrowerProcess() {
    auto env = box_.Env();
    env["FAKE_GPU_DEVICES"] = kOneGpu;
    env["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = box_.dir() + "/borrower.cache";
    env["GPU_CORE_UTILIZATION_POLICY"] = "disable";
    const uint64_t take = FakeFreeBytes() - 16 * kMiB;
    vgpu::testing::Child c =
        vgpu::testing::Spawn(box_, env, {"init", "alloc:" + std::to_string(take), "wait", "free"});
    EXPECT_EQ(vgpu::testing::Rc(vgpu::testing::ReadLine(c)), 0);  // init
    EXPECT_EQ(vgpu::testing::Rc(vgpu::testing::ReadLine(c)), 0);  // alloc
    EXPECT_EQ(vgpu::testing::ReadLine(c), "ready");
    return c;
  }
  // The controller of ParkingLoop with `o`, evicting through ReclaimFromBorrowers over the
  // fake API server, counting the driver's restores.
  ParkController Controller(ParkingOptions o) {
    ParkHost host;
    host.driver = FakeDriver();
    auto restore = host.driver.restore;
    host.driver.restore = [this, restore](int pid) {
      ++restores_;
      return restore(pid);
    };
    host.facts = [](const std::string&, const std::string&, const std::vector<int>&) {
      node::CheckpointFacts f;
      f.driver_version = "580.95.05";
      f.persistence_mode = true;
      f.host_limit_known = true;
      return f;
    };
    host.free_bytes = [](const std::string&) { return FakeFreeBytes(); };
    host.reclaim = [this](const std::string& uuid, uint64_t need, const std::string& owner) {
      return ReclaimFromBorrowers(*client_, "n1", uuid, need, owner);
    };
    TrustTenant(&host);
    return ParkController(std::move(o), std::move(host));
  }
  // Parks the notebook (idle 10 minutes, a borrower pending), fills the GPU with a borrower's
  // process, and has the notebook ask for its wake. Returns the poll time of the park.
  uint64_t ParkFillAndAsk(ParkController& c, vgpu::testing::Child& notebook) {
    const uint64_t launched = Region().devices.at(0).last_launch_ns;
    c.Poll(launched + 10 * kMin, {dir_}, pods_, true);
    EXPECT_EQ(c.parked().count(dir_.name), 1u);
    held_ = c.parked().count(dir_.name) ? c.parked().at(dir_.name).released_bytes : 0;
    EXPECT_GE(held_, 64 * kMiB);
    const uint64_t requests = Region().devices[0].wake_requests;
    close(notebook.in);
    notebook.in = -1;
    for (int i = 0; i < 1000 && Region().devices[0].wake_requests == requests; ++i)
      std::this_thread::sleep_for(10ms);
    EXPECT_GT(Region().devices[0].wake_requests, requests) << "the read asked no wake";
    return launched + 10 * kMin;
  }
  int Evictions(const std::string& pod) {
    return api_.CountRequests("POST", "/api/v1/namespaces/batch/pods/" + pod + "/eviction");
  }

  fakes::FakeApiServer api_;
  std::unique_ptr<k8s::Client> client_;
  std::atomic<int> restores_{0};
  uint64_t held_ = 0;
};

// The notebook's read wakes it while a borrower holds the GPU: the agent evicts the borrower
// (the Eviction API, an Event GPUMemoryReclaimed naming the notebook), does not restore while
// NVML lacks the memory, restores once the borrower's process is gone, and the notebook's bytes
// are those it wrote before the park.
TEST_F(Reclaim, AWakeWithoutRoomEvictsTheBorrowerAndRestoresOnceTheMemoryIsFree) {
  vgpu::testing::Child notebook = StartNotebook();
  api_.Put("pods", BorrowerPod("borrower", 900, "2026-12-05T08:00:00Z"));
  api_.Put("pods", BorrowerPod("elsewhere", 900, "2026-12-05T08:00:00Z"));
  api_.Patch("pods", "batch", "elsewhere", {{"spec", {{"nodeName", "n2"}}}});
  ParkController c = Controller(Options());
  const uint64_t t = ParkFillAndAsk(c, notebook);
  vgpu::testing::Child borrower = StartBorrowerProcess();
  ASSERT_LT(FakeFreeBytes(), held_);

  c.Poll(t + kMin, {dir_}, pods_, false);
  EXPECT_EQ(c.parked().count(dir_.name), 1u);
  EXPECT_EQ(Evictions("borrower"), 1);
  EXPECT_EQ(Evictions("elsewhere"), 0);  // another node's pod
  EXPECT_EQ(c.evictions(), 1u);
  auto events = api_.List("events");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["reason"], "GPUMemoryReclaimed");
  EXPECT_EQ(events[0]["involvedObject"]["name"], "borrower");
  // The owner is another tenant's pod: the borrower's Event names the GPU and node, not it.
  EXPECT_EQ(events[0]["message"].get<std::string>().find("nb-1"), std::string::npos);
  EXPECT_NE(events[0]["message"].get<std::string>().find(" on node "), std::string::npos);
  EXPECT_NE(c.last_outcome().at(dir_.name).find("evicted 1 borrower"), std::string::npos)
      << c.last_outcome().at(dir_.name);

  // The borrower's process still holds the memory: no restore, no second eviction.
  c.Poll(t + kMin + 1'000'000'000ull, {dir_}, pods_, false);
  EXPECT_EQ(c.parked().count(dir_.name), 1u);
  EXPECT_EQ(restores_, 0);
  EXPECT_EQ(api_.CountRequests("POST", "/api/v1/namespaces/batch/pods/"), 1);

  // The kubelet ends it: the next poll restores, and the notebook reads what it wrote.
  close(borrower.in);
  borrower.in = -1;
  vgpu::testing::Finish(borrower);
  ASSERT_GE(FakeFreeBytes(), held_);
  c.Poll(t + kMin + 2'000'000'000ull, {dir_}, pods_, false);
  EXPECT_TRUE(c.parked().empty()) << c.last_outcome().at(dir_.name);
  EXPECT_GE(restores_, 1);
  EXPECT_EQ(Region().devices[0].park_state, api::kParkRunning);
  std::vector<std::string> rest = vgpu::testing::Finish(notebook);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0], "peek 0 1");
  EXPECT_EQ(c.reclaim_timeouts(), 0u);
}

// An eviction that does not free the memory in time (here a process the borrower pods do not
// account for): no restore, the timeout said in the outcome and counted, and the next poll
// evicts again, the next borrower (newest first); the wake completes once the memory is free.
TEST_F(Reclaim, AnEvictionThatFreesNothingInTimeIsNotRestoredAndIsRetried) {
  vgpu::testing::Child notebook = StartNotebook();
  api_.Put("pods", BorrowerPod("newer", 100, "2026-12-05T08:00:00Z"));
  api_.Put("pods", BorrowerPod("older", 100, "2026-12-05T07:00:00Z"));
  ParkingOptions o = Options();
  o.reclaim_timeout = std::chrono::seconds(60);
  ParkController c = Controller(o);
  const uint64_t t = ParkFillAndAsk(c, notebook);
  vgpu::testing::Child holder = StartBorrowerProcess();

  c.Poll(t + kMin, {dir_}, pods_, false);
  EXPECT_EQ(Evictions("newer"), 1);
  EXPECT_EQ(Evictions("older"), 0);  // newer alone covers what is missing
  // The first wake request already took the GPU off the lent record (issue 36 finding 7).
  ASSERT_EQ(c.parked().count(dir_.name), 1u);
  EXPECT_TRUE(c.parked().at(dir_.name).wake_requested);
  EXPECT_TRUE(LentFromSlices(c.parked(), c.idle_lent(), 1).gpus.empty());
  c.Poll(t + kMin + 59'000'000'000ull, {dir_}, pods_, false);
  EXPECT_EQ(c.reclaim_timeouts(), 0u);
  EXPECT_EQ(Evictions("older"), 0);
  c.Poll(t + kMin + 60'000'000'000ull, {dir_}, pods_, false);
  EXPECT_EQ(c.parked().count(dir_.name), 1u);
  EXPECT_EQ(restores_, 0);
  EXPECT_EQ(c.reclaim_timeouts(), 1u);
  EXPECT_NE(c.last_outcome().at(dir_.name).find("still not free 60 s after evicting"),
            std::string::npos)
      << c.last_outcome().at(dir_.name);
  c.Poll(t + kMin + 61'000'000'000ull, {dir_}, pods_, false);
  EXPECT_EQ(Evictions("older"), 1);
  EXPECT_EQ(c.evictions(), 2u);
  EXPECT_EQ(restores_, 0);

  close(holder.in);
  holder.in = -1;
  vgpu::testing::Finish(holder);
  c.Poll(t + kMin + 62'000'000'000ull, {dir_}, pods_, false);
  EXPECT_TRUE(c.parked().empty()) << c.last_outcome().at(dir_.name);
  std::vector<std::string> rest = vgpu::testing::Finish(notebook);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0], "peek 0 1");
}

class StaticNodePods final : public PodLister {
 public:
  explicit StaticNodePods(std::vector<PodRef> pods) : pods_(std::move(pods)) {}
  Result<std::vector<PodRef>> ListNodePods(const std::string&) override { return pods_; }

 private:
  std::vector<PodRef> pods_;
};

// The loop publishes what its parks released on its node (fracgpu.io/lent-memory, the format
// of core/lent.h) at once after the park, writes it again every lend period while it lends,
// and removes it after the wake; an agent that parks nothing removes a record an earlier one
// left.
TEST_F(Reclaim, TheLoopPublishesTheParkedMemoryAndRemovesItAfterTheWake) {
  vgpu::testing::Child tenant = StartTenant("launch:1");
  const uint64_t launched = Region().devices.at(0).last_launch_ns;
  api_.Put(
      "nodes",
      {{"apiVersion", "v1"},
       {"kind", "Node"},
       {"metadata",
        {{"name", "n1"},
         {"annotations", {{core::kAnnotationLentMemory, "1;" + std::string(kUuid) + ":999"}}}}}});
  auto lent = [this]() -> std::string {
    auto n = api_.Get("nodes", "", "n1");
    if (!n) return "<no node>";
    const auto& a = (*n)["metadata"].value("annotations", nlohmann::json::object());
    return a.contains(core::kAnnotationLentMemory)
               ? a[core::kAnnotationLentMemory].get<std::string>()
               : "";
  };
  ParkController c = Controller(Options());
  StaticNodePods pods({pods_.at(kUid)});
  std::atomic<uint64_t> now{launched + 10 * kMin};
  std::atomic<int64_t> unix_now{1764921600};
  ParkingLoopSources sources;
  sources.containers_root = hook_ + "/vgpu/containers";
  sources.node_name = "n1";
  sources.pods = &pods;
  sources.borrower_pending = [] {
    return Result<std::vector<PendingBorrower>>(std::vector<PendingBorrower>{{"b/b", 1, 0}});
  };
  sources.now = [&now] { return now.load(); };
  sources.unix_now = [&unix_now] { return unix_now.load(); };
  sources.lend = [this](const std::string& v) { return PatchLentMemory(client_.get(), "n1", v); };
  sources.lend_period = 50ms;
  base::StopSignal stop;
  std::thread loop([&] { RunParkingLoop(&c, sources, 10ms, &stop, nullptr); });

  const std::string want = "1764921600;" + std::string(kUuid) + ":";
  ASSERT_TRUE(api_.WaitFor([&] { return lent().rfind(want, 0) == 0; })) << lent();
  now = launched;  // idle no longer: once woken it is not parked again
  auto record = core::ParseLentMemory(lent());
  ASSERT_TRUE(record.ok()) << lent();
  ASSERT_EQ(record->gpus.size(), 1u);
  EXPECT_GE(record->gpus[0].mib, 64);  // the 64 MiB allocation and the context's
  EXPECT_LE(record->gpus[0].mib, 1024);
  // Every lend period while it lends, with the time of writing.
  unix_now = 1764921630;
  ASSERT_TRUE(api_.WaitFor([&] { return lent().rfind("1764921630;", 0) == 0; })) << lent();

  close(tenant.in);  // its launch wakes it
  tenant.in = -1;
  ASSERT_TRUE(api_.WaitFor([&] { return lent().empty(); })) << lent();
  stop.Stop();
  loop.join();
  EXPECT_TRUE(c.parked().empty());
  EXPECT_EQ(lent(), "");
  std::vector<std::string> rest = vgpu::testing::Finish(tenant);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(vgpu::testing::Rc(rest[0]), 0) << rest[0];

  // A record an earlier agent left is removed by the next one, though it parks nothing.
  api_.Patch(
      "nodes", "", "n1",
      {{"metadata",
        {{"annotations", {{core::kAnnotationLentMemory, "1;" + std::string(kUuid) + ":9"}}}}}});
  ASSERT_NE(lent(), "");
  sources.borrower_pending = [] {
    return Result<std::vector<PendingBorrower>>(std::vector<PendingBorrower>{});
  };
  base::StopSignal once;
  once.Stop();
  RunParkingLoop(&c, sources, 10ms, &once, nullptr);
  EXPECT_EQ(lent(), "");
}

// LentFromParked: the lent MiB (not the released) summed per GPU, rounded down, in UUID order;
// nothing for a GPU under 1 MiB or a UUID the record's grammar refuses (the region is the tenant's
// to write).
TEST(LentFromParked, SumsTheReleasedMemoryPerGpu) {
  std::map<std::string, ParkedSlice> parked;
  auto slice = [](const char* dir, const char* uuid, int pid, uint64_t lent) {
    ParkedSlice s;
    s.dir = dir;
    s.uuid = uuid;
    s.pids = {pid};
    s.released_bytes = lent + 7 * kMiB;  // more than lent: what counts is lent_bytes
    s.lent_bytes = lent;
    return s;
  };
  parked["a_main"] = slice("a_main", "GPU-b", 1, 100 * kMiB + 5);
  parked["b_main"] = slice("b_main", "GPU-a", 2, 10 * kMiB);
  parked["c_main"] = slice("c_main", "GPU-b", 3, 28 * kMiB);
  parked["d_main"] = slice("d_main", "GPU-c", 4, kMiB - 1);
  parked["e_main"] = slice("e_main", "GPU-x;1:9", 5, 10 * kMiB);
  core::LentMemory l = LentFromParked(parked, 42);
  EXPECT_EQ(core::FormatLentMemory(l), "42;GPU-a:10,GPU-b:128");
  EXPECT_TRUE(LentFromParked({}, 42).gpus.empty());
  // A wake requested on GPU-b (issue 36 finding 7): GPU-b lends nothing at all, its idle
  // slices' fallback included, while the agent reclaims; GPU-a is unchanged.
  parked["c_main"].wake_requested = true;
  EXPECT_EQ(core::FormatLentMemory(LentFromParked(parked, 42)), "42;GPU-a:10");
  EXPECT_EQ(core::FormatLentMemory(LentFromSlices(parked, {{"GPU-b", 64 * kMiB}}, 42)),
            "42;GPU-a:10");
}

}  // namespace
}  // namespace fracgpu::monitor::testing

namespace fracgpu::monitor::testing {
namespace {

// The fallback's facts for hand-made regions (ParkController's FallbackTruth, scripted): each
// slice's grant by directory name (absent: unknown, as for a slice of two GPUs, which
// ReadSliceGrant refuses), and NVML listing GPUs `uuids` with no process on them (the live
// bytes are then the region's).
void GrantsAndIdleGpus(ParkHost* host, std::map<std::string, SliceGrant> grants,
                       std::vector<std::string> uuids) {
  host->grant = [grants](const std::string& dir) -> Result<SliceGrant> {
    auto it = grants.find(dir);
    if (it == grants.end()) return NotFound("no limits file for " + dir);
    return it->second;
  };
  host->verify_process = [](int, const ContainerDir&, const PodRef*, const std::string&,
                            bool) -> Result<uint64_t> {
    return PermissionDenied("not a process of the container");
  };
  host->gpu_processes = [uuids]() -> Result<std::vector<enforce::GpuSample>> {
    std::vector<enforce::GpuSample> out(uuids.size());
    for (size_t i = 0; i < uuids.size(); ++i) out[i].uuid = uuids[i];
    return out;
  };
}

// IdleLendBytes (issue 36 item 4): limit − used − margin, saturating; nothing for an unlimited
// slice, a slice that names no GPU, or a used total at or above the limit (the tenant's write).
TEST(IdleLendBytes, TheNeverAllocatedPartLessTheMargin) {
  const uint64_t m = 256 * kMiB;
  EXPECT_EQ(IdleLendBytes({"GPU-a", 1024 * kMiB, 100 * kMiB}, m), 668 * kMiB);
  EXPECT_EQ(IdleLendBytes({"GPU-a", 1024 * kMiB, 768 * kMiB}, m), 0u);      // exactly the margin
  EXPECT_EQ(IdleLendBytes({"GPU-a", 1024 * kMiB, 768 * kMiB - 1}, m), 1u);  // one byte over it
  EXPECT_EQ(IdleLendBytes({"GPU-a", 1024 * kMiB, 2048 * kMiB}, m), 0u);     // used > limit
  EXPECT_EQ(IdleLendBytes({"GPU-a", 0, 0}, m), 0u);                         // unlimited
  EXPECT_EQ(IdleLendBytes({"", 1024 * kMiB, 0}, m), 0u);                    // no GPU named
  EXPECT_EQ(IdleLendBytes({"GPU-a", UINT64_MAX, 0}, UINT64_MAX), 0u);
}

// The controller's poll lends, per GPU, the never-allocated part of the opted-in slices idle for
// idle_after that it has not parked (no borrower pending here, so nothing parks): not before the
// idle time, not for a pod that does not opt in, not for a slice of two GPUs (its grant names
// one), nothing from a region that does not validate; the record merges it with the parked
// slices' released memory.
TEST(IdleLending, OptedInIdleSlicesLendTheirNeverAllocatedPartPerGpu) {
  TempDir root;
  std::vector<ContainerDir> dirs;
  std::vector<vgpu::RegionHandle> handles;
  auto add = [&](const std::string& uid, const std::vector<DeviceSpec>& devices,
                 const std::vector<std::array<uint64_t, 3>>& used) {
    ContainerDir d;
    d.name = uid + "_main";
    d.pod_uid = uid;
    d.container = "main";
    d.path = root.path() + "/" + d.name;
    std::filesystem::create_directories(d.path);
    vgpu::RegionHandle h = MakeRegion(d.path + "/region.cache", devices);
    EXPECT_NE(h.region, nullptr);
    if (h.region && !used.empty()) SetSlot(h.region, 0, 10, 1000, used);
    handles.push_back(h);
    dirs.push_back(d);
  };
  add("a", {{"GPU-a", 1024 * kMiB, 0}}, {{0, 0, 100 * kMiB}});
  add("b", {{"GPU-a", 1024 * kMiB, 0}}, {{0, 0, 100 * kMiB}});  // pod b does not opt in
  add("c", {{"GPU-a", 512 * kMiB, 0}, {"GPU-b", 0, 0}}, {});    // two GPUs: no grant
  add("d", {{"GPU-b", 1024 * kMiB, 0}}, {{0, 0, 900 * kMiB}});  // less than the margin free
  add("e", {{"GPU-b", 1024 * kMiB, 0}}, {});
  for (vgpu::RegionHandle& h : handles) vgpu::RegionClose(&h);
  WriteBytes(dirs.back().path + "/region.cache", "not a region");  // e: fails closed
  std::map<std::string, PodRef> pods;
  for (const char* uid : {"a", "c", "d", "e"})
    pods[uid] = PodRef{uid, "notebooks", uid, {}, "", ""};
  pods["b"] = PodRef{"b", "team-a", "b", {}, "", ""};

  ParkHost host;
  const SliceGrant on_a{"GPU-a", 1024 * kMiB}, on_b{"GPU-b", 1024 * kMiB};
  GrantsAndIdleGpus(&host, {{"a_main", on_a}, {"b_main", on_a}, {"d_main", on_b}, {"e_main", on_b}},
                    {"GPU-a", "GPU-b"});
  ParkController controller(Options(), host);
  controller.Poll(1 * kMin, dirs, pods, false);  // first seen: idle 0
  EXPECT_TRUE(controller.idle_lent().empty());
  controller.Poll(11 * kMin - 1, dirs, pods, false);  // 1 ns short
  EXPECT_TRUE(controller.idle_lent().empty());
  controller.Poll(11 * kMin, dirs, pods, false);
  const std::map<std::string, uint64_t> want = {{"GPU-a", 668 * kMiB}};
  EXPECT_EQ(controller.idle_lent(), want);
  EXPECT_TRUE(controller.parked().empty());

  std::map<std::string, ParkedSlice> parked;
  parked["p_main"].uuid = "GPU-a";
  parked["p_main"].lent_bytes = 100 * kMiB;
  parked["q_main"].uuid = "GPU-c";
  parked["q_main"].lent_bytes = kMiB / 2;
  EXPECT_EQ(core::FormatLentMemory(LentFromSlices(parked, controller.idle_lent(), 7)),
            "7;GPU-a:768");
  // Half a MiB parked plus half a MiB idle on one GPU: summed before the rounding.
  EXPECT_EQ(core::FormatLentMemory(LentFromSlices(parked, {{"GPU-c", kMiB / 2}}, 7)),
            "7;GPU-a:100,GPU-c:1");

  pods["a"].park = "false";  // opting out stops the lending at the next poll
  controller.Poll(12 * kMin, dirs, pods, false);
  EXPECT_TRUE(controller.idle_lent().empty());
}

}  // namespace
}  // namespace fracgpu::monitor::testing

namespace fracgpu::monitor::testing {
namespace {

// The weaker fallback of the reclaim (issue 36 item 4, docs/reclaim.md "The fallback"): the
// owner of a lent never-allocated part allocates again; the next poll sees its live bytes grow
// and, where NVML lacks the rest of its slice, evicts the GPU's borrowers for the missing bytes
// (once per change); with the room there, or while its bytes do not grow, nothing is evicted.
TEST(IdleLending, AnOwnerThatAllocatesAgainEvictsTheBorrowersWhenTheGpuLacksItsSlice) {
  TempDir root;
  ContainerDir d;
  d.name = "a_main";
  d.pod_uid = "a";
  d.container = "main";
  d.path = root.path() + "/" + d.name;
  std::filesystem::create_directories(d.path);
  vgpu::RegionHandle h = MakeRegion(d.path + "/region.cache", {{"GPU-a", 1024 * kMiB, 0}});
  ASSERT_NE(h.region, nullptr);
  SetSlot(h.region, 0, 10, 1000, {{0, 0, 100 * kMiB}});
  std::map<std::string, PodRef> pods;
  pods["a"] = PodRef{"a", "notebooks", "nb", {}, "", ""};

  uint64_t free = 200 * kMiB;
  std::vector<std::tuple<std::string, uint64_t, std::string>> calls;
  ParkHost host;
  GrantsAndIdleGpus(&host, {{"a_main", {"GPU-a", 1024 * kMiB}}}, {"GPU-a"});
  host.free_bytes = [&](const std::string&) { return free; };
  host.reclaim = [&](const std::string& uuid, uint64_t need, const std::string& owner) {
    calls.emplace_back(uuid, need, owner);
    return Result<int>(2);
  };
  ParkController controller(Options(), std::move(host));
  controller.Poll(1 * kMin, {d}, pods, false);
  controller.Poll(11 * kMin, {d}, pods, false);
  EXPECT_EQ(controller.idle_lent().at("GPU-a"), 668 * kMiB);
  controller.Poll(12 * kMin, {d}, pods, false);  // lending, unchanged: nothing asked
  EXPECT_TRUE(calls.empty());

  h.region->slots[0].used[0].store(300 * kMiB);  // the owner allocates 200 MiB more
  controller.Poll(13 * kMin, {d}, pods, false);
  ASSERT_EQ(calls.size(), 1u);
  // The rest of its slice is 724 MiB; NVML shows 200 MiB: 524 MiB missing.
  EXPECT_EQ(calls[0],
            std::make_tuple(std::string("GPU-a"), 524 * kMiB, std::string("notebooks/nb")));
  EXPECT_EQ(controller.evictions(), 2u);
  EXPECT_EQ(controller.idle_lent().at("GPU-a"), 468 * kMiB);  // still idle: lends the rest
  controller.Poll(14 * kMin, {d}, pods, false);               // no growth since: no second eviction
  EXPECT_EQ(calls.size(), 1u);

  free = 2048 * kMiB;  // with the room there, a growth evicts nothing
  h.region->slots[0].used[0].store(400 * kMiB);
  controller.Poll(15 * kMin, {d}, pods, false);
  EXPECT_EQ(calls.size(), 1u);

  free = 0;  // the owner launches (no longer idle): it takes its whole slice back
  h.region->devices[0].last_launch_ns.store(15 * kMin);
  controller.Poll(15 * kMin + 1, {d}, pods, false);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(std::get<1>(calls[1]), 624 * kMiB);
  EXPECT_TRUE(controller.idle_lent().empty());
  controller.Poll(15 * kMin + 2, {d}, pods, false);  // not lending any more: nothing more
  EXPECT_EQ(calls.size(), 2u);
  vgpu::RegionClose(&h);
}

// ---- The attack review's findings 1, 3 and 4 (issue 36, docs/reclaim.md): the region is the
// tenant's to write, so the PIDs, the GPU and the amount lent it states are verified or bounded.
// A scripted driver and host: each test says what a forged region must not obtain.

class Forged : public ::testing::Test {
 protected:
  static constexpr const char* kGpuA = "GPU-aaaaaaaa-0000-0000-0000-000000000000";
  static constexpr const char* kGpuB = "GPU-bbbbbbbb-0000-0000-0000-000000000000";
  static constexpr int kOwn = 100;      // the container's own CUDA process (host pid)
  static constexpr int kVictim = 4242;  // another pod's CUDA process on this node

  void SetUp() override {
    d_.name = std::string(kUid) + "_main";
    d_.pod_uid = kUid;
    d_.container = "main";
    d_.path = dir_.path() + "/" + d_.name;
    std::filesystem::create_directories(d_.path);
    pods_[kUid] = PodRef{kUid, "notebooks", "nb", {}, "", "true"};
    host_.driver.get_state = [this](int pid, int* st) {
      calls_.push_back("state " + std::to_string(pid));
      *st = node::kProcessStateCheckpointed;
      return 0;
    };
    host_.driver.lock = [this](int pid, unsigned) { return Call("lock", pid); };
    host_.driver.checkpoint = [this](int pid) { return Call("checkpoint", pid); };
    host_.driver.restore = [this](int pid) { return Call("restore", pid); };
    host_.driver.unlock = [this](int pid) { return Call("unlock", pid); };
    host_.facts = [](const std::string&, const std::string&, const std::vector<int>&) {
      node::CheckpointFacts f;
      f.driver_version = "580.95.05";
      f.persistence_mode = true;
      f.host_limit_known = true;
      return f;
    };
    host_.free_bytes = [this](const std::string& uuid) {
      free_asked_.push_back(uuid);
      return free_;
    };
    host_.grant = [this](const std::string&) { return grant_; };
    host_.verify_process = [this](int pid, const ContainerDir& d, const PodRef* pod,
                                  const std::string& uuid, bool on_gpu) -> Result<uint64_t> {
      EXPECT_EQ(d.name, d_.name);
      EXPECT_NE(pod, nullptr);
      EXPECT_EQ(uuid, kGpuA);  // the grant's GPU, whatever the region names
      EXPECT_TRUE(on_gpu);
      if (pid != kOwn) return PermissionDenied("its cgroup is another pod's");
      return start_;
    };
    host_.start_time = [this](int pid) -> Result<uint64_t> {
      if (pid != kOwn || gone_) return NotFound("no such process");
      return start_now_;
    };
  }
  int Call(const char* what, int pid) {
    calls_.push_back(std::string(what) + " " + std::to_string(pid));
    return 0;
  }
  // NVML's free memory of the GPU answers the values of `seq` in turn, then the last for ever
  // (a later `seq_ = {...}` starts a new sequence).
  void FreeInTurn(std::vector<uint64_t> seq) {
    seq_ = std::move(seq);
    host_.free_bytes = [this](const std::string&) {
      const uint64_t v = seq_.front();
      if (seq_.size() > 1) seq_.erase(seq_.begin());
      return v;
    };
  }
  // The region: one device named `uuid`, one slot of host pid `pid` charging `charged` bytes,
  // idle since time 1.
  void Region(const std::string& uuid, int pid, uint64_t charged) {
    std::filesystem::remove(d_.path + "/region.cache");  // a new file, initialised anew
    h_ = MakeRegion(d_.path + "/region.cache", {{uuid, 512 * kMiB}});
    ASSERT_NE(h_.region, nullptr);
    SetSlot(h_.region, 0, 1, pid, {{0, 0, charged}});
    h_.region->slots[0].uses.store(api::kSlotUsesRecorded);
    h_.region->devices[0].last_launch_ns.store(1);
  }
  void TearDown() override {
    if (h_.region) vgpu::RegionClose(&h_);
  }
  uint64_t ParkState() {
    return ReadRegionFile(d_.path + "/region.cache")->devices.at(0).park_state;
  }
  int64_t LentMib(const ParkController& c) {
    int64_t mib = 0;
    for (const auto& g : LentFromParked(c.parked(), 1).gpus) mib += g.mib;
    return mib;
  }

  TempDir dir_;
  ContainerDir d_;
  std::map<std::string, PodRef> pods_;
  vgpu::RegionHandle h_{};
  ParkHost host_;
  std::vector<std::string> calls_, free_asked_;
  uint64_t free_ = 0;
  Result<SliceGrant> grant_ = SliceGrant{kGpuA, 512 * kMiB};
  uint64_t start_ = 777, start_now_ = 777;
  bool gone_ = false;
  std::vector<uint64_t> seq_;
};

// Finding 1: a region naming another pod's PID (or a PID the agent cannot verify) parks
// nothing: no Lock, park_state never written, the refusal counted and said.
TEST_F(Forged, APidNotOfTheContainerIsNeverLocked) {
  Region(kGpuA, kVictim, 64 * kMiB);
  free_ = 1024 * kMiB;
  ParkController c(Options(), host_);
  c.Poll(20 * kMin, {d_}, pods_, true);
  EXPECT_TRUE(c.parked().empty());
  EXPECT_TRUE(calls_.empty()) << calls_[0];
  EXPECT_EQ(ParkState(), api::kParkRunning);
  EXPECT_EQ(c.refusals(), 1u);
  EXPECT_NE(c.last_outcome().at(d_.name).find("pid 4242 is not verified: its cgroup is another"),
            std::string::npos)
      << c.last_outcome().at(d_.name);

  // Unverifiable (no verifier, no grant): fail closed alike.
  SetSlot(h_.region, 0, 1, kOwn, {{0, 0, 64 * kMiB}});
  ParkHost blind = host_;
  blind.verify_process = nullptr;
  ParkController c2(Options(), blind);
  c2.Poll(20 * kMin, {d_}, pods_, true);
  EXPECT_TRUE(c2.parked().empty());
  grant_ = Result<SliceGrant>(NotFound("no limits file"));
  ParkController c3(Options(), host_);
  c3.Poll(20 * kMin, {d_}, pods_, true);
  EXPECT_TRUE(c3.parked().empty());
  EXPECT_NE(c3.last_outcome().at(d_.name).find("its grant is unknown: no limits file"),
            std::string::npos)
      << c3.last_outcome().at(d_.name);
  EXPECT_TRUE(calls_.empty()) << calls_[0];
}

// Finding 3: the GPU is the grant's (a region naming another GPU parks nothing), and what a
// parked slice lends is min(released on that GPU, charged, the grant): not the whole GPU's rise
// of free memory, which another pod freeing memory meanwhile swells.
TEST_F(Forged, TheGpuAndTheAmountLentComeFromTheGrant) {
  Region(kGpuB, kOwn, 64 * kMiB);
  free_ = 1024 * kMiB;
  ParkController c(Options(), host_);
  c.Poll(20 * kMin, {d_}, pods_, true);
  EXPECT_TRUE(c.parked().empty());
  EXPECT_TRUE(calls_.empty()) << calls_[0];
  EXPECT_NE(c.last_outcome().at(d_.name).find("its grant " + std::string(kGpuA)), std::string::npos)
      << c.last_outcome().at(d_.name);
  vgpu::RegionClose(&h_);

  // The region names the granted GPU and charges 1 byte; NVML's free rises 8 GiB (another pod
  // freed memory meanwhile): 1 byte lent, no MiB.
  Region(kGpuA, kOwn, 1);
  FreeInTurn({1024 * kMiB, 9 * 1024 * kMiB});
  ParkController one(Options(), host_);
  one.Poll(20 * kMin, {d_}, pods_, true);
  ASSERT_EQ(one.parked().size(), 1u) << one.last_outcome().at(d_.name);
  EXPECT_EQ(one.parked().at(d_.name).uuid, kGpuA);
  EXPECT_EQ(one.parked().at(d_.name).released_bytes, 8 * 1024 * kMiB);
  EXPECT_EQ(one.parked().at(d_.name).lent_bytes, 1u);
  EXPECT_EQ(LentMib(one), 0);
  vgpu::RegionClose(&h_);

  // It charges 600 MiB of a 512 MiB grant: the grant bounds it.
  Region(kGpuA, kOwn, 600 * kMiB);
  seq_ = {1024 * kMiB, 9 * 1024 * kMiB};
  ParkController big(Options(), host_);
  big.Poll(20 * kMin, {d_}, pods_, true);
  ASSERT_EQ(big.parked().size(), 1u) << big.last_outcome().at(d_.name);
  EXPECT_EQ(big.parked().at(d_.name).lent_bytes, 512 * kMiB);
  EXPECT_EQ(LentMib(big), 512);
}

// Findings 1 and 4: a parked process whose PID was reused (another start time) is never
// restored nor unlocked; the slice is dropped and its GPU stops lending, at the next poll,
// whether or not a wake was asked.
TEST_F(Forged, APidReusedWhileParkedIsNeverRestoredAndTheSliceStopsLending) {
  Region(kGpuA, kOwn, 64 * kMiB);
  FreeInTurn({1024 * kMiB, 1088 * kMiB});
  ParkController c(Options(), host_);
  c.Poll(20 * kMin, {d_}, pods_, true);
  ASSERT_EQ(c.parked().size(), 1u) << c.last_outcome().at(d_.name);
  EXPECT_EQ(LentMib(c), 64);
  EXPECT_EQ(calls_, (std::vector<std::string>{"lock 100", "checkpoint 100"}));
  calls_.clear();

  start_now_ = 778;  // the kernel restarted and its PID came back to another process
  seq_ = {0};        // borrowers hold the GPU: a wake would have no room either
  c.Poll(21 * kMin, {d_}, pods_, false);
  EXPECT_TRUE(c.parked().empty()) << c.last_outcome().at(d_.name);
  EXPECT_EQ(LentMib(c), 0);
  for (const std::string& call : calls_)
    EXPECT_TRUE(call.rfind("restore", 0) != 0 && call.rfind("unlock", 0) != 0) << call;
  EXPECT_NE(c.last_outcome().at(d_.name).find("gone while parked"), std::string::npos)
      << c.last_outcome().at(d_.name);
  EXPECT_EQ(ParkState(), api::kParkRunning);
}

// Finding 4: a kernel restarted while parked (the process gone, a new one asking a wake) is
// dropped from the parked set: the slice no longer lends while the new kernel allocates it.
TEST_F(Forged, AKernelGoneWhileParkedStopsTheLending) {
  Region(kGpuA, kOwn, 64 * kMiB);
  FreeInTurn({1024 * kMiB, 1088 * kMiB});
  ParkController c(Options(), host_);
  c.Poll(20 * kMin, {d_}, pods_, true);
  ASSERT_EQ(c.parked().size(), 1u) << c.last_outcome().at(d_.name);
  gone_ = true;
  h_.region->slots[0].state.store(vgpu::kSlotFree);
  SetSlot(h_.region, 1, 2, 200, {{0, 0, 64 * kMiB}});
  h_.region->devices[0].wake_requests += 1;
  seq_ = {0};
  calls_.clear();
  for (int i = 0; i < 3; ++i) c.Poll((21ull + i) * kMin, {d_}, pods_, false);
  EXPECT_TRUE(c.parked().empty()) << c.last_outcome().at(d_.name);
  EXPECT_EQ(LentMib(c), 0);
  for (const std::string& call : calls_) EXPECT_EQ(call.rfind("restore", 0), std::string::npos);
}

// Issue 36 review, lesser finding "any pending borrower anywhere makes every node park": a
// slice parks only for a borrower whose request fits what parking could lend on its GPU: here
// the 64 MiB it charges (its grant 512 MiB), plus what slices already parked there lend.
using ParkTrigger = Forged;

TEST_F(ParkTrigger, ParksOnlyForABorrowerWhoseRequestFitsWhatParkingCouldLendOnTheGpu) {
  Region(kGpuA, kOwn, 64 * kMiB);
  FreeInTurn({1024 * kMiB, 1088 * kMiB});
  ParkController c(Options(), host_);
  c.Poll(20 * kMin, {d_}, pods_, std::vector<PendingBorrower>{});
  EXPECT_TRUE(c.parked().empty());
  c.Poll(20 * kMin, {d_}, pods_, std::vector<PendingBorrower>{{"batch/big", 65, 0}});
  EXPECT_TRUE(c.parked().empty());
  EXPECT_TRUE(calls_.empty()) << calls_[0];
  // By share of the card: 1 GiB total, 7 % is 71.7 MiB (too much), 6 % is 61.4 MiB.
  host_.total_bytes = [](const std::string& uuid) { return uuid == kGpuA ? 1024 * kMiB : 0; };
  ParkController shares(Options(), host_);
  shares.Poll(20 * kMin, {d_}, pods_, std::vector<PendingBorrower>{{"batch/seven", 0, 7}});
  EXPECT_TRUE(shares.parked().empty());
  EXPECT_TRUE(calls_.empty()) << calls_[0];
  shares.Poll(20 * kMin, {d_}, pods_,
              std::vector<PendingBorrower>{{"batch/big", 65, 0}, {"batch/six", 0, 6}});
  ASSERT_EQ(shares.parked().size(), 1u) << shares.last_outcome().at(d_.name);
  EXPECT_EQ(calls_, (std::vector<std::string>{"lock 100", "checkpoint 100"}));
  // The grant bounds what the region claims: 600 MiB charged of a 512 MiB grant could lend 512.
  vgpu::RegionClose(&h_);
  calls_.clear();
  Region(kGpuA, kOwn, 600 * kMiB);
  seq_ = {1024 * kMiB, 1624 * kMiB};
  ParkController bounded(Options(), host_);
  bounded.Poll(20 * kMin, {d_}, pods_, std::vector<PendingBorrower>{{"batch/b", 513, 0}});
  EXPECT_TRUE(bounded.parked().empty());
  EXPECT_TRUE(calls_.empty()) << calls_[0];
  bounded.Poll(20 * kMin, {d_}, pods_, std::vector<PendingBorrower>{{"batch/b", 512, 0}});
  EXPECT_EQ(bounded.parked().size(), 1u) << bounded.last_outcome().at(d_.name);
}

// Two slices on one GPU: a borrower that neither alone could take parks both (their sum), and
// a slice already parked there counts what it lends.
TEST_F(ParkTrigger, TheSlicesOfOneGpuAddUp) {
  Region(kGpuA, kOwn, 64 * kMiB);
  ContainerDir other = d_;
  other.name = std::string(kUid) + "_side";
  other.container = "side";
  other.path = dir_.path() + "/" + other.name;
  std::filesystem::create_directories(other.path);
  vgpu::RegionHandle h2 = MakeRegion(other.path + "/region.cache", {{kGpuA, 512 * kMiB}});
  ASSERT_NE(h2.region, nullptr);
  SetSlot(h2.region, 0, 1, kOwn, {{0, 0, 64 * kMiB}});
  h2.region->slots[0].uses.store(api::kSlotUsesRecorded);
  h2.region->devices[0].last_launch_ns.store(1);
  // The side container's own process is kOwn too.
  host_.verify_process = [this](int pid, const ContainerDir&, const PodRef*, const std::string&,
                                bool) -> Result<uint64_t> {
    if (pid != kOwn) return PermissionDenied("its cgroup is another pod's");
    return start_;
  };
  FreeInTurn({1024 * kMiB, 1088 * kMiB, 1088 * kMiB, 1152 * kMiB});
  ParkController c(Options(), host_);
  c.Poll(20 * kMin, {d_, other}, pods_, std::vector<PendingBorrower>{{"batch/b", 129, 0}});
  EXPECT_TRUE(c.parked().empty());
  c.Poll(20 * kMin, {d_, other}, pods_, std::vector<PendingBorrower>{{"batch/b", 128, 0}});
  EXPECT_EQ(c.parked().size(), 2u);
  vgpu::RegionClose(&h2);
}

// Issue 36 review, lesser finding "each reclaim round waits its full timeout": already not so
// before this test was written. After the eviction, every poll tries the wake, and the first
// that finds NVML showing the room restores: 0.2 s after the eviction here, with a 60 s
// reclaim_timeout, nothing counted as timed out and nobody evicted twice.
using WakeReclaim = Forged;

TEST_F(WakeReclaim, TheWakeRestoresAtTheFirstPollThatFindsTheRoomNotAfterTheTimeout) {
  Region(kGpuA, kOwn, 64 * kMiB);
  FreeInTurn({1024 * kMiB, 1088 * kMiB});
  std::vector<std::pair<std::string, uint64_t>> evicted;
  host_.reclaim = [&](const std::string& uuid, uint64_t need, const std::string&) {
    evicted.push_back({uuid, need});
    return Result<int>(1);
  };
  ParkingOptions o = Options();
  o.reclaim_timeout = std::chrono::seconds(60);
  ParkController c(o, host_);
  c.Poll(20 * kMin, {d_}, pods_, true);
  ASSERT_EQ(c.parked().size(), 1u) << c.last_outcome().at(d_.name);
  calls_.clear();
  h_.region->devices[0].wake_requests += 1;  // the owner's call
  seq_ = {0};                                // a borrower holds the GPU
  const uint64_t t0 = 21 * kMin;
  c.Poll(t0, {d_}, pods_, false);
  EXPECT_EQ(evicted, (std::vector<std::pair<std::string, uint64_t>>{{kGpuA, 64 * kMiB}}));
  EXPECT_TRUE(calls_.empty()) << calls_[0];  // no Restore without the room
  seq_ = {64 * kMiB};                        // the evicted borrower's memory is free
  c.Poll(t0 + 200'000'000ull, {d_}, pods_, false);
  EXPECT_TRUE(c.parked().empty()) << c.last_outcome().at(d_.name);
  EXPECT_EQ(calls_, (std::vector<std::string>{"state 100", "restore 100", "unlock 100"}));
  EXPECT_EQ(c.reclaim_timeouts(), 0u);
  EXPECT_EQ(evicted.size(), 1u);
  EXPECT_EQ(ParkState(), api::kParkRunning);
}

}  // namespace
}  // namespace fracgpu::monitor::testing

namespace fracgpu::monitor::testing {
namespace {

// libvgpu.so's half of the fallback reclaim (issue 36 item 4, docs/reclaim.md "The fallback"): a
// one-GPU slice whose grant the agent verified and that lends its never-allocated part gets
// Region::reclaim_lending bit 0; an allocation its driver refuses raises RegionSlot::reclaim_*
// and the next poll evicts the GPU's borrowers for what it asked, bounded by the grant and by what
// the slice lent, once per change. A scripted host: NVML's free memory, the grant, the evictions.
class ReclaimRequests : public ::testing::Test {
 protected:
  void SetUp() override {
    d_.name = "a_main";
    d_.pod_uid = "a";
    d_.container = "main";
    d_.path = root_.path() + "/" + d_.name;
    std::filesystem::create_directories(d_.path);
    pods_["a"] = PodRef{"a", "notebooks", "nb", {}, "", ""};
    host_.free_bytes = [this](const std::string&) { return free_; };
    host_.reclaim = [this](const std::string& uuid, uint64_t need, const std::string& owner) {
      calls_.emplace_back(uuid, need, owner);
      return Result<int>(1);
    };
    GrantsAndIdleGpus(&host_, {}, {"GPU-a", "GPU-b"});  // NVML: no process listed
    host_.grant = [this](const std::string& dir) -> Result<SliceGrant> {
      if (dir != d_.name) return NotFound("no grant for " + dir);
      return grant_;
    };
  }
  void TearDown() override { vgpu::RegionClose(&h_); }

  // The slice's region: one device `uuid` limited to `limit`, one process holding `used`.
  void Region(const std::string& uuid, uint64_t limit, uint64_t used) {
    vgpu::RegionClose(&h_);
    std::filesystem::remove(d_.path + "/region.cache");
    h_ = MakeRegion(d_.path + "/region.cache", {{uuid, limit, 0}});
    ASSERT_NE(h_.region, nullptr);
    SetSlot(h_.region, 0, 10, 1000, {{0, 0, used}});
  }
  // The owner's process: its live bytes become `used` and it asks for `asked` more (libvgpu.so
  // charged the allocation, the driver refused it).
  void Ask(uint64_t used, uint64_t asked) {
    h_.region->slots[0].used[0].store(used);
    api::RaiseReclaimRequest(h_.region->slots[0], asked);
  }
  uint32_t Mark() const { return std::atomic_ref<uint32_t>(h_.region->reclaim_lending).load(); }
  // Polls at 1 and 11 minutes: the slice is first seen, then idle for 10 minutes, and lends.
  void StartLending(ParkController& c) {
    c.Poll(1 * kMin, {d_}, pods_, false);
    c.Poll(11 * kMin, {d_}, pods_, false);
  }
  std::string Need(size_t i) const {
    return std::get<0>(calls_[i]) + " " + std::to_string(std::get<1>(calls_[i]) / kMiB) + " MiB";
  }

  TempDir root_;
  ContainerDir d_;
  std::map<std::string, PodRef> pods_;
  vgpu::RegionHandle h_;
  ParkHost host_;
  SliceGrant grant_{"GPU-a", 1024 * kMiB};
  uint64_t free_ = 50 * kMiB;
  std::vector<std::tuple<std::string, uint64_t, std::string>> calls_;
};

TEST_F(ReclaimRequests, TheOwnersRequestEvictsForWhatItLacksOncePerChange) {
  Region("GPU-a", 1024 * kMiB, 100 * kMiB);
  ParkController c(Options(), host_);
  c.Poll(1 * kMin, {d_}, pods_, false);
  EXPECT_EQ(Mark(), 0u) << "marked before it lends";
  c.Poll(11 * kMin, {d_}, pods_, false);
  EXPECT_EQ(c.idle_lent().at("GPU-a"), 668 * kMiB);
  EXPECT_EQ(Mark(), 1u) << "lending, its requests are answered: device 0 marked";
  c.Poll(12 * kMin, {d_}, pods_, false);  // no request: nothing evicted
  EXPECT_TRUE(calls_.empty());

  // The owner allocates 200 MiB (charged: 300 MiB live) and the driver refuses it: asked
  // min(200, lent 668, grant 1024 − the 100 it holds) = 200 MiB; NVML shows 50 MiB: 150 missing.
  Ask(300 * kMiB, 200 * kMiB);
  c.Poll(13 * kMin, {d_}, pods_, false);
  ASSERT_EQ(calls_.size(), 1u);
  EXPECT_EQ(calls_[0],
            std::make_tuple(std::string("GPU-a"), 150 * kMiB, std::string("notebooks/nb")));
  EXPECT_EQ(c.reclaim_requests(), 1u);
  EXPECT_EQ(c.evictions(), 1u);
  // The slice's part leaves the record at the same poll (no borrower is placed on it meanwhile).
  EXPECT_TRUE(c.idle_lent().empty());
  c.Poll(13 * kMin + 200'000'000, {d_}, pods_, false);  // the same count: nothing more
  EXPECT_EQ(calls_.size(), 1u);

  // Another allocation of 100 MiB while the evicted borrower still terminates: its 200 MiB
  // covered it, nobody more is evicted.
  Ask(400 * kMiB, 100 * kMiB);
  c.Poll(13 * kMin + 400'000'000, {d_}, pods_, false);
  EXPECT_EQ(calls_.size(), 1u);
  EXPECT_EQ(c.reclaim_requests(), 2u);

  // After the eviction's timeout (60 s) a request is answered again: 150 MiB asked, the slice
  // holds 400 of them; NVML shows 50: 100 MiB missing.
  Ask(550 * kMiB, 150 * kMiB);
  c.Poll(15 * kMin, {d_}, pods_, false);
  ASSERT_EQ(calls_.size(), 2u);
  EXPECT_EQ(Need(1), "GPU-a 100 MiB");
  EXPECT_EQ(c.reclaim_requests(), 3u);

  // A count that grows with no bytes asked, or goes back, asks nothing.
  std::atomic_ref<uint64_t>(h_.region->slots[0].reclaim_requests).fetch_add(5);
  c.Poll(17 * kMin, {d_}, pods_, false);
  std::atomic_ref<uint64_t>(h_.region->slots[0].reclaim_requests).store(1);
  std::atomic_ref<uint64_t>(h_.region->slots[0].reclaim_bytes).store(1);
  c.Poll(18 * kMin, {d_}, pods_, false);
  EXPECT_EQ(calls_.size(), 2u);
  EXPECT_EQ(c.reclaim_requests(), 3u);
}

// The region is the tenant's: a forged request (any count, any bytes, its live bytes zeroed,
// its limit raised) evicts for no more than the grant and what the slice lent; a region naming
// another GPU than its grant gets no mark and evicts nothing; without a grant nothing is marked.
TEST_F(ReclaimRequests, AForgedRequestEvictsNoMoreThanTheGrantAllows) {
  grant_ = {"GPU-a", 512 * kMiB};
  Region("GPU-a", 4096 * kMiB, 100 * kMiB);  // the region claims 4 GiB of a 512 MiB grant
  free_ = 0;
  ParkController c(Options(), host_);
  StartLending(c);
  EXPECT_EQ(Mark(), 1u);
  h_.region->slots[0].used[0].store(0);
  std::atomic_ref<uint64_t>(h_.region->slots[0].reclaim_bytes).store(UINT64_MAX);
  std::atomic_ref<uint64_t>(h_.region->slots[0].reclaim_requests).store(UINT64_MAX);
  c.Poll(12 * kMin, {d_}, pods_, false);
  ASSERT_EQ(calls_.size(), 1u);
  // What it lent, the grant less its live bytes (now 0) and the margin: 512 − 256 = 256 MiB, not
  // 4 GiB nor 2^64 bytes.
  EXPECT_EQ(Need(0), "GPU-a 256 MiB");

  // A region claiming a 1 GiB limit of a 512 MiB grant: a slice holding 400 MiB of it asks
  // 300 MiB: at most 112 MiB come back.
  vgpu::RegionClose(&h_);
  calls_.clear();
  Region("GPU-a", 1024 * kMiB, 100 * kMiB);
  ParkController small(Options(), host_);
  StartLending(small);
  Ask(700 * kMiB, 300 * kMiB);
  small.Poll(12 * kMin, {d_}, pods_, false);
  ASSERT_EQ(calls_.size(), 1u);
  EXPECT_EQ(Need(0), "GPU-a 112 MiB");

  // The region names GPU-b, its grant GPU-a: no mark, and a request evicts nobody on either.
  calls_.clear();
  Region("GPU-b", 1024 * kMiB, 100 * kMiB);
  ParkController other(Options(), host_);
  StartLending(other);
  EXPECT_EQ(Mark(), 0u);
  Ask(300 * kMiB, 200 * kMiB);
  other.Poll(12 * kMin, {d_}, pods_, false);
  EXPECT_EQ(other.reclaim_requests(), 0u);

  // No grant known: the mark is never set, and one the tenant set itself is cleared.
  calls_.clear();
  host_.grant = nullptr;
  Region("GPU-a", 1024 * kMiB, 100 * kMiB);
  ParkController blind(Options(), host_);
  StartLending(blind);
  EXPECT_EQ(Mark(), 0u);
  std::atomic_ref<uint32_t>(h_.region->reclaim_lending).store(0xffffffffu);
  blind.Poll(12 * kMin, {d_}, pods_, false);
  EXPECT_EQ(Mark(), 0u);
  EXPECT_TRUE(calls_.empty());
}

// The mark follows the lending: requests made before it are not answered; after the owner is
// active again it stays for reclaim_request_window (borrowers placed on the part may still hold
// it), then goes, and later requests evict nothing. An owner that grows without asking (an older
// libvgpu.so) is still reclaimed for after the fact, bounded by its grant.
TEST_F(ReclaimRequests, TheMarkFollowsTheLendingAndItsWindow) {
  Region("GPU-a", 1024 * kMiB, 100 * kMiB);
  Ask(100 * kMiB, 64 * kMiB);  // asked before anything was lent: not for this agent to answer
  ParkController c(Options(), host_);
  StartLending(c);
  EXPECT_EQ(Mark(), 1u);
  c.Poll(12 * kMin, {d_}, pods_, false);
  EXPECT_TRUE(calls_.empty());
  EXPECT_EQ(c.reclaim_requests(), 0u);

  // The owner launches: no longer idle, it lends nothing; the after-the-fact path evicts for the
  // rest of its slice (924 MiB; NVML shows 50) once, and the mark stays.
  h_.region->devices[0].last_launch_ns.store(12 * kMin);
  c.Poll(12 * kMin + 1, {d_}, pods_, false);
  ASSERT_EQ(calls_.size(), 1u);
  EXPECT_EQ(Need(0), "GPU-a 874 MiB");
  EXPECT_EQ(Mark(), 1u);
  // Within the window (5 minutes), after the eviction's timeout: a request is answered.
  Ask(300 * kMiB, 200 * kMiB);
  c.Poll(14 * kMin, {d_}, pods_, false);
  ASSERT_EQ(calls_.size(), 2u);
  EXPECT_EQ(Need(1), "GPU-a 150 MiB");
  EXPECT_EQ(Mark(), 1u);
  // Past the window the mark goes, and a request evicts nobody.
  c.Poll(17 * kMin + 2, {d_}, pods_, false);
  EXPECT_EQ(Mark(), 0u);
  Ask(400 * kMiB, 100 * kMiB);
  c.Poll(18 * kMin, {d_}, pods_, false);
  EXPECT_EQ(calls_.size(), 2u);
  EXPECT_EQ(c.reclaim_requests(), 1u);
}

}  // namespace
}  // namespace fracgpu::monitor::testing

namespace fracgpu::monitor::testing {
namespace {

// ---- The fallback trusts the grant and the driver, not the region (issue 36, the attack
// finding on the fallback, docs/reclaim.md "The fallback"): the region is the tenant's to write,
// so a slice lends on its grant's GPU at most grant − live − margin, where live is the larger of
// the region's live bytes and what NVML shows the container's own processes holding there. A
// scripted host: the grant, NVML's process lists, the cgroup verification, the evictions.

// NVML's process lists, scripted (enforce::ProcessSource).
class ScriptedNvml final : public enforce::ProcessSource {
 public:
  Result<std::vector<enforce::GpuSample>> Sample(std::vector<std::string>*) override {
    return gpus;
  }
  std::vector<enforce::GpuSample> gpus;
};

class FallbackTruth : public ::testing::Test {
 protected:
  static constexpr const char* kGpuA = "GPU-aaaaaaaa-0000-0000-0000-000000000000";
  static constexpr const char* kGpuB = "GPU-bbbbbbbb-0000-0000-0000-000000000000";
  static constexpr uint32_t kOwn = 100;      // the container's own CUDA process (host pid)
  static constexpr uint32_t kSidecar = 200;  // another container of the same pod
  static constexpr uint32_t kOther = 300;    // another pod's process

  void SetUp() override {
    d_.name = std::string(kUid) + "_main";
    d_.pod_uid = kUid;
    d_.container = "main";
    d_.path = dir_.path() + "/" + d_.name;
    std::filesystem::create_directories(d_.path);
    pods_[kUid] = PodRef{kUid, "notebooks", "nb", {}, "", "true"};
    host_.free_bytes = [this](const std::string&) { return free_; };
    host_.reclaim = [this](const std::string& uuid, uint64_t need, const std::string&) {
      evicted_.push_back(uuid + " " + std::to_string(need / kMiB) + " MiB");
      return Result<int>(1);
    };
    host_.grant = [this](const std::string& dir) -> Result<SliceGrant> {
      EXPECT_EQ(dir, d_.name);
      return grant_;
    };
    host_.verify_process = [this](int pid, const ContainerDir& d, const PodRef* pod,
                                  const std::string& uuid, bool) -> Result<uint64_t> {
      EXPECT_EQ(d.name, d_.name);
      EXPECT_NE(pod, nullptr);
      EXPECT_EQ(uuid, kGpuA);  // the grant's GPU, whatever the region names
      if (pid == static_cast<int>(kOwn)) return uint64_t{777};
      if (pid == static_cast<int>(kSidecar))
        return PermissionDenied("its cgroup is container sidecar's, not main's");
      if (pid == static_cast<int>(kOther)) return PermissionDenied("its cgroup is pod other's");
      return verify_other_;
    };
    host_.gpu_processes = [this]() -> Result<std::vector<enforce::GpuSample>> {
      if (!nvml_ok_) return Unavailable("nvmlDeviceGetCount_v2 failed: NVML error 999 (Unknown)");
      return gpus_;
    };
    gpus_.resize(2);
    gpus_[0].uuid = kGpuA;
    gpus_[1].uuid = kGpuB;
  }
  void TearDown() override {
    if (h_.region) vgpu::RegionClose(&h_);
  }
  // The region: devices `uuids` limited to `limit` each, one slot of host pid kOwn holding
  // `live` bytes on device 0; idle since time 1.
  void Region(const std::vector<std::string>& uuids, uint64_t limit, uint64_t live) {
    if (h_.region) vgpu::RegionClose(&h_);
    std::filesystem::remove(d_.path + "/region.cache");
    std::vector<DeviceSpec> devices;
    for (const std::string& u : uuids) devices.push_back({u, limit, 0});
    h_ = MakeRegion(d_.path + "/region.cache", devices);
    ASSERT_NE(h_.region, nullptr);
    SetSlot(h_.region, 0, 1, static_cast<int32_t>(kOwn), {{0, 0, live}});
    h_.region->devices[0].last_launch_ns.store(1);
  }
  // GPU A's process list as NVML gives it.
  void OnGpuA(std::vector<enforce::DriverProcess> processes) { gpus_[0].processes = processes; }
  // The controller's lending after a poll at 20 minutes (idle for 20 minutes, no borrower
  // pending, so nothing parks), MiB by GPU.
  std::map<std::string, uint64_t> LentMib(ParkController& c, uint64_t at = 20 * kMin) {
    c.Poll(at, {d_}, pods_, false);
    std::map<std::string, uint64_t> out;
    for (const auto& [uuid, bytes] : c.idle_lent()) out[uuid] = bytes / kMiB;
    return out;
  }
  static std::map<std::string, uint64_t> OnA(uint64_t mib) { return {{kGpuA, mib}}; }
  uint32_t Mark() const { return std::atomic_ref<uint32_t>(h_.region->reclaim_lending).load(); }

  TempDir dir_;
  ContainerDir d_;
  std::map<std::string, PodRef> pods_;
  vgpu::RegionHandle h_{};
  ParkHost host_;
  Result<SliceGrant> grant_ = SliceGrant{kGpuA, 1024 * kMiB};
  std::vector<enforce::GpuSample> gpus_;
  bool nvml_ok_ = true;
  Result<uint64_t> verify_other_ = NotFound("no such process");
  uint64_t free_ = 0;
  std::vector<std::string> evicted_;
};

// A region claiming a bigger (or a smaller) limit than its 1 GiB grant lends the grant less its
// live bytes and the 256 MiB margin: 1024 − 100 − 256 = 668 MiB, on the grant's GPU.
TEST_F(FallbackTruth, ARegionClaimingABiggerLimitLendsAtMostTheGrantLessLiveAndMargin) {
  Region({kGpuA}, 8192 * kMiB, 100 * kMiB);
  OnGpuA({{kOwn, 100 * kMiB}});
  ParkController c(Options(), host_);
  EXPECT_EQ(LentMib(c), OnA(668));
  EXPECT_EQ(Mark(), 1u);  // lending: its requests are answered
  Region({kGpuA}, 512 * kMiB, 100 * kMiB);
  ParkController small(Options(), host_);
  EXPECT_EQ(LentMib(small), OnA(668));
}

// A region naming another GPU than its grant's lends nothing, on either GPU, and is not marked;
// nor does a region of two GPUs, or a slice whose grant cannot be read.
TEST_F(FallbackTruth, ARegionNamingAnotherGpuLendsNothing) {
  Region({kGpuB}, 1024 * kMiB, 100 * kMiB);
  gpus_[1].processes = {{kOwn, 100 * kMiB}};
  ParkController c(Options(), host_);
  EXPECT_EQ(LentMib(c), (std::map<std::string, uint64_t>{}));
  EXPECT_EQ(Mark(), 0u);

  Region({kGpuA, kGpuB}, 1024 * kMiB, 100 * kMiB);
  OnGpuA({{kOwn, 100 * kMiB}});
  ParkController two(Options(), host_);
  EXPECT_EQ(LentMib(two), (std::map<std::string, uint64_t>{}));

  Region({kGpuA}, 1024 * kMiB, 100 * kMiB);
  ParkController granted(Options(), host_);
  EXPECT_EQ(LentMib(granted), OnA(668));  // the same slice with a consistent region lends
  grant_ = Result<SliceGrant>(NotFound("no limits file"));
  ParkController ungranted(Options(), host_);
  EXPECT_EQ(LentMib(ungranted), (std::map<std::string, uint64_t>{}));
  ParkHost blind = host_;
  blind.grant = nullptr;
  grant_ = SliceGrant{kGpuA, 1024 * kMiB};
  ParkController no_reader(Options(), blind);
  EXPECT_EQ(LentMib(no_reader), (std::map<std::string, uint64_t>{}));
}

// The region claims 0 live bytes while NVML shows the container's process holding 600 MiB: the
// slice lends 1024 − 600 − 256 = 168 MiB. A region claiming more than NVML shows counts its own
// figure (the larger one): 1024 − 700 − 256 = 68 MiB.
TEST_F(FallbackTruth, ARegionClaimingNoLiveBytesLendsTheGrantLessWhatNvmlShows) {
  Region({kGpuA}, 1024 * kMiB, 0);
  OnGpuA({{kOwn, 600 * kMiB}});
  ParkController c(Options(), host_);
  EXPECT_EQ(LentMib(c), OnA(168));
  h_.region->slots[0].used[0].store(700 * kMiB);
  EXPECT_EQ(LentMib(c, 21 * kMin), OnA(68));
  OnGpuA({{kOwn, 1024 * kMiB}});  // NVML shows the whole grant held: nothing
  EXPECT_EQ(LentMib(c, 22 * kMin), (std::map<std::string, uint64_t>{}));
}

// NVML unreadable (the call fails, the GPU's process list fails, the GPU is not listed, no
// reader), or a process on the GPU that cannot be told the container's or not: nothing lent.
TEST_F(FallbackTruth, NvmlUnreadableLendsNothing) {
  Region({kGpuA}, 1024 * kMiB, 100 * kMiB);
  OnGpuA({{kOwn, 100 * kMiB}});
  const std::map<std::string, uint64_t> none;
  nvml_ok_ = false;
  ParkController failing(Options(), host_);
  EXPECT_EQ(LentMib(failing), none);
  nvml_ok_ = true;
  EXPECT_EQ(LentMib(failing, 21 * kMin), OnA(668));  // NVML answers again: it lends again

  gpus_[0].processes_ok = false;
  gpus_[0].processes.clear();
  ParkController unlisted(Options(), host_);
  EXPECT_EQ(LentMib(unlisted), none);
  gpus_[0].processes_ok = true;

  gpus_[0].uuid = "GPU-cccccccc-0000-0000-0000-000000000000";  // A is not among NVML's GPUs
  ParkController absent(Options(), host_);
  EXPECT_EQ(LentMib(absent), none);
  gpus_[0].uuid = kGpuA;

  ParkHost blind = host_;
  blind.gpu_processes = nullptr;
  ParkController no_reader(Options(), blind);
  EXPECT_EQ(LentMib(no_reader), none);

  // A process on A whose container the API server does not name yet: unknown, not "not its".
  OnGpuA({{kOwn, 100 * kMiB}, {555, 64 * kMiB}});
  verify_other_ = Unavailable("the API server does not name its container yet");
  ParkController unknown(Options(), host_);
  EXPECT_EQ(LentMib(unknown), none);
  verify_other_ = NotFound("pid 555 exited");  // gone between NVML and /proc: not counted
  ParkController gone(Options(), host_);
  EXPECT_EQ(LentMib(gone), OnA(668));
}

// Another container's processes on the GPU (a sidecar of the same pod, another pod) are not the
// container's: with the region claiming 0 live and the container's own process holding 300 MiB,
// the slice lends 1024 − 300 − 256 = 468 MiB: the others' 600 MiB neither reduce it nor are
// ignored in favour of the region's 0. The container's process on another GPU does not count.
TEST_F(FallbackTruth, AnotherContainersProcessIsNotCountedAsThisContainers) {
  Region({kGpuA}, 1024 * kMiB, 0);
  OnGpuA({{kOther, 400 * kMiB}, {kOwn, 300 * kMiB}, {kSidecar, 200 * kMiB}});
  gpus_[1].processes = {{kOwn, 900 * kMiB}};
  ParkController c(Options(), host_);
  EXPECT_EQ(LentMib(c), OnA(468));
  // The container's process gone from A: only the region's 100 MiB, not the others' 600.
  h_.region->slots[0].used[0].store(100 * kMiB);
  OnGpuA({{kOther, 400 * kMiB}, {kSidecar, 200 * kMiB}});
  EXPECT_EQ(LentMib(c, 21 * kMin), OnA(668));
}

// The after-the-fact eviction is bounded alike: the owner (its region forged to a 8 GiB limit
// and 0 live bytes) grows by NVML's account while idle, and its borrowers are evicted for the
// grant less what NVML shows it holding (1024 − 700 = 324 MiB, NVML shows nothing free), not
// for the region's 8 GiB nor the whole grant; after it launches, 1024 − 800 = 224 MiB.
TEST_F(FallbackTruth, TheAfterTheFactEvictionIsBoundedByTheGrantAndTheDriversLiveBytes) {
  Region({kGpuA}, 8192 * kMiB, 0);
  OnGpuA({{kOwn, 600 * kMiB}});
  ParkController c(Options(), host_);
  EXPECT_EQ(LentMib(c), OnA(168));
  EXPECT_TRUE(evicted_.empty());
  OnGpuA({{kOwn, 700 * kMiB}});  // it allocated 100 MiB the region does not show
  EXPECT_EQ(LentMib(c, 21 * kMin), OnA(68));
  EXPECT_EQ(evicted_, (std::vector<std::string>{std::string(kGpuA) + " 324 MiB"}));
  OnGpuA({{kOwn, 800 * kMiB}});
  h_.region->devices[0].last_launch_ns.store(23 * kMin);  // active again: lends nothing
  EXPECT_EQ(LentMib(c, 23 * kMin + 1), (std::map<std::string, uint64_t>{}));
  EXPECT_EQ(evicted_, (std::vector<std::string>{std::string(kGpuA) + " 324 MiB",
                                                std::string(kGpuA) + " 224 MiB"}));
}

// MakeParkHost's real adapters under the controller: the grant from the limits file the device
// plugin wrote, NVML's process list (scripted), the cgroup of each listed process under a fake
// /proc. The sidecar's and another pod's memory on the GPU are not the container's; the
// container's own 300 MiB, which its region hides, are.
TEST(FallbackTruthAdapters, TheContainersOwnProcessesOnItsGrantedGpuAndNoOthers) {
  constexpr const char* kGpu = "GPU-dddddddd-0000-0000-0000-000000000000";
  TempDir root;
  const std::string proc = root.path() + "/proc";
  const std::string limits = root.path() + "/limits";
  const std::string uid = "7d1c0c6e-0000-4000-8000-0000000000d1";
  const std::string other = "7d1c0c6e-0000-4000-8000-0000000000d2";
  const std::string cid(64, 'a'), sidecar(64, 'b'), theirs(64, 'c');
  auto process = [&](int pid, const std::string& pod, const std::string& container) {
    WriteFakeProcess(proc, pid, pod, container);
  };
  process(11, uid, cid);       // the container's own
  process(12, uid, sidecar);   // the pod's sidecar
  process(13, other, theirs);  // another pod's
  std::filesystem::create_directories(limits);
  ContainerDir dir;
  dir.name = uid + "_main";
  dir.pod_uid = uid;
  dir.container = "main";
  dir.path = root.path() + "/containers/" + dir.name;
  std::filesystem::create_directories(dir.path);
  std::ofstream(limits + "/" + api::LimitsFileName(dir.name))
      << "NVIDIA_VISIBLE_DEVICES=" << kGpu << "\nCUDA_DEVICE_MEMORY_LIMIT_0=1024m\n";
  vgpu::RegionHandle h = MakeRegion(dir.path + "/region.cache", {{kGpu, 8192 * kMiB, 0}});
  ASSERT_NE(h.region, nullptr);
  SetSlot(h.region, 0, 1, 11, {{0, 0, 0}});  // it claims nothing live, and an 8 GiB limit
  h.region->devices[0].last_launch_ns.store(1);
  vgpu::RegionClose(&h);
  ScriptedNvml nvml;
  nvml.gpus.resize(1);
  nvml.gpus[0].uuid = kGpu;
  nvml.gpus[0].processes = {{11, 300 * kMiB}, {12, 200 * kMiB}, {13, 400 * kMiB}};
  ParkHost host = MakeParkHost({}, nullptr, &nvml, proc, root.path() + "/cgroup", limits);
  std::map<std::string, PodRef> pods;
  pods[uid] = PodRef{uid, "notebooks", "nb", {{cid, "main"}, {sidecar, "sidecar"}}, "", "true"};
  ParkController c(Options(), host);
  c.Poll(20 * kMin, {dir}, pods, false);
  EXPECT_EQ(c.idle_lent(), (std::map<std::string, uint64_t>{{kGpu, 468 * kMiB}}));
  nvml.gpus[0].processes_ok = false;  // NVML cannot list the GPU's processes: nothing
  nvml.gpus[0].processes.clear();
  c.Poll(21 * kMin, {dir}, pods, false);
  EXPECT_TRUE(c.idle_lent().empty());
}

}  // namespace
}  // namespace fracgpu::monitor::testing
