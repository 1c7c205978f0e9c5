#include "base/strings.h"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace fracgpu::base {
namespace {

using Pieces = std::vector<std::string>;

TEST(TrimTest, Table) {
  struct Case {
    std::string in;
    std::string chars;
    std::string want;
  };
  const Case cases[] = {
      {"", std::string(kAsciiWhitespace), ""},
      {" \t\n\v\f\r", std::string(kAsciiWhitespace), ""},
      {"  a b  ", std::string(kAsciiWhitespace), "a b"},
      {"\ta\r\n", std::string(kAsciiWhitespace), "a"},
      {"abc", std::string(kAsciiWhitespace), "abc"},
      {"x", std::string(kAsciiWhitespace), "x"},
      // Only the characters asked for: a tab stays when only spaces are trimmed.
      {" \ta\t ", " ", "\ta\t"},
      {" \ta\t ", " \t", "a"},
      {"--a-b--", "-", "a-b"},
      // No characters: nothing trimmed.
      {"  a  ", "", "  a  "},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Trim(c.in, c.chars), c.want) << '"' << c.in << "\" chars \"" << c.chars << '"';
  }
  EXPECT_EQ(Trim("  a  "), "a");  // default: ASCII whitespace
}

TEST(TrimTest, ViewsTheInput) {
  const std::string s = "  ab  ";
  std::string_view t = Trim(s);
  EXPECT_EQ(t.data(), s.data() + 2);
  EXPECT_EQ(t.size(), 2u);
}

