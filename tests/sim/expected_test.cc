// The authors' published result tables (src/sim/expected.h).
#include "sim/expected.h"

#include <gtest/gtest.h>

namespace fracgpu::sim {
namespace {

constexpr char kTable[] =
    "workload,sc_policy,tune,seed,total_gpus,0,100,130\n"
    "openb_pod_list_default,06-FGD,1.3,42,6212,0.25,95.0,95.5\n"
    "openb_pod_list_default,06-FGD,1.3,43,6212,0.25,95.2,95.3\n"
    "openb_pod_list_default,02-DotProd,1.3,42,6212,0.25,90.0,\n"
    "openb_pod_list_cpu050,06-FGD,1.3,42,6212,0.25,1,2\n";

TEST(ParsePaperCsv, MeansByWorkloadPolicyAndColumn) {
  auto t = ParsePaperCsv(kTable, "allo.csv");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->rows.size(), 4u);
  EXPECT_DOUBLE_EQ(*PaperMean(*t, "openb_pod_list_default", core::PlacementPolicy::kFgd, "130"),
                   95.4);
  EXPECT_DOUBLE_EQ(*PaperMean(*t, "openb_pod_list_default", core::PlacementPolicy::kFgd, "100"),
                   95.1);
  EXPECT_DOUBLE_EQ(
      *PaperMean(*t, "openb_pod_list_default", core::PlacementPolicy::kDotProduct, "100"), 90.0);
  // An empty cell is no data; an unknown workload or policy is no data.
  EXPECT_FALSE(PaperMean(*t, "openb_pod_list_default", core::PlacementPolicy::kDotProduct, "130"));
  EXPECT_FALSE(PaperMean(*t, "openb_pod_list_gpushare40", core::PlacementPolicy::kFgd, "130"));
  EXPECT_FALSE(PaperMean(*t, "openb_pod_list_default", core::PlacementPolicy::kBestFit, "130"));
  EXPECT_EQ(PaperPolicy("02-DotProd"), core::PlacementPolicy::kDotProduct);
  EXPECT_EQ(PaperPolicy("03-GpuClustering"), core::PlacementPolicy::kGpuClustering);
  EXPECT_FALSE(PaperPolicy("07-Tetris"));
}

TEST(ParsePaperCsv, BadCases) {
  struct Case {
    const char* text;
    const char* want;
  } cases[] = {
      {"", "x.csv:1: header: empty file"},
      {"a,b\n", "x.csv:1: header: needs columns workload, sc_policy and seed"},
      {"workload,sc_policy,seed,130\nw,p,1\n", "x.csv:2: row: expected 4 columns, got 3"},
      {"workload,sc_policy,seed,130\nw,p,1,9x\n", "x.csv:2: 130: not a number: \"9x\""},
  };
  for (const auto& c : cases) {
    auto t = ParsePaperCsv(c.text, "x.csv");
    ASSERT_FALSE(t.ok()) << c.want;
    EXPECT_EQ(t.status().message(), c.want);
  }
}

}  // namespace
}  // namespace fracgpu::sim
