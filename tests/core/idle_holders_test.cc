// The idle-holder record `fracgpu.io/idle-holders` (core/idle_holders.h, issue 36 item 4): good
// values and their round trip, the entry bound, every bad case with the field and value its
// error names, and freshness.
#include "core/idle_holders.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace fracgpu::core {
namespace {

constexpr char kUid[] = "5f0c2a9e-1b3d-4c5e-8f70-112233445566";
constexpr char kUuidA[] = "GPU-00000000-0000-4000-8000-000000000000";
constexpr char kUuidB[] = "GPU-00000001-0000-4000-8000-000000000000";

TEST(IdleHoldersTest, GoodValuesDecodeAndRoundTrip) {
  const std::string u = kUid, a = kUuidA, b = kUuidB;
  struct Case {
    std::string value;
    IdleHolders want;
  } cases[] = {
      {"1764921600;", {1764921600, {}}},
      {"1764921600;" + u + ":" + a + ":14336:11400", {1764921600, {{u, a, 14336, 11400}}}},
      // The same pod on two GPUs, two pods on one GPU; the bounds themselves.
      {"1;" + u + ":" + a + ":0:0," + u + ":" + b + ":2147483647:2147483647,uid-b:" + a + ":1:1",
       {1, {{u, a, 0, 0}, {u, b, 2147483647, 2147483647}, {"uid-b", a, 1, 1}}}},
      {"9007199254740992;" + std::string(64, 'f') + ":GPU-fake-0:512:60",
       {9007199254740992, {{std::string(64, 'f'), "GPU-fake-0", 512, 60}}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.value);
    auto got = ParseIdleHolders(c.value);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, c.want);
    EXPECT_EQ(FormatIdleHolders(*got), c.value);
    EXPECT_EQ(FormatIdleHolders(c.want), c.value);
  }
}

TEST(IdleHoldersTest, TwoHundredFiftySixEntriesAreAcceptedAndMoreAreNot) {
  IdleHolders record{1764921600, {}};
  for (int i = 0; i < 256; ++i) {
    record.holders.push_back({kUid, "GPU-" + std::to_string(i), 2147483647, 2147483647});
  }
  const std::string value = FormatIdleHolders(record);
  ASSERT_LE(value.size(), kIdleHoldersMaxBytes);  // the largest record fits the byte bound
  auto got = ParseIdleHolders(value);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, record);
  auto over = ParseIdleHolders(value + "," + kUid + ":GPU-256:1:1");
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(over.status().message(), "more than 256 entries");
}

