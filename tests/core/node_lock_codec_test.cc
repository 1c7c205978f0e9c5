#include "core/node_lock_codec.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace fracgpu::core {
namespace {

std::chrono::sys_seconds Unix(int64_t s) {
  return std::chrono::sys_seconds{std::chrono::seconds{s}};
}

// Unix times below were computed independently with Python's datetime (fromisoformat +
// timestamp); 0000-01-01 as 0001-01-01 minus year 0's 366 days (proleptic Gregorian).
TEST(NodeLockCodecTest, GoodValues) {
  struct Case {
    const char* value;
    int64_t unix_s;
    const char* ns;
    const char* name;
  } cases[] = {
      // What HAMi's GenerateNodeLockKeyByPod and our encoder write.
      {"2026-03-02T10:15:04Z,default,gpu-pod", 1772446504, "default", "gpu-pod"},
      // HAMi's legacy bare time (a pod-less GenerateNodeLockKeyByPod): names no pod.
      {"2026-03-02T10:15:04Z", 1772446504, "", ""},
      // Go's time.Format(RFC3339) in a non-UTC zone; a fraction is dropped.
      {"2026-03-02T12:15:04.123+02:00,ml,train", 1772446504, "ml", "train"},
      {"2026-03-01T23:45:04-10:30,ml,train", 1772446504, "ml", "train"},
      {"2026-03-02T10:15:04+23:59,ml,train", 1772360164, "ml", "train"},
      {"2024-02-29T23:59:59Z,ml,train", 1709251199, "ml", "train"},
      {"1969-12-31T23:59:59Z,ml,train", -1, "ml", "train"},
      {"0000-01-01T00:00:00Z,a,b", -62167219200, "a", "b"},
      {"9999-12-31T23:59:59Z,a,b", 253402300799, "a", "b"},
      // Empty names are read as written (HAMi's ParseNodeLock does the same); they name no pod.
      {"2026-03-02T10:15:04Z,,", 1772446504, "", ""},
      {"2026-03-02T10:15:04Z,ml,", 1772446504, "ml", ""},
      {"2026-03-02T10:15:04Z,,train", 1772446504, "", "train"},
  };
  for (const auto& c : cases) {
    Result<NodeLock> got = DecodeNodeLock(c.value);
    ASSERT_TRUE(got.ok()) << c.value << ": " << got.status().ToString();
    EXPECT_EQ(got->time, Unix(c.unix_s)) << c.value;
    EXPECT_EQ(got->pod_namespace, c.ns) << c.value;
    EXPECT_EQ(got->pod_name, c.name) << c.value;
    EXPECT_EQ(got->names_pod(), *c.ns != '\0' && *c.name != '\0') << c.value;
    // Re-encoding gives a value that decodes to the same lock.
    Result<NodeLock> back = DecodeNodeLock(EncodeNodeLock(*got));
    ASSERT_TRUE(back.ok()) << c.value;
    EXPECT_EQ(*back, *got) << c.value;
  }
}

TEST(NodeLockCodecTest, BadValuesNameTheFieldAndValue) {
  struct Case {
    const char* value;
    const char* message;  // the whole kInvalidArgument message
  } cases[] = {
      {"2026-03-02T10:15:04Z,onlyns",
       R"("2026-03-02T10:15:04Z,onlyns" has 2 ','-separated fields, want <time>,<namespace>,<pod name> or a bare time)"},
      // A fourth field is an error (HAMi: "expected 3 parts"), never part of the pod name.
      {"2026-03-02T10:15:04Z,ml,train,extra",
       R"("2026-03-02T10:15:04Z,ml,train,extra" has 4 ','-separated fields, want <time>,<namespace>,<pod name> or a bare time)"},
      {"", R"(time "" is not RFC3339 (YYYY-MM-DDTHH:MM:SS[.frac] then Z or ±HH:MM))"},
      {",ml,train", R"(time "" is not RFC3339 (YYYY-MM-DDTHH:MM:SS[.frac] then Z or ±HH:MM))"},
      {"yesterday",
       R"(time "yesterday" is not RFC3339 (YYYY-MM-DDTHH:MM:SS[.frac] then Z or ±HH:MM))"},
      {"2026-03-02T10:15:04,ml,train",
       R"(time "2026-03-02T10:15:04" is not RFC3339 (YYYY-MM-DDTHH:MM:SS[.frac] then Z or ±HH:MM))"},
      {"2026-03-02t10:15:04Z",
       R"(time "2026-03-02t10:15:04Z" is not RFC3339 (YYYY-MM-DDTHH:MM:SS[.frac] then Z or ±HH:MM))"},
      {"2026-03-02T10:15:04z",
       R"(time "2026-03-02T10:15:04z" is not RFC3339 (YYYY-MM-DDTHH:MM:SS[.frac] then Z or ±HH:MM))"},
      {"2026-03-02 10:15:04Z",
       R"(time "2026-03-02 10:15:04Z" is not RFC3339 (YYYY-MM-DDTHH:MM:SS[.frac] then Z or ±HH:MM))"},
      {"2026-3-02T10:15:04Z",
       R"(time "2026-3-02T10:15:04Z" is not RFC3339 (YYYY-MM-DDTHH:MM:SS[.frac] then Z or ±HH:MM))"},
      {"2026-03-02T10:15:04.Z",
       R"(time "2026-03-02T10:15:04.Z" is not RFC3339 (YYYY-MM-DDTHH:MM:SS[.frac] then Z or ±HH:MM))"},
      {"2026-03-02T10:15:04+0200",
       R"(time "2026-03-02T10:15:04+0200" is not RFC3339 (YYYY-MM-DDTHH:MM:SS[.frac] then Z or ±HH:MM))"},
      {"2026-03-02T10:15:04Z ",
       R"(time "2026-03-02T10:15:04Z " is not RFC3339 (YYYY-MM-DDTHH:MM:SS[.frac] then Z or ±HH:MM))"},
      {"+2026-03-02T10:15:04Z",
       R"(time "+2026-03-02T10:15:04Z" is not RFC3339 (YYYY-MM-DDTHH:MM:SS[.frac] then Z or ±HH:MM))"},
      {"2026-13-02T10:15:04Z", R"(time "2026-13-02T10:15:04Z": month 13 is out of range 1..12)"},
      {"2026-00-02T10:15:04Z", R"(time "2026-00-02T10:15:04Z": month 0 is out of range 1..12)"},
      {"2026-02-29T10:15:04Z", R"(time "2026-02-29T10:15:04Z": day 29 is out of range 1..28)"},
      {"2026-04-31T10:15:04Z", R"(time "2026-04-31T10:15:04Z": day 31 is out of range 1..30)"},
      {"2026-03-00T10:15:04Z", R"(time "2026-03-00T10:15:04Z": day 0 is out of range 1..31)"},
      {"2026-03-02T24:00:00Z", R"(time "2026-03-02T24:00:00Z": hour 24 is out of range 0..23)"},
      {"2026-03-02T10:60:04Z", R"(time "2026-03-02T10:60:04Z": minute 60 is out of range 0..59)"},
      // No leap second: Go's RFC3339 parser rejects :60 too.
      {"2026-03-02T10:15:60Z", R"(time "2026-03-02T10:15:60Z": second 60 is out of range 0..59)"},
      {"2026-03-02T10:15:04+24:00",
       R"(time "2026-03-02T10:15:04+24:00": zone hour 24 is out of range 0..23)"},
      {"2026-03-02T10:15:04+02:60",
       R"(time "2026-03-02T10:15:04+02:60": zone minute 60 is out of range 0..59)"},
  };
  for (const auto& c : cases) {
    Result<NodeLock> got = DecodeNodeLock(c.value);
    ASSERT_FALSE(got.ok()) << c.value;
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << c.value;
    EXPECT_EQ(got.status().message(), c.message) << c.value;
  }
}

TEST(NodeLockCodecTest, EncodeWritesUtcWholeSeconds) {
  EXPECT_EQ(EncodeNodeLock({Unix(1772446504), "default", "gpu-pod"}),
            "2026-03-02T10:15:04Z,default,gpu-pod");
  EXPECT_EQ(EncodeNodeLock({Unix(-1), "a", "b"}), "1969-12-31T23:59:59Z,a,b");
  EXPECT_EQ(EncodeNodeLock({Unix(-62167219200), "a", "b"}), "0000-01-01T00:00:00Z,a,b");
  EXPECT_EQ(EncodeNodeLock({Unix(253402300799), "a", "b"}), "9999-12-31T23:59:59Z,a,b");
}

}  // namespace
}  // namespace fracgpu::core
