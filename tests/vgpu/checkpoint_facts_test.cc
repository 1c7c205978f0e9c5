// libvgpu.so records in the process's region slot (api/region.h RegionSlot::uses) what the CUDA
// checkpoint API cannot handle (NVIDIA/cuda-checkpoint README: no UVM, no IPC): managed memory,
// IPC memory and event handles, VMM shareable handles, pools shared between processes. Each bit
// is set only when the driver's call succeeded; kSlotUsesRecorded marks a slot whose library
// records them. Run through vgpu_app over the fake driver (its "uses" op prints the word).
#include <gtest/gtest.h>

#include "api/region.h"
#include "harness.h"

namespace fracgpu::vgpu::testing {
namespace {

constexpr long long kRecorded = api::kSlotUsesRecorded;

std::map<std::string, std::string> LimitedEnv(const Sandbox& box) {
  auto env = box.Env();
  env["FAKE_GPU_DEVICES"] = std::string(kUuid0) + ":4096";
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "1000m";
  return env;
}

long long Uses(const std::string& line) {
  auto f = Fields(line);
  return f.size() == 2 && f[0] == "uses" ? std::stoll(f[1]) : -2;
}

struct Case {
  const char* name;
  std::vector<std::string> ops;  // each followed by "uses" in the run
  long long expected;            // the word after the ops (kRecorded | bits)
  bool no_state_dir = false;     // without FAKE_GPU_STATE_DIR the fake refuses IPC
};

TEST(VgpuCheckpointFacts, EachSharedOrManagedUseSetsItsBitOnlyOnSuccess) {
  const std::vector<Case> cases = {
      {"plain allocations", {"alloc:1048576", "free"}, kRecorded},
      {"managed memory", {"managed:1048576"}, kRecorded | api::kSlotUsedManagedMemory},
      {"IPC export of an allocation",
       {"alloc:1048576", "ipcget"},
       kRecorded | api::kSlotUsedIpcMemory},
      {"VMM export", {"vmm:2097152:1", "vmmexport"}, kRecorded | api::kSlotSharedVmmHandle},
      {"VMM export and import of it",
       {"vmm:2097152:1", "vmmexport", "vmmimport:self:0:2097152"},
       kRecorded | api::kSlotSharedVmmHandle},
      {"pool export", {"poolcreate:1", "poolexport"}, kRecorded | api::kSlotSharedPool},
      {"pool export and import", {"poolcreate:1", "poolimport"}, kRecorded | api::kSlotSharedPool},
      // Failures record nothing: a pool not exportable (handle types 0), an IPC export the
      // driver refuses (CUDA_ERROR_NOT_SUPPORTED: the fake without FAKE_GPU_STATE_DIR).
      {"refused pool export", {"poolcreate:0", "poolexport"}, kRecorded},
      {"refused IPC export", {"alloc:1048576", "ipcget"}, kRecorded, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Sandbox box;
    std::vector<std::string> ops = {"init"};
    ops.insert(ops.end(), c.ops.begin(), c.ops.end());
    ops.push_back("uses");
    auto env = LimitedEnv(box);
    if (c.no_state_dir) env.erase("FAKE_GPU_STATE_DIR");
    auto out = RunApp(box, env, ops);
    ASSERT_EQ(out.size(), ops.size());
    EXPECT_EQ(Uses(out.back()), c.expected) << out.back();
  }
}

TEST(VgpuCheckpointFacts, AnIpcImporterIsMarkedToo) {
  Sandbox exporter_box, importer_box;
  auto exporter_env = LimitedEnv(exporter_box);
  Child ex =
      Spawn(exporter_box, exporter_env, {"init", "alloc:41943040", "ipcget", "wait", "free"});
  std::string handle;
  for (std::string line = ReadLine(ex); !line.empty() && line != "ready"; line = ReadLine(ex)) {
    auto f = Fields(line);
    if (f.size() == 3 && f[0] == "ipcget" && f[1] == "0") handle = f[2];
  }
  ASSERT_EQ(handle.size(), 128u);
  auto env = LimitedEnv(importer_box);
  env["FAKE_GPU_STATE_DIR"] = exporter_box.dir();  // the same physical GPU
  auto out = RunApp(importer_box, env, {"init", "uses", "ipcopen:" + handle, "uses"});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(Uses(out[1]), kRecorded);
  EXPECT_EQ(out[2], "ipcopen 0");
  EXPECT_EQ(Uses(out[3]), kRecorded | api::kSlotUsedIpcMemory);
  Finish(ex);
}

// The importer of another process's VMM handle is marked by the import hook alone (in the
// export-and-import case above the export had already set the same bit).
TEST(VgpuCheckpointFacts, AVmmImporterIsMarkedToo) {
  Sandbox exporter_box, importer_box;
  auto exporter_env = LimitedEnv(exporter_box);
  Child ex = Spawn(exporter_box, exporter_env,
                   {"init", "vmm:2097152:1", "vmmexport", "wait", "unmap", "release"});
  std::string pid, fd;
  for (std::string line = ReadLine(ex); !line.empty() && line != "ready"; line = ReadLine(ex)) {
    auto f = Fields(line);
    if (f.size() == 4 && f[0] == "vmmexport" && f[1] == "0") pid = f[2], fd = f[3];
  }
  ASSERT_FALSE(pid.empty());
  auto env = LimitedEnv(importer_box);
  env["FAKE_GPU_STATE_DIR"] = exporter_box.dir();  // the same physical GPU
  auto out = RunApp(importer_box, env,
                    {"init", "uses", "vmmimport:" + pid + ":" + fd + ":2097152", "uses"});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(Uses(out[1]), kRecorded);
  EXPECT_EQ(out[2], "vmmimport 0 0");
  EXPECT_EQ(Uses(out[3]), kRecorded | api::kSlotSharedVmmHandle);
  Finish(ex);
}

}  // namespace
}  // namespace fracgpu::vgpu::testing
