// The node agent's idle-holder record (monitor/idle_holders.h, issue 36 item 4): Monitor::Poll
// over hand-made regions and limits files (the grants), then IdleHolderPublisher writing
// `fracgpu.io/idle-holders` on the node of the fake API server. Which pods are listed (idle long
// enough, holding at least 1 GiB, every slice of the pod on that GPU idle, a never-launched slice
// counted from first seen, a launch in the future not idle), when the record is written (first
// poll, set change after the least gap, MiB change after a minute, refresh, removal; never when
// nothing changed) and a failed write. IdleHolderTruth.*: the attack finding on the record — the
// region (the tenant's to write) names neither the GPU nor, alone, the bytes.
#include "monitor/idle_holders.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "core/annotations.h"
#include "fake_apiserver.h"
#include "k8s/client.h"
#include "region_files.h"
#include "test_client.h"

namespace fracgpu::monitor::testing {
namespace {

constexpr const char* kGpu0 = "GPU-00000000-0000-0000-0000-000000000000";
constexpr const char* kGpu1 = "GPU-11111111-1111-1111-1111-111111111111";
constexpr uint64_t kSec = 1'000'000'000ull;
constexpr uint64_t kGiB = 1024 * kMiB;
constexpr uint64_t kForged = uint64_t{1} << 50;  // the bytes a forged region claims
constexpr int64_t kUnix0 = 1764921600;  // the node's wall clock at monotonic 0 in these tests

class IdleHoldersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.path() + "/hook/vgpu/containers";
    limits_ = dir_.path() + "/hook/vgpu/limits";
    std::filesystem::create_directories(root_);
    std::filesystem::create_directories(limits_);
    node_gpus_ = {kGpu0, kGpu1};
    enforce::GpuSample g0, g1;
    g0.uuid = kGpu0;
    g1.uuid = kGpu1;
    nvml_ = std::vector<enforce::GpuSample>{g0, g1};
    auto created = fakes::NoRetryClient(api_.url());
    ASSERT_TRUE(created.ok());
    client_ = std::move(created.value());
    // An earlier agent's record: the first poll removes it.
    api_.Put("nodes", {{"apiVersion", "v1"},
                       {"kind", "Node"},
                       {"metadata",
                        {{"name", "node-a"},
                         {"annotations", {{core::kAnnotationIdleHolders, "1;x:GPU-a:9999:1"}}}}}});
    api_.SetRequestHook([this](const std::string& method, const std::string& path) {
      if (method == "PATCH" && path == "/api/v1/nodes/node-a") ++patches_;
    });
  }
  void TearDown() override {
    api_.SetRequestHook(nullptr);
    for (auto& h : regions_) vgpu::RegionClose(&h);
  }
  // The grant of a container: its limits file (as the device plugin writes it from the signed
  // decision) naming `gpus` with `mib` on each.
  void Grant(const std::string& uid, const std::string& container,
             const std::vector<std::string>& gpus, uint64_t mib) {
    std::ofstream f(limits_ + "/" + api::LimitsFileName(uid + "_" + container));
    f << "NVIDIA_VISIBLE_DEVICES=";
    for (size_t i = 0; i < gpus.size(); ++i) f << (i ? "," : "") << gpus[i];
    f << "\n";
    for (size_t i = 0; i < gpus.size(); ++i)
      f << "CUDA_DEVICE_MEMORY_LIMIT_" << i << "=" << mib << "m\n";
  }
  // A container whose region holds `used[d]` bytes (all data) on each of `gpus`, last launch at
  // `launch_s[d]` seconds (0 = never), granted 16 GiB on each of them unless `grant` is false.
  // Returns the index of its mapping in regions_.
  size_t Add(const std::string& uid, const std::string& container,
             const std::vector<std::string>& gpus, const std::vector<uint64_t>& used,
             const std::vector<uint64_t>& launch_s, bool grant = true) {
    if (grant) Grant(uid, container, gpus, 16 * 1024);
    const std::string d = root_ + "/" + uid + "_" + container;
    std::filesystem::create_directories(d);
    std::vector<DeviceSpec> specs;
    for (const auto& g : gpus) specs.push_back({g, 16 * kGiB, 0});
    regions_.push_back(MakeRegion(d + "/region.cache", specs));
    vgpu::Region* r = regions_.back().region;
    std::vector<std::array<uint64_t, 3>> per_device;
    for (uint64_t u : used) per_device.push_back({0, 0, u});
    SetSlot(r, 0, 1, 1000 + static_cast<int32_t>(regions_.size()), per_device);
    for (size_t i = 0; i < launch_s.size(); ++i)
      r->devices[i].last_launch_ns.store(launch_s[i] * kSec);
    return regions_.size() - 1;
  }
  vgpu::Region* RegionOf(size_t i) { return regions_.at(i).region; }
  // The monitor's snapshot at `t_s` seconds, with the node's GPUs (NVML's list) node_gpus_.
  Snapshot SnapshotAt(uint64_t t_s) {
    monitor_.Poll(t_s * kSec);
    Snapshot snap = monitor_.snapshot();
    for (const std::string& u : node_gpus_) {
      GpuStats g;
      g.uuid = u;
      snap.gpus.push_back(g);
    }
    return snap;
  }
  // Polls the monitor, then the publisher, at `t_s` seconds on both clocks.
  void PollAt(uint64_t t_s) {
    publisher_.Poll(SnapshotAt(t_s), t_s * kSec, kUnix0 + static_cast<int64_t>(t_s));
  }
  // The holders IdleHoldersOf finds at `t_s` seconds with its own first-seen times.
  std::vector<core::IdleHolder> HoldersAt(uint64_t t_s) {
    return IdleHoldersOf(SnapshotAt(t_s), t_s * kSec, Publishing(), sources_, &first_seen_);
  }
  // The agent's sources, scripted: the real grant reader over limits_, NVML's process lists
  // nvml_, a pid's container from owner_ (dir name; another's: not the container's, absent:
  // gone), the node's pods pods_.
  IdleHolderSources Sources() {
    IdleHolderSources s;
    s.grant = [this](const std::string& d) { return ReadSliceGrant(limits_, d); };
    s.gpu_processes = [this]() { return nvml_; };
    s.verify_process = [this](int pid, const ContainerDir& dir, const PodRef* pod,
                              const std::string&, bool) -> Result<uint64_t> {
      auto it = owner_.find(pid);
      if (it == owner_.end()) return NotFound("gone");
      if (it->second == "?") return Unavailable("cannot be told");
      if (pod == nullptr || pod->uid != dir.pod_uid) return Unavailable("pod not listed");
      if (it->second != dir.name) return PermissionDenied("another container's");
      return uint64_t{1};
    };
    s.pods = [this]() -> Result<std::map<std::string, PodRef>> {
      ++pod_lists_;
      return pods_;
    };
    return s;
  }
  std::string Record() {
    auto n = api_.Get("nodes", "", "node-a");
    if (!n) return "<no node>";
    const auto& a = (*n)["metadata"].value("annotations", nlohmann::json::object());
    return a.contains(core::kAnnotationIdleHolders)
               ? a[core::kAnnotationIdleHolders].get<std::string>()
               : "";
  }
  static MonitorOptions Options(const std::string& hook) {
    MonitorOptions o;
    o.node_name = "node-a";
    o.hook_path = hook;
    o.node_dir = "";
    o.remove_orphans = false;
    return o;
  }
  static IdleHolderOptions Publishing() {
    IdleHolderOptions o;
    o.idle_after = std::chrono::seconds(600);
    return o;
  }

