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

// The tenant zeroes its own region's usage (devices and slots) to allocate past the limit
// again (issue 32: 1,860 MiB under 1,000 before). The process knows what it holds: a region
// that says less makes the device fail closed, for that process, with one error line.
TEST(VgpuHookAttacks, ZeroedRegionUsageFailsClosedInsteadOfGivingMemory) {
  Sandbox box;
  auto env = box.Env();
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "100m";
  auto out =
      RunApp(box, env, {"init", "alloc:" + Mib(90), "zeroregion", "alloc:" + Mib(90), "alloc:1"});
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(Rc(out[1]), 0) << out[1];
  EXPECT_EQ(out[2], "zeroregion 0");
  EXPECT_EQ(Rc(out[3]), 2) << out[3];  // CUDA_ERROR_OUT_OF_MEMORY, not 180 MiB under 100
  EXPECT_EQ(Rc(out[4]), 2) << out[4];  // and it stays closed
  // A process that did not alter anything still gets its slice in a fresh container.
  Sandbox clean;
  auto env2 = clean.Env();
  env2["CUDA_DEVICE_MEMORY_LIMIT_0"] = "100m";
  out = RunApp(clean, env2, {"init", "alloc:" + Mib(90), "free", "alloc:" + Mib(90)});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(Rc(out[3]), 0) << out[3];
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

// cuMemUnmap of one range over more than 62 mappings releases every mapping's charge (issue 32
// item 7): 100 handles of 2 MiB mapped side by side, released, unmapped by one call. Before, the
// charges of mappings past the 62nd (76 MiB here) stayed, so the 200 MiB that follows under the
// 256 MiB limit was a false out-of-memory.
TEST(VgpuHookAttacks, UnmapOfManyMappingsReleasesEveryCharge) {
  Sandbox box;
  auto env = box.Env();
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "256m";
  auto out = RunApp(box, env,
                    {"init", "vmmmany:100:2097152", "region:0", "alloc:209715200",
                     "vmmmany:20:2097152", "region:0"});
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(out[1], "vmmmany 0 0");
  RegionLine after = ParseRegionLine(out[2]);
  ASSERT_TRUE(after.ok) << out[2];
  EXPECT_EQ(after.data, 0u);
  EXPECT_EQ(Rc(out[3]), 0) << "200 MiB under 256 MiB after everything was unmapped";
  EXPECT_EQ(out[4], "vmmmany 0 0");  // 40 MiB more, mapped and unmapped again
  RegionLine end = ParseRegionLine(out[5]);
  ASSERT_TRUE(end.ok) << out[5];
  EXPECT_EQ(end.data, 200 * kMiB);
}

// The legacy launches are paced through the SM limiter like cuLaunchKernel (issue 32 item 7):
// one process, 40 % SM limit, back-to-back launches for 12 s of the fake's virtual clock; the
// GPU is busy 40 % of the [2 s, 12 s) window. Before, these reached the driver unpaced (~100 %).
TEST(VgpuHookAttacks, LegacyLaunchesArePaced) {
  for (const char* path : {"L", "G", "A", "M"}) {
    SCOPED_TRACE(path);
    Sandbox box;
    auto env = box.Env();
    env["FAKE_GPU_DEVICES"] = std::string(kUuid0) + ":1024:108";
    env["CUDA_DEVICE_SM_LIMIT"] = "40";
    env["FAKE_CLOCK_PARTICIPANTS"] = "1";
    env["FAKE_CLOCK_RANK"] = "0";
    auto out = RunApp(box, env,
                      {"init", "cost:1000000000", std::string("smrun:1:1:") + path + ":12000:1"});
    ASSERT_EQ(out.size(), 3u);
    auto f = Fields(out[2]);
    ASSERT_EQ(f.size(), 16u) << out[2];
    EXPECT_EQ(f[1], "0");
    EXPECT_GT(std::stoull(f[2]), 0u);
    double percent = std::stod(f[3]) * 100.0 / 10e9;  // busy ns in [2 s, 12 s)
    EXPECT_NEAR(percent, 40.0, 3.0);
  }
}

// The import attack of issue 32: export a VMM allocation as a POSIX fd, import it in the same
// process, release the original, 28 times, held 14,336 MiB against a 1,000 MiB limit with 0 MiB
// charged. Now the import is a reference to the charged original: the second round is refused
// (512 + 512 > 1,000), the 512 MiB stays charged while the import lives, and goes with it.
TEST(VgpuHookAttacks, ExportImportReleaseOriginalIsRefusedPastTheLimit) {
  Sandbox box;
  auto env = box.Env();
  env["FAKE_GPU_DEVICES"] = std::string(kUuid0) + ":16384";
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "1000m";
  auto out = RunApp(box, env,
                    {"init", "vmmreimport:28:536870912", "region:0", "vmmdropimports", "region:0",
                     "vmmreimport:1:536870912", "region:0"});
  ASSERT_EQ(out.size(), 7u);
  EXPECT_EQ(out[1], "vmmreimport 1 2");  // one round, then CUDA_ERROR_OUT_OF_MEMORY
  RegionLine held = ParseRegionLine(out[2]);
  ASSERT_TRUE(held.ok) << out[2];
  EXPECT_EQ(held.data, 512 * kMiB);  // the original is released, its import holds it: charged
  EXPECT_EQ(out[3], "vmmdropimports 0");
  RegionLine gone = ParseRegionLine(out[4]);
  ASSERT_TRUE(gone.ok) << out[4];
  EXPECT_EQ(gone.data, 0u);  // released exactly once, with the last reference
  EXPECT_EQ(out[5], "vmmreimport 1 0");
  EXPECT_EQ(ParseRegionLine(out[6]).data, 512 * kMiB);
}

// cuMemRetainAllocationHandle is one more reference: releasing the creator's handle and
// unmapping leaves the memory to the retained handle, and its charge with it (before, the
// charge went at the creator's release and the retained memory was free of charge).
TEST(VgpuHookAttacks, RetainedHandleKeepsItsCharge) {
  Sandbox box;
  auto env = box.Env();
  env["FAKE_GPU_DEVICES"] = std::string(kUuid0) + ":4096";
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "1000m";
  auto out = RunApp(box, env,
                    {"init", "vmmretain:536870912", "region:0", "alloc:629145600", "vmmdropretains",
                     "region:0", "alloc:629145600"});
  ASSERT_EQ(out.size(), 7u);
  EXPECT_EQ(out[1], "vmmretain 0 1");  // the same handle value, as cuda.h says
  EXPECT_EQ(ParseRegionLine(out[2]).data, 512 * kMiB);
  EXPECT_EQ(Rc(out[3]), 2);  // 512 + 600 > 1,000
  EXPECT_EQ(out[4], "vmmdropretains 0");
  EXPECT_EQ(ParseRegionLine(out[5]).data, 0u);
  EXPECT_EQ(Rc(out[6]), 0);
}

// cuCtxSetLimit growth is charged (issue 32 item 3; it was passed through): a 512 MiB malloc
// heap (the default is 8 MiB) takes 504 MiB of the 1,000 MiB slice, so 600 MiB more is refused;
// a 1,200 MiB heap does not fit and is refused with the old value kept; setting the default back
// gives the charge back. A stack of 2 KiB per thread (default 1 KiB) on 108 SMs of 2,048 threads
// each reserves 216 MiB more.
TEST(VgpuHookAttacks, CtxSetLimitGrowthIsCharged) {
  Sandbox box;
  auto env = box.Env();
  env["FAKE_GPU_DEVICES"] = std::string(kUuid0) + ":4096:108";
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "1000m";
  auto out = RunApp(box, env,
                    {"init", "region:0", "setlimit:2:536870912", "region:0", "alloc:629145600",
                     "setlimit:2:1258291200", "setlimit:2:8388608", "region:0", "setlimit:0:2048",
                     "region:0", "setlimit:0:1024", "region:0", "alloc:629145600"});
  ASSERT_EQ(out.size(), 13u);
  RegionLine start = ParseRegionLine(out[1]);
  ASSERT_TRUE(start.ok) << out[1];
  EXPECT_EQ(out[2], "setlimit 0 536870912");
  EXPECT_EQ(ParseRegionLine(out[3]).context - start.context, 504 * kMiB);
  EXPECT_EQ(Rc(out[4]), 2);                   // 504 + 600 > 1,000
  EXPECT_EQ(out[5], "setlimit 2 536870912");  // 688 MiB more does not fit: the old value stays
  EXPECT_EQ(out[6], "setlimit 0 8388608");
  EXPECT_EQ(ParseRegionLine(out[7]).context, start.context);
  EXPECT_EQ(out[8], "setlimit 0 2048");
  EXPECT_EQ(ParseRegionLine(out[9]).context - start.context, 1024ull * 108 * 2048);
  EXPECT_EQ(out[10], "setlimit 0 1024");
  EXPECT_EQ(ParseRegionLine(out[11]).context, start.context);
  EXPECT_EQ(Rc(out[12]), 0);
}

// A plugin opened with RTLD_DEEPBIND binds its cu* to its own libcuda.so.1 first; it allocated
// 1,500 MiB against a 1,000 MiB limit (issue 32). libvgpu.so's dlopen drops RTLD_DEEPBIND in a
// process with a limit, so the plugin's calls reach the hooks: refused over the limit, charged
// under it. Without a limit the plugin still loads and allocates.
TEST(VgpuHookAttacks, DeepbindPluginReachesTheHooks) {
  const std::string plugin = std::string("deepbind:") + FRACGPU_VGPU_PLUGIN;
  Sandbox box;
  auto env = box.Env();
  env["FAKE_GPU_DEVICES"] = std::string(kUuid0) + ":4096";
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "1000m";
  auto out = RunApp(box, env, {"init", plugin + ":1572864000", plugin + ":104857600", "region:0"});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[1], "deepbind 2");  // 1,500 MiB over 1,000: refused by the hook
  EXPECT_EQ(out[2], "deepbind 0");
  EXPECT_EQ(ParseRegionLine(out[3]).data, 100 * kMiB);  // and charged
  Sandbox free_box;
  auto unlimited = free_box.Env();
  unlimited["FAKE_GPU_DEVICES"] = std::string(kUuid0) + ":4096";
  out = RunApp(free_box, unlimited, {"init", plugin + ":1572864000"});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1], "deepbind 0");
}

