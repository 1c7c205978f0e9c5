// deploy/image: the Dockerfile's COPY sources exist (and are not excluded from the build
// context), the paths the DaemonSet's init container runs are what the image installs, the
// CMake targets it builds exist where it expects them; and install-vgpu.sh does its job.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "manifest_check.h"

namespace fracgpu::deploytest {
namespace {

namespace fs = std::filesystem;
const std::string kSource = FRACGPU_SOURCE_DIR;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Dockerfile instructions with continuations joined: {"COPY", "--from=build /a /b"}.
std::vector<std::pair<std::string, std::string>> Instructions(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(text);
  std::string line, cur;
  while (std::getline(in, line)) {
    if (cur.empty() && (line.empty() || line[0] == '#')) continue;
    if (!line.empty() && line.back() == '\\') {
      cur += line.substr(0, line.size() - 1) + " ";
      continue;
    }
    cur += line;
    auto sp = cur.find(' ');
    out.push_back({cur.substr(0, sp), sp == std::string::npos ? "" : cur.substr(sp + 1)});
    cur.clear();
  }
  return out;
}

std::vector<std::string> Words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

TEST(DeployImage, CopySourcesExistAndInitContainerPathsAreInstalled) {
  auto ins = Instructions(Read(kSource + "/deploy/image/Dockerfile"));
  ASSERT_FALSE(ins.empty());
  auto ignored =
      Words(Read(kSource + "/deploy/image/Dockerfile.dockerignore")
                .substr(Read(kSource + "/deploy/image/Dockerfile.dockerignore").find('\n') + 1));
  std::set<std::string> final_stage_dests;
  int stages = 0, copies = 0;
  for (const auto& [op, rest] : ins) {
    if (op == "FROM") {
      ++stages;
      final_stage_dests.clear();
    }
    if (op != "COPY") continue;
    auto w = Words(rest);
    bool from_stage = !w.empty() && w[0].rfind("--from=", 0) == 0;
    if (from_stage) w.erase(w.begin());
    ASSERT_GE(w.size(), 2u) << rest;
    final_stage_dests.insert(w.back());
    if (from_stage) continue;
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      ++copies;
      std::string src = w[i];
      if (src == "./") continue;
      EXPECT_TRUE(fs::exists(kSource + "/" + src)) << "COPY source " << src << " does not exist";
      for (const auto& ig : ignored) {
        if (ig[0] == '#') continue;
        EXPECT_NE(src.rfind(ig, 0), 0u)
            << "COPY source " << src << " is excluded by Dockerfile.dockerignore (" << ig << ")";
      }
    }
  }
  EXPECT_EQ(stages, 3);
  EXPECT_GE(copies, 10);
  // The init container runs the install script on the library, both from the final stage.
  auto b = LoadDeploy(kSource + "/deploy");
  ASSERT_TRUE(b.ok());
  YAML::Node init = FindObject(
      *b, "DaemonSet", "fracgpu-device-plugin")["spec"]["template"]["spec"]["initContainers"][0];
  EXPECT_TRUE(final_stage_dests.count(init["command"][0].as<std::string>())) << init["command"][0];
  EXPECT_TRUE(final_stage_dests.count(init["command"][1].as<std::string>())) << init["command"][1];
  EXPECT_TRUE(final_stage_dests.count("/usr/local/bin/fracgpu"));
  // `fracgpu ui` looks for <binary>/../share/fracgpu/web (src/ui/command.cc DefaultWebDir).
  EXPECT_TRUE(final_stage_dests.count("/usr/local/share/fracgpu/web/"));
  EXPECT_NE(Read(kSource + "/src/ui/command.cc").find("../share/fracgpu/web"), std::string::npos);
}

TEST(DeployImage, BuildStageTargetsAndOutputsExist) {
  std::string docker = Read(kSource + "/deploy/image/Dockerfile");
  EXPECT_NE(docker.find("--target fracgpu vgpu"), std::string::npos);
  EXPECT_NE(docker.find("/src/build/fracgpu "), std::string::npos);
  EXPECT_NE(docker.find("/src/build/lib/libvgpu.so"), std::string::npos);
  std::string cli = Read(kSource + "/src/cli/CMakeLists.txt");
  EXPECT_NE(cli.find("add_executable(fracgpu "), std::string::npos);
  EXPECT_NE(cli.find("RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}"), std::string::npos);
  std::string vgpu = Read(kSource + "/src/vgpu/CMakeLists.txt");
  EXPECT_NE(vgpu.find("fracgpu_add_vgpu_library(vgpu "), std::string::npos);
  EXPECT_NE(vgpu.find("LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib"), std::string::npos);
  // The glibc 2.17 check runs `ldd -r` and fails on a missing version or symbol.
  EXPECT_NE(docker.find("ldd -r /check/libvgpu.so"), std::string::npos);
  EXPECT_NE(docker.find("manylinux2014"), std::string::npos);
}

class InstallScriptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("deploy-install-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "image");
    std::ofstream(dir_ / "image/libvgpu.so") << "ELF v1";
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Runs the script; returns its exit status.
  int Run(const std::string& args) {
    std::string cmd =
        "sh " + kSource + "/deploy/image/install-vgpu.sh " + args + " >/dev/null 2>&1";
    int st = std::system(cmd.c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
  ino_t Inode(const fs::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 ? st.st_ino : 0;
  }
  fs::path dir_;
};

TEST_F(InstallScriptTest, InstallsLibraryAndPreloadAndRenamesOnChange) {
  const fs::path dest = dir_ / "host/vgpu";
  ASSERT_EQ(Run((dir_ / "image/libvgpu.so").string() + " " + dest.string()), 0);
  EXPECT_EQ(Read(dest / "libvgpu.so"), "ELF v1");
  // Exactly what the device plugin writes (src/deviceplugin/allocator.cc PrepareHostFiles).
  EXPECT_EQ(Read(dest / "ld.so.preload"), (dest / "libvgpu.so").string() + "\n");
  EXPECT_EQ(fs::status(dest / "libvgpu.so").permissions() & fs::perms::all, fs::perms(0755));
  ino_t first = Inode(dest / "libvgpu.so");
  ASSERT_EQ(Run((dir_ / "image/libvgpu.so").string() + " " + dest.string()), 0);
  EXPECT_EQ(Inode(dest / "libvgpu.so"), first);  // unchanged: not rewritten
  std::ofstream(dir_ / "image/libvgpu.so") << "ELF v2";
  ASSERT_EQ(Run((dir_ / "image/libvgpu.so").string() + " " + dest.string()), 0);
  EXPECT_EQ(Read(dest / "libvgpu.so"), "ELF v2");
  EXPECT_NE(Inode(dest / "libvgpu.so"), first);  // a new file renamed over: mapped copies survive
  EXPECT_FALSE(fs::exists(dest / ".libvgpu.so.tmp"));
}

TEST_F(InstallScriptTest, BadArgumentsFailWithoutWriting) {
  EXPECT_EQ(Run(""), 2);
  EXPECT_EQ(Run((dir_ / "image/libvgpu.so").string()), 2);
  EXPECT_EQ(Run((dir_ / "image/missing.so").string() + " " + (dir_ / "host").string()), 1);
  EXPECT_FALSE(fs::exists(dir_ / "host"));
}

}  // namespace
}  // namespace fracgpu::deploytest
