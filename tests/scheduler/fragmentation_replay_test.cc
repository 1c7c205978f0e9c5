// The fragmentation-aware policy of the running scheduler is the simulator's FGD+CpuRoute+Crumb
// (issue 34 item 7): the extender reads each node's allocatable CPU and memory and the requests
// of the pods bound there, so /prioritize changes with node CPU; and a slice of the Alibaba
// trace replayed through /filter + /prioritize + /bind over HTTP, against the fake API server,
// lands every pod on the node and GPUs that sim::RunExperiment chooses for the same input.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/annotations.h"
#include "core/codec.h"
#include "core/fgd_policies.h"
#include "core/signature.h"
#include "fake_apiserver.h"
#include "k8s/objects.h"
#include "scheduler/service.h"
#include "sim/cluster.h"
#include "sim/simulator.h"
#include "sim/trace.h"
#include "sim/workload.h"

namespace fracgpu::scheduler {
namespace {

using nlohmann::json;

constexpr char kKey[] = "replay-signing-key";

// A node as the device plugin registers it: its GPUs in `hami.io/node-nvidia-register`, and the
// kubelet's status.allocatable (cpu in millicores, memory in Mi, nvidia.com/gpu slices).
json RegisteredNode(const core::NodeState& n) {
  std::vector<core::DeviceInfo> devices;
  int64_t slices = 0;
  for (const auto& g : n.gpus) {
    devices.push_back(g.info);
    slices += g.info.count;
  }
  return {{"metadata",
           {{"name", n.name},
            {"annotations", {{core::kAnnotationNodeRegister, core::EncodeNodeRegister(devices)}}}}},
          {"status",
           {{"allocatable",
             {{"cpu", std::to_string(n.cpu_milli_total) + "m"},
              {"memory", std::to_string(n.mem_mib_total) + "Mi"},
              {"nvidia.com/gpu", std::to_string(slices)}}}}}};
}

class FragmentationReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    k8s::Config config;
    config.server = api_.url();
    auto c = k8s::Client::Create(config);
    ASSERT_TRUE(c.ok());
    client_ = std::move(*c);
  }
  std::unique_ptr<SchedulerService> StartService(std::vector<core::WeightedShape> workload = {}) {
    SchedulerOptions o;
    o.extender.signing_key = kKey;
    o.extender.default_gpu_policy = core::GpuPolicy::kFragmentationAware;
    o.extender.fragmentation_workload = std::move(workload);
    auto s = std::make_unique<SchedulerService>(o, client_.get());
    EXPECT_TRUE(s->Start().ok());
    EXPECT_TRUE(s->WaitForSync(std::chrono::seconds(10)));
    return s;
  }
  json Post(SchedulerService& s, const std::string& path, const json& body) {
    httplib::Client http("127.0.0.1", s.port());
    http.set_connection_timeout(10, 0);
    http.set_read_timeout(30, 0);
    auto res = http.Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(res && res->status == 200) << path;
    if (!res) return json();
    return json::parse(res->body, nullptr, false);
  }
  std::map<std::string, int64_t> Prioritize(SchedulerService& s, const json& pod,
                                            const std::vector<std::string>& nodes) {
    json p = Post(s, "/prioritize", {{"Pod", pod}, {"NodeNames", nodes}});
    std::map<std::string, int64_t> out;
    if (!p.is_array()) return out;
    for (const auto& e : p) out[e["Host"].get<std::string>()] = e["Score"].get<int64_t>();
    return out;
  }
  // Plays the device plugin after Allocate: releases the node lock /bind left.
  void ReleaseLock(const std::string& node) {
    api_.Patch("nodes", "", node,
               {{"metadata", {{"annotations", {{core::kAnnotationNodeLock, nullptr}}}}}});
  }

  fakes::FakeApiServer api_;
  std::unique_ptr<k8s::Client> client_;
};

