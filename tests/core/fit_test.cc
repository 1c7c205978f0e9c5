// Tests of src/core/fit.h: the per-GPU checks of docs/design/hami-behaviour.md §3.6 (one case per
// row), node-level fit (policies, multi-GPU, NUMA binding, topology, several containers, init
// containers), the reason vocabulary and summary, and the usage bookkeeping of §3.8.
// Every expected grant, reason and usage below is worked out by hand in the comments.

#include "core/fit.h"

#include <gtest/gtest.h>

#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "../support/fit_fixtures.h"

namespace fracgpu::core {
namespace {

using testsupport::Ctr;
using testsupport::Name;
using testsupport::Node;
using testsupport::Pod;

constexpr const char* kV100 = "NVIDIA-Tesla V100-PCIE-32GB";

DeviceInfo Dev(const std::string& uuid, int64_t mem = 32768, int32_t numa = 0,
               const std::string& type = kV100, int32_t count = 10, int32_t devcore = 100) {
  DeviceInfo d;
  d.uuid = uuid;
  d.devmem_mib = mem;
  d.numa = numa;
  d.type = type;
  d.count = count;
  d.devcore = devcore;
  return d;
}

GpuState Gpu(DeviceInfo info, int32_t used = 0, int64_t used_mem = 0, int32_t used_cores = 0) {
  GpuState g;
  g.info = std::move(info);
  g.used = used;
  g.used_mem_mib = used_mem;
  g.used_cores = used_cores;
  return g;
}

DeviceGrant Grant(const std::string& uuid, int64_t mem, int32_t cores) {
  return DeviceGrant{uuid, "NVIDIA", mem, cores};
}

// ---------------------------------------------------------------------------------------
// CheckGpu: one case per row of the §3.6 table (and the boundaries of each).

struct CheckCase {
  const char* name;
  GpuState gpu;
  ContainerRequest container;
  PodRequest pod;  // annotations only; containers unused
  FitReason want;
};

PodRequest WithTypes(std::vector<std::string> use, std::vector<std::string> nouse) {
  PodRequest p;
  p.use_types = std::move(use);
  p.nouse_types = std::move(nouse);
  return p;
}
PodRequest WithUuids(std::vector<std::string> use, std::vector<std::string> nouse) {
  PodRequest p;
  p.use_uuids = std::move(use);
  p.nouse_uuids = std::move(nouse);
  return p;
}
GpuState Unhealthy() {
  GpuState g = Gpu(Dev("GPU-a"));
  g.info.health = false;
  return g;
}
GpuState Cordoned() {
  GpuState g = Gpu(Dev("GPU-a"));
  g.cordoned = true;
  return g;
}
GpuState UnhealthyCordoned() {
  GpuState g = Unhealthy();
  g.cordoned = true;
  return g;
}

// Names the case in test output instead of dumping its bytes.
void PrintTo(const CheckCase& tc, std::ostream* os) { *os << tc.name; }

class CheckGpuTest : public ::testing::TestWithParam<CheckCase> {};

TEST_P(CheckGpuTest, Reason) {
  const CheckCase& tc = GetParam();
  EXPECT_EQ(FitReasonName(CheckGpu(tc.container, tc.pod, tc.gpu)),
            std::string(FitReasonName(tc.want)))
      << tc.name;
}

INSTANTIATE_TEST_SUITE_P(
    Table, CheckGpuTest,
    ::testing::Values(
        CheckCase{"IdleCardFits", Gpu(Dev("GPU-a")), Ctr(1, 1000, 30), {}, FitReason::kFits},
        CheckCase{"Row1NotHealthy", Unhealthy(), Ctr(1, 1000, 30), {}, FitReason::kCardNotHealth},
        CheckCase{"Row2Cordoned", Cordoned(), Ctr(1, 1000, 30), {}, FitReason::kCardCordoned},
        CheckCase{"HealthCheckedBeforeCordon",
                  UnhealthyCordoned(),
                  Ctr(1, 1000, 30),
                  {},
                  FitReason::kCardNotHealth},
        CheckCase{"Row3UseTypeOtherModel", Gpu(Dev("GPU-a")), Ctr(1, 1000, 30),
                  WithTypes({"A100"}, {}), FitReason::kCardTypeMismatch},
        CheckCase{"Row3UseTypeSameModel", Gpu(Dev("GPU-a")), Ctr(1, 1000, 30),
                  WithTypes({"A100", "V100"}, {}), FitReason::kFits},
        CheckCase{"Row3NouseTypeWins", Gpu(Dev("GPU-a")), Ctr(1, 1000, 30),
                  WithTypes({"V100"}, {"V100"}), FitReason::kCardTypeMismatch},
        // Token rule (docs/design/CONTRACT.md §1): "V10" is not a token of the V100's type.
        CheckCase{"Row3TokenNotSubstring", Gpu(Dev("GPU-a")), Ctr(1, 1000, 30),
                  WithTypes({"V10"}, {}), FitReason::kCardTypeMismatch},
        CheckCase{"Row5UseUuidOther", Gpu(Dev("GPU-a")), Ctr(1, 1000, 30), WithUuids({"GPU-b"}, {}),
                  FitReason::kCardUuidMismatch},
        CheckCase{"Row5UseUuidListed", Gpu(Dev("GPU-a")), Ctr(1, 1000, 30),
                  WithUuids({"GPU-b", "GPU-a"}, {}), FitReason::kFits},
        CheckCase{"Row5NouseUuid", Gpu(Dev("GPU-a")), Ctr(1, 1000, 30), WithUuids({}, {"GPU-a"}),
                  FitReason::kCardUuidMismatch},
        // Row 6: count 10, used 10 → every slice taken; used 9 leaves one.
        CheckCase{"Row6SlicesExhausted",
                  Gpu(Dev("GPU-a"), 10, 0, 0),
                  Ctr(1, 1000, 0),
                  {},
                  FitReason::kCardTimeSlicingExhausted},
        CheckCase{
            "Row6LastSliceFree", Gpu(Dev("GPU-a"), 9, 0, 0), Ctr(1, 1000, 0), {}, FitReason::kFits},
        // Row 9: free = 32768 − 30000 = 2768 < 3000.
        CheckCase{"Row9MemoryShort",
                  Gpu(Dev("GPU-a"), 1, 30000, 0),
                  Ctr(1, 3000, 0),
                  {},
                  FitReason::kCardInsufficientMemory},
        // free = 32768 − 29768 = 3000 = request → fits.
        CheckCase{"Row9MemoryExact",
                  Gpu(Dev("GPU-a"), 1, 29768, 0),
                  Ctr(1, 3000, 0),
                  {},
                  FitReason::kFits},
        // 50 % of 32768 = 16384; free = 32768 − 16385 = 16383.
        CheckCase{"Row9PercentShort",
                  Gpu(Dev("GPU-a"), 1, 16385, 0),
                  Ctr(1, 0, 0, false, 50),
                  {},
                  FitReason::kCardInsufficientMemory},
        CheckCase{"Row9PercentExact",
                  Gpu(Dev("GPU-a"), 1, 16384, 0),
                  Ctr(1, 0, 0, false, 50),
                  {},
                  FitReason::kFits},
        // Row 10: free cores 100 − 80 = 20 < 30; 100 − 70 = 30 fits.
        CheckCase{"Row10CoresShort",
                  Gpu(Dev("GPU-a"), 1, 0, 80),
                  Ctr(1, 1000, 30),
                  {},
                  FitReason::kCardInsufficientCore},
        CheckCase{
            "Row10CoresExact", Gpu(Dev("GPU-a"), 1, 0, 70), Ctr(1, 1000, 30), {}, FitReason::kFits},
        // Row 11: cores 100 on a card with a (core-0) tenant: cores are free, but not idle.
        CheckCase{"Row11ExclusiveOnUsedCard",
                  Gpu(Dev("GPU-a"), 1, 1000, 0),
                  Ctr(1, 1000, 100),
                  {},
                  FitReason::kExclusiveDeviceAllocateConflict},
        CheckCase{
            "Row11ExclusiveOnIdleCard", Gpu(Dev("GPU-a")), Ctr(1, 1000, 100), {}, FitReason::kFits},
        // devcore 200 (core scaling 2): the exclusivity rule only applies to devcore 100.
        CheckCase{"Row11NotForScaledCores",
                  Gpu(Dev("GPU-a", 32768, 0, kV100, 10, 200), 1, 0, 50),
                  Ctr(1, 1000, 100),
                  {},
                  FitReason::kFits},
        // Row 12: cores-0 job onto a card whose 100 % is booked.
        CheckCase{"Row12CoresExhausted",
                  Gpu(Dev("GPU-a"), 1, 1000, 100),
                  Ctr(1, 1000, 0),
                  {},
                  FitReason::kCardComputeUnitsExhausted},
        CheckCase{"Row12OneCoreLeft",
                  Gpu(Dev("GPU-a"), 1, 1000, 99),
                  Ctr(1, 1000, 0),
                  {},
                  FitReason::kFits},
        // cores above 100 are clamped to 100: fits an idle card, not one with 1 % booked.
        CheckCase{
            "CoresClampedTo100Idle", Gpu(Dev("GPU-a")), Ctr(1, 1000, 150), {}, FitReason::kFits},
        CheckCase{"CoresClampedTo100Booked",
                  Gpu(Dev("GPU-a"), 1, 0, 1),
                  Ctr(1, 1000, 150),
                  {},
                  FitReason::kCardInsufficientCore},
        // A bare nvidia.com/gpu: 1 (whole memory, cores 100) on a card with 1 MiB used.
        CheckCase{"WholeCardNeedsAllMemory",
                  Gpu(Dev("GPU-a"), 0, 1, 0),
                  Ctr(1, 0, 100),
                  {},
                  FitReason::kCardInsufficientMemory},
        // Order: slices (row 6) are checked before memory (row 9).
        CheckCase{"SlicesBeforeMemory",
                  Gpu(Dev("GPU-a"), 10, 32768, 100),
                  Ctr(1, 1000, 0),
                  {},
                  FitReason::kCardTimeSlicingExhausted}),
    [](const ::testing::TestParamInfo<CheckCase>& info) { return std::string(info.param.name); });

TEST(FitReasonTest, NamesAreHamiStrings) {
  const std::vector<std::pair<FitReason, std::string>> want = {
      {FitReason::kCardNotHealth, "CardNotHealth"},
      {FitReason::kCardCordoned, "CardCordoned"},
      {FitReason::kCardTypeMismatch, "CardTypeMismatch"},
      {FitReason::kNumaNotFit, "NumaNotFit"},
      {FitReason::kCardUuidMismatch, "CardUuidMismatch"},
      {FitReason::kCardTimeSlicingExhausted, "CardTimeSlicingExhausted"},
      {FitReason::kCardInsufficientMemory, "CardInsufficientMemory"},
      {FitReason::kCardInsufficientCore, "CardInsufficientCore"},
      {FitReason::kExclusiveDeviceAllocateConflict, "ExclusiveDeviceAllocateConflict"},
      {FitReason::kCardComputeUnitsExhausted, "CardComputeUnitsExhausted"},
      {FitReason::kAllocatedCardsInsufficientRequest, "AllocatedCardsInsufficientRequest"},
      {FitReason::kNodeInsufficientDevice, "NodeInsufficientDevice"},
  };
  for (const auto& [r, s] : want) EXPECT_EQ(FitReasonName(r), s);
}

// ---------------------------------------------------------------------------------------
// Node-level fit.

// g0: 1 slice, 8192 MiB, 20 % used; g1 idle. Request 1 × 4096 MiB, 10 %.
// Scores: g0 = 10 × ((1+1)/10 + (10+20)/100 + (4096+8192)/32768) = 8.75,
//         g1 = 10 × (1/10 + 10/100 + 4096/32768) = 3.25.
NodeState TwoGpusOneBusy() { return Node({Gpu(Dev("GPU-0"), 1, 8192, 20), Gpu(Dev("GPU-1"))}); }

TEST(FitTest, SpreadPicksLeastUsedGpu) {
  PodRequest pod = Pod({Ctr(1, 4096, 10)});
  FitResult r = Fit(pod, TwoGpusOneBusy());
  ASSERT_TRUE(r.fits) << r.summary;
  EXPECT_EQ(r.grants, PodGrants({{Grant("GPU-1", 4096, 10)}}));
  EXPECT_EQ(r.gpu_positions, (std::vector<std::vector<uint16_t>>{{1}}));
  EXPECT_EQ(r.failed_container, -1);
  EXPECT_TRUE(r.summary.empty());
}

TEST(FitTest, BinpackPicksMostUsedGpu) {
  PodRequest pod = Pod({Ctr(1, 4096, 10)});
  pod.gpu_policy = GpuPolicy::kBinpack;
  FitResult r = Fit(pod, TwoGpusOneBusy());
  ASSERT_TRUE(r.fits);
  EXPECT_EQ(r.grants, PodGrants({{Grant("GPU-0", 4096, 10)}}));
}

TEST(FitTest, DefaultPolicyFromOptionsWhenPodSetsNone) {
  FitOptions opt;
  opt.default_gpu_policy = GpuPolicy::kBinpack;
  FitResult r = Fit(Pod({Ctr(1, 4096, 10)}), TwoGpusOneBusy(), opt);
  ASSERT_TRUE(r.fits);
  EXPECT_EQ(r.grants[0][0].uuid, "GPU-0");
}

TEST(FitTest, EqualGpusLowestPositionFirst) {
  NodeState node = Node({Gpu(Dev("GPU-0")), Gpu(Dev("GPU-1")), Gpu(Dev("GPU-2"))});
  for (GpuPolicy policy : {GpuPolicy::kSpread, GpuPolicy::kBinpack}) {
    PodRequest pod = Pod({Ctr(1, 1000, 0)});
    pod.gpu_policy = policy;
    FitResult r = Fit(pod, node);
    ASSERT_TRUE(r.fits);
    EXPECT_EQ(r.grants[0][0].uuid, "GPU-0") << GpuPolicyName(policy);
  }
}

TEST(FitTest, SpreadTieGoesToLowerNuma) {
  // Equal scores; GPU-0 is on NUMA 1, GPU-1 on NUMA 0: HAMi's spread tie-break prefers NUMA 0.
  NodeState node = Node({Gpu(Dev("GPU-0", 32768, 1)), Gpu(Dev("GPU-1", 32768, 0))});
  FitResult r = Fit(Pod({Ctr(1, 1000, 0)}), node);
  ASSERT_TRUE(r.fits);
  EXPECT_EQ(r.grants[0][0].uuid, "GPU-1");
}

TEST(FitTest, MultiGpuGetsDistinctCards) {
  // Request 2 whole cards on 3 idle GPUs: GPU-0 and GPU-1 (ties → position), never one twice.
  NodeState node = Node({Gpu(Dev("GPU-0")), Gpu(Dev("GPU-1")), Gpu(Dev("GPU-2"))});
  FitResult r = Fit(Pod({Ctr(2, 0, 100)}), node);
  ASSERT_TRUE(r.fits);
  EXPECT_EQ(r.grants, PodGrants({{Grant("GPU-0", 32768, 100), Grant("GPU-1", 32768, 100)}}));
}

TEST(FitTest, MultiGpuNeedsThatManyFreeCards) {
  // 2 cards asked, only GPU-2 idle (GPU-0 and GPU-1 have a cores-0 tenant: every SM is
  // free, but the card is not idle → exclusive conflict).
  NodeState node =
      Node({Gpu(Dev("GPU-0"), 1, 100, 0), Gpu(Dev("GPU-1"), 1, 100, 0), Gpu(Dev("GPU-2"))});
  FitResult r = Fit(Pod({Ctr(2, 1000, 100)}), node);
  EXPECT_FALSE(r.fits);
  EXPECT_EQ(r.node_reason, FitReason::kAllocatedCardsInsufficientRequest);
  EXPECT_EQ(r.gpu_reasons, (std::vector<FitReason>{FitReason::kExclusiveDeviceAllocateConflict,
                                                   FitReason::kExclusiveDeviceAllocateConflict,
                                                   FitReason::kAllocatedCardsInsufficientRequest}));
  EXPECT_EQ(r.summary,
            "2/3 ExclusiveDeviceAllocateConflict, 1/3 AllocatedCardsInsufficientRequest");
}

TEST(FitTest, NodeInsufficientDevice) {
  NodeState node = Node({Gpu(Dev("GPU-0")), Gpu(Dev("GPU-1"))});
  FitResult r = Fit(Pod({Ctr(3, 1000, 0)}), node);
  EXPECT_FALSE(r.fits);
  EXPECT_EQ(r.node_reason, FitReason::kNodeInsufficientDevice);
  EXPECT_EQ(r.summary, "3/2 NodeInsufficientDevice");
  EXPECT_EQ(r.failed_container, 0);
  EXPECT_TRUE(r.grants.empty());
}

TEST(FitTest, NodeWithoutGpus) {
  FitResult r = Fit(Pod({Ctr(1, 1000, 0)}), Node({}));
  EXPECT_FALSE(r.fits);
  EXPECT_EQ(r.summary, "1/0 NodeInsufficientDevice");
}

TEST(FitTest, SummaryCountsEveryGpuInCheckOrder) {
  // g0 unhealthy, g1 and g2 full memory, g3 fits; 2 GPUs asked → g3 accepted but alone.
  GpuState bad = Gpu(Dev("GPU-0"));
  bad.info.health = false;
  NodeState node = Node(
      {bad, Gpu(Dev("GPU-1"), 1, 32000, 10), Gpu(Dev("GPU-2"), 1, 32000, 10), Gpu(Dev("GPU-3"))});
  FitResult r = Fit(Pod({Ctr(2, 1000, 10)}), node);
  EXPECT_FALSE(r.fits);
  EXPECT_EQ(r.failed_container, 0);
  EXPECT_EQ(r.node_reason, FitReason::kAllocatedCardsInsufficientRequest);
  EXPECT_EQ(r.gpu_reasons,
            (std::vector<FitReason>{FitReason::kCardNotHealth, FitReason::kCardInsufficientMemory,
                                    FitReason::kCardInsufficientMemory,
                                    FitReason::kAllocatedCardsInsufficientRequest}));
  EXPECT_EQ(r.summary,
            "1/4 CardNotHealth, 2/4 CardInsufficientMemory, 1/4 AllocatedCardsInsufficientRequest");
}

TEST(FitTest, TypeMismatchOnEveryGpu) {
  NodeState node = Node({Gpu(Dev("GPU-0")), Gpu(Dev("GPU-1"))});
  PodRequest pod = Pod({Ctr(1, 1000, 0)});
  pod.use_types = {"A100"};
  FitResult r = Fit(pod, node);
  EXPECT_FALSE(r.fits);
  EXPECT_EQ(r.summary, "2/2 CardTypeMismatch");
}

TEST(FitTest, TypeCacheGivesSameAnswer) {
  NodeState node = Node({Gpu(Dev("GPU-0", 81920, 0, "NVIDIA A100-SXM4-80GB")), Gpu(Dev("GPU-1"))});
  PodRequest pod = Pod({Ctr(1, 1000, 0)});
  pod.use_types = {"A100"};
  TypeVerdictCache cache(pod);
  FitOptions opt;
  opt.type_cache = &cache;
  for (int i = 0; i < 2; ++i) {  // second round answered from the cache
    FitResult r = Fit(pod, node, opt);
    ASSERT_TRUE(r.fits);
    EXPECT_EQ(r.grants[0][0].uuid, "GPU-0");
    EXPECT_TRUE(Fits(pod, node, opt));
  }
  EXPECT_TRUE(cache.Allowed("NVIDIA A100-SXM4-80GB"));
  EXPECT_FALSE(cache.Allowed(kV100));
}

TEST(FitTest, WithoutReasonsNoStrings) {
  FitOptions opt;
  opt.want_reasons = false;
  FitResult r = Fit(Pod({Ctr(1, 40000, 0)}), Node({Gpu(Dev("GPU-0"))}), opt);
  EXPECT_FALSE(r.fits);
  EXPECT_EQ(r.node_reason, FitReason::kAllocatedCardsInsufficientRequest);
  EXPECT_TRUE(r.summary.empty());
  EXPECT_TRUE(r.gpu_reasons.empty());
}

TEST(FitTest, PodWithoutGpuFitsWithEmptyParts) {
  PodRequest pod = Pod({Ctr(0, 0, 0, true), Ctr(0, 0, 0)});
  FitResult r = Fit(pod, Node({}));
  ASSERT_TRUE(r.fits);
  EXPECT_EQ(r.grants, PodGrants({{}, {}}));
  EXPECT_TRUE(Fits(pod, Node({})));
}

TEST(FitTest, ContainersWithoutGpuKeepTheirIndex) {
  // [init without GPU, app with GPU, app without GPU] → ";GPU-0,…;;" in the annotation.
  PodRequest pod = Pod({Ctr(0, 0, 0, true), Ctr(1, 3000, 0), Ctr(0, 0, 0)});
  FitResult r = Fit(pod, Node({Gpu(Dev("GPU-0"))}));
  ASSERT_TRUE(r.fits);
  EXPECT_EQ(r.grants, PodGrants({{}, {Grant("GPU-0", 3000, 0)}, {}}));
}

TEST(FitTest, AppContainersShareACard) {
  // One 32768 MiB GPU; two app containers of 16384 MiB and 50 % each: both on GPU-0.
  PodRequest pod = Pod({Ctr(1, 16384, 50), Ctr(1, 16384, 50)});
  FitResult r = Fit(pod, Node({Gpu(Dev("GPU-0"))}));
  ASSERT_TRUE(r.fits) << r.summary;
  EXPECT_EQ(r.grants, PodGrants({{Grant("GPU-0", 16384, 50)}, {Grant("GPU-0", 16384, 50)}}));
}

TEST(FitTest, LaterAppContainerSeesEarlierUsage) {
  // After the two containers above, GPU-0 has 0 MiB and 0 % free: a third cores-0 container
  // with 1 MiB fails the memory check first (32768 − 32768 = 0 < 1).
  PodRequest pod = Pod({Ctr(1, 16384, 50), Ctr(1, 16384, 50), Ctr(1, 1, 0)});
  FitResult r = Fit(pod, Node({Gpu(Dev("GPU-0"))}));
  EXPECT_FALSE(r.fits);
  EXPECT_EQ(r.failed_container, 2);
  EXPECT_EQ(r.summary, "1/1 CardInsufficientMemory");
  EXPECT_FALSE(Fits(pod, Node({Gpu(Dev("GPU-0"))})));
}

TEST(FitTest, LaterAppContainerComputeUnitsExhausted) {
  // 2 × (8192 MiB, 50 %) book all SMs; a cores-0 container with memory left is refused.
  PodRequest pod = Pod({Ctr(1, 8192, 50), Ctr(1, 8192, 50), Ctr(1, 1000, 0)});
  FitResult r = Fit(pod, Node({Gpu(Dev("GPU-0"))}));
  EXPECT_FALSE(r.fits);
  EXPECT_EQ(r.failed_container, 2);
  EXPECT_EQ(r.summary, "1/1 CardComputeUnitsExhausted");
}

TEST(FitTest, SecondAppContainerSpreadsToOtherGpu) {
  // Two idle GPUs; each container 8192 MiB, 25 %. First → GPU-0 (tie). Then
  // GPU-0 = 10 × (2/10 + 50/100 + 16384/32768) = 12, GPU-1 = 10 × (1/10 + 25/100 + 8192/32768) = 6.
  NodeState node = Node({Gpu(Dev("GPU-0")), Gpu(Dev("GPU-1"))});
  PodRequest pod = Pod({Ctr(1, 8192, 25), Ctr(1, 8192, 25)});
  FitResult spread = Fit(pod, node);
  ASSERT_TRUE(spread.fits);
  EXPECT_EQ(spread.grants, PodGrants({{Grant("GPU-0", 8192, 25)}, {Grant("GPU-1", 8192, 25)}}));
  pod.gpu_policy = GpuPolicy::kBinpack;
  FitResult binpack = Fit(pod, node);
  ASSERT_TRUE(binpack.fits);
  EXPECT_EQ(binpack.grants, PodGrants({{Grant("GPU-0", 8192, 25)}, {Grant("GPU-0", 8192, 25)}}));
}

TEST(FitTest, TwoAppContainersCannotBothTakeAnExclusiveCard) {
  // One GPU, two containers of cores 100: the second meets Used > 0.
  PodRequest pod = Pod({Ctr(1, 1000, 100), Ctr(1, 1000, 100)});
  FitResult r = Fit(pod, Node({Gpu(Dev("GPU-0"))}));
  EXPECT_FALSE(r.fits);
  EXPECT_EQ(r.failed_container, 1);
  EXPECT_EQ(r.summary, "1/1 CardInsufficientCore");  // 100 − 100 = 0 < 100 comes first
}

TEST(FitTest, InitAndAppContainerRunOneAfterTheOther) {
  // Init 20000 MiB then app 20000 MiB on one 32768 MiB card: never at the same time → fits.
  PodRequest pod = Pod({Ctr(1, 20000, 0, true), Ctr(1, 20000, 0)});
  FitResult r = Fit(pod, Node({Gpu(Dev("GPU-0"))}));
  ASSERT_TRUE(r.fits) << r.summary;
  EXPECT_EQ(r.grants, PodGrants({{Grant("GPU-0", 20000, 0)}, {Grant("GPU-0", 20000, 0)}}));
}

TEST(FitTest, TwoAppContainersDoNotRunOneAfterTheOther) {
  // The same two requests as app containers need 40000 MiB at once.
  PodRequest pod = Pod({Ctr(1, 20000, 0), Ctr(1, 20000, 0)});
  FitResult r = Fit(pod, Node({Gpu(Dev("GPU-0"))}));
  EXPECT_FALSE(r.fits);
  EXPECT_EQ(r.failed_container, 1);
  EXPECT_EQ(r.summary, "1/1 CardInsufficientMemory");
}

TEST(FitTest, InitContainersDoNotSeeEachOther) {
  PodRequest pod = Pod({Ctr(1, 30000, 0, true), Ctr(1, 30000, 0, true), Ctr(0, 0, 0)});
  FitResult r = Fit(pod, Node({Gpu(Dev("GPU-0"))}));
  ASSERT_TRUE(r.fits);
  EXPECT_EQ(r.grants, PodGrants({{Grant("GPU-0", 30000, 0)}, {Grant("GPU-0", 30000, 0)}, {}}));
}

TEST(FitTest, InitContainerTooBigFails) {
  PodRequest pod = Pod({Ctr(1, 40000, 0, true), Ctr(1, 1000, 0)});
  FitResult r = Fit(pod, Node({Gpu(Dev("GPU-0"))}));
  EXPECT_FALSE(r.fits);
  EXPECT_EQ(r.failed_container, 0);
  EXPECT_EQ(r.summary, "1/1 CardInsufficientMemory");
}

// NUMA: GPU-0, GPU-1 on NUMA 0; GPU-2, GPU-3 on NUMA 1; GPU-3 has no memory left.
NodeState NumaNode(bool gpu1_full) {
  return Node({Gpu(Dev("GPU-0", 32768, 0)),
               Gpu(Dev("GPU-1", 32768, 0), 1, gpu1_full ? 32768 : 0, 0),
               Gpu(Dev("GPU-2", 32768, 1)), Gpu(Dev("GPU-3", 32768, 1), 1, 32768, 0)});
}

TEST(FitTest, NumaBindTakesOneNumaNode) {
  // spread + numa-bind scans NUMA 1 first: GPU-2 accepted, GPU-3 full → restart on NUMA 0:
  // GPU-0 (score 10×(1/10+0+1000/32768)) before GPU-1 (one slice used) → {GPU-0, GPU-1}.
  PodRequest pod = Pod({Ctr(2, 1000, 0)});
  pod.numa_bind = true;
  FitResult r = Fit(pod, NumaNode(false));
  ASSERT_TRUE(r.fits) << r.summary;
  EXPECT_EQ(r.grants, PodGrants({{Grant("GPU-0", 1000, 0), Grant("GPU-1", 1000, 0)}}));
}

TEST(FitTest, WithoutNumaBindGpusMayCrossNuma) {
  // Spread order: GPU-0 (NUMA 0) and GPU-2 (NUMA 1) are idle and tie → NUMA 0 first.
  FitResult r = Fit(Pod({Ctr(2, 1000, 0)}), NumaNode(true));
  ASSERT_TRUE(r.fits);
  EXPECT_EQ(r.grants, PodGrants({{Grant("GPU-0", 1000, 0), Grant("GPU-2", 1000, 0)}}));
}

TEST(FitTest, NumaBindNoNumaNodeHasEnough) {
  // NUMA 1: GPU-2 accepted, GPU-3 full; NUMA 0: GPU-1 full, GPU-0 accepted → fails.
  PodRequest pod = Pod({Ctr(2, 1000, 0)});
  pod.numa_bind = true;
  FitResult r = Fit(pod, NumaNode(true));
  EXPECT_FALSE(r.fits);
  EXPECT_EQ(r.gpu_reasons,
            (std::vector<FitReason>{FitReason::kAllocatedCardsInsufficientRequest,
                                    FitReason::kCardInsufficientMemory, FitReason::kNumaNotFit,
                                    FitReason::kCardInsufficientMemory}));
  EXPECT_EQ(r.summary,
            "1/4 NumaNotFit, 2/4 CardInsufficientMemory, 1/4 AllocatedCardsInsufficientRequest");
  EXPECT_FALSE(Fits(pod, NumaNode(true)));
}

TEST(FitTest, NumaBindBinpackScansLowNumaFirst) {
  // binpack + numa-bind: NUMA ascending → NUMA 0's GPUs, most used first: GPU-1 then GPU-0.
  PodRequest pod = Pod({Ctr(2, 1000, 0)});
  pod.numa_bind = true;
  pod.gpu_policy = GpuPolicy::kBinpack;
  FitResult r = Fit(pod, NumaNode(false));
  ASSERT_TRUE(r.fits);
  EXPECT_EQ(r.grants, PodGrants({{Grant("GPU-1", 1000, 0), Grant("GPU-0", 1000, 0)}}));
}

// Topology: links GPU-0–1 100, 0–2 10, 0–3 30, 1–2 10, 1–3 10, 2–3 200.
NodeState TopoNode() {
  NodeState n = Node({Gpu(Dev("GPU-0")), Gpu(Dev("GPU-1")), Gpu(Dev("GPU-2")), Gpu(Dev("GPU-3"))});
  auto link = [&](const char* a, const char* b, int32_t s) {
    n.topology[a][b] = s;
    n.topology[b][a] = s;
  };
  link("GPU-0", "GPU-1", 100);
  link("GPU-0", "GPU-2", 10);
  link("GPU-0", "GPU-3", 30);
  link("GPU-1", "GPU-2", 10);
  link("GPU-1", "GPU-3", 10);
  n.topology["GPU-2"]["GPU-3"] = 200;  // published in one direction only
  return n;
}

TEST(FitTest, TopologyOneGpuTakesTheWorstConnected) {
  // Sums: GPU-0 100+10+30 = 140, GPU-1 100+10+10 = 120, GPU-2 220, GPU-3 240 → GPU-1.
  PodRequest pod = Pod({Ctr(1, 1000, 0)});
  pod.gpu_policy = GpuPolicy::kTopologyAware;
  FitResult r = Fit(pod, TopoNode());
  ASSERT_TRUE(r.fits);
  EXPECT_EQ(r.grants, PodGrants({{Grant("GPU-1", 1000, 0)}}));
}

TEST(FitTest, TopologyTwoGpusTakeTheBestPair) {
  PodRequest pod = Pod({Ctr(2, 1000, 0)});
  pod.gpu_policy = GpuPolicy::kTopologyAware;
  FitResult r = Fit(pod, TopoNode());
  ASSERT_TRUE(r.fits);
  EXPECT_EQ(r.grants, PodGrants({{Grant("GPU-2", 1000, 0), Grant("GPU-3", 1000, 0)}}));
}

TEST(FitTest, TopologyThreeGpusTakeTheBestTriple) {
  // {0,1,2} 120, {0,1,3} 140, {0,2,3} 240, {1,2,3} 220 → {GPU-0, GPU-2, GPU-3}.
  PodRequest pod = Pod({Ctr(3, 1000, 0)});
  pod.gpu_policy = GpuPolicy::kTopologyAware;
  FitResult r = Fit(pod, TopoNode());
  ASSERT_TRUE(r.fits);
  EXPECT_EQ(
      r.grants,
      PodGrants({{Grant("GPU-0", 1000, 0), Grant("GPU-2", 1000, 0), Grant("GPU-3", 1000, 0)}}));
}

TEST(FitTest, TopologyChoosesOnlyAmongFittingGpus) {
  // GPU-2 full: pairs among {0,1,3}: 0–1 100, 0–3 30, 1–3 10 → {GPU-0, GPU-1}.
  NodeState node = TopoNode();
  node.gpus[2].used = 1;
  node.gpus[2].used_mem_mib = 32768;
  PodRequest pod = Pod({Ctr(2, 1000, 0)});
  pod.gpu_policy = GpuPolicy::kTopologyAware;
  FitResult r = Fit(pod, node);
  ASSERT_TRUE(r.fits);
  EXPECT_EQ(r.grants, PodGrants({{Grant("GPU-0", 1000, 0), Grant("GPU-1", 1000, 0)}}));
  // Exactly three fit and three are asked: they are taken as they are.
  pod.containers[0].num_gpus = 3;
  r = Fit(pod, node);
  ASSERT_TRUE(r.fits);
  EXPECT_EQ(r.gpu_positions, (std::vector<std::vector<uint16_t>>{{0, 1, 3}}));
}

TEST(FitTest, TopologyWithoutScoresFallsBackToScanOrder) {
  NodeState node = Node({Gpu(Dev("GPU-0")), Gpu(Dev("GPU-1")), Gpu(Dev("GPU-2"))});
  PodRequest pod = Pod({Ctr(2, 1000, 0)});
  pod.gpu_policy = GpuPolicy::kTopologyAware;
  FitResult r = Fit(pod, node);
  ASSERT_TRUE(r.fits);
  EXPECT_EQ(r.gpu_positions, (std::vector<std::vector<uint16_t>>{{0, 1}}));
}

// An orderer that tries GPUs in a fixed order (the fragmentation-aware hook).
class FixedOrder : public GpuOrderer {
 public:
  explicit FixedOrder(std::vector<uint16_t> order) : order_(std::move(order)) {}
  void Order(const ContainerRequest&, const PodRequest&, const NodeState&,
             std::span<const GpuUsage>, std::span<uint16_t> order) const override {
    std::copy(order_.begin(), order_.end(), order.begin());
  }

