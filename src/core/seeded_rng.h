#pragma once
// A small seeded pseudo-random generator for the simulator and the policies that need
// randomness (core/ takes no randomness from the environment: docs/design/STYLE.md, "time,
// randomness … come in through small interfaces"). The algorithm is xoshiro256** (Blackman & Vigna,
// "Scrambled linear pseudorandom number generators", 2018) seeded through SplitMix64; it is
// written out here rather than using <random> because std::uniform_int_distribution and
// std::shuffle are implementation-defined, and simulation results must not change with the
// standard library.

#include <cstdint>
#include <utility>
#include <vector>

namespace fracgpu::core {

/// Deterministic 64-bit generator. Not thread-safe; give each thread its own.
class SeededRng {
 public:
  /// Seeds the generator from `seed` and an independent `stream` number (the same seed with
  /// different streams gives unrelated sequences).
  explicit SeededRng(uint64_t seed, uint64_t stream = 0) {
    uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ULL);
    for (auto& s : s_) s = SplitMix64(x);
  }

  /// Next 64 uniformly distributed bits.
  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  /// A uniform integer in [0, n), without modulo bias (rejection sampling). n must be > 0.
  uint64_t Uniform(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
      x = Next();
    } while (x >= limit);
    return x % n;
  }

  /// Fisher–Yates shuffle of `v` in place.
  template <typename T>
  void Shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) {
      const size_t j = static_cast<size_t>(Uniform(i));
      std::swap(v[i - 1], v[j]);
    }
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t SplitMix64(uint64_t& x) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  uint64_t s_[4];
};

}  // namespace fracgpu::core
