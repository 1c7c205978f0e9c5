#pragma once
// kube-scheduler's part in the end-to-end tests, with the configuration docs/design/CONTRACT.md §5
// gives it (nodeCacheCapable extender with filter, prioritize and bind verbs): it watches pods and
// nodes, and schedules each pending pod that names our scheduler and has no node, one at a
// time, oldest first:
//   POST /filter   {"Pod": <pod>, "Nodes": null, "NodeNames": [every node]}
//   POST /prioritize (the feasible names) → [{"Host", "Score"}]; the highest score wins, ties
//                  go to the first node in name order (kube-scheduler picks among ties at
//                  random); not called when /filter left one node, as kube-scheduler does not
//                  call it then
//   POST /bind     {"PodName", "PodNamespace", "PodUID", "Node"} → {"Error"}
// (docs/design/wire-apis.md §4). A pod no node fits gets condition PodScheduled=False, reason
// Unschedulable, message "0/<n> nodes are available: ..." on its status, as kube-scheduler
// writes it. Failed pods are retried with backoff (50 ms doubling to 1 s); a pod deletion or a
// node change moves every pod back to the active queue (kube-scheduler's MoveAllToActiveQueue).
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "k8s/client.h"
#include "k8s/informer.h"

namespace fracgpu::e2e {

/// The outcome of the latest scheduling attempt of one pod.
struct Attempt {
  std::string stage;  ///< "filter" | "prioritize" | "bind" | "bound"
  std::string error;  ///< the extender's Error or the HTTP failure
  std::map<std::string, std::string>
      failed_nodes;                   ///< filter's FailedNodes and FailedAndUnresolvableNodes
  std::map<std::string, int> scores;  ///< prioritize's answer
  std::vector<std::string> feasible;  ///< the nodes /filter answered
  bool prioritized = false;           ///< /prioritize was called (more than one node fit)
  std::string node;                   ///< chosen node
};

/// The driver. Thread-safe.
class SchedulerDriver {
 public:
  /// `extender_url` is read at each call (the scheduler may be restarted on another port).
  SchedulerDriver(std::string api_url, std::string token, std::string scheduler_name,
                  std::function<std::string()> extender_url);
  ~SchedulerDriver();

  /// Starts the watches and the scheduling loop; false when the watches do not sync.
  bool Start();
  void Stop();

  /// The latest attempt for pod `ns/name`, if any.
  std::optional<Attempt> LastAttempt(const std::string& ns, const std::string& name) const;
  /// Number of /filter calls made (all pods).
  int filter_calls() const;
  /// Calls `observer(ns, name, attempt)` on the driver's thread after every attempt is recorded
  /// (a failed one before its PodScheduled condition is written). Empty function = none.
  void SetAttemptObserver(
      std::function<void(const std::string& ns, const std::string& name, const Attempt& attempt)>
          observer);

 private:
  void Loop();
  void ScheduleOne(const nlohmann::json& pod, const std::vector<std::string>& nodes);
  nlohmann::json Post(const std::string& path, const nlohmann::json& body, std::string* error);
  void Wake(bool reset_backoff);

  std::string scheduler_name_;
  std::function<std::string()> extender_url_;
  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<k8s::Informer> pods_, nodes_;
  std::thread thread_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool dirty_ = false;
  std::map<std::string, std::chrono::steady_clock::time_point> next_try_;  // by pod UID
  std::map<std::string, std::chrono::milliseconds> backoff_;
  std::set<std::string> bound_;              // pod UIDs this driver bound
  std::map<std::string, Attempt> attempts_;  // by "ns/name"
  std::map<std::string, std::string>
      condition_message_;  // by UID: last Unschedulable message written
  int filter_calls_ = 0;
  std::function<void(const std::string&, const std::string&, const Attempt&)> observer_;
};

}  // namespace fracgpu::e2e