TEST(TrimEndTest, Table) {
  struct Case {
    std::string in;
    std::string chars;
    std::string want;
  };
  const Case cases[] = {
      {"", std::string(kAsciiWhitespace), ""},
      {"\n\r ", std::string(kAsciiWhitespace), ""},
      {"  token\r\n", std::string(kAsciiWhitespace), "  token"},
      {"token\t", "\n\r ", "token\t"},
      {"token \r\n \n", "\n\r ", "token"},
      {"a", "\n\r ", "a"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(TrimEnd(c.in, c.chars), c.want) << '"' << c.in << '"';
  }
}

TEST(SplitCommaTest, KeepsEveryPieceByDefault) {
  struct Case {
    std::string in;
    Pieces want;
  };
  const Case cases[] = {
      {"", {""}},
      {",", {"", ""}},
      {",,", {"", "", ""}},
      {"a", {"a"}},
      {"a,b", {"a", "b"}},
      {"a,,b,", {"a", "", "b", ""}},
      {" a , b ", {" a ", " b "}},
      {"   ", {"   "}},
  };
  for (const Case& c : cases) EXPECT_EQ(SplitComma(c.in), c.want) << '"' << c.in << '"';
}

TEST(SplitCommaTest, TrimAndSkipEmpty) {
  const SplitOptions spaces{.trim = " ", .skip_empty = true};
  struct Case {
    std::string in;
    Pieces want;
  };
  const Case cases[] = {
      {"", {}},
      {",", {}},
      {",,,", {}},
      {"   ", {}},
      {" , , ", {}},
      {"a", {"a"}},
      {" a , b ,, c ", {"a", "b", "c"}},
      {"a b,c", {"a b", "c"}},
      // Only spaces are trimmed: a tab is part of the piece.
      {"\ta\t, b", {"\ta\t", "b"}},
  };
  for (const Case& c : cases) EXPECT_EQ(SplitComma(c.in, spaces), c.want) << '"' << c.in << '"';

  const SplitOptions blanks{.trim = " \t", .skip_empty = true};
  EXPECT_EQ(SplitComma("\ta\t, \t ,b", blanks), (Pieces{"a", "b"}));
}

TEST(SplitCommaTest, SkipEmptyWithoutTrim) {
  const SplitOptions skip{.skip_empty = true};
  struct Case {
    std::string in;
    Pieces want;
  };
  const Case cases[] = {
      {"", {}}, {",", {}}, {",,a,,", {"a"}}, {" , a", {" ", " a"}}, {"42,43-45", {"42", "43-45"}},
  };
  for (const Case& c : cases) EXPECT_EQ(SplitComma(c.in, skip), c.want) << '"' << c.in << '"';
}

TEST(SplitCommaTest, DropTrailingEmptyKeepsInnerEmpties) {
  const SplitOptions trailing{.drop_trailing_empty = true};
  struct Case {
    std::string in;
    Pieces want;
  };
  const Case cases[] = {
      {"", {}},           {",", {""}},       {",,", {"", ""}},         {"a", {"a"}},
      {"a,", {"a"}},      {",a", {"", "a"}}, {"a,,b", {"a", "", "b"}}, {"a,,b,", {"a", "", "b"}},
      {"a,,", {"a", ""}}, {" ", {" "}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(SplitComma(c.in, trailing), c.want) << '"' << c.in << '"';
  }
}

TEST(JoinTest, SeparatorBetweenEachTwoPiecesEmptiesKept) {
  EXPECT_EQ(Join(Pieces{}, ","), "");
  EXPECT_EQ(Join(Pieces{"a"}, ", "), "a");
  EXPECT_EQ(Join(Pieces{"a", "b", "c"}, ", "), "a, b, c");
  // Empty pieces keep their separators (a join that tests out.empty() would drop the first).
  EXPECT_EQ(Join(Pieces{"", "b"}, ","), ",b");
  EXPECT_EQ(Join(Pieces{"a", "", "b", ""}, ","), "a,,b,");
  EXPECT_EQ(Join(Pieces{"", ""}, ","), ",");
  EXPECT_EQ(Join(Pieces{"x", "y"}, ""), "xy");
  // Other ranges of string-like pieces.
  EXPECT_EQ(Join(std::vector<std::string_view>{"p", "q"}, "|"), "p|q");
  EXPECT_EQ(Join(std::array<const char*, 3>{"1", "2", "3"}, "-"), "1-2-3");
}

// With ",", Join undoes SplitComma's default split of pieces without a comma.
TEST(JoinTest, InverseOfSplitComma) {
  for (const char* text : {"", "a,,b,", "a", ",", ",,x", "GPU-1,GPU-2"}) {
    EXPECT_EQ(Join(SplitComma(text), ","), text) << text;
  }
}

TEST(BoundedNameTest, FitsAndStaysDistinct) {
  EXPECT_EQ(BoundedName("node-a", "-gpu.fracgpu.io", 253), "node-a-gpu.fracgpu.io");
  EXPECT_EQ(BoundedName(std::string(59, 'c'), "-gpu", 63), std::string(59, 'c') + "-gpu");
  std::string a = BoundedName(std::string(60, 'c'), "-gpu", 63);
  std::string b = BoundedName(std::string(61, 'c'), "-gpu", 63);
  EXPECT_EQ(a.size(), 63u);
  EXPECT_EQ(b.size(), 63u);
  EXPECT_NE(a, b);
  EXPECT_TRUE(a.starts_with(std::string(50, 'c') + "-"));
  EXPECT_TRUE(a.ends_with("-gpu"));
  // The cut never leaves '-' or '.' before the hash's '-'.
  std::string c = BoundedName(std::string(49, 'x') + "-.zzzzzzzzzzzzzzz", "-gpu", 63);
  EXPECT_EQ(c.substr(0, 50), std::string(49, 'x') + "-");
  EXPECT_EQ(c.size(), 62u);
}

}  // namespace

// The two helpers the outside-data codecs share (core/lent.cc, core/idle_holders.cc).
TEST(QuoteBytesTest, PrintableAsIsOthersAsHexCutAt64Bytes) {
  EXPECT_EQ(QuoteBytes("GPU-1"), "\"GPU-1\"");
  EXPECT_EQ(QuoteBytes(""), "\"\"");
  EXPECT_EQ(QuoteBytes(std::string("a\"b\\c\n\x01\xff", 8)), "\"a\\x22b\\x5cc\\x0a\\x01\\xff\"");
  const std::string long_value(70, 'x');
  EXPECT_EQ(QuoteBytes(long_value), "\"" + std::string(64, 'x') + "…\"");
  EXPECT_EQ(QuoteBytes(std::string(64, 'y')), "\"" + std::string(64, 'y') + "\"");
}

TEST(ParseDecimalTest, NoSignNoLeadingZeroAtMostMax) {
  int64_t v = -1;
  EXPECT_TRUE(ParseDecimal("0", 10, &v));
  EXPECT_EQ(v, 0);
  EXPECT_TRUE(ParseDecimal("2147483647", 2147483647, &v));
  EXPECT_EQ(v, 2147483647);
  EXPECT_TRUE(ParseDecimal("9223372036854775807", INT64_MAX, &v));
  EXPECT_EQ(v, INT64_MAX);
  v = 7;
  for (const char* bad : {"", "-1", "+1", "01", " 1", "1 ", "1.0", "1e3", "2147483648", "0x10",
                          "99999999999999999999"}) {
    EXPECT_FALSE(ParseDecimal(bad, 2147483647, &v)) << bad;
    EXPECT_EQ(v, 7) << bad;  // untouched
  }
  EXPECT_FALSE(ParseDecimal("11", 10, &v));
  EXPECT_TRUE(ParseDecimal("10", 10, &v));
}

}  // namespace fracgpu::base