 private:
  std::vector<uint16_t> order_;
};

TEST(FitTest, OrdererDecidesTheGpu) {
  NodeState node = Node({Gpu(Dev("GPU-0")), Gpu(Dev("GPU-1")), Gpu(Dev("GPU-2"))});
  FixedOrder reverse({2, 1, 0});
  FitOptions opt;
  opt.orderer = &reverse;
  FitResult r = Fit(Pod({Ctr(1, 1000, 0)}), node, opt);
  ASSERT_TRUE(r.fits);
  EXPECT_EQ(r.grants[0][0].uuid, "GPU-2");
}

TEST(FitTest, OrdererStillGetsEveryCheck) {
  // Preferred GPU-2 is unhealthy: fit falls through to the next in the orderer's list.
  NodeState node = Node({Gpu(Dev("GPU-0")), Gpu(Dev("GPU-1")), Gpu(Dev("GPU-2"))});
  node.gpus[2].info.health = false;
  FixedOrder reverse({2, 1, 0});
  FitOptions opt;
  opt.orderer = &reverse;
  FitResult r = Fit(Pod({Ctr(1, 1000, 0)}), node, opt);
  ASSERT_TRUE(r.fits);
  EXPECT_EQ(r.grants[0][0].uuid, "GPU-1");
}

TEST(FitTest, OrdererUnderNumaBindIsGroupedByNuma) {
  // The orderer interleaves NUMA nodes (0, 1, 0); grouped as (GPU-0, GPU-1 | GPU-2) the
  // first NUMA node in its ranking holds both GPUs.
  NodeState node =
      Node({Gpu(Dev("GPU-0", 32768, 0)), Gpu(Dev("GPU-1", 32768, 0)), Gpu(Dev("GPU-2", 32768, 1))});
  FixedOrder interleaved({0, 2, 1});
  FitOptions opt;
  opt.orderer = &interleaved;
  PodRequest pod = Pod({Ctr(2, 1000, 0)});
  pod.numa_bind = true;
  FitResult r = Fit(pod, node, opt);
  ASSERT_TRUE(r.fits) << r.summary;
  EXPECT_EQ(r.gpu_positions, (std::vector<std::vector<uint16_t>>{{0, 1}}));
  EXPECT_TRUE(Fits(pod, node, opt));
}

TEST(FitTest, WideNodeBeyondInlineScratch) {
  // 20 idle GPUs (more than the 16 kept on the stack): two app containers of 1 GPU each →
  // GPU-0 (tie → position), then GPU-1 (GPU-0 now scores higher under spread).
  std::vector<GpuState> gpus;
  for (int i = 0; i < 20; ++i) gpus.push_back(Gpu(Dev(Name(i), 32768, i / 10)));
  NodeState node = Node(gpus);
  PodRequest pod = Pod({Ctr(1, 1000, 10), Ctr(1, 1000, 10)});
  FitResult r = Fit(pod, node);
  ASSERT_TRUE(r.fits);
  EXPECT_EQ(r.gpu_positions, (std::vector<std::vector<uint16_t>>{{0}, {1}}));
  EXPECT_TRUE(Fits(pod, node));
  // numa-bind, 11 GPUs asked: each NUMA node holds only 10.
  PodRequest wide = Pod({Ctr(11, 1000, 0)});
  wide.numa_bind = true;
  EXPECT_FALSE(Fits(wide, node));
  EXPECT_EQ(Fit(wide, node).summary, "10/20 NumaNotFit, 10/20 AllocatedCardsInsufficientRequest");
  wide.containers[0].num_gpus = 10;
  EXPECT_TRUE(Fits(wide, node));
}

// Fits() (counting shortcut or ordered greedy) must agree with Fit().fits everywhere.
// Random nodes and pods from a fixed seed; the expected value is Fit itself, an
// independent code path for pods with at most one GPU app container.
TEST(FitTest, FitsAgreesWithFit) {
  std::mt19937 rng(12345);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int fits = 0, total = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::vector<GpuState> gpus;
    const int n = uni(0, 8);
    for (int i = 0; i < n; ++i) {
      GpuState g = Gpu(Dev(Name(i), 16384 * uni(1, 2), uni(0, 1),
                           uni(0, 3) == 0 ? "NVIDIA A100-SXM4-80GB" : kV100, uni(1, 4)));
      g.used = uni(0, 2);
      g.used_mem_mib = g.used == 0 ? 0 : 1024 * uni(0, 16);
      g.used_cores = g.used == 0 ? 0 : 10 * uni(0, 10);
      g.info.health = uni(0, 9) != 0;
      g.cordoned = uni(0, 19) == 0;
      gpus.push_back(g);
    }
    NodeState node = Node(gpus);
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        if (i != j) node.topology[Name(i)][Name(j)] = uni(0, 5) * 10;
      }
    }
    std::vector<ContainerRequest> containers;
    const int nc = uni(1, 3);
    for (int c = 0; c < nc; ++c) {
      containers.push_back(Ctr(uni(0, 3), uni(0, 1) ? 1024 * uni(1, 12) : 0, 10 * uni(0, 10),
                               c == 0 && uni(0, 1), 25 * uni(1, 4)));
    }
    PodRequest pod = Pod(containers);
    pod.numa_bind = uni(0, 2) == 0;
    const int pol = uni(0, 2);
    pod.gpu_policy = pol == 0   ? GpuPolicy::kSpread
                     : pol == 1 ? GpuPolicy::kBinpack
                                : GpuPolicy::kTopologyAware;
    if (uni(0, 4) == 0) pod.use_types = {"A100"};
    FitOptions opt;
    opt.want_reasons = uni(0, 1);
    FitResult r = Fit(pod, node, opt);
    ASSERT_EQ(Fits(pod, node, opt), r.fits) << "iteration " << iter;
    fits += r.fits;
    ++total;
    if (r.fits) {
      // Every grant respects the checks against the node as it is (the container alone).
      for (size_t c = 0; c < pod.containers.size(); ++c) {
        ASSERT_EQ(r.grants[c].size(), static_cast<size_t>(std::max(0, pod.containers[c].num_gpus)));
        for (uint16_t p : r.gpu_positions[c]) {
          ASSERT_EQ(CheckGpu(pod.containers[c], pod, node.gpus[p]), FitReason::kFits);
        }
      }
    }
  }
  // Both outcomes occur often enough for the comparison to mean something.
  EXPECT_GT(fits, total / 10);
  EXPECT_LT(fits, total * 9 / 10);
}

