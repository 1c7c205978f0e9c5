// The region reader against hand-made files: valid contents read exactly, hostile numbers
// reported as-is or dropped, and a table of bad files each refused with the named reason.
#include "monitor/region_reader.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstddef>
#include <functional>

#include "region_files.h"

namespace fracgpu::monitor::testing {
namespace {

constexpr const char* kGpuA = "GPU-aaaaaaaa-0000-0000-0000-000000000001";
constexpr const char* kGpuB = "GPU-bbbbbbbb-0000-0000-0000-000000000002";

TEST(RegionReader, ReadsActiveSlotsOnlyAndSumsEachCategory) {
  TempDir dir;
  std::string path = dir.path() + "/region.cache";
  auto h = MakeRegion(path, {{kGpuA, 256 * kMiB, 30}, {kGpuB, 512 * kMiB, 0}});
  ASSERT_NE(h.region, nullptr);
  SetSlot(h.region, 0, 10, 4010, {{2 * kMiB, 1 * kMiB, 10 * kMiB}, {0, 0, 0}});
  SetSlot(h.region, 7, 11, 4011, {{2 * kMiB, 0, 20 * kMiB}, {3 * kMiB, 0, 5 * kMiB}});
  // A free slot with charges (a released process's leftovers) must not count.
  SetSlot(h.region, 9, 12, 4012, {{100 * kMiB, 0, 0}});
  h.region->slots[9].state.store(vgpu::kSlotFree);
  h.region->devices[0].last_launch_ns.store(123456789);
  vgpu::RegionClose(&h);

  std::string reason;
  auto r = ReadRegionFile(path, &reason);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->devices.size(), 2u);
  EXPECT_EQ(r->active_slots, 2);
  EXPECT_EQ(r->host_pids, (std::vector<int32_t>{4010, 4011}));
  EXPECT_EQ(r->slots_without_host_pid, 0);
  const SliceDevice& a = r->devices[0];
  EXPECT_EQ(a.uuid, kGpuA);
  EXPECT_EQ(a.memory_limit_bytes, 256 * kMiB);
  EXPECT_EQ(a.sm_limit_percent, 30u);
  EXPECT_EQ(a.context_bytes, 4 * kMiB);
  EXPECT_EQ(a.module_bytes, 1 * kMiB);
  EXPECT_EQ(a.data_bytes, 30 * kMiB);
  EXPECT_EQ(a.used_bytes, 35 * kMiB);
  EXPECT_EQ(a.last_launch_ns, 123456789u);
  const SliceDevice& b = r->devices[1];
  EXPECT_EQ(b.index, 1);
  EXPECT_EQ(b.uuid, kGpuB);
  EXPECT_EQ(b.used_bytes, 8 * kMiB);
  EXPECT_EQ(b.context_bytes, 3 * kMiB);
  EXPECT_EQ(b.last_launch_ns, 0u);
}

TEST(RegionReader, HostileNumbersAreReportedAsIsOrDropped) {
  TempDir dir;
  std::string path = dir.path() + "/region.cache";
  auto h = MakeRegion(path, {{kGpuA, 64 * kMiB, 250}});
  ASSERT_NE(h.region, nullptr);
  SetSlot(h.region, 0, 1, 0, {{0, 0, 1000 * kMiB}});  // host PID unknown; used > limit
  SetSlot(h.region, 1, 2, -7, {{0, 0, UINT64_MAX}});  // negative host PID; saturating sum
  SetSlot(h.region, 2, 3, 99, {{0, 0, 5}});
  h.region->slots[3].state.store(12345);  // garbage state: not active
  h.region->slots[3].used[0].store(77);
  // A UUID without NUL and with control bytes: bounded and sanitised.
  std::memset(h.region->devices[0].uuid, '\n', vgpu::kUuidSize);
  vgpu::RegionClose(&h);

  auto r = ReadRegionFile(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->active_slots, 3);
  EXPECT_EQ(r->host_pids, (std::vector<int32_t>{99}));
  EXPECT_EQ(r->slots_without_host_pid, 2);
  EXPECT_EQ(r->devices[0].used_bytes, UINT64_MAX);  // saturated, not wrapped
  EXPECT_EQ(r->devices[0].data_bytes, UINT64_MAX);
  EXPECT_EQ(r->devices[0].sm_limit_percent, 250u);  // as written
  EXPECT_EQ(r->devices[0].uuid, std::string(vgpu::kUuidSize, '?'));
}

// Writes a valid region, lets `edit` damage its bytes, and expects refusal with `reason`.
struct BadCase {
  const char* name;
  std::function<void(std::string&)> edit;
  const char* reason;
  std::string message_part;  // the field and value the message must name
};

TEST(RegionReader, BadFilesAreRefusedWithANamedReason) {
  const size_t kSize = sizeof(vgpu::Region);
  auto put32 = [](std::string& b, size_t off, uint32_t v) { std::memcpy(b.data() + off, &v, 4); };
  const BadCase cases[] = {
      {"empty", [](std::string& b) { b.clear(); }, "size", "size is 0 bytes"},
      {"truncated", [](std::string& b) { b.resize(b.size() - 1); }, "size",
       "size is " + std::to_string(kSize - 1)},
      {"header only", [](std::string& b) { b.resize(64); }, "size", "size is 64 bytes"},
      {"oversized", [](std::string& b) { b.push_back('x'); }, "size",
       "size is " + std::to_string(kSize + 1)},
      {"oversized x2", [](std::string& b) { b += b; }, "size", "want"},
      {"bad magic", [&](std::string& b) { put32(b, 0, 0xdeadbeef); }, "bad_magic",
       "magic is 3735928559"},
      {"version 1", [&](std::string& b) { put32(b, 4, 1); }, "bad_version", "version is 1, want 2"},
      {"version 3", [&](std::string& b) { put32(b, 4, 3); }, "bad_version", "version is 3, want 2"},
      {"region_size", [&](std::string& b) { put32(b, 8, 4096); }, "bad_layout",
       "region_size is 4096"},
      {"slot_size", [&](std::string& b) { put32(b, 12, 8); }, "bad_layout", "slot_size is 8"},
      {"max_devices", [&](std::string& b) { put32(b, 16, 64); }, "bad_layout", "max_devices is 64"},
      {"max_slots", [&](std::string& b) { put32(b, 20, 1); }, "bad_layout", "max_slots is 1"},
      {"device_count", [&](std::string& b) { put32(b, 24, 17); }, "bad_layout",
       "device_count is 17"},
      {"device_count huge", [&](std::string& b) { put32(b, 24, 0xffffffffu); }, "bad_layout",
       "device_count is 4294967295"},
      {"zeros", [](std::string& b) { std::fill(b.begin(), b.end(), '\0'); }, "bad_magic",
       "magic is 0"},
  };
  TempDir dir;
  std::string good = dir.path() + "/good.cache";
  auto h = MakeRegion(good, {{kGpuA, 64 * kMiB, 0}});
  ASSERT_NE(h.region, nullptr);
  vgpu::RegionClose(&h);
  const std::string valid = ReadBytes(good);
  ASSERT_EQ(valid.size(), kSize);
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    std::string bytes = valid;
    c.edit(bytes);
    std::string path = dir.path() + "/bad.cache";
    WriteBytes(path, bytes);
    std::string reason;
    auto r = ReadRegionFile(path, &reason);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(reason, c.reason);
    EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(c.message_part), std::string::npos) << r.status().message();
    // The same bytes in memory give the same verdict.
    std::string mem_reason;
    auto m = ParseRegion(bytes.data(), bytes.size(), &mem_reason);
    EXPECT_FALSE(m.ok());
    EXPECT_EQ(mem_reason, c.reason);
  }
}

