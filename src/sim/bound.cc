#include "sim/bound.h"

#include <glpk.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/fgd_policies.h"

namespace fracgpu::sim {
namespace {

constexpr int32_t kHalfCard = core::kMilliPerGpu / 2;

// A pod's shape: what the LP's classes and ForcedPods group pods by.
struct PodClass {
  int64_t cpu = 0, mem = 0;
  int32_t num_gpus = 0, gpu_milli = 0;
  uint64_t mask = 0;
  auto operator<=>(const PodClass&) const = default;
};

PodClass PodClassOf(const core::FragDemand& d) {
  return {d.cpu_milli, d.mem_mib, d.num_gpus, d.gpu_milli, d.type_mask};
}

struct NodeClass {
  int64_t cpu = 0, mem = 0;
  int32_t num_gpus = 0;
  std::array<uint8_t, core::kMaxFragGpus> types{};
  auto operator<=>(const NodeClass&) const = default;
};

// GPUs of node class t whose type the mask allows.
int32_t AllowedGpus(const NodeClass& t, uint64_t mask) {
  int32_t n = 0;
  for (int g = 0; g < t.num_gpus; ++g) n += (mask >> t.types[g]) & 1;
  return n;
}

// Bit g set = GPU g of the node class is allowed by the mask.
uint32_t AllowedSet(const NodeClass& t, uint64_t mask) {
  uint32_t s = 0;
  for (int g = 0; g < t.num_gpus; ++g) s |= static_cast<uint32_t>((mask >> t.types[g]) & 1) << g;
  return s;
}

// A dual feasible function (Fekete & Schepers, "New classes of fast lower bounds for bin
// packing problems", Math. Programming 91, 2001): f maps item sizes x ∈ [0, 1] to [0, 1] so
// that Σ x_i ≤ 1 implies Σ f(x_i) ≤ 1. Applied to the items of one bin (one node's CPU, one
// node's memory), every integral packing satisfies Σ f ≤ bins: what the LP otherwise misses
// about a node's granularity (two pods asking 60 % of its CPU never share it). The cards have
// the stronger card patterns (CardBlock). Sizes are exact fractions a / c (integers), so no
// rounding decides a row.
struct Dff {
  enum Kind { kThreshold, kStep } kind;
  // kThreshold (Martello & Toth's ε-function, ε = e / d ≤ 1/2): 1 above 1 − ε, 0 below ε,
  // the size itself between. kStep (Fekete & Schepers' u^(k)): x when (k + 1)·x is an integer,
  // else ⌊(k + 1)·x⌋ / k.
  int64_t e = 0, d = 1;
  int64_t k = 1;

  double operator()(int64_t a, int64_t c) const {
    if (a <= 0 || c <= 0) return 0;
    if (a >= c) return 1;
    if (kind == kThreshold) {
      if (a * d > (d - e) * c) return 1;
      if (a * d < e * c) return 0;
      return static_cast<double>(a) / static_cast<double>(c);
    }
    const int64_t m = (k + 1) * a;
    if (m % c == 0) return static_cast<double>(a) / static_cast<double>(c);
    return static_cast<double>(m / c) / static_cast<double>(k);
  }
};

// The functions used for one resource: u^(k) for k = 1..6 and the ε-functions for ε = 1/10 ..
// 1/2 in tenths.
std::vector<Dff> DffFamily() {
  std::vector<Dff> out;
  for (int64_t k = 1; k <= 6; ++k) out.push_back({Dff::kStep, 0, 1, k});
  for (int64_t e = 1; e <= 5; ++e) out.push_back({Dff::kThreshold, e, 10, 1});
  return out;
}

// The cards of one node class that an allowed-GPU set S names, as a block of the card-pattern
// LP (the configuration LP of bin packing: Gilmore & Gomory, "A linear programming approach to
// the cutting-stock problem", Oper. Res. 9, 1961; here one card is the bin): a
// column z_p ≥ 0 per card pattern p, a multiset of per-GPU shares (milli-GPU) summing to
// ≤ 1000, with Σ_p z_p ≤ the cards, and per share s: the pieces of that share placed there (a
// k-GPU pod is k pieces) ≤ Σ_p a_s,p · z_p. Every integral packing satisfies it: each card's
// pieces form a pattern, z_p counting the cards holding p. It is the strongest statement about
// the cards alone; every dual feasible function's row over the same pieces follows from it.
struct CardBlock {
  double cards = 0;             // N_t × |S|
  int card_row = 0;             // Σ_p z_p ≤ cards
  std::vector<int32_t> shares;  // the shares of the pods that may use only S, ascending
  // per share: the most pieces a card can hold, min(⌊1000 / share⌋, the pods of that share):
  // the pieces on one card are of distinct pods (a k-GPU pod's are on k cards)
  std::vector<int> limit;
  std::vector<int> share_rows;  // per share: Σ pieces · y − Σ_p a_s,p · z_p − w_s ≤ 0
};

// The card pattern of greatest value, `value[i]` per piece of share `shares[i]` (milli-GPU)
// and at most `limit[i]` pieces of it, and that value: a bounded knapsack of capacity 1000
// milli-GPU, exact by dynamic programming (O(1000 × Σ limit)). Returns (value, count per share).
std::pair<double, std::vector<int>> BestCardPattern(const std::vector<int32_t>& shares,
                                                    const std::vector<int>& limit,
                                                    const std::vector<double>& value) {
  constexpr int kCap = core::kMilliPerGpu;
  std::vector<double> best(kCap + 1, 0), next(kCap + 1);
  // take[i][c]: the pieces of share i in the best pattern of capacity c over shares 0..i.
  std::vector<std::vector<int>> take(shares.size(), std::vector<int>(kCap + 1, 0));
  for (size_t i = 0; i < shares.size(); ++i) {
    for (int c = 0; c <= kCap; ++c) {
      next[c] = best[c];
      if (value[i] <= 0) continue;
      for (int k = 1; k <= limit[i] && k * shares[i] <= c; ++k) {
        const double v = best[c - k * shares[i]] + k * value[i];
        if (v > next[c] + 1e-12) {
          next[c] = v;
          take[i][c] = k;
        }
      }
    }
    best.swap(next);
  }
  std::vector<int> count(shares.size(), 0);
  int c = kCap;
  for (size_t i = shares.size(); i-- > 0;) {
    count[i] = take[i][c];
    c -= count[i] * shares[i];
  }
  return {best[kCap], count};
}

// Order rows: what the order of arrival forces on a placing policy (one that puts each arriving
// pod on some node where it fits, whenever one exists; pods never leave).
//
// Why they hold. Say pod class p is dominated by class q (p ≼ q) when p fits wherever q fits,
// in any node state: cpu_p ≤ cpu_q, mem_p ≤ mem_q, num_gpus_p ≤ num_gpus_q, share_p ≤ share_q,
// and every GPU type q may use (of those the cluster has) p may use (core::Fits). If a placing
// run places a q pod arriving at index j, it placed every p pod arriving at i < j: pods never
// leave, so at i the node that takes q at j had at least the room it has at j, which fits q
// and so p, and a placing policy places a pod that fits somewhere. For a pivot class θ, take B
// = classes ≽ θ and A ⊆ classes ≼ θ (so a ≼ b for every a in A and b in B). A run that places
// x_B pods of B placed its last one at or after the x_B-th B arrival, so it placed x_A ≥ f(x_B)
// pods of A, f(y) = the A arrivals up to and including the y-th B arrival (f(0) = 0; that
// arrival, when also in A, is either the last B placed or arrived before it). Every line a·y + b
// below the points (y, f(y)), y = 0..|B|, gives the row x_A − a·x_B ≥ b that every placing
// run satisfies: the edges of their lower convex hull are the strongest.
//
// Pivots: every pod class; for each, A is every class ≼ θ, those of each GPU shape (GPUs,
// share) among them, and θ's class alone. A lower bound on a union is weak when the LP can
// fill it with pods a placing run refuses (late small shares for the dominated 0.81-GPU pods):
// the smaller sets name the pods it must hold.
struct OrderFamily {
  std::vector<uint8_t> in_a, in_b;              // per pod class of the LP
  std::vector<std::pair<double, double>> hull;  // lower convex hull of (y, f(y)), y ascending

