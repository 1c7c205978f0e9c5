// The lent-memory record `fracgpu.io/lent-memory` (core/lent.h, issue 36 item 2): good values,
// every bad case with the field and value its error names, and freshness.
#include "core/lent.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace fracgpu::core {
namespace {

constexpr char kUuidA[] = "GPU-00000000-0000-4000-8000-000000000000";
constexpr char kUuidB[] = "GPU-00000001-0000-4000-8000-000000000000";

TEST(LentMemoryTest, GoodValuesDecodeAndRoundTrip) {
  struct Case {
    std::string value;
    LentMemory want;
  } cases[] = {
      {"1764921600;", {1764921600, {}}},
      {std::string("1764921600;") + kUuidA + ":16384", {1764921600, {{kUuidA, 16384}}}},
      {std::string("1;") + kUuidA + ":0," + kUuidB + ":2147483647",
       {1, {{kUuidA, 0}, {kUuidB, 2147483647}}}},
      // Test clusters' UUIDs need not be NVML's shape: GPU- then [0-9A-Za-z-].
      {"1764921600;GPU-fake-0:512", {1764921600, {{"GPU-fake-0", 512}}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.value);
    auto got = ParseLentMemory(c.value);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, c.want);
    EXPECT_EQ(FormatLentMemory(*got), c.value);
  }
}

TEST(LentMemoryTest, SixtyFourGpusAreAcceptedAndSixtyFiveAreNot) {
  LentMemory lent{1764921600, {}};
  for (int i = 0; i < 64; ++i) lent.gpus.push_back({"GPU-" + std::to_string(i), 1024});
  const std::string value = FormatLentMemory(lent);
  auto got = ParseLentMemory(value);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, lent);
  auto over = ParseLentMemory(value + ",GPU-64:1");
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(over.status().message(), "more than 64 gpus");
}

TEST(LentMemoryTest, BadValuesNameTheFieldAndValue) {
  const std::string a = kUuidA;
  struct Case {
    std::string value;
    std::string message;
  } cases[] = {
      {"", "value \"\" has no ';': want <unix seconds>;<gpu uuid>:<MiB>,…"},
      {"1764921600", "value \"1764921600\" has no ';': want <unix seconds>;<gpu uuid>:<MiB>,…"},
      {";", "time \"\" must be Unix seconds 1..9007199254740992"},
      {"0;", "time \"0\" must be Unix seconds 1..9007199254740992"},
      {"-5;", "time \"-5\" must be Unix seconds 1..9007199254740992"},
      {"+5;", "time \"+5\" must be Unix seconds 1..9007199254740992"},
      {"0123;", "time \"0123\" must be Unix seconds 1..9007199254740992"},
      {"1.5;", "time \"1.5\" must be Unix seconds 1..9007199254740992"},
      {"9007199254740993;", "time \"9007199254740993\" must be Unix seconds 1..9007199254740992"},
      {"99999999999999999999999;",
       "time \"99999999999999999999999\" must be Unix seconds 1..9007199254740992"},
      {"1;,", "gpu 0: empty entry"},
      {"1;" + a + ":1,", "gpu 1: empty entry"},
      {"1;" + a + ":1,," + a + ":2", "gpu 1: empty entry"},
      {"1;" + a, "gpu 0: entry \"" + a + "\" must be <gpu uuid>:<MiB> with one ':'"},
      {"1;" + a + ":1:2", "gpu 0: entry \"" + a + ":1:2\" must be <gpu uuid>:<MiB> with one ':'"},
      {"1;GPU-:1", "gpu 0: uuid \"GPU-\" must be GPU- followed by 1..92 of [0-9A-Za-z-]"},
      {"1;gpu-abc:1", "gpu 0: uuid \"gpu-abc\" must be GPU- followed by 1..92 of [0-9A-Za-z-]"},
      {"1;MIG-abc:1", "gpu 0: uuid \"MIG-abc\" must be GPU- followed by 1..92 of [0-9A-Za-z-]"},
      {"1;GPU-a b:1", "gpu 0: uuid \"GPU-a b\" must be GPU- followed by 1..92 of [0-9A-Za-z-]"},
      {"1;GPU-a;b:1", "gpu 0: uuid \"GPU-a;b\" must be GPU- followed by 1..92 of [0-9A-Za-z-]"},
      {std::string("1;GPU-\x01\xff:1"),
       "gpu 0: uuid \"GPU-\\x01\\xff\" must be GPU- followed by 1..92 of [0-9A-Za-z-]"},
      {"1;GPU-" + std::string(93, 'a') + ":1",
       "gpu 0: uuid \"GPU-" + std::string(60, 'a') +
           "…\" must be GPU- followed by 1..92 of [0-9A-Za-z-]"},
      {"1;" + a + ":", "gpu 0 (\"" + a + "\"): MiB \"\" must be an integer 0..2147483647"},
      {"1;" + a + ":-1", "gpu 0 (\"" + a + "\"): MiB \"-1\" must be an integer 0..2147483647"},
      {"1;" + a + ":01", "gpu 0 (\"" + a + "\"): MiB \"01\" must be an integer 0..2147483647"},
      {"1;" + a + ":1Gi", "gpu 0 (\"" + a + "\"): MiB \"1Gi\" must be an integer 0..2147483647"},
      {"1;" + a + ":2147483648",
       "gpu 0 (\"" + a + "\"): MiB \"2147483648\" must be an integer 0..2147483647"},
      {"1;" + a + ":1," + a + ":2", "gpu 1: uuid \"" + a + "\" is listed twice"},
      {std::string(8193, '1'), "value is 8193 bytes, more than 8192"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.value.substr(0, 80));
    auto got = ParseLentMemory(c.value);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(got.status().message(), c.message);
  }
}

TEST(LentMemoryTest, FreshOnlyWithinTheWindowEitherSide) {
  const int64_t at = 1764921600;
  EXPECT_TRUE(LentFresh(at, at));
  EXPECT_TRUE(LentFresh(at, at + kLentFreshSeconds));
  EXPECT_FALSE(LentFresh(at, at + kLentFreshSeconds + 1));  // a dead agent lends nothing
  EXPECT_TRUE(LentFresh(at, at - kLentFreshSeconds));       // the node's clock a little ahead
  EXPECT_FALSE(LentFresh(at, at - kLentFreshSeconds - 1));
  EXPECT_FALSE(LentFresh(0, 0));  // no record
  EXPECT_FALSE(LentFresh(0, 10));
  EXPECT_FALSE(LentFresh(-5, -5));
  EXPECT_TRUE(LentFresh(at, at + 10, 10));
  EXPECT_FALSE(LentFresh(at, at + 11, 10));
}

}  // namespace
}  // namespace fracgpu::core