json TracePod(const sim::TracePod& p, const std::string& name) {
  json pod = sim::TracePodSpec(p);
  pod["metadata"]["name"] = name;
  pod["metadata"]["namespace"] = "ml";
  pod["spec"]["schedulerName"] = "fracgpu-scheduler";
  return pod;
}

core::NodeState Node(const std::string& name, int64_t cpu_milli, int gpus) {
  core::NodeState n;
  n.name = name;
  n.cpu_milli_total = cpu_milli;
  n.mem_mib_total = 262144;
  for (int g = 0; g < gpus; ++g) {
    core::GpuState s;
    s.info.uuid = name + "-gpu" + std::to_string(g);
    s.info.index = g;
    s.info.count = 10;
    s.info.devmem_mib = 16384;
    s.info.devcore = 100;
    s.info.type = "T4";
    n.gpus.push_back(s);
  }
  return n;
}

// Two empty 2-GPU nodes, identical but for their CPU: a CPU-heavy pod (16 cores for ½ GPU,
// where the target workload — a running 1-core ½-GPU pod and this one — has 17 cores per GPU)
// is routed by CpuRoute to
// the node whose CPU stays enough for its free GPUs (node-b, 64 cores: 48 left for 1.5 GPUs that
// need 25.5) instead of the first by name (node-a, 20 cores: 4 left). Before issue 34 item 7
// the extender had no node CPU and the shapes of M had CPU 0: both nodes had CPU to spare, the
// scores were equal (plain FGD) and node-a, first by name, got 10.
TEST_F(FragmentationReplayTest, PrioritizeReadsEachNodesCpu) {
  api_.Put("nodes", RegisteredNode(Node("node-a", 20000, 2)));
  api_.Put("nodes", RegisteredNode(Node("node-b", 64000, 2)));
  api_.Put("nodes", RegisteredNode(Node("node-c", 64000, 2)));
  // A running pod (1 core, ½ GPU) on node-c, whose shape the target workload counts.
  json running = TracePod(sim::TracePod{"light", 1000, 1024, 1, 500, "", 0}, "light");
  const std::string allocated =
      core::EncodePodGrants({{core::DeviceGrant{"node-c-gpu0", "NVIDIA", 8192, 50}}});
  running["metadata"]["uid"] = "uid-light";
  running["metadata"]["annotations"] = {
      {core::kAnnotationVgpuNode, "node-c"},
      {core::kAnnotationVgpuDevicesAllocated, allocated},
      {core::kAnnotationAllocationSignature,
       core::SignAllocation(kKey, "uid-light", "node-c", allocated)}};
  running["spec"]["nodeName"] = "node-c";
  api_.Put("pods", running);
  auto svc = StartService();
  ASSERT_TRUE(api_.WaitFor([&] {
    auto c = svc->state().Node("node-c");
    return c && c->cpu_milli_used == 1000 && c->gpus[0].used_cores == 50;
  }));
  auto a = svc->state().Node("node-a");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->cpu_milli_total, 20000);
  EXPECT_EQ(a->cpu_milli_used, 0);
  EXPECT_EQ(a->mem_mib_total, 262144);
  EXPECT_EQ(svc->state().Node("node-b")->cpu_milli_total, 64000);

  json pod =
      api_.Put("pods", TracePod(sim::TracePod{"heavy", 16000, 1024, 1, 500, "", 0}, "heavy"));
  auto scores = Prioritize(*svc, pod, {"node-a", "node-b"});
  EXPECT_EQ(scores["node-b"], 10);
  EXPECT_EQ(scores["node-a"], 0);

  // A CPU-only pod bound to node-b takes 40 of its cores: 8 would be left after the heavy pod,
  // short of the 25.5 its free GPUs need, as on node-a; neither is preferred for CPU and
  // node-a, first by name, gets 10.
  json batch = TracePod(sim::TracePod{"batch", 40000, 1024, 0, 0, "", 0}, "batch");
  batch["spec"]["nodeName"] = "node-b";
  api_.Put("pods", batch);
  // 40 cores, plus the heavy pod's 16 that /prioritize reserved there (scheduler/extender.h
  // "Reservations"); its next /prioritize drops its own reservation before scoring.
  ASSERT_TRUE(
      api_.WaitFor([&] { return svc->state().Node("node-b")->cpu_milli_used == 40000 + 16000; }));
  scores = Prioritize(*svc, pod, {"node-a", "node-b"});
  EXPECT_EQ(scores["node-a"], 10);
  EXPECT_LT(scores["node-b"], 10);
  // Its cores are given back when it is deleted.
  api_.Remove("pods", "ml", "batch");
  ASSERT_TRUE(api_.WaitFor([&] { return svc->state().Node("node-b")->cpu_milli_used == 0; }));
  scores = Prioritize(*svc, pod, {"node-a", "node-b"});
  EXPECT_EQ(scores["node-b"], 10);
}

