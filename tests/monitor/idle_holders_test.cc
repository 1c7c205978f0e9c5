// The node agent's idle-holder record (monitor/idle_holders.h, issue 36 item 4): Monitor::Poll
// over hand-made regions, then IdleHolderPublisher writing `fracgpu.io/idle-holders` on the node
// of the fake API server. Which pods are listed (idle long enough, holding at least 1 GiB, every
// slice of the pod on that GPU idle, a never-launched slice counted from first seen, a launch in
// the future not idle), when the record is written (first poll, set change after the least gap,
// MiB change after a minute, refresh, removal; never when nothing changed) and a failed write.
#include "monitor/idle_holders.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>

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
constexpr int64_t kUnix0 = 1764921600;  // the node's wall clock at monotonic 0 in these tests

class IdleHoldersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.path() + "/hook/vgpu/containers";
    std::filesystem::create_directories(root_);
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
  // A container whose region holds `used[d]` bytes (all data) on each of `gpus`, last launch at
  // `launch_s[d]` seconds (0 = never). Returns the index of its mapping in regions_.
  size_t Add(const std::string& uid, const std::string& container,
             const std::vector<std::string>& gpus, const std::vector<uint64_t>& used,
             const std::vector<uint64_t>& launch_s) {
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
  // Polls the monitor, then the publisher, at `t_s` seconds on both clocks.
  void PollAt(uint64_t t_s) {
    monitor_.Poll(t_s * kSec);
    publisher_.Poll(monitor_.snapshot(), t_s * kSec, kUnix0 + static_cast<int64_t>(t_s));
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
  fakes::FakeApiServer api_;
  std::unique_ptr<k8s::Client> client_;
  std::vector<vgpu::RegionHandle> regions_;
  std::atomic<int> patches_{0};
  Monitor monitor_{Options(dir_.path() + "/hook"), nullptr, nullptr};
  IdleHolderPublisher publisher_{Publishing(), [this](const std::string& v) {
                                   return PatchIdleHolders(client_.get(), "node-a", v);
                                 }};
};

TEST_F(IdleHoldersTest, PublishesPodsHoldingMemoryWhileIdleOnlyWhenItChanges) {
  const size_t a = Add("uid-a", "main", {kGpu0}, {2 * kGiB}, {100});
  Add("uid-b", "main", {kGpu0}, {3 * kGiB + 512 * kMiB + 5}, {0});  // never launched
  Add("uid-c", "main", {kGpu0}, {1023 * kMiB}, {100});              // below 1 GiB
  Add("uid-d", "c1", {kGpu0}, {2 * kGiB}, {100});  // idle, but its other container is not
  Add("uid-d", "c2", {kGpu0}, {2 * kGiB}, {850});
  Add("uid-e", "main", {kGpu0, kGpu1}, {kGiB, kGiB + 512 * kMiB}, {100, 300});
  Add("uid-f", "main", {kGpu1}, {4 * kGiB}, {5000});  // a launch in the future: not idle
  Add("uid-g", "a", {kGpu1}, {600 * kMiB}, {100});    // two containers of one pod: summed
  Add("uid-g", "b", {kGpu1}, {600 * kMiB}, {200});

  // First poll: nobody idle for 600 s yet; the earlier agent's record is removed.
  PollAt(200);
  EXPECT_EQ(Record(), "");
  EXPECT_EQ(patches_.load(), 1);
  PollAt(205);
  EXPECT_EQ(patches_.load(), 1);  // nothing to write

  // At 900 s: uid-a idle 800 s, uid-b 700 s since first seen at 200 s, uid-e 800 s and 600 s,
  // uid-g 1200 MiB over its two containers, idle 700 s (its latest launch).
  PollAt(900);
  const std::string g0 = std::string(":") + kGpu0 + ":", g1 = std::string(":") + kGpu1 + ":";
  const std::string at900 = std::to_string(kUnix0 + 900) + ";uid-a" + g0 + "2048:800,uid-b" + g0 +
                            "3584:700,uid-e" + g0 + "1024:800,uid-e" + g1 + "1536:600,uid-g" + g1 +
                            "1200:700";
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
  EXPECT_EQ(Record(), std::to_string(kUnix0 + 960) + ";uid-a" + g0 + "2048:860,uid-b" + g0 +
                          "3584:760,uid-e" + g0 + "1024:860,uid-e" + g1 + "1536:660,uid-g" + g1 +
                          "1200:760");

  // uid-a allocates without launching: its MiB changes, written at most once a minute.
  RegionOf(a)->slots[0].used[0].store(3 * kGiB);
  PollAt(990);
  EXPECT_EQ(patches_.load(), 3);
  PollAt(1020);
  EXPECT_EQ(patches_.load(), 4);
  EXPECT_NE(Record().find("uid-a" + g0 + "3072:920,"), std::string::npos) << Record();

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
  api_.FailNext("PATCH", "/api/v1/nodes/node-a", 500);
  PollAt(1000);
  EXPECT_EQ(Record(), "1;x:GPU-a:9999:1");  // the earlier agent's, not yet replaced
  EXPECT_EQ(publisher_.writes(), 1);
  PollAt(1005);
  EXPECT_EQ(publisher_.writes(), 1);  // retried after 10 s, not at every poll
  PollAt(1010);
  EXPECT_EQ(publisher_.writes(), 2);
  EXPECT_EQ(Record(), std::to_string(kUnix0 + 1010) + ";uid-a:" + kGpu0 + ":2048:910");
  publisher_.Remove();
  EXPECT_EQ(Record(), "");
  EXPECT_EQ(publisher_.writes(), 3);
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
  IdleHolderOptions o;
  o.idle_after = std::chrono::seconds(60);
  std::map<std::string, uint64_t> first_seen;
  std::vector<core::IdleHolder> got = IdleHoldersOf(snap, 1000 * kSec, o, &first_seen);
  ASSERT_EQ(got.size(), 256u);
  EXPECT_EQ(got.front().pod_uid, "uid-1044");  // 300 − 256 = 44 smallest dropped
  EXPECT_EQ(got.front().mib, 1024 + 44);
  EXPECT_EQ(got.back().pod_uid, "uid-1299");
  EXPECT_EQ(got.back().idle_s, 999);
  EXPECT_TRUE(first_seen.empty());  // every slice had launched
  EXPECT_TRUE(core::ParseIdleHolders(core::FormatIdleHolders({1, got})).ok());
}

}  // namespace
}  // namespace fracgpu::monitor::testing
