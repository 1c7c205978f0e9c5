#include "core/quantity.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fracgpu::core {
namespace {

struct WholeCase {
  std::string text;
  int32_t shift2;
  WholeStatus status;
  int64_t value;  // checked only when status == kOk
};

// Expected values worked out by hand from the Kubernetes quantity grammar.
TEST(QuantityTest, WholeNumbersTable) {
  const std::vector<WholeCase> cases = {
      {"0", 0, WholeStatus::kOk, 0},
      {"-0", 0, WholeStatus::kOk, 0},
      {"3000", 0, WholeStatus::kOk, 3000},
      {"3k", 0, WholeStatus::kOk, 3000},  // the API server's canonical form of 3000
      {"40k", 0, WholeStatus::kOk, 40000},
      {"1M", 0, WholeStatus::kOk, 1000000},
      {"2G", 0, WholeStatus::kOk, 2000000000},
      {"1e3", 0, WholeStatus::kOk, 1000},
      {"1E3", 0, WholeStatus::kOk, 1000},
      {"1E", 0, WholeStatus::kOk, 1000000000000000000},  // E alone is exa
      {"8E", 0, WholeStatus::kOk, 8000000000000000000},
      {"+5", 0, WholeStatus::kOk, 5},
      {"-5", 0, WholeStatus::kOk, -5},
      {"1.5k", 0, WholeStatus::kOk, 1500},
      {".5k", 0, WholeStatus::kOk, 500},
      {"5.", 0, WholeStatus::kOk, 5},
      {"007", 0, WholeStatus::kOk, 7},
      {"1000m", 0, WholeStatus::kOk, 1},
      {"100e-2", 0, WholeStatus::kOk, 1},
      {"0.000001M", 0, WholeStatus::kOk, 1},
      {"0.5Ki", 0, WholeStatus::kOk, 512},
      {"3Gi", 0, WholeStatus::kOk, 3221225472},
      {"3Gi", 20, WholeStatus::kOk, 3072},  // bytes → MiB
      {"512Mi", 20, WholeStatus::kOk, 512},
      {"1.5Gi", 20, WholeStatus::kOk, 1536},
      {"7Ei", 0, WholeStatus::kOk, 8070450532247928832},  // 7 × 2^60
      {"9223372036854775807", 0, WholeStatus::kOk, 9223372036854775807},
      {"-9223372036854775807", 0, WholeStatus::kOk, -9223372036854775807},
      {"500m", 0, WholeStatus::kFraction, 0},
      {"0.5", 0, WholeStatus::kFraction, 0},
      {"1e-3", 0, WholeStatus::kFraction, 0},
      {"12.34", 0, WholeStatus::kFraction, 0},
      {"1536Ki", 20, WholeStatus::kFraction, 0},  // 1.5 MiB
      {"1Ki", 20, WholeStatus::kFraction, 0},
      {"9223372036854775808", 0, WholeStatus::kOutOfRange, 0},
      {"10E", 0, WholeStatus::kOutOfRange, 0},
      {"8Ei", 0, WholeStatus::kOutOfRange, 0},  // 2^63
      {"1e400", 0, WholeStatus::kOutOfRange, 0},
      {"99999999999999999999999999999999999999999999999999", 0, WholeStatus::kOutOfRange, 0},
  };
  for (const WholeCase& c : cases) {
    SCOPED_TRACE(c.text + " >> " + std::to_string(c.shift2));
    Result<Quantity> q = ParseQuantity(c.text);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    int64_t v = -42;
    EXPECT_EQ(QuantityToInt64(*q, &v, c.shift2), c.status);
    if (c.status == WholeStatus::kOk) {
      EXPECT_EQ(v, c.value);
    } else {
      EXPECT_EQ(v, -42) << "out must be untouched on failure";
    }
  }
}

// 5^60 × 10^-60 × 2^60 = 1: exactness beyond 38 significant digits.
TEST(QuantityTest, ExactWithManyDigits) {
  Result<Quantity> q =
      ParseQuantity("0.000000000000000000867361737988403547205962240695953369140625Ei");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  int64_t v = 0;
  EXPECT_EQ(QuantityToInt64(*q, &v), WholeStatus::kOk);
  EXPECT_EQ(v, 1);
}

TEST(QuantityTest, NormalisedForm) {
  Result<Quantity> q = ParseQuantity("-012.3400k");
  ASSERT_TRUE(q.ok());
  EXPECT_TRUE(q->negative);
  EXPECT_EQ(q->digits, "1234");
  EXPECT_EQ(q->exp10, 1);  // 1234 × 10^1 = 12340
  EXPECT_EQ(q->exp2, 0);
  EXPECT_FALSE(q->HasBinarySuffix());

  Result<Quantity> zero = ParseQuantity("0Gi");
  ASSERT_TRUE(zero.ok());
  EXPECT_TRUE(zero->IsZero());
  EXPECT_TRUE(zero->HasBinarySuffix());
  EXPECT_EQ(ParseQuantity("2Mi")->exp2, 20);
}

TEST(QuantityTest, BadSyntaxTable) {
  struct Bad {
    std::string text;
    std::string message;
  };
  const std::vector<Bad> cases = {
      {"", "empty quantity"},
      {"abc", "quantity has no digits"},
      {".", "quantity has no digits"},
      {"-", "quantity has no digits"},
      {"--1", "quantity has no digits"},
      {"+-1", "quantity has no digits"},
      {"k", "quantity has no digits"},
      {" 1", "quantity has no digits"},
      {"e3", "quantity has no digits"},
      {"1.2.3",
       "unknown suffix \".3\" (want one of m k M G T P E Ki Mi Gi Ti Pi Ei or e<exponent>)"},
      {"1Kb", "unknown suffix \"Kb\" (want one of m k M G T P E Ki Mi Gi Ti Pi Ei or e<exponent>)"},
      {"1K", "unknown suffix \"K\" (want one of m k M G T P E Ki Mi Gi Ti Pi Ei or e<exponent>)"},
      {"1ki", "unknown suffix \"ki\" (want one of m k M G T P E Ki Mi Gi Ti Pi Ei or e<exponent>)"},
      {"1 k", "unknown suffix \" k\" (want one of m k M G T P E Ki Mi Gi Ti Pi Ei or e<exponent>)"},
      {"1 ", "unknown suffix \" \" (want one of m k M G T P E Ki Mi Gi Ti Pi Ei or e<exponent>)"},
      {"0x10",
       "unknown suffix \"x10\" (want one of m k M G T P E Ki Mi Gi Ti Pi Ei or e<exponent>)"},
      {"1e", "unknown suffix \"e\" (want one of m k M G T P E Ki Mi Gi Ti Pi Ei or e<exponent>)"},
      {"1ei", "unknown suffix \"ei\" (want one of m k M G T P E Ki Mi Gi Ti Pi Ei or e<exponent>)"},
      {"1e+", "bad exponent \"e+\" (want e<integer>, |e| <= 1000)"},
      {"1e3.5", "bad exponent \"e3.5\" (want e<integer>, |e| <= 1000)"},
      {"1e1001", "bad exponent \"e1001\" (want e<integer>, |e| <= 1000)"},
      {"1E-1001", "bad exponent \"E-1001\" (want e<integer>, |e| <= 1000)"},
      {std::string(129, '1'), "quantity longer than 128 characters"},
  };
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.text);
    Result<Quantity> q = ParseQuantity(c.text);
    ASSERT_FALSE(q.ok());
    EXPECT_EQ(q.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(q.status().message(), c.message);
  }
}

TEST(QuantityTest, LongestAcceptedLength) {
  Result<Quantity> q = ParseQuantity(std::string(128, '0'));
  ASSERT_TRUE(q.ok());
  EXPECT_TRUE(q->IsZero());
}

}  // namespace
}  // namespace fracgpu::core
