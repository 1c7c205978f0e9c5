// Graph memory under libvgpu.so, preloaded into tests/vgpu/vgpu_app over the fake driver: what
// the graph memory pool reserves is charged like pool memory; an upload, launch or
// instantiate-with-upload that would exceed the limit is refused with CUDA_ERROR_OUT_OF_MEMORY
// and leaves nothing charged or reserved; trim and the device's last context give it back.
// Expected figures come from the fake's documented model (tests/fakes/cuda/fake_cuda.cc,
// "Graphs"): memory is reserved when an executable graph is uploaded or first launched, kept
// across launches, kept in the pool when the executable graph is destroyed, and given back by
// cuDeviceGraphMemTrim; allocations are rounded up to 2 MiB. Sizes here are multiples of 2 MiB.
#include <gtest/gtest.h>

#include "harness.h"

namespace fracgpu::vgpu::testing {
namespace {

constexpr unsigned long long k600 = 600 * kMiB, k300 = 300 * kMiB;
const std::string kAlloc600 = "galloc:" + std::to_string(k600);
const std::string kAlloc300 = "galloc:" + std::to_string(k300);

unsigned long long InfoFree(const std::string& line) { return std::stoull(Fields(line)[2]); }

// "gattr <rc> <used> <used high> <reserved> <reserved high>".
struct GraphPool {
  unsigned long long used, used_high, reserved, reserved_high;
};
GraphPool Attr(const std::string& line) {
  auto f = Fields(line);
  EXPECT_EQ(f.size(), 6u) << line;
  EXPECT_EQ(f[1], "0") << line;
  if (f.size() != 6) return {};
  return {std::stoull(f[2]), std::stoull(f[3]), std::stoull(f[4]), std::stoull(f[5])};
}

// One 4096 MiB card with `limit`: only the limit, never the card, can refuse what follows.
std::map<std::string, std::string> LimitEnv(const Sandbox& box, const std::string& limit) {
  auto env = box.Env();
  env["FAKE_GPU_DEVICES"] = std::string(kUuid0) + ":4096";
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = limit;
  return env;
}

// Limit 1000 MiB: one 600 MiB graph fits, a second does not while the
// first holds its memory; once the first is destroyed its reserve serves the second; trim
// gives the memory back and the next launch reserves (and is charged) again.
TEST(VgpuGraphMemory, OverTheLimitIsRefusedWhereTheDriverWouldReserve) {
  Sandbox box;
  const std::vector<std::string> ops = {
      "init",           "gcreate",   kAlloc600, "gfree",
      "ginst",                                 // 1-4: graph 0, instantiated: nothing reserved
      "info",           "gattr",               // 5-6
      "glaunch:0",      "info",      "gattr",  // 7-9: reserved at the first launch
      "glaunch:0",      "info",                // 10-11: relaunch: reused, nothing more
      "gcreate",        kAlloc600,   "gfree",   "ginst",  // 12-15: graph 1
      "glaunch:1",      "gupload:1", "gattr",   "info",   // 16-19: refused twice, nothing reserved
      "gexecdestroy:0", "gattr",     "info",              // 20-22: the memory stays in the pool
      "glaunch:1",      "gattr",     "info",              // 23-25: graph 1 reuses it
      "gtrim",          "gattr",     "info",              // 26-28: given back
      "glaunch:1",      "gattr",     "info"};             // 29-31: reserved and charged again
  std::vector<std::string> out;
  auto env = LimitEnv(box, "1000m");
  env.erase("LIBCUDA_LOG_LEVEL");  // the default level reports refusals
  auto refusals = RefusalLines(box, env, ops, &out);
  ASSERT_EQ(out.size(), ops.size());
  for (size_t i : {1u, 2u, 3u, 4u, 7u, 10u, 12u, 13u, 14u, 15u, 20u, 23u, 26u, 29u})
    EXPECT_EQ(Rc(out[i]), 0) << out[i];
  EXPECT_EQ(InfoFree(out[5]), 1000 * kMiB);
  GraphPool p = Attr(out[6]);
  EXPECT_EQ(p.reserved, 0u);
  EXPECT_EQ(p.used, 0u);
  EXPECT_EQ(InfoFree(out[8]), 400 * kMiB);
  p = Attr(out[9]);
  EXPECT_EQ(p.reserved, k600);
  EXPECT_EQ(p.used, k600);
  EXPECT_EQ(InfoFree(out[11]), 400 * kMiB);
  EXPECT_EQ(Rc(out[16]), 2);  // CUDA_ERROR_OUT_OF_MEMORY: 600 + 600 > 1000 MiB
  EXPECT_EQ(Rc(out[17]), 2);
  p = Attr(out[18]);
  EXPECT_EQ(p.reserved, k600);  // the refused calls reserved nothing
  EXPECT_EQ(p.reserved_high, k600);
  EXPECT_EQ(InfoFree(out[19]), 400 * kMiB);  // and nothing stayed charged
  p = Attr(out[21]);
  EXPECT_EQ(p.used, 0u);
  EXPECT_EQ(p.reserved, k600);
  EXPECT_EQ(InfoFree(out[22]), 400 * kMiB);  // reserved is charged, destroyed or not
  p = Attr(out[24]);
  EXPECT_EQ(p.used, k600);
  EXPECT_EQ(p.reserved, k600);
  EXPECT_EQ(InfoFree(out[25]), 400 * kMiB);
  p = Attr(out[27]);
  EXPECT_EQ(p.reserved, 0u);
  EXPECT_EQ(p.reserved_high, k600);
  EXPECT_EQ(InfoFree(out[28]), 1000 * kMiB);
  EXPECT_EQ(Attr(out[30]).reserved, k600);
  EXPECT_EQ(InfoFree(out[31]), 400 * kMiB);
  const std::vector<std::string> expected = {
      "fracgpu: cuGraphLaunch's graph memory of 600 MiB refused: 600 MiB used of the 1000 MiB "
      "limit on GPU 0",
      "fracgpu: cuGraphUpload's graph memory of 600 MiB refused: 600 MiB used of the 1000 MiB "
      "limit on GPU 0"};
  EXPECT_EQ(refusals, expected);
}

// CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD reserves within cuGraphInstantiateWithParams (and _ptsz):
// refused there, with the driver's failure report in the parameters; the legacy 5-argument
// instantiate variants and the cuGraphAddNode(_v2) allocation nodes are charged alike.
TEST(VgpuGraphMemory, InstantiateWithUploadAndEveryVariantAreCharged) {
  Sandbox box;
  auto out = RunApp(box, LimitEnv(box, "1000m"),
                    {"init",
                     "gcreate",
                     "galloc:" + std::to_string(k300) + ":p",
                     "ginstp:2",
                     "info",  // 1-4
                     "gcreate",
                     "galloc:" + std::to_string(k300) + ":p2",
                     "ginstp:2:ptsz",
                     "info",  // 5-8
                     "gcreate",
                     kAlloc600,
                     "ginstp:2",
                     "ginstp:2:ptsz",
                     "gattr",
                     "info",  // 9-14
                     "gcreate",
                     kAlloc300,
                     "ginstv1",
                     "glaunch",
                     "info",  // 15-19
                     "gcreate",
                     kAlloc300,
                     "ginstv2",
                     "glaunch",
                     "gupload"});  // 20-24
  ASSERT_EQ(out.size(), 25u);
  EXPECT_EQ(out[3], "ginstp 0 0");
  EXPECT_EQ(InfoFree(out[4]), 700 * kMiB);
  EXPECT_EQ(out[7], "ginstp 0 0");
  EXPECT_EQ(InfoFree(out[8]), 400 * kMiB);
  EXPECT_EQ(out[11], "ginstp 2 1");  // OUT_OF_MEMORY, CUDA_GRAPH_INSTANTIATE_ERROR
  EXPECT_EQ(out[12], "ginstp 2 1");
  EXPECT_EQ(Attr(out[13]).reserved, k600);
  EXPECT_EQ(InfoFree(out[14]), 400 * kMiB);
  EXPECT_EQ(Rc(out[17]), 0);  // cuGraphInstantiate (v10000): instantiated, nothing reserved
  EXPECT_EQ(Rc(out[18]), 0);
  EXPECT_EQ(InfoFree(out[19]), 100 * kMiB);
  EXPECT_EQ(Rc(out[22]), 0);  // cuGraphInstantiate_v2 (v11000)
  EXPECT_EQ(Rc(out[23]), 2);  // 900 + 300 > 1000 MiB, at the launch
  EXPECT_EQ(Rc(out[24]), 2);  // and at an upload
}

// The charge is the container's: cuMemGetInfo, the region's slot (data_bytes) and NVML show it.
TEST(VgpuGraphMemory, ReservedMemoryShowsInEveryView) {
  Sandbox box;
  auto out = RunApp(
      box, LimitEnv(box, "1000m"),
      {"init", "gcreate", kAlloc600, "gfree", "ginst", "gupload", "region:0", "nvml:0", "info"});
  ASSERT_EQ(out.size(), 9u);
  auto region = Fields(out[6]);
  ASSERT_GE(region.size(), 10u) << out[6];
  EXPECT_EQ(region[3], std::to_string(k600));  // the slot's used
  EXPECT_EQ(region[6], std::to_string(k600));  // of it, data_bytes
  EXPECT_EQ(region[9], std::to_string(k600));  // the device's container total
  auto nvml = Fields(out[7]);
  ASSERT_EQ(nvml.size(), 7u) << out[7];
  EXPECT_EQ(nvml[1], "0");
  EXPECT_EQ(nvml[2], std::to_string(1000 * kMiB));  // total: the limit
  EXPECT_EQ(nvml[3], std::to_string(k600));         // used
  EXPECT_EQ(InfoFree(out[8]), 400 * kMiB);
}

// One limit across the container's processes: graph memory of one process and allocations of
// another add up; a killed process's graph memory is reclaimed like any charge.
TEST(VgpuGraphMemory, ProcessesShareOneLimit) {
  Sandbox box;
  auto env = LimitEnv(box, "1000m");
  Child a = Spawn(box, env, {"init", "gcreate", kAlloc600, "gfree", "ginst", "glaunch", "wait"});
  for (int i = 0; i < 6; ++i) EXPECT_EQ(Rc(ReadLine(a)), 0);
  EXPECT_EQ(ReadLine(a), "ready");
  auto b = RunApp(box, env,
                  {"init", "alloc:" + std::to_string(500 * kMiB), "gcreate", kAlloc300, "gfree",
                   "ginst", "glaunch", "gcreate", kAlloc300, "gfree", "ginst", "glaunch", "info"});
  ASSERT_EQ(b.size(), 13u);
  EXPECT_EQ(Rc(b[1]), 2);   // 600 + 500 > 1000 MiB
  EXPECT_EQ(Rc(b[6]), 0);   // 600 + 300 fits
  EXPECT_EQ(Rc(b[11]), 2);  // 600 + 300 + 300 does not
  EXPECT_EQ(InfoFree(b[12]), 100 * kMiB);
  kill(a.pid, SIGKILL);
  int status = 0;
  Finish(a, &status);
  ASSERT_TRUE(WIFSIGNALED(status));
  auto c = RunApp(box, env, {"init", "alloc:" + std::to_string(900 * kMiB), "info"});
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(Rc(c[1]), 0);  // the killed process's 600 MiB were reclaimed
  EXPECT_EQ(InfoFree(c[2]), 100 * kMiB);
}

// Stream capture: cuMemAllocAsync on a capturing stream adds an allocation node and reserves
// nothing (even with the pool unable to grow), so the capture is never refused; the graph's
// memory is charged when it is launched.
TEST(VgpuGraphMemory, CapturedAllocationsAreChargedAtLaunch) {
  Sandbox box;
  auto out = RunApp(
      box, LimitEnv(box, "1000m"),
      {"init", "alloc:" + std::to_string(300 * kMiB), "gcapture:" + std::to_string(k600) + ":free",
       "info", "ginst", "glaunch", "info",                                                   // 3-6
       "gcapture:" + std::to_string(k300) + ":free", "info", "ginst", "glaunch", "gattr"});  // 7-11
  ASSERT_EQ(out.size(), 12u);
  EXPECT_EQ(out[2], "gcapture 0 0");
  EXPECT_EQ(InfoFree(out[3]), 700 * kMiB);  // capture charged nothing
  EXPECT_EQ(Rc(out[5]), 0);
  EXPECT_EQ(InfoFree(out[6]), 100 * kMiB);
  EXPECT_EQ(out[7], "gcapture 0 0");  // the pool could not grow by 300 MiB now: not asked to
  EXPECT_EQ(InfoFree(out[8]), 100 * kMiB);
  EXPECT_EQ(Rc(out[10]), 2);
  EXPECT_EQ(Attr(out[11]).reserved, k600);
}

// An allocation the graph leaves alive: relaunching without CUDA_GRAPH_INSTANTIATE_FLAG_
// AUTO_FREE_ON_LAUNCH is the driver's CUDA_ERROR_INVALID_VALUE, passed through; with it, the
// memory is reused. Freed with cuMemFreeAsync, it returns to the pool (still charged).
TEST(VgpuGraphMemory, LiveAllocationsAndAutoFree) {
  Sandbox box;
  auto out = RunApp(
      box, LimitEnv(box, "1000m"),
      {"init", "gcreate", kAlloc300, "ginst", "glaunch", "glaunch", "gfreelive", "glaunch",  // 1-7
       "gcreate", kAlloc300, "ginst:1", "glaunch", "glaunch", "info", "gfreelive",
       "gattr"});  // 8-15
  ASSERT_EQ(out.size(), 16u);
  EXPECT_EQ(Rc(out[4]), 0);
  EXPECT_EQ(Rc(out[5]), 1);  // CUDA_ERROR_INVALID_VALUE: its allocation is still alive
  EXPECT_EQ(Rc(out[6]), 0);
  EXPECT_EQ(Rc(out[7]), 0);
  EXPECT_EQ(Rc(out[11]), 0);
  EXPECT_EQ(Rc(out[12]), 0);  // auto-free on launch
  EXPECT_EQ(InfoFree(out[13]), 400 * kMiB);
  EXPECT_EQ(Rc(out[14]), 0);
  GraphPool p = Attr(out[15]);
  EXPECT_EQ(p.reserved, k600);
  EXPECT_EQ(p.used, k600);  // both executable graphs keep their memory mapped
}

// cudaDeviceReset-style release: the device's last context takes the graph memory with it.
TEST(VgpuGraphMemory, LastContextDropsTheCharge) {
  Sandbox box;
  auto out = RunApp(box, LimitEnv(box, "1000m"),
                    {"init", "gcreate", kAlloc600, "gfree", "ginst", "glaunch", "region:0",
                     "release_primary", "region:0", "ctx:0", "info"});
  ASSERT_EQ(out.size(), 11u);
  EXPECT_EQ(Fields(out[6])[3], std::to_string(k600));
  EXPECT_EQ(Rc(out[7]), 0);
  EXPECT_EQ(Fields(out[8])[3], "0");
  EXPECT_EQ(Fields(out[8])[9], "0");
  EXPECT_EQ(InfoFree(out[10]), 1000 * kMiB);
}

// Bad input gets exactly the driver's answer: the same calls with and without libvgpu.so.
TEST(VgpuGraphMemory, BadInputGetsTheDriversAnswer) {
  Sandbox box;
  auto env = LimitEnv(box, "1000m");
  auto with = RunApp(box, env, {"init", "gbad"});
  Sandbox plain_box;
  auto plain_env = plain_box.Env();
  plain_env.erase("LD_PRELOAD");
  auto without = RunApp(plain_box, plain_env, {"init", "gbad"});
  ASSERT_EQ(with.size(), 2u);
  ASSERT_EQ(without.size(), 2u);
  EXPECT_EQ(with[1], without[1]);
  // As documented in cuda.h: INVALID_VALUE for null or unknown handles and parameters,
  // INVALID_DEVICE for a device that does not exist.
  EXPECT_EQ(without[1], "gbad 1 1 1 1 1 1 1 1 1 1 1 1 101 101 1 1 1 1 1");
}

// cuGetProcAddress answers every variant of the hooked graph bases with the hook of that
// variant; the node-building calls, which reserve no memory, stay the driver's.
TEST(VgpuGraphMemory, EveryVariantIsHookedWithItsOwnSignature) {
  Sandbox box;
  auto env = LimitEnv(box, "1000m");
  env["FAKE_CUDA_DRIVER_VERSION"] = "13000";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"proc:cuGraphInstantiate:10000:0", "proc 0 0 vgpu cuGraphInstantiate"},
      {"proc:cuGraphInstantiate:11000:0", "proc 0 0 vgpu cuGraphInstantiate_v2"},
      {"proc:cuGraphInstantiate:13000:0", "proc 0 0 vgpu cuGraphInstantiate_v2"},
      {"proc:cuGraphInstantiateWithFlags:13000:0", "proc 0 0 vgpu cuGraphInstantiateWithFlags"},
      {"proc:cuGraphInstantiateWithParams:13000:0", "proc 0 0 vgpu cuGraphInstantiateWithParams"},
      {"proc:cuGraphInstantiateWithParams:13000:2",
       "proc 0 0 vgpu cuGraphInstantiateWithParams_ptsz"},
      {"proc:cuGraphUpload:13000:0", "proc 0 0 vgpu cuGraphUpload"},
      {"proc:cuGraphUpload:13000:2", "proc 0 0 vgpu cuGraphUpload_ptsz"},
      {"proc:cuGraphLaunch:13000:2", "proc 0 0 vgpu cuGraphLaunch_ptsz"},
      {"proc:cuGraphExecDestroy:13000:0", "proc 0 0 vgpu cuGraphExecDestroy"},
      {"proc:cuDeviceGraphMemTrim:13000:0", "proc 0 0 vgpu cuDeviceGraphMemTrim"},
      {"proc:cuGraphAddMemAllocNode:13000:0", "proc 0 0 wake cuGraphAddMemAllocNode"},
      {"proc:cuGraphAddNode:13000:0", "proc 0 0 wake cuGraphAddNode_v2"},
      {"proc:cuDeviceGetGraphMemAttribute:13000:0", "proc 0 0 wake cuDeviceGetGraphMemAttribute"},
      {"proc:cuGraphInstantiateWithFlags:11030:0", "proc 0 2 null -"},  // VERSION_NOT_SUFFICIENT
  };
  std::vector<std::string> ops;
  for (const auto& c : cases) ops.push_back(c.first);
  auto out = RunApp(box, env, ops);
  ASSERT_EQ(out.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(out[i], cases[i].second) << cases[i].first;
}

// A driver may answer a base with another base's function (cuda.h maps cuGraphInstantiate to
// cuGraphInstantiateWithFlags): pointer identity gives the hook of that function's own
// signature, never the 5-argument cuGraphInstantiate_v2 hook the table names.
TEST(VgpuGraphMemory, AnAnswerOfAnotherBaseGetsThatFunctionsHook) {
  Sandbox box;
  auto env = LimitEnv(box, "1000m");
  env["FAKE_CUDA_DRIVER_VERSION"] = "13000";
  env["FAKE_CUDA_ALIAS"] = "cuGraphInstantiate:12000:cuGraphInstantiateWithFlags";
  auto out =
      RunApp(box, env, {"proc:cuGraphInstantiate:13000:0", "proc:cuGraphInstantiate:11000:0"});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], "proc 0 0 vgpu cuGraphInstantiateWithFlags");
  EXPECT_EQ(out[1], "proc 0 0 vgpu cuGraphInstantiate_v2");
}

}  // namespace
}  // namespace fracgpu::vgpu::testing
