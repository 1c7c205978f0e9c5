// The packing upper bound (src/sim/bound.h) on tiny clusters whose optimum is computed by hand.
#include "sim/bound.h"

#include <gtest/gtest.h>

namespace fracgpu::sim {
namespace {

TraceNode Node(std::string name, int64_t cpu, int32_t gpus, std::string model) {
  TraceNode n;
  n.name = std::move(name);
  n.cpu_milli = cpu;
  n.memory_mib = 65536;
  n.gpus = gpus;
  n.model = std::move(model);
  return n;
}

core::FragDemand Pod(int64_t cpu, int32_t num_gpus, int32_t milli, uint64_t mask = ~0ULL) {
  core::FragDemand d;
  d.cpu_milli = cpu;
  d.mem_mib = 1024;
  d.num_gpus = num_gpus;
  d.gpu_milli = milli;
  d.type_mask = mask;
  return d;
}

double Bound(const SimCluster& c, std::vector<core::FragDemand> pods) {
  auto b = PackingUpperBound(c, pods);
  EXPECT_TRUE(b.ok()) << b.status().message();
  return b.ok() ? b->gpu_milli : -1;
}

TEST(PackingUpperBound, HandComputedOptima) {
  auto one = BuildCluster({Node("n0", 10000, 2, "T4")}, "n.csv");
  ASSERT_TRUE(one.ok()) << one.status().message();
  // Three 600-milli shares on two cards: no card holds two, so 2 × 600 (capacity alone: 1800).
  EXPECT_DOUBLE_EQ(Bound(*one, {Pod(1000, 1, 600), Pod(1000, 1, 600), Pod(1000, 1, 600)}), 1200.0);
  // Five 300-milli shares with 4 vCPU each on 10 vCPU: CPU for 2.5 of them → 750 (the LP
  // relaxes integrality; any real packing places ≤ 600).
  std::vector<core::FragDemand> cpu_bound(5, Pod(4000, 1, 300));
  EXPECT_DOUBLE_EQ(Bound(*one, cpu_bound), 750.0);
  // A 4-GPU pod fits no 2-GPU node: 0; CPU-only pods add nothing.
  EXPECT_DOUBLE_EQ(Bound(*one, {Pod(1000, 4, 1000), Pod(1000, 0, 0)}), 0.0);
  // Two 2-GPU pods on one 2-GPU node: at most one per node → 2000.
  EXPECT_DOUBLE_EQ(Bound(*one, {Pod(1000, 2, 1000), Pod(1000, 2, 1000)}), 2000.0);

  // A T4 and a P100 node, one card each; pods allowed only on T4: one card's worth.
  auto two = BuildCluster({Node("a", 10000, 1, "T4"), Node("b", 10000, 1, "P100")}, "n.csv");
  ASSERT_TRUE(two.ok());
  uint64_t t4 = 0;
  for (size_t t = 0; t < two->type_table.size(); ++t) {
    if (two->type_table[t] == "T4") t4 |= 1ULL << t;
  }
  ASSERT_NE(t4, 0u);
  EXPECT_DOUBLE_EQ(Bound(*two, {Pod(1000, 1, 1000, t4), Pod(1000, 1, 1000, t4)}), 1000.0);
  EXPECT_DOUBLE_EQ(Bound(*two, {Pod(1000, 1, 1000, t4), Pod(1000, 1, 1000)}), 2000.0);
  // No pods: 0.
  EXPECT_DOUBLE_EQ(Bound(*two, {}), 0.0);
}

}  // namespace
}  // namespace fracgpu::sim
