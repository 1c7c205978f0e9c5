// The configuration parser of libvgpu.so (src/vgpu/limits.h): good and bad values, the
// precedence of the limits file over the environment.
#include "vgpu/limits.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

namespace fracgpu::vgpu {
namespace {

TEST(VgpuLimits, MemoryValues) {
  struct Case {
    const char* text;
    bool ok;
    uint64_t bytes;
  };
  const Case cases[] = {
      {"3000m", true, 3000ull << 20},
      {"3000M", true, 3000ull << 20},
      {"1g", true, 1ull << 30},
      {"2G", true, 2ull << 30},
      {"512k", true, 512ull << 10},
      {"1073741824", true, 1ull << 30},
      {"0", true, 0},
      {"", false, 0},
      {"m", false, 0},
      {"3Gi", false, 0},
      {"3Gb", false, 0},
      {"-1", false, 0},
      {"+5", false, 0},
      {" 5", false, 0},
      {"5 ", false, 0},
      {"1.5g", false, 0},
      {"0x10", false, 0},
      {"18446744073709551616", false, 0},
      {"17179869184g", false, 0},
      {"16777215g", true, 16777215ull << 30},
  };
  for (const Case& c : cases) {
    uint64_t v = 0;
    EXPECT_EQ(ParseMemoryLimit(c.text, &v), c.ok) << c.text;
    if (c.ok) {
      EXPECT_EQ(v, c.bytes) << c.text;
    }
  }
}

TEST(VgpuLimits, SmValues) {
  uint32_t v = 0;
  EXPECT_TRUE(ParseSmLimit("30", &v));
  EXPECT_EQ(v, 30u);
  EXPECT_TRUE(ParseSmLimit("100", &v));
  EXPECT_EQ(v, 100u);
  for (const char* bad : {"", "101", "-1", "3O", "1000", "50%"})
    EXPECT_FALSE(ParseSmLimit(bad, &v)) << bad;
}

TEST(VgpuLimits, FileWinsOverEnvironmentForContractKeys) {
  Config c;
  std::string file =
      "# written by the device plugin\r\nCUDA_DEVICE_MEMORY_LIMIT_0=3000m\r\n"
      "CUDA_DEVICE_SM_LIMIT_0=30\nCUDA_DEVICE_MEMORY_SHARED_CACHE=/r/a.cache\n"
      "NVIDIA_VISIBLE_DEVICES=GPU-a\n\n";
  ParseLimitsFile(&c, file.data(), file.size());
  std::vector<std::string> env_strings = {
      "CUDA_DEVICE_MEMORY_LIMIT_0=9g", "CUDA_DEVICE_MEMORY_LIMIT_1=1g",
      "CUDA_DEVICE_MEMORY_SHARED_CACHE=/tmp/mine", "CUDA_TASK_PRIORITY=0", "LIBCUDA_LOG_LEVEL=4"};
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  ApplyEnvironment(&c, envp.data());
  FinishConfig(&c);
  bool fail = true;
  EXPECT_EQ(EffectiveMemoryLimit(c, 0, &fail), 3000ull << 20);
  EXPECT_FALSE(fail);
  EXPECT_EQ(EffectiveMemoryLimit(c, 1, &fail), 0u);  // env ignored while the file exists
  EXPECT_EQ(EffectiveSmLimit(c, 0), 30u);
  EXPECT_STREQ(c.region_path, "/r/a.cache");
  EXPECT_STREQ(c.visible_devices, "GPU-a");
  EXPECT_EQ(c.priority, 1);
  EXPECT_EQ(c.log_level, 4);
  EXPECT_EQ(c.error_count, 0);
}

TEST(VgpuLimits, EnvironmentWithoutFile) {
  Config c;
  std::vector<std::string> env_strings = {
      "CUDA_DEVICE_MEMORY_LIMIT=1g", "CUDA_DEVICE_MEMORY_LIMIT_1=2g", "CUDA_DEVICE_SM_LIMIT=100",
      "GPU_CORE_UTILIZATION_POLICY=FORCE", "CUDA_DEVICE_MEMORY_LIMIT_FOO=1"};
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  ApplyEnvironment(&c, envp.data());
  FinishConfig(&c);
  bool fail = true;
  EXPECT_EQ(EffectiveMemoryLimit(c, 0, &fail), 1ull << 30);
  EXPECT_EQ(EffectiveMemoryLimit(c, 1, &fail), 2ull << 30);
  EXPECT_FALSE(fail);
  EXPECT_EQ(EffectiveSmLimit(c, 0), 0u);  // 100 % = unlimited
  EXPECT_EQ(c.policy, CorePolicy::kForce);
  EXPECT_STREQ(c.region_path, kDefaultRegionPath);
  EXPECT_EQ(c.error_count, 0);
}

TEST(VgpuLimits, BadInputsFailClosedAndNameTheKey) {
  struct Case {
    const char* file;
    int device;
    bool device_fails;
    bool all_fail;
    const char* message_part;
  };
  const Case cases[] = {
      // Any error in the file fails every device closed (issue 32 item 4), not only its own.
      {"CUDA_DEVICE_MEMORY_LIMIT_0=3Gb\n", 0, true, true, "CUDA_DEVICE_MEMORY_LIMIT_0=\"3Gb\""},
      {"CUDA_DEVICE_MEMORY_LIMIT_0=3Gb\n", 1, true, true, "limits file line 1"},
      {"CUDA_DEVICE_MEMORY_LIMIT=x\n", 1, true, true, "CUDA_DEVICE_MEMORY_LIMIT=\"x\""},
      {"CUDA_DEVICE_MEMORY_LIMIT=1g\nCUDA_DEVICE_SM_LIMIT_2=101\n", 2, true, true, "SM limit"},
      {"CUDA_DEVICE_MEMORY_LIMIT_16=1g\n", 0, true, true, "index must be 0..15"},
      {"CUDA_DEVICE_MEMORY_LIMIT_01=1g\n", 0, true, true, "index"},
      {"garbage\n", 0, true, true, "not KEY=VALUE"},
      {"=5\n", 0, true, true, "not KEY=VALUE"},
      {"CUDA_DEVICE_MEMORY_SHARED_CACHE=relative/path\n", 0, true, true, "absolute path"},
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.file);
    Config c;
    ParseLimitsFile(&c, tc.file, std::char_traits<char>::length(tc.file));
    FinishConfig(&c);
    bool fail = false;
    EffectiveMemoryLimit(c, tc.device, &fail);
    EXPECT_EQ(fail, tc.device_fails);
    EXPECT_EQ(c.all_fail_closed, tc.all_fail);
    EXPECT_NE(std::string(c.error).find(tc.message_part), std::string::npos) << c.error;
  }
  Config c;
  std::string bad_policy =
      "CUDA_DEVICE_MEMORY_LIMIT=1g\nGPU_CORE_UTILIZATION_POLICY=sometimes\nCUDA_TASK_PRIORITY=7\n";
  ParseLimitsFile(&c, bad_policy.data(), bad_policy.size());
  EXPECT_EQ(c.policy, CorePolicy::kForce);
  EXPECT_EQ(c.priority, 1);
  EXPECT_EQ(c.error_count, 2);
  EXPECT_TRUE(c.file_bad);
}

// The limits file's grammar, strictly (issue 32 item 4): each of these gave 6,000 MiB under a
// 1,000 MiB limit before (the file "existed", so the environment's limit was ignored, and the
// file itself limited nothing). Now each marks the file bad (cuInit refuses), fails every device
// closed, and names the line, the key and the value.
TEST(VgpuLimits, StrictFileGrammarRefusesEveryBrokenFile) {
  struct Case {
    const char* file;
    const char* message_part;
  };
  const Case cases[] = {
      {"", "limits file: CUDA_DEVICE_MEMORY_LIMIT=\"\": the file names no memory limit"},
      {"# written by the device plugin\n\n", "names no memory limit"},
      {"NVIDIA_VISIBLE_DEVICES=GPU-a\n", "names no memory limit"},
      {"export CUDA_DEVICE_MEMORY_LIMIT_0=1000m\n",
       "line 1: export CUDA_DEVICE_MEMORY_LIMIT_0=\"1000m\": unknown key"},
      {"cuda_device_memory_limit_0=1000m\n",
       "line 1: cuda_device_memory_limit_0=\"1000m\": unknown key"},
      {"Cuda_Device_Memory_Limit=1000m\n", "unknown key"},
      {" CUDA_DEVICE_MEMORY_LIMIT_0=1000m\n", "unknown key"},
      {"CUDA_DEVICE_MEMORY_LIMIT_0 =1000m\n", "unknown key"},
      {"CUDA_DEVICE_MEMORY_LIMIT_0=1000m\nCUDA_DEVICE_MEMORY_LIMIT_0=6000m\n",
       "line 2: CUDA_DEVICE_MEMORY_LIMIT_0=\"6000m\": key given twice"},
      {"CUDA_DEVICE_MEMORY_LIMIT=1000m\n#\nCUDA_DEVICE_MEMORY_LIMIT=6000m\n", "line 3"},
      {"CUDA_DEVICE_MEMORY_LIMIT_0=1000m\nNVIDIA_VISIBLE_DEVICES=a\nNVIDIA_VISIBLE_DEVICES=b\n",
       "key given twice"},
      {"CUDA_DEVICE_MEMORY_LIMIT_0=1000m\nFOO=1\n", "line 2: FOO=\"1\": unknown key"},
      {"CUDA_DEVICE_MEMORY_LIMIT_0=1000m\nLIBCUDA_LOG_LEVEL=4\n", "LIBCUDA_LOG_LEVEL"},
      {"CUDA_DEVICE_MEMORY_LIMIT_0=1000m\nCUDA_DEVICE_MEMORY_LIMIT_FOO=1\n", "unknown key"},
      {"CUDA_DEVICE_MEMORY_LIMIT_0=1000m\nCUDA_DEVICE_SM_LIMIT_16=5\n", "unknown key"},
      {"CUDA_DEVICE_MEMORY_LIMIT_0=1000m\ngarbage\n", "line 2: garbage=\"\": line is not"},
      {"CUDA_DEVICE_MEMORY_LIMIT_0=6000 m\n", "line 1: CUDA_DEVICE_MEMORY_LIMIT_0=\"6000 m\""},
      {"CUDA_DEVICE_MEMORY_LIMIT_0=\n", "memory limit must be digits"},
      {"CUDA_DEVICE_MEMORY_LIMIT_0=1000m\nCUDA_TASK_PRIORITY=7\n", "line 2: CUDA_TASK_PRIORITY"},
      {"CUDA_DEVICE_MEMORY_LIMIT_0=1000m\nGPU_CORE_UTILIZATION_POLICY=off\n", "line 2"},
      {"CUDA_DEVICE_MEMORY_LIMIT_0=1000m\nCUDA_DEVICE_MEMORY_SHARED_CACHE=x\n", "absolute path"},
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.file);
    Config c;
    ParseLimitsFile(&c, tc.file, std::char_traits<char>::length(tc.file));
    std::vector<std::string> env_strings = {"CUDA_DEVICE_MEMORY_LIMIT_0=1000m"};
    std::vector<char*> envp = {env_strings[0].data(), nullptr};
    ApplyEnvironment(&c, envp.data());
    FinishConfig(&c);
    EXPECT_TRUE(c.file_bad);
    EXPECT_TRUE(c.all_fail_closed);
    for (int dev : {0, 1, 15}) {
      bool fail = false;
      EffectiveMemoryLimit(c, dev, &fail);
      EXPECT_TRUE(fail) << dev;
    }
    EXPECT_NE(std::string(c.error).find(tc.message_part), std::string::npos) << c.error;
  }
  Config nul;  // an embedded NUL in a value
  const std::string with_nul("CUDA_DEVICE_MEMORY_LIMIT_0=1000m\0\n", 34);
  ParseLimitsFile(&nul, with_nul.data(), with_nul.size());
  EXPECT_TRUE(nul.file_bad);
  EXPECT_NE(std::string(nul.error).find("line 1"), std::string::npos) << nul.error;
}

