// Migration from HAMi without a drain (issue 34 item 3): with a signing key, a pod HAMi placed
// (an unsigned allocation) is checked once against its node and then counted as written, never
// as its whole node; what fails the check is still counted whole; an edit after adoption is
// not adopted; a forged signature never is; a pod seen before its node waits for the node.
#include <gtest/gtest.h>

#include "core/cluster_state.h"
#include "core/codec.h"
#include "core/signature.h"

namespace fracgpu::core {
namespace {

// Two 16384 MiB GPUs, 100 % cores each, split count 10 (the device plugin's registration).
NodeObject TwoGpus() {
  DeviceInfo a;
  a.uuid = "GPU-0";
  a.devmem_mib = 16384;
  DeviceInfo b = a;
  b.uuid = "GPU-1";
  b.index = 1;
  NodeObject n;
  n.name = "n1";
  n.node_register = EncodeNodeRegister({a, b});
  n.allocatable_gpus = 20;
  return n;
}

// A pod as HAMi's scheduler and device plugin leave it: bound, Running, hami.io/vgpu-node and
// hami.io/vgpu-devices-allocated, no fracgpu.io/allocation-signature.
PodObject HamiPod(const std::string& uid, const PodGrants& grants) {
  PodObject p;
  p.key = "ml/" + uid;
  p.uid = uid;
  p.phase = "Running";
  p.node_name = "n1";
  p.vgpu_node = "n1";
  p.allocated = EncodePodGrants(grants);
  p.asks_for_gpu = true;
  p.created = "2026-12-01T08:00:00Z";  // before the takeover (Signed)
  return p;
}

ClusterState Signed(bool adopt = true) {
  ClusterState s;
  s.SetSigningKey("k");
  s.SetAdoptUnsigned(adopt, "2026-12-04T10:00:00Z");
  return s;
}

TEST(HamiAdoption, AVerifiedHamiPodIsCountedAsItIsNotAsItsWholeNode) {
  for (bool adopt : {false, true}) {
    SCOPED_TRACE(adopt ? "adoption on" : "adoption off");
    ClusterState s = Signed(adopt);
    ASSERT_TRUE(s.UpsertNode(TwoGpus()).ok());
    Status st = s.UpsertPod(HamiPod("a", {{DeviceGrant{"GPU-1", "NVIDIA", 4096, 30}}}));
    auto node = s.Node("n1");
    ASSERT_TRUE(node.has_value());
    if (adopt) {
      EXPECT_TRUE(st.ok()) << st.ToString();
      EXPECT_EQ(node->gpus[0].used_mem_mib, 0);
      EXPECT_EQ(node->gpus[1].used_mem_mib, 4096);
      EXPECT_EQ(node->gpus[1].used_cores, 30);
      EXPECT_EQ(node->gpus[1].used, 1);
      EXPECT_FALSE(s.Allocation("a")->whole_node);
      EXPECT_TRUE(s.Allocation("a")->verified);
      EXPECT_EQ(s.adopted_allocations(), 1);
      EXPECT_EQ(s.unverified_allocations(), 0);
    } else {  // the rule before: every GPU of the node in full
      EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
      EXPECT_EQ(node->gpus[0].used_mem_mib, 16384);
      EXPECT_EQ(node->gpus[1].used_mem_mib, 16384);
      EXPECT_TRUE(s.Allocation("a")->whole_node);
    }
  }
}

TEST(HamiAdoption, ManyHamiPodsLeaveTheRestOfTheNodeFree) {
  ClusterState s = Signed();
  ASSERT_TRUE(s.UpsertNode(TwoGpus()).ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(
        s.UpsertPod(HamiPod("p" + std::to_string(i), {{DeviceGrant{"GPU-0", "NVIDIA", 4000, 20}}}))
            .ok());
  }
  auto node = s.Node("n1");
  EXPECT_EQ(node->gpus[0].used_mem_mib, 12000);
  EXPECT_EQ(node->gpus[0].used_cores, 60);
  EXPECT_EQ(node->gpus[0].used, 3);
  EXPECT_EQ(node->gpus[1].used_mem_mib, 0);
  EXPECT_EQ(s.adopted_allocations(), 3);
}

TEST(HamiAdoption, WhatFailsTheCheckIsCountedWhole) {
  PodObject pending = HamiPod("pending", {{DeviceGrant{"GPU-0", "NVIDIA", 1024, 10}}});
  pending.phase = "Pending";
  PodObject elsewhere = HamiPod("elsewhere", {{DeviceGrant{"GPU-0", "NVIDIA", 1024, 10}}});
  elsewhere.vgpu_node = "n2";
  PodObject unknown_gpu = HamiPod("ghost", {{DeviceGrant{"GPU-9", "NVIDIA", 1024, 10}}});
  PodObject too_big = HamiPod("big", {{DeviceGrant{"GPU-0", "NVIDIA", 20000, 10}}});
  PodObject too_many_cores = HamiPod("cores", {{DeviceGrant{"GPU-0", "NVIDIA", 1024, 101}}});
  PodObject forged = HamiPod("forged", {{DeviceGrant{"GPU-0", "NVIDIA", 1024, 10}}});
  forged.signature = "bm90IGEgc2lnbmF0dXJl";
  PodObject later = HamiPod("later", {{DeviceGrant{"GPU-0", "NVIDIA", 1024, 10}}});
  later.created = "2026-12-04T10:00:00Z";  // at the takeover: placed by fracgpu, signed
  PodObject undated = HamiPod("undated", {{DeviceGrant{"GPU-0", "NVIDIA", 1024, 10}}});
  undated.created = "";
  for (auto& [what, pod] : std::vector<std::pair<const char*, PodObject>>{
           {"created at the takeover", later},
           {"no creation time", undated},
           {"not Running", pending},
           {"vgpu-node is not its node", elsewhere},
           {"a GPU the node does not register", unknown_gpu},
           {"more memory than the GPU has", too_big},
           {"more cores than the GPU has", too_many_cores},
           {"a signature that does not verify", forged}}) {
    SCOPED_TRACE(what);
    ClusterState s = Signed();
    ASSERT_TRUE(s.UpsertNode(TwoGpus()).ok());
    EXPECT_EQ(s.UpsertPod(pod).code(), StatusCode::kPermissionDenied);
    auto a = s.Allocation(pod.uid);
    ASSERT_TRUE(a.has_value());
    EXPECT_TRUE(a->whole_node);
    EXPECT_EQ(s.adopted_allocations(), 0);
  }
}

TEST(HamiAdoption, APodThatDoesNotFitNextToTheOthersIsCountedWhole) {
  ClusterState s = Signed();
  ASSERT_TRUE(s.UpsertNode(TwoGpus()).ok());
  ASSERT_TRUE(s.UpsertPod(HamiPod("a", {{DeviceGrant{"GPU-0", "NVIDIA", 10000, 50}}})).ok());
  Status st = s.UpsertPod(HamiPod("b", {{DeviceGrant{"GPU-0", "NVIDIA", 10000, 50}}}));
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(s.Allocation("b")->whole_node);
  EXPECT_FALSE(s.Allocation("a")->whole_node);
}

TEST(HamiAdoption, AnEditAfterAdoptionIsNotAdoptedAndTheAdoptedOneKeepsCounting) {
  ClusterState s = Signed();
  ASSERT_TRUE(s.UpsertNode(TwoGpus()).ok());
  PodObject p = HamiPod("a", {{DeviceGrant{"GPU-0", "NVIDIA", 8000, 50}}});
  ASSERT_TRUE(s.UpsertPod(p).ok());
  ASSERT_TRUE(s.UpsertPod(p).ok());  // the same pod again: still adopted, nothing changes
  EXPECT_EQ(s.adopted_allocations(), 1);
  p.allocated = EncodePodGrants({{DeviceGrant{"GPU-0", "NVIDIA", 1, 1}}});  // lowered by hand
  EXPECT_EQ(s.UpsertPod(p).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(s.Node("n1")->gpus[0].used_mem_mib, 8000);
  EXPECT_EQ(s.adopted_allocations(), 1);
}

TEST(HamiAdoption, APodSeenBeforeItsNodeIsAdoptedWhenTheNodeArrives) {
  ClusterState s = Signed();
  PodObject p = HamiPod("a", {{DeviceGrant{"GPU-1", "NVIDIA", 2048, 25}}});
  EXPECT_EQ(s.UpsertPod(p).code(), StatusCode::kPermissionDenied);  // node unknown: whole
  ASSERT_TRUE(s.UpsertNode(TwoGpus()).ok());
  auto node = s.Node("n1");
  EXPECT_EQ(node->gpus[0].used_mem_mib, 0);
  EXPECT_EQ(node->gpus[1].used_mem_mib, 2048);
  EXPECT_FALSE(s.Allocation("a")->whole_node);
  EXPECT_EQ(s.adopted_allocations(), 1);
}

// Two HAMi pods of one node, both seen before the node (the pod informer listed first, as on
// the real cluster's migration rehearsal): each was counted whole node while the node was
// unknown; neither whole count may block the other's check when the node arrives.
TEST(HamiAdoption, TwoPodsSeenBeforeTheirNodeAreBothAdoptedWhenItArrives) {
  ClusterState s = Signed();
  EXPECT_EQ(s.UpsertPod(HamiPod("a", {{DeviceGrant{"GPU-0", "NVIDIA", 10000, 30}}})).code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(s.UpsertPod(HamiPod("b", {{DeviceGrant{"GPU-1", "NVIDIA", 4000, 20}}})).code(),
            StatusCode::kPermissionDenied);
  ASSERT_TRUE(s.UpsertNode(TwoGpus()).ok());
  auto node = s.Node("n1");
  EXPECT_EQ(node->gpus[0].used_mem_mib, 10000);
  EXPECT_EQ(node->gpus[1].used_mem_mib, 4000);
  EXPECT_FALSE(s.Allocation("a")->whole_node);
  EXPECT_FALSE(s.Allocation("b")->whole_node);
  EXPECT_EQ(s.adopted_allocations(), 2);
}

TEST(HamiAdoption, AWholeNodeCountIsReplacedWhenTheCheckPassesLater) {
  ClusterState s = Signed();
  ASSERT_TRUE(s.UpsertNode(TwoGpus()).ok());
  PodObject p = HamiPod("a", {{DeviceGrant{"GPU-0", "NVIDIA", 3000, 30}}});
  p.phase = "Pending";  // its kubelet has not started it yet
  EXPECT_EQ(s.UpsertPod(p).code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(s.Allocation("a")->whole_node);
  p.phase = "Running";
  ASSERT_TRUE(s.UpsertPod(p).ok());
  auto node = s.Node("n1");
  EXPECT_EQ(node->gpus[0].used_mem_mib, 3000);
  EXPECT_EQ(node->gpus[1].used_mem_mib, 0);
  EXPECT_FALSE(s.Allocation("a")->whole_node);
}

}  // namespace
}  // namespace fracgpu::core

namespace fracgpu::core {
namespace {

// A copy (the UI's preview copies the model) keeps the adoption settings and records: an
// adopted pod stays adopted in the copy, and an edit of it is refused there too.
TEST(HamiAdoption, ACopyKeepsTheAdoptions) {
  ClusterState s = Signed();
  ASSERT_TRUE(s.UpsertNode(TwoGpus()).ok());
  PodObject p = HamiPod("a", {{DeviceGrant{"GPU-0", "NVIDIA", 8000, 50}}});
  ASSERT_TRUE(s.UpsertPod(p).ok());
  ClusterState copy(s);
  EXPECT_EQ(copy.adopted_allocations(), 1);
  ASSERT_TRUE(copy.UpsertPod(p).ok());
  PodObject fresh = HamiPod("b", {{DeviceGrant{"GPU-1", "NVIDIA", 1000, 10}}});
  ASSERT_TRUE(copy.UpsertPod(fresh).ok());  // adoption still on in the copy
  EXPECT_EQ(copy.adopted_allocations(), 2);
}

}  // namespace
}  // namespace fracgpu::core