  TempDir dir_;
  std::string root_;
  std::string limits_;
  std::vector<std::string> node_gpus_;
  Result<std::vector<enforce::GpuSample>> nvml_ = Unavailable("unset");
  std::map<int, std::string> owner_;
  std::map<std::string, PodRef> pods_;
  int pod_lists_ = 0;
  std::map<std::string, uint64_t> first_seen_;
  IdleHolderSources sources_ = Sources();
  fakes::FakeApiServer api_;
  std::unique_ptr<k8s::Client> client_;
  std::vector<vgpu::RegionHandle> regions_;
  std::atomic<int> patches_{0};
  Monitor monitor_{Options(dir_.path() + "/hook"), nullptr, nullptr};
  IdleHolderPublisher publisher_{Publishing(), Sources(), [this](const std::string& v) {
                                   return PatchIdleHolders(client_.get(), "node-a", v);
                                 }};
};

TEST_F(IdleHoldersTest, PublishesPodsHoldingMemoryWhileIdleOnlyWhenItChanges) {
  const size_t a = Add("uid-a", "main", {kGpu0}, {2 * kGiB}, {250});
  Add("uid-b", "main", {kGpu0}, {3 * kGiB + 512 * kMiB + 5}, {0});  // never launched
  Add("uid-c", "main", {kGpu0}, {1023 * kMiB}, {100});              // below 1 GiB
  Add("uid-d", "c1", {kGpu0}, {2 * kGiB}, {100});  // idle, but its other container is not
  Add("uid-d", "c2", {kGpu0}, {2 * kGiB}, {850});
  // Two GPUs: the grant reader reads one-GPU grants only, so it is left out.
  Add("uid-e", "main", {kGpu0, kGpu1}, {kGiB, kGiB + 512 * kMiB}, {100, 300});
  Add("uid-f", "main", {kGpu1}, {4 * kGiB}, {5000});  // a launch in the future: not idle
  Add("uid-g", "a", {kGpu1}, {600 * kMiB}, {100});    // two containers of one pod: summed
  Add("uid-g", "b", {kGpu1}, {600 * kMiB}, {250});

  // First poll: nobody idle for 600 s yet; the earlier agent's record is removed.
  PollAt(200);
  EXPECT_EQ(Record(), "");
  EXPECT_EQ(patches_.load(), 1);
  PollAt(205);
  EXPECT_EQ(patches_.load(), 1);  // nothing to write

  // At 900 s: uid-a idle 650 s, uid-b 700 s since first seen at 200 s, uid-g 1200 MiB over its
  // two containers, idle 650 s (its latest launch; the other's at 100 s counts from first seen,
  // 200 s).
  PollAt(900);
  const std::string g0 = std::string(":") + kGpu0 + ":", g1 = std::string(":") + kGpu1 + ":";
  const std::string at900 = std::to_string(kUnix0 + 900) + ";uid-a" + g0 + "2048:650,uid-b" + g0 +
                            "3584:700,uid-g" + g1 + "1200:650";
  EXPECT_EQ(Record(), at900);
  EXPECT_EQ(patches_.load(), 2);
  ASSERT_TRUE(core::ParseIdleHolders(Record()).ok());

  // Idle times grow, nothing else changes: not written until the refresh (60 s).
  PollAt(905);
  PollAt(959);
  EXPECT_EQ(patches_.load(), 2);
  EXPECT_EQ(Record(), at900);
  PollAt(960);
  EXPECT_EQ(patches_.load(), 3);
  EXPECT_EQ(Record(), std::to_string(kUnix0 + 960) + ";uid-a" + g0 + "2048:710,uid-b" + g0 +
                          "3584:760,uid-g" + g1 + "1200:710");

  // uid-a allocates without launching: its MiB changes, written at most once a minute.
  RegionOf(a)->slots[0].used[0].store(3 * kGiB);
  PollAt(990);
  EXPECT_EQ(patches_.load(), 3);
  PollAt(1020);
  EXPECT_EQ(patches_.load(), 4);
  EXPECT_NE(Record().find("uid-a" + g0 + "3072:770,"), std::string::npos) << Record();

  // uid-a launches: the set changes, written once 10 s passed since the last write.
  RegionOf(a)->devices[0].last_launch_ns.store(1025 * kSec);
  PollAt(1026);
  EXPECT_EQ(patches_.load(), 4);
  PollAt(1030);
  EXPECT_EQ(patches_.load(), 5);
  EXPECT_EQ(Record().find("uid-a"), std::string::npos) << Record();
  EXPECT_EQ(Record().rfind(std::to_string(kUnix0 + 1030) + ";uid-b" + g0 + "3584:830,", 0), 0u)
      << Record();

  // Everybody launches: the record is removed, and Remove() at exit writes nothing more.
  for (auto& h : regions_) {
    for (uint32_t d = 0; d < h.region->device_count; ++d)
      h.region->devices[d].last_launch_ns.store(1035 * kSec);
  }
  PollAt(1040);
  EXPECT_EQ(Record(), "");
  EXPECT_EQ(patches_.load(), 6);
  PollAt(1200);
  publisher_.Remove();
  EXPECT_EQ(patches_.load(), 6);
}

