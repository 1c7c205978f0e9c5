// Region layout version 2 (docs/vgpu.md "The shared region"): the per-slot breakdown
// used = context + module + data, host PIDs (docs/sm-limiter.md "Host PIDs"), and
// RegionDevice::last_launch_ns. The fake driver occupies FAKE_CUDA_CTX_BYTES per context and
// FAKE_CUDA_MODULE_BYTES per module, as the real one occupies memory for both; the expected
// figures below are those settings, by hand.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "harness.h"
#include "vgpu/region.h"

namespace fracgpu::vgpu::testing {
namespace {

constexpr const char* kOneGpu = "GPU-11111111-1111-1111-1111-111111111111:1024";
constexpr unsigned kOffset = 1000000;  // FAKE_NVML_HOST_PID_OFFSET

/// A parsed "region 0 <host_pid> <used> <context> <module> <data> <last_launch> <now> <dev used>".
struct SlotView {
  bool ok = false;
  long long host_pid = 0;
  unsigned long long used = 0, context = 0, module = 0, data = 0, last_launch = 0, now = 0,
                     device_used = 0;
};

SlotView ParseRegion(const std::string& line) {
  SlotView v;
  auto f = Fields(line);
  if (f.size() != 10 || f[0] != "region" || f[1] != "0") return v;
  v.ok = true;
  v.host_pid = std::stoll(f[2]);
  v.used = std::stoull(f[3]);
  v.context = std::stoull(f[4]);
  v.module = std::stoull(f[5]);
  v.data = std::stoull(f[6]);
  v.last_launch = std::stoull(f[7]);
  v.now = std::stoull(f[8]);
  v.device_used = std::stoull(f[9]);
  return v;
}

std::vector<SlotView> Regions(const std::vector<std::string>& lines) {
  std::vector<SlotView> out;
  for (const auto& l : lines)
    if (l.rfind("region", 0) == 0) out.push_back(ParseRegion(l));
  return out;
}

std::map<std::string, std::string> Env(const Sandbox& box, bool pid_namespace) {
  auto env = box.Env();
  env["FAKE_GPU_DEVICES"] = kOneGpu;
  env["CUDA_DEVICE_MEMORY_LIMIT"] = "100m";
  env["FAKE_CUDA_CTX_BYTES"] = std::to_string(5 * kMiB);
  env["FAKE_CUDA_MODULE_BYTES"] = std::to_string(3 * kMiB);
  if (pid_namespace) env["FAKE_NVML_HOST_PID_OFFSET"] = std::to_string(kOffset);
  return env;
}

TEST(RegionV2Layout, VersionTwoAndNaturalAlignment) {
  EXPECT_EQ(kRegionVersion, 2u);
  EXPECT_EQ(offsetof(RegionSlot, host_pid), 8u);
  EXPECT_EQ(offsetof(RegionSlot, host_pid) % alignof(int32_t), 0u);
  EXPECT_EQ(offsetof(RegionSlot, context_bytes) % 8, 0u);
  EXPECT_EQ(offsetof(RegionSlot, module_bytes) - offsetof(RegionSlot, context_bytes),
            8u * kMaxDevices);
  EXPECT_EQ(offsetof(RegionSlot, data_bytes) - offsetof(RegionSlot, module_bytes),
            8u * kMaxDevices);
  EXPECT_EQ(offsetof(RegionDevice, last_launch_ns) % 8, 0u);
}

TEST(RegionV2Layout, VersionOneFileIsRefused) {
  std::vector<unsigned char> bytes(sizeof(Region), 0);
  auto* r = reinterpret_cast<Region*>(bytes.data());
  r->magic = kRegionMagic;
  r->version = 2;
  r->region_size = sizeof(Region);
  r->slot_size = sizeof(RegionSlot);
  r->max_devices = kMaxDevices;
  r->max_slots = kMaxSlots;
  EXPECT_EQ(RegionValidate(bytes.data(), bytes.size()), RegionError::kOk);
  r->version = 1;
  EXPECT_EQ(RegionValidate(bytes.data(), bytes.size()), RegionError::kBadLayout);
}

class Breakdown : public ::testing::TestWithParam<bool> {};  // param: PID namespace emulated

// context 5 MiB (one primary context), modules 3 MiB each, data as allocated; used is the sum,
// and unloading a module or freeing data moves only its own part.
TEST_P(Breakdown, UsedIsContextPlusModulePlusData) {
  Sandbox box;
  auto out = RunApp(box, Env(box, GetParam()),
                    {"init", "alloc:10485760", "module", "module", "library", "region:0",
                     "moduleunload", "libraryunload", "free", "region:0"});
  auto r = Regions(out);
  ASSERT_EQ(r.size(), 2u);
  ASSERT_TRUE(r[0].ok && r[1].ok);
  EXPECT_EQ(r[0].context, 5 * kMiB);
  EXPECT_EQ(r[0].module, 9 * kMiB);  // two modules and one library
  EXPECT_EQ(r[0].data, 10 * kMiB);
  EXPECT_EQ(r[0].used, 24 * kMiB);
  EXPECT_EQ(r[0].device_used, 24 * kMiB);
  EXPECT_EQ(r[1].context, 5 * kMiB);
  EXPECT_EQ(r[1].module, 3 * kMiB);
  EXPECT_EQ(r[1].data, 0u);
  EXPECT_EQ(r[1].used, 8 * kMiB);
}

// A module that does not fit under the limit is unloaded and refused; nothing stays charged.
TEST_P(Breakdown, ModuleOverTheLimitIsRefusedAndUndone) {
  Sandbox box;
  auto env = Env(box, GetParam());
  env["CUDA_DEVICE_MEMORY_LIMIT"] = "20m";
  auto out = RunApp(box, env, {"init", "alloc:12582912", "module", "module", "region:0", "info"});
  ASSERT_GE(out.size(), 6u);
  EXPECT_EQ(Rc(out[2]), 0);  // 5 + 12 + 3 = 20 MiB: fits exactly
  EXPECT_EQ(Rc(out[3]), 2);  // CUDA_ERROR_OUT_OF_MEMORY
  auto r = ParseRegion(out[4]);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.module, 3 * kMiB);
  EXPECT_EQ(r.used, 20 * kMiB);
  // The driver's memory was given back too: the container sees limit - used = 0 free.
  auto info = Fields(out[5]);
  ASSERT_EQ(info.size(), 4u);
  EXPECT_EQ(std::stoull(info[2]), 0u);
}

// The last context going away frees modules with it (the driver does): every part returns to 0.
TEST_P(Breakdown, ReleasingTheContextReturnsEveryPart) {
  Sandbox box;
  auto out = RunApp(box, Env(box, GetParam()),
                    {"init", "alloc:1048576", "module", "release_primary", "region:0"});
  auto r = Regions(out);
  ASSERT_EQ(r.size(), 1u);
  ASSERT_TRUE(r[0].ok);
  EXPECT_EQ(r[0].context, 0u);
  EXPECT_EQ(r[0].module, 0u);
  EXPECT_EQ(r[0].data, 0u);
  EXPECT_EQ(r[0].used, 0u);
}

INSTANTIATE_TEST_SUITE_P(PidNamespace, Breakdown, ::testing::Bool());

// The slot's host_pid is the PID NVML reports: pid + offset in an emulated namespace, the pid
// itself in the host's namespace (where this test runs unless the offset is set).
TEST(HostPid, SlotHoldsTheNvmlPid) {
  for (bool ns : {false, true}) {
    Sandbox box;
    Child c = Spawn(box, Env(box, ns), {"init", "region:0"});
    auto r = Regions(Finish(c));
    ASSERT_EQ(r.size(), 1u);
    ASSERT_TRUE(r[0].ok);
    EXPECT_EQ(r[0].host_pid, static_cast<long long>(c.pid) + (ns ? kOffset : 0))
        << "namespace " << ns;
  }
}

// Two processes of one container create their contexts at the same moment (the fake driver's
// barrier: both have looked at NVML before either context exists, and both contexts exist
// before either looks again), so each sees two new PIDs; each must still find its own.
TEST(HostPid, TwoProcessesStartingTogetherEachGetTheirOwn) {
  Sandbox box;
  auto env = Env(box, true);
  env["FAKE_CUDA_CTX_BARRIER"] = "2";
  Child a = Spawn(box, env, {"init", "region:0", "wait"});
  Child b = Spawn(box, env, {"init", "region:0", "wait"});
  std::vector<SlotView> ra, rb;
  for (int i = 0; i < 3; ++i) {
    std::string la = ReadLine(a), lb = ReadLine(b);
    if (la.rfind("region", 0) == 0) ra.push_back(ParseRegion(la));
    if (lb.rfind("region", 0) == 0) rb.push_back(ParseRegion(lb));
  }
  // b inherited the write end of a's stdin: close both before waiting, or a never sees EOF.
  close(a.in);
  close(b.in);
  a.in = b.in = -1;
  Finish(a);
  Finish(b);
  ASSERT_EQ(ra.size(), 1u);
  ASSERT_EQ(rb.size(), 1u);
  EXPECT_EQ(ra[0].host_pid, static_cast<long long>(a.pid) + kOffset);
  EXPECT_EQ(rb[0].host_pid, static_cast<long long>(b.pid) + kOffset);
  // Each context was measured against its own process's usage: 5 MiB each, not 0 or 10.
  EXPECT_EQ(ra[0].context, 5 * kMiB);
  EXPECT_EQ(rb[0].context, 5 * kMiB);
}

// last_launch_ns: 0 before any launch; after a launch, a CLOCK_MONOTONIC time no later than
// the reading taken after it and within the stamp period before that reading.
TEST(LastLaunch, StampedByALaunch) {
  Sandbox box;
  auto out = RunApp(box, Env(box, false), {"init", "region:0", "launch:3", "region:0"});
  auto r = Regions(out);
  ASSERT_EQ(r.size(), 2u);
  ASSERT_TRUE(r[0].ok && r[1].ok);
  EXPECT_EQ(r[0].last_launch, 0u);
  EXPECT_GT(r[1].last_launch, r[0].now);
  EXPECT_LE(r[1].last_launch, r[1].now);
}

// The stamp follows later launches: the launch path reads no clock, a timer thread of
// libvgpu.so clears the "stamped this period" flag every kLaunchStampPeriodNs (10 ms), and the
// next launch stamps again. After 30 ms without launches, one launch moves the stamp past the
// reading taken before it; a process that stops launching keeps its last stamp.
TEST(LastLaunch, RefreshedByALaunchAfterAPeriod) {
  Sandbox box;
  auto out = RunApp(box, Env(box, false),
                    {"init", "launch:1", "region:0", "wallsleep:30", "region:0", "launch:1",
                     "region:0", "wallsleep:30", "region:0"});
  auto r = Regions(out);
  ASSERT_EQ(r.size(), 4u);
  for (const auto& v : r) ASSERT_TRUE(v.ok);
  EXPECT_GT(r[0].last_launch, 0u);
  EXPECT_EQ(r[1].last_launch, r[0].last_launch);  // no launch: unchanged
  EXPECT_GT(r[2].last_launch, r[1].now);          // stamped again by the second launch
  EXPECT_LE(r[2].last_launch, r[2].now);
  EXPECT_EQ(r[3].last_launch, r[2].last_launch);
}

// With an SM limit (the paced launch path) the stamp is written too.
TEST(LastLaunch, StampedOnThePacedPath) {
  Sandbox box;
  auto env = Env(box, true);
  env["CUDA_DEVICE_SM_LIMIT"] = "50";
  auto out = RunApp(box, env, {"init", "launch:2", "region:0"});
  auto r = Regions(out);
  ASSERT_EQ(r.size(), 1u);
  ASSERT_TRUE(r[0].ok);
  EXPECT_GT(r[0].last_launch, 0u);
  EXPECT_LE(r[0].last_launch, r[0].now);
}

}  // namespace
}  // namespace fracgpu::vgpu::testing
