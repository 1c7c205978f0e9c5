// core::ClusterState over plain NodeObject / PodObject values (no API objects): the accounting
// rules of docs/design/CONTRACT.md §2 and docs/design/hami-behaviour.md §3.8, each value worked by
// hand. The scheduler's locked wrapper over the same model is tested through JSON objects in
// tests/scheduler/.
#include "core/cluster_state.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/codec.h"
#include "core/signature.h"

namespace fracgpu::core {
namespace {

// Two 16384 MiB GPUs, 100 % cores each, split count 10.
NodeObject TwoGpus(int64_t allocatable = 2) {
  DeviceInfo a;
  a.uuid = "GPU-0";
  a.devmem_mib = 16384;
  DeviceInfo b = a;
  b.uuid = "GPU-1";
  b.index = 1;
  NodeObject n;
  n.name = "n1";
  n.node_register = EncodeNodeRegister({a, b});
  n.allocatable_gpus = allocatable;
  return n;
}

PodObject Holding(const std::string& uid, const PodGrants& grants) {
  PodObject p;
  p.key = "default/" + uid;
  p.uid = uid;
  p.phase = "Running";
  p.node_name = "n1";
  p.vgpu_node = "n1";
  p.allocated = EncodePodGrants(grants);
  p.asks_for_gpu = true;
  return p;
}

const GpuState& Gpu(const NodeState& node, size_t i) { return node.gpus.at(i); }

TEST(CoreClusterState, NodeCountsWithGpusAndAllocatableAndCordonIsTrimmed) {
  ClusterState s;
  ASSERT_TRUE(s.UpsertNode(TwoGpus(0)).ok());
  EXPECT_FALSE(s.Node("n1").has_value());  // allocatable 0: its GPUs do not count
  NodeObject n = TwoGpus();
  n.cordon = " GPU-1 ,";
  ASSERT_TRUE(s.UpsertNode(n).ok());
  auto node = s.Node("n1");
  ASSERT_TRUE(node.has_value());
  ASSERT_EQ(node->gpus.size(), 2u);
  EXPECT_FALSE(Gpu(*node, 0).cordoned);
  EXPECT_TRUE(Gpu(*node, 1).cordoned);
  n.node_register = "not a register";
  Status st = s.UpsertNode(n);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("node n1"), std::string::npos) << st.message();
  EXPECT_FALSE(s.Node("n1").has_value());
}

TEST(CoreClusterState, UsageIsAppliedAndReleasedWhenThePodSucceeds) {
  ClusterState s;
  ASSERT_TRUE(s.UpsertNode(TwoGpus()).ok());
  PodObject p = Holding("a", {{DeviceGrant{"GPU-0", "NVIDIA", 4096, 30}}});
  ASSERT_TRUE(s.UpsertPod(p).ok());
  auto node = s.Node("n1");
  EXPECT_EQ(Gpu(*node, 0).used, 1);
  EXPECT_EQ(Gpu(*node, 0).used_mem_mib, 4096);
  EXPECT_EQ(Gpu(*node, 0).used_cores, 30);
  EXPECT_EQ(Gpu(*node, 1).used_mem_mib, 0);
  p.phase = "Succeeded";
  ASSERT_TRUE(s.UpsertPod(p).ok());
  node = s.Node("n1");
  EXPECT_EQ(Gpu(*node, 0).used, 0);
  EXPECT_EQ(Gpu(*node, 0).used_mem_mib, 0);
  EXPECT_TRUE(s.Allocations().empty());
}

TEST(CoreClusterState, InitReservationShrinksOnceInitContainersSucceeded) {
  ClusterState s;
  ASSERT_TRUE(s.UpsertNode(TwoGpus()).ok());
  // Init container 8000 MiB / 50 %, app container 2000 MiB / 20 %, both on GPU-0.
  PodObject p = Holding("a", {{DeviceGrant{"GPU-0", "NVIDIA", 8000, 50}},
                              {DeviceGrant{"GPU-0", "NVIDIA", 2000, 20}}});
  p.num_init_containers = 1;
  ASSERT_TRUE(s.UpsertPod(p).ok());
  EXPECT_EQ(Gpu(*s.Node("n1"), 0).used_mem_mib, 8000);  // max(8000, 2000)
  EXPECT_EQ(Gpu(*s.Node("n1"), 0).used_cores, 50);
  p.init_statuses = 1;
  p.init_statuses_succeeded = true;
  ASSERT_TRUE(s.UpsertPod(p).ok());
  EXPECT_EQ(Gpu(*s.Node("n1"), 0).used_mem_mib, 2000);  // the app container alone
  EXPECT_EQ(Gpu(*s.Node("n1"), 0).used_cores, 20);
  EXPECT_EQ(Gpu(*s.Node("n1"), 0).used, 1);
}

TEST(CoreClusterState, SignedModeCountsAnUnsignedBoundPodOnEveryGpu) {
  ClusterState s;
  s.SetSigningKey("k");
  ASSERT_TRUE(s.UpsertNode(TwoGpus()).ok());
  PodObject signed_pod = Holding("a", {{DeviceGrant{"GPU-0", "NVIDIA", 1024, 10}}});
  signed_pod.signature = SignAllocation("k", "a", "n1", *signed_pod.allocated);
  ASSERT_TRUE(s.UpsertPod(signed_pod).ok());
  EXPECT_TRUE(s.Allocation("a")->verified);
  PodObject bare;  // bound, asks for a GPU, carries nothing
  bare.key = "default/b";
  bare.uid = "b";
  bare.phase = "Running";
  bare.node_name = "n1";
  bare.asks_for_gpu = true;
  EXPECT_EQ(s.UpsertPod(bare).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(s.unverified_allocations(), 1);
  auto node = s.Node("n1");
  // a's 1024 MiB plus the whole card for b on GPU-0; the whole card on GPU-1.
  EXPECT_EQ(Gpu(*node, 0).used_mem_mib, 1024 + 16384);
  EXPECT_EQ(Gpu(*node, 0).used_cores, 10 + 100);
  EXPECT_EQ(Gpu(*node, 1).used_mem_mib, 16384);
  EXPECT_TRUE(s.Allocation("b")->whole_node);
}

TEST(CoreClusterState, AnAssumedBindSurvivesAnOlderPodVersionUntilForgotten) {
  ClusterState s;
  ASSERT_TRUE(s.UpsertNode(TwoGpus()).ok());
  PodAllocation a;
  a.key = "default/a";
  a.uid = "a";
  a.node = "n1";
  a.grants = {{DeviceGrant{"GPU-1", "NVIDIA", 3000, 25}}};
  ASSERT_TRUE(s.Assume(a).ok());
  PodObject older = Holding("a", {});
  older.vgpu_node.reset();
  older.allocated.reset();
  ASSERT_TRUE(s.UpsertPod(older).ok());
  EXPECT_EQ(Gpu(*s.Node("n1"), 1).used_mem_mib, 3000);
  EXPECT_TRUE(s.Allocation("a")->assumed);
  s.Forget("a");
  EXPECT_EQ(Gpu(*s.Node("n1"), 1).used_mem_mib, 0);
  a.node = "n2";
  EXPECT_EQ(s.Assume(a).code(), StatusCode::kNotFound);
}

TEST(CoreClusterState, AnAllocationOnAGpuTheNodeLacksIsLoggedAndOrphaned) {
  ClusterState s;
  std::vector<std::pair<LogSeverity, std::string>> lines;
  s.SetLogger([&](LogSeverity sev, std::string_view line) { lines.emplace_back(sev, line); });
  ASSERT_TRUE(s.UpsertNode(TwoGpus()).ok());
  ASSERT_TRUE(s.UpsertPod(Holding("x", {{DeviceGrant{"GPU-9", "NVIDIA", 100, 5}}})).ok());
  EXPECT_EQ(s.orphaned_allocations(), 1);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].first, LogSeverity::kWarning);
  EXPECT_EQ(lines[0].second.rfind("pod default/x: allocation not counted on node n1: ", 0), 0u)
      << lines[0].second;
}

}  // namespace
}  // namespace fracgpu::core