// The replay: the first 300 GPU pods of the default trace (openb_pod_list_default.csv, by name)
// on the first 40 GPU nodes of openb_node_list_gpu_node.csv (174 GPUs of six models), arrivals
// as `fracgpu simulate` draws them for seed 42 (shuffled, tuned to 130 % of the GPUs). The
// simulator's run of FGD+CpuRoute+Crumb (kFragmentationAwarePolicy) with the node tie-break order
// by name (NodeOrder::kByName, the order /prioritize's 10 follows) gives each arrival's node and
// GPUs. The same nodes (GPUs in the register annotation, allocatable CPU and memory — without
// the CPU when `node_cpu` is false, as the extender saw nodes before issue 34 item 7) and each
// arrival as a pod are put in the fake API server, and each pod in arrival order goes through
// what kube-scheduler does: NodeResourcesFit (CPU and memory requests against the trace's
// capacity, counted by this test from what it bound), then /filter, /prioritize, the highest
// score (the first by name among equals: none occur, /prioritize gives one 10), /bind. The
// extender is given the simulator's target workload M (ExtenderConfig::fragmentation_workload).
// CPU-only pods are not in the slice: kube-scheduler places them without the extender. No pod
// leaves (the simulator's experiment has no departures). The replay stops at the first pod the
// extender places elsewhere than the simulator.
struct ReplayResult {
  size_t arrivals = 0;
  int64_t sim_failed = 0;
  int64_t agreed = 0;  // arrivals before the first disagreement
  int64_t placed = 0;
  std::string first_difference;  // "" when every arrival agreed
  double ms_per_pod = 0;
};