TEST_F(IdleHoldersTest, AFailedWriteIsRetriedAfterTheGapAndRemoveClearsTheRecordAtExit) {
  Add("uid-a", "main", {kGpu0}, {2 * kGiB}, {100});
  PollAt(100);  // first seen; the earlier agent's record removed
  EXPECT_EQ(Record(), "");
  EXPECT_EQ(publisher_.writes(), 1);
  api_.FailNext("PATCH", "/api/v1/nodes/node-a", 500);
  PollAt(1000);
  EXPECT_EQ(Record(), "");  // the write failed
  EXPECT_EQ(publisher_.writes(), 2);
  PollAt(1005);
  EXPECT_EQ(publisher_.writes(), 2);  // retried after 10 s, not at every poll
  PollAt(1010);
  EXPECT_EQ(publisher_.writes(), 3);
  EXPECT_EQ(Record(), std::to_string(kUnix0 + 1010) + ";uid-a:" + kGpu0 + ":2048:910");
  publisher_.Remove();
  EXPECT_EQ(Record(), "");
  EXPECT_EQ(publisher_.writes(), 4);
}

// ---- The attack finding on the record: the region is the tenant's to write, and the record is
// shown to every viewer. Each of these failed on the code that took the GPU, the bytes and the
// idle time from the region.

