// cuGetProcAddress_v2 answers through libvgpu.so are ABI-exact: each (symbol, version, flags)
// gets the hook of the very variant the driver returns (src/vgpu/cuda_variants.def, generated
// from the CUDA 13.0 toolkit by scripts/cuda-tables/gen_variants.py), the driver's own answer
// where we do not hook, and a refusal for a variant newer than the table (docs/vgpu.md).
// vgpu_app's proc op prints where the returned pointer lives (dladdr).
#include <gtest/gtest.h>

#include "harness.h"

namespace fracgpu::vgpu::testing {
namespace {

std::vector<std::string> Proc(const std::vector<std::string>& ops,
                              const std::string& driver = "13000", const std::string& newer = "") {
  Sandbox box;
  auto env = box.Env();
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "512m";
  env["FAKE_CUDA_DRIVER_VERSION"] = driver;
  if (!newer.empty()) env["FAKE_CUDA_NEWER_VARIANT"] = newer;
  std::vector<std::string> all = {"init"};
  all.insert(all.end(), ops.begin(), ops.end());
  auto out = RunApp(box, env, all);
  EXPECT_EQ(out.size(), all.size());
  if (!out.empty()) out.erase(out.begin());
  return out;
}

TEST(VgpuProcAddress, EachVariantGetsItsOwnHook) {
  auto out = Proc({"proc:cuCtxSynchronize:13000:0", "proc:cuCtxSynchronize:12090:0",
                   "proc:cuDevicePrimaryCtxRelease:7000:0",
                   "proc:cuDevicePrimaryCtxRelease:11000:0", "proc:cuDevicePrimaryCtxReset:10020:0",
                   "proc:cuMemAlloc:13000:2", "proc:cuLaunchKernel:13000:2",
                   "proc:cuLaunchKernel:13000:0", "proc:cuGetProcAddress:13000:0"});
  ASSERT_EQ(out.size(), 9u);
  // PFN_cuCtxSynchronize_v13000 takes a context: the _v2 hook, never the v1 one (issue 13).
  EXPECT_EQ(out[0], "proc 0 0 vgpu cuCtxSynchronize_v2");
  EXPECT_EQ(out[1], "proc 0 0 vgpu cuCtxSynchronize");
  EXPECT_EQ(out[2], "proc 0 0 vgpu cuDevicePrimaryCtxRelease");
  EXPECT_EQ(out[3], "proc 0 0 vgpu cuDevicePrimaryCtxRelease_v2");
  EXPECT_EQ(out[4], "proc 0 0 vgpu cuDevicePrimaryCtxReset");
  EXPECT_EQ(out[5], "proc 0 0 vgpu cuMemAlloc_v2");  // no per-thread variant: the plain one
  EXPECT_EQ(out[6], "proc 0 0 vgpu cuLaunchKernel_ptsz");
  EXPECT_EQ(out[7], "proc 0 0 vgpu cuLaunchKernel");
  EXPECT_EQ(out[8], "proc 0 0 vgpu cuGetProcAddress_v2");
}

TEST(VgpuProcAddress, BadRequestsGetTheDriversAnswer) {
  auto out = Proc({"proc:cuNoSuchEntryPoint:13000:0", "proc:cuMemAlloc:13010:0",
                   "proc:cuMemAlloc:13000:7", "proc::13000:0", "proc:cuMemPoolCreate:11010:0"});
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[0], "proc 0 1 null -");   // unknown: success, null, SYMBOL_NOT_FOUND
  EXPECT_EQ(out[1], "proc 1 -1 null -");  // above the driver's version: INVALID_VALUE
  EXPECT_EQ(out[2], "proc 1 -1 null -");  // odd flags: INVALID_VALUE
  EXPECT_EQ(out[3], "proc 0 1 null -");
  EXPECT_EQ(out[4], "proc 0 2 null -");  // introduced in 11020: VERSION_NOT_SUFFICIENT
}

// A driver newer than the table: a request above 13000 whose answer is the 13000 variant is
// hooked; one that is a newer variant (unknown signature) is refused, never mis-hooked.
TEST(VgpuProcAddress, VariantNewerThanTheTableIsRefused) {
  auto same = Proc({"proc:cuMemAlloc:13020:0", "proc:cuCtxSynchronize:13020:0"}, "13020");
  ASSERT_EQ(same.size(), 2u);
  EXPECT_EQ(same[0], "proc 0 0 vgpu cuMemAlloc_v2");
  EXPECT_EQ(same[1], "proc 0 0 vgpu cuCtxSynchronize_v2");
  auto newer =
      Proc({"proc:cuMemAlloc:13020:0", "proc:cuMemAlloc:13000:0", "proc:cuStreamCreate:13020:0"},
           "13020", "cuMemAlloc:13010");
  ASSERT_EQ(newer.size(), 3u);
  EXPECT_EQ(newer[0], "proc 801 1 null -");  // CUDA_ERROR_NOT_SUPPORTED, SYMBOL_NOT_FOUND
  EXPECT_EQ(newer[1], "proc 0 0 vgpu cuMemAlloc_v2");
  EXPECT_EQ(Fields(newer[2])[3], "wake");  // not a hooked base: the driver's answer, wrapped
}

// cudaDeviceReset-style release through the legacy v1 entry points drops the charges.
TEST(VgpuProcAddress, LegacyPrimaryReleaseAndResetDropCharges) {
  for (const char* which : {"release", "reset"}) {
    Sandbox box;
    auto env = box.Env();
    env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "512m";
    env["FAKE_CUDA_CTX_BYTES"] = "4194304";
    auto out = RunApp(
        box, env,
        {"init", "alloc:1048576", "region:0", std::string("primary_v1:") + which, "region:0"});
    ASSERT_EQ(out.size(), 5u);
    auto before = Fields(out[2]), after = Fields(out[4]);
    ASSERT_GE(before.size(), 10u);
    ASSERT_GE(after.size(), 10u);
    EXPECT_EQ(before[3], std::to_string(5 * kMiB)) << which;  // context 4 MiB + 1 MiB
    EXPECT_EQ(Rc(out[3]), 0) << which;
    EXPECT_EQ(after[3], "0") << which;
    EXPECT_EQ(after[9], "0") << which;  // the device's container-wide total
  }
}

}  // namespace
}  // namespace fracgpu::vgpu::testing
