// libvgpu.so's half of the fallback reclaim (issue 36 item 4, docs/reclaim.md "The fallback"): an
// allocation charged within the slice that the driver refuses for lack of physical memory (a
// borrower holds the GPU) raises a reclaim request in the process's slot and waits, bounded by
// FRACGPU_RECLAIM_WAIT_MS, while the node agent marks the device in Region::reclaim_lending;
// once the memory is free the allocation succeeds, charged once; without it, it fails after the
// deadline with the charge back to before. Over the limit, or on a device the agent does not
// mark, the answer comes at once as before. The fake driver counts every process of the GPU
// (FAKE_CUDA_DEVICE_WIDE_OOM=1), as a real GPU does; this test plays the agent.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "harness.h"
#include "map_region.h"
#include "vgpu/limits.h"
#include "vgpu/region.h"

namespace fracgpu::vgpu::testing {
namespace {

constexpr unsigned long long kAsk = 400 * kMiB;  // within the 512 MiB slice, not in 1024 − 700 − 64

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The environment of a process on the fake GPU 0 (1024 MiB) that fails as a real GPU does when
// every process together is out of memory.
std::map<std::string, std::string> GpuEnv(const Sandbox& box) {
  auto env = box.Env();
  env["FAKE_CUDA_DEVICE_WIDE_OOM"] = "1";
  return env;
}

// A borrower: no limit (libvgpu.so passes it through), 700 MiB of GPU 0 until its stdin closes.
Child StartBorrower(const Sandbox& box) {
  Child b = Spawn(box, GpuEnv(box), {"init", "alloc:" + std::to_string(700 * kMiB), "wait"});
  EXPECT_EQ(ReadLine(b), "init 0");
  EXPECT_EQ(ReadLine(b), "alloc 0");
  EXPECT_EQ(ReadLine(b), "ready");
  return b;
}

// The owner: a 512 MiB slice, 64 MiB held, then `ops` once its stdin closes.
Child StartOwner(const Sandbox& box, const std::string& wait_ms,
                 const std::vector<std::string>& ops) {
  auto env = GpuEnv(box);
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "512m";
  env[kEnvReclaimWaitMs] = wait_ms;
  std::vector<std::string> all = {"init", "alloc:" + std::to_string(64 * kMiB), "wait"};
  all.insert(all.end(), ops.begin(), ops.end());
  Child o = Spawn(box, env, all);
  EXPECT_EQ(ReadLine(o), "init 0");
  EXPECT_EQ(ReadLine(o), "alloc 0");
  EXPECT_EQ(ReadLine(o), "ready");
  return o;
}

RegionSlot* SlotOf(Region* r, pid_t pid) {
  for (RegionSlot& s : r->slots)
    if (s.state.load() == kSlotActive && s.pid == pid) return &s;
  return nullptr;
}

uint64_t Requests(RegionSlot* s) { return std::atomic_ref<uint64_t>(s->reclaim_requests).load(); }
uint64_t AskedBytes(RegionSlot* s) { return std::atomic_ref<uint64_t>(s->reclaim_bytes).load(); }
void Mark(Region* r, uint32_t devices) {
  std::atomic_ref<uint32_t>(r->reclaim_lending).store(devices);
}

// Waits (real time, at most 10 s) until the slot's count reaches `n`.
bool AwaitRequests(RegionSlot* s, uint64_t n) {
  for (int i = 0; i < 1000 && Requests(s) < n; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return Requests(s) >= n;
}

TEST(VgpuReclaimWait, AnAllocationMeetingAFullGpuWaitsForTheReclaimAndIsChargedOnce) {
  Sandbox box;
  Child borrower = StartBorrower(box);
  Child owner = StartOwner(box, "20000", {"alloc:" + std::to_string(kAsk), "region:0"});
  Region* r = MapRegion(box.region());
  ASSERT_NE(r, nullptr);
  RegionSlot* slot = SlotOf(r, owner.pid);
  ASSERT_NE(slot, nullptr);
  Mark(r, 1);  // the agent lends device 0's never-allocated part
  const auto start = std::chrono::steady_clock::now();
  close(owner.in);
  owner.in = -1;
  ASSERT_TRUE(AwaitRequests(slot, 1)) << "the refused allocation raised no reclaim request";
  EXPECT_EQ(AskedBytes(slot), kAsk);
  // It waits with its charge held (once): the slice's 464 MiB, no other process takes the room.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(r->devices[0].used.load(), 64 * kMiB + kAsk);
  EXPECT_EQ(Requests(slot), 1u) << "one request per allocation, not one per retry";
  // The agent evicts the borrower: its memory comes free and the waiting allocation succeeds.
  Finish(borrower);
  std::vector<std::string> rest = Finish(owner);
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0], "alloc 0");
  RegionLine line = ParseRegionLine(rest[1]);
  ASSERT_TRUE(line.ok) << rest[1];
  EXPECT_EQ(line.used, 64 * kMiB + kAsk);  // charged once
  EXPECT_EQ(line.data, 64 * kMiB + kAsk);
  EXPECT_EQ(line.device_used, 64 * kMiB + kAsk);
  EXPECT_LT(SecondsSince(start), 15.0);
  munmap(r, sizeof(Region));
}

// Nobody frees the GPU: each allocation path that shares the helper (cuMemAlloc_v2,
// cuMemAllocPitch_v2, cuMemCreate) raises its request, fails after the deadline, and the charge
// is back to what it was before.
TEST(VgpuReclaimWait, WithoutTheMemoryFreedItFailsAfterTheDeadlineWithTheChargeBack) {
  Sandbox box;
  Child borrower = StartBorrower(box);
  Child owner = StartOwner(
      box, "300",
      {"alloc:" + std::to_string(kAsk), "region:0", "pitch:" + std::to_string(kMiB) + ":400",
       "region:0", "vmm:" + std::to_string(kAsk), "region:0"});
  Region* r = MapRegion(box.region());
  ASSERT_NE(r, nullptr);
  RegionSlot* slot = SlotOf(r, owner.pid);
  ASSERT_NE(slot, nullptr);
  Mark(r, 1);
  close(owner.in);
  owner.in = -1;
  const char* expect[] = {"alloc 2", "pitch 2 0", "vmm 2"};
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(ReadLine(owner), expect[i]);
    // 0.3 s waited; the op may have started a little before this loop read the line before it.
    EXPECT_GE(SecondsSince(start), 0.2) << expect[i] << " did not wait for the reclaim";
    EXPECT_LT(SecondsSince(start), 5.0) << expect[i] << " waited past its deadline";
    RegionLine line = ParseRegionLine(ReadLine(owner));
    ASSERT_TRUE(line.ok);
    EXPECT_EQ(line.used, 64 * kMiB) << expect[i] << ": the charge is not back";
    EXPECT_EQ(line.device_used, 64 * kMiB);
    // (The next op may already have raised its own: at least this one's is there.)
    EXPECT_GE(Requests(slot), static_cast<uint64_t>(i + 1));
  }
  Finish(owner);
  EXPECT_EQ(Requests(slot), 3u) << "one request per allocation";
  EXPECT_EQ(AskedBytes(slot), 3 * kAsk);  // the pitch is 1 MiB: 400 rows of it
  Finish(borrower);
  munmap(r, sizeof(Region));
}

