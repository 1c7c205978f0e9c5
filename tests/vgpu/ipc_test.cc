// Memory shared between processes through IPC handles, VMM shareable handles and imported
// pools (docs/vgpu.md "Memory shared between processes"): the exporter's container pays, for as
// long as the exporter holds the allocation; opening or mapping it in another process charges
// nothing there, whether that process is in another container or in the exporter's own; the
// driver's answers to bad handles and flags pass through unchanged. The fake
// (tests/fakes/cuda/fake_cuda.cc, "IPC" and the VMM and pool export calls) maps imported memory
// without taking device memory, across the processes sharing FAKE_GPU_STATE_DIR, and answers
// bad input with the codes it documents there.
#include <gtest/gtest.h>

#include "harness.h"

namespace fracgpu::vgpu::testing {
namespace {

constexpr unsigned long long k40 = 40 * kMiB;

unsigned long long InfoFree(const std::string& line) { return std::stoull(Fields(line)[2]); }

std::map<std::string, std::string> IpcEnv(const Sandbox& box, const std::string& limit) {
  auto env = box.Env();
  env["FAKE_GPU_DEVICES"] = std::string(kUuid0) + ":4096";
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = limit;
  return env;
}

// An exporter that allocated 40 MiB and published it; it waits (stdin) before freeing it.
struct Exporter {
  Child child;
  std::string handle;  // hex, "" if the export failed
};
Exporter StartExporter(const Sandbox& box, const std::map<std::string, std::string>& env,
                       bool free_first = false) {
  std::vector<std::string> ops = {"init", "alloc:" + std::to_string(k40), "ipcget"};
  if (free_first) ops.push_back("free");
  ops.insert(ops.end(), {"wait", "region:0", "free", "region:0"});
  Exporter e{Spawn(box, env, ops), ""};
  for (std::string line = ReadLine(e.child); !line.empty() && line != "ready";
       line = ReadLine(e.child)) {
    auto f = Fields(line);
    if (f.size() == 3 && f[0] == "ipcget" && f[1] == "0") e.handle = f[2];
  }
  return e;
}

// Importer in another container (its own region, 50 MiB limit) on the same GPU: its figures
// never move; the exporter's container keeps the 40 MiB charged until it frees them.
TEST(VgpuIpc, ImportInAnotherContainerChargesNothingThere) {
  Sandbox exporter_box, importer_box;
  Exporter ex = StartExporter(exporter_box, IpcEnv(exporter_box, "100m"));
  ASSERT_EQ(ex.handle.size(), 128u);
  auto env = IpcEnv(importer_box, "50m");
  env["FAKE_GPU_STATE_DIR"] = exporter_box.dir();  // the same physical GPU
  auto out = RunApp(importer_box, env,
                    {"init", "info", "ipcopen:" + ex.handle, "info", "region:0",            // 0-4
                     "ipcopen:" + ex.handle + ":1:v1", "ipcclose", "region:0", "ipcclose",  // 5-8
                     "ipcclose", "info"});                                                  // 9-10
  ASSERT_EQ(out.size(), 11u);
  EXPECT_EQ(InfoFree(out[1]), 50 * kMiB);
  EXPECT_EQ(out[2], "ipcopen 0");
  EXPECT_EQ(InfoFree(out[3]), 50 * kMiB);  // the 40 MiB mapped here are not this container's
  RegionLine r = ParseRegionLine(out[4]);
  EXPECT_EQ(r.used, 0u);
  EXPECT_EQ(r.device_used, 0u);
  EXPECT_EQ(out[5], "ipcopen 0");  // the v4010 entry point, same handle: one more reference
  EXPECT_EQ(out[6], "ipcclose 0");
  EXPECT_EQ(ParseRegionLine(out[7]).used, 0u);
  EXPECT_EQ(out[8], "ipcclose 0");
  EXPECT_EQ(out[9], "ipcclose 1");  // nothing left open: the driver's CUDA_ERROR_INVALID_VALUE
  EXPECT_EQ(InfoFree(out[10]), 50 * kMiB);
  auto rest = Finish(ex.child);
  ASSERT_EQ(rest.size(), 3u);
  r = ParseRegionLine(rest[0]);
  EXPECT_EQ(r.data, k40);  // still the exporter's, after the importer mapped and closed it
  EXPECT_EQ(r.device_used, k40);
  EXPECT_EQ(rest[1], "free 0");
  EXPECT_EQ(ParseRegionLine(rest[2]).device_used, 0u);
}

// Importer in the exporter's own container (the same region): the container's total stays the
// 40 MiB the exporter allocated, once; the importer's own slot stays at 0.
TEST(VgpuIpc, ImportInTheSameContainerIsNotCountedTwice) {
  Sandbox box;
  auto env = IpcEnv(box, "100m");
  Exporter ex = StartExporter(box, env);
  ASSERT_EQ(ex.handle.size(), 128u);
  auto out = RunApp(
      box, env, {"init", "info", "ipcopen:" + ex.handle, "info", "region:0", "ipcclose", "info"});
  ASSERT_EQ(out.size(), 7u);
  EXPECT_EQ(InfoFree(out[1]), 60 * kMiB);
  EXPECT_EQ(out[2], "ipcopen 0");
  EXPECT_EQ(InfoFree(out[3]), 60 * kMiB);
  RegionLine r = ParseRegionLine(out[4]);
  EXPECT_EQ(r.used, 0u);
  EXPECT_EQ(r.device_used, k40);
  EXPECT_EQ(InfoFree(out[6]), 60 * kMiB);
  auto rest = Finish(ex.child);
  ASSERT_EQ(rest.size(), 3u);
  EXPECT_EQ(ParseRegionLine(rest[0]).data, k40);
  EXPECT_EQ(ParseRegionLine(rest[2]).device_used, 0u);
}

// Bad handles and flags: the same answers with libvgpu.so as without. A handle that is not the
// driver's, or whose allocation was freed, is CUDA_ERROR_INVALID_HANDLE; flags other than
// CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS and an address never opened are CUDA_ERROR_INVALID_VALUE.
TEST(VgpuIpc, BadHandlesGetTheDriversAnswer) {
  Sandbox box;
  auto env = IpcEnv(box, "100m");
  Exporter live = StartExporter(box, env);
  Exporter freed = StartExporter(box, env, /*free_first=*/true);
  ASSERT_EQ(live.handle.size(), 128u);
  ASSERT_EQ(freed.handle.size(), 128u);
  const std::vector<std::string> ops = {
      "init",        "ipcopen:00", "ipcopen:" + freed.handle, "ipcopen:" + live.handle + ":2",
      "ipcclosebad", "region:0"};
  auto hooked = RunApp(box, env, ops);
  auto plain_env = env;
  plain_env.erase("LD_PRELOAD");
  auto plain = RunApp(box, plain_env, ops);
  ASSERT_EQ(hooked.size(), ops.size());
  ASSERT_EQ(plain.size(), ops.size());
  const std::vector<std::string> expected = {"ipcopen 400", "ipcopen 400", "ipcopen 1",
                                             "ipcclosebad 1"};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(plain[i + 1], expected[i]);
    EXPECT_EQ(hooked[i + 1], expected[i]);
  }
  EXPECT_EQ(ParseRegionLine(hooked[5]).used, 0u);
  Finish(live.child);
  Finish(freed.child);
}

// A pool imported from a shareable handle names the exporter's memory. Here the fake lets the
// process import its own pool, whose 10 MiB reservation the imported handle then reports (the
// strongest case for a mischarge): the pool hooks never charge it, an allocation from it gets
// the driver's refusal (CUDA_ERROR_INVALID_VALUE, the fake's code for what cuda.h says imported
// pools do not support), and synchronisation, which re-reads every tracked pool, changes nothing.
TEST(VgpuIpc, ImportedPoolIsNeverCharged) {
  Sandbox box;
  auto out = RunApp(box, IpcEnv(box, "100m"),
                    {"init", "poolcreate:1", "poolalloc:10485760", "region:0",     // 0-3
                     "poolimport", "ipoolreserved", "ipoolalloc:1048576", "sync",  // 4-7
                     "region:0", "ipooldestroy", "region:0"});                     // 8-10
  ASSERT_EQ(out.size(), 11u);
  EXPECT_EQ(out[2], "poolalloc 0");
  EXPECT_EQ(ParseRegionLine(out[3]).data, 10 * kMiB);
  EXPECT_EQ(out[4], "poolimport 0 0");
  EXPECT_EQ(out[5], "ipoolreserved 0 " + std::to_string(10 * kMiB));
  EXPECT_EQ(out[6], "ipoolalloc 1");
  RegionLine r = ParseRegionLine(out[8]);
  EXPECT_EQ(r.data, 10 * kMiB);  // once: the pool's own reservation, not the import's view of it
  EXPECT_EQ(r.device_used, 10 * kMiB);
  EXPECT_EQ(out[9], "ipooldestroy 0");
  EXPECT_EQ(ParseRegionLine(out[10]).data, 10 * kMiB);
}

// VMM shareable handles: cuMemMap of an imported handle is no new allocation. In the exporting
// process itself (the fake keeps the memory until both handles are released and unmapped) the
// 4 MiB stay charged once, to the cuMemCreate handle; in another container the importer's
// figures never move while the exporter keeps its charge until it releases and unmaps.
TEST(VgpuIpc, ImportedVmmHandleMapsWithoutACharge) {
  Sandbox box;
  auto out =
      RunApp(box, IpcEnv(box, "100m"),
             {"init", "vmm:4194304:1", "vmmexport", "vmmimport:self:0:4194304", "region:0",  // 0-4
              "unmap", "release", "region:0", "unmap", "release", "region:0"});              // 5-10
  ASSERT_EQ(out.size(), 11u);
  EXPECT_EQ(Rc(out[2]), 0) << out[2];
  EXPECT_EQ(out[3], "vmmimport 0 0");
  EXPECT_EQ(ParseRegionLine(out[4]).data, 4 * kMiB);
  EXPECT_EQ(ParseRegionLine(out[7]).data,
            4 * kMiB);                           // the import's unmap and release: nothing moves
  EXPECT_EQ(ParseRegionLine(out[10]).data, 0u);  // the original's: the memory is gone

  Sandbox importer_box;
  Child ex = Spawn(
      box, IpcEnv(box, "100m"),
      {"init", "vmm:4194304:1", "vmmexport", "wait", "region:0", "unmap", "release", "region:0"});
  std::string pid, fd;
  for (std::string line = ReadLine(ex); !line.empty() && line != "ready"; line = ReadLine(ex)) {
    auto f = Fields(line);
    if (f.size() == 4 && f[0] == "vmmexport" && f[1] == "0") pid = f[2], fd = f[3];
  }
  ASSERT_FALSE(pid.empty());
  auto env = IpcEnv(importer_box, "50m");
  env["FAKE_GPU_STATE_DIR"] = box.dir();
  auto imp = RunApp(importer_box, env,
                    {"init", "vmmimport:" + pid + ":" + fd + ":4194304", "region:0", "info",
                     "unmap", "release", "info"});
  ASSERT_EQ(imp.size(), 7u);
  EXPECT_EQ(imp[1], "vmmimport 0 0");
  EXPECT_EQ(ParseRegionLine(imp[2]).used, 0u);
  EXPECT_EQ(InfoFree(imp[3]), 50 * kMiB);
  EXPECT_EQ(InfoFree(imp[6]), 50 * kMiB);
  auto rest = Finish(ex);
  ASSERT_EQ(rest.size(), 4u);
  EXPECT_EQ(ParseRegionLine(rest[0]).data, 4 * kMiB);
  EXPECT_EQ(ParseRegionLine(rest[3]).data, 0u);
}

}  // namespace
}  // namespace fracgpu::vgpu::testing