class ReplayTest : public FragmentationReplayTest {
 protected:
  // With cpu_pods the slice is the trace's first 300 pods of any kind, CPU-only ones too, each
  // with `nvidia.com/gpu: 0` as bench/cluster/trace.py sends them (kube-scheduler calls the
  // extender only for pods that name a managed resource).
  ReplayResult Replay(bool node_cpu, bool cpu_pods = false) {
    ReplayResult out;
    const std::string dir = std::string(FRACGPU_DATA_DIR) + "/csv/";
    auto nodes = sim::LoadNodeCsv(dir + "openb_node_list_gpu_node.csv");
    auto pods = sim::LoadPodCsv(dir + "openb_pod_list_default.csv");
    EXPECT_TRUE(nodes.ok() && pods.ok());
    if (!nodes.ok() || !pods.ok()) return out;
    nodes->resize(40);
    std::vector<sim::TracePod> slice;
    for (const auto& p : *pods) {
      if ((cpu_pods || p.num_gpus > 0) && slice.size() < 300) slice.push_back(p);
    }
    auto cluster = sim::BuildCluster(*nodes, "nodes");
    auto workload = cluster.ok() ? sim::PrepareWorkload(slice, *cluster, 95, "pods")
                                 : Result<sim::SimWorkload>(cluster.status());
    EXPECT_TRUE(workload.ok()) << workload.status().message();
    if (!workload.ok()) return out;
    sim::RunOptions options;
    options.node_order = sim::RunOptions::NodeOrder::kByName;
    options.keep_placements = true;
    auto run =
        sim::RunExperiment(*cluster, *workload, core::kFragmentationAwarePolicy, 42, options);
    EXPECT_TRUE(run.ok()) << run.status().message();
    if (!run.ok()) return out;
    out.arrivals = run->placements.size();
    out.sim_failed = run->failed;

    std::vector<std::string> names;
    std::map<std::string, std::pair<int64_t, int64_t>> free;  // node → cpu, memory left
    for (const auto& n : cluster->states) {
      json node = RegisteredNode(n);
      if (!node_cpu) node["status"]["allocatable"].erase("cpu");
      api_.Put("nodes", node);
      names.push_back(n.name);
      free[n.name] = {n.cpu_milli_total, n.mem_mib_total};
    }
    std::vector<json> created;
    for (size_t i = 0; i < run->placements.size(); ++i) {
      const sim::TracePod& p = workload->pods[run->placements[i].pod];
      std::string index = std::to_string(i);
      index.insert(0, index.size() < 4 ? 4 - index.size() : 0, '0');
      json pod = TracePod(p, "r" + index + "-" + p.name.substr(6));
      if (p.num_gpus == 0)
        pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "0";
      created.push_back(api_.Put("pods", pod));
    }
    auto svc = StartService(workload->target);
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < run->placements.size(); ++i) {
      const sim::PodPlacement& want = run->placements[i];
      const sim::TracePod& p = workload->pods[want.pod];
      const json& pod = created[i];
      const std::string what = "arrival " + std::to_string(i) + " (" + k8s::Name(pod) + ", " +
                               std::to_string(p.cpu_milli) + "m CPU, " +
                               std::to_string(p.num_gpus) + " × " + std::to_string(p.gpu_milli) +
                               " milli-GPU)";
      // kube-scheduler's NodeResourcesFit.
      std::vector<std::string> candidates;
      for (const auto& n : names) {
        if (free[n].first >= p.cpu_milli && free[n].second >= p.memory_mib) {
          candidates.push_back(n);
        }
      }
      json f = Post(*svc, "/filter", {{"Pod", pod}, {"NodeNames", candidates}});
      std::vector<std::string> fit = f["NodeNames"].is_array()
                                         ? f["NodeNames"].get<std::vector<std::string>>()
                                         : std::vector<std::string>{};
      std::string chosen;
      if (!fit.empty()) {
        auto scores = Prioritize(*svc, pod, fit);
        int64_t best = -1;
        for (const auto& n : fit) {  // in name order: the first of the highest
          if (scores[n] > best) {
            best = scores[n];
            chosen = n;
          }
        }
      }
      if (chosen != want.node) {
        out.first_difference = what + ": the extender chose node \"" + chosen +
                               "\", the simulator \"" + want.node + "\"";
        break;
      }
      if (chosen.empty()) {  // fits nowhere in either
        ++out.agreed;
        continue;
      }
      json b = Post(*svc, "/bind",
                    {{"PodName", k8s::Name(pod)},
                     {"PodNamespace", "ml"},
                     {"PodUID", k8s::Uid(pod)},
                     {"Node", chosen}});
      EXPECT_EQ(b["Error"], "") << what << ": " << b.dump();
      if (p.num_gpus > 0) ReleaseLock(chosen);
      free[chosen].first -= p.cpu_milli;
      free[chosen].second -= p.memory_mib;
      auto bound = api_.Get("pods", "ml", k8s::Name(pod));
      std::optional<std::string> value;
      if (bound) value = k8s::Annotation(*bound, core::kAnnotationVgpuDevicesAllocated);
      auto grants = value ? core::DecodePodGrants(*value) : Result<core::PodGrants>(NotFound(""));
      std::vector<std::string> got;
      if (grants.ok()) {
        for (const auto& c : *grants)
          for (const auto& g : c) got.push_back(g.uuid);
      }
      std::vector<std::string> expected = want.gpus;
      std::sort(got.begin(), got.end());
      std::sort(expected.begin(), expected.end());
      if (got != expected) {
        out.first_difference = what + " on " + chosen + ": other GPUs than the simulator's";
        break;
      }
      ++out.agreed;
      ++out.placed;
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    out.ms_per_pod = ms / static_cast<double>(std::max<int64_t>(1, out.agreed));
    if (out.first_difference.empty()) {
      // The node state the extender ends with is the simulator's: CPU and memory left.
      for (const auto& n : names) {
        auto s = svc->state().Node(n);
        EXPECT_TRUE(s);
        if (!s) continue;
        if (node_cpu) {
          EXPECT_EQ(s->cpu_milli_total - s->cpu_milli_used, free[n].first) << n;
        }
        EXPECT_EQ(s->mem_mib_total - s->mem_mib_used, free[n].second) << n;
      }
    }
    return out;
  }
};

