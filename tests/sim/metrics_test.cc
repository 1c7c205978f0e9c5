// Bucketing of samples by arrived workload (src/sim/metrics.h), computed by hand.
#include "sim/metrics.h"

#include <gtest/gtest.h>

#include <cmath>

namespace fracgpu::sim {
namespace {

TEST(RoundHalfEven, MatchesPythonRound) {
  EXPECT_EQ(RoundHalfEven(0.5, 0), 0);
  EXPECT_EQ(RoundHalfEven(1.5, 0), 2);
  EXPECT_EQ(RoundHalfEven(2.5, 0), 2);
  EXPECT_DOUBLE_EQ(RoundHalfEven(12.344, 2), 12.34);
  EXPECT_DOUBLE_EQ(RoundHalfEven(12.346, 2), 12.35);
}

// Capacity 1000 milli (one GPU), so arrived 15 milli = 1.5 %.
TEST(Bucketize, HandComputed) {
  const std::vector<Sample> samples = {
      {4, 4, 100},    // 0.4 % → bucket 0; alloc 0.4; frag 10 %; rate 100/996
      {15, 10, 200},  // 1.5 % → bucket 2 (half to even); alloc 1.0; frag 20 %; rate 200/990
      {25, 20, 300},  // 2.5 % → bucket 2 (half to even); alloc 2.0; frag 30 %; rate 300/980
      {36, 30, 0},    // 3.6 % → bucket 4; alloc 3.0; frag 0; rate 0
  };
  const BucketedRun r = Bucketize(samples, 1000, 5);
  ASSERT_EQ(r.alloc_pct.size(), 6u);
  EXPECT_DOUBLE_EQ(r.alloc_pct[0], 0.4);
  EXPECT_DOUBLE_EQ(r.frag_pct[0], 10.0);
  EXPECT_DOUBLE_EQ(r.frag_rate[0], 100.0 / 996 * 100);
  // Bucket 1 is empty: the samples of buckets 0 and 2 → (0.4 + 1.0 + 2.0) / 3 = 1.1333 → 1.13.
  EXPECT_DOUBLE_EQ(r.alloc_pct[1], 1.13);
  EXPECT_DOUBLE_EQ(r.alloc_pct[2], 1.5);  // (1.0 + 2.0) / 2
  EXPECT_DOUBLE_EQ(r.frag_pct[2], 25.0);
  EXPECT_DOUBLE_EQ(r.frag_rate[2], (200.0 / 990 * 100 + 300.0 / 980 * 100) / 2);
  // Bucket 3 empty: buckets 2 and 4 → (1.0 + 2.0 + 3.0) / 3 = 2.0.
  EXPECT_DOUBLE_EQ(r.alloc_pct[3], 2.0);
  EXPECT_DOUBLE_EQ(r.alloc_pct[4], 3.0);
  // Bucket 5 empty: only bucket 4 beside it → 3.0.
  EXPECT_DOUBLE_EQ(r.alloc_pct[5], 3.0);
}

TEST(Bucketize, NoDataIsNaN) {
  const BucketedRun r = Bucketize({{4, 4, 0}}, 1000, 3);
  EXPECT_DOUBLE_EQ(r.alloc_pct[1], 0.4);  // neighbour of bucket 0
  EXPECT_TRUE(std::isnan(r.alloc_pct[2]));
  EXPECT_TRUE(std::isnan(r.alloc_pct[3]));
}

TEST(Bucketize, FullClusterHasNoRate) {
  // used == capacity: no idle GPU, so the rate has no sample.
  const BucketedRun r = Bucketize({{1000, 1000, 0}}, 1000, 100);
  EXPECT_DOUBLE_EQ(r.alloc_pct[100], 100.0);
  EXPECT_TRUE(std::isnan(r.frag_rate[100]));
}

}  // namespace
}  // namespace fracgpu::sim
