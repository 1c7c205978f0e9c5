// Conformance of libvgpu.so's memory isolation, preloaded into tests/vgpu/vgpu_app over the
// fake driver: every allocation path, pools, VMM, contexts, queries, interception paths.
// Expected byte counts are computed by hand from the fake's documented behaviour (pitch rows
// aligned to 512 bytes, pools and VMM in 2 MiB steps).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>

#include "harness.h"

namespace fracgpu::vgpu::testing {
namespace {

// "info <rc> <free> <total>" → free bytes.
unsigned long long InfoFree(const std::string& line) { return std::stoull(Fields(line)[2]); }
unsigned long long InfoTotal(const std::string& line) { return std::stoull(Fields(line)[3]); }

struct PathCase {
  const char* name;
  std::vector<std::string> alloc_ops;
  unsigned long long charged;  // bytes
  std::vector<std::string> free_ops;
};

TEST(VgpuMemory, EveryAllocationPathIsChargedExactlyAndReturned) {
  const std::vector<PathCase> cases = {
      {"alloc", {"alloc:4194304"}, 4 * kMiB, {"free"}},
      {"managed", {"managed:4194304"}, 4 * kMiB, {"free"}},
      {"pitch", {"pitch:1000:10"}, 1024 * 10, {"free"}},              // pitch = 1000 rounded to 512
      {"async", {"async:1048576"}, 2 * kMiB, {"freeasync", "sync"}},  // pool step 2 MiB
      {"pool", {"poolcreate", "poolalloc:3145728"}, 4 * kMiB, {"freeasync", "sync"}},
      {"vmm device", {"vmm:4194304"}, 4 * kMiB, {"unmap", "release"}},
      {"vmm host", {"vmmhost:4194304"}, 0, {"unmap", "release"}},
      {"array", {"array:100:10"}, 100 * 10 * 4, {"arrayfree"}},
      {"array3d", {"array3d:10:10:10"}, 10 * 10 * 10 * 4, {"arrayfree"}},
      {"mipmap", {"mipmap:64:64:3"}, (64 * 64 + 32 * 32 + 16 * 16) * 4, {"arrayfree"}},
  };
  for (const PathCase& c : cases) {
    SCOPED_TRACE(c.name);
    Sandbox box;
    auto env = box.Env();
    env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "16m";
    std::vector<std::string> ops = {"init", "info"};
    ops.insert(ops.end(), c.alloc_ops.begin(), c.alloc_ops.end());
    ops.push_back("info");
    ops.insert(ops.end(), c.free_ops.begin(), c.free_ops.end());
    ops.push_back("info");
    auto out = RunApp(box, env, ops);
    ASSERT_EQ(out.size(), ops.size());
    for (const auto& line : out) EXPECT_EQ(Rc(line), 0) << line;
    EXPECT_EQ(InfoTotal(out[1]), 16 * kMiB);
    EXPECT_EQ(InfoFree(out[1]), 16 * kMiB);
    EXPECT_EQ(InfoFree(out[2 + c.alloc_ops.size()]), 16 * kMiB - c.charged);
    EXPECT_EQ(InfoFree(out.back()), 16 * kMiB);
  }
}

TEST(VgpuMemory, OverLimitIsOutOfMemoryWithNoSideEffect) {
  Sandbox box;
  auto env = box.Env();
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "8m";
  auto out =
      RunApp(box, env,
             {"init", "alloc:6291456", "alloc:4194304", "managed:4194304", "pitch:4096:1024",
              "vmm:4194304", "array:1024:1024", "async:4194304", "info", "free", "alloc:8388608"});
  ASSERT_EQ(out.size(), 11u);
  EXPECT_EQ(Rc(out[1]), 0);
  for (int i = 2; i <= 7; ++i) EXPECT_EQ(Rc(out[i]), 2) << out[i];  // CUDA_ERROR_OUT_OF_MEMORY
  EXPECT_EQ(InfoFree(out[8]), 2 * kMiB);                            // refused calls charged nothing
  EXPECT_EQ(Rc(out[10]), 0);                                        // the whole 8 MiB once freed
}

// A refusal at the limit is said once, by default, in MiB, naming the call; LIBCUDA_LOG_LEVEL=0
// silences it. Successful allocations say nothing.
TEST(VgpuMemory, RefusalIsReportedOnceInMiB) {
  Sandbox box;
  auto env = box.Env();
  env.erase("LIBCUDA_LOG_LEVEL");  // the default level
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "8m";
  const std::vector<std::string> ops = {
      "init",          "alloc:6291456", "alloc:5242880", "pitch:4096:1024",
      "alloc:2621440", "alloc:1048576", "info"};
  std::vector<std::string> out;
  auto lines = RefusalLines(box, env, ops, &out);
  ASSERT_EQ(out.size(), ops.size());
  EXPECT_EQ(Rc(out[1]), 0);
  EXPECT_EQ(Rc(out[2]), 2);  // CUDA_ERROR_OUT_OF_MEMORY
  EXPECT_EQ(Rc(out[3]), 2);
  EXPECT_EQ(Rc(out[4]), 2);
  EXPECT_EQ(Rc(out[5]), 0);
  const std::vector<std::string> expected = {
      "fracgpu: cuMemAlloc_v2 of 5 MiB refused: 6 MiB used of the 8 MiB limit on GPU 0",
      "fracgpu: cuMemAllocPitch_v2 of 4 MiB refused: 6 MiB used of the 8 MiB limit on GPU 0",
      "fracgpu: cuMemAlloc_v2 of 2.5 MiB refused: 6 MiB used of the 8 MiB limit on GPU 0"};
  EXPECT_EQ(lines, expected);

  env["LIBCUDA_LOG_LEVEL"] = "0";
  Sandbox quiet;
  auto quiet_env = env;
  quiet_env["FAKE_GPU_STATE_DIR"] = quiet.dir();
  quiet_env["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = quiet.region();
  lines = RefusalLines(quiet, quiet_env, ops, &out);
  ASSERT_EQ(out.size(), ops.size());
  EXPECT_EQ(Rc(out[2]), 2);
  EXPECT_EQ(lines, std::vector<std::string>{});
}

TEST(VgpuMemory, PoolsAreChargedWhatTheyReserve) {
  Sandbox box;
  auto env = box.Env();
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "16m";
  auto out =
      RunApp(box, env,
             {"init", "async:1048576", "freeasync", "info", "sync", "info",  //
              "threshold:8388608", "async:1048576", "freeasync", "sync", "info", "trim:0", "info"});
  ASSERT_EQ(out.size(), 13u);
  EXPECT_EQ(InfoFree(out[3]), 14 * kMiB);   // freed into the pool: still reserved
  EXPECT_EQ(InfoFree(out[5]), 16 * kMiB);   // released at synchronisation (threshold 0)
  EXPECT_EQ(InfoFree(out[10]), 14 * kMiB);  // threshold keeps it reserved
  EXPECT_EQ(InfoFree(out[12]), 16 * kMiB);  // trimmed
}

// UINT64_MAX, the "never release" threshold NVIDIA's samples set: the pool keeps its memory at
// synchronisation, and libvgpu keeps it charged (the fake once overflowed and released all).
TEST(VgpuMemory, PoolAtMaxThresholdStaysCharged) {
  Sandbox box;
  auto env = box.Env();
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "16m";
  auto out = RunApp(box, env,
                    {"init", "threshold:18446744073709551615", "async:3145728", "freeasync", "sync",
                     "info", "async:1048576", "freeasync", "sync", "info", "managed:13631488",
                     "trim:0", "info", "managed:12582912"});
  ASSERT_EQ(out.size(), 14u);
  EXPECT_EQ(Rc(out[1]), 0);
  EXPECT_EQ(InfoFree(out[5]), 12 * kMiB);   // 3 MiB in 2 MiB steps = 4 MiB kept and charged
  EXPECT_EQ(InfoFree(out[9]), 12 * kMiB);   // reused from the pool: nothing more
  EXPECT_EQ(Rc(out[10]), 2);                // 4 + 13 > 16: what the pool keeps counts
  EXPECT_EQ(InfoFree(out[12]), 16 * kMiB);  // trimmed: given back and uncharged
  EXPECT_EQ(Rc(out[13]), 0);                // now 12 MiB fits
}

TEST(VgpuMemory, VmmChargedUntilReleasedAndUnmapped) {
  Sandbox box;
  auto env = box.Env();
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "16m";
  auto out = RunApp(box, env, {"init", "vmm:4194304", "release", "info", "unmap", "info"});
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(InfoFree(out[3]), 12 * kMiB);  // released but still mapped: memory still in use
  EXPECT_EQ(InfoFree(out[5]), 16 * kMiB);
}

TEST(VgpuMemory, ContextIsChargedItsMeasuredSize) {
  Sandbox box;
  auto env = box.Env();
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "16m";
  env["FAKE_CUDA_CTX_BYTES"] = "3145728";
  auto out = RunApp(box, env, {"init", "info"});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(InfoFree(out[1]), 13 * kMiB);
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "2m";  // a context that does not fit
  auto small = RunApp(box, env, {"init"});
  ASSERT_EQ(small.size(), 1u);
  EXPECT_EQ(Rc(small[0]), 2);
}

TEST(VgpuMemory, UnknownFreePassesThroughToTheDriver) {
  Sandbox box;
  auto env = box.Env();
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "16m";
  auto out = RunApp(box, env, {"init", "freeforeign"});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(Rc(out[1]), 1);  // the fake driver's CUDA_ERROR_INVALID_VALUE, unchanged
}

TEST(VgpuMemory, QueriesShowTheSliceInCudaAndNvml) {
  Sandbox box;
  auto env = box.Env();
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "64m";
  auto out = RunApp(box, env,
                    {"init", "alloc:16777216", "info", "total:0", "total:1", "nvml:0", "nvml:1"});
  ASSERT_EQ(out.size(), 7u);
  EXPECT_EQ(InfoFree(out[2]), 48 * kMiB);
  EXPECT_EQ(InfoTotal(out[2]), 64 * kMiB);
  EXPECT_EQ(Fields(out[3])[2], std::to_string(64 * kMiB));
  EXPECT_EQ(Fields(out[4])[2], std::to_string(2048 * kMiB));  // device 1 has no limit
  auto n0 = Fields(out[5]);  // nvml rc total used free total_v2 used_v2
  ASSERT_EQ(n0.size(), 7u);
  EXPECT_EQ(n0[1], "0");
  EXPECT_EQ(n0[2], std::to_string(64 * kMiB));
  EXPECT_EQ(n0[3], std::to_string(16 * kMiB));
  EXPECT_EQ(n0[4], std::to_string(48 * kMiB));
  EXPECT_EQ(n0[5], std::to_string(64 * kMiB));
  EXPECT_EQ(n0[6], std::to_string(16 * kMiB));
  EXPECT_EQ(Fields(out[6])[2], std::to_string(2048 * kMiB));
}

TEST(VgpuMemory, DlopenDlsymPathIsIntercepted) {
  Sandbox box;
  auto env = box.Env();
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "8m";
  auto out = RunApp(box, env, {"init", "dlsym:16777216", "dlsym:4194304", "info"});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(Rc(out[1]), 2);
  EXPECT_EQ(Rc(out[2]), 0);
  EXPECT_EQ(InfoFree(out[3]), 4 * kMiB);
}

TEST(VgpuMemory, CuGetProcAddressPathIsInterceptedForEveryFlagAndVersion) {
  struct Case {
    int version;
    int flags;
    int v2;
  };
  const Case cases[] = {{11030, 0, 0}, {11040, 1, 0}, {11080, 2, 0}, {12000, 0, 1},
                        {12040, 1, 1}, {12080, 2, 1}, {12050, 2, 0}};
  Sandbox box;
  auto env = box.Env();
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "8m";
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.version) + " flags " + std::to_string(c.flags));
    std::string op = "gpa:" + std::to_string(c.version) + ":" + std::to_string(c.flags) + ":" +
                     std::to_string(c.v2) + ":";
    auto out = RunApp(box, env, {"init", op + "16777216", op + "4194304", "info"});
    ASSERT_EQ(out.size(), 4u);
    auto big = Fields(out[1]), small = Fields(out[2]);
    EXPECT_EQ(big[1], "0");
    EXPECT_EQ(big[2], "2");  // refused by the wrapper the driver's pointer was replaced with
    EXPECT_EQ(small[2], "0");
    EXPECT_EQ(InfoFree(out[3]), 4 * kMiB);
  }
  // A version newer than the driver (12080) is the driver's error, passed through.
  auto out = RunApp(box, env, {"init", "gpa:13000:0:1:1024"});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(Fields(out[1])[1], "1");
}

TEST(VgpuMemory, LaunchesPassThroughWithoutSmLimit) {
  Sandbox box;
  auto env = box.Env();
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "8m";
  auto out = RunApp(box, env, {"init", "launch:1000"});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(Rc(out[1]), 0);
}

TEST(VgpuMemory, ProcessWithoutLimitsRunsUnlimited) {
  Sandbox box;
  auto env = box.Env();
  auto out = RunApp(box, env, {"init", "alloc:536870912", "info"});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(Rc(out[1]), 0);
  EXPECT_EQ(InfoTotal(out[2]), 1024 * kMiB);
}

}  // namespace
}  // namespace fracgpu::vgpu::testing