// ---------------------------------------------------------------------------------------
// Usage bookkeeping (§3.8).

// init0: A 3000/0; init1: A 5000/20; app0: A 2000/10 + B 1000/0; app1: A 1500/30.
PodGrants MixedGrants() {
  return {{Grant("GPU-A", 3000, 0)},
          {Grant("GPU-A", 5000, 20)},
          {Grant("GPU-A", 2000, 10), Grant("GPU-B", 1000, 0)},
          {Grant("GPU-A", 1500, 30)}};
}

TEST(UsageTest, CollapseTakesMaxOfInitPeakAndAppSum) {
  // A: slots max(1, 2) = 2; mem max(5000, 3500) = 5000; cores max(20, 40) = 40. B: 1/1000/0.
  auto r = CollapsePodUsage(MixedGrants(), 2);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].uuid, "GPU-A");
  EXPECT_EQ((*r)[0].slots, 2);
  EXPECT_EQ((*r)[0].mem_mib, 5000);
  EXPECT_EQ((*r)[0].cores, 40);
  EXPECT_EQ((*r)[1].uuid, "GPU-B");
  EXPECT_EQ((*r)[1].slots, 1);
  EXPECT_EQ((*r)[1].mem_mib, 1000);
  EXPECT_EQ((*r)[1].cores, 0);
}