// What the device plugin and the DRA driver write (node::LimitsFileContent: visible
// devices, then per device the memory and SM limit, then region path, policy and priority)
// parses without an error; so do CRLF line ends, comments and blank lines.
TEST(VgpuLimits, TheDevicePluginsFileParses) {
  const std::string files[] = {
      "NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b\nCUDA_DEVICE_MEMORY_LIMIT_0=1000m\n"
      "CUDA_DEVICE_SM_LIMIT_0=30\nCUDA_DEVICE_MEMORY_LIMIT_1=2000m\nCUDA_DEVICE_SM_LIMIT_1=30\n"
      "CUDA_DEVICE_MEMORY_SHARED_CACHE=/usr/local/vgpu/r.cache\n"
      "GPU_CORE_UTILIZATION_POLICY=default\nCUDA_TASK_PRIORITY=1\n",
      "# comment\r\n\r\nCUDA_DEVICE_MEMORY_LIMIT=1g\r\nCUDA_DEVICE_SM_LIMIT=50\r\n",
  };
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    Config c;
    ParseLimitsFile(&c, f.data(), f.size());
    EXPECT_FALSE(c.file_bad);
    EXPECT_EQ(c.error_count, 0) << c.error;
    bool fail = true;
    EXPECT_GT(EffectiveMemoryLimit(c, 0, &fail), 0u);
    EXPECT_FALSE(fail);
  }
}