// External memory (cuImportExternalMemory) is charged to the importer: 1,500 MiB is refused
// under a 1,000 MiB limit (it was passed through, uncharged); 500 MiB is charged, and stays
// charged after cuDestroyExternalMemory while buffers and a mipmapped array mapped from it live
// (cuda.h: they must be freed on their own), so 600 MiB more is refused; freeing them returns it.
TEST(VgpuHookAttacks, ExternalMemoryIsChargedUntilItsLastMappingGoes) {
  Sandbox box;
  auto env = box.Env();
  env["FAKE_GPU_DEVICES"] = std::string(kUuid0) + ":4096";
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "1000m";
  auto out = RunApp(box, env,
                    {"init", "extmem:1572864000:1", "extmem:524288000:2", "region:0",
                     "alloc:629145600", "extfree", "region:0", "alloc:629145600"});
  ASSERT_EQ(out.size(), 8u);
  EXPECT_EQ(out[1], "extmem 2 0 1");  // refused before the driver saw it: nothing to destroy
  EXPECT_EQ(out[2], "extmem 0 0 0");
  EXPECT_EQ(ParseRegionLine(out[3]).data, 500 * kMiB);
  EXPECT_EQ(Rc(out[4]), 2);
  EXPECT_EQ(out[5], "extfree 0");
  EXPECT_EQ(ParseRegionLine(out[6]).data, 0u);
  EXPECT_EQ(Rc(out[7]), 0);
}

