// base/heap.h: the allocator is named from what the process links, and ReleaseFreeHeap hands
// freed pages back on it. Built twice (tests/base/CMakeLists.txt): base_heap_test as every test
// executable (glibc's heap, or the sanitizer's), and base_heap_jemalloc_test linking jemalloc
// as `fracgpu` does (FRACGPU_HEAP_TEST_JEMALLOC), where the build found it.
#include "base/heap.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

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
#elif defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
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
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  EXPECT_FALSE(ReleaseFreeHeap());  // nothing is asked of the sanitizer's heap
#else
  EXPECT_TRUE(ReleaseFreeHeap());  // glibc trimmed, or jemalloc accepted the purge of every arena
#endif
  for (size_t i = 0; i < kBlock; i += 4096) ASSERT_EQ(keep[i], 0x5a) << i;
  std::free(keep);
}

}  // namespace
}  // namespace fracgpu::base
