// core::ClusterState over plain NodeObject / PodObject values (no API objects): the accounting
// rules of docs/design/CONTRACT.md §2 and docs/design/hami-behaviour.md §3.8, each value worked by
// hand. The scheduler's locked wrapper over the same model is tested through JSON objects in
// tests/scheduler/.
#include "core/cluster_state.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
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

// CheckPod, which the scheduler computes before it takes its lock: verified only for a
// signature made with this key, over this pod's UID, node and allocation, and a pod bound to
// the node it names; UpsertPod with it counts as UpsertPod alone does.
TEST(CoreClusterState, CheckPodVerifiesWhatUpsertPodWouldAndIsUsedAsIs) {
  ClusterState s;
  PodObject pod = Holding("a", {{DeviceGrant{"GPU-0", "NVIDIA", 1024, 10}}});
  pod.signature = SignAllocation("k", "a", "n1", *pod.allocated);
  EXPECT_FALSE(s.CheckPod(pod).verified);  // no key: nothing is verified
  ASSERT_TRUE(s.CheckPod(pod).alloc.ok());
  s.SetSigningKey("k");
  EXPECT_TRUE(s.CheckPod(pod).verified);
  PodObject other_key = pod;
  other_key.signature = SignAllocation("other", "a", "n1", *pod.allocated);
  EXPECT_FALSE(s.CheckPod(other_key).verified);
  PodObject other_uid = pod;
  other_uid.uid = "b";
  EXPECT_FALSE(s.CheckPod(other_uid).verified);
  PodObject altered = pod;
  altered.allocated = EncodePodGrants({{DeviceGrant{"GPU-0", "NVIDIA", 512, 10}}});
  EXPECT_FALSE(s.CheckPod(altered).verified);
  PodObject elsewhere = pod;
  elsewhere.node_name = "n2";  // bound to another node than the one signed
  EXPECT_FALSE(s.CheckPod(elsewhere).verified);
  PodObject unsigned_pod = pod;
  unsigned_pod.signature.reset();
  EXPECT_FALSE(s.CheckPod(unsigned_pod).verified);
  PodObject garbage = pod;
  garbage.allocated = "garbage";
  EXPECT_FALSE(s.CheckPod(garbage).alloc.ok());
  EXPECT_FALSE(s.CheckPod(garbage).verified);

  ASSERT_TRUE(s.UpsertNode(TwoGpus()).ok());
  ASSERT_TRUE(s.UpsertPod(pod, s.CheckPod(pod)).ok());
  EXPECT_TRUE(s.Allocation("a")->verified);
  EXPECT_EQ(Gpu(*s.Node("n1"), 0).used_mem_mib, 1024);
  // The altered version: refused, the last verified allocation still counted.
  EXPECT_EQ(s.UpsertPod(altered, s.CheckPod(altered)).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(Gpu(*s.Node("n1"), 0).used_mem_mib, 1024);
  EXPECT_EQ(s.unverified_allocations(), 1);
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

TEST(CoreClusterState, AnAllocationOnAGpuTheNodeLacksIsLoggedAndCountedOnAGhost) {
  ClusterState s;
  std::vector<std::pair<LogSeverity, std::string>> lines;
  s.SetLogger([&](LogSeverity sev, std::string_view line) { lines.emplace_back(sev, line); });
  ASSERT_TRUE(s.UpsertNode(TwoGpus()).ok());
  ASSERT_TRUE(s.UpsertPod(Holding("x", {{DeviceGrant{"GPU-9", "NVIDIA", 100, 5}}})).ok());
  EXPECT_EQ(s.orphaned_allocations(), 1);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].first, LogSeverity::kWarning);
  EXPECT_EQ(lines[0].second.rfind("pod default/x: allocation on GPU GPU-9, which node n1 does not "
                                  "register; counted there as a ghost GPU",
                                  0),
            0u)
      << lines[0].second;
  auto node = s.Node("n1");
  ASSERT_EQ(node->gpus.size(), 3u);
  EXPECT_TRUE(Gpu(*node, 2).ghost);
  EXPECT_EQ(Gpu(*node, 2).used_mem_mib, 100);
}