// One pod of 16 containers whose regions name 16 made-up GPUs each at 2^50 bytes: before, 256
// entries of 2147483647 MiB that pushed the genuine holder out. Now its containers count only on
// their grants' GPU (which their regions do not name): nothing, and the genuine holder stays.
TEST_F(IdleHoldersTest, ForgedGpusContributeNothingAndDisplaceNoGenuineHolder) {
  Add("uid-a", "main", {kGpu0}, {2 * kGiB}, {0});
  for (int c = 0; c < 16; ++c) {
    std::vector<std::string> forged;
    for (int d = 0; d < 16; ++d) {
      char u[64];
      std::snprintf(u, sizeof(u), "GPU-f0f0f0f0-0000-0000-%04d-%012d", c, d);
      forged.push_back(u);
    }
    const std::string container = "c" + std::to_string(c);
    Add("uid-x", container, forged, std::vector<uint64_t>(16, kForged),
        std::vector<uint64_t>(16, 1), /*grant=*/false);
    Grant("uid-x", container, {kGpu1}, 1024);  // what the scheduler granted it
  }
  HoldersAt(100);
  const std::vector<core::IdleHolder> got = HoldersAt(1000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].pod_uid, "uid-a");
  EXPECT_EQ(got[0].gpu_uuid, kGpu0);
  EXPECT_EQ(got[0].mib, 2048);
  EXPECT_EQ(got[0].idle_s, 900);
}

