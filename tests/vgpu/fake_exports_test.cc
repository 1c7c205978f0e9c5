// The fake libcuda.so.1 exports every ELF name the real driver exports (the CUDA 13.0 stub's
// list, data/cuda/libcuda_exports.txt); the ones it does not implement answer
// CUDA_ERROR_NOT_SUPPORTED and are exactly tests/fakes/cuda/not_supported.txt; its
// cuGetProcAddress_v2 resolves every base name of the variant table at 13000.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>

#include "vgpu/cuda_variants.def"

namespace {

std::set<std::string> ReadList(const std::string& path) {
  std::set<std::string> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') out.insert(line);
  return out;
}

struct Fake {
  Fake() {
    setenv("FAKE_CUDA_DRIVER_VERSION", "13000", 1);
    lib = dlopen(FRACGPU_FAKES_LIB "/libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  }
  ~Fake() {
    if (lib) dlclose(lib);
  }
  void* lib = nullptr;
};

TEST(FakeCudaExports, EveryDriverNameIsExportedAndTheUnimplementedAreListed) {
  auto exports = ReadList(FRACGPU_SOURCE_DIR "/data/cuda/libcuda_exports.txt");
  auto listed = ReadList(FRACGPU_SOURCE_DIR "/tests/fakes/cuda/not_supported.txt");
  ASSERT_EQ(exports.size(), 637u);  // nm -D --defined-only of the CUDA 13.0 stub
  Fake fake;
  ASSERT_NE(fake.lib, nullptr) << dlerror();
  auto is_stub = reinterpret_cast<int (*)(const char*)>(dlsym(fake.lib, "fakeCudaIsNotSupported"));
  ASSERT_NE(is_stub, nullptr);
  std::set<std::string> stubs;
  for (const std::string& name : exports) {
    EXPECT_NE(dlsym(fake.lib, name.c_str()), nullptr) << name;
    int s = is_stub(name.c_str());
    EXPECT_GE(s, 0) << name;
    if (s == 1) stubs.insert(name);
  }
  EXPECT_EQ(stubs, listed);
  for (const std::string& name : listed) EXPECT_TRUE(exports.count(name)) << name;
  // An unimplemented one answers CUDA_ERROR_NOT_SUPPORTED (cuGraphClone: graphs with memory
  // nodes cannot be cloned, and the fake clones none).
  ASSERT_TRUE(listed.count("cuGraphClone"));
  auto graph_clone = reinterpret_cast<int (*)(void**, void*)>(dlsym(fake.lib, "cuGraphClone"));
  ASSERT_NE(graph_clone, nullptr);
  EXPECT_EQ(graph_clone(nullptr, nullptr), 801);
  // The graph-memory family is implemented (tests/vgpu/graph_memory_test.cc uses it).
  for (const char* name :
       {"cuGraphAddMemAllocNode", "cuGraphInstantiateWithParams_ptsz", "cuGraphUpload",
        "cuDeviceGraphMemTrim", "cuDeviceGetGraphMemAttribute", "cuStreamBeginCapture_v2"})
    EXPECT_EQ(is_stub(name), 0) << name;
}

TEST(FakeCudaExports, GetProcAddressResolvesEveryBaseNameOfTheTable) {
  Fake fake;
  ASSERT_NE(fake.lib, nullptr) << dlerror();
  using Gpa = int (*)(const char*, void**, int, unsigned long long, int*);
  auto gpa = reinterpret_cast<Gpa>(dlsym(fake.lib, "cuGetProcAddress_v2"));
  ASSERT_NE(gpa, nullptr);
  // The table as data, checked in one loop (expanding three EXPECTs per row inline made this
  // one function take minutes to compile).
  struct Row {
    const char* base;
    int version;
    int per_thread;
    const char* elf;
  };
  static constexpr Row kRows[] = {
#define FRACGPU_ROW(base, ver, fl, elf) {#base, ver, fl, #elf},
      FRACGPU_CUDA_VARIANTS(FRACGPU_ROW)
#undef FRACGPU_ROW
  };
  int checked = 0;
  for (const Row& row : kRows) {
    void* fn = nullptr;
    int status = -1;
    // At exactly its version, with its flavour: this variant's own ELF function.
    int r = gpa(row.base, &fn, row.version, row.per_thread ? 2 : 0, &status);
    EXPECT_EQ(r, 0) << row.base;
    EXPECT_EQ(status, 0) << row.base << " v" << row.version;
    EXPECT_EQ(fn, dlsym(fake.lib, row.elf)) << row.base << " v" << row.version << " -> " << row.elf;
    ++checked;
  }
  EXPECT_EQ(checked, 634);
}

}  // namespace

namespace {

// The fake NVML answers the legacy names (nvmlDeviceGetHandleByIndex, the v1/_v2 process list).
TEST(FakeNvmlExports, LegacyNamesAnswerLikeTheirSuccessors) {
  setenv("FAKE_GPU_DEVICES", "GPU-11111111-1111-1111-1111-111111111111:1024", 1);
  void* lib = dlopen(FRACGPU_FAKES_LIB "/libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
  auto by_index =
      reinterpret_cast<int (*)(unsigned, void**)>(dlsym(lib, "nvmlDeviceGetHandleByIndex"));
  auto by_index2 =
      reinterpret_cast<int (*)(unsigned, void**)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  using Procs = int (*)(void*, unsigned*, void*);
  auto p1 = reinterpret_cast<Procs>(dlsym(lib, "nvmlDeviceGetComputeRunningProcesses"));
  auto p2 = reinterpret_cast<Procs>(dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v2"));
  ASSERT_TRUE(init && by_index && by_index2 && p1 && p2);
  ASSERT_EQ(init(), 0);
  void *h1 = nullptr, *h2 = nullptr;
  EXPECT_EQ(by_index(0, &h1), 0);
  EXPECT_EQ(by_index2(0, &h2), 0);
  EXPECT_EQ(h1, h2);
  EXPECT_NE(by_index(7, &h1), 0);  // no such device: an error, as from _v2
  unsigned count = 0;
  EXPECT_EQ(p1(h2, &count, nullptr), 0);  // no process holds the fake GPU
  EXPECT_EQ(count, 0u);
  EXPECT_EQ(p2(h2, &count, nullptr), 0);
  EXPECT_EQ(p1(h2, nullptr, nullptr), 2);  // NVML_ERROR_INVALID_ARGUMENT
  dlclose(lib);
}

}  // namespace