// One app container with 10,000 MiB on each of two GPUs (issue 33's numbers).
PodGrants TwoByTenThousand() {
  return {{DeviceGrant{"GPU-0", "NVIDIA", 10000, 0}, DeviceGrant{"GPU-1", "NVIDIA", 10000, 0}}};
}

// A pod of one container asking for 1 GPU with 10,000 MiB.
PodRequest TenThousandOnOneGpu() {
  ContainerRequest c;
  c.name = "c";
  c.num_gpus = 1;
  c.mem_mib = 10000;
  PodRequest p;
  p.containers.push_back(c);
  return p;
}

// The node of TwoGpus with GPU-1 gone from its registration.
NodeObject OnlyGpu0() {
  DeviceInfo a;
  a.uuid = "GPU-0";
  a.devmem_mib = 16384;
  NodeObject n;
  n.name = "n1";
  n.node_register = EncodeNodeRegister({a});
  n.allocatable_gpus = 1;
  return n;
}

// Both ways of deciding fit (the packed summary of /filter and the full fit) on `node`.
bool FitsEitherWay(const PodRequest& pod, const ClusterState& s) {
  const NodeState* node = s.FindNode("n1");
  if (node == nullptr) return false;
  const bool full = Fits(pod, *node, FitOptions{});
  const NodeFitSummary summary = SummarizeForFit(*node);
  EXPECT_EQ(full, !summary.exact || FitsBySummary(pod, summary));
  return full;
}