// A region claiming 2^50 bytes on its own grant's GPU: held at most the grant (4 GiB), not
// "2147483647 MiB".
TEST_F(IdleHoldersTest, ForgedBytesAreCappedAtTheGrant) {
  Add("uid-a", "main", {kGpu0}, {kForged}, {0}, /*grant=*/false);
  Grant("uid-a", "main", {kGpu0}, 4096);
  HoldersAt(100);
  const std::vector<core::IdleHolder> got = HoldersAt(1000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].gpu_uuid, kGpu0);
  EXPECT_EQ(got[0].mib, 4096);
}

// A region naming a neighbour's real GPU (kGpu0, where uid-n holds 2 GiB) while its grant is on
// kGpu1: nothing on kGpu0 in its name, nor anything on kGpu1 (its region does not name it).
TEST_F(IdleHoldersTest, ANeighboursRealGpuNamedByTheRegionIsIgnored) {
  Add("uid-n", "main", {kGpu0}, {2 * kGiB}, {0});
  Add("uid-x", "main", {kGpu0}, {kForged}, {1}, /*grant=*/false);
  Grant("uid-x", "main", {kGpu1}, 8192);
  HoldersAt(100);
  const std::vector<core::IdleHolder> got = HoldersAt(1000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].pod_uid, "uid-n");
  EXPECT_EQ(got[0].mib, 2048);
}

// No limits file (no readable grant), a two-GPU grant, or a grant on a GPU the node does not
// list: nothing.
TEST_F(IdleHoldersTest, NoGrantNoOneGpuGrantOrAGpuNotTheNodesContributesNothing) {
  Add("uid-a", "main", {kGpu0}, {4 * kGiB}, {0}, /*grant=*/false);
  Add("uid-b", "main", {kGpu0}, {4 * kGiB}, {0}, /*grant=*/false);
  Grant("uid-b", "main", {kGpu0, kGpu1}, 8192);
  const std::string elsewhere = "GPU-99999999-9999-9999-9999-999999999999";
  Add("uid-c", "main", {elsewhere}, {4 * kGiB}, {0});
  HoldersAt(100);
  EXPECT_TRUE(HoldersAt(1000).empty());
  // The same uid-a with its grant: counted from when it was first counted (1001 s), listed
  // 600 s later (the test can fail).
  Grant("uid-a", "main", {kGpu0}, 8192);
  EXPECT_TRUE(HoldersAt(1001).empty());
  const std::vector<core::IdleHolder> got = HoldersAt(1601);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].pod_uid, "uid-a");
  EXPECT_EQ(got[0].mib, 4096);
}

// The region claims 0 live; NVML shows the container's own process (pid 11) holding 3 GiB, its
// pod's sidecar (12) 2 GiB, another pod's (13) 5 GiB on the same GPU: 3072 MiB. Its own holding
// 6 GiB: capped at the 4 GiB grant. NVML unreadable, or a process that cannot be told: the
// region's figure within the grant (here 0: not listed).
TEST_F(IdleHoldersTest, HeldBytesAreTheDriversForTheContainersOwnProcessesWithinTheGrant) {
  Add("uid-a", "main", {kGpu0}, {0}, {0}, /*grant=*/false);
  Grant("uid-a", "main", {kGpu0}, 4096);
  pods_["uid-a"] = PodRef{"uid-a", "ns", "nb", {}, "", ""};
  owner_ = {{11, "uid-a_main"}, {12, "uid-a_sidecar"}, {13, "uid-o_main"}};
  auto& gpu0 = (*nvml_)[0];
  gpu0.processes = {{11, 3 * kGiB}, {12, 2 * kGiB}, {13, 5 * kGiB}};
  HoldersAt(100);
  std::vector<core::IdleHolder> got = HoldersAt(1000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].mib, 3072);
  EXPECT_EQ(pod_lists_, 1);  // once per poll, only when needed (not at 100 s: not idle yet)
  gpu0.processes[0].used_bytes = 6 * kGiB;
  got = HoldersAt(1001);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].mib, 4096);
  owner_[12] = "?";
  EXPECT_TRUE(HoldersAt(1002).empty());
  owner_[12] = "uid-a_sidecar";
  gpu0.processes_ok = false;
  EXPECT_TRUE(HoldersAt(1003).empty());
  nvml_ = Unavailable("NVML: not loaded");
  EXPECT_TRUE(HoldersAt(1004).empty());
}

