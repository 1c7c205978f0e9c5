// The node agent's priority files (monitor/priority.h, issue 32 item 2): the priority comes from
// the device plugin's limits file, the launch stamps from the priority-0 containers' regions;
// a forged region (priority, foreign GPU, future stamp, bad layout) never makes the agent hold
// a neighbour back, and the file libvgpu.so reads is the agent's (0644, 64 bytes, check word).
#include "monitor/priority.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "api/node_gpu.h"
#include "region_files.h"

namespace fracgpu::monitor {
namespace {

namespace fs = std::filesystem;
using testing::DeviceSpec;
using testing::MakeRegion;
using testing::TempDir;

constexpr char kGpu[] = "GPU-aaaaaaaa-0000-0000-0000-000000000001";
constexpr char kOther[] = "GPU-aaaaaaaa-0000-0000-0000-000000000002";
constexpr uint64_t kNow = 1'000'000'000'000ull;  // CLOCK_MONOTONIC ns of the polls

class PriorityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    hook_ = tmp_.path() + "/hook";
    node_ = hook_ + "/vgpu/node";
    for (const auto& d : {hook_ + "/vgpu/limits", hook_ + "/vgpu/containers", node_})
      fs::create_directories(d);
  }
  void TearDown() override {
    for (auto& h : regions_) vgpu::RegionClose(&h);
  }
  // A container: limits file (priority, GPUs) and a region naming `region_uuids`.
  vgpu::Region* Container(const std::string& slot, int priority, const std::string& gpus,
                          const std::vector<std::string>& region_uuids) {
    std::ofstream(hook_ + "/vgpu/limits/" + slot + ".env")
        << "NVIDIA_VISIBLE_DEVICES=" << gpus
        << "\nCUDA_DEVICE_MEMORY_LIMIT_0=1000m\nCUDA_TASK_PRIORITY=" << priority << "\n";
    fs::create_directories(hook_ + "/vgpu/containers/" + slot);
    std::vector<DeviceSpec> devs;
    for (const auto& u : region_uuids) devs.push_back({u, 0, 0});
    regions_.push_back(MakeRegion(hook_ + "/vgpu/containers/" + slot + "/region.cache", devs));
    return regions_.back().region;
  }
  std::optional<uint64_t> Published(const std::string& uuid) {
    return ReadNodeGpuFile(node_ + "/" + uuid);
  }

  TempDir tmp_;
  std::string hook_, node_;
  std::vector<vgpu::RegionHandle> regions_;
};

