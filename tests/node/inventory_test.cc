// Register entries and replica IDs built from discovered GPUs (docs/design/CONTRACT.md §2,
// docs/design/hami-behaviour.md §4.3), the health watcher and the device state.
#include "node/inventory.h"

#include <gtest/gtest.h>

#include <deque>

#include "node/device_state.h"
#include "node/health.h"
#include "test_support.h"

namespace fracgpu::node {
namespace {

using namespace deviceplugin::testing;  // NOLINT (GPUs and UUIDs of the plugin tests)

TEST(Inventory, TypeNameGetsTheNvidiaPrefixOnlyWhenMissing) {
  EXPECT_EQ(GpuTypeName("Tesla V100-PCIE-32GB"), "NVIDIA-Tesla V100-PCIE-32GB");
  EXPECT_EQ(GpuTypeName("NVIDIA A100-SXM4-80GB"), "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(GpuTypeName("NVIDIA-H100"), "NVIDIA-H100");
}

TEST(Inventory, EntriesApplyScalingSplitCountHealthAndFilters) {
  DeviceConfig c;
  c.split_count = 5;
  c.memory_scaling = 1.5;
  c.core_scaling = 2.0;
  auto gpus = TwoGpus();
  gpus[1].total_memory_bytes = 16ULL * 1024 * 1024 * 1024 + 512 * 1024;  // 16 GiB + half a MiB
  auto d = BuildDeviceInfos(gpus, c, {kUuidB});
  ASSERT_EQ(d.size(), 2u);
  const core::DeviceInfo a{.devmem_mib = 49152,
                           .index = 0,
                           .count = 5,
                           .devcore = 200,
                           .numa = 0,
                           .health = true,
                           .uuid = kUuidA,
                           .type = "NVIDIA-Tesla V100-PCIE-32GB",
                           .mode = "hami-core"};
  const core::DeviceInfo b{.devmem_mib = 24576,  // floor(16384×1.5)
                           .index = 1,
                           .count = 5,
                           .devcore = 200,
                           .numa = 1,
                           .health = false,
                           .uuid = kUuidB,
                           .type = "NVIDIA-Tesla V100-PCIE-32GB",
                           .mode = "hami-core"};
  EXPECT_EQ(d[0], a);
  EXPECT_EQ(d[1], b);
  c.filter_indices = {0};
  EXPECT_EQ(BuildDeviceInfos(gpus, c, {}).size(), 1u);
  c.filter_indices = {};
  c.filter_uuids = {kUuidB};
  auto only_a = BuildDeviceInfos(gpus, c, {});
  ASSERT_EQ(only_a.size(), 1u);
  EXPECT_EQ(only_a[0].uuid, kUuidA);
}

TEST(Inventory, UnsizedGpuUsesPreconfiguredMemoryOrIsLeftOut) {
  auto gpus = TwoGpus();
  gpus[0].total_memory_bytes = 0;
  DeviceConfig c;
  EXPECT_EQ(BuildDeviceInfos(gpus, c, {}).size(), 1u);
  c.preconfigured_memory_mib = 120000;
  auto d = BuildDeviceInfos(gpus, c, {});
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].devmem_mib, 120000);
}

TEST(Inventory, ReplicaIdsRoundTrip) {
  EXPECT_EQ(ReplicaId(kUuidA, 7), std::string(kUuidA) + "-7");
  auto u = ReplicaUuid(std::string(kUuidA) + "-12");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(*u, kUuidA);
  for (const char* bad : {"", "GPU-", "-3", "GPU-abc-x1", "nodash"}) {
    auto r = ReplicaUuid(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("<GPU UUID>-<replica>"), std::string::npos);
  }
  EXPECT_LE(ReplicaId(kUuidA, 999).size(), 63u);  // kubelet's documented limit
}

// GpuSource whose Xid events are scripted.
class ScriptedGpus : public nvml::GpuSource {
 public:
  std::deque<Result<std::optional<nvml::XidEvent>>> events;
  base::StopSignal* stop_when_empty = nullptr;
  Result<std::vector<nvml::GpuInfo>> ListGpus() override { return TwoGpus(); }
  Result<std::optional<nvml::XidEvent>> WaitXid(std::chrono::milliseconds) override {
    if (events.empty()) {
      stop_when_empty->Stop();
      return std::optional<nvml::XidEvent>();
    }
    auto e = events.front();
    events.pop_front();
    return e;
  }
};

TEST(Health, CriticalXidMarksTheGpuUnhealthyIgnoredOnesDoNot) {
  DeviceState state(TwoGpus(), DeviceConfig{});
  ScriptedGpus gpus;
  base::StopSignal stop;
  gpus.stop_when_empty = &stop;
  gpus.events = {std::optional<nvml::XidEvent>(nvml::XidEvent{kUuidA, 13}),   // ignored
                 std::optional<nvml::XidEvent>(),                             // timeout
                 std::optional<nvml::XidEvent>(nvml::XidEvent{kUuidB, 79}),   // fallen off the bus
                 std::optional<nvml::XidEvent>(nvml::XidEvent{kUuidB, 48})};  // already unhealthy
  int changes = 0;
  auto policy = ParseXidPolicy("", "");
  ASSERT_TRUE(policy.ok());
  Status st = WatchHealth(&gpus, *policy, &state, &stop, [&] { ++changes; });
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(changes, 1);
  auto d = state.Devices();
  EXPECT_TRUE(d[0].health);
  EXPECT_FALSE(d[1].health);
}

TEST(Health, XidWithoutDeviceMarksEveryGpuAndNoEventApiStopsWatching) {
  DeviceState state(TwoGpus(), DeviceConfig{});
  EXPECT_TRUE(ApplyXidEvent({"", 79}, XidPolicy{}, &state));
  for (const auto& d : state.Devices()) EXPECT_FALSE(d.health);
  ScriptedGpus gpus;
  base::StopSignal stop;
  gpus.stop_when_empty = &stop;
  gpus.events = {Result<std::optional<nvml::XidEvent>>(Unavailable("no event API"))};
  Status st = WatchHealth(&gpus, XidPolicy{}, &state, &stop, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
}

TEST(DeviceState, WaitForChangeReturnsAtOnceWhenAlreadyChanged) {
  DeviceState state(TwoGpus(), DeviceConfig{});
  uint64_t v = state.version();
  EXPECT_FALSE(state.MarkUnhealthy("GPU-unknown"));
  EXPECT_EQ(state.version(), v);
  ASSERT_TRUE(state.MarkUnhealthy(kUuidA));
  EXPECT_EQ(state.WaitForChange(v, std::chrono::hours(1)), v + 1);
}

}  // namespace
}  // namespace fracgpu::node