// GPU_CORE_UTILIZATION_POLICY in any letter case, from the environment and from the limits
// file; an unknown value is still the strict reading (force) with an error.
TEST(VgpuLimits, CorePolicyInAnyLetterCase) {
  const std::pair<const char*, CorePolicy> cases[] = {
      {"force", CorePolicy::kForce},     {"FORCE", CorePolicy::kForce},
      {"Force", CorePolicy::kForce},     {"fOrCe", CorePolicy::kForce},
      {"disable", CorePolicy::kDisable}, {"DISABLE", CorePolicy::kDisable},
      {"Disable", CorePolicy::kDisable}, {"default", CorePolicy::kDefault},
      {"DEFAULT", CorePolicy::kDefault}, {"Default", CorePolicy::kDefault}};
  for (const auto& [value, want] : cases) {
    SCOPED_TRACE(value);
    std::string env_string = std::string("GPU_CORE_UTILIZATION_POLICY=") + value;
    char* envp[] = {env_string.data(), nullptr};
    Config from_env;
    from_env.policy =
        want == CorePolicy::kForce ? CorePolicy::kDisable : CorePolicy::kForce;  // must change
    ApplyEnvironment(&from_env, envp);
    EXPECT_EQ(from_env.policy, want);
    EXPECT_EQ(from_env.error_count, 0) << from_env.error;
    std::string file = "CUDA_DEVICE_MEMORY_LIMIT=1g\n" + env_string + "\n";
    Config from_file;
    from_file.policy = want == CorePolicy::kForce ? CorePolicy::kDisable : CorePolicy::kForce;
    ParseLimitsFile(&from_file, file.data(), file.size());
    EXPECT_EQ(from_file.policy, want);
    EXPECT_EQ(from_file.error_count, 0) << from_file.error;
  }
  for (const char* bad : {"forced", "forc", "dis able", "FORCE-D"}) {
    SCOPED_TRACE(bad);
    std::string env_string = std::string("GPU_CORE_UTILIZATION_POLICY=") + bad;
    char* envp[] = {env_string.data(), nullptr};
    Config c;
    ApplyEnvironment(&c, envp);
    EXPECT_EQ(c.policy, CorePolicy::kForce);
    EXPECT_EQ(c.error_count, 1);
    EXPECT_NE(std::string(c.error).find("must be default, force or disable"), std::string::npos)
        << c.error;
  }
}