// The region's last launch only ever makes a slice look more idle, which harms only its own pod;
// it is clamped into [first seen, now]: a launch stamped before this agent saw the slice counts
// from first seen, one in the future as now (not idle).
TEST_F(IdleHoldersTest, TheLastLaunchIsClampedIntoFirstSeenAndNow) {
  Add("uid-a", "main", {kGpu0}, {2 * kGiB}, {1});     // "idle since boot"
  Add("uid-b", "main", {kGpu1}, {2 * kGiB}, {5000});  // "launched in the future"
  HoldersAt(400);
  std::vector<core::IdleHolder> got = HoldersAt(999);
  EXPECT_TRUE(got.empty());  // 599 s since first seen (998 s since its stamp): not idle yet
  got = HoldersAt(1001);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].pod_uid, "uid-a");
  EXPECT_EQ(got[0].idle_s, 601);
}

// The agent's sources over the real adapters (MakeIdleHolderSources: the grant from a limits
// file, the container of a process from a fake /proc, NVML's process lists scripted, the pods
// from a lister): the container's own process counts, its pod's sidecar and another pod's do
// not; the two-GPU grant is refused; no lister: the pod is unknown and a process of it cannot be
// told (the region's figure, within the grant).
class ScriptedProcesses final : public enforce::ProcessSource {
 public:
  Result<std::vector<enforce::GpuSample>> Sample(std::vector<std::string>*) override {
    return gpus;
  }
  std::vector<enforce::GpuSample> gpus;
};
class OnePodLister final : public PodLister {
 public:
  Result<std::vector<PodRef>> ListNodePods(const std::string& node) override {
    if (node != "node-a") return NotFound("node " + node);
    return pods;
  }
  std::vector<PodRef> pods;
};

TEST(IdleHolderSourcesAdapters, TheContainersOwnProcessesOnItsGrantedGpuAndNoOthers) {
  TempDir root;
  const std::string proc = root.path() + "/proc";
  const std::string limits = root.path() + "/limits";
  const std::string uid = "7d1c0c6e-0000-4000-8000-0000000000d1";
  const std::string other = "7d1c0c6e-0000-4000-8000-0000000000d2";
  const std::string cid(64, 'a'), sidecar(64, 'b'), theirs(64, 'c');
  auto process = [&](int pid, const std::string& pod, const std::string& container) {
    WriteFakeProcess(proc, pid, pod, container);
  };
  process(11, uid, cid);
  process(12, uid, sidecar);
  process(13, other, theirs);
  std::filesystem::create_directories(limits);
  std::ofstream(limits + "/" + api::LimitsFileName(uid + "_main"))
      << "NVIDIA_VISIBLE_DEVICES=" << kGpu0 << "\nCUDA_DEVICE_MEMORY_LIMIT_0=4096m\n";
  std::ofstream(limits + "/" + api::LimitsFileName(other + "_main"))
      << "NVIDIA_VISIBLE_DEVICES=" << kGpu0 << "," << kGpu1
      << "\nCUDA_DEVICE_MEMORY_LIMIT_0=4096m\nCUDA_DEVICE_MEMORY_LIMIT_1=4096m\n";
  ScriptedProcesses nvml;
  nvml.gpus.resize(1);
  nvml.gpus[0].uuid = kGpu0;
  nvml.gpus[0].processes = {{11, 3 * kGiB}, {12, 200 * kMiB}, {13, 5 * kGiB}};
  OnePodLister lister;
  lister.pods = {PodRef{uid, "notebooks", "nb", {{cid, "main"}, {sidecar, "sidecar"}}, "", ""}};
  Snapshot snap;
  snap.gpus.resize(1);
  snap.gpus[0].uuid = kGpu0;
  for (const std::string& u : {uid, other}) {
    SliceSample s;
    s.pod_uid = u;
    s.container = "main";
    s.device.uuid = kGpu0;
    s.device.used_bytes = 0;  // it claims nothing live
    snap.slices.push_back(s);
  }
  IdleHolderOptions o;
  o.idle_after = std::chrono::seconds(60);
  std::map<std::string, uint64_t> first_seen;
  IdleHolderSources sources = MakeIdleHolderSources(&nvml, proc, limits, &lister, "node-a");
  ASSERT_TRUE(IdleHoldersOf(snap, 1 * kSec, o, sources, &first_seen).empty());
  std::vector<core::IdleHolder> got = IdleHoldersOf(snap, 100 * kSec, o, sources, &first_seen);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].pod_uid, uid);
  EXPECT_EQ(got[0].mib, 3072);
  EXPECT_EQ(got[0].idle_s, 99);
  // No pod list: pid 11 cannot be told the container's; the region's 0 bytes: not listed.
  sources = MakeIdleHolderSources(&nvml, proc, limits, nullptr, "node-a");
  EXPECT_TRUE(IdleHoldersOf(snap, 101 * kSec, o, sources, &first_seen).empty());
}

