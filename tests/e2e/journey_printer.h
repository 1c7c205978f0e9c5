#pragma once
// The sandbox's narrator (tests/e2e/fake_cluster_main.cc, docs/e2e.md "Sandbox"): one readable
// line per step of a pod's journey through a Cluster, memory in MiB:
//
//   scheduler: pod team-a/demo-0 /filter over 4 nodes: fits node-a, node-c; node-b: <reason>; …
//   scheduler: pod team-a/demo-0 /prioritize: node-a 10, node-c 0 → /bind node-a
//   scheduler: pod team-a/demo-0 bound to node-a: GPU 0 GPU-… (40960 MiB): 10240 MiB, 25 % of the
//   SMs kubelet: node-a Allocate for team-a/demo-0 container demo: NVIDIA_VISIBLE_DEVICES=GPU-…,
//            CUDA_DEVICE_MEMORY_LIMIT_0=10240m (10240 MiB), CUDA_DEVICE_SM_LIMIT=25 (%)
//   container: team-a/demo-0/demo under libvgpu.so: cuMemGetInfo 10240 MiB total, 10240 MiB free
//   pod team-a/demo-0: Running
//
// and a pod that no node fits ("unschedulable: …", once per distinct answer), a failed
// admission on the node, a deletion, and parking (docs/reclaim.md), from a node watch and an
// event watch:
//
//   agent: node-e parked idle memory; lends GPU 0 GPU-… (256 MiB): 192 MiB to borrowers
//   agent: node-e lends nothing (its parked memory is back with its owner)
//   agent: Event GPUMemoryReclaimed on pod team-a/borrow: <the agent's message>
// While quiet (the seeded slices) it prints one line per pod
// once it runs. Lines come from the kube-scheduler driver's attempts and a pod watch.
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cluster.h"
#include "k8s/client.h"
#include "k8s/informer.h"

namespace fracgpu::e2e {

/// The narrator. Thread-safe.
class JourneyPrinter {
 public:
  /// `cluster` (not owned, started, outlives this); `nodes` its shape (names GPUs by node and
  /// index); `say` prints one line.
  JourneyPrinter(Cluster* cluster, std::vector<std::pair<std::string, std::vector<GpuSpec>>> nodes,
                 std::function<void(const std::string&)> say);
  ~JourneyPrinter();
  JourneyPrinter(const JourneyPrinter&) = delete;
  JourneyPrinter& operator=(const JourneyPrinter&) = delete;

  /// Observes the driver and watches pods with bearer `token`; false (with `error`) when the
  /// watch does not sync within 30 s.
  bool Start(const std::string& token, std::string* error);
  void Stop();
  /// Quiet: one line per pod once it runs, nothing else (default false).
  void SetQuiet(bool quiet);
  /// Handles a pod seen elsewhere first (idempotent: each step is printed once per pod).
  void OnPod(const nlohmann::json& pod);

  /// "node-a GPU 0 GPU-… (40960 MiB)" for a GPU of the cluster, else the UUID.
  std::string DescribeGpu(const std::string& uuid) const;

 private:
  void OnAttempt(const std::string& ns, const std::string& name, const Attempt& attempt);
  void OnDeleted(const nlohmann::json& pod);
  void OnNode(const nlohmann::json& node);
  void OnEvent(const nlohmann::json& event);
  std::string Placement(const nlohmann::json& pod) const;

  Cluster* cluster_;
  std::vector<std::pair<std::string, std::vector<GpuSpec>>> nodes_;
  std::function<void(const std::string&)> say_;
  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<k8s::Informer> pods_;
  std::unique_ptr<k8s::Informer> nodes_watch_;
  std::unique_ptr<k8s::Informer> events_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool quiet_ = false;
  std::set<std::string> bound_;                       // "ns/name" whose binding was printed
  std::set<std::string> done_;                        // "<uid>/<phase>" printed
  std::map<std::string, std::string> unschedulable_;  // "ns/name" → last answer printed
  std::map<std::string, std::string> lent_;           // node → GPUs of its record printed
  std::set<std::string> events_seen_;                 // Event UIDs printed
};

}  // namespace fracgpu::e2e
