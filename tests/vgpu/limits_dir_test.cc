// libvgpu.so reading the limits directory a DRA container gets (vgpu/limits.h ParseLimitsDir,
// docs/dra.md "Per-request devices"): the GPU files and the claim-wide file merged into the
// limits that hold, and a directory that is bad, or present beside the limits file, refusing
// CUDA with one stderr line naming it. The test copy reads "fracgpu-limits.d" in its cwd.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "harness.h"

namespace fracgpu::vgpu::testing {
namespace {

void WriteDirFile(const Sandbox& box, const std::string& name, const std::string& text) {
  std::filesystem::create_directories(box.dir() + "/fracgpu-limits.d");
  std::ofstream(box.dir() + "/fracgpu-limits.d/" + name) << text;
}

std::string GpuFile(const char* uuid, const char* mem) {
  return std::string("NVIDIA_VISIBLE_DEVICES=") + uuid + "\nCUDA_DEVICE_MEMORY_LIMIT_0=" + mem +
         "\nCUDA_DEVICE_SM_LIMIT_0=0\n";
}

TEST(VgpuLimitsDirectory, TheGpuFilesLimitAndTheEnvironmentCannotLiftThem) {
  Sandbox box;
  WriteDirFile(box, "claim_u.env", "CUDA_DEVICE_MEMORY_SHARED_CACHE=" + box.region() + "\n");
  WriteDirFile(box, std::string("gpu-") + kUuid0 + ".env", GpuFile(kUuid0, "1000m"));
  auto env = box.Env();
  env["FAKE_GPU_DEVICES"] = std::string(kUuid0) + ":8192";  // the runtime's one GPU
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "0";                  // ignored: the directory decides
  env["NVIDIA_VISIBLE_DEVICES"] = "void";                   // as the claim-wide CDI edit sets
  auto out = RunApp(box, env, {"init", "alloc:1572864000", "alloc:524288000"});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], "init 0");
  EXPECT_EQ(Rc(out[1]), 2);  // 1,500 MiB over the 1,000 MiB of the GPU file: out of memory
  EXPECT_EQ(Rc(out[2]), 0);  // 500 MiB fits
}

TEST(VgpuLimitsDirectory, ABadDirectoryRefusesCuda) {
  struct Case {
    const char* what;
    std::vector<std::pair<std::string, std::string>> files;
    bool with_limits_file;
    const char* message_part;
  };
  const std::string gpu0 = std::string("gpu-") + kUuid0 + ".env";
  const std::vector<Case> cases = {
      {"the same GPU in two files",
       {{gpu0, GpuFile(kUuid0, "1000m")}, {"gpu-other.env", GpuFile(kUuid0, "6000m")}},
       false,
       "the GPU is named by two files"},
      {"a bad value", {{gpu0, GpuFile(kUuid0, "6gb")}}, false, "line 2"},
      {"no GPU file", {{"claim_u.env", "CUDA_TASK_PRIORITY=1\n"}}, false, "names no GPU"},
      {"a file not named .env",
       {{gpu0, GpuFile(kUuid0, "1000m")}, {"x", "junk"}},
       false,
       "named <name>.env"},
      {"beside the limits file",
       {{gpu0, GpuFile(kUuid0, "1000m")}},
       true,
       "present beside the limits file"},
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.what);
    Sandbox box;
    for (const auto& [name, text] : tc.files) WriteDirFile(box, name, text);
    if (tc.with_limits_file) box.WriteLimitsFile("CUDA_DEVICE_MEMORY_LIMIT_0=6000m\n");
    auto env = box.Env();
    env["FAKE_GPU_DEVICES"] = std::string(kUuid0) + ":8192";
    std::vector<std::string> out;
    auto err = StderrLines(box, env, {"init", "alloc:1048576"}, &out);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0], "init 800");  // CUDA_ERROR_NOT_PERMITTED
    EXPECT_NE(Rc(out[1]), 0);
    ASSERT_EQ(err.size(), 1u);
    EXPECT_NE(err[0].find(tc.message_part), std::string::npos) << err[0];
    EXPECT_NE(err[0].find("fracgpu-limits.d"), std::string::npos) << err[0];
    EXPECT_NE(err[0].find("CUDA refused to start"), std::string::npos) << err[0];
  }
}

}  // namespace
}  // namespace fracgpu::vgpu::testing
