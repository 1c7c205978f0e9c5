// Tests of core::NodeFitSummary (src/core/fit.h; docs/scheduler.md "Fit summary"): what
// SummarizeForFit packs and when it cannot, which pods SummaryDecides lets the summary decide,
// and that FitsBySummary gives Fits' answer on random nodes and pods drawn around every
// boundary of the capacity checks (docs/design/hami-behaviour.md §3.6 rows 1–2, 6–7, 9–12).

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "../support/fit_fixtures.h"
#include "core/fit.h"

namespace fracgpu::core {
namespace {

using testsupport::Ctr;
using testsupport::Node;
using testsupport::Pod;

GpuState Gpu(int64_t devmem, int32_t devcore, int32_t count, int32_t used, int64_t used_mem,
             int32_t used_cores, int32_t numa = 0) {
  GpuState g;
  g.info.uuid = "GPU-x";
  g.info.type = "NVIDIA-Tesla V100-PCIE-32GB";
  g.info.devmem_mib = devmem;
  g.info.devcore = devcore;
  g.info.count = count;
  g.info.numa = numa;
  g.used = used;
  g.used_mem_mib = used_mem;
  g.used_cores = used_cores;
  return g;
}

TEST(FitSummaryTest, PacksEachGpuInOrder) {
  // GPU 0: healthy, 2 of 4 slices taken; GPU 1: unhealthy, cordoned, every slice taken;
  // GPU 2: idle, NUMA node 1.
  NodeState node = Node({Gpu(81920, 100, 4, 2, 30000, 60), Gpu(16384, 200, 2, 2, 16384, 200),
                         Gpu(40960, 100, 10, 0, 0, 0, 1)});
  node.gpus[1].info.health = false;
  node.gpus[1].cordoned = true;
  NodeFitSummary s = SummarizeForFit(node);
  ASSERT_TRUE(s.exact);
  ASSERT_EQ(s.gpus, 3);
  EXPECT_EQ(s.gpu[0].devmem_mib, 81920);
  EXPECT_EQ(s.gpu[0].used_mem_mib, 30000);
  EXPECT_EQ(s.gpu[0].devcore, 100);
  EXPECT_EQ(s.gpu[0].used_cores, 60);
  EXPECT_EQ(s.gpu[0].numa, 0);
  EXPECT_EQ(s.gpu[0].flags, PackedGpu::kHealth | PackedGpu::kSliceFree | PackedGpu::kInUse);
  EXPECT_EQ(s.gpu[1].devmem_mib, 16384);
  EXPECT_EQ(s.gpu[1].devcore, 200);
  EXPECT_EQ(s.gpu[1].used_cores, 200);
  EXPECT_EQ(s.gpu[1].flags, PackedGpu::kCordoned | PackedGpu::kInUse);
  EXPECT_EQ(s.gpu[2].numa, 1);
  EXPECT_EQ(s.gpu[2].flags, PackedGpu::kHealth | PackedGpu::kSliceFree);
  // Slots past the last GPU stay zero, so two summaries of one node compare equal.
  for (size_t i = 3; i < NodeFitSummary::kMaxGpus; ++i) EXPECT_EQ(s.gpu[i], PackedGpu{});
  EXPECT_EQ(s, SummarizeForFit(node));

  NodeFitSummary empty = SummarizeForFit(Node({}));
  EXPECT_TRUE(empty.exact);
  EXPECT_EQ(empty.gpus, 0);
  EXPECT_TRUE(FitsBySummary(Pod({Ctr(0, 0, 0)}), empty));
  EXPECT_FALSE(FitsBySummary(Pod({Ctr(1, 1000, 10)}), empty));
}

TEST(FitSummaryTest, NotExactWhenAValueDoesNotFitItsWidth) {
  struct Case {
    const char* name;
    NodeState node;
  };
  const int64_t kI32Max = std::numeric_limits<int32_t>::max();
  std::vector<GpuState> seventeen(17, Gpu(16384, 100, 10, 0, 0, 0));
  std::vector<GpuState> sixteen(16, Gpu(16384, 100, 10, 0, 0, 0));
  const Case cases[] = {
      {"17 GPUs", Node(seventeen)},
      {"devmem above INT32_MAX", Node({Gpu(kI32Max + 1, 100, 10, 0, 0, 0)})},
      {"used memory below INT32_MIN", Node({Gpu(16384, 100, 10, 1, -kI32Max - 2, 0)})},
      {"devcore 40000", Node({Gpu(16384, 40000, 10, 0, 0, 0)})},
      {"used cores -40000", Node({Gpu(16384, 100, 10, 1, 0, -40000)})},
      {"NUMA node 200", Node({Gpu(16384, 100, 10, 0, 0, 0, 200)})},
      {"second GPU's NUMA node -200",
       Node({Gpu(16384, 100, 10, 0, 0, 0), Gpu(16384, 100, 10, 0, 0, 0, -200)})},
  };
  for (const Case& c : cases) {
    NodeFitSummary s = SummarizeForFit(c.node);
    EXPECT_FALSE(s.exact) << c.name;
    EXPECT_EQ(s, NodeFitSummary{}) << c.name;
    // The summary answers no even where the node fits: the caller must take the full path.
    EXPECT_TRUE(Fits(Pod({Ctr(1, 1000, 10)}), c.node)) << c.name;
    EXPECT_FALSE(FitsBySummary(Pod({Ctr(1, 1000, 10)}), s)) << c.name;
  }
  // The widest values that fit are kept.
  NodeFitSummary s16 = SummarizeForFit(Node(sixteen));
  EXPECT_TRUE(s16.exact);
  EXPECT_EQ(s16.gpus, 16);
  const NodeState edge_node = Node(
      {Gpu(kI32Max, 32767, 10, 1, -kI32Max - 1, 32767, 127), Gpu(16384, 100, 10, 0, 0, 0, -128)});
  const NodeFitSummary edge = SummarizeForFit(edge_node);
  ASSERT_TRUE(edge.exact);
  EXPECT_EQ(edge.gpu[0].devmem_mib, kI32Max);
  EXPECT_EQ(edge.gpu[0].used_mem_mib, -kI32Max - 1);
  EXPECT_EQ(edge.gpu[0].devcore, 32767);
  EXPECT_EQ(edge.gpu[0].used_cores, 32767);
  EXPECT_EQ(edge.gpu[0].numa, 127);
  EXPECT_EQ(edge.gpu[1].numa, -128);
  // And decided as Fits decides at those widths.
  for (const PodRequest& pod : {Pod({Ctr(1, 1000, 10)}), Pod({Ctr(2, 1000, 10)}),
                                Pod({Ctr(1, 0, 0, false, 100)}), Pod({Ctr(1, 20000, 100)})}) {
    for (bool numa : {false, true}) {
      PodRequest p = pod;
      p.numa_bind = numa;
      EXPECT_EQ(FitsBySummary(p, edge), Fits(p, edge_node))
          << p.containers[0].num_gpus << " GPUs, " << p.containers[0].mem_mib << " MiB, numa "
          << numa;
    }
  }
}

TEST(FitSummaryTest, DecidesOnlyPodsWhoseChecksReadNumbers) {
  auto base = [] { return Pod({Ctr(1, 1000, 10)}); };
  struct Case {
    const char* name;
    PodRequest pod;
    bool decides;
  };
  std::vector<Case> cases;
  cases.push_back({"one GPU container", base(), true});
  cases.push_back({"no GPU", Pod({Ctr(0, 0, 0)}), true});
  cases.push_back(
      {"init and one app container", Pod({Ctr(1, 2000, 0, true), Ctr(2, 1000, 10)}), true});
  cases.push_back({"two init containers, one app container",
                   Pod({Ctr(1, 2000, 0, true), Ctr(1, 3000, 0, true), Ctr(1, 1000, 10)}), true});
  cases.push_back({"an app container without GPU beside one with",
                   Pod({Ctr(0, 0, 0), Ctr(1, 1000, 10)}), true});
  cases.push_back({"two GPU app containers", Pod({Ctr(1, 1000, 10), Ctr(1, 1000, 10)}), false});
  PodRequest p = base();
  p.numa_bind = true;
  cases.push_back({"numa-bind", p, true});
  p = base();
  p.gpu_policy_spec = GpuPolicySpec{};
  p.gpu_policy_spec->mutex = true;
  cases.push_back({"mutex (reads only whether a GPU is in use)", p, true});
  p = base();
  p.gpu_policy = GpuPolicy::kTopologyAware;
  cases.push_back({"topology-aware", p, true});
  p = base();
  p.vgpu_mode = "hami-core";
  cases.push_back({"nvidia.com/vgpu-mode", p, false});
  p = base();
  p.use_types = {"A100"};
  cases.push_back({"use-gputype", p, false});
  p = base();
  p.nouse_types = {"V100"};
  cases.push_back({"nouse-gputype", p, false});
  p = base();
  p.use_uuids = {"GPU-0"};
  cases.push_back({"use-gpuuuid", p, false});
  p = base();
  p.nouse_uuids = {"GPU-0"};
  cases.push_back({"nouse-gpuuuid", p, false});
  const NodeFitSummary idle =
      SummarizeForFit(Node({Gpu(16384, 100, 10, 0, 0, 0), Gpu(16384, 100, 10, 0, 0, 0)}));
  for (const Case& c : cases) {
    EXPECT_EQ(SummaryDecides(c.pod), c.decides) << c.name;
    // A pod it does not decide is never said to fit (every case fits this idle node).
    EXPECT_EQ(FitsBySummary(c.pod, idle), c.decides) << c.name;
  }
}

// Values drawn at and around each boundary of the capacity checks.
struct Draw {
  std::mt19937 rng{20261203};
  int Uni(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
  template <typename T>
  T Pick(std::initializer_list<T> values) {
    return *(values.begin() + Uni(0, static_cast<int>(values.size()) - 1));
  }

  GpuState AnyGpu() {
    const int64_t devmem = Pick<int64_t>({0, 8192, 16384, 16384, 81920});
    const int32_t devcore = Pick<int32_t>({0, 100, 100, 100, 200});
    const int32_t count = Pick<int32_t>({0, 1, 2, 4, 10});
    int32_t used = Pick<int32_t>({0, 0, 1, 2, 4, 10});
    if (Uni(0, 3) == 0) used = count;  // every slice taken
    int64_t used_mem = used == 0 ? 0 : Pick<int64_t>({0, 1024, devmem / 2, devmem - 1000, devmem});
    int32_t used_cores = used == 0 ? 0 : Pick<int32_t>({0, 10, 50, devcore - 10, devcore});
    if (Uni(0, 30) == 0) used_mem = devmem + 1024;  // over-committed (whole-node reservation)
    GpuState g =
        Gpu(devmem, devcore, count, used, used_mem, used_cores, Uni(0, 4) == 0 ? 3 : Uni(0, 1));
    g.info.health = Uni(0, 9) != 0;
    g.cordoned = Uni(0, 14) == 0;
    return g;
  }

  ContainerRequest AnyContainer(bool init) {
    const int32_t gpus = Pick<int32_t>({0, 1, 1, 1, 2, 3});
    const bool by_percent = Uni(0, 3) == 0;
    const int64_t mem = by_percent ? 0 : Pick<int64_t>({1, 1000, 4096, 8192, 16384, 40000});
    const int32_t pct = by_percent ? Pick<int32_t>({1, 25, 50, 100}) : 100;
    const int32_t cores = Pick<int32_t>({0, 0, 10, 30, 50, 90, 100, 150});
    return Ctr(gpus, mem, cores, init, pct);
  }
};

TEST(FitSummaryTest, AgreesWithFitsAroundEveryBoundary) {
  Draw d;
  int fits = 0, total = 0;
  std::map<FitReason, int> reasons;  // why each GPU a container asked for failed (CheckGpu)
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<GpuState> gpus;
    const int n = d.Uni(0, 12) == 0 ? static_cast<int>(NodeFitSummary::kMaxGpus) : d.Uni(0, 9);
    for (int i = 0; i < n; ++i) gpus.push_back(d.AnyGpu());
    NodeState node = Node(gpus);
    std::vector<ContainerRequest> containers;
    const int n_init = d.Pick<int>({0, 0, 0, 1, 2});
    for (int i = 0; i < n_init; ++i) containers.push_back(d.AnyContainer(true));
    containers.push_back(d.AnyContainer(false));
    if (d.Uni(0, 4) == 0) containers.push_back(Ctr(0, 0, 0));  // a sidecar without GPU
    PodRequest pod = Pod(containers);
    pod.numa_bind = d.Uni(0, 2) == 0;
    if (d.Uni(0, 5) == 0) {
      pod.gpu_policy_spec = GpuPolicySpec{};
      pod.gpu_policy_spec->mutex = true;
    }
    const int pol = d.Uni(0, 2);
    pod.gpu_policy = pol == 0   ? GpuPolicy::kSpread
                     : pol == 1 ? GpuPolicy::kBinpack
                                : GpuPolicy::kTopologyAware;
    ASSERT_TRUE(SummaryDecides(pod)) << "iteration " << iter;
    const NodeFitSummary s = SummarizeForFit(node);
    ASSERT_TRUE(s.exact);
    // Any options: the cluster's default policy, with or without reasons, a type cache. Fit
    // (the ordered greedy /bind runs) must agree as well.
    FitOptions opt;
    opt.want_reasons = d.Uni(0, 1) == 0;
    opt.default_gpu_policy =
        d.Pick<GpuPolicy>({GpuPolicy::kSpread, GpuPolicy::kBinpack, GpuPolicy::kTopologyAware});
    TypeVerdictCache cache(pod);
    if (d.Uni(0, 1) == 0) opt.type_cache = &cache;
    const bool want = Fits(pod, node, opt);
    ASSERT_EQ(Fit(pod, node, opt).fits, want) << "iteration " << iter;
    ASSERT_EQ(FitsBySummary(pod, s), want) << "iteration " << iter;
    fits += want;
    ++total;
    for (const ContainerRequest& c : pod.containers) {
      if (!c.UsesGpu()) continue;
      for (const GpuState& g : node.gpus) ++reasons[CheckGpu(c, pod, g)];
    }
  }
  // Both answers are common, and every check the summary stands in for failed some GPU.
  EXPECT_GT(fits, total / 5);
  EXPECT_LT(fits, total * 4 / 5);
  for (FitReason r : {FitReason::kFits, FitReason::kCardNotHealth, FitReason::kCardCordoned,
                      FitReason::kCardTimeSlicingExhausted, FitReason::kCardInsufficientMemory,
                      FitReason::kCardInsufficientCore, FitReason::kExclusiveDeviceAllocateConflict,
                      FitReason::kCardComputeUnitsExhausted}) {
    EXPECT_GT(reasons[r], 100) << FitReasonName(r);
  }
}

}  // namespace
}  // namespace fracgpu::core
