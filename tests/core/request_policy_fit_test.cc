// HAMi v2.10.0's pod-level scheduling annotations, parsed by ParsePodRequest and honoured by
// core::Fit: gpu-scheduler-policy "mutex", "numa" and comma chains, nvidia.com/vgpu-mode and
// hami.io/device-scoring-weights. Every expected GPU is worked out by hand from HAMi's
// `DeviceUsageList.Less` (sorted ascending, scanned from the end) in the comments.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/fit.h"
#include "core/request.h"

namespace fracgpu::core {
namespace {

using nlohmann::json;

GpuState Gpu(const char* uuid, int32_t numa, int32_t used, int64_t used_mem) {
  GpuState g;
  g.info.uuid = uuid;
  g.info.devmem_mib = 32768;
  g.info.numa = numa;
  g.info.type = "NVIDIA-Tesla V100-PCIE-32GB";
  g.used = used;
  g.used_mem_mib = used_mem;
  return g;
}

// GPU-0 numa 0 busy (1 slice, 8000 MiB); GPU-1 numa 1 idle; GPU-2 numa 0 idle;
// GPU-3 numa 1 busy (2 slices, 16000 MiB).
NodeState FourGpus() {
  NodeState n;
  n.name = "node-a";
  n.gpus = {Gpu("GPU-0", 0, 1, 8000), Gpu("GPU-1", 1, 0, 0), Gpu("GPU-2", 0, 0, 0),
            Gpu("GPU-3", 1, 2, 16000)};
  for (size_t i = 0; i < n.gpus.size(); ++i) n.gpus[i].info.index = static_cast<int32_t>(i);
  return n;
}

// One container of 1 GPU, 4000 MiB, no SM limit, with the given annotations.
PodRequest Pod(json annotations) {
  json pod = {{"metadata", {{"name", "p"}, {"annotations", annotations}}},
              {"spec",
               {{"containers",
                 json::array({{{"name", "app"},
                               {"resources", {{"limits", {{"nvidia.com/gpumem", "4000"}}}}}}})}}}};
  Result<PodRequest> r = ParsePodRequest(pod);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : PodRequest{};
}

std::string Chosen(const PodRequest& pod, const NodeState& node) {
  FitResult f = Fit(pod, node);
  if (!f.fits || f.grants.empty() || f.grants[0].empty()) return "no fit: " + f.summary;
  EXPECT_EQ(Fits(pod, node), true);
  return f.grants[0][0].uuid;
}

TEST(RequestPolicyFitTest, ChainsPickAsHamiDoes) {
  const NodeState node = FourGpus();
  struct Case {
    const char* policy;
    const char* want;
  };
  for (const Case& c : std::vector<Case>{
           // Scores (10 × (slots + cores + memory)): GPU-3 > GPU-0 > GPU-1 = GPU-2.
           // binpack,numa: score ascending, so the most used (GPU-3) is read first.
           {"binpack,numa", "GPU-3"},
           // spread,numa: score descending then NUMA ascending → [3, 0, 2, 1]; read from the
           // end, GPU-1 (numa 1) wins the tie with GPU-2.
           {"spread,numa", "GPU-1"},
           // numa alone: NUMA ascending then index → [0, 2, 1, 3] → GPU-3.
           {"numa", "GPU-3"},
           // mutex: busy GPUs first, idle ones (1, 2) at the tail by NUMA ascending → GPU-1;
           // the busy GPUs are refused anyway.
           {"mutex", "GPU-1"},
           // spread,numa,mutex: the spread,numa order among idle GPUs → GPU-1.
           {"spread,numa,mutex", "GPU-1"},
           // binpack,mutex: binpack order, but GPU-3 and GPU-0 are busy → an idle one; both
           // idle GPUs tie on score, index tiebreak ascending → [.., 1, 2] → GPU-2.
           {"binpack,mutex", "GPU-2"},
       }) {
    SCOPED_TRACE(c.policy);
    EXPECT_EQ(Chosen(Pod(json{{"hami.io/gpu-scheduler-policy", c.policy}}), node), c.want);
  }
}

TEST(RequestPolicyFitTest, MutexRefusesBusyGpus) {
  NodeState node = FourGpus();
  node.gpus[1].used = 1;
  node.gpus[2].used = 1;  // every GPU has a tenant now
  const PodRequest pod = Pod(json{{"hami.io/gpu-scheduler-policy", "mutex"}});
  FitResult f = Fit(pod, node);
  EXPECT_FALSE(f.fits);
  EXPECT_EQ(f.summary, "4/4 ExclusiveDeviceAllocateConflict");
  EXPECT_FALSE(Fits(pod, node));
  // Without mutex the same pod shares a card.
  EXPECT_TRUE(Fits(Pod(json::object()), node));
}

TEST(RequestPolicyFitTest, VgpuModeMatchesTheGpuMode) {
  const NodeState node = FourGpus();  // every GPU reports mode "hami-core"
  EXPECT_NE(Chosen(Pod(json{{"nvidia.com/vgpu-mode", "hami-core"}}), node).rfind("GPU-", 0),
            std::string::npos);
  FitResult f = Fit(Pod(json{{"nvidia.com/vgpu-mode", "mig"}}), node);
  EXPECT_FALSE(f.fits);
  EXPECT_EQ(f.summary, "4/4 CardTypeMismatch");
}

TEST(RequestPolicyFitTest, ScoringWeightsChangeTheSpreadChoice) {
  NodeState node;
  node.name = "node-b";
  node.gpus = {Gpu("GPU-A", 0, 5, 0), Gpu("GPU-B", 0, 0, 20000)};
  node.gpus[1].info.index = 1;
  // Default 1/1/1 spread: A = 10 × (6/10 + 4000/32768) = 7.22, B = 10 × (1/10 + 24000/32768)
  // = 8.32; the lower score (A) is read first.
  EXPECT_EQ(Chosen(Pod(json::object()), node), "GPU-A");
  // Slots only: A = 6, B = 1 → B.
  EXPECT_EQ(Chosen(Pod(json{{"hami.io/device-scoring-weights", "slot=1,core=0,memory=0"}}), node),
            "GPU-B");
}

}  // namespace
}  // namespace fracgpu::core