// Issue 33 item 2: GPU 1 leaves the register annotation while a 2 × 10,000 MiB pod holds
// both GPUs. Its 10,000 MiB on GPU 0 stay counted (it lost the whole allocation before, and a
// new 10,000 MiB pod fitted on GPU 0: 20,000 of 16,384 MiB once GPU 1 returned); GPU 1 stays as
// a ghost that nothing can be placed on; its return, a restart from pods (either order) and the
// pod's end each give the exact usage.
TEST(CoreClusterState, AGpuLeavingTheRegistrationKeepsItsPodsCharges) {
  const PodRequest next = TenThousandOnOneGpu();
  ClusterState s;
  ASSERT_TRUE(s.UpsertNode(TwoGpus()).ok());
  PodObject held = Holding("a", TwoByTenThousand());
  ASSERT_TRUE(s.UpsertPod(held).ok());
  EXPECT_FALSE(FitsEitherWay(next, s));  // 6,384 MiB free on each GPU

  // Drop-out.
  ASSERT_TRUE(s.UpsertNode(OnlyGpu0()).ok());
  auto node = s.Node("n1");
  ASSERT_TRUE(node.has_value());
  ASSERT_EQ(node->gpus.size(), 2u);
  EXPECT_EQ(Gpu(*node, 0).info.uuid, "GPU-0");
  EXPECT_EQ(Gpu(*node, 0).used_mem_mib, 10000);
  EXPECT_FALSE(Gpu(*node, 0).ghost);
  EXPECT_EQ(Gpu(*node, 1).info.uuid, "GPU-1");
  EXPECT_TRUE(Gpu(*node, 1).ghost);
  EXPECT_FALSE(Gpu(*node, 1).info.health);
  EXPECT_TRUE(Gpu(*node, 1).cordoned);
  EXPECT_EQ(Gpu(*node, 1).info.devmem_mib, 16384);  // its registration as last seen
  EXPECT_EQ(Gpu(*node, 1).used_mem_mib, 10000);
  EXPECT_FALSE(FitsEitherWay(next, s)) << "the new pod over-commits GPU 0";
  ContainerRequest small;
  small.num_gpus = 1;
  small.mem_mib = 1000;
  PodRequest small_pod;
  small_pod.containers.push_back(small);
  EXPECT_TRUE(FitsEitherWay(small_pod, s));  // GPU 0 still takes what fits
  // A node update while GPU 1 is away keeps the ghost and its usage.
  ASSERT_TRUE(s.UpsertNode(OnlyGpu0()).ok());
  EXPECT_EQ(s.Node("n1")->gpus.size(), 2u);
  EXPECT_EQ(Gpu(*s.Node("n1"), 1).used_mem_mib, 10000);

  // Return.
  ASSERT_TRUE(s.UpsertNode(TwoGpus()).ok());
  node = s.Node("n1");
  ASSERT_EQ(node->gpus.size(), 2u);
  EXPECT_FALSE(Gpu(*node, 1).ghost);
  EXPECT_TRUE(Gpu(*node, 1).info.health);
  EXPECT_EQ(Gpu(*node, 0).used_mem_mib, 10000);
  EXPECT_EQ(Gpu(*node, 1).used_mem_mib, 10000);
  EXPECT_FALSE(FitsEitherWay(next, s));

  // Restart while GPU 1 is away: rebuilt from the node and the pod, in either order.
  for (const bool pods_first : {false, true}) {
    ClusterState r;
    if (pods_first) {
      ASSERT_TRUE(r.UpsertPod(held).ok());
    }
    ASSERT_TRUE(r.UpsertNode(OnlyGpu0()).ok());
    if (!pods_first) {
      ASSERT_TRUE(r.UpsertPod(held).ok());
    }
    node = r.Node("n1");
    ASSERT_TRUE(node.has_value());
    ASSERT_EQ(node->gpus.size(), 2u) << pods_first;
    EXPECT_EQ(Gpu(*node, 0).used_mem_mib, 10000) << pods_first;
    EXPECT_TRUE(Gpu(*node, 1).ghost) << pods_first;
    EXPECT_EQ(Gpu(*node, 1).used_mem_mib, 10000) << pods_first;
    EXPECT_FALSE(FitsEitherWay(next, r)) << pods_first;
    // GPU 1 returns after the restart.
    ASSERT_TRUE(r.UpsertNode(TwoGpus()).ok());
    EXPECT_EQ(Gpu(*r.Node("n1"), 0).used_mem_mib, 10000) << pods_first;
    EXPECT_EQ(Gpu(*r.Node("n1"), 1).used_mem_mib, 10000) << pods_first;
    EXPECT_FALSE(Gpu(*r.Node("n1"), 1).ghost) << pods_first;
  }

  // The pod ends while GPU 1 is away: its charges go, and the ghost with them.
  ASSERT_TRUE(s.UpsertNode(OnlyGpu0()).ok());
  held.phase = "Succeeded";
  ASSERT_TRUE(s.UpsertPod(held).ok());
  node = s.Node("n1");
  ASSERT_EQ(node->gpus.size(), 1u);
  EXPECT_EQ(Gpu(*node, 0).used_mem_mib, 0);
  EXPECT_TRUE(FitsEitherWay(next, s));
}

// What ForEachNode must answer for a name, computed from how the test built the state: the
// node when it was added (and not removed) with allocatable > 0, else nullptr.
void ExpectForEachNodeAnswers(const ClusterState& s, const std::vector<std::string>& names,
                              const std::vector<bool>& present_usable, const std::string& when) {
  size_t calls = 0;
  s.ForEachNode(names, [&](const std::string& name, const NodeState* node) {
    ASSERT_LT(calls, names.size()) << when;
    EXPECT_EQ(&name, &names[calls]) << when << ": names are handed back in order, uncopied";
    const bool want = present_usable[calls];
    EXPECT_EQ(node != nullptr, want) << when << ": " << name;
    if (node != nullptr) {
      EXPECT_EQ(node->name, name) << when;
      EXPECT_EQ(node, s.FindNode(name)) << when << ": " << name;
    }
    ++calls;
  });
  EXPECT_EQ(calls, names.size()) << when;
}

