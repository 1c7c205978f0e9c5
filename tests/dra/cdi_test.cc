// The CDI spec of a claim: valid CDI at the lowest version its features need, its files written
// whole or not at all, and removed again. (That its edits are what the device plugin's Allocate
// gives a container for the same grant: tests/node/both_plugins_test.cc.)
#include "dra/cdi.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>
#include <set>

#include "test_util.h"
#include "vgpu/limits.h"

namespace fracgpu::dra {
namespace {

namespace fs = std::filesystem;

constexpr char kUuid2[] = "GPU-cccccccc-1111-2222-3333-000000000003";

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

// What a container gets from the CDI IDs the kubelet gives it, as the CDI library applies them
// (pkg/cdi/cache.go InjectDevices): the spec's own edits once, then each named device's edits.
struct Injected {
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> mounts;  // container path → host path
  std::vector<std::string> duplicates;        // env keys or mount paths given twice
};
Injected Inject(const json& spec, const std::vector<std::string>& ids) {
  Injected out;
  auto apply = [&](const json& edits) {
    for (const auto& e : edits.value("env", json::array())) {
      const std::string kv = e;
      if (!out.env.emplace(kv.substr(0, kv.find('=')), kv.substr(kv.find('=') + 1)).second)
        out.duplicates.push_back(kv);
    }
    for (const auto& m : edits.value("mounts", json::array())) {
      if (!out.mounts.emplace(m["containerPath"], m["hostPath"]).second)
        out.duplicates.push_back(m["containerPath"]);
    }
  };
  apply(spec["containerEdits"]);
  for (const auto& id : ids) {
    for (const auto& d : spec["devices"]) {
      if (spec["kind"].get<std::string>() + "=" + d["name"].get<std::string>() == id)
        apply(d["containerEdits"]);
    }
  }
  return out;
}

// libvgpu.so's reading of the limits directory those mounts give (vgpu/limits.h).
vgpu::Config ReadLimitsDir(const Injected& in) {
  std::vector<std::string> names, texts;
  const std::string dir = "/etc/fracgpu/limits.d/";
  for (const auto& [container, host] : in.mounts) {
    if (container.rfind(dir, 0) != 0) continue;
    names.push_back(container.substr(dir.size()));
    texts.push_back(testing::ReadFile(host));
  }
  std::vector<vgpu::LimitsFragment> files;
  for (size_t i = 0; i < names.size(); ++i)
    files.push_back({names[i].c_str(), texts[i].data(), texts[i].size()});
  vgpu::Config c;
  vgpu::ParseLimitsDir(&c, files.data(), files.size());
  vgpu::FinishConfig(&c);
  return c;
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
  ASSERT_EQ(spec["devices"].size(), 2u);
  EXPECT_EQ(spec["devices"][0]["name"], "claim-u2-gpu-0");
  EXPECT_EQ(spec["devices"][1]["name"], "claim-u2-gpu-1");
  EXPECT_EQ(CdiDeviceId("u2", "gpu-1"), "fracgpu.io/gpu=claim-u2-gpu-1");
  // Claim-wide: the common environment (no GPU list, no limit), libvgpu.so, the preload file,
  // the region folder, the claim's common limits file, the node folder.
  const json& common = spec["containerEdits"];
  std::set<std::string> env(common["env"].begin(), common["env"].end());
  EXPECT_EQ(
      env, (std::set<std::string>{"NVIDIA_VISIBLE_DEVICES=void",
                                  "CUDA_DEVICE_MEMORY_SHARED_CACHE=" + hook_ + "/vgpu/region.cache",
                                  "CUDA_TASK_PRIORITY=1", "GPU_CORE_UTILIZATION_POLICY=default"}));
  ASSERT_EQ(common["mounts"].size(), 5u);
  EXPECT_EQ(common["mounts"][2]["options"][0], "rw");  // the container's own region folder
  EXPECT_EQ(common["mounts"][2]["hostPath"], hook_ + "/vgpu/containers/claim_u2");
  EXPECT_EQ(common["mounts"][3]["containerPath"], "/etc/fracgpu/limits.d/claim_u2.env");
  EXPECT_EQ(common["mounts"][3]["hostPath"], hook_ + "/vgpu/limits/claim_u2.d/claim_u2.env");
  EXPECT_EQ(common["mounts"][3]["options"], json({"ro", "nosuid", "nodev", "bind"}));
  // The node directory, shared by every container of the node, is read-only (issue 32 item 2).
  EXPECT_EQ(common["mounts"][4]["containerPath"], "/run/fracgpu/node");
  EXPECT_EQ(common["mounts"][4]["options"], json({"ro", "nosuid", "nodev", "bind"}));
  // Per device: its GPU's limits file and the toolkit's device mount, nothing else.
  const json& dev1 = spec["devices"][1]["containerEdits"];
  EXPECT_FALSE(dev1.contains("env"));
  ASSERT_EQ(dev1["mounts"].size(), 2u);
  EXPECT_EQ(dev1["mounts"][0]["containerPath"],
            std::string("/etc/fracgpu/limits.d/gpu-") + testing::kUuid1 + ".env");
  EXPECT_EQ(testing::ReadFile(dev1["mounts"][0]["hostPath"]),
            std::string("NVIDIA_VISIBLE_DEVICES=") + testing::kUuid1 +
                "\nCUDA_DEVICE_MEMORY_LIMIT_0=16384m\nCUDA_DEVICE_SM_LIMIT_0=100\n");
  EXPECT_EQ(dev1["mounts"][1]["containerPath"],
            std::string("/var/run/nvidia-container-devices/") + testing::kUuid1);
  EXPECT_EQ(dev1["mounts"][1]["hostPath"], "/dev/null");
  EXPECT_EQ(testing::ReadFile(hook_ + "/vgpu/limits/claim_u2.d/claim_u2.env"),
            "CUDA_DEVICE_MEMORY_SHARED_CACHE=" + hook_ +
                "/vgpu/region.cache\nGPU_CORE_UTILIZATION_POLICY=default\nCUDA_TASK_PRIORITY=1\n");
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  ASSERT_EQ(stat(dev1["mounts"][0]["hostPath"].get<std::string>().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
  // The claim-wide limits file (all its GPUs) stays on the host for the monitor.
  EXPECT_NE(testing::ReadFile(hook_ + "/vgpu/limits/claim_u2.env")
                .find("CUDA_DEVICE_MEMORY_LIMIT_1=16384m"),
            std::string::npos);
  ASSERT_TRUE(RemoveClaimFiles("u2", opts_).ok());
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(hook_ + "/vgpu/limits/claim_u2.env"));
  EXPECT_FALSE(fs::exists(hook_ + "/vgpu/limits/claim_u2.d"));
  EXPECT_FALSE(fs::exists(hook_ + "/vgpu/containers/claim_u2"));
  EXPECT_TRUE(RemoveClaimFiles("u2", opts_).ok());  // idempotent
}

TEST_F(CdiTest, ContainersNamingSomeDevicesGetExactlyTheirGpusAndLimits) {
  // A claim of three shares: a container naming one device, two, or all of them gets those
  // GPUs' limits (as libvgpu.so merges them), each once, and no env key or mount twice.
  AllocatedShare s0{"small", "node-a", "gpu-0", testing::kUuid0, 3000, 30, "a"};
  AllocatedShare s1{"large", "node-a", "gpu-1", testing::kUuid1, 8000, 60, "b"};
  AllocatedShare s2{"large", "node-a", "gpu-2", kUuid2, 1000, 10, "c"};
  ASSERT_TRUE(WriteClaimFiles("u5", {s0, s1, s2}, opts_).ok());
  json spec = json::parse(testing::ReadFile(CdiSpecPath(opts_, "u5")));
  struct Row {
    std::vector<std::string> devices;
    std::vector<std::pair<std::string, uint64_t>> want;  // UUID, memory MiB, in UUID order
  };
  const std::vector<Row> rows = {
      {{"gpu-0"}, {{testing::kUuid0, 3000}}},
      {{"gpu-1", "gpu-2"}, {{testing::kUuid1, 8000}, {kUuid2, 1000}}},
      {{"gpu-2", "gpu-0"}, {{testing::kUuid0, 3000}, {kUuid2, 1000}}},
      {{"gpu-0", "gpu-1", "gpu-2"},
       {{testing::kUuid0, 3000}, {testing::kUuid1, 8000}, {kUuid2, 1000}}},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(::testing::PrintToString(r.devices));
    std::vector<std::string> ids;
    for (const auto& d : r.devices) ids.push_back(CdiDeviceId("u5", d));
    Injected in = Inject(spec, ids);
    EXPECT_TRUE(in.duplicates.empty()) << ::testing::PrintToString(in.duplicates);
    vgpu::Config c = ReadLimitsDir(in);
    ASSERT_EQ(c.error_count, 0) << c.error;
    std::string visible;
    std::vector<std::string> toolkit;
    for (const auto& [container, host] : in.mounts) {
      const std::string prefix = "/var/run/nvidia-container-devices/";
      if (container.rfind(prefix, 0) == 0) toolkit.push_back(container.substr(prefix.size()));
    }
    std::vector<std::string> want_uuids;
    for (size_t i = 0; i < r.want.size(); ++i) {
      visible += (i ? "," : "") + r.want[i].first;
      want_uuids.push_back(r.want[i].first);
      bool fail = true;
      EXPECT_EQ(vgpu::EffectiveMemoryLimit(c, static_cast<int>(i), &fail), r.want[i].second << 20);
      EXPECT_FALSE(fail);
    }
    EXPECT_EQ(c.visible_devices, visible);
    EXPECT_EQ(toolkit, want_uuids);  // the runtime's GPUs: the same ones
    EXPECT_EQ(std::string(c.region_path), hook_ + "/vgpu/region.cache");
  }
  // Two claims in one container: both claim-wide files give the region path; libvgpu refuses.
  ASSERT_TRUE(WriteClaimFiles("u6", {s0}, opts_).ok());
  json other = json::parse(testing::ReadFile(CdiSpecPath(opts_, "u6")));
  Injected a = Inject(spec, {CdiDeviceId("u5", "gpu-1")});
  Injected b = Inject(other, {CdiDeviceId("u6", "gpu-0")});
  a.mounts.insert(b.mounts.begin(), b.mounts.end());
  vgpu::Config c = ReadLimitsDir(a);
  EXPECT_TRUE(c.file_bad);
  EXPECT_NE(std::string(c.error).find("given by two files"), std::string::npos) << c.error;
}

TEST_F(CdiTest, SpecOfAnOlderDriverIsRewrittenKeepingTheRegion) {
  AllocatedShare s0{"gpu", "node-a", "gpu-0", testing::kUuid0, 3000, 30, "a"};
  ASSERT_TRUE(WriteClaimFiles("u7", {s0}, opts_).ok());
  const std::string marker = hook_ + "/vgpu/containers/claim_u7/region.cache";
  std::ofstream(marker) << "in use";
  std::ofstream(CdiSpecPath(opts_, "u7")) << "{\"old\": true}\n";
  EXPECT_NE(testing::ReadFile(CdiSpecPath(opts_, "u7")), CdiSpecText("u7", {s0}, opts_));
  ASSERT_TRUE(WriteClaimSpecFiles("u7", {s0}, opts_).ok());
  EXPECT_EQ(testing::ReadFile(CdiSpecPath(opts_, "u7")), CdiSpecText("u7", {s0}, opts_));
  EXPECT_EQ(testing::ReadFile(marker), "in use");
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