TEST_F(PriorityTest, PublishesTheNewestPriorityZeroLaunchPerGpu) {
  vgpu::Region* high = Container("uid-h_main", 0, kGpu, {kGpu});
  vgpu::Region* low = Container("uid-l_main", 1, kGpu, {kGpu});
  PriorityPublisher p(hook_, node_);
  p.Poll(kNow);
  EXPECT_EQ(Published(kGpu), 0u);  // the file exists from the first pass: no launch yet
  high->devices[0].last_launch_ns.store(kNow - 7);
  low->devices[0].last_launch_ns.store(kNow - 1);  // a priority-1 launch never counts
  p.Poll(kNow);
  EXPECT_EQ(Published(kGpu), kNow - 7);
  EXPECT_EQ(p.published().at(kGpu), kNow - 7);
  // The file is the agent's: 64 bytes, 0644 whatever the umask, check word = ~stamp.
  struct stat st {};
  ASSERT_EQ(stat((node_ + "/" + kGpu).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  EXPECT_EQ(st.st_size, 64);
  std::string bytes = testing::ReadBytes(node_ + "/" + kGpu);
  api::NodeGpu n{};
  std::memcpy(&n, bytes.data(), sizeof n);
  EXPECT_EQ(n.version, 2u);
  EXPECT_EQ(n.high_last_launch_check, ~(kNow - 7));
}

// Contention (GPU_CORE_UTILIZATION_POLICY=default, issue 34 item 4): the node file says until
// when two or more containers count as active on the GPU, whatever their priority: the
// second-newest container's last launch + api::kContentionActiveNs. One container alone, or
// two processes of one container (one region), is not contention.
TEST_F(PriorityTest, PublishesUntilWhenTwoContainersAreActiveOnAGpu) {
  vgpu::Region* a = Container("uid-a_main", 1, kGpu, {kGpu});
  vgpu::Region* b = Container("uid-b_main", 1, kGpu, {kGpu});
  PriorityPublisher p(hook_, node_);
  auto contended = [&]() -> std::optional<uint64_t> {
    std::string bytes = testing::ReadBytes(node_ + "/" + kGpu);
    api::NodeGpu n{};
    if (bytes.size() != sizeof n) return std::nullopt;
    std::memcpy(&n, bytes.data(), sizeof n);
    uint64_t until = 0;
    if (!api::NodeGpuContendedUntil(n, bytes.size(), &until)) return std::nullopt;
    return until;
  };
  p.Poll(kNow);
  EXPECT_EQ(contended(), 0u);  // valid and "never contended"
  a->devices[0].last_launch_ns.store(kNow - 3);
  p.Poll(kNow);
  EXPECT_EQ(contended(), 0u) << "a container alone is not contended";
  b->devices[0].last_launch_ns.store(kNow - 20);
  p.Poll(kNow);
  EXPECT_EQ(contended(), kNow - 20 + api::kContentionActiveNs);
  EXPECT_EQ(p.contended_until().at(kGpu), kNow - 20 + api::kContentionActiveNs);
  EXPECT_EQ(Published(kGpu), 0u);  // priority-1 launches still set no priority stamp
  // A stamp in the future (forged) counts as no launch, for contention too.
  b->devices[0].last_launch_ns.store(kNow + 1'000'000'000);
  p.Poll(kNow + 1);
  EXPECT_EQ(contended(), 0u);
}

// A priority-1 tenant that writes priority 0 into its own region, stamps a GPU it was not
// given, or stamps the future, gains nothing: none of it reaches the node file.
TEST_F(PriorityTest, ForgedRegionsNeverHoldNeighboursBack) {
  vgpu::Region* low = Container("uid-l_main", 1, kGpu, {kGpu});
  low->priority = 0;  // forged in the tenant's own region: the limits file says 1
  low->devices[0].last_launch_ns.store(kNow - 1);
  // A priority-0 tenant given kOther whose region claims kGpu at that index.
  vgpu::Region* liar = Container("uid-x_main", 0, kOther, {kGpu});
  liar->devices[0].last_launch_ns.store(kNow - 2);
  // A priority-0 tenant stamping the future (would hold neighbours until then).
  vgpu::Region* future = Container("uid-f_main", 0, kGpu, {kGpu});
  future->devices[0].last_launch_ns.store(kNow + 3'600'000'000'000ull);
  PriorityPublisher p(hook_, node_);
  p.Poll(kNow);
  EXPECT_EQ(Published(kGpu), 0u);
  EXPECT_EQ(Published(kOther), 0u);
}

// A region that is not a region (truncated, a symlink, a directory, a foreign version) counts as
// no launch; the pass still publishes the others.
TEST_F(PriorityTest, BrokenRegionsCountAsNoLaunch) {
  vgpu::Region* good = Container("uid-g_main", 0, kGpu, {kGpu});
  good->devices[0].last_launch_ns.store(kNow - 100);
  vgpu::Region* t = Container("uid-t_main", 0, kGpu, {kGpu});
  t->devices[0].last_launch_ns.store(kNow - 5);
  fs::resize_file(hook_ + "/vgpu/containers/uid-t_main/region.cache", 4096);
  vgpu::Region* v = Container("uid-v_main", 0, kGpu, {kGpu});
  v->devices[0].last_launch_ns.store(kNow - 6);
  v->version = 99;
  vgpu::Region* s = Container("uid-s_main", 0, kGpu, {kGpu});
  s->devices[0].last_launch_ns.store(kNow - 7);
  fs::rename(hook_ + "/vgpu/containers/uid-s_main/region.cache", tmp_.path() + "/elsewhere");
  fs::create_symlink(tmp_.path() + "/elsewhere",
                     hook_ + "/vgpu/containers/uid-s_main/region.cache");
  PriorityPublisher p(hook_, node_);
  p.Poll(kNow);
  EXPECT_EQ(Published(kGpu), kNow - 100);
}

// The agent repairs a node file someone replaced or widened (mode, size), and refuses to write
// through a symlink planted at its path.
TEST_F(PriorityTest, RepairsModeAndSizeAndNeverFollowsSymlinks) {
  Container("uid-h_main", 0, kGpu, {kGpu})->devices[0].last_launch_ns.store(kNow - 9);
  std::ofstream(node_ + "/" + kGpu) << std::string(4096, 'x');
  fs::permissions(node_ + "/" + kGpu, fs::perms::all);
  fs::create_symlink(tmp_.path() + "/target", node_ + "/" + kOther);
  Container("uid-o_main", 0, kOther, {kOther})->devices[0].last_launch_ns.store(kNow - 9);
  PriorityPublisher p(hook_, node_);
  p.Poll(kNow);
  EXPECT_EQ(Published(kGpu), kNow - 9);
  struct stat st {};
  ASSERT_EQ(stat((node_ + "/" + kGpu).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  EXPECT_FALSE(fs::exists(tmp_.path() + "/target"));
  EXPECT_FALSE(Published(kOther).has_value());
}

// A node file someone removed or broke while its stamp stayed the same is rewritten at the next
// re-listing of the limits files (kRescanNs), not left broken until the stamp changes.
TEST_F(PriorityTest, BrokenNodeFileIsRewrittenAtTheNextRescan) {
  Container("uid-h_main", 0, kGpu, {kGpu})->devices[0].last_launch_ns.store(kNow - 3);
  PriorityPublisher p(hook_, node_);
  p.Poll(kNow);
  ASSERT_EQ(Published(kGpu), kNow - 3);
  testing::WriteBytes(node_ + "/" + kGpu, "x");
  p.Poll(kNow + PriorityPublisher::kRescanNs);
  EXPECT_EQ(Published(kGpu), kNow - 3);
}

}  // namespace
}  // namespace fracgpu::monitor
