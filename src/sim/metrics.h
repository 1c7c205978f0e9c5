#pragma once
// Samples of one run and their bucketing by arrived workload, as the authors' analysis does it
// (docs/design/fgd-evaluation.md §3 point 10).

#include <cstdint>
#include <vector>

namespace fracgpu::sim {

/// The cluster after one pod (placed or failed).
struct Sample {
  int64_t arrived_milli = 0;  ///< Σ GPU request of the pods so far, failed ones included
  int64_t used_milli = 0;     ///< Σ GPU request of the pods placed so far
  double frag_milli = 0;      ///< cluster fragmentation F(M) = Σ_n F_n(M), milli-GPU
};

/// Per-bucket means of one run; bucket b covers arrived ≈ b % of capacity. NaN = no data.
struct BucketedRun {
  std::vector<double> alloc_pct;  ///< GPU allocation ratio, % of capacity (2 decimals)
  std::vector<double> frag_pct;   ///< fragment amount, % of capacity (2 decimals)
  std::vector<double> frag_rate;  ///< fragment / unallocated GPU × 100
};

/// Rounds half to even, as Python's round() does on the authors' side.
double RoundHalfEven(double x, int decimals);

/// Buckets samples: bucket = round(arrived / capacity × 100); allocation value = mean of the
/// per-sample round(used / capacity × 100, 2), rounded to 2 decimals; fragment amount the same
/// way; rate = mean of per-sample frag / (capacity − used) × 100 (samples with no idle GPU
/// skipped). An empty bucket takes the samples of buckets b−1 and b+1. Buckets 0..max_bucket.
/// capacity_milli must be > 0.
BucketedRun Bucketize(const std::vector<Sample>& samples, int64_t capacity_milli, int max_bucket);

}  // namespace fracgpu::sim