TEST(UsageTest, CollapseAfterInitFinishedCountsAppsOnly) {
  // A: slots 2, mem 2000 + 1500 = 3500, cores 40.
  auto r = CollapsePodUsage(MixedGrants(), 2, /*init_finished=*/true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].slots, 2);
  EXPECT_EQ((*r)[0].mem_mib, 3500);
  EXPECT_EQ((*r)[0].cores, 40);
}

TEST(UsageTest, GpuUsedOnlyByInitTakesOneSlot) {
  auto r = CollapsePodUsage({{Grant("GPU-C", 4000, 50)}, {Grant("GPU-C", 6000, 0)}, {}}, 2);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].slots, 1);
  EXPECT_EQ((*r)[0].mem_mib, 6000);
  EXPECT_EQ((*r)[0].cores, 50);
}

TEST(UsageTest, CollapseRejectsTooManyInitContainers) {
  auto r = CollapsePodUsage({{}, {}}, 3);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "num_init 3 exceeds the 2 containers of the allocation");
}

NodeState ABNode() { return Node({Gpu(Dev("GPU-A"), 1, 1000, 10), Gpu(Dev("GPU-B"))}); }

TEST(UsageTest, AddThenRemoveRestoresTheNode) {
  NodeState node = ABNode();
  ASSERT_TRUE(AddPodGrants(node, MixedGrants(), 2).ok());
  EXPECT_EQ(node.gpus[0].used, 3);
  EXPECT_EQ(node.gpus[0].used_mem_mib, 6000);
  EXPECT_EQ(node.gpus[0].used_cores, 50);
  EXPECT_EQ(node.gpus[1].used, 1);
  EXPECT_EQ(node.gpus[1].used_mem_mib, 1000);
  ASSERT_TRUE(RemovePodGrants(node, MixedGrants(), 2).ok());
  const NodeState before = ABNode();
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(node.gpus[i].used, before.gpus[i].used);
    EXPECT_EQ(node.gpus[i].used_mem_mib, before.gpus[i].used_mem_mib);
    EXPECT_EQ(node.gpus[i].used_cores, before.gpus[i].used_cores);
  }
}