TEST(IdleHoldersTest, BadValuesNameTheFieldAndValue) {
  const std::string u = kUid, a = kUuidA;
  const std::string shape = " must be <pod uid>:<gpu uuid>:<MiB>:<idle seconds>";
  const std::string uuid_rule = " must be GPU- followed by 1..92 of [0-9A-Za-z-]";
  const std::string uid_rule = " must be 1..64 of [0-9A-Za-z-]";
  struct Case {
    std::string value;
    std::string message;
  } cases[] = {
      {"",
       "value \"\" has no ';': want <unix seconds>;<pod uid>:<gpu uuid>:<MiB>:<idle seconds>,…"},
      {"17649",
       "value \"17649\" has no ';': want <unix seconds>;<pod uid>:<gpu uuid>:<MiB>:<idle "
       "seconds>,…"},
      {";", "time \"\" must be Unix seconds 1..9007199254740992"},
      {"0;", "time \"0\" must be Unix seconds 1..9007199254740992"},
      {"-5;", "time \"-5\" must be Unix seconds 1..9007199254740992"},
      {"+5;", "time \"+5\" must be Unix seconds 1..9007199254740992"},
      {"0123;", "time \"0123\" must be Unix seconds 1..9007199254740992"},
      {"9007199254740993;", "time \"9007199254740993\" must be Unix seconds 1..9007199254740992"},
      {"99999999999999999999999;",
       "time \"99999999999999999999999\" must be Unix seconds 1..9007199254740992"},
      {"1;,", "entry 0: empty entry"},
      {"1;" + u + ":" + a + ":1:1,", "entry 1: empty entry"},
      {"1;x:GPU-a:1", "entry 0: \"x:GPU-a:1\"" + shape},
      {"1;x:GPU-a:1:1:1", "entry 0: \"x:GPU-a:1:1:1\"" + shape},
      // A long entry is quoted up to its 64th byte.
      {"1;" + u + ":" + a + ":1", "entry 0: \"" + u + ":" + a.substr(0, 27) + "…\"" + shape},
      {"1;x:GPU-a:1:1:", "entry 0: \"x:GPU-a:1:1:\"" + shape},
      {"1;x", "entry 0: \"x\"" + shape},
      {"1;:" + a + ":1:1", "entry 0: pod uid \"\"" + uid_rule},
      {"1;ns/pod:" + a + ":1:1", "entry 0: pod uid \"ns/pod\"" + uid_rule},
      {"1;a_b:" + a + ":1:1", "entry 0: pod uid \"a_b\"" + uid_rule},
      {"1;" + std::string(65, 'f') + ":" + a + ":1:1",
       "entry 0: pod uid \"" + std::string(64, 'f') + "…\"" + uid_rule},
      {std::string("1;\x01:") + a + ":1:1", "entry 0: pod uid \"\\x01\"" + uid_rule},
      {"1;x:GPU-:1:1", "entry 0: gpu uuid \"GPU-\"" + uuid_rule},
      {"1;x:MIG-abc:1:1", "entry 0: gpu uuid \"MIG-abc\"" + uuid_rule},
      {"1;x:GPU-a b:1:1", "entry 0: gpu uuid \"GPU-a b\"" + uuid_rule},
      {"1;x:GPU-" + std::string(93, 'a') + ":1:1",
       "entry 0: gpu uuid \"GPU-" + std::string(60, 'a') + "…\"" + uuid_rule},
      {"1;x:GPU-a::1", "entry 0: MiB \"\" must be an integer 0..2147483647"},
      {"1;x:GPU-a:-1:1", "entry 0: MiB \"-1\" must be an integer 0..2147483647"},
      {"1;x:GPU-a:01:1", "entry 0: MiB \"01\" must be an integer 0..2147483647"},
      {"1;x:GPU-a:1Gi:1", "entry 0: MiB \"1Gi\" must be an integer 0..2147483647"},
      {"1;x:GPU-a:2147483648:1", "entry 0: MiB \"2147483648\" must be an integer 0..2147483647"},
      {"1;x:GPU-a:1:", "entry 0: idle seconds \"\" must be an integer 0..2147483647"},
      {"1;x:GPU-a:1:1.5", "entry 0: idle seconds \"1.5\" must be an integer 0..2147483647"},
      {"1;x:GPU-a:1:2147483648",
       "entry 0: idle seconds \"2147483648\" must be an integer 0..2147483647"},
      {"1;x:GPU-a:1:1,y:GPU-a:1:1,x:GPU-a:2:2", "entry 2: pod \"x\" on \"GPU-a\" is listed twice"},
      {std::string(32769, '1'), "value is 32769 bytes, more than 32768"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.value.substr(0, 80));
    auto got = ParseIdleHolders(c.value);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(got.status().message(), c.message);
  }
}

TEST(IdleHoldersTest, WritableIsWhatTheParserAccepts) {
  const IdleHolder good{kUid, kUuidA, 1024, 600};
  EXPECT_TRUE(IdleHolderWritable(good));
  IdleHolder h = good;
  for (const char* uid : {"", "ns/pod", "a:b", "a,b"}) {
    h = good;
    h.pod_uid = uid;
    EXPECT_FALSE(IdleHolderWritable(h)) << uid;
  }
  for (const char* uuid : {"GPU-", "GPU-a;1:9", "MIG-1"}) {
    h = good;
    h.gpu_uuid = uuid;
    EXPECT_FALSE(IdleHolderWritable(h)) << uuid;
  }
  h = good;
  h.mib = kIdleHoldersMaxMib + 1;
  EXPECT_FALSE(IdleHolderWritable(h));
  h = good;
  h.idle_s = -1;
  EXPECT_FALSE(IdleHolderWritable(h));
}

TEST(IdleHoldersTest, FreshOnlyWithinThreeRefreshPeriodsEitherSide) {
  const int64_t at = 1764921600;
  EXPECT_EQ(kIdleHoldersFreshSeconds, 180);
  EXPECT_TRUE(IdleHoldersFresh(at, at));
  EXPECT_TRUE(IdleHoldersFresh(at, at + 180));
  EXPECT_FALSE(IdleHoldersFresh(at, at + 181));  // a dead agent's record is no longer shown
  EXPECT_TRUE(IdleHoldersFresh(at, at - 180));   // the node's clock a little ahead
  EXPECT_FALSE(IdleHoldersFresh(at, at - 181));
  EXPECT_FALSE(IdleHoldersFresh(0, 0));  // no record
}

}  // namespace
}  // namespace fracgpu::core
