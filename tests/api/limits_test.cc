// The host layout of src/api/limits.h: the path builders the writers (device plugin, DRA driver)
// and the monitor share, and the parsers of slot and limits-file names.
#include "api/limits.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <string_view>

namespace fracgpu::api {
namespace {

TEST(HostLayoutTest, BuildersTable) {
  struct Case {
    std::string hook;
    std::string vgpu, library, preload, containers, limits, node, container, region, limits_file,
        container_region;
  };
  const Case cases[] = {
      {"/usr/local", "/usr/local/vgpu", "/usr/local/vgpu/libvgpu.so",
       "/usr/local/vgpu/ld.so.preload", "/usr/local/vgpu/containers", "/usr/local/vgpu/limits",
       "/usr/local/vgpu/node", "/usr/local/vgpu/containers/uid-1_main",
       "/usr/local/vgpu/containers/uid-1_main/region.cache",
       "/usr/local/vgpu/limits/uid-1_main.env", "/usr/local/vgpu/region.cache"},
      // A trailing '/' is not doubled.
      {"/host/", "/host/vgpu", "/host/vgpu/libvgpu.so", "/host/vgpu/ld.so.preload",
       "/host/vgpu/containers", "/host/vgpu/limits", "/host/vgpu/node",
       "/host/vgpu/containers/uid-1_main", "/host/vgpu/containers/uid-1_main/region.cache",
       "/host/vgpu/limits/uid-1_main.env", "/host/vgpu/region.cache"},
      // An empty hook path gives paths relative to the working directory.
      {"", "vgpu", "vgpu/libvgpu.so", "vgpu/ld.so.preload", "vgpu/containers", "vgpu/limits",
       "vgpu/node", "vgpu/containers/uid-1_main", "vgpu/containers/uid-1_main/region.cache",
       "vgpu/limits/uid-1_main.env", "vgpu/region.cache"},
      {"/", "/vgpu", "/vgpu/libvgpu.so", "/vgpu/ld.so.preload", "/vgpu/containers", "/vgpu/limits",
       "/vgpu/node", "/vgpu/containers/uid-1_main", "/vgpu/containers/uid-1_main/region.cache",
       "/vgpu/limits/uid-1_main.env", "/vgpu/region.cache"},
  };
  const std::string slot = "uid-1_main";
  for (const Case& c : cases) {
    SCOPED_TRACE("hook \"" + c.hook + "\"");
    EXPECT_EQ(HostVgpuDir(c.hook), c.vgpu);
    EXPECT_EQ(HostLibraryFile(c.hook), c.library);
    EXPECT_EQ(HostPreloadFile(c.hook), c.preload);
    EXPECT_EQ(HostContainersDir(c.hook), c.containers);
    EXPECT_EQ(HostLimitsDir(c.hook), c.limits);
    EXPECT_EQ(HostNodeDir(c.hook), c.node);
    EXPECT_EQ(HostContainerDir(c.hook, slot), c.container);
    EXPECT_EQ(HostRegionFile(c.hook, slot), c.region);
    EXPECT_EQ(HostLimitsFile(c.hook, slot), c.limits_file);
    EXPECT_EQ(ContainerRegionFile(c.hook), c.container_region);
  }
}

// The builders join as std::filesystem::path's operator/ did in the writers before them.
TEST(HostLayoutTest, JoinsAsFilesystemPath) {
  namespace fs = std::filesystem;
  for (const std::string hook : {"/usr/local", "/host/", "", "/", "rel/dir", "/a//"}) {
    SCOPED_TRACE("hook \"" + hook + "\"");
    const fs::path vgpu = fs::path(hook) / "vgpu";
    EXPECT_EQ(HostVgpuDir(hook), vgpu.string());
    EXPECT_EQ(HostNodeDir(hook), (vgpu / "node").string());
    EXPECT_EQ(HostContainerDir(hook, "claim_c1"), (vgpu / "containers" / "claim_c1").string());
    EXPECT_EQ(HostLimitsFile(hook, "claim_c1"), (vgpu / "limits" / "claim_c1.env").string());
  }
}

TEST(HostLayoutTest, SlotFromLimitsFileNameTable) {
  struct Case {
    std::string_view file;
    std::string_view want;  // empty: not a limits file
  };
  const Case cases[] = {
      {"uid-1_main.env", "uid-1_main"},
      {"claim_abc.env", "claim_abc"},
      {"a.env", "a"},
      {"a.env.env", "a.env"},
      {".env", ""},           // nothing before the suffix
      {"env", ""},            // shorter than the suffix
      {"uid_main", ""},       // no suffix
      {"uid_main.env~", ""},  // not at the end
      {"uid_main.ENV", ""},   // case matters
      {"", ""},
  };
  for (const Case& c : cases) EXPECT_EQ(SlotFromLimitsFileName(c.file), c.want) << c.file;
  EXPECT_EQ(LimitsFileName("uid-1_main"), "uid-1_main.env");
  EXPECT_EQ(SlotFromLimitsFileName(LimitsFileName("uid-1_main")), "uid-1_main");
}

TEST(HostLayoutTest, PodContainerSlotTable) {
  EXPECT_EQ(PodContainerSlot("uid-1", "main"), "uid-1_main");
  struct Case {
    std::string_view slot;
    bool ok;
    std::string_view pod_uid, container;
  };
  const Case cases[] = {
      {"uid-1_main", true, "uid-1", "main"},
      {"claim_abc", true, "claim", "abc"},  // the DRA driver's slot splits the same way
      {"a_b_c", true, "a", "b_c"},          // at the first separator
      {"_main", true, "", "main"},
      {"uid_", true, "uid", ""},
      {"nosep", false, "kept", "kept"},
      {"", false, "kept", "kept"},
  };
  for (const Case& c : cases) {
    std::string_view uid = "kept", container = "kept";
    EXPECT_EQ(SplitPodContainerSlot(c.slot, &uid, &container), c.ok) << c.slot;
    EXPECT_EQ(uid, c.pod_uid) << c.slot;
    EXPECT_EQ(container, c.container) << c.slot;
  }
  const std::string slot = PodContainerSlot("0f3e-uid", "trainer");  // the views point into it
  std::string_view uid, container;
  ASSERT_TRUE(SplitPodContainerSlot(slot, &uid, &container));
  EXPECT_EQ(uid, "0f3e-uid");
  EXPECT_EQ(container, "trainer");
}

}  // namespace
}  // namespace fracgpu::api
