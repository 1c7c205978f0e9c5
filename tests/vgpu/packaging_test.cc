// libvgpu.so's packaging (issue 3, Build 6): it needs nothing beyond glibc, no glibc symbol
// version newer than 2.17, and exports only CUDA/NVML names, dlsym and dlopen — every hooked one.
// Read with readelf from binutils, which the build machine has with the compiler.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "vgpu/hooks.def"

namespace {

std::string Capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

// Whitespace-separated fields of a line.
std::vector<std::string> Fields(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string f; in >> f;) out.push_back(f);
  return out;
}

TEST(VgpuPackaging, NeedsOnlyGlibcNoNewerThan217) {
  std::string dyn = Capture("readelf -d " FRACGPU_LIBVGPU);
  std::set<std::string> allowed = {"libc.so.6", "libdl.so.2", "libpthread.so.0",
                                   "ld-linux-x86-64.so.2"};
  int count = 0;
  std::istringstream dyn_in(dyn);
  for (std::string line; std::getline(dyn_in, line);) {
    if (line.find("(NEEDED)") == std::string::npos) continue;
    size_t a = line.find('['), b = line.find(']');
    ASSERT_TRUE(a != std::string::npos && b != std::string::npos) << line;
    ++count;
    std::string lib = line.substr(a + 1, b - a - 1);
    EXPECT_TRUE(allowed.count(lib)) << "libvgpu.so needs " << lib;
  }
  EXPECT_GT(count, 0);
  // Every undefined symbol's version, named with the symbol ("name@GLIBC_2.2.5 (2)").
  std::string syms = Capture("readelf --dyn-syms -W " FRACGPU_LIBVGPU);
  std::istringstream sym_in(syms);
  int checked = 0;
  for (std::string line; std::getline(sym_in, line);) {
    auto f = Fields(line);
    if (f.size() < 8 || f[6] != "UND") continue;
    size_t at = f[7].find('@');
    if (at == std::string::npos) continue;
    std::string name = f[7].substr(0, at), version = f[7].substr(at + 1);
    ++checked;
    ASSERT_EQ(version.rfind("GLIBC_", 0), 0u) << name << " comes from " << version;
    int major = 0, minor = 0;
    std::sscanf(version.c_str() + 6, "%d.%d", &major, &minor);
    EXPECT_TRUE(major < 2 || (major == 2 && minor <= 17))
        << name << "@" << version << " is newer than glibc 2.17";
  }
  EXPECT_GT(checked, 10);
}

TEST(VgpuPackaging, ExportsExactlyTheHookedNames) {
  std::string syms = Capture("readelf --dyn-syms -W " FRACGPU_LIBVGPU);
  std::set<std::string> exported;
  std::istringstream in(syms);
  for (std::string line; std::getline(in, line);) {
    auto f = Fields(line);
    if (f.size() < 8 || f[6] == "UND" || (f[4] != "GLOBAL" && f[4] != "WEAK") || f[5] != "DEFAULT")
      continue;
    if (f[3] != "FUNC" && f[3] != "OBJECT") continue;
    exported.insert(f[7].substr(0, f[7].find('@')));
  }
  // dlsym, dlopen and the wake trampolines' introspection (src/vgpu/wake.cc) besides the hooks.
  std::set<std::string> expected = {"dlsym", "dlopen", "fracgpu_vgpu_wake_target"};
#define NAME(elf, ...) expected.insert(#elf);
  FRACGPU_CUDA_HOOKS(NAME)
  FRACGPU_NVML_HOOKS(NAME)
#undef NAME
  // and every function of NVIDIA's libcuda.so (the CUDA 13.0 stub's exports): the weak stubs
  // behind the wake trampoline of the names no hook defines (src/vgpu/wake.h).
  std::ifstream list(FRACGPU_SOURCE_DIR "/data/cuda/libcuda_exports.txt");
  int driver_names = 0;
  for (std::string line; std::getline(list, line);) {
    if (line.empty() || line[0] == '#') continue;
    expected.insert(line);
    ++driver_names;
  }
  EXPECT_EQ(driver_names, 637);
  EXPECT_EQ(exported, expected);
}

}  // namespace