// Over the slice's limit: refused by libvgpu.so before the driver, at once, with no request; the
// agent has nothing to give back.
TEST(VgpuReclaimWait, AnAllocationOverTheLimitIsRefusedAtOnceWithoutARequest) {
  Sandbox box;
  Child borrower = StartBorrower(box);
  Child owner = StartOwner(box, "20000", {"alloc:" + std::to_string(600 * kMiB), "region:0"});
  Region* r = MapRegion(box.region());
  ASSERT_NE(r, nullptr);
  RegionSlot* slot = SlotOf(r, owner.pid);
  ASSERT_NE(slot, nullptr);
  Mark(r, 1);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> rest = Finish(owner);
  EXPECT_LT(SecondsSince(start), 5.0);
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0], "alloc 2");
  EXPECT_EQ(ParseRegionLine(rest[1]).used, 64 * kMiB);
  EXPECT_EQ(Requests(slot), 0u);
  Finish(borrower);
  munmap(r, sizeof(Region));
}

// A device the agent does not mark (it lends nothing there, or a device other than the marked
// one): the driver's out-of-memory comes back at once, no request, the charge back.
TEST(VgpuReclaimWait, ADeviceTheAgentDoesNotMarkReturnsOutOfMemoryAtOnce) {
  for (uint32_t mark : {0u, 2u}) {
    Sandbox box;
    Child borrower = StartBorrower(box);
    Child owner = StartOwner(box, "20000", {"alloc:" + std::to_string(kAsk), "region:0"});
    Region* r = MapRegion(box.region());
    ASSERT_NE(r, nullptr);
    RegionSlot* slot = SlotOf(r, owner.pid);
    ASSERT_NE(slot, nullptr);
    Mark(r, mark);
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::string> rest = Finish(owner);
    EXPECT_LT(SecondsSince(start), 5.0) << "mark " << mark;
    ASSERT_EQ(rest.size(), 2u);
    EXPECT_EQ(rest[0], "alloc 2");
    EXPECT_EQ(ParseRegionLine(rest[1]).used, 64 * kMiB);
    EXPECT_EQ(Requests(slot), 0u) << "mark " << mark;
    Finish(borrower);
    munmap(r, sizeof(Region));
  }
}

