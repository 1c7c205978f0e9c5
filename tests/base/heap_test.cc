// base/heap.h: the allocator is named from what the process links, and ReleaseFreeHeap hands
// freed pages back on it. Built twice (tests/base/CMakeLists.txt): base_heap_test as every test
// executable (glibc's heap, or the sanitizer's), and base_heap_jemalloc_test linking jemalloc
// as `fracgpu` does (FRACGPU_HEAP_TEST_JEMALLOC), where the build found it.
#include "base/heap.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace fracgpu::base {
namespace {

// One suite name a build, so the two executables' CTest entries differ.
#if defined(FRACGPU_HEAP_TEST_JEMALLOC)
#define HEAP_SUITE HeapJemallocTest
#else
#define HEAP_SUITE HeapTest
#endif

TEST(HEAP_SUITE, NamesTheAllocatorOfThisProcess) {
#if defined(FRACGPU_HEAP_TEST_JEMALLOC)
  EXPECT_STREQ(HeapAllocatorName(), "jemalloc");
  EXPECT_FALSE(HeapIsGlibc());
#elif FRACGPU_HEAP_SANITIZER
  EXPECT_STREQ(HeapAllocatorName(), "sanitizer");
  EXPECT_FALSE(HeapIsGlibc());
#else
  EXPECT_STREQ(HeapAllocatorName(), "glibc");
  EXPECT_TRUE(HeapIsGlibc());
#endif
}

TEST(HEAP_SUITE, ReleaseFreeHeapKeepsLiveMemoryIntact) {
  // A burst of large temporaries freed, one block kept: the release must not touch the live one.
  constexpr size_t kBlock = 1 << 20;
  char* keep = static_cast<char*>(std::malloc(kBlock));
  ASSERT_NE(keep, nullptr);
  std::memset(keep, 0x5a, kBlock);
  for (int i = 0; i < 64; ++i) {
    std::string s(kBlock, 'x');
    ASSERT_EQ(s[kBlock - 1], 'x');
  }
#if FRACGPU_HEAP_SANITIZER
  EXPECT_FALSE(ReleaseFreeHeap());  // nothing is asked of the sanitizer's heap
#else
  EXPECT_TRUE(ReleaseFreeHeap());  // glibc trimmed, or jemalloc accepted the purge of every arena
#endif
  for (size_t i = 0; i < kBlock; i += 4096) ASSERT_EQ(keep[i], 0x5a) << i;
  std::free(keep);
}

#if defined(FRACGPU_HEAP_TEST_JEMALLOC)
// jemalloc's dirty pages over every arena (stats.arenas.<MALLCTL_ARENAS_ALL>.pdirty, after an
// epoch write refreshes the statistics; jemalloc(3)).
size_t DirtyPages() {
  using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);
  auto mallctl = reinterpret_cast<Mallctl>(::dlsym(RTLD_DEFAULT, "mallctl"));
  if (mallctl == nullptr) return SIZE_MAX;
  uint64_t epoch = 1;
  size_t len = sizeof epoch;
  if (mallctl("epoch", &epoch, &len, &epoch, len) != 0) return SIZE_MAX;
  size_t pdirty = 0;
  len = sizeof pdirty;
  if (mallctl("stats.arenas.4096.pdirty", &pdirty, &len, nullptr, 0) != 0) return SIZE_MAX;
  return pdirty;
}

TEST(HEAP_SUITE, ReleaseFreeHeapPurgesTheDirtyPagesOfEveryArena) {
  {
    // 64 MiB in 64 KiB blocks, written and freed: jemalloc keeps their pages dirty (decay).
    std::vector<std::string> burst;
    for (int i = 0; i < 1024; ++i) burst.emplace_back(64 << 10, 'y');
  }
  const size_t before = DirtyPages();
  ASSERT_NE(before, SIZE_MAX) << "mallctl statistics unavailable";
  ASSERT_GT(before, 0u);
  ASSERT_TRUE(ReleaseFreeHeap());
  EXPECT_EQ(DirtyPages(), 0u) << "before: " << before;
}
#endif

}  // namespace
}  // namespace fracgpu::base