  struct Line {
    double slope = 0, intercept = 0;
  };
  // The hull's edge over y (the first or last edge outside the hull's range); hull.size() ≥ 2.
  Line LineAt(double y) const {
    size_t e = 1;
    while (e + 1 < hull.size() && hull[e].first < y) ++e;
    const auto& [y0, f0] = hull[e - 1];
    const auto& [y1, f1] = hull[e];
    const double slope = (f1 - f0) / (y1 - y0);
    return {slope, f0 - slope * y0};
  }
};

// p ≼ q as above; `present` = the GPU types the cluster has.
bool Dominated(const PodClass& p, const PodClass& q, uint64_t present) {
  return p.cpu <= q.cpu && p.mem <= q.mem && p.num_gpus <= q.num_gpus &&
         p.gpu_milli <= q.gpu_milli && (q.mask & present & ~p.mask) == 0;
}

// The order rows' families for GPU arrivals `pods` (in order) over the LP's classes `pc`
// (`index`: each class's position in pc).
std::vector<OrderFamily> OrderFamilies(const SimCluster& cluster,
                                       std::span<const core::FragDemand> pods,
                                       const std::vector<std::pair<PodClass, int64_t>>& pc,
                                       const std::map<PodClass, size_t>& index) {
  uint64_t present = 0;
  for (const auto& node : cluster.frag) {
    for (int g = 0; g < node.num_gpus; ++g) present |= 1ULL << node.gpu_type[g];
  }
  std::vector<size_t> seq;  // the class of each GPU arrival
  seq.reserve(pods.size());
  for (const auto& d : pods) {
    if (d.num_gpus > 0 && d.gpu_milli > 0) seq.push_back(index.at(PodClassOf(d)));
  }
  std::vector<OrderFamily> out;
  for (size_t q = 0; q < pc.size(); ++q) {
    const PodClass& theta = pc[q].first;
    std::vector<uint8_t> below(pc.size()), above(pc.size());
    for (size_t c = 0; c < pc.size(); ++c) {
      below[c] = Dominated(pc[c].first, theta, present);
      above[c] = Dominated(theta, pc[c].first, present);
    }
    // The A sets: every class below θ, those of each GPU shape below θ, θ alone; each once.
    std::vector<std::vector<uint8_t>> a_sets{below};
    std::vector<std::pair<int32_t, int32_t>> shapes;
    for (size_t c = 0; c < pc.size(); ++c) {
      if (below[c]) shapes.emplace_back(pc[c].first.num_gpus, pc[c].first.gpu_milli);
    }
    std::sort(shapes.begin(), shapes.end());
    shapes.erase(std::unique(shapes.begin(), shapes.end()), shapes.end());
    for (const auto& [gpus, milli] : shapes) {
      std::vector<uint8_t> a = below;
      for (size_t c = 0; c < pc.size(); ++c) {
        a[c] = a[c] && pc[c].first.num_gpus == gpus && pc[c].first.gpu_milli == milli;
      }
      a_sets.push_back(std::move(a));
    }
    a_sets.emplace_back(pc.size(), 0);
    a_sets.back()[q] = 1;
    std::sort(a_sets.begin(), a_sets.end());
    a_sets.erase(std::unique(a_sets.begin(), a_sets.end()), a_sets.end());
    // f's points and their lower convex hull (Andrew's monotone chain, y ascending), for every
    // A set of θ in one pass. Only the last point of each run of B arrivals without an A one
    // between can be a vertex (f is flat there and lower before it), so a family's point is
    // pushed when its next A arrival comes, or at the end.
    const size_t first = out.size();
    std::vector<std::vector<int>> families_of(pc.size());  // the A sets holding each class
    for (size_t k = 0; k < a_sets.size(); ++k) {
      OrderFamily f;
      f.in_b = above;
      f.in_a = std::move(a_sets[k]);
      f.hull.emplace_back(0, 0);
      for (size_t c = 0; c < pc.size(); ++c) {
        if (f.in_a[c]) families_of[c].push_back(static_cast<int>(first + k));
      }
      out.push_back(std::move(f));
    }
    std::vector<double> a_count(out.size() - first, 0), flushed(out.size() - first, 0);
    double y = 0;
    auto flush = [&](size_t k) {
      if (y <= flushed[k - first]) return;
      flushed[k - first] = y;
      auto& hull = out[k].hull;
      const double py = y, pf = a_count[k - first];
      while (hull.size() >= 2) {
        const auto& [y0, f0] = hull[hull.size() - 2];
        const auto& [y1, f1] = hull.back();
        if ((y1 - y0) * (pf - f0) - (f1 - f0) * (py - y0) > 0) break;
        hull.pop_back();
      }
      hull.emplace_back(py, pf);
    };
    for (size_t c : seq) {
      for (int k : families_of[c]) {
        flush(k);
        ++a_count[k - first];
      }
      if (above[c]) ++y;
    }
    for (size_t k = first; k < out.size(); ++k) flush(k);
  }
  std::erase_if(out, [](const OrderFamily& f) { return f.hull.size() < 2; });  // no B arrival
  return out;
}

// An order row kept from one cut of an arrival sequence for the shorter cuts: valid there too,
// since f of a shorter prefix is the same f on its part of the domain (x_B ≤ its B arrivals).
// A class absent from the shorter prefix has no arrival there, so it is 0 in every run and
// leaves the row; a ≼ b still holds through θ when θ itself is absent.
struct CarriedRow {
  std::vector<PodClass> a, b;
  double slope = 0, intercept = 0;
};

// PackingUpperBound, with `carried` (may be null): order rows to add before the cutting
// planes (given for a longer prefix of the same arrivals), replaced on return by the rows
// active at this optimum.
Result<PackingBound> SolveBound(const SimCluster& cluster, std::span<const core::FragDemand> pods,
                                const PlacingFacts& placing, std::vector<CarriedRow>* carried) {
  const std::span<const uint8_t> forced = placing.forced;
  if (!forced.empty() && forced.size() != pods.size()) {
    return InvalidArgument("packing bound: " + std::to_string(forced.size()) +
                           " forced flags for " + std::to_string(pods.size()) + " pods");
  }
  std::map<PodClass, int64_t> pod_count, forced_count;
  for (size_t i = 0; i < pods.size(); ++i) {
    const auto& d = pods[i];
    if (d.num_gpus <= 0 || d.gpu_milli <= 0) continue;
    const PodClass c = PodClassOf(d);
    ++pod_count[c];
    if (!forced.empty() && forced[i]) ++forced_count[c];
  }
  std::map<NodeClass, int64_t> node_count;
  for (const auto& n : cluster.frag) {
    NodeClass t{n.cpu_left, n.mem_left, n.num_gpus, {}};
    for (int g = 0; g < n.num_gpus; ++g) t.types[g] = n.gpu_type[g];
    ++node_count[t];
  }
  PackingBound out;
  out.pod_classes = static_cast<int32_t>(pod_count.size());
  out.node_classes = static_cast<int32_t>(node_count.size());
  if (pod_count.empty()) return out;

  std::vector<std::pair<PodClass, int64_t>> pc(pod_count.begin(), pod_count.end());
  std::vector<std::pair<NodeClass, int64_t>> nc(node_count.begin(), node_count.end());

  // Columns: y[c][t] (cols), then X_c = pods of class c placed, one per class, then the card
  // patterns' z and penalty columns (added to the LP after it is loaded). Rows: 1..P =
  // Σ_t y[c][t] − X_c = 0, then per node class: cpu, mem, big shares, "one per node", one GPU
  // row per distinct allowed-GPU set that some class has on it, the CPU and memory granularity
  // rows, and per such set a CardBlock's rows; then the order rows.
  std::vector<double> row_ub;      // rows after the first P: Σ ≤ row_ub
  std::vector<double> x_ub, x_lb;  // X_c: the pods of class c, and the forced ones among them
  std::vector<int> ia{0}, ja{0};
  std::vector<double> ar{0};
  for (const auto& [c, n] : pc) {
    row_ub.push_back(0);
    x_ub.push_back(static_cast<double>(n));
    const auto f = forced_count.find(c);
    x_lb.push_back(f == forced_count.end() ? 0.0 : static_cast<double>(f->second));
  }
  struct Column {
    int pod, node;
  };
  std::vector<Column> cols;
  std::vector<double> obj;
  auto add = [&](int row, int col, double v) {
    ia.push_back(row);
    ja.push_back(col);
    ar.push_back(v);
  };
  std::vector<CardBlock> blocks;
  for (size_t t = 0; t < nc.size(); ++t) {
    const auto& [node, count] = nc[t];
    const double N = static_cast<double>(count);
    const int cpu_row = static_cast<int>(row_ub.size()) + 1;
    row_ub.push_back(N * static_cast<double>(node.cpu));
    const int mem_row = cpu_row + 1;
    row_ub.push_back(N * static_cast<double>(node.mem));
    const int big_row = cpu_row + 2;
    row_ub.push_back(N * node.num_gpus);
    const int one_row = cpu_row + 3;
    row_ub.push_back(N);
    std::vector<std::pair<int, uint32_t>> node_cols;  // (column, allowed-GPU set)
    std::vector<int> node_pods;                       // pod class of each of node_cols
    for (size_t c = 0; c < pc.size(); ++c) {
      const PodClass& p = pc[c].first;
      if (p.cpu > node.cpu || p.mem > node.mem || AllowedGpus(node, p.mask) < p.num_gpus) continue;
      const int col = static_cast<int>(cols.size()) + 1;
      cols.push_back({static_cast<int>(c), static_cast<int>(t)});
      const double gpu = static_cast<double>(p.num_gpus) * p.gpu_milli;
      obj.push_back(gpu);
      add(static_cast<int>(c) + 1, col, 1);
      if (p.cpu > 0) add(cpu_row, col, static_cast<double>(p.cpu));
      if (p.mem > 0) add(mem_row, col, static_cast<double>(p.mem));
      if (p.gpu_milli > kHalfCard) add(big_row, col, p.num_gpus);
      // Two pods on more than half the GPUs share a card, which only shares ≤ 500 can do. (Two
      // pods that are each over half of a *different* resource may share a node: the halves of
      // CPU and memory are the u^(1) granularity rows below, one row per resource.)
      if (2 * p.num_gpus > node.num_gpus && p.gpu_milli > kHalfCard) add(one_row, col, 1);
      node_cols.emplace_back(col, AllowedSet(node, p.mask));
      node_pods.push_back(static_cast<int>(c));
    }
    // GPU milli per allowed set S: the classes that may use only GPUs of S share S's cards
    // (Hall-type rows; S = all GPUs gives the node class's total).
    std::vector<uint32_t> sets{(node.num_gpus >= 32 ? ~0u : (1u << node.num_gpus) - 1)};
    for (const auto& [col, set] : node_cols) {
      if (std::find(sets.begin(), sets.end(), set) == sets.end()) sets.push_back(set);
    }
    for (uint32_t set : sets) {
      const int row = static_cast<int>(row_ub.size()) + 1;
      row_ub.push_back(N * std::popcount(set) * core::kMilliPerGpu);
      for (const auto& [col, s] : node_cols) {
        if ((s & ~set) == 0) add(row, col, obj[col - 1]);
      }
    }
    // Granularity: per node, Σ f(CPU / node CPU) ≤ 1 and the same for memory (dual feasible
    // functions, each node a bin); per card, the card-pattern blocks below (each card a bin).
    auto dff_rows = [&](const std::vector<Dff>& family, double bins, auto size_of, auto use) {
      for (const Dff& f : family) {
        std::vector<std::pair<int, double>> coef;
        bool any_partial = false;  // a row of only 0/1 (or only x) may still bind; keep it
        for (size_t k = 0; k < node_cols.size(); ++k) {
          if (!use(k)) continue;
          const auto [a, cap, pieces] = size_of(k);
          const double v = f(a, cap) * pieces;
          if (v > 0) coef.emplace_back(node_cols[k].first, v);
          any_partial = any_partial || v > 0;
        }
        if (!any_partial) continue;
        const int row = static_cast<int>(row_ub.size()) + 1;
        row_ub.push_back(bins);
        for (const auto& [col, v] : coef) add(row, col, v);
      }
    };
    const std::vector<Dff> node_family = DffFamily();
    for (uint32_t set : sets) {
      // More than kMaxCardShares distinct shares (none of the bundled traces has over 21): the
      // shares are rounded down to tens of milli-GPU (at least 1) in the block, which only
      // loosens it (a card's pieces still fit when each is smaller), so that a trace of many
      // odd shares cannot make the LP large.
      constexpr size_t kMaxCardShares = 100;
      std::set<int32_t> distinct;
      for (size_t k = 0; k < node_cols.size(); ++k) {
        if ((node_cols[k].second & ~set) == 0) distinct.insert(pc[node_pods[k]].first.gpu_milli);
      }
      const bool coarse = distinct.size() > kMaxCardShares;
      std::map<int32_t, std::vector<std::pair<int, int32_t>>> by_share;  // (column, pieces)
      std::map<int32_t, int64_t> pods_of_share;
      for (size_t k = 0; k < node_cols.size(); ++k) {
        if ((node_cols[k].second & ~set) != 0) continue;
        const PodClass& p = pc[node_pods[k]].first;
        const int32_t share = coarse ? std::max(1, p.gpu_milli / 10 * 10) : p.gpu_milli;
        by_share[share].emplace_back(node_cols[k].first, p.num_gpus);
        pods_of_share[share] += pc[node_pods[k]].second;
      }
      if (by_share.empty()) continue;
      CardBlock b;
      b.cards = N * std::popcount(set);
      b.card_row = static_cast<int>(row_ub.size()) + 1;
      row_ub.push_back(b.cards);
      for (const auto& [share, pieces_of] : by_share) {
        b.shares.push_back(share);
        b.limit.push_back(
            static_cast<int>(std::min<int64_t>(core::kMilliPerGpu / share, pods_of_share[share])));
        b.share_rows.push_back(static_cast<int>(row_ub.size()) + 1);
        row_ub.push_back(0);
        for (const auto& [col, pieces] : pieces_of) add(b.share_rows.back(), col, pieces);
      }
      blocks.push_back(std::move(b));
    }
    if (node.cpu > 0) {
      dff_rows(
          node_family, N,
          [&](size_t k) {
            return std::tuple<int64_t, int64_t, double>(pc[node_pods[k]].first.cpu, node.cpu, 1);
          },
          [](size_t) { return true; });
    }
    if (node.mem > 0) {
      dff_rows(
          node_family, N,
          [&](size_t k) {
            return std::tuple<int64_t, int64_t, double>(pc[node_pods[k]].first.mem, node.mem, 1);
          },
          [](size_t) { return true; });
    }
  }
  // A forced pod that fits no node class cannot be held by any packing.
  {
    std::vector<uint8_t> placeable(pc.size(), 0);
    for (const Column& col : cols) placeable[col.pod] = 1;
    for (size_t c = 0; c < pc.size(); ++c) {
      if (x_lb[c] > 0 && !placeable[c]) {
        return InvalidArgument("packing bound: " + std::to_string(static_cast<int64_t>(x_lb[c])) +
                               " forced pods of " + std::to_string(pc[c].first.num_gpus) + " x " +
                               std::to_string(pc[c].first.gpu_milli) +
                               " milli-GPU fit no node of the cluster");
      }
    }
  }
  if (cols.empty()) return out;
  // X_c and its row: Σ_t y[c][t] − X_c = 0.
  const int x_col0 = static_cast<int>(cols.size()) + 1;
  for (size_t c = 0; c < pc.size(); ++c)
    add(static_cast<int>(c) + 1, x_col0 + static_cast<int>(c), -1);
  std::map<PodClass, size_t> class_index;  // position in pc: the order rows' and carried rows'
  for (size_t c = 0; c < pc.size(); ++c) class_index.emplace(pc[c].first, c);
  const std::vector<OrderFamily> families = placing.arrival_order
                                                ? OrderFamilies(cluster, pods, pc, class_index)
                                                : std::vector<OrderFamily>{};

  // LPs of different threads run at once: Debian's libglpk40 (5.0) is built reentrant (its
  // environment is thread-local: the library has a TLS segment), so each thread has its own.
  // GLPK's environment is per thread and outlives the problem; freed after each LP (the
  // problem deleted first), or a worker thread's ends up leaked when the thread exits.
  struct FreeEnv {
    ~FreeEnv() { glp_free_env(); }
  } free_env;
  glp_prob* lp = glp_create_prob();
  struct DeleteProb {
    glp_prob* lp;
    ~DeleteProb() { glp_delete_prob(lp); }
  } delete_prob{lp};  // declared after free_env: runs first
  glp_set_obj_dir(lp, GLP_MAX);
  glp_add_rows(lp, static_cast<int>(row_ub.size()));
  for (size_t r = 0; r < row_ub.size(); ++r) {
    glp_set_row_bnds(lp, static_cast<int>(r) + 1, r < pc.size() ? GLP_FX : GLP_UP, 0, row_ub[r]);
  }
  glp_add_cols(lp, static_cast<int>(cols.size() + pc.size()));
  for (size_t k = 0; k < cols.size(); ++k) {
    glp_set_col_bnds(lp, static_cast<int>(k) + 1, GLP_LO, 0, 0);
    glp_set_obj_coef(lp, static_cast<int>(k) + 1, obj[k]);
  }
  auto set_x_bounds = [&](bool with_forced) {
    for (size_t c = 0; c < pc.size(); ++c) {
      const double lb = with_forced ? x_lb[c] : 0.0;
      glp_set_col_bnds(lp, x_col0 + static_cast<int>(c), lb < x_ub[c] ? GLP_DB : GLP_FX, lb,
                       x_ub[c]);
    }
  };
  set_x_bounds(false);
  glp_load_matrix(lp, static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());
  // First without the forced pods and the order rows (the bound for any policy), then with the
  // forced pods' lower bounds, then with order rows added while the optimum violates some. The
  // second is solved afresh with the presolver: warm-starting it from the first's basis
  // measured slower (primal simplex, 40 against 25 ms on the default trace) or failed (GLPK's
  // dual simplex, GLP_EFAIL). Rows added to an optimal basis leave it dual feasible, so the
  // order rows' rounds warm-start with the dual simplex.
  //
  // Each figure is taken after column generation over the card patterns (CardBlock; the
  // cutting-plane rounds in between work on the patterns found so far): while some block has a
  // pattern of positive reduced cost (the best one found exactly by BestCardPattern from the
  // duals), add it and re-solve with the primal simplex from the basis (new columns leave it
  // primal feasible). The LP starts with one pattern per share
  // (as many pieces of it as a card holds) and, per share row, a penalty column w_s ≥ 0 of
  // objective −kPenalty per piece, so that it stays feasible whichever patterns it has yet
  // (with the forced pods' lower bounds it could otherwise be infeasible only for lack of a
  // pattern). The penalised LP's optimum is ≥ the LP's, so its value bounds. w > 0 at the end
  // is reported as "no packing holds the forced ones": without forcing a piece adds at most
  // 1000 < kPenalty, so w stays 0; with forced pods or order rows a row's dual may exceed
  // kPenalty, so the report can be false (an error, never a figure too low; not seen on the
  // bundled traces, nor in 225,000 random instances at 500 rounds). The figure is always LP +
  // the Lagrangian gap Σ_b cards_b · max reduced cost_b of the last pricing (Lübbecke &
  // Desrosiers, "Selected topics in column generation", Oper. Res. 53, 2005, §2.1: each
  // block's Σ z ≤ cards_b), 0 at convergence; after kMaxPricingRounds it is what bounds.
  constexpr double kPenalty = 1e5;  // > the 1000 milli-GPU a piece can add to the objective
  constexpr int kMaxPricingRounds = 500;
  glp_smcp parm;
  glp_init_smcp(&parm);
  parm.msg_lev = GLP_MSG_OFF;
  parm.presolve = GLP_ON;
  glp_smcp primal = parm;
  primal.presolve = GLP_OFF;
  primal.meth = GLP_PRIMAL;
  std::vector<int> idx{0};
  std::vector<double> val{0};
  auto add_pattern = [&](const CardBlock& b, const std::vector<int>& count) {
    idx.assign({0, b.card_row});
    val.assign({0, 1});
    for (size_t i = 0; i < b.shares.size(); ++i) {
      if (count[i] == 0) continue;
      idx.push_back(b.share_rows[i]);
      val.push_back(-count[i]);
    }
    const int col = glp_add_cols(lp, 1);
    glp_set_col_bnds(lp, col, GLP_LO, 0, 0);
    glp_set_mat_col(lp, col, static_cast<int>(idx.size()) - 1, idx.data(), val.data());
  };
  std::vector<int> penalty_cols;
  std::vector<std::set<std::vector<int>>> known(blocks.size());  // the patterns in the LP
  for (size_t k = 0; k < blocks.size(); ++k) {
    const CardBlock& b = blocks[k];
    for (size_t i = 0; i < b.shares.size(); ++i) {
      std::vector<int> count(b.shares.size(), 0);
      count[i] = b.limit[i];
      known[k].insert(count);
      add_pattern(b, count);
      const int col = glp_add_cols(lp, 1);
      idx.assign({0, b.share_rows[i]});
      val.assign({0, -1});
      glp_set_col_bnds(lp, col, GLP_LO, 0, 0);
      glp_set_obj_coef(lp, col, -kPenalty);
      glp_set_mat_col(lp, col, 1, idx.data(), val.data());
      penalty_cols.push_back(col);
    }
  }
  int rc = 0;
  // Σ_b cards_b · max(0, the best pattern's reduced cost in b) at the last pricing: 0 at
  // convergence; else what LP + it bounds (the rounds ran out, or reduced costs within GLPK's
  // tolerance that re-solving would not pivot in). Always added to the figure.
  double lagrangian_gap = 0;
  // Column generation after a solve; false when a re-solve fails (rc set). A pattern already
  // in the LP is not added again (its reduced cost is then GLPK's tolerance, in the gap).
  auto price = [&]() -> bool {
    std::vector<double> value;
    std::vector<std::pair<size_t, std::vector<int>>> found;
    for (int round = 0;; ++round) {
      found.clear();
      lagrangian_gap = 0;
      for (size_t k = 0; k < blocks.size(); ++k) {
        const CardBlock& b = blocks[k];
        value.resize(b.shares.size());
        for (size_t i = 0; i < b.shares.size(); ++i) {
          value[i] = glp_get_row_dual(lp, b.share_rows[i]);
        }
        auto [best, count] = BestCardPattern(b.shares, b.limit, value);
        const double dual = glp_get_row_dual(lp, b.card_row);
        const double reduced = best - dual;
        if (reduced <= 0) continue;
        lagrangian_gap += b.cards * reduced;
        if (reduced > 1e-6 * (1 + std::abs(dual)) && known[k].insert(count).second) {
          found.emplace_back(k, std::move(count));
        }
      }
      if (found.empty() || round == kMaxPricingRounds) return true;
      for (const auto& [k, count] : found) add_pattern(blocks[k], count);
      rc = glp_simplex(lp, &primal);
      if (rc != 0 || glp_get_status(lp) != GLP_OPT) rc = glp_simplex(lp, &parm);
      if (rc != 0 || glp_get_status(lp) != GLP_OPT) return false;
    }
  };
  auto penalised = [&]() {
    for (int col : penalty_cols) {
      if (glp_get_col_prim(lp, col) > 1e-6) return true;
    }
    return false;
  };
  rc = glp_simplex(lp, &parm);
  int status = glp_get_status(lp);
  if (rc == 0 && status == GLP_OPT && !price()) status = glp_get_status(lp);
  if (rc != 0 || status != GLP_OPT || penalised()) {
    return Internal("packing bound: GLPK simplex failed (rc " + std::to_string(rc) + ", status " +
                    std::to_string(status) + ")");
  }
  out.gpu_milli_any_policy = glp_get_obj_val(lp) + lagrangian_gap;
  out.gpu_milli = out.gpu_milli_any_policy;
  auto infeasible = [&](const char* what) {
    // With ForcedPods' flags and OrderFamilies' rows this is a defect (every placing policy's
    // packing satisfies every row); with a caller's own flags, flags no packing can honour.
    int64_t forced_pods = 0;
    for (const auto& [c, k] : forced_count) forced_pods += k;
    return InvalidArgument("packing bound: no packing of these pods holds the " +
                           std::to_string(forced_pods) + " forced ones" + what +
                           " (the LP has no feasible point)");
  };
  // When that optimum already holds every forced pod, it is optimal with them forced too (the
  // bounds only remove packings): no second solve.
  bool holds = true;
  for (size_t c = 0; c < pc.size() && holds; ++c) {
    holds = x_lb[c] <= 0 || glp_get_col_prim(lp, x_col0 + static_cast<int>(c)) >= x_lb[c] - 1e-6;
  }
  // After a solve with the forced pods (and the order rows): the optimum, or why there is none.
  // `final`: price the card patterns to convergence first (the figure is then a bound); the
  // cutting-plane rounds work on the patterns found so far and price once no row is violated.
  auto take_optimum = [&](const char* rows_held, bool final) -> Status {
    status = glp_get_status(lp);
    if (rc == GLP_ENOPFS || (rc == 0 && (status == GLP_NOFEAS || status == GLP_INFEAS))) {
      return infeasible(rows_held);
    }
    if (final && rc == 0 && status == GLP_OPT && !price()) status = glp_get_status(lp);
    if (final && rc == 0 && status == GLP_OPT && penalised()) return infeasible(rows_held);
    if (rc != 0 || status != GLP_OPT) {
      return Internal("packing bound: GLPK simplex failed with the forced pods" +
                      std::string(rows_held) + " (rc " + std::to_string(rc) + ", status " +
                      std::to_string(status) + ")");
    }
    out.gpu_milli = glp_get_obj_val(lp) + lagrangian_gap;
    return Status();
  };
  if (!holds) {
    set_x_bounds(true);
    rc = glp_simplex(lp, &parm);
    if (Status st = take_optimum("", families.empty()); !st.ok()) return st;
  } else if (!families.empty()) {
    set_x_bounds(true);  // the optimum stays feasible and optimal
  }
  if (families.empty()) {
    if (carried != nullptr) carried->clear();
    return out;
  }

  // Cutting planes: each round adds, for the families the optimum violates most, the edge of
  // their hull at the optimum's x_B, and re-solves. Stops when no row is violated by more than
  // 1e-4 pods or after kMaxRounds (fewer rows only loosen the bound).
  constexpr int kMaxRounds = 50;
  constexpr int kMaxPasses = 20;  // cutting-plane rounds, then pricing, again while it adds
  constexpr size_t kRowsPerRound = 20;
  glp_smcp warm = parm;
  warm.presolve = GLP_OFF;
  warm.meth = GLP_DUALP;
  std::vector<double> x(pc.size());
  std::vector<std::pair<int, CarriedRow>> rows;  // the order rows in the LP, by row number
  auto add_row = [&](const std::vector<uint8_t>& in_a, const std::vector<uint8_t>& in_b,
                     double slope, double intercept) {
    idx.resize(1);
    val.resize(1);
    for (size_t c = 0; c < pc.size(); ++c) {
      const double coef = in_a[c] - slope * in_b[c];
      if (coef == 0) continue;
      idx.push_back(x_col0 + static_cast<int>(c));
      val.push_back(coef);
    }
    const int row = glp_add_rows(lp, 1);
    glp_set_mat_row(lp, row, static_cast<int>(idx.size()) - 1, idx.data(), val.data());
    glp_set_row_bnds(lp, row, GLP_LO, intercept, 0);
    ++out.order_rows;
    if (carried == nullptr) return;
    CarriedRow kept{{}, {}, slope, intercept};
    for (size_t c = 0; c < pc.size(); ++c) {
      if (in_a[c]) kept.a.push_back(pc[c].first);
      if (in_b[c]) kept.b.push_back(pc[c].first);
    }
    rows.emplace_back(row, std::move(kept));
  };
  auto solve = [&]() -> Status {
    rc = glp_simplex(lp, &warm);
    if (rc != 0 || glp_get_status(lp) != GLP_OPT) rc = glp_simplex(lp, &parm);
    return take_optimum(" and the order rows", false);
  };
  if (carried != nullptr && !carried->empty()) {
    std::vector<uint8_t> in_a(pc.size()), in_b(pc.size());
    for (const CarriedRow& r : *carried) {
      std::fill(in_a.begin(), in_a.end(), 0);
      std::fill(in_b.begin(), in_b.end(), 0);
      for (const PodClass& p : r.a) {
        if (auto it = class_index.find(p); it != class_index.end()) in_a[it->second] = 1;
      }
      for (const PodClass& p : r.b) {
        if (auto it = class_index.find(p); it != class_index.end()) in_b[it->second] = 1;
      }
      add_row(in_a, in_b, r.slope, r.intercept);
    }
    if (Status st = solve(); !st.ok()) return st;
  }
  // One round: adds the rows of the (at most kRowsPerRound) families the optimum violates
  // most; returns how many.
  auto add_violated_rows = [&]() -> size_t {
    for (size_t c = 0; c < pc.size(); ++c)
      x[c] = glp_get_col_prim(lp, x_col0 + static_cast<int>(c));
    struct Cut {
      double violation;
      size_t family;
      OrderFamily::Line line;
    };
    std::vector<Cut> cuts;
    for (size_t k = 0; k < families.size(); ++k) {
      const OrderFamily& f = families[k];
      double xa = 0, xb = 0;
      for (size_t c = 0; c < pc.size(); ++c) {
        xa += f.in_a[c] * x[c];
        xb += f.in_b[c] * x[c];
      }
      const OrderFamily::Line line = f.LineAt(xb);
      const double v = line.slope * xb + line.intercept - xa;
      if (v > 1e-4) cuts.push_back({v, k, line});
    }
    std::sort(cuts.begin(), cuts.end(),
              [](const Cut& a, const Cut& b) { return a.violation > b.violation; });
    if (cuts.size() > kRowsPerRound) cuts.resize(kRowsPerRound);
    for (const Cut& cut : cuts) {
      const OrderFamily& f = families[cut.family];
      add_row(f.in_a, f.in_b, cut.line.slope, cut.line.intercept);
    }
    return cuts.size();
  };
  int round = 0;
  for (int pass = 0;; ++pass) {
    for (; round < kMaxRounds && add_violated_rows() > 0; ++round) {
      if (Status st = solve(); !st.ok()) return st;
    }
    // No row violated (or the rounds spent): price the patterns; new ones may violate rows.
    const int columns = glp_get_num_cols(lp);
    if (Status st = take_optimum(" and the order rows", true); !st.ok()) return st;
    if (glp_get_num_cols(lp) == columns || round >= kMaxRounds || pass == kMaxPasses) break;
  }
  if (carried != nullptr) {
    // Only the rows that bind here go on: the others would only make the next LP larger.
    carried->clear();
    for (auto& [row, kept] : rows) {
      if (glp_get_row_stat(lp, row) != GLP_BS) carried->push_back(std::move(kept));
    }
  }
  return out;
}

}  // namespace

Result<PackingBound> PackingUpperBound(const SimCluster& cluster,
                                       std::span<const core::FragDemand> pods,
                                       const PlacingFacts& placing) {
  return SolveBound(cluster, pods, placing, nullptr);
}

namespace {

// One node class as a pod shape p sees it: what it costs to leave no room for p there, per
// resource (CPU milli, memory MiB, cards), each normalised by the cluster's total.
struct BlockCost {
  double cost[3];
  double count;
};

// One GPU pod shape: the node classes it sees and the first arrival index at which the pods
// arrived before it may block every node (ForcedPods forces its arrivals before that).
struct ShapeBlock {
  std::vector<BlockCost> nodes;
  size_t first_block = 0;
};

}  // namespace

std::vector<uint8_t> ForcedPods(const SimCluster& cluster,
                                std::span<const core::FragDemand> arrivals) {
  // Why it holds. A pod of shape p fails only when every node n is blocked, from the nodes'
  // state in `cluster` on: its CPU left < cpu_p (the pods placed there hold ≥ CPU left −
  // cpu_p + 1 millicores; never when cpu_p = 0), or its memory left < mem_p (likewise), or
  // fewer than num_gpus_p of its allowed GPUs have ≥ share_p left. For the last, of the F
  // allowed GPUs with L ≥ share_p left now, ≥ F − num_gpus_p + 1 must each receive ≥ L −
  // share_p + 1 milli; the cheapest such choice is the sum of the smallest of those needs. In
  // units of T = 1001 − share_p (the largest need, L ≤ 1000), a card that receives ≥ need
  // ≤ T milli has Σ min(q, T) / T ≥ need / T over its pods (q each pod's share on it). Choose
  // for every node one resource r(n) that blocks it, and count each placed pod toward the r(n)
  // of its node only: Σ over those pods of res_r ≥ Σ over the nodes blocked by r of
  // cost_{n,r}, for r = CPU, memory, cards (res_cards = num_gpus · min(share, T) / T). For any
  // λ ≥ 0 the weighted sum gives Σ_pods max_r λ_r·res_r ≥ Σ_nodes min_r λ_r·cost_{n,r}. The
  // pods placed are some of the pods arrived, so when the arrived pods' left side is below the
  // right side for one λ, no placement of them blocks every node, and a placing policy places
  // p: that λ is the certificate (weak LP duality of the fractional choice). λ ranges over a
  // grid of the simplex; a certificate the grid misses only leaves a pod unforced, which
  // loosens the bound and never makes it wrong.
  const size_t n = arrivals.size();
  std::vector<uint8_t> out(n, 0);
  double cap[3] = {0, 0, static_cast<double>(cluster.total_gpus)};
  for (const auto& node : cluster.frag) {
    cap[0] += static_cast<double>(node.cpu_left);
    cap[1] += static_cast<double>(node.mem_left);
  }
  if (cap[0] <= 0 || cap[1] <= 0 || cap[2] <= 0) return out;

  // The node classes each GPU pod shape sees, grouped by the threshold T its cards need.
  std::map<PodClass, ShapeBlock> shapes;
  std::map<int32_t, std::vector<ShapeBlock*>> by_threshold;
  for (const auto& d : arrivals) {
    if (d.num_gpus <= 0 || d.gpu_milli <= 0) continue;
    auto [it, fresh] = shapes.try_emplace(PodClassOf(d));
    if (!fresh) continue;
    const int32_t T = core::kMilliPerGpu + 1 - std::min(d.gpu_milli, core::kMilliPerGpu);
    // (CPU, memory, card milli needed to block a node; kNever where that resource cannot)
    constexpr int64_t kNever = -1;
    std::map<std::tuple<int64_t, int64_t, int64_t>, int64_t> classes;
    for (const auto& node : cluster.frag) {
      if (!core::Fits(node, d)) continue;  // p never fits there: blocked at no cost
      int64_t needs[core::kMaxFragGpus];
      int fitting = 0;
      for (int g = 0; g < node.num_gpus; ++g) {
        if (d.GpuFits(node, g)) needs[fitting++] = node.gpu_left[g] - d.gpu_milli + 1;
      }
      std::sort(needs, needs + fitting);
      int64_t card = 0;
      for (int k = 0; k < fitting - d.num_gpus + 1; ++k) card += needs[k];
      ++classes[{d.cpu_milli > 0 ? node.cpu_left - d.cpu_milli + 1 : kNever,
                 d.mem_mib > 0 ? node.mem_left - d.mem_mib + 1 : kNever, card}];
    }
    constexpr double kInf = std::numeric_limits<double>::infinity();
    for (const auto& [k, count] : classes) {
      const auto [c, m, g] = k;
      it->second.nodes.push_back({{c == kNever ? kInf : static_cast<double>(c) / cap[0],
                                   m == kNever ? kInf : static_cast<double>(m) / cap[1],
                                   static_cast<double>(g) / T / cap[2]},
                                  static_cast<double>(count)});
    }
    by_threshold[T].push_back(&it->second);  // map nodes never move
  }

  constexpr int kGrid = 12;  // λ = (a, b, kGrid − a − b) / kGrid, points of the simplex
  // Each arrival's CPU and memory, and its cards in units of the T at hand.
  std::vector<double> res(3 * n), prefix(n + 1);
  for (size_t i = 0; i < n; ++i) {
    res[3 * i] = static_cast<double>(arrivals[i].cpu_milli) / cap[0];
    res[3 * i + 1] = static_cast<double>(arrivals[i].mem_mib) / cap[1];
  }
  for (const auto& [T, blocks] : by_threshold) {
    for (size_t i = 0; i < n; ++i) {
      const auto& d = arrivals[i];
      res[3 * i + 2] = d.num_gpus > 0
                           ? static_cast<double>(d.num_gpus) *
                                 (static_cast<double>(std::min(d.gpu_milli, T)) / T) / cap[2]
                           : 0.0;
    }
    // A weight of 0 on a resource makes every node's min 0, which certifies nothing: the
    // interior points only (55 of the 91), so λ_r · ∞ (a resource p does not ask) is ∞. A
    // grid of 24 (253 points) forces 1 % more pods of the default trace (3,992 against 3,950
    // of seed 42's 10,739 arrivals), the same 0.81-GPU pods and the same bound, in 4 times the
    // time (181 against 44 ms).
    for (int a = 1; a < kGrid; ++a) {
      for (int b = 1; a + b < kGrid; ++b) {
        const double lambda[3] = {static_cast<double>(a) / kGrid, static_cast<double>(b) / kGrid,
                                  static_cast<double>(kGrid - a - b) / kGrid};
        prefix[0] = 0;
        for (size_t i = 0; i < n; ++i) {
          prefix[i + 1] = prefix[i] + std::max({lambda[0] * res[3 * i], lambda[1] * res[3 * i + 1],
                                                lambda[2] * res[3 * i + 2]});
        }
        for (ShapeBlock* shape : blocks) {
          double need = 0;
          for (const BlockCost& bc : shape->nodes) {
            need += bc.count * std::min({lambda[0] * bc.cost[0], lambda[1] * bc.cost[1],
                                         lambda[2] * bc.cost[2]});
          }
          // The arrivals before index k certify p when prefix[k] < need, with a margin so that
          // rounding never makes a certificate (the sums are of ≈ 10^4 terms ≤ 1).
          const double want = need * (1 - 1e-9) - 1e-12;
          const size_t k = static_cast<size_t>(
              std::lower_bound(prefix.begin(), prefix.end(), want) - prefix.begin());
          shape->first_block = std::max(shape->first_block, std::min(k, n));
        }
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const auto& d = arrivals[i];
    if (d.num_gpus <= 0 || d.gpu_milli <= 0) continue;
    out[i] = i < shapes.at(PodClassOf(d)).first_block;
  }
  return out;
}

int64_t OfflinePacking(const SimCluster& cluster, const SimWorkload& workload,
                       std::span<const core::FragDemand> pods) {
  std::vector<core::FragDemand> order;
  for (const auto& d : pods) {
    if (d.num_gpus > 0 && d.gpu_milli > 0) order.push_back(d);
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return std::tuple(a.num_gpus, a.gpu_milli) > std::tuple(b.num_gpus, b.gpu_milli);
  });
  std::vector<core::FragNode> nodes = cluster.frag;
  std::vector<double> frag(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    frag[i] = core::NodeFragment(nodes[i], workload.compiled);
  core::SeededRng unused(0, 0);  // FGD draws nothing
  int64_t used = 0;
  for (const auto& d : order) {
    const core::Placement p =
        core::ChooseNode(core::PlacementPolicy::kFgd, nodes, frag, d, workload.compiled, unused);
    if (p.node < 0) continue;
    core::Apply(nodes[p.node], d, p.pick);
    frag[p.node] = core::NodeFragment(nodes[p.node], workload.compiled);
    used += d.TotalGpuMilli();
  }
  return used;
}

ArrivalCut CutArrivals(std::span<const core::FragDemand> arrivals, int64_t capacity_milli,
                       int pct) {
  ArrivalCut cut;
  const double limit = static_cast<double>(capacity_milli) * (pct + 0.5) / 100.0;
  for (; cut.pods < arrivals.size(); ++cut.pods) {
    const int64_t milli = arrivals[cut.pods].TotalGpuMilli();
    if (static_cast<double>(cut.gpu_milli + milli) > limit) break;
    cut.gpu_milli += milli;
  }
  return cut;
}

Result<std::vector<PackingBound>> PrefixBounds(const SimCluster& cluster,
                                               std::span<const core::FragDemand> arrivals,
                                               std::span<const uint8_t> forced,
                                               std::span<const size_t> prefix_pods) {
  if (!forced.empty() && forced.size() != arrivals.size()) {
    return InvalidArgument("prefix bounds: " + std::to_string(forced.size()) +
                           " forced flags for " + std::to_string(arrivals.size()) + " arrivals");
  }
  for (size_t n : prefix_pods) {
    if (n > arrivals.size()) {
      return InvalidArgument("prefix bounds: a prefix of " + std::to_string(n) + " pods of " +
                             std::to_string(arrivals.size()) + " arrivals");
    }
  }
  // The longest prefix first, so that the order rows binding there start the LP of the next
  // shorter one.
  std::vector<size_t> order(prefix_pods.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return prefix_pods[a] > prefix_pods[b]; });
  std::vector<PackingBound> out(prefix_pods.size());
  std::vector<CarriedRow> carried;
  for (size_t i : order) {
    const size_t n = prefix_pods[i];
    auto bound = SolveBound(
        cluster, arrivals.first(n),
        {.forced = forced.empty() ? forced : forced.first(n), .arrival_order = true}, &carried);
    if (!bound.ok()) return bound.status();
    out[i] = *bound;
  }
  return out;
}

Result<ArrivalBoundSeries> ArrivalBounds(const SimCluster& cluster, const SimWorkload& workload,
                                         uint64_t seed, double tune,
                                         std::span<const int> arrived_pct) {
  core::SeededRng arrivals_rng(seed, 0);  // the stream RunExperiment draws its arrivals from
  const std::vector<int32_t> arrivals =
      BuildArrivals(workload.pods, cluster.CapacityMilli(), tune, arrivals_rng);
  std::vector<core::FragDemand> demands;
  demands.reserve(arrivals.size());
  for (int32_t idx : arrivals) demands.push_back(workload.demand[idx]);
  const std::vector<uint8_t> forced = ForcedPods(cluster, demands);
  const double capacity = static_cast<double>(cluster.CapacityMilli());
  // Bucket b of the table holds the samples whose arrived rounds to b % (metrics.h), i.e. up
  // to (b + ½) % of capacity: the bound takes every pod arrived by then.
  std::vector<ArrivalCut> cuts;
  std::vector<size_t> prefixes;
  for (int pct : arrived_pct) {
    cuts.push_back(CutArrivals(demands, cluster.CapacityMilli(), pct));
    prefixes.push_back(cuts.back().pods);
  }
  auto bounds = PrefixBounds(cluster, demands, forced, prefixes);
  if (!bounds.ok()) return bounds.status();
  ArrivalBoundSeries out;
  for (size_t i = 0; i < cuts.size(); ++i) {
    const double arrived = static_cast<double>(cuts[i].gpu_milli);
    const PackingBound& b = (*bounds)[i];
    out.placing.push_back(100.0 * std::min({b.gpu_milli, arrived, capacity}) / capacity);
    out.any_policy.push_back(100.0 * std::min({b.gpu_milli_any_policy, arrived, capacity}) /
                             capacity);
  }
  return out;
}

}  // namespace fracgpu::sim