// ---- the limits directory (DRA: one file per GPU, one claim-wide file; ParseLimitsDir) ----

constexpr char kUuidA[] = "GPU-aaaaaaaa-0000-0000-0000-000000000001";
constexpr char kUuidB[] = "GPU-bbbbbbbb-0000-0000-0000-000000000002";

struct DirFile {
  std::string name, text;
};

Config ParseDir(const std::vector<DirFile>& files) {
  std::vector<LimitsFragment> f;
  for (const auto& d : files) f.push_back({d.name.c_str(), d.text.data(), d.text.size()});
  Config c;
  ParseLimitsDir(&c, f.data(), f.size());
  FinishConfig(&c);
  return c;
}

std::string GpuFile(const char* uuid, const char* mem, const char* sm) {
  return std::string("NVIDIA_VISIBLE_DEVICES=") + uuid + "\nCUDA_DEVICE_MEMORY_LIMIT_0=" + mem +
         "\nCUDA_DEVICE_SM_LIMIT_0=" + sm + "\n";
}

const char kCommon[] =
    "CUDA_DEVICE_MEMORY_SHARED_CACHE=/usr/local/vgpu/region.cache\n"
    "GPU_CORE_UTILIZATION_POLICY=force\nCUDA_TASK_PRIORITY=0\n";

