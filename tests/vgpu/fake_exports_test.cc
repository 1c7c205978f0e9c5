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

// Device attributes: an H100 SXM5's values (fake_cuda.cc cites the sources), the SM count from
// FAKE_GPU_DEVICES, 0 for an attribute the table leaves out, CUDA_ERROR_INVALID_VALUE (1)
// outside [1, CU_DEVICE_ATTRIBUTE_MAX = 148) and for a null value pointer, as from the driver.
TEST(FakeCudaAttributes, AnH100sValuesAndTheDriversErrors) {
  setenv("FAKE_GPU_DEVICES", "GPU-11111111-1111-1111-1111-111111111111:1024:132", 1);
  Fake fake;
  ASSERT_NE(fake.lib, nullptr) << dlerror();
  auto init = reinterpret_cast<int (*)(unsigned)>(dlsym(fake.lib, "cuInit"));
  auto get = reinterpret_cast<int (*)(int*, int, int)>(dlsym(fake.lib, "cuDeviceGetAttribute"));
  ASSERT_TRUE(init && get);
  ASSERT_EQ(init(0), 0);
  struct Case {
    int attr;
    int rc;
    int value;
  };
  const Case cases[] = {
      {39, 0, 2048},      // MAX_THREADS_PER_MULTIPROCESSOR
      {16, 0, 132},       // MULTIPROCESSOR_COUNT, from FAKE_GPU_DEVICES
      {75, 0, 9},         // COMPUTE_CAPABILITY_MAJOR
      {76, 0, 0},         // COMPUTE_CAPABILITY_MINOR
      {1, 0, 1024},       // MAX_THREADS_PER_BLOCK
      {10, 0, 32},        // WARP_SIZE
      {81, 0, 233472},    // MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: 228 KiB
      {97, 0, 232448},    // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: 227 KiB
      {106, 0, 32},       // MAX_BLOCKS_PER_MULTIPROCESSOR
      {38, 0, 52428800},  // L2_CACHE_SIZE: 50 MiB
      {13, 0, 1980000},   // CLOCK_RATE, kHz
      {17, 0, 0},         // KERNEL_EXEC_TIMEOUT: not in the table
      {147, 0, 0},        // the last CUDA 13.0 attribute: not in the table
      {148, 1, -7},       // CU_DEVICE_ATTRIBUTE_MAX itself
      {0, 1, -7},         // below the first
      {-1, 1, -7},       {1 << 30, 1, -7},
  };
  for (const Case& c : cases) {
    int v = -7;
    EXPECT_EQ(get(&v, c.attr, 0), c.rc) << "attribute " << c.attr;
    EXPECT_EQ(v, c.value) << "attribute " << c.attr;
  }
  EXPECT_EQ(get(nullptr, 39, 0), 1);
  int v = -7;
  EXPECT_EQ(get(&v, 39, 5), 101);  // CUDA_ERROR_INVALID_DEVICE
  unsetenv("FAKE_GPU_DEVICES");
}

}  // namespace