TEST(CoreClusterState, ForEachNodeFindsEachNameThroughGrowthRemovalAndCopies) {
  // Names n0..n1999 added in order; every 7th with allocatable 0 (its GPUs do not count).
  // After each checkpoint (the index grows at 8, 16, ..., 1024 nodes) every name asked for,
  // shuffled, with names never added, duplicates and "", gets the node or nullptr.
  ClusterState s;
  std::mt19937 rng(18);
  auto usable = [](int i) { return i % 7 != 0; };
  std::vector<bool> added(2000, false);
  auto add = [&](int i) {  // adds (or adds again) node n<i>; false if the state refused it
    NodeObject n = TwoGpus(usable(i) ? 2 : 0);
    n.name = "n" + std::to_string(i);
    added[i] = s.UpsertNode(n).ok();
    return added[i];
  };
  auto check = [&](const ClusterState& state, const std::string& when) {
    std::vector<std::string> names;
    std::vector<bool> want;
    for (int i = 0; i < 2000; i += 3) {
      names.push_back("n" + std::to_string(i));
      want.push_back(added[i] && usable(i));
    }
    for (int i = 0; i < 50; ++i) {
      names.push_back("m" + std::to_string(i));  // never added
      want.push_back(false);
    }
    names.push_back("");
    want.push_back(false);
    names.push_back("n1");  // a duplicate
    want.push_back(added[1]);
    std::vector<size_t> order(names.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::string> shuffled;
    std::vector<bool> shuffled_want;
    for (size_t i : order) {
      shuffled.push_back(names[i]);
      shuffled_want.push_back(want[i]);
    }
    ExpectForEachNodeAnswers(state, shuffled, shuffled_want, when);
    ExpectForEachNodeAnswers(state, {}, {}, when + " (no names)");
  };
  check(s, "empty state");
  int next = 0;
  for (int upto : {1, 8, 9, 17, 100, 1025, 2000}) {
    for (; next < upto; ++next) {
      ASSERT_TRUE(add(next));
    }
    check(s, std::to_string(upto) + " nodes");
  }
  // Updating a node in place keeps one entry; n7 becomes usable.
  NodeObject n7 = TwoGpus();
  n7.name = "n7";
  ASSERT_TRUE(s.UpsertNode(n7).ok());
  {
    std::vector<std::string> names = {"n7", "n14", "n7"};
    ExpectForEachNodeAnswers(s, names, {true, false, true}, "n7 updated");
  }
  NodeObject back = TwoGpus(0);
  back.name = "n7";
  ASSERT_TRUE(s.UpsertNode(back).ok());
  for (int i = 0; i < 2000; i += 2) {
    s.RemoveNode("n" + std::to_string(i));
    added[i] = false;
  }
  s.RemoveNode("never-added");
  check(s, "even nodes removed");
  // Names added again after removals, then removals in random order down to 10 nodes (each
  // shifts the rest of its probe run back).
  for (int i = 0; i < 2000; i += 4) {
    ASSERT_TRUE(add(i));
  }
  check(s, "every 4th added again");
  std::vector<int> present;
  for (int i = 0; i < 2000; ++i) {
    if (added[i]) present.push_back(i);
  }
  std::shuffle(present.begin(), present.end(), rng);
  for (size_t k = 0; k + 10 < present.size(); ++k) {
    s.RemoveNode("n" + std::to_string(present[k]));
    added[present[k]] = false;
    if (k % 97 == 0) check(s, std::to_string(k + 1) + " removed in random order");
  }
  check(s, "10 nodes left");
  for (int i = 0; i < 2000; i += 2) {
    ASSERT_TRUE(add(i));
  }
  check(s, "even nodes added again");
  // A copy answers with its own nodes, also once the original is gone (n2: present, usable).
  auto original = std::make_unique<ClusterState>(s);
  ClusterState copy(*original);
  const NodeState* in_original = original->FindNode("n2");
  ASSERT_NE(in_original, nullptr);
  original.reset();
  check(copy, "copy");
  ClusterState assigned;
  assigned = copy;
  std::vector<std::string> one = {"n2"};
  copy.ForEachNode(one, [&](const std::string&, const NodeState* node) {
    EXPECT_EQ(node, copy.FindNode("n2"));
  });
  assigned.ForEachNode(one, [&](const std::string&, const NodeState* node) {
    EXPECT_NE(node, copy.FindNode("n2"));
    EXPECT_EQ(node, assigned.FindNode("n2"));
  });
  ClusterState moved(std::move(assigned));
  check(moved, "moved");
}

// Runs the events of the two EveryChangeKeepsEachNodesFitSummary tests (see there).
void ExpectSummariesThroughEvents(bool signed_mode) {
  ClusterState s;
  if (signed_mode) s.SetSigningKey("k");
  std::mt19937 rng(signed_mode ? 1813 : 1812);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int kNodes = 12;
  std::vector<int> gpus_of(kNodes, 0);
  auto node_name = [](int i) { return "n" + std::to_string(i); };
  auto upsert_node = [&](int i) {
    const int n = uni(0, 6) == 0 ? uni(17, 18) : uni(0, 8);
    std::vector<DeviceInfo> devices;
    for (int k = 0; k < n; ++k) {
      DeviceInfo d;
      d.uuid = "GPU-" + std::to_string(i) + "-" + std::to_string(k);
      d.index = k;
      d.devmem_mib = 16384 * uni(1, 5);
      d.count = uni(1, 4);
      d.numa = uni(0, 1);
      d.health = uni(0, 7) != 0;
      devices.push_back(d);
    }
    NodeObject o;
    o.name = node_name(i);
    o.node_register = EncodeNodeRegister(devices);
    o.allocatable_gpus = uni(0, 5) == 0 ? 0 : n;
    if (n > 0 && uni(0, 3) == 0) o.cordon = "GPU-" + std::to_string(i) + "-0";
    gpus_of[i] = n;
    ASSERT_TRUE(s.UpsertNode(o).ok());
  };
  auto grants_on = [&](int i, size_t containers) {
    PodGrants g(containers);
    const int k = uni(1, 2);
    for (int j = 0; j < k; ++j) {
      // Now and then a GPU the node lacks (the pod is orphaned, its usage not counted).
      const int gpu = uni(0, std::max(0, gpus_of[i] - 1)) + (uni(0, 9) == 0 ? 30 : 0);
      g[0].push_back(DeviceGrant{"GPU-" + std::to_string(i) + "-" + std::to_string(gpu), "NVIDIA",
                                 1024 * uni(1, 16), 10 * uni(0, 10)});
    }
    if (containers > 1) g[1] = g[0];  // an app container on the init container's GPUs
    return g;
  };
  int checks = 0, in_use = 0, not_exact = 0, whole_node = 0;
  auto check = [&](const ClusterState& state, int step) {
    std::vector<std::string> names;
    for (int i = 0; i < kNodes; ++i) names.push_back(node_name(i));
    names.push_back("never-added");
    std::shuffle(names.begin(), names.end(), rng);
    size_t seen = 0;
    state.ForEachNodeSummary(
        names, [&](const std::string& name, const NodeState* node, const NodeFitSummary* summary) {
          EXPECT_EQ(name, names[seen]) << "step " << step;
          ++seen;
          ASSERT_EQ(node, state.FindNode(name)) << name << " step " << step;
          ASSERT_EQ(node == nullptr, summary == nullptr) << name << " step " << step;
          if (node == nullptr) return;
          ASSERT_EQ(*summary, SummarizeForFit(*node)) << name << " step " << step;
          ++checks;
          not_exact += !summary->exact;
          for (size_t g = 0; g < summary->gpus; ++g) {
            if (summary->gpu[g].flags & PackedGpu::kInUse) {
              ++in_use;
              break;
            }
          }
        });
    EXPECT_EQ(seen, names.size()) << "step " << step;
  };
  for (int i = 0; i < kNodes; ++i) upsert_node(i);
  std::vector<std::string> uids;
  for (int step = 0; step < 3000; ++step) {
    const int op = uni(0, 9);
    const int i = uni(0, kNodes - 1);
    if (op == 0) {
      upsert_node(i);
    } else if (op == 1 && uni(0, 3) == 0) {
      s.RemoveNode(node_name(i));
    } else if (op <= 5) {  // a pod (new or changed) bound to node i
      const std::string uid = uids.empty() || uni(0, 2) == 0
                                  ? "p" + std::to_string(step)
                                  : uids[uni(0, static_cast<int>(uids.size()) - 1)];
      const bool with_init = uni(0, 3) == 0;
      PodObject p = Holding(uid, grants_on(i, with_init ? 2 : 1));
      p.node_name = node_name(i);
      p.vgpu_node = p.node_name;
      if (with_init) {
        p.num_init_containers = 1;
        p.init_statuses = static_cast<size_t>(uni(0, 1));
        p.init_statuses_succeeded = p.init_statuses == 1 && uni(0, 1) == 0;
      }
      if (uni(0, 5) == 0) p.phase = "Succeeded";
      // Signed mode: a third unsigned, counted on the node's every GPU (or as last verified).
      if (signed_mode && uni(0, 2) != 0) {
        p.signature = SignAllocation("k", uid, p.node_name, *p.allocated);
      }
      (void)s.UpsertPod(p);
      auto a = s.Allocation(uid);
      whole_node += a.has_value() && a->whole_node;
      uids.push_back(uid);
    } else if (op <= 7) {  // a bind decision
      PodAllocation a;
      a.uid = "a" + std::to_string(step);
      a.key = "default/" + a.uid;
      a.node = node_name(i);
      a.grants = grants_on(i, 1);
      (void)s.Assume(a);
      uids.push_back(a.uid);
    } else if (!uids.empty()) {
      s.Forget(uids[uni(0, static_cast<int>(uids.size()) - 1)]);
    }
    check(s, step);
    if (step % 500 == 0) {  // a copy, an assigned copy and a moved one keep them too
      ClusterState copy(s);
      check(copy, step);
      ClusterState assigned;
      assigned = s;
      check(assigned, step);
      ClusterState moved(std::move(assigned));
      check(moved, step);
    }
  }
  // The events did load the nodes, and packed and unpackable nodes both occurred.
  EXPECT_GT(in_use, checks / 4);
  EXPECT_GT(not_exact, checks / 20);
  EXPECT_LT(not_exact, checks / 2);
  if (signed_mode) {
    EXPECT_GT(whole_node, 50);
  }
}

// Random node, pod, bind and removal events on 12 nodes (0–18 GPUs: some past the 16 a
// summary packs), pods with and without init containers; after each, ForEachNodeSummary gives
// every node's FindNode and a summary equal to SummarizeForFit of it (computed afresh).
TEST(CoreClusterState, EveryChangeKeepsEachNodesFitSummary) { ExpectSummariesThroughEvents(false); }

// The same with a signing key: unsigned pods reserve their node's every GPU (whole_node).
TEST(CoreClusterState, EveryChangeKeepsEachNodesFitSummarySigned) {
  ExpectSummariesThroughEvents(true);
}

// Host CPU and memory (issue 34 item 7): a node's allocatable CPU and memory, less the requests
// of every pod bound there — GPU pods or not, from a bind's Assume before the watch shows it —
// until the pod ends or is deleted; a pod bound before its node is known is counted when the
// node arrives; a version of the pod without spec.nodeName leaves an assumed one in place.
TEST(CoreClusterState, HostCpuAndMemoryAreAllocatableLessTheBoundPodsRequests) {
  ClusterState s;
  NodeObject n = TwoGpus();
  n.allocatable_cpu_milli = 32000;
  n.allocatable_mem_mib = 65536;
  // A CPU-only pod bound before the node is known.
  PodObject web;
  web.key = "default/web";
  web.uid = "web";
  web.phase = "Running";
  web.node_name = "n1";
  web.cpu_milli = 1500;
  web.mem_mib = 2048;
  ASSERT_TRUE(s.UpsertPod(web).ok());
  ASSERT_TRUE(s.UpsertNode(n).ok());
  auto node = s.Node("n1");
  ASSERT_TRUE(node);
  EXPECT_EQ(node->cpu_milli_total, 32000);
  EXPECT_EQ(node->mem_mib_total, 65536);
  EXPECT_EQ(node->cpu_milli_used, 1500);
  EXPECT_EQ(node->mem_mib_used, 2048);
  // A GPU pod bound.
  PodObject gpu = Holding("gpu", {{DeviceGrant{"GPU-0", "NVIDIA", 1000, 10}}});
  gpu.cpu_milli = 8000;
  gpu.mem_mib = 4096;
  ASSERT_TRUE(s.UpsertPod(gpu).ok());
  EXPECT_EQ(s.Node("n1")->cpu_milli_used, 9500);
  EXPECT_EQ(s.Node("n1")->mem_mib_used, 6144);
  // A bind's decision counts at once; the pod as listed before its Binding does not erase it.
  PodAllocation a;
  a.key = "default/new";
  a.uid = "new";
  a.node = "n1";
  a.grants = {{DeviceGrant{"GPU-1", "NVIDIA", 1000, 10}}};
  a.cpu_milli = 4000;
  a.mem_mib = 1024;
  ASSERT_TRUE(s.Assume(a).ok());
  EXPECT_EQ(s.Node("n1")->cpu_milli_used, 13500);
  PodObject pending;
  pending.key = "default/new";
  pending.uid = "new";
  pending.phase = "Pending";
  pending.cpu_milli = 4000;
  pending.mem_mib = 1024;
  (void)s.UpsertPod(pending);
  EXPECT_EQ(s.Node("n1")->cpu_milli_used, 13500);
  EXPECT_EQ(s.Node("n1")->mem_mib_used, 7168);
  // A node update keeps the counts; a new allocatable is read.
  n.allocatable_cpu_milli = 30000;
  ASSERT_TRUE(s.UpsertNode(n).ok());
  EXPECT_EQ(s.Node("n1")->cpu_milli_total, 30000);
  EXPECT_EQ(s.Node("n1")->cpu_milli_used, 13500);
  // Ended and deleted pods give theirs back; so does a forgotten bind.
  web.phase = "Succeeded";
  ASSERT_TRUE(s.UpsertPod(web).ok());
  EXPECT_EQ(s.Node("n1")->cpu_milli_used, 12000);
  s.Forget("gpu");
  s.Forget("new");
  EXPECT_EQ(s.Node("n1")->cpu_milli_used, 0);
  EXPECT_EQ(s.Node("n1")->mem_mib_used, 0);
  // The allocation keeps the pod's CPU request (the CPU of its shape in the target workload).
  ASSERT_TRUE(s.UpsertPod(gpu).ok());
  EXPECT_EQ(s.Allocation("gpu")->cpu_milli, 8000);
  // Copies carry the counts.
  ClusterState copy = s;
  EXPECT_EQ(copy.Node("n1")->cpu_milli_used, 8000);
  // A node without allocatable CPU or memory is not tracked (0).
  NodeObject bare = TwoGpus();
  bare.name = "n2";
  ASSERT_TRUE(s.UpsertNode(bare).ok());
  EXPECT_EQ(s.Node("n2")->cpu_milli_total, 0);
}

}  // namespace
}  // namespace fracgpu::core
