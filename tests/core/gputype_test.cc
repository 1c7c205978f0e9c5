#include "core/gputype.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/request.h"

namespace fracgpu::core {
namespace {

struct MatchCase {
  std::string entry;
  std::string type;
  bool match;
};

// docs/design/CONTRACT.md §1 "(fixed)": tokens on space, '-', '_', case-insensitive, in order.
TEST(GpuTypeTest, TokenRuleTable) {
  const std::vector<MatchCase> cases = {
      {"A100", "NVIDIA A100-SXM4-80GB", true},
      {"A10", "NVIDIA A100-SXM4-80GB", false},  // HAMi's substring rule said true
      {"A10", "NVIDIA A10", true},
      {"H20", "NVIDIA H200", false},
      {"H20", "NVIDIA H20", true},
      {"H200", "NVIDIA GH200 480GB", false},
      {"GH200", "NVIDIA GH200 480GB", true},
      {"A100-80GB", "NVIDIA A100-SXM4-80GB", true},  // tokens in order, not adjacent
      {"A100-40GB", "NVIDIA A100-SXM4-80GB", false},
      {"80GB-A100", "NVIDIA A100-SXM4-80GB", false},  // wrong order
      {"a100", "NVIDIA A100-PCIE-40GB", true},        // case-insensitive
      {"A100", "nvidia a100-pcie-40gb", true},
      {"Tesla V100", "NVIDIA-Tesla V100-PCIE-32GB", true},
      {"NVIDIA", "NVIDIA-Tesla V100-PCIE-32GB", true},
      {"V100_PCIE", "NVIDIA-Tesla V100-PCIE-32GB", true},  // '_' separates too
      {"V100", "NVIDIA_Tesla_V100", true},
      {"RTX-4090", "NVIDIA GeForce RTX 4090", true},
      {"40", "NVIDIA GeForce RTX 4090", false},
      {"A100 A100", "NVIDIA A100", false},  // a repeated token needs two occurrences
      {"", "NVIDIA A100", false},           // no tokens: matches nothing
      {" - ", "NVIDIA A100", false},
      {"A100", "", false},
  };
  for (const MatchCase& c : cases) {
    SCOPED_TRACE("entry \"" + c.entry + "\" type \"" + c.type + "\"");
    EXPECT_EQ(GpuTypeEntryMatches(c.entry, c.type), c.match);
    EXPECT_EQ(GpuTypeMatchesAny({"unrelated", c.entry}, c.type), c.match);
  }
}

TEST(GpuTypeTest, Tokens) {
  EXPECT_EQ(GpuTypeTokens("NVIDIA A100-SXM4-80GB"),
            (std::vector<std::string>{"NVIDIA", "A100", "SXM4", "80GB"}));
  EXPECT_EQ(GpuTypeTokens("  nvidia--tesla__v100\t"),
            (std::vector<std::string>{"NVIDIA", "TESLA", "V100"}));
  EXPECT_TRUE(GpuTypeTokens("-_ ").empty());
}

TEST(GpuTypeTest, SplitCommaListTable) {
  struct Case {
    std::string in;
    std::vector<std::string> out;
  };
  const std::vector<Case> cases = {
      {"", {}},
      {",", {}},
      {" , ,\t", {}},
      {"A100", {"A100"}},
      {" A100, ,H100 ", {"A100", "H100"}},
      {"A100,H100,", {"A100", "H100"}},
      {"\tTesla V100 ,A10", {"Tesla V100", "A10"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.in);
    EXPECT_EQ(SplitCommaList(c.in), c.out);
  }
}

PodRequest WithTypes(std::vector<std::string> use, std::vector<std::string> nouse) {
  PodRequest r;
  r.use_types = std::move(use);
  r.nouse_types = std::move(nouse);
  return r;
}

TEST(GpuTypeTest, AllowedUseAndNouse) {
  const std::string a100_80 = "NVIDIA A100-SXM4-80GB";
  const std::string a100_40 = "NVIDIA A100-PCIE-40GB";
  const std::string v100 = "NVIDIA-Tesla V100-PCIE-32GB";
  const std::string a10 = "NVIDIA A10";

  PodRequest any = WithTypes({}, {});
  EXPECT_TRUE(GpuTypeAllowed(any, v100));

  PodRequest use = WithTypes({"A100", "H100"}, {});
  EXPECT_TRUE(GpuTypeAllowed(use, a100_80));
  EXPECT_FALSE(GpuTypeAllowed(use, v100));
  EXPECT_FALSE(GpuTypeAllowed(use, a10));

  PodRequest nouse_wins = WithTypes({"A100"}, {"80GB"});
  EXPECT_FALSE(GpuTypeAllowed(nouse_wins, a100_80));
  EXPECT_TRUE(GpuTypeAllowed(nouse_wins, a100_40));

  PodRequest only_nouse = WithTypes({}, {"V100"});
  EXPECT_FALSE(GpuTypeAllowed(only_nouse, v100));
  EXPECT_TRUE(GpuTypeAllowed(only_nouse, a10));

  // Entries without tokens are ignored: a use list of only such entries is no constraint.
  PodRequest empty_entries = WithTypes({"-", " "}, {"_"});
  EXPECT_TRUE(GpuTypeAllowed(empty_entries, v100));
}

TEST(GpuUuidTest, AllowedUseAndNouse) {
  const std::string u1 = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448";
  const std::string u2 = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec";
  PodRequest r;
  EXPECT_TRUE(GpuUuidAllowed(r, u1));
  r.use_uuids = {u1};
  EXPECT_TRUE(GpuUuidAllowed(r, u1));
  EXPECT_FALSE(GpuUuidAllowed(r, u2));
  EXPECT_TRUE(GpuUuidAllowed(r, "GPU-0FC3EDA5-E98B-A25B-5B0D-CF5C855D1448"));  // hex case
  EXPECT_FALSE(GpuUuidAllowed(r, u1 + "0"));
  r.nouse_uuids = {u1};  // nouse wins over use
  EXPECT_FALSE(GpuUuidAllowed(r, u1));
  r.use_uuids.clear();
  EXPECT_TRUE(GpuUuidAllowed(r, u2));
  EXPECT_FALSE(GpuUuidAllowed(r, u1));
}

}  // namespace
}  // namespace fracgpu::core
