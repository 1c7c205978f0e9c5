// Monitor::Poll over hand-made regions, an in-memory GPU source and the fake API server:
// pod naming by UID, removal of directories of pods gone from the node only after the grace
// period and never while the pod list is unknown, bad files skipped with the rest exported,
// the SM limiter's priority file, HAMi names.
#include "monitor/monitor.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "api/node_gpu.h"
#include "fake_apiserver.h"
#include "k8s/client.h"
#include "region_files.h"
#include "test_client.h"

namespace fracgpu::monitor::testing {
namespace {

using std::chrono::seconds;
constexpr const char* kGpu0 = "GPU-00000000-0000-0000-0000-000000000000";
constexpr const char* kGpu1 = "GPU-11111111-1111-1111-1111-111111111111";
constexpr uint64_t kSec = 1'000'000'000ull;

class FakeGpus : public GpuStatsSource {
 public:
  Result<std::vector<GpuStats>> ListGpus() override {
    if (fail) return Unavailable("injected");
    return gpus;
  }
  Result<std::map<uint32_t, double>> ProcessSmUtilization(const std::string& uuid) override {
    ++util_calls[uuid];
    return util[uuid];
  }
  bool fail = false;
  std::vector<GpuStats> gpus = {
      {kGpu0, 0, "Fake A100", 40 * 1024 * kMiB, 300 * kMiB, 0.5, 0.25},
      {kGpu1, 1, "Fake A100", 40 * 1024 * kMiB, 0, 0.0, 0.0},
  };
  std::map<std::string, std::map<uint32_t, double>> util;
  std::map<std::string, int> util_calls;
};

nlohmann::json Pod(const std::string& ns, const std::string& name, const std::string& uid,
                   const std::string& node) {
  return {{"metadata", {{"namespace", ns}, {"name", name}, {"uid", uid}}},
          {"spec", {{"nodeName", node}}}};
}

class MonitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.path() + "/hook/vgpu/containers";
    std::filesystem::create_directories(root_);
    auto created = fakes::NoRetryClient(api_.url());
    ASSERT_TRUE(created.ok());
    client_ = std::move(created.value());
    // One request before any test body: the fake API server's destructor can hang when it is
    // stopped before its listener thread started serving (reported to its owner).
    ASSERT_TRUE(client_->List("/api/v1/pods").ok());
    lister_ = std::make_unique<K8sPodLister>(client_.get());
  }
  // A container directory with a region holding one process on GPU 0.
  std::string AddContainer(const std::string& uid, const std::string& container, uint64_t data,
                           int32_t host_pid) {
    std::string d = root_ + "/" + uid + "_" + container;
    std::filesystem::create_directories(d);
    auto h = MakeRegion(d + "/region.cache", {{kGpu0, 256 * kMiB, 40}});
    SetSlot(h.region, 0, 1, host_pid, {{2 * kMiB, 0, data}});
    vgpu::RegionClose(&h);
    return d;
  }
  MonitorOptions Options() {
    MonitorOptions o;
    o.node_name = "node-a";
    o.hook_path = dir_.path() + "/hook";
    o.node_dir = dir_.path() + "/node";
    o.orphan_grace = seconds(60);
    o.version = "test";
    return o;
  }

  TempDir dir_;
  std::string root_;
  fakes::FakeApiServer api_;
  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<K8sPodLister> lister_;
  FakeGpus gpus_;
};

