// The CDI spec of a claim: valid CDI at the lowest version its features need, its files written
// whole or not at all, and removed again. (That its edits are what the device plugin's Allocate
// gives a container for the same grant: tests/node/both_plugins_test.cc.)
#include "dra/cdi.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "test_util.h"

namespace fracgpu::dra {
namespace {

namespace fs = std::filesystem;

class CdiTest : public ::testing::Test {
 protected:
  CdiTest() {
    hook_ = dir_.path() + "/hook";
    fs::create_directories(hook_ + "/vgpu");
    std::ofstream(hook_ + "/vgpu/libvgpu.so") << "ELF";
    opts_.cdi_dir = dir_.path() + "/cdi";
    fs::create_directories(opts_.cdi_dir);
    opts_.hook_path = hook_;
  }
  testing::TempDir dir_;
  std::string hook_;
  CdiOptions opts_;
};

TEST(CdiVersionTest, MinimumVersionFollowsTheFeaturesUsed) {
  // The rules of tags.cncf.io/container-device-interface specs-go/version.go, one per row.
  json base = {
      {"kind", "fracgpu.io/gpu"},
      {"devices", json::array({{{"name", "claim-u"}, {"containerEdits", json::object()}}})}};
  EXPECT_EQ(MinimumCdiVersion(base), "0.3.0");
  struct Row {
    const char* what;
    json::json_pointer at;
    json value;
    const char* want;
  };
  const std::vector<Row> rows = {
      {"mount with a type", json::json_pointer("/devices/0/containerEdits/mounts"),
       json::array({{{"hostPath", "/a"}, {"containerPath", "/a"}, {"type", "bind"}}}), "0.4.0"},
      {"mount without a type", json::json_pointer("/devices/0/containerEdits/mounts"),
       json::array({{{"hostPath", "/a"}, {"containerPath", "/a"}}}), "0.3.0"},
      {"device name starting with a digit", json::json_pointer("/devices/0/name"), "0claim",
       "0.5.0"},
      {"device node hostPath", json::json_pointer("/containerEdits/deviceNodes"),
       json::array({{{"path", "/dev/x"}, {"hostPath", "/dev/y"}}}), "0.5.0"},
      {"spec annotations", json::json_pointer("/annotations"), {{"a", "b"}}, "0.6.0"},
      {"device annotations", json::json_pointer("/devices/0/annotations"), {{"a", "b"}}, "0.6.0"},
      {"dotted class", json::json_pointer("/kind"), "fracgpu.io/gpu.share", "0.6.0"},
      {"additionalGids", json::json_pointer("/devices/0/containerEdits/additionalGids"),
       json::array({44}), "0.7.0"},
  };
  for (const auto& r : rows) {
    json spec = base;
    spec[r.at] = r.value;
    EXPECT_EQ(MinimumCdiVersion(spec), r.want) << r.what;
  }
}

TEST_F(CdiTest, SpecFileIsValidCdiAndRemovedAgain) {
  AllocatedShare s0{"gpu", "node-a", "gpu-0", testing::kUuid0, 3000, 30, "a"};
  AllocatedShare s1{"gpu", "node-a", "gpu-1", testing::kUuid1, 16384, 100, ""};
  ASSERT_TRUE(WriteClaimFiles("u2", {s0, s1}, opts_).ok());
  std::string path = CdiSpecPath(opts_, "u2");
  EXPECT_EQ(path, opts_.cdi_dir + "/fracgpu.io-gpu-claim-u2.json");
  json spec = json::parse(testing::ReadFile(path));
  // The lowest version whose features it uses: mounts with a type (CDI 0.4.0).
  EXPECT_EQ(spec["cdiVersion"], "0.4.0");
  EXPECT_EQ(spec["kind"], "fracgpu.io/gpu");
  ASSERT_EQ(spec["devices"].size(), 1u);
  EXPECT_EQ(spec["devices"][0]["name"], "claim-u2");
  EXPECT_EQ(CdiDeviceId("u2"), "fracgpu.io/gpu=claim-u2");
  const json& edits = spec["devices"][0]["containerEdits"];
  std::set<std::string> env(edits["env"].begin(), edits["env"].end());
  EXPECT_TRUE(
      env.count(std::string("NVIDIA_VISIBLE_DEVICES=") + testing::kUuid0 + "," + testing::kUuid1));
  EXPECT_TRUE(env.count("CUDA_DEVICE_MEMORY_LIMIT_0=3000m"));
  EXPECT_TRUE(env.count("CUDA_DEVICE_MEMORY_LIMIT_1=16384m"));
  EXPECT_TRUE(env.count("CUDA_DEVICE_SM_LIMIT_1=100"));
  ASSERT_EQ(edits["mounts"].size(), 5u);
  EXPECT_EQ(edits["mounts"][3]["containerPath"], "/etc/fracgpu/limits.env");
  EXPECT_EQ(edits["mounts"][3]["options"], json({"ro", "nosuid", "nodev", "bind"}));
  EXPECT_EQ(edits["mounts"][2]["options"][0], "rw");  // the container's own region folder
  // The node directory, shared by every container of the node, is read-only (issue 32 item 2).
  EXPECT_EQ(edits["mounts"][4]["containerPath"], "/run/fracgpu/node");
  EXPECT_EQ(edits["mounts"][4]["options"], json({"ro", "nosuid", "nodev", "bind"}));
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  ASSERT_TRUE(RemoveClaimFiles("u2", opts_).ok());
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(hook_ + "/vgpu/limits/claim_u2.env"));
  EXPECT_FALSE(fs::exists(hook_ + "/vgpu/containers/claim_u2"));
  EXPECT_TRUE(RemoveClaimFiles("u2", opts_).ok());  // idempotent
}

TEST_F(CdiTest, UnwritableCdiDirLeavesNothingBehind) {
  std::ofstream(dir_.path() + "/not-a-dir") << "x";
  opts_.cdi_dir = dir_.path() + "/not-a-dir/cdi";  // ENOTDIR even for root
  AllocatedShare s{"gpu", "node-a", "gpu-0", testing::kUuid0, 3000, 30, "a"};
  Status st = WriteClaimFiles("u3", {s}, opts_);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("CDI spec directory " + opts_.cdi_dir), std::string::npos)
      << st.message();
  EXPECT_FALSE(fs::exists(hook_ + "/vgpu/limits/claim_u3.env"));
  EXPECT_FALSE(fs::exists(hook_ + "/vgpu/containers/claim_u3"));
}

TEST_F(CdiTest, MissingLibvgpuRefusesToPrepare) {
  fs::remove(hook_ + "/vgpu/libvgpu.so");
  AllocatedShare s{"gpu", "node-a", "gpu-0", testing::kUuid0, 3000, 30, "a"};
  Status st = WriteClaimFiles("u4", {s}, opts_);
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("without isolation"), std::string::npos);
  EXPECT_FALSE(fs::exists(CdiSpecPath(opts_, "u4")));
}

}  // namespace
}  // namespace fracgpu::dra