// The agent clears its mark while an allocation waits (it stopped lending and its window
// passed): the wait ends at the next retry instead of running to its deadline.
TEST(VgpuReclaimWait, TheWaitEndsWhenTheAgentClearsItsMark) {
  Sandbox box;
  Child borrower = StartBorrower(box);
  Child owner = StartOwner(box, "20000", {"alloc:" + std::to_string(kAsk), "region:0"});
  Region* r = MapRegion(box.region());
  ASSERT_NE(r, nullptr);
  RegionSlot* slot = SlotOf(r, owner.pid);
  ASSERT_NE(slot, nullptr);
  Mark(r, 1);
  const auto start = std::chrono::steady_clock::now();
  close(owner.in);
  owner.in = -1;
  ASSERT_TRUE(AwaitRequests(slot, 1));
  Mark(r, 0);
  std::vector<std::string> rest = Finish(owner);
  EXPECT_LT(SecondsSince(start), 5.0);
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0], "alloc 2");
  EXPECT_EQ(ParseRegionLine(rest[1]).used, 64 * kMiB);
  Finish(borrower);
  munmap(r, sizeof(Region));
}

// FRACGPU_RECLAIM_WAIT_MS: environment only, 0..600000 ms; a bad value keeps the default and is
// reported; the limits file may not hold it (its grammar is the device plugin's).
TEST(VgpuReclaimWait, TheWaitIsMillisecondsFromTheEnvironmentOnly) {
  struct Case {
    const char* value;
    uint32_t ms;
    int errors;
  } cases[] = {{"0", 0, 0},          {"250", 250, 0},   {"600000", 600000, 0},
               {"600001", 40000, 1}, {"-1", 40000, 1},  {"1e3", 40000, 1},
               {"", 40000, 1},       {"40s", 40000, 1}, {"0000000001", 40000, 1}};
  for (const Case& c : cases) {
    Config config;
    std::string kv = std::string(kEnvReclaimWaitMs) + "=" + c.value;
    char* envp[] = {kv.data(), nullptr};
    ApplyEnvironment(&config, envp);
    EXPECT_EQ(config.reclaim_wait_ms, c.ms) << c.value;
    EXPECT_EQ(config.error_count, c.errors) << c.value;
  }
  Config unset;
  EXPECT_EQ(unset.reclaim_wait_ms, kDefaultReclaimWaitMs);
  Config file;
  const std::string text = "CUDA_DEVICE_MEMORY_LIMIT_0=512m\nFRACGPU_RECLAIM_WAIT_MS=10\n";
  ParseLimitsFile(&file, text.data(), text.size());
  EXPECT_TRUE(file.file_bad);
  EXPECT_EQ(file.reclaim_wait_ms, kDefaultReclaimWaitMs);
}

}  // namespace
}  // namespace fracgpu::vgpu::testing
