// The legacy v1 entry points of the CUDA 2.0 ABI (PFN_<name>_v2000, cudaTypedefs.h: 32-bit sizes
// and CUdeviceptr_v1) that a program can still dlsym from libcuda.so.1 or ask cuGetProcAddress
// for below CUDA 3.2: libvgpu.so hooks each with its own signature and charges / reports them
// exactly like their _v2 counterparts (issue 13). Run through libvgpu.so over the fake driver,
// which implements them (tests/fakes/cuda/fake_cuda.cc). Expected bytes are computed by hand
// from the fake's documented behaviour (pitch rows aligned to 512 bytes, float arrays 4 bytes).
#include <gtest/gtest.h>

#include "harness.h"

namespace fracgpu::vgpu::testing {
namespace {

// "region 0 <host pid> <used> ..." → this process's charged bytes on the device.
unsigned long long Used(const std::string& line) {
  auto f = Fields(line);
  return f.size() >= 4 ? std::stoull(f[3]) : ~0ull;
}

// Every v1 name, by both ways a program finds it, is libvgpu's own hook of that very ELF name.
TEST(VgpuLegacy, EveryV1EntryPointIsItsOwnHook) {
  Sandbox box;
  auto env = box.Env();
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "512m";
  const std::vector<std::string> names = {"cuMemAlloc",      "cuMemAllocPitch", "cuMemFree",
                                          "cuArrayCreate",   "cuArray3DCreate", "cuMemGetInfo",
                                          "cuDeviceTotalMem"};
  std::vector<std::string> ops = {"init"};
  for (const auto& n : names) ops.push_back("proc:" + n + ":2000:0");
  for (const auto& n : names) ops.push_back("proc:" + n + ":3010:0");  // still v1 below 3020
  for (const auto& n : names) ops.push_back("proc:" + n + ":3020:0");  // the _v2 from 3020 on
  auto out = RunApp(box, env, ops);
  ASSERT_EQ(out.size(), ops.size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(out[1 + i], "proc 0 0 vgpu " + names[i]);
    EXPECT_EQ(out[1 + names.size() + i], "proc 0 0 vgpu " + names[i]);
    EXPECT_EQ(out[1 + 2 * names.size() + i], "proc 0 0 vgpu " + names[i] + "_v2");
  }
}

// cuMemAlloc v1 through dlsym and through cuGetProcAddress: charged, refused over the limit
// with nothing charged, returned by the v1 cuMemFree and by cuMemFree_v2 alike.
TEST(VgpuLegacy, V1AllocIsChargedRefusedAndReturned) {
  Sandbox box;
  auto env = box.Env();
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "512m";
  auto out = RunApp(
      box, env,
      {"init", "v1:d:cuMemAlloc:104857600", "region:0", "v1:g:cuMemAlloc:314572800", "region:0",
       "v1:d:cuMemAlloc:157286400", "region:0", "v1:d:cuMemFree", "region:0", "free", "region:0"});
  ASSERT_EQ(out.size(), 11u);
  auto first = Fields(out[1]);
  ASSERT_EQ(first.size(), 4u);
  EXPECT_EQ(first[1], "0");
  EXPECT_EQ(first[2], "vgpu");
  EXPECT_NE(first[3], "0");  // a 32-bit device address
  EXPECT_EQ(Used(out[2]), 100 * kMiB);
  EXPECT_EQ(Fields(out[3])[1], "0");
  EXPECT_EQ(Fields(out[3])[2], "vgpu");
  EXPECT_EQ(Used(out[4]), 400 * kMiB);
  EXPECT_EQ(Fields(out[5])[1], "2");  // 400 + 150 MiB > 512 MiB: CUDA_ERROR_OUT_OF_MEMORY
  EXPECT_EQ(Used(out[6]), 400 * kMiB);
  EXPECT_EQ(out[7], "v1 0 vgpu");  // the 300 MiB one, by the v1 free
  EXPECT_EQ(Used(out[8]), 100 * kMiB);
  EXPECT_EQ(Rc(out[9]), 0);  // the first, by cuMemFree_v2
  EXPECT_EQ(Used(out[10]), 0u);
}

// cuMemAllocPitch v1 (pitch 1000 → 1024 bytes), cuArrayCreate v1 and cuArray3DCreate v1:
// charged their real sizes, and the arrays returned by cuArrayDestroy.
TEST(VgpuLegacy, V1PitchAndArraysAreCharged) {
  Sandbox box;
  auto env = box.Env();
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "16m";
  auto out =
      RunApp(box, env,
             {"init", "v1:d:cuMemAllocPitch:1000:100", "region:0", "v1:g:cuArrayCreate:256:16",
              "region:0", "v1:d:cuArray3DCreate:32:8:4", "region:0", "arrayfree", "region:0",
              "v1:g:cuMemFree", "region:0", "v1:d:cuMemAllocPitch:4096:8192"});
  ASSERT_EQ(out.size(), 12u);
  EXPECT_EQ(out[1], "v1 0 vgpu 1024");
  EXPECT_EQ(Used(out[2]), 1024u * 100);
  EXPECT_EQ(out[3], "v1 0 vgpu");
  EXPECT_EQ(Used(out[4]), 1024u * 100 + 256 * 16 * 4);
  EXPECT_EQ(out[5], "v1 0 vgpu");
  EXPECT_EQ(Used(out[6]), 1024u * 100 + 256 * 16 * 4 + 32 * 8 * 4 * 4);
  EXPECT_EQ(Rc(out[7]), 0);
  EXPECT_EQ(Used(out[8]), 1024u * 100);
  EXPECT_EQ(out[9], "v1 0 vgpu");
  EXPECT_EQ(Used(out[10]), 0u);
  EXPECT_EQ(out[11], "v1 2 vgpu 0");  // 4096 × 8192 = 32 MiB over a 16 MiB limit
}

// cuMemGetInfo v1 and cuDeviceTotalMem v1 show the container's slice like the _v2 queries, also
// on a card over 4 GiB (the fake's 32-bit figures saturate; the slice fits).
TEST(VgpuLegacy, V1QueriesShowTheSlice) {
  Sandbox box;
  auto env = box.Env();
  env["FAKE_GPU_DEVICES"] = "GPU-11111111-1111-1111-1111-111111111111:8192";
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "512m";
  auto out = RunApp(box, env,
                    {"init", "v1:d:cuMemGetInfo", "v1:d:cuMemAlloc:104857600", "v1:g:cuMemGetInfo",
                     "info", "v1:d:cuDeviceTotalMem:0", "v1:g:cuDeviceTotalMem:0", "total:0"});
  ASSERT_EQ(out.size(), 8u);
  const std::string slice = std::to_string(512 * kMiB);
  EXPECT_EQ(out[1], "v1 0 vgpu " + slice + " " + slice);
  EXPECT_EQ(out[3], "v1 0 vgpu " + std::to_string(412 * kMiB) + " " + slice);
  EXPECT_EQ(out[4], "info 0 " + std::to_string(412 * kMiB) + " " + slice);  // the same as _v2
  EXPECT_EQ(out[5], "v1 0 vgpu " + slice);
  EXPECT_EQ(out[6], "v1 0 vgpu " + slice);
  EXPECT_EQ(out[7], "total 0 " + slice);
}

// Without libvgpu.so the fake driver itself answers the v1 entry points (no
// CUDA_ERROR_NOT_SUPPORTED): a 32-bit address, physical memory taken, 32-bit figures saturated.
TEST(VgpuLegacy, FakeDriverImplementsTheV1EntryPoints) {
  Sandbox box;
  auto env = box.Env();
  env.erase("LD_PRELOAD");
  env["FAKE_GPU_DEVICES"] =
      "GPU-11111111-1111-1111-1111-111111111111:1024,GPU-22222222-2222-2222-2222-222222222222:8192";
  auto out =
      RunApp(box, env,
             {"init", "v1:d:cuMemAlloc:104857600", "v1:d:cuMemGetInfo",
              "v1:g:cuMemAllocPitch:1000:10", "v1:d:cuArrayCreate:16:16", "v1:d:cuMemFree",
              "v1:g:cuMemFree", "v1:d:cuMemGetInfo", "v1:d:cuDeviceTotalMem:1", "arrayfree"});
  ASSERT_EQ(out.size(), 10u);
  auto alloc = Fields(out[1]);
  ASSERT_EQ(alloc.size(), 4u);
  EXPECT_EQ(alloc[1], "0");
  EXPECT_EQ(alloc[2], "driver");
  EXPECT_GT(std::stoull(alloc[3]), 0u);
  EXPECT_LT(std::stoull(alloc[3]), 1ull << 32);
  EXPECT_EQ(out[2],
            "v1 0 driver " + std::to_string(924 * kMiB) + " " + std::to_string(1024 * kMiB));
  EXPECT_EQ(out[3], "v1 0 driver 1024");
  EXPECT_EQ(out[4], "v1 0 driver");
  EXPECT_EQ(out[5], "v1 0 driver");
  EXPECT_EQ(out[6], "v1 0 driver");
  EXPECT_EQ(out[7], "v1 0 driver " + std::to_string(1024 * kMiB - 16 * 16 * 4) + " " +
                        std::to_string(1024 * kMiB));
  EXPECT_EQ(out[8], "v1 0 driver 4294967295");  // 8 GiB does not fit 32 bits
  EXPECT_EQ(Rc(out[9]), 0);
}

}  // namespace
}  // namespace fracgpu::vgpu::testing
