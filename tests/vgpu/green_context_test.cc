// Green contexts under libvgpu.so (docs/vgpu.md "What is charged"): a green context retains the
// device's primary context and occupies memory of its own; both are charged as context_bytes,
// the green context's share dropped at cuGreenCtxDestroy (with the primary context's when that
// was its last reference: the driver then frees the device's allocations too). Over the limit
// the creation is refused with CUDA_ERROR_OUT_OF_MEMORY and nothing stays created or charged.
// The fake (tests/fakes/cuda/fake_cuda.cc, "Green contexts") occupies FAKE_CUDA_CTX_BYTES for
// the primary context and FAKE_CUDA_GREEN_CTX_BYTES per green context; the figures below are
// those settings by hand: 5 MiB and 3 MiB, a 132-SM card split in groups of 16 SMs.
#include <gtest/gtest.h>

#include "harness.h"

namespace fracgpu::vgpu::testing {
namespace {

unsigned long long InfoFree(const std::string& line) { return std::stoull(Fields(line)[2]); }

std::map<std::string, std::string> GreenEnv(const Sandbox& box, const std::string& limit) {
  auto env = box.Env();
  env["FAKE_GPU_DEVICES"] = std::string(kUuid0) + ":4096:132";
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = limit;
  env["FAKE_CUDA_CTX_BYTES"] = std::to_string(5 * kMiB);
  env["FAKE_CUDA_GREEN_CTX_BYTES"] = std::to_string(3 * kMiB);
  return env;
}

// No context before: the green context brings the primary context (5 MiB) and its own 3 MiB;
// allocations made with its CUcontext current are charged as usual; destroying it releases the
// last reference of the primary context, and with it every charge of the device.
TEST(VgpuGreenContext, ChargedLikeAContextWithItsPrimaryContext) {
  Sandbox box;
  auto out = RunApp(box, GreenEnv(box, "100m"),
                    {"cuinit", "gcsplit:16:4", "gccreate", "region:0",            // 0-3
                     "gccurrent", "alloc:10485760", "info", "region:0", "gcres",  // 4-8
                     "gcstream:4194304", "gcdestroy", "region:0"});               // 9-11
  ASSERT_EQ(out.size(), 12u);
  EXPECT_EQ(out[0], "cuinit 0");
  EXPECT_EQ(out[1], "gcsplit 0 132 4 16 68");  // 4 groups of 16 SMs, 132 - 64 left
  EXPECT_EQ(out[2], "gccreate 0 1");
  RegionLine r = ParseRegionLine(out[3]);
  ASSERT_TRUE(r.ok) << out[3];
  EXPECT_EQ(r.context, 8 * kMiB);  // primary 5 + green 3
  EXPECT_EQ(r.used, 8 * kMiB);
  EXPECT_EQ(out[4], "gccurrent 0");
  EXPECT_EQ(out[5], "alloc 0");
  EXPECT_EQ(InfoFree(out[6]), (100 - 8 - 10) * kMiB);
  r = ParseRegionLine(out[7]);
  EXPECT_EQ(r.data, 10 * kMiB);
  EXPECT_EQ(r.context, 8 * kMiB);
  EXPECT_EQ(r.used, 18 * kMiB);
  EXPECT_EQ(out[8], "gcres 0 64");
  EXPECT_EQ(out[9], "gcstream 0");  // a stream of the green context allocates from the pool
  EXPECT_EQ(out[10], "gcdestroy 0");
  r = ParseRegionLine(out[11]);
  ASSERT_TRUE(r.ok) << out[11];
  EXPECT_EQ(r.used, 0u);
  EXPECT_EQ(r.context, 0u);
  EXPECT_EQ(r.data, 0u);
  EXPECT_EQ(r.device_used, 0u);
}

// The program holds the primary context: the green context adds only its own 3 MiB, and its
// destruction returns exactly that; allocations stay charged while the primary context lives.
TEST(VgpuGreenContext, WithThePrimaryContextHeldOnlyItsOwnBytesMove) {
  Sandbox box;
  auto out =
      RunApp(box, GreenEnv(box, "100m"),
             {"init", "gcsplit:16:2", "gccreate", "region:0", "gccurrent", "alloc:10485760",  // 0-5
              "gcdestroy", "region:0", "ctx:0", "info"});                                     // 6-9
  ASSERT_EQ(out.size(), 10u);
  EXPECT_EQ(out[2], "gccreate 0 1");
  EXPECT_EQ(ParseRegionLine(out[3]).context, 8 * kMiB);
  EXPECT_EQ(out[5], "alloc 0");
  EXPECT_EQ(out[6], "gcdestroy 0");
  RegionLine r = ParseRegionLine(out[7]);
  EXPECT_EQ(r.context, 5 * kMiB);
  EXPECT_EQ(r.data, 10 * kMiB);
  EXPECT_EQ(r.used, 15 * kMiB);
  EXPECT_EQ(InfoFree(out[9]), 85 * kMiB);
}

// Over the limit: refused with CUDA_ERROR_OUT_OF_MEMORY, no handle returned, nothing left
// charged (7 MiB: the primary context fits, its 3 MiB more do not; 4 MiB: not even the primary).
TEST(VgpuGreenContext, OverTheLimitIsRefusedAndLeavesNothing) {
  Sandbox box;
  auto out = RunApp(box, GreenEnv(box, "7m"),
                    {"cuinit", "gcsplit:16:1", "gccreate", "region:0",   // 0-3
                     "init", "alloc:2097152", "gccreate", "region:0"});  // 4-7
  ASSERT_EQ(out.size(), 8u);
  EXPECT_EQ(out[2], "gccreate 2 0");
  RegionLine r = ParseRegionLine(out[3]);
  ASSERT_TRUE(r.ok) << out[3];
  EXPECT_EQ(r.used, 0u);
  EXPECT_EQ(r.context, 0u);
  EXPECT_EQ(out[4], "init 0");
  EXPECT_EQ(out[5], "alloc 0");  // 5 + 2 = 7 MiB: the refused green context left nothing
  EXPECT_EQ(out[6], "gccreate 2 0");
  r = ParseRegionLine(out[7]);
  EXPECT_EQ(r.context, 5 * kMiB);
  EXPECT_EQ(r.data, 2 * kMiB);
  EXPECT_EQ(r.used, 7 * kMiB);

  Sandbox tiny;
  auto small =
      RunApp(tiny, GreenEnv(tiny, "4m"), {"cuinit", "gcsplit:16:1", "gccreate", "region:0"});
  ASSERT_EQ(small.size(), 4u);
  EXPECT_EQ(small[2], "gccreate 2 0");
  EXPECT_EQ(ParseRegionLine(small[3]).used, 0u);
}

// Bad arguments get exactly the driver's answer, with libvgpu.so or without, and charge
// nothing; cuGetProcAddress answers cuGreenCtxCreate/Destroy with the hooks.
TEST(VgpuGreenContext, BadArgumentsGetTheDriversAnswer) {
  const std::vector<std::string> ops = {"cuinit", "gcsplit:16:1", "gcbad", "region:0"};
  Sandbox with;
  auto hooked = RunApp(with, GreenEnv(with, "100m"), ops);
  Sandbox without;
  auto env = GreenEnv(without, "100m");
  env.erase("LD_PRELOAD");
  auto plain = RunApp(without, env, ops);
  ASSERT_EQ(hooked.size(), 4u);
  ASSERT_EQ(plain.size(), 4u);
  // null output, null descriptor, flags without CU_GREEN_CTX_DEFAULT_STREAM: INVALID_VALUE;
  // device 99: INVALID_DEVICE; destroy(NULL): INVALID_CONTEXT; cuCtxFromGreenCtx(NULL, …):
  // INVALID_VALUE; cuCtxFromGreenCtx(&c, NULL): INVALID_CONTEXT (the fake's documented codes).
  EXPECT_EQ(plain[2], "gcbad 1 1 1 101 201 1 201");
  EXPECT_EQ(hooked[2], plain[2]);
  RegionLine r = ParseRegionLine(hooked[3]);
  EXPECT_EQ(r.used, 0u) << hooked[3];

  auto proc = RunApp(with, GreenEnv(with, "100m"),
                     {"proc:cuGreenCtxCreate:12040:0", "proc:cuGreenCtxDestroy:12080:0",
                      "proc:cuCtxFromGreenCtx:12040:0"});
  ASSERT_EQ(proc.size(), 3u);
  EXPECT_EQ(proc[0], "proc 0 0 vgpu cuGreenCtxCreate");
  EXPECT_EQ(proc[1], "proc 0 0 vgpu cuGreenCtxDestroy");
  EXPECT_EQ(proc[2], "proc 0 0 wake cuCtxFromGreenCtx");  // a conversion: nothing to charge
}

}  // namespace
}  // namespace fracgpu::vgpu::testing