// Beyond 256 holders the largest are kept, in (GPU, pod) order; a UID or UUID the record's
// grammar refuses (the region directory and file are the tenant's and the device plugin's) is
// left out.
TEST(IdleHoldersOf, KeepsTheLargestWithinTheBoundAndLeavesOutWhatTheGrammarRefuses) {
  Snapshot snap;
  for (int i = 0; i < 300; ++i) {
    SliceSample s;
    s.pod_uid = "uid-" + std::to_string(1000 + i);
    s.container = "main";
    s.device.uuid = "GPU-0";
    s.device.used_bytes = static_cast<uint64_t>(1024 + i) * kMiB;
    s.device.last_launch_ns = 1 * kSec;
    snap.slices.push_back(s);
  }
  SliceSample bad = snap.slices[0];
  bad.pod_uid = "uid:x";
  bad.device.used_bytes = 100 * kGiB;
  snap.slices.push_back(bad);
  bad.pod_uid = "uid-y";
  bad.device.uuid = "GPU-0;1";
  snap.slices.push_back(bad);
  snap.gpus.resize(2);
  snap.gpus[0].uuid = "GPU-0";
  snap.gpus[1].uuid = "GPU-0;1";
  IdleHolderSources sources;  // each container granted 16 GiB on the GPU its region names
  sources.grant = [&snap](const std::string& dir) -> Result<SliceGrant> {
    for (const SliceSample& s : snap.slices)
      if (s.pod_uid + "_" + s.container == dir) return SliceGrant{s.device.uuid, 16 * kGiB};
    return NotFound(dir);
  };
  IdleHolderOptions o;
  o.idle_after = std::chrono::seconds(60);
  std::map<std::string, uint64_t> first_seen;
  EXPECT_TRUE(IdleHoldersOf(snap, 1 * kSec, o, sources, &first_seen).empty());  // first seen
  std::vector<core::IdleHolder> got = IdleHoldersOf(snap, 1000 * kSec, o, sources, &first_seen);
  ASSERT_EQ(got.size(), 256u);
  EXPECT_EQ(got.front().pod_uid, "uid-1044");  // 300 − 256 = 44 smallest dropped
  EXPECT_EQ(got.front().mib, 1024 + 44);
  EXPECT_EQ(got.back().pod_uid, "uid-1299");
  EXPECT_EQ(got.back().idle_s, 999);
  EXPECT_EQ(first_seen.size(), 302u);  // every container, the refused two included
  EXPECT_TRUE(core::ParseIdleHolders(core::FormatIdleHolders({1, got})).ok());
}

}  // namespace
}  // namespace fracgpu::monitor::testing
