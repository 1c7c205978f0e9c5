// libvgpu.so's hot-path rule, checked: a steady-state cuMemAlloc_v2 + cuMemFree_v2 pair, a
// cuLaunchKernel with no SM limit and a cuGraphLaunch of a graph whose graph memory is already
// reserved make no system call. vgpu_app's nosyscall op runs them in a child under a seccomp
// filter that traps every system call (tests/vgpu/vgpu_app.cc), through the linked symbols and
// through dlopen + cuGetProcAddress_v2 (the CUDA runtime's path). Before the fix the dead-slot
// sweep ran on allocations (kill + open/read/close of /proc).
#include <gtest/gtest.h>

#include "harness.h"

namespace fracgpu::vgpu::testing {
namespace {

// `graph_bytes`: graph memory of the launched graph (0: a graph with one empty node).
void ExpectNoSyscall(const std::string& path, const std::string& limit,
                     unsigned long long graph_bytes) {
  Sandbox box;
  auto env = box.Env();
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = limit;
  env["FAKE_CUDA_DRIVER_VERSION"] = "13000";
  auto out = RunApp(box, env,
                    {"init", "nosyscall:2000:1048576:" + path + ":" + std::to_string(graph_bytes)});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(Rc(out[0]), 0);
  auto f = Fields(out[1]);
  ASSERT_GE(f.size(), 2u) << out[1];
  ASSERT_EQ(f[0], "nosyscall");
  if (f[1] == "0") GTEST_SKIP() << "seccomp filters unavailable here (errno " << f[2] << ")";
  ASSERT_GE(f.size(), 4u) << out[1];
  EXPECT_EQ(f[2], "0") << "system calls trapped (first numbers follow): " << out[1];
  // Errors: a call failed under the filter, or an allocation was not charged in the region.
  EXPECT_EQ(f[3], "0") << out[1];
}

TEST(VgpuHotPath, AllocFreeAndLaunchMakeNoSystemCallLinked) {
  ExpectNoSyscall("d", "4g", 2 * kMiB);
}

TEST(VgpuHotPath, AllocFreeAndLaunchMakeNoSystemCallViaGetProcAddress) {
  ExpectNoSyscall("g", "4g", 2 * kMiB);
}

// A limit close to the usage: the pair still fits, nothing dead is in the way, no sweep.
TEST(VgpuHotPath, NearTheLimitStillNoSystemCall) { ExpectNoSyscall("g", "2m", 0); }

}  // namespace
}  // namespace fracgpu::vgpu::testing
