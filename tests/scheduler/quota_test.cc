// Namespace GPU quotas (scheduler/quota.h, issue 34 item 5): which ResourceQuota entries count,
// how a request and grants are summed (per GPU × GPUs), memoryFactor, the messages.
#include "scheduler/quota.h"

#include <gtest/gtest.h>

namespace fracgpu::scheduler {
namespace {

using nlohmann::json;

json Quota(const std::string& ns, const std::string& name, json hard) {
  return {{"metadata", {{"name", name}, {"namespace", ns}}}, {"spec", {{"hard", hard}}}};
}

TEST(QuotaTracker, ReadsOnlyTheLimitsEntriesOfTheGpuResources) {
  QuotaTracker q;
  q.Upsert(Quota("ml", "a",
                 {{"limits.nvidia.com/gpumem", "8k"},  // the API server's canonical 8000
                  {"limits.nvidia.com/gpucores", 150},
                  {"requests.nvidia.com/gpumem", "1"},  // not HAMi's: ignored
                  {"limits.nvidia.com/gpu", "4"},       // Kubernetes' own business
                  {"limits.cpu", "500m"}}));
  q.Upsert(Quota("dev", "bad", {{"limits.nvidia.com/gpumem", "1.5"}}));  // not whole: ignored
  EXPECT_TRUE(q.Limited("ml"));
  EXPECT_FALSE(q.Limited("dev"));
  EXPECT_FALSE(q.Limited("m"));  // a prefix of a namespace is another namespace
  auto limits = q.Limits();
  ASSERT_EQ(limits.size(), 2u);
  EXPECT_EQ(limits[0].resource, "nvidia.com/gpucores");
  EXPECT_EQ(limits[0].limit, 150);
  EXPECT_EQ(limits[1].resource, "nvidia.com/gpumem");
  EXPECT_EQ(limits[1].limit, 8000);
  EXPECT_EQ(q.LimitingQuota("ml"), "ml/a limits.nvidia.com/gpucores");
  EXPECT_EQ(q.LimitingQuota("dev"), "");  // its only entry was not whole
  EXPECT_EQ(q.LimitingQuota("m"), "");
  q.Remove(Quota("ml", "a", json::object()));
  EXPECT_FALSE(q.Limited("ml"));
  EXPECT_EQ(q.LimitingQuota("ml"), "");
}

TEST(QuotaTracker, ChecksUsedPlusAskedAgainstEveryQuotaOfTheNamespace) {
  QuotaTracker q;
  q.Upsert(Quota("ml", "wide", {{"limits.nvidia.com/gpumem", "20000"}}));
  q.Upsert(Quota("ml", "narrow", {{"limits.nvidia.com/gpucores", "100"}}));
  EXPECT_EQ(q.Check("ml", {8000, 30}, {12000, 70}), "");  // exactly at both limits
  EXPECT_EQ(q.Check("ml", {8000, 30}, {12001, 0}),
            "ResourceQuotaNotFit: ResourceQuota ml/wide limits.nvidia.com/gpumem is 20000 (MiB), "
            "8000 used, 12001 asked");
  EXPECT_EQ(q.Check("ml", {0, 30}, {0, 71}),
            "ResourceQuotaNotFit: ResourceQuota ml/narrow limits.nvidia.com/gpucores is 100 (% of "
            "a card), 30 used, 71 asked");
  EXPECT_EQ(q.Check("other", {0, 0}, {1 << 30, 1000}), "");  // no quota there
  // A hard 0 allows nothing (as Kubernetes reads a quota), but asking for none passes.
  q.Upsert(Quota("zero", "none", {{"limits.nvidia.com/gpumem", "0"}}));
  EXPECT_NE(q.Check("zero", {0, 0}, {1, 0}), "");
  EXPECT_EQ(q.Check("zero", {0, 0}, {0, 50}), "");
}

TEST(QuotaTracker, MemoryLimitCountsInGpumemUnitsUnderMemoryFactor) {
  core::ResourceNames names;
  names.defaults.memory_factor = 1024;
  QuotaTracker q(names);
  q.Upsert(Quota("ml", "q", {{"limits.nvidia.com/gpumem", "10"}}));  // 10 GiB
  EXPECT_EQ(q.Check("ml", {8192, 0}, {2048, 0}), "");
  EXPECT_EQ(q.Check("ml", {8192, 0}, {2049, 0}),
            "ResourceQuotaNotFit: ResourceQuota ml/q limits.nvidia.com/gpumem is 10 (× "
            "memoryFactor 1024 = 10240 MiB), 8192 used, 2049 asked");
}

TEST(QuotaAmounts, PerGpuTimesGpusAndCardDependentMemory) {
  core::PodRequest r;
  core::ContainerRequest a;
  a.num_gpus = 2;
  a.mem_mib = 3000;
  a.cores_percent = 30;
  core::ContainerRequest b;
  b.num_gpus = 1;
  b.mem_percent = 50;  // known only on a card
  b.cores_percent = 0;
  core::ContainerRequest none;  // no GPU
  none.mem_mib = 999;
  r.containers = {a, b, none};
  bool card = false;
  QuotaAmount amount = AmountOfRequest(r, &card);
  EXPECT_EQ(amount.mem_mib, 6000);
  EXPECT_EQ(amount.cores, 60);
  EXPECT_TRUE(card);
  core::PodGrants grants = {{{"GPU-a", "NVIDIA", 3000, 30}, {"GPU-b", "NVIDIA", 3000, 30}},
                            {{"GPU-c", "NVIDIA", 8000, 0}},
                            {}};
  QuotaAmount held = AmountOfGrants(grants);
  EXPECT_EQ(held.mem_mib, 14000);
  EXPECT_EQ(held.cores, 60);
}

}  // namespace
}  // namespace fracgpu::scheduler