// A multicast binding keeps the bound VMM allocation alive after its handle is released and
// unmapped; its charge now stays with the binding (before, released and unmapped meant
// uncharged while the memory lived on), through cuMulticastBindMem and cuMulticastBindAddr, and
// goes with cuMulticastUnbind or the multicast object's release.
TEST(VgpuHookAttacks, MulticastBindingKeepsTheChargeOfTheMemoryItHolds) {
  for (const char* how : {"0", "1"}) {
    SCOPED_TRACE(how[0] == '0' ? "cuMulticastBindMem" : "cuMulticastBindAddr");
    for (const char* end : {"mcunbind", "mcrelease"}) {
      SCOPED_TRACE(end);
      Sandbox box;
      auto env = box.Env();
      env["FAKE_GPU_DEVICES"] = std::string(kUuid0) + ":4096";
      env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "1000m";
      auto out = RunApp(box, env,
                        {"init", std::string("mcbind:536870912:") + how, "region:0",
                         "alloc:629145600", end, "region:0", "alloc:629145600"});
      ASSERT_EQ(out.size(), 7u);
      EXPECT_EQ(out[1], "mcbind 0");
      EXPECT_EQ(ParseRegionLine(out[2]).data, 512 * kMiB);
      EXPECT_EQ(Rc(out[3]), 2);  // 512 + 600 > 1,000
      EXPECT_EQ(Rc(out[4]), 0);
      EXPECT_EQ(ParseRegionLine(out[5]).data, 0u);
      EXPECT_EQ(Rc(out[6]), 0);
    }
  }
}

// cuMemMapArrayAsync maps VMM memory into a sparse array's tile, which keeps it alive after its
// handle is released; the charge now stays with the tile (before: released meant uncharged) and
// goes with the tile's unmap or the array's destruction.
TEST(VgpuHookAttacks, SparseArrayTileKeepsTheChargeOfItsMemory) {
  for (const char* end : {"tileunmap", "tilearrayfree"}) {
    SCOPED_TRACE(end);
    Sandbox box;
    auto env = box.Env();
    env["FAKE_GPU_DEVICES"] = std::string(kUuid0) + ":4096";
    env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "1000m";
    auto out = RunApp(box, env,
                      {"init", "tilemap:536870912", "region:0", "alloc:629145600", end, "region:0",
                       "alloc:629145600"});
    ASSERT_EQ(out.size(), 7u);
    EXPECT_EQ(out[1], "tilemap 0");
    const unsigned long long array = 64 * 64 * 4;  // the array's own charge
    EXPECT_EQ(ParseRegionLine(out[2]).data, 512 * kMiB + array);
    EXPECT_EQ(Rc(out[3]), 2);  // 512 + 600 > 1,000
    EXPECT_EQ(Rc(out[4]), 0);
    EXPECT_EQ(ParseRegionLine(out[5]).data, std::string(end) == "tileunmap" ? array : 0u);
    EXPECT_EQ(Rc(out[6]), 0);
  }
}

}  // namespace
}  // namespace fracgpu::vgpu::testing