TEST(RegionReader, MessagesNameTheFieldAndTheValue) {
  TempDir dir;
  std::string path = dir.path() + "/region.cache";
  auto h = MakeRegion(path, {{kGpuA, 64 * kMiB, 0}});
  ASSERT_NE(h.region, nullptr);
  h.region->version = 1;
  vgpu::RegionClose(&h);
  auto r = ReadRegionFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), path + ": region version is 1, want 2");
  std::string small(100, 'x');
  auto m = ParseRegion(small.data(), small.size());
  EXPECT_EQ(m.status().message(),
            "region file size is 100 bytes, want " + std::to_string(sizeof(vgpu::Region)));
}

TEST(RegionReader, NonFilesAreRefusedWithoutBlocking) {
  TempDir dir;
  std::string reason;
  auto missing = ReadRegionFile(dir.path() + "/none", &reason);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(reason, "missing");

  std::string d = dir.path() + "/a-directory";
  ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
  auto isdir = ReadRegionFile(d, &reason);
  EXPECT_FALSE(isdir.ok());
  EXPECT_EQ(reason, "not_regular");

  std::string fifo = dir.path() + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  auto f = ReadRegionFile(fifo, &reason);  // O_NONBLOCK: returns at once
  EXPECT_FALSE(f.ok());
  EXPECT_EQ(reason, "not_regular");

  // A symlink to a valid region is not followed (a tenant could point it at any host file).
  std::string good = dir.path() + "/good.cache";
  auto h = MakeRegion(good, {{kGpuA, 64 * kMiB, 0}});
  vgpu::RegionClose(&h);
  std::string link = dir.path() + "/link.cache";
  ASSERT_EQ(::symlink(good.c_str(), link.c_str()), 0);
  auto l = ReadRegionFile(link, &reason);
  EXPECT_FALSE(l.ok());
  EXPECT_EQ(reason, "unreadable");
  EXPECT_TRUE(ReadRegionFile(good).ok());
}

}  // namespace
}  // namespace fracgpu::monitor::testing
