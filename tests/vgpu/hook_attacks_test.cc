// The attacks on libvgpu.so's hooks of issue 32, each replayed on the fake driver through the
// shipped hooks (vgpu_app's ops of vgpu_app_attack.cc). docs/enforcement.md "Attacks on the
// hooks (issue 32)" names the test that holds each.
#include <gtest/gtest.h>

#include "harness.h"

namespace fracgpu::vgpu::testing {
namespace {

std::string Mib(unsigned long long n) { return std::to_string(n * kMiB); }

// cuMemGetInfo(_v2) with NULL for free, total or both, with and without a limit: the call
// succeeds as the driver's does, the non-NULL figure is written (the slice's under a limit),
// and the process lives (before issue 32 the hook dereferenced the NULL pointer: SIGSEGV).
TEST(VgpuHookAttacks, MemGetInfoWithNullPointers) {
  for (bool limited : {false, true}) {
    for (const char* variant : {"v2", "v1"}) {
      SCOPED_TRACE(std::string(limited ? "limited " : "unlimited ") + variant);
      Sandbox box;
      auto env = box.Env();
      if (limited) env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "100m";
      const std::string v = variant;
      int status = -1;
      Child c = Spawn(box, env,
                      {"init", "alloc:10485760", "infonull:f:" + v, "infonull:t:" + v,
                       "infonull:b:" + v, "info"});
      auto out = Finish(c, &status);
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
      ASSERT_EQ(out.size(), 6u);
      auto info = Fields(out[5]);
      ASSERT_EQ(info.size(), 4u);
      const std::string free = info[2], total = info[3];
      EXPECT_EQ(total, limited ? Mib(100) : Mib(1024));            // the fake GPU 0 has 1024 MiB
      EXPECT_LE(std::stoull(free), (limited ? 90 : 1014) * kMiB);  // 10 MiB allocated
      EXPECT_EQ(out[2], "infonull 0 - " + total);
      EXPECT_EQ(out[3], "infonull 0 " + free + " -");
      EXPECT_EQ(out[4], "infonull 0 - -");
    }
  }
}

// Every hook with an out-pointer, called with it NULL: no hook dereferences it, with and without
// a limit, and each gives the driver's own answer (the same code with and without libvgpu.so).
TEST(VgpuHookAttacks, EveryOutPointerMayBeNull) {
  std::vector<std::string> answers[3];
  int k = 0;
  for (const char* mode : {"bare", "unlimited", "limited"}) {
    SCOPED_TRACE(mode);
    Sandbox box;
    auto env = box.Env();
    if (std::string(mode) == "bare") env.erase("LD_PRELOAD");
    if (std::string(mode) == "limited") env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "100m";
    int status = -1;
    Child c = Spawn(box, env, {"init", "nullout"});
    auto out = Finish(c, &status);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    ASSERT_EQ(out.size(), 2u);
    auto f = Fields(out[1]);
    ASSERT_GE(f.size(), 3u);
    EXPECT_EQ(f[0], "nullout");
    EXPECT_EQ(std::to_string(f.size() - 2), f[1]);
    EXPECT_EQ(f[1], "43");  // every call of the op was made
    answers[k++] = f;
  }
  EXPECT_EQ(answers[1], answers[0]);  // libvgpu.so without a limit: the driver's answers
  EXPECT_EQ(answers[2], answers[0]);  // and with one
}

// A broken limits file refuses CUDA (issue 32 item 4): each of these gave 6,000 MiB under a
// 1,000 MiB limit in the environment. Now cuInit returns CUDA_ERROR_NOT_PERMITTED (800), the
// allocation is refused, and one stderr line names the file, the line, the key and the value.
TEST(VgpuHookAttacks, BrokenLimitsFileRefusesCuda) {
  struct Case {
    const char* file;  // nullptr: a folder at the file's path
    const char* message_part;
  };
  const Case cases[] = {
      {"", "names no memory limit"},
      {"# nothing but a comment\n", "names no memory limit"},
      {"export CUDA_DEVICE_MEMORY_LIMIT_0=1000m\n",
       "line 1: export CUDA_DEVICE_MEMORY_LIMIT_0=\"1000m\": unknown key"},
      {"cuda_device_memory_limit_0=1000m\n", "line 1: cuda_device_memory_limit_0=\"1000m\""},
      {"CUDA_DEVICE_MEMORY_LIMIT_0=1000m\nCUDA_DEVICE_MEMORY_LIMIT_0=6000m\n",
       "line 2: CUDA_DEVICE_MEMORY_LIMIT_0=\"6000m\": key given twice"},
      {"CUDA_DEVICE_MEMORY_LIMIT_0=1000m\nCUDA_DEVICE_MEMORY_LIMITS=0\n", "line 2"},
      {"CUDA_DEVICE_MEMORY_LIMIT_0=6gb\n", "line 1: CUDA_DEVICE_MEMORY_LIMIT_0=\"6gb\""},
      {nullptr, "cannot be read (errno 21)"},  // EISDIR
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.file ? tc.file : "(a folder)");
    Sandbox box;
    if (tc.file) {
      box.WriteLimitsFile(tc.file);
    } else {
      ASSERT_TRUE(std::filesystem::create_directory(box.dir() + "/fracgpu-limits.env"));
    }
    auto env = box.Env();
    env["FAKE_GPU_DEVICES"] = std::string(kUuid0) + ":8192";  // room for the 6,000 MiB
    env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "1000m";
    std::vector<std::string> out;
    auto err = StderrLines(box, env, {"init", "alloc:6291456000", "alloc:1048576"}, &out);
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0], "init 800");  // CUDA_ERROR_NOT_PERMITTED
    EXPECT_NE(Rc(out[1]), 0);
    EXPECT_NE(Rc(out[2]), 0);
    ASSERT_EQ(err.size(), 1u);
    EXPECT_NE(err[0].find(tc.message_part), std::string::npos) << err[0];
    EXPECT_NE(err[0].find("fracgpu-limits.env"), std::string::npos) << err[0];
    EXPECT_NE(err[0].find("CUDA refused to start"), std::string::npos) << err[0];
  }
  // The same environment with a good file: CUDA starts and the file's limit holds.
  Sandbox box;
  box.WriteLimitsFile(
      "CUDA_DEVICE_MEMORY_LIMIT_0=1000m\nCUDA_DEVICE_MEMORY_SHARED_CACHE=" + box.region() + "\n");
  auto env = box.Env();
  env["FAKE_GPU_DEVICES"] = std::string(kUuid0) + ":8192";
  auto out = RunApp(box, env, {"init", "alloc:6291456000", "alloc:1048576"});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], "init 0");
  EXPECT_EQ(Rc(out[1]), 2);
  EXPECT_EQ(Rc(out[2]), 0);
}

}  // namespace
}  // namespace fracgpu::vgpu::testing