TEST(VgpuLimitsDir, MergesGpuFilesInNameOrderWithTheCommonFile) {
  // Given out of order: gpu-B before claim_u before gpu-A; merged by name: A is device 0.
  Config c = ParseDir({{std::string("gpu-") + kUuidB + ".env", GpuFile(kUuidB, "2000m", "20")},
                       {"claim_u.env", kCommon},
                       {std::string("gpu-") + kUuidA + ".env", GpuFile(kUuidA, "1g", "30")}});
  ASSERT_EQ(c.error_count, 0) << c.error;
  EXPECT_FALSE(c.file_bad);
  EXPECT_FALSE(c.all_fail_closed);
  EXPECT_TRUE(c.file_present);
  EXPECT_EQ(std::string(c.visible_devices), std::string(kUuidA) + "," + kUuidB);
  bool fail = true;
  EXPECT_EQ(EffectiveMemoryLimit(c, 0, &fail), 1ull << 30);
  EXPECT_FALSE(fail);
  EXPECT_EQ(EffectiveMemoryLimit(c, 1, &fail), 2000ull << 20);
  EXPECT_FALSE(fail);
  EXPECT_EQ(EffectiveSmLimit(c, 0), 30u);
  EXPECT_EQ(EffectiveSmLimit(c, 1), 20u);
  EXPECT_EQ(EffectiveMemoryLimit(c, 2, &fail), 0u);  // no third GPU, no global limit
  EXPECT_STREQ(c.region_path, "/usr/local/vgpu/region.cache");
  EXPECT_EQ(c.policy, CorePolicy::kForce);
  EXPECT_EQ(c.priority, 0);
}

TEST(VgpuLimitsDir, OneGpuFileAloneIsEnough) {
  // A container naming one request of a claim gets that GPU's file and the common one.
  Config c = ParseDir({{"claim_u.env", kCommon},
                       {std::string("gpu-") + kUuidB + ".env", GpuFile(kUuidB, "3000m", "0")}});
  ASSERT_EQ(c.error_count, 0) << c.error;
  EXPECT_STREQ(c.visible_devices, kUuidB);
  bool fail = true;
  EXPECT_EQ(EffectiveMemoryLimit(c, 0, &fail), 3000ull << 20);
  EXPECT_EQ(EffectiveSmLimit(c, 0), 0u);
  // The directory stands for the file: the environment cannot lift a limit.
  std::string lift = "CUDA_DEVICE_MEMORY_LIMIT_0=0", vis = "NVIDIA_VISIBLE_DEVICES=all";
  char* envp[] = {lift.data(), vis.data(), nullptr};
  ApplyEnvironment(&c, envp);
  EXPECT_EQ(EffectiveMemoryLimit(c, 0, &fail), 3000ull << 20);
  EXPECT_STREQ(c.visible_devices, kUuidB);
}

