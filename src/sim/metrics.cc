#include "sim/metrics.h"

#include <cmath>
#include <limits>

namespace fracgpu::sim {

double RoundHalfEven(double x, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::nearbyint(x * scale) / scale;  // default rounding mode: to nearest, ties to even
}

BucketedRun Bucketize(const std::vector<Sample>& samples, int64_t capacity_milli, int max_bucket) {
  const size_t n = static_cast<size_t>(max_bucket) + 1;
  std::vector<double> alloc_sum(n, 0), frag_sum(n, 0), rate_sum(n, 0);
  std::vector<int64_t> count(n, 0), rate_count(n, 0);
  const double cap = static_cast<double>(capacity_milli);
  for (const Sample& s : samples) {
    const double b = std::nearbyint(static_cast<double>(s.arrived_milli) / cap * 100.0);
    if (b < 0 || b > max_bucket) continue;
    const auto i = static_cast<size_t>(b);
    alloc_sum[i] += RoundHalfEven(static_cast<double>(s.used_milli) / cap * 100.0, 2);
    frag_sum[i] += RoundHalfEven(s.frag_milli / cap * 100.0, 2);
    ++count[i];
    const double idle = cap - static_cast<double>(s.used_milli);
    if (idle > 0) {
      rate_sum[i] += s.frag_milli / idle * 100.0;
      ++rate_count[i];
    }
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  BucketedRun out;
  out.alloc_pct.assign(n, nan);
  out.frag_pct.assign(n, nan);
  out.frag_rate.assign(n, nan);
  for (size_t i = 0; i < n; ++i) {
    double a = alloc_sum[i], f = frag_sum[i], r = rate_sum[i];
    int64_t c = count[i], rc = rate_count[i];
    if (c == 0) {  // fall back to the neighbouring buckets
      for (size_t j : {i - 1, i + 1}) {
        if (j >= n) continue;  // i - 1 wraps around for i == 0
        a += alloc_sum[j];
        f += frag_sum[j];
        r += rate_sum[j];
        c += count[j];
        rc += rate_count[j];
      }
    }
    if (c > 0) {
      out.alloc_pct[i] = RoundHalfEven(a / static_cast<double>(c), 2);
      out.frag_pct[i] = RoundHalfEven(f / static_cast<double>(c), 2);
    }
    if (rc > 0) out.frag_rate[i] = r / static_cast<double>(rc);
  }
  return out;
}

}  // namespace fracgpu::sim
