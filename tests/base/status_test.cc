#include "base/status.h"

#include <gtest/gtest.h>

#include <string>

namespace fracgpu {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("x must be even, got " + std::to_string(x));
  return x / 2;
}

Status Chain(int x) {
  Result<int> r = Half(x);
  FRACGPU_RETURN_IF_ERROR(r.status().WithPrefix("chain"));
  return Status::Ok();
}

TEST(StatusTest, OkByDefault) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, CarriesCodeAndMessage) {
  Status s = Conflict("node n1 is locked");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kConflict);
  EXPECT_EQ(s.ToString(), "CONFLICT: node n1 is locked");
}

TEST(ResultTest, ValueAndError) {
  EXPECT_EQ(*Half(8), 4);
  Result<int> bad = Half(3);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "x must be even, got 3");
}

TEST(ResultTest, ReturnIfErrorPropagatesWithPrefix) {
  EXPECT_TRUE(Chain(4).ok());
  Status s = Chain(5);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "chain: x must be even, got 5");
}

// value() of an error aborts in every build, NDEBUG (release) included, naming the check.
TEST(ResultDeathTest, ValueOfAnErrorAbortsInEveryBuild) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Result<int> r = NotFound("no such pod");
  EXPECT_DEATH((void)r.value(), "FRACGPU_CHECK failed: Result::value\\(\\) of an error");
  EXPECT_DEATH((void)*r, "Result::value");
  Result<std::string> s = Internal("x");
  EXPECT_DEATH((void)std::move(s).value(), "Result::value");
}

// A Result made from an OK Status (it would hold neither a value nor an error) aborts in every
// build too.
TEST(ResultDeathTest, ConstructionFromAnOkStatusAbortsInEveryBuild) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH((void)Result<int>(Status::Ok()),
               "FRACGPU_CHECK failed: .*Result constructed from an OK Status");
}

}  // namespace
}  // namespace fracgpu
