// libvgpu.so's packaging (issue 3, Build 6): it needs nothing beyond glibc, no glibc symbol
// version newer than 2.17, and exports only CUDA/NVML names, dlsym and dlopen — every hooked one.
// Read with readelf from binutils, which the build machine has with the compiler.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "vgpu/hooks.def"
#include "vgpu/wake.h"

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

// Issue 36 review: each driver name's binding in the built .so. A hooked name is exported by its
// hook alone (GLOBAL); every other name of NVIDIA's libcuda.so by the weak stub behind the wake
// trampoline (WEAK, so a program's own definition still wins); both are functions, and no
// stub is linked for a hooked name (src/vgpu/CMakeLists.txt leaves them out of
// driver_exports.inc).
TEST(VgpuPackaging, DriverStubsAreWeakAndHooksGlobal) {
  std::set<std::string> hooked;
#define NAME(elf, ...) hooked.insert(#elf);
  FRACGPU_CUDA_HOOKS(NAME)
#undef NAME
  std::map<std::string, std::pair<std::string, std::string>> bound;  // name -> (type, binding)
  std::istringstream in(Capture("readelf --dyn-syms -W " FRACGPU_LIBVGPU));
  for (std::string line; std::getline(in, line);) {
    auto f = Fields(line);
    if (f.size() < 8 || f[6] == "UND") continue;
    bound[f[7].substr(0, f[7].find('@'))] = {f[3], f[4]};
  }
  std::ifstream list(FRACGPU_SOURCE_DIR "/data/cuda/libcuda_exports.txt");
  int weak = 0, global = 0;
  for (std::string name; std::getline(list, name);) {
    if (name.empty() || name[0] == '#') continue;
    auto it = bound.find(name);
    ASSERT_NE(it, bound.end()) << name << " is not exported";
    EXPECT_EQ(it->second.first, "FUNC") << name;
    const std::string want = hooked.count(name) ? "GLOBAL" : "WEAK";
    EXPECT_EQ(it->second.second, want) << name;
    (want == "WEAK" ? weak : global)++;
  }
  EXPECT_GT(global, 50);
  EXPECT_EQ(weak + global, 637);
  // No stub is linked for a hooked name: its stub's target word (fracgpu_x_<name>, wake.cc) is
  // absent from the full symbol table, while every unhooked name has one.
  std::istringstream all(Capture("readelf -s -W " FRACGPU_LIBVGPU));
  std::set<std::string> targets;
  for (std::string line; std::getline(all, line);) {
    auto f = Fields(line);
    if (f.size() >= 8 && f[7].rfind("fracgpu_x_", 0) == 0) targets.insert(f[7].substr(10));
  }
  for (const auto& [name, type_binding] : bound) {
    if (name.rfind("cu", 0) != 0) continue;
    EXPECT_EQ(targets.count(name), type_binding.second == "WEAK" ? 1u : 0u) << name;
  }
  EXPECT_EQ(static_cast<int>(targets.size()), weak);
}

// Address and size of a symbol of the full symbol table (readelf -s), {0, 0} when absent.
std::pair<unsigned long long, unsigned long long> Symbol(const std::string& name) {
  std::istringstream in(Capture("readelf -s -W " FRACGPU_LIBVGPU));
  for (std::string line; std::getline(in, line);) {
    auto f = Fields(line);
    if (f.size() >= 8 && f[7] == name && f[6] != "UND")
      return {std::stoull(f[1], nullptr, 16), std::stoull(f[2], nullptr, 0)};
  }
  return {0, 0};
}

// The stub table's `.rept` count is kWakeSlots (FRACGPU_WAKE_SLOTS) and each slot 16 bytes:
// WakeTarget maps a pointer back to its slot by that arithmetic.
TEST(VgpuPackaging, WakeStubTableHoldsEverySlot) {
  auto table = Symbol("fracgpu_wake_stubs");
  ASSERT_NE(table.first, 0u) << "no fracgpu_wake_stubs in the symbol table";
  EXPECT_EQ(table.second, static_cast<unsigned long long>(FRACGPU_WAKE_SLOTS) * 16);
}

// The hand-written assembly has unwind information (CFI): the stub table, an exported stub and
// both slow paths are covered by a frame description, and while the slow path holds the argument
// registers on the stack (8 pushes and 136 bytes) the frame address is rsp+208, so a debugger or
// profiler unwinds through a call that waits for the wake.
TEST(VgpuPackaging, WakeStubsHaveUnwindInformation) {
  struct Fde {
    unsigned long long lo, hi;
    std::vector<std::string> rows;
  };
  std::vector<Fde> fdes;
  std::istringstream in(Capture("readelf --debug-dump=frames-interp -W " FRACGPU_LIBVGPU));
  for (std::string line; std::getline(in, line);) {
    size_t pc = line.find(" FDE ");
    if (pc != std::string::npos && (pc = line.find("pc=")) != std::string::npos) {
      Fde f{};
      std::sscanf(line.c_str() + pc, "pc=%llx..%llx", &f.lo, &f.hi);
      fdes.push_back(f);
    } else if (!fdes.empty() && !line.empty()) {
      fdes.back().rows.push_back(line);
    }
  }
  ASSERT_FALSE(fdes.empty());
  auto covering = [&](unsigned long long a) -> const Fde* {
    for (const Fde& f : fdes)
      if (a >= f.lo && a < f.hi) return &f;
    return nullptr;
  };
  for (const char* name :
       {"fracgpu_wake_stubs", "fracgpu_wake_common", "fracgpu_named_common", "cuMemcpyHtoD_v2"}) {
    auto sym = Symbol(name);
    ASSERT_NE(sym.first, 0u) << name;
    EXPECT_NE(covering(sym.first), nullptr) << name << " has no unwind information";
    EXPECT_NE(covering(sym.first + sym.second - 1), nullptr) << "the end of " << name;
  }
  const Fde* slow = covering(Symbol("fracgpu_wake_common").first);
  ASSERT_NE(slow, nullptr);
  bool saved = false;
  for (const std::string& row : slow->rows) saved |= row.find(" rsp+208 ") != std::string::npos;
  EXPECT_TRUE(saved) << "no row with the argument registers saved (CFA rsp+208)";
}

}  // namespace