TEST(VgpuLimitsDir, BadDirectoriesFailClosedNamingTheFile) {
  const std::string a = std::string("gpu-") + kUuidA + ".env";
  const std::string b = std::string("gpu-") + kUuidB + ".env";
  const std::string good_a = GpuFile(kUuidA, "1g", "30");
  struct Row {
    const char* what;
    std::vector<DirFile> files;
    const char* error;  // a part of Config::error
  };
  const std::vector<Row> rows = {
      {"no file", {}, "holds no file"},
      {"only the common file", {{"claim_u.env", kCommon}}, "names no GPU"},
      {"the same GPU in two files",
       {{a, good_a}, {"gpu-x.env", GpuFile(kUuidA, "2g", "10")}},
       "the GPU is named by two files"},
      {"a claim-wide key in two files",
       {{a, good_a}, {"c1.env", kCommon}, {"c2.env", kCommon}},
       "given by two files"},
      {"a GPU file naming two GPUs",
       {{a, std::string("NVIDIA_VISIBLE_DEVICES=") + kUuidA + "," + kUuidB +
                "\nCUDA_DEVICE_MEMORY_LIMIT_0=1g\n"}},
       "exactly one GPU UUID"},
      {"a GPU file naming all",
       {{a, "NVIDIA_VISIBLE_DEVICES=all\nCUDA_DEVICE_MEMORY_LIMIT_0=1g\n"}},
       "exactly one GPU UUID"},
      {"a GPU file without a memory limit",
       {{a, std::string("NVIDIA_VISIBLE_DEVICES=") + kUuidA + "\nCUDA_DEVICE_SM_LIMIT_0=30\n"}},
       "nothing else"},
      {"a GPU file with device 1's limit",
       {{a, good_a + "CUDA_DEVICE_MEMORY_LIMIT_1=1g\n"}},
       "nothing else"},
      {"a GPU file with a global limit",
       {{a, good_a + "CUDA_DEVICE_MEMORY_LIMIT=1g\n"}},
       "nothing else"},
      {"a GPU file with a claim-wide key",
       {{a, good_a + "CUDA_TASK_PRIORITY=0\n"}},
       "nothing else"},
      {"a common file with a limit",
       {{a, good_a}, {"c.env", "CUDA_DEVICE_MEMORY_LIMIT=1g\n"}},
       "limits go in GPU files"},
      {"an empty file", {{a, good_a}, {"c.env", ""}}, "limits go in GPU files"},
      {"a comment-only file", {{a, good_a}, {"c.env", "# nothing\n"}}, "limits go in GPU files"},
      {"a bad value",
       {{a, GpuFile(kUuidA, "1Gi", "30")}},
       "limits directory file gpu-GPU-aaaaaaaa-0000-0000-0000-000000000001.env line 2"},
      {"a line without =", {{a, good_a}, {"c.env", "junk\n"}}, "c.env line 1"},
      {"a key twice in one file", {{a, good_a + "CUDA_DEVICE_SM_LIMIT_0=30\n"}}, "key given twice"},
      {"LIBCUDA_LOG_LEVEL in a file",
       {{a, good_a}, {"c.env", "LIBCUDA_LOG_LEVEL=4\n"}},
       "unknown key"},
      {"a name without .env", {{"gpu-a", good_a}}, "named <name>.env"},
      {"a name that is only .env", {{".env", good_a}}, "named <name>.env"},
      {"a name with a /", {{"x/gpu.env", good_a}}, "named <name>.env"},
      {"an empty name", {{"", good_a}}, "named <name>.env"},
      {"a name of 96 bytes", {{std::string(92, 'n') + ".env", good_a}}, "named <name>.env"},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.what);
    Config c = ParseDir(r.files);
    EXPECT_TRUE(c.file_bad);
    EXPECT_TRUE(c.all_fail_closed);
    EXPECT_TRUE(c.file_present);
    EXPECT_GE(c.error_count, 1);
    EXPECT_NE(std::string(c.error).find(r.error), std::string::npos) << c.error;
    bool fail = false;
    (void)EffectiveMemoryLimit(c, 0, &fail);
    EXPECT_TRUE(fail);
  }
  // More GPU files than devices, and more files than the bound.
  std::vector<DirFile> many;
  for (int i = 0; i <= kMaxDevices; ++i) {
    char uuid[48];
    std::snprintf(uuid, sizeof(uuid), "GPU-%08d-0000-0000-0000-000000000000", i);
    many.push_back({std::string("gpu-") + uuid + ".env", GpuFile(uuid, "1g", "10")});
  }
  Config c = ParseDir(many);
  EXPECT_TRUE(c.file_bad);
  EXPECT_NE(std::string(c.error).find("more than 16 GPU files"), std::string::npos) << c.error;
  many.pop_back();
  c = ParseDir(many);
  EXPECT_FALSE(c.file_bad) << c.error;  // exactly 16 GPUs is fine
  EXPECT_EQ(std::string(c.visible_devices).size(), 16u * 40u + 15u);
  for (size_t i = 0; many.size() <= kMaxFragments; ++i)
    many.push_back({"c" + std::to_string(i) + ".env", "CUDA_TASK_PRIORITY=1\n"});
  c = ParseDir(many);
  EXPECT_TRUE(c.file_bad);
  EXPECT_NE(std::string(c.error).find("more than 32 files"), std::string::npos) << c.error;
}

}  // namespace
}  // namespace fracgpu::vgpu
