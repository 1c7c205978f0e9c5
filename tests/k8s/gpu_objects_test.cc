// k8s::PodHostRequests and NodeObjectOf's allocatable CPU and memory (issue 34 item 7): the
// effective requests kube-scheduler's NodeResourcesFit counts (k8s.io/component-helpers/resource
// PodRequests), each value worked by hand.
#include "k8s/gpu_objects.h"

#include <gtest/gtest.h>

#include <vector>

namespace fracgpu::k8s {
namespace {

using nlohmann::json;

json Container(json requests, json limits = json::object()) {
  return {{"name", "c"}, {"resources", {{"requests", requests}, {"limits", limits}}}};
}

// A pod of `containers` (and `init` containers).
json Pod(std::vector<json> containers, std::vector<json> init = {}) {
  json spec = json::object();
  spec["containers"] = containers;
  if (!init.empty()) spec["initContainers"] = init;
  return {{"spec", spec}};
}

TEST(PodHostRequests, AppContainersAddUp) {
  json pod = Pod({Container({{"cpu", "1500m"}, {"memory", "1Gi"}}),
                  Container({{"cpu", "2"}, {"memory", "512Mi"}})});
  HostRequests r = PodHostRequests(pod);
  EXPECT_EQ(r.cpu_milli, 3500);
  EXPECT_EQ(r.mem_mib, 1536);
}

TEST(PodHostRequests, LimitsStandInForMissingRequestsAndUnitsRoundUp) {
  // requests default from limits (the API server's defaulting); 1G = 953.67 MiB → 954;
  // 0.1m → 1 millicore (MilliValue rounds up).
  json pod = Pod({Container(json::object(), {{"cpu", "3"}, {"memory", "1G"}}),
                  Container({{"cpu", "0.0001"}}, {{"memory", "1Mi"}})});
  HostRequests r = PodHostRequests(pod);
  EXPECT_EQ(r.cpu_milli, 3001);
  EXPECT_EQ(r.mem_mib, 955);
}

TEST(PodHostRequests, InitContainersRaiseToTheLargestWithSidecarsBeforeThem) {
  // App: 1 CPU. Init 1: 4 CPU. Sidecar (restartPolicy Always): 1 CPU, runs with the app and
  // with the init containers after it. Init 2: 3.5 CPU + the sidecar = 4.5.
  // Effective: max(app 1 + sidecar 1 = 2, init 1 4, init 2 4.5) = 4.5.
  json sidecar = Container({{"cpu", "1"}, {"memory", "100Mi"}});
  sidecar["restartPolicy"] = "Always";
  json pod = Pod({Container({{"cpu", "1"}, {"memory", "1Gi"}})},
                 {Container({{"cpu", "4"}, {"memory", "200Mi"}}), sidecar,
                  Container({{"cpu", "3500m"}, {"memory", "2Gi"}})});
  HostRequests r = PodHostRequests(pod);
  EXPECT_EQ(r.cpu_milli, 4500);
  EXPECT_EQ(r.mem_mib, 2048 + 100);
}

TEST(PodHostRequests, PodLevelRequestsReplaceAndOverheadAdds) {
  json pod = Pod({Container({{"cpu", "1"}, {"memory", "1Gi"}})});
  pod["spec"]["resources"] = {{"requests", {{"cpu", "6"}}}};
  pod["spec"]["overhead"] = {{"cpu", "250m"}, {"memory", "120Mi"}};
  HostRequests r = PodHostRequests(pod);
  EXPECT_EQ(r.cpu_milli, 6250);      // pod-level cpu, plus overhead
  EXPECT_EQ(r.mem_mib, 1024 + 120);  // container memory (no pod-level memory), plus overhead
}

TEST(PodHostRequests, MalformedFieldsCountZero) {
  EXPECT_EQ(PodHostRequests(json::array()).cpu_milli, 0);
  EXPECT_EQ(PodHostRequests(json{{"spec", 3}}).cpu_milli, 0);
  json pod = Pod({Container({{"cpu", "lots"}, {"memory", 7}}), json(5)});
  HostRequests r = PodHostRequests(pod);
  EXPECT_EQ(r.cpu_milli, 0);
  EXPECT_EQ(r.mem_mib, 0);
}

TEST(NodeObjectOf, AllocatableCpuAndMemoryRoundDown) {
  json node = {
      {"metadata", {{"name", "n"}}},
      {"status",
       {{"allocatable", {{"cpu", "95500m"}, {"memory", "263921512Ki"}, {"nvidia.com/gpu", "8"}}}}}};
  core::NodeObject n = NodeObjectOf(node, "nvidia.com/gpu");
  EXPECT_EQ(n.allocatable_cpu_milli, 95500);
  EXPECT_EQ(n.allocatable_mem_mib, 257735);  // 263921512 KiB / 1024 = 257735.85 → 257735
  EXPECT_EQ(n.allocatable_gpus, 8);
  EXPECT_EQ(
      NodeObjectOf(json{{"metadata", {{"name", "m"}}}}, "nvidia.com/gpu").allocatable_cpu_milli, 0);
  EXPECT_EQ(QuantityMilli("1e-4", false), 0);
  EXPECT_EQ(QuantityMilli("1e-4", true), 1);
  EXPECT_EQ(QuantityMib("-1Mi", true), std::nullopt);
}

// A pod that lists the GPU resource at 0 (a CPU-only pod sent to the extender: kube-scheduler calls
// an extender with managedResources only for pods naming one, bench/cluster/trace.py) asks for no
// GPU, so the state does not count it as holding its node's every GPU; any other quantity, or
// one that does not parse, does (issue 37 item 2).
TEST(PodObjectOf, AGpuCountOfZeroAsksForNoGpu) {
  auto asks = [](json limits, json requests = json::object()) {
    return PodObjectOf(Pod({Container(requests, limits)}), "nvidia.com/gpu").asks_for_gpu;
  };
  EXPECT_FALSE(asks({{"nvidia.com/gpu", "0"}}));
  EXPECT_FALSE(asks({{"nvidia.com/gpu", "0"}}, {{"nvidia.com/gpu", "0"}}));
  EXPECT_FALSE(asks({{"cpu", "1"}}));
  EXPECT_TRUE(asks({{"nvidia.com/gpu", "1"}}));
  EXPECT_TRUE(asks({{"nvidia.com/gpu", "0"}}, {{"nvidia.com/gpu", "2"}}));
  EXPECT_TRUE(asks({{"nvidia.com/gpu", "100m"}}));  // a fraction rounds up to one
  EXPECT_TRUE(asks({{"nvidia.com/gpu", "x"}}));     // unparsable: counted
  EXPECT_TRUE(asks({{"nvidia.com/gpu", 0}}));       // not a string: counted
  json init = Pod({Container(json::object())}, {Container({{"nvidia.com/gpu", "1"}})});
  EXPECT_TRUE(PodObjectOf(init, "nvidia.com/gpu").asks_for_gpu);
}

}  // namespace
}  // namespace fracgpu::k8s
