#include "core/score.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/small_buffer.h"

namespace fracgpu::core {
namespace {

// a / b in 32-bit float as HAMi's Go code computes it; 0 when b is 0.
float Ratio(int64_t a, int64_t b) {
  return b == 0 ? 0.0f : static_cast<float>(a) / static_cast<float>(b);
}

constexpr float kWeight = 10.0f;  // HAMi util.Weight

}  // namespace

float DeviceScore(const ContainerRequest& container, const DeviceInfo& info,
                  const GpuUsage& usage) {
  const int64_t mem = container.MemOn(info.devmem_mib);
  const float slots = Ratio(int64_t{container.num_gpus} + usage.used, info.count);
  const float cores = Ratio(int64_t{container.cores_percent} + usage.used_cores, info.devcore);
  const float memory = Ratio(mem + usage.used_mem_mib, info.devmem_mib);
  return kWeight * (slots + cores + memory);
}

float WeightedDeviceScore(const ContainerRequest& container, const DeviceInfo& info,
                          const GpuUsage& usage, const ScoringWeights& weights) {
  const int64_t mem = container.MemOn(info.devmem_mib);
  const float slots = Ratio(int64_t{container.num_gpus} + usage.used, info.count);
  const float cores = Ratio(int64_t{container.cores_percent} + usage.used_cores, info.devcore);
  const float memory = Ratio(mem + usage.used_mem_mib, info.devmem_mib);
  return kWeight *
         (static_cast<float>(weights.slot) * slots + static_cast<float>(weights.core) * cores +
          static_cast<float>(weights.memory) * memory);
}

float NodeScore(const NodeState& node) {
  int64_t used = 0, used_cores = 0, used_mem = 0;
  int64_t total = 0, total_cores = 0, total_mem = 0;
  for (const GpuState& g : node.gpus) {
    used += g.used;
    used_cores += g.used_cores;
    used_mem += g.used_mem_mib;
    total += g.info.count;
    total_cores += g.info.devcore;
    total_mem += g.info.devmem_mib;
  }
  return kWeight *
         (Ratio(used, total) + Ratio(used_cores, total_cores) + Ratio(used_mem, total_mem));
}

void OrderGpus(GpuPolicy policy, bool numa_bind, const ContainerRequest& container,
               const NodeState& node, std::span<const GpuUsage> usage, std::span<uint16_t> order) {
  const size_t n = node.gpus.size();
  internal::SmallBuffer<float> score(n);
  for (size_t i = 0; i < n; ++i) {
    score[i] = DeviceScore(container, node.gpus[i].info, usage[i]);
    order[i] = static_cast<uint16_t>(i);
  }
  const bool binpack = policy == GpuPolicy::kBinpack;
  auto numa = [&](uint16_t i) { return node.gpus[i].info.numa; };
  // Every comparator ends with the position, so the order is total and deterministic.
  auto less = [&](uint16_t a, uint16_t b) {
    if (numa_bind && numa(a) != numa(b)) {
      return binpack ? numa(a) < numa(b) : numa(a) > numa(b);
    }
    if (score[a] != score[b]) return binpack ? score[a] > score[b] : score[a] < score[b];
    if (!numa_bind && numa(a) != numa(b)) return numa(a) < numa(b);
    return a < b;
  };
  std::sort(order.begin(), order.end(), less);
}

void OrderGpusFor(const PodRequest& pod, GpuPolicy policy, const ContainerRequest& container,
                  const NodeState& node, std::span<const GpuUsage> usage,
                  std::span<uint16_t> order) {
  const GpuPolicySpec* spec = pod.gpu_policy_spec ? &*pod.gpu_policy_spec : nullptr;
  const bool chain = spec != nullptr && spec->chain;
  const bool lone_mutex = spec != nullptr && !spec->chain && spec->mutex;
  const bool weighted = pod.scoring_weights != ScoringWeights{};
  if (!chain && !lone_mutex && !weighted) {
    OrderGpus(policy, pod.numa_bind, container, node, usage, order);
    return;
  }
  const size_t n = node.gpus.size();
  internal::SmallBuffer<float> score(n);
  for (size_t i = 0; i < n; ++i) {
    score[i] = WeightedDeviceScore(container, node.gpus[i].info, usage[i], pod.scoring_weights);
    order[i] = static_cast<uint16_t>(i);
  }
  auto numa = [&](uint16_t i) { return node.gpus[i].info.numa; };
  if (lone_mutex) {
    std::sort(order.begin(), order.end(), [&](uint16_t a, uint16_t b) {
      if (usage[a].used != usage[b].used) return usage[a].used < usage[b].used;
      if (numa(a) != numa(b)) return numa(a) > numa(b);
      return a < b;
    });
    return;
  }
  if (!chain) {  // weights only: OrderGpus's comparator on the weighted score
    const bool binpack = policy == GpuPolicy::kBinpack;
    std::sort(order.begin(), order.end(), [&](uint16_t a, uint16_t b) {
      if (pod.numa_bind && numa(a) != numa(b)) {
        return binpack ? numa(a) < numa(b) : numa(a) > numa(b);
      }
      if (score[a] != score[b]) return binpack ? score[a] > score[b] : score[a] < score[b];
      if (!pod.numa_bind && numa(a) != numa(b)) return numa(a) < numa(b);
      return a < b;
    });
    return;
  }
  // HAMi's lessByChain sorts ascending and the scan reads from the end, so every key and the
  // index tiebreak are reversed here.
  GpuSortKey keys[4];
  size_t nkeys = 0;
  if (pod.numa_bind) keys[nkeys++] = GpuSortKey::kNuma;
  for (GpuSortKey k : spec->sort_keys) {
    if (pod.numa_bind && k == GpuSortKey::kNuma) continue;
    if (nkeys < 4) keys[nkeys++] = k;
  }
  if (spec->sort_keys.empty()) keys[nkeys++] = GpuSortKey::kSpread;
  std::sort(order.begin(), order.end(), [&](uint16_t a, uint16_t b) {
    for (size_t k = 0; k < nkeys; ++k) {
      switch (keys[k]) {
        case GpuSortKey::kBinpack:
          if (score[a] != score[b]) return score[a] > score[b];
          break;
        case GpuSortKey::kSpread:
          if (score[a] != score[b]) return score[a] < score[b];
          break;
        case GpuSortKey::kNuma:
          if (numa(a) != numa(b)) return numa(a) > numa(b);
          break;
      }
    }
    return node.gpus[a].info.index != node.gpus[b].info.index
               ? node.gpus[a].info.index > node.gpus[b].info.index
               : a > b;
  });
}

int32_t LinkScore(const NodeState& node, uint16_t a, uint16_t b) {
  const std::string& ua = node.gpus[a].info.uuid;
  const std::string& ub = node.gpus[b].info.uuid;
  if (auto it = node.topology.find(ua); it != node.topology.end()) {
    if (auto jt = it->second.find(ub); jt != it->second.end()) return jt->second;
  }
  if (auto it = node.topology.find(ub); it != node.topology.end()) {
    if (auto jt = it->second.find(ua); jt != it->second.end()) return jt->second;
  }
  return 0;
}

namespace {

// Number of k-combinations of n, saturating at `cap`.
uint64_t Combinations(uint64_t n, uint64_t k, uint64_t cap) {
  if (k > n) return 0;
  k = std::min(k, n - k);
  uint64_t c = 1;
  for (uint64_t i = 1; i <= k; ++i) {
    c = c * (n - k + i) / i;  // exact: c·(n−k+i) is divisible by i at every step
    if (c > cap) return cap + 1;
  }
  return c;
}

constexpr uint64_t kMaxCombinations = 200000;

}  // namespace

std::vector<uint16_t> ChooseByTopology(const NodeState& node, std::span<const uint16_t> candidates,
                                       int32_t n, bool numa_bind) {
  const size_t k = candidates.size();
  if (n <= 0 || k < static_cast<size_t>(n)) return {};
  // Pairwise link scores among the candidates, looked up once.
  std::vector<int64_t> link(k * k, 0);
  for (size_t i = 0; i < k; ++i) {
    for (size_t j = i + 1; j < k; ++j) {
      link[i * k + j] = link[j * k + i] = LinkScore(node, candidates[i], candidates[j]);
    }
  }
  if (n == 1) {
    size_t best = 0;
    int64_t best_sum = INT64_MAX;
    for (size_t i = 0; i < k; ++i) {
      int64_t sum = 0;
      for (size_t j = 0; j < k; ++j) sum += link[i * k + j];
      if (sum < best_sum) {
        best_sum = sum;
        best = i;
      }
    }
    return {candidates[best]};
  }
  auto numa_of = [&](size_t i) { return node.gpus[candidates[i]].info.numa; };
  const size_t want = static_cast<size_t>(n);
  std::vector<size_t> best;
  int64_t best_sum = INT64_MIN;

  if (Combinations(k, want, kMaxCombinations) <= kMaxCombinations) {
    // Lexicographic enumeration of index combinations; strict > keeps the first on ties.
    std::vector<size_t> idx(want);
    for (size_t i = 0; i < want; ++i) idx[i] = i;
    while (true) {
      bool valid = true;
      if (numa_bind) {
        for (size_t i = 1; i < want && valid; ++i) valid = numa_of(idx[i]) == numa_of(idx[0]);
      }
      if (valid) {
        int64_t sum = 0;
        for (size_t i = 0; i < want; ++i) {
          for (size_t j = i + 1; j < want; ++j) sum += link[idx[i] * k + idx[j]];
        }
        if (sum > best_sum) {
          best_sum = sum;
          best = idx;
        }
      }
      // Advance to the next combination.
      size_t i = want;
      while (i > 0 && idx[i - 1] == k - want + i - 1) --i;
      if (i == 0) break;
      ++idx[i - 1];
      for (size_t j = i; j < want; ++j) idx[j] = idx[j - 1] + 1;
    }
  } else {
    // Greedy approximation for very wide nodes: for every seed pair (same NUMA when bound),
    // grow by the candidate adding the most link score; keep the best result.
    for (size_t a = 0; a < k; ++a) {
      for (size_t b = a + 1; b < k; ++b) {
        if (numa_bind && numa_of(a) != numa_of(b)) continue;
        std::vector<size_t> set = {a, b};
        std::vector<bool> in(k, false);
        in[a] = in[b] = true;
        int64_t sum = link[a * k + b];
        while (set.size() < want) {
          size_t pick = k;
          int64_t gain_best = INT64_MIN;
          for (size_t c = 0; c < k; ++c) {
            if (in[c] || (numa_bind && numa_of(c) != numa_of(a))) continue;
            int64_t gain = 0;
            for (size_t s : set) gain += link[c * k + s];
            if (gain > gain_best) {
              gain_best = gain;
              pick = c;
            }
          }
          if (pick == k) break;
          set.push_back(pick);
          in[pick] = true;
          sum += gain_best;
        }
        if (set.size() == want && sum > best_sum) {
          std::sort(set.begin(), set.end());
          best_sum = sum;
          best = set;
        }
      }
    }
  }
  std::vector<uint16_t> chosen;
  chosen.reserve(best.size());
  for (size_t i : best) chosen.push_back(candidates[i]);
  return chosen;
}

size_t ChooseNode(NodePolicy policy, std::span<const float> scores) {
  size_t best = 0;
  for (size_t i = 1; i < scores.size(); ++i) {
    const bool better =
        policy == NodePolicy::kBinpack ? scores[i] > scores[best] : scores[i] < scores[best];
    if (better) best = i;
  }
  return best;
}

std::vector<int64_t> PriorityScores(NodePolicy policy, std::span<const float> scores) {
  std::vector<int64_t> out(scores.size(), 10);
  if (scores.empty()) return out;
  const auto [lo_it, hi_it] = std::minmax_element(scores.begin(), scores.end());
  const double lo = *lo_it, hi = *hi_it;
  if (hi == lo) return out;
  for (size_t i = 0; i < scores.size(); ++i) {
    const double frac = policy == NodePolicy::kBinpack ? (scores[i] - lo) / (hi - lo)
                                                       : (hi - scores[i]) / (hi - lo);
    out[i] = std::llround(10.0 * frac);
  }
  return out;
}

}  // namespace fracgpu::core