TEST(UsageTest, AddUnknownGpuChangesNothing) {
  NodeState node = ABNode();
  Status s = AddPodGrants(node, {{Grant("GPU-A", 100, 1)}, {Grant("GPU-Z", 100, 1)}}, 0);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "GPU GPU-Z is not on node node-a");
  EXPECT_EQ(node.gpus[0].used, 1);
  EXPECT_EQ(node.gpus[0].used_mem_mib, 1000);
}

TEST(UsageTest, RemoveMoreThanAddedChangesNothing) {
  // GPU-B's part (1 slot, 500 MiB) could be removed, GPU-A's 2000 MiB could not (1000 used).
  NodeState node = Node({Gpu(Dev("GPU-A"), 1, 1000, 10), Gpu(Dev("GPU-B"), 1, 500, 0)});
  Status s = RemovePodGrants(node, {{Grant("GPU-B", 500, 0)}, {Grant("GPU-A", 2000, 0)}}, 0);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "removing the usage of GPU GPU-A from node node-a would make its used memory (MiB) "
            "negative (that usage was never added)");
  EXPECT_EQ(node.gpus[1].used, 1);  // GPU-B's part was not taken away either
  EXPECT_EQ(node.gpus[1].used_mem_mib, 500);
  EXPECT_EQ(node.gpus[0].used_mem_mib, 1000);
}

TEST(UsageTest, FitThenAddMakesTheNextPodSeeIt) {
  // A pod of 1 × 20000 MiB fits an idle card once; after adding its grants, not again.
  NodeState node = Node({Gpu(Dev("GPU-0"))});
  PodRequest pod = Pod({Ctr(1, 20000, 0)});
  FitResult r = Fit(pod, node);
  ASSERT_TRUE(r.fits);
  ASSERT_TRUE(AddPodGrants(node, r.grants, CountInitContainers(pod)).ok());
  EXPECT_FALSE(Fits(pod, node));
  EXPECT_EQ(Fit(pod, node).summary, "1/1 CardInsufficientMemory");
}

TEST(UsageTest, CountInitContainers) {
  EXPECT_EQ(CountInitContainers(Pod({Ctr(0, 0, 0, true), Ctr(1, 0, 0, true), Ctr(1, 0, 0)})), 2u);
  EXPECT_EQ(CountInitContainers(Pod({Ctr(1, 0, 0)})), 0u);
  EXPECT_EQ(CountInitContainers(Pod({})), 0u);
}

}  // namespace
}  // namespace fracgpu::core