TEST_F(ReplayTest, AlibabaTraceSliceLandsWhereTheSimulatorPutsIt) {
  const ReplayResult r = Replay(/*node_cpu=*/true);
  EXPECT_GT(r.arrivals, 150u);
  EXPECT_GT(r.sim_failed, 0);  // 130 %: the cluster fills
  EXPECT_EQ(r.first_difference, "");
  EXPECT_EQ(r.agreed, static_cast<int64_t>(r.arrivals));
  EXPECT_EQ(r.placed, static_cast<int64_t>(r.arrivals) - r.sim_failed);
  std::printf(
      "replay: %zu arrivals (%lld placed, %lld fit nowhere), %lld agree with the "
      "simulator's fragmentation-aware policy; %.2f ms per pod (/filter + /prioritize + /bind)\n",
      r.arrivals, static_cast<long long>(r.placed), static_cast<long long>(r.sim_failed),
      static_cast<long long>(r.agreed), r.ms_per_pod);
}

// The replay with the CPU-only pods of the trace among them (issue 37 item 2): the extender
// scores a fragmentation-aware CPU-only pod by FGD+CpuRoute as the simulator places it (before,
// 0 on every node, so kube-scheduler chose), and /bind counts its CPU on the node at once (before,
// only when the pod's watch event came, so a pod scored right after it could see the node's CPU
// as it was before).
TEST_F(ReplayTest, CpuOnlyPodsLandWhereTheSimulatorPutsThemToo) {
  const ReplayResult r = Replay(/*node_cpu=*/true, /*cpu_pods=*/true);
  EXPECT_GT(r.arrivals, 150u);
  EXPECT_EQ(r.first_difference, "");
  EXPECT_EQ(r.agreed, static_cast<int64_t>(r.arrivals));
  EXPECT_EQ(r.placed, static_cast<int64_t>(r.arrivals) - r.sim_failed);
  std::printf(
      "replay with CPU-only pods: %zu arrivals (%lld placed, %lld fit nowhere), %lld agree\n",
      r.arrivals, static_cast<long long>(r.placed), static_cast<long long>(r.sim_failed),
      static_cast<long long>(r.agreed));
}

// The same replay with the nodes' CPU hidden from the extender (allocatable without cpu), as
// before issue 34 item 7: FGD+CpuRoute cannot route and the extender departs from the
// simulator's placement (kube-scheduler's NodeResourcesFit still counts CPU).
TEST_F(ReplayTest, WithoutNodeCpuTheExtenderDepartsFromTheSimulator) {
  const ReplayResult r = Replay(/*node_cpu=*/false);
  EXPECT_NE(r.first_difference, "");
  EXPECT_LT(r.agreed, static_cast<int64_t>(r.arrivals));
  std::printf("replay without node CPU: first departure after %lld of %zu arrivals: %s\n",
              static_cast<long long>(r.agreed), r.arrivals, r.first_difference.c_str());
}

}  // namespace
}  // namespace fracgpu::scheduler