TEST_F(MonitorTest, NamesSlicesAfterTheirPodsAndExportsExactValues) {
  api_.Put("pods", Pod("team-a", "train", "uid-a", "node-a"));
  AddContainer("uid-a", "main", 30 * kMiB, 500);
  AddContainer("uid-z", "side", 10 * kMiB, 501);  // not (yet) known to the API server
  gpus_.util[kGpu0] = {{500, 0.25}, {501, 0.5}, {777, 0.9}};
  Monitor m(Options(), &gpus_, lister_.get());
  m.Poll(10 * kSec);
  Snapshot s = m.snapshot();
  ASSERT_EQ(s.slices.size(), 2u);
  EXPECT_EQ(s.slices[0].namespace_name, "team-a");
  EXPECT_EQ(s.slices[0].pod, "train");
  EXPECT_EQ(s.slices[0].container, "main");
  EXPECT_EQ(s.slices[0].device.used_bytes, 32 * kMiB);
  EXPECT_DOUBLE_EQ(*s.slices[0].sm_utilization, 0.25);
  EXPECT_EQ(s.slices[1].namespace_name, "");
  EXPECT_EQ(s.slices[1].pod, "uid-z");  // unknown pod: its UID
  EXPECT_DOUBLE_EQ(*s.slices[1].sm_utilization, 0.5);
  EXPECT_EQ(gpus_.util_calls[kGpu0], 1);  // one NVML query per GPU per poll, shared by slices
  std::string text = m.registry().Render();
  const std::string l =
      "{node=\"node-a\",namespace=\"team-a\",pod=\"train\",container=\"main\",device_uuid=\"" +
      std::string(kGpu0) + "\"}";
  EXPECT_NE(text.find("fracgpu_container_memory_used_bytes" + l + " 33554432\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("fracgpu_container_memory_limit_bytes" + l + " 268435456\n"),
            std::string::npos);
  EXPECT_NE(text.find("fracgpu_container_memory_context_bytes" + l + " 2097152\n"),
            std::string::npos);
  EXPECT_NE(text.find("fracgpu_container_memory_data_bytes" + l + " 31457280\n"),
            std::string::npos);
  EXPECT_NE(text.find("fracgpu_container_sm_limit_ratio" + l + " 0.4\n"), std::string::npos);
  EXPECT_NE(text.find("fracgpu_container_sm_utilization_ratio" + l + " 0.25\n"), std::string::npos);
  EXPECT_EQ(text.find("fracgpu_container_last_kernel_age_seconds"),
            std::string::npos);  // never launched
  EXPECT_NE(text.find("fracgpu_gpu_slices{node=\"node-a\",device_uuid=\"" + std::string(kGpu0) +
                      "\",device_index=\"0\",model=\"Fake A100\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("fracgpu_gpu_utilization_ratio{node=\"node-a\",device_uuid=\"" +
                      std::string(kGpu0) + "\",device_index=\"0\",model=\"Fake A100\"} 0.5\n"),
            std::string::npos);
  EXPECT_NE(text.find("fracgpu_build_info{component=\"monitor\",version=\"test\"} 1\n"),
            std::string::npos);
  // HAMi's names come by default (HamiNamesCarryHamiLabelsAndUnits checks them).
  EXPECT_NE(text.find("hami_vgpu_memory_used_bytes{"), std::string::npos);
}

TEST_F(MonitorTest, RemovesDirectoriesOfGonePodsOnlyAfterTheGracePeriod) {
  api_.Put("pods", Pod("team-a", "live", "uid-live", "node-a"));
  api_.Put("pods", Pod("team-b", "elsewhere", "uid-other-node", "node-b"));
  std::string live = AddContainer("uid-live", "main", kMiB, 1);
  std::string gone = AddContainer("uid-gone", "main", kMiB, 2);
  std::string moved = AddContainer("uid-other-node", "main", kMiB, 3);
  Monitor m(Options(), &gpus_, lister_.get());
  m.Poll(100 * kSec);
  m.Poll(159 * kSec);  // 59 s orphaned: kept
  EXPECT_TRUE(std::filesystem::exists(gone));
  // The API server fails at the moment the grace period ends: nothing is removed.
  api_.FailNext("GET", "/api/v1/pods", 500, 1);
  m.Poll(160 * kSec);
  EXPECT_TRUE(std::filesystem::exists(gone));
  EXPECT_NE(m.registry().Render().find("fracgpu_monitor_errors_total{source=\"apiserver\"} 1\n"),
            std::string::npos);
  m.Poll(161 * kSec);  // list works again, orphaned for 61 s: removed
  EXPECT_FALSE(std::filesystem::exists(gone));
  EXPECT_FALSE(std::filesystem::exists(moved));  // its pod is on another node
  EXPECT_TRUE(std::filesystem::exists(live));
  EXPECT_NE(m.registry().Render().find("fracgpu_monitor_directories_removed_total 2\n"),
            std::string::npos);
  // A pod that comes back (same UID listed again) resets its timer; a live pod is never removed.
  m.Poll(10000 * kSec);
  EXPECT_TRUE(std::filesystem::exists(live));
}

TEST_F(MonitorTest, ReappearingPodResetsItsOrphanTimer) {
  std::string d = AddContainer("uid-flaky", "main", kMiB, 1);
  Monitor m(Options(), &gpus_, lister_.get());
  m.Poll(0);  // orphaned since 0
  api_.Put("pods", Pod("ns", "flaky", "uid-flaky", "node-a"));
  m.Poll(30 * kSec);  // listed: timer cleared
  api_.Remove("pods", "ns", "flaky");
  m.Poll(61 * kSec);  // orphaned since 61 s
  m.Poll(120 * kSec);
  EXPECT_TRUE(std::filesystem::exists(d));
  m.Poll(121 * kSec);
  EXPECT_FALSE(std::filesystem::exists(d));
}

TEST_F(MonitorTest, WithoutAnApiServerNothingIsEverRemoved) {
  std::string d = AddContainer("uid-x", "main", kMiB, 1);
  Monitor m(Options(), &gpus_, nullptr);
  m.Poll(0);
  m.Poll(100000 * kSec);
  EXPECT_TRUE(std::filesystem::exists(d));
  EXPECT_EQ(m.snapshot().slices.size(), 1u);
}

TEST_F(MonitorTest, BadFilesAndEntriesAreSkippedWithAReasonAndTheRestExported) {
  api_.Put("pods", Pod("ns", "good", "uid-good", "node-a"));
  AddContainer("uid-good", "main", 4 * kMiB, 1);
  // Truncated, wrong version, oversized, garbage, missing; a stray file; a bad name; a symlink.
  std::string t = AddContainer("uid-t", "trunc", kMiB, 2);
  std::filesystem::resize_file(t + "/region.cache", 1000);
  std::string v = AddContainer("uid-v", "v1", kMiB, 3);
  {
    std::string b = ReadBytes(v + "/region.cache");
    uint32_t one = 1;
    std::memcpy(b.data() + 4, &one, 4);
    WriteBytes(v + "/region.cache", b);
  }
  std::string o = AddContainer("uid-o", "big", kMiB, 4);
  std::filesystem::resize_file(o + "/region.cache", sizeof(vgpu::Region) + 4096);
  std::filesystem::create_directories(root_ + "/uid-g_garbage");
  WriteBytes(root_ + "/uid-g_garbage/region.cache", std::string(sizeof(vgpu::Region), '\xa5'));
  std::filesystem::create_directories(root_ + "/uid-m_missing");
  WriteBytes(root_ + "/stray-file", "x");
  std::filesystem::create_directories(root_ + "/no-underscore");
  std::filesystem::create_directory_symlink("/etc", root_ + "/uid-l_link");
  Monitor m(Options(), &gpus_, lister_.get());
  m.Poll(kSec);
  Snapshot s = m.snapshot();
  ASSERT_EQ(s.slices.size(), 1u);
  EXPECT_EQ(s.slices[0].pod, "good");
  EXPECT_EQ(s.slices[0].device.used_bytes, 6 * kMiB);
  std::map<std::string, std::string> skipped(s.skipped.begin(), s.skipped.end());
  ASSERT_EQ(skipped.size(), 5u);
  EXPECT_EQ(skipped["uid-t_trunc"].rfind("size: ", 0), 0u) << skipped["uid-t_trunc"];
  EXPECT_EQ(skipped["uid-v_v1"].rfind("bad_version: ", 0), 0u);
  EXPECT_NE(skipped["uid-v_v1"].find("version is 1, want 2"), std::string::npos);
  EXPECT_EQ(skipped["uid-o_big"].rfind("size: ", 0), 0u);
  EXPECT_EQ(skipped["uid-g_garbage"].rfind("bad_magic: ", 0), 0u);
  EXPECT_EQ(skipped["uid-m_missing"].rfind("missing: ", 0), 0u);
  std::string text = m.registry().Render();
  EXPECT_NE(text.find("fracgpu_monitor_region_skipped_total{reason=\"size\"} 2\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("fracgpu_monitor_region_skipped_total{reason=\"bad_version\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("fracgpu_monitor_region_skipped_total{reason=\"bad_magic\"} 1\n"),
            std::string::npos);
  EXPECT_NE(
      text.find(
          "fracgpu_container_memory_used_bytes{node=\"node-a\",namespace=\"ns\",pod=\"good\""),
      std::string::npos);
}

TEST_F(MonitorTest, NvmlFailureKeepsRegionMetrics) {
  AddContainer("uid-a", "main", kMiB, 1);
  gpus_.fail = true;
  Monitor m(Options(), &gpus_, nullptr);
  m.Poll(kSec);
  std::string text = m.registry().Render();
  EXPECT_NE(text.find("fracgpu_monitor_errors_total{source=\"nvml\"} 1\n"), std::string::npos);
  EXPECT_EQ(text.find("fracgpu_gpu_memory_total_bytes"), std::string::npos);
  EXPECT_NE(text.find("fracgpu_container_memory_used_bytes"), std::string::npos);
}

TEST_F(MonitorTest, LastKernelAgeAndPriorityFileAge) {
  std::string d = AddContainer("uid-a", "main", kMiB, 1);
  {
    auto h = MakeRegion(d + "/region.cache", {});
    ASSERT_NE(h.region, nullptr);
    h.region->devices[0].last_launch_ns.store(7 * kSec);
    vgpu::RegionClose(&h);
  }
  std::filesystem::create_directories(dir_.path() + "/node");
  api::NodeGpu node{};
  node.magic = api::kNodeGpuMagic;
  node.version = api::kNodeGpuVersion;
  node.high_last_launch_ns = 9 * kSec + 500'000'000;
  node.high_last_launch_check = ~node.high_last_launch_ns;
  WriteBytes(dir_.path() + "/node/" + kGpu0,
             std::string(reinterpret_cast<const char*>(&node), sizeof node));
  api::NodeGpu bad = node;
  bad.high_last_launch_check = 0;  // torn or forged: ignored
  WriteBytes(dir_.path() + "/node/" + kGpu1,
             std::string(reinterpret_cast<const char*>(&bad), sizeof bad));
  Monitor m(Options(), &gpus_, nullptr);
  m.Poll(12 * kSec);
  Snapshot s = m.snapshot();
  ASSERT_EQ(s.slices.size(), 1u);
  EXPECT_DOUBLE_EQ(*s.slices[0].last_kernel_age_s, 5.0);
  ASSERT_EQ(s.priority_launch_age_s.size(), 1u);
  EXPECT_DOUBLE_EQ(s.priority_launch_age_s[kGpu0], 2.5);
  std::string text = m.registry().Render();
  EXPECT_NE(text.find("fracgpu_gpu_priority_launch_age_seconds{node=\"node-a\",device_uuid=\"" +
                      std::string(kGpu0) + "\"} 2.5\n"),
            std::string::npos)
      << text;
  // A stamp in the future (a lying or reset clock) is not exported as a negative age.
  m.Poll(6 * kSec);
  EXPECT_FALSE(m.snapshot().slices[0].last_kernel_age_s.has_value());
  EXPECT_TRUE(m.snapshot().priority_launch_age_s.empty());
}

// HAMi v2.10 vGPUmonitor's names (cmd/vGPUmonitor/metrics.go) by default: HAMi's labels,
// zone="vGPU", device_type "NVIDIA-" + the NVML name, utilisation in percent.
TEST_F(MonitorTest, HamiNamesCarryHamiLabelsAndUnits) {
  api_.Put("pods", Pod("team-a", "train", "uid-a", "node-a"));
  AddContainer("uid-a", "main", 30 * kMiB, 500);
  gpus_.util[kGpu0] = {{500, 0.25}};
  MonitorOptions o = Options();
  ASSERT_TRUE(o.hami_metric_names);  // the default
  Monitor m(o, &gpus_, lister_.get());
  m.Poll(kSec);
  std::string text = m.registry().Render();
  const std::string h =
      "{namespace=\"team-a\",pod=\"train\",container=\"main\",vdevice_index=\"0\",device_uuid=\"" +
      std::string(kGpu0) + "\",zone=\"vGPU\"}";
  // 2 MiB context + 30 MiB data (AddContainer), limit 256 MiB, SM 25 %.
  EXPECT_NE(text.find("hami_vgpu_memory_used_bytes" + h + " " + std::to_string(32 * kMiB) + "\n"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find("hami_container_device_memory_bytes" + h + " " + std::to_string(32 * kMiB) + "\n"),
      std::string::npos);
  EXPECT_NE(text.find("hami_vgpu_memory_limit_bytes" + h + " " + std::to_string(256 * kMiB) + "\n"),
            std::string::npos);
  EXPECT_NE(text.find("hami_vgpu_memory_context_bytes" + h + " " + std::to_string(2 * kMiB) + "\n"),
            std::string::npos);
  EXPECT_NE(text.find("hami_vgpu_memory_buffer_bytes" + h + " " + std::to_string(30 * kMiB) + "\n"),
            std::string::npos);
  EXPECT_NE(text.find("hami_container_device_utilization_ratio" + h + " 25\n"), std::string::npos);
  EXPECT_NE(
      text.find(
          "hami_host_gpu_utilization_ratio{node=\"node-a\",device_index=\"0\",device_uuid=\"" +
          std::string(kGpu0) + "\",device_type=\"NVIDIA-Fake A100\",zone=\"vGPU\"} 50\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE hami_vgpu_memory_used_bytes gauge\n"), std::string::npos);
  EXPECT_NE(text.find("hami_build_info{version=\"test\",revision=\""), std::string::npos) << text;
  EXPECT_EQ(text.find("vGPU_device_memory"),
            std::string::npos);  // pre-v2.10 names: only with --legacy-metrics

  // --legacy-metrics: HAMi's pre-v2.10 names too, the memory breakdown in labels.
  o.legacy_metric_names = true;
  Monitor legacy(o, &gpus_, lister_.get());
  legacy.Poll(kSec);
  std::string text_legacy = legacy.registry().Render();
  const std::string lo =
      "{podnamespace=\"team-a\",podname=\"train\",ctrname=\"main\",vdeviceid=\"0\",deviceuuid=\"" +
      std::string(kGpu0);
  EXPECT_NE(text_legacy.find("vGPU_device_memory_usage_in_bytes" + lo + "\",zone=\"vGPU\"} " +
                             std::to_string(32 * kMiB) + "\n"),
            std::string::npos)
      << text_legacy;
  EXPECT_NE(text_legacy.find("vGPU_device_memory_limit_in_bytes" + lo + "\",zone=\"vGPU\"} " +
                             std::to_string(256 * kMiB) + "\n"),
            std::string::npos);
  EXPECT_NE(text_legacy.find("Device_memory_desc_of_container" + lo + "\",context=\"" +
                             std::to_string(2 * kMiB) + "\",module=\"0\",data=\"" +
                             std::to_string(30 * kMiB) + "\",offset=\"0\",zone=\"vGPU\"} " +
                             std::to_string(32 * kMiB) + "\n"),
            std::string::npos)
      << text_legacy;
  EXPECT_NE(
      text_legacy.find("Device_utilization_desc_of_container" + lo + "\",zone=\"vGPU\"} 25\n"),
      std::string::npos);
  EXPECT_NE(text_legacy.find("HostCoreUtilization{nodeid=\"node-a\",deviceidx=\"0\",deviceuuid=\"" +
                             std::string(kGpu0) +
                             "\",devicetype=\"NVIDIA-Fake A100\",zone=\"vGPU\"} 50\n"),
            std::string::npos)
      << text_legacy;
  o.legacy_metric_names = false;

  // --hami-metrics=false: fracgpu's names only, same values.
  o.hami_metric_names = false;
  Monitor off(o, &gpus_, lister_.get());
  off.Poll(kSec);
  std::string text_off = off.registry().Render();
  EXPECT_EQ(text_off.find("hami_"), std::string::npos) << text_off;
  EXPECT_NE(
      text_off.find(
          "fracgpu_container_memory_used_bytes{node=\"node-a\",namespace=\"team-a\",pod=\"train\","
          "container=\"main\",device_uuid=\"" +
          std::string(kGpu0) + "\"} " + std::to_string(32 * kMiB) + "\n"),
      std::string::npos)
      << text_off;
}

TEST(ContainerDirs, NamesAreParsedOrRefused) {
  struct Case {
    const char* name;
    bool ok;
    const char* uid;
    const char* container;
  };
  const Case cases[] = {
      {"0f1e2d3c-aaaa-bbbb-cccc-000000000001_main", true, "0f1e2d3c-aaaa-bbbb-cccc-000000000001",
       "main"},
      {"uid_a_b", true, "uid", "a_b"},
      {"nounderscore", false, "", ""},
      {"_main", false, "", ""},
      {"uid_", false, "", ""},
      {"uid_..", false, "", ""},
      {"..uid_x", false, "", ""},
      {"uid_a\nb", false, "", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = ParseContainerDirName(c.name);
    ASSERT_EQ(r.ok(), c.ok);
    if (c.ok) {
      EXPECT_EQ(r->pod_uid, c.uid);
      EXPECT_EQ(r->container, c.container);
    } else {
      EXPECT_NE(r.status().message().find(c.name), std::string::npos);
    }
  }
}

TEST(ContainerDirs, PodListWithoutItemsIsRefused) {
  EXPECT_FALSE(PodsFromList(nlohmann::json::object()).ok());
  EXPECT_FALSE(PodsFromList(nlohmann::json::array()).ok());
  auto ok = PodsFromList(
      {{"items", {Pod("a", "b", "u1", "n"), {{"metadata", {{"name", "no-uid"}}}}, 5}}});
  ASSERT_TRUE(ok.ok());
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_EQ((*ok)[0], (PodRef{"u1", "a", "b", {}, {}, {}}));
}

}  // namespace
}  // namespace fracgpu::monitor::testing
