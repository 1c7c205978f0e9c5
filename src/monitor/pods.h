#pragma once
// Which pods run on this node, by UID: the monitor names a region directory
// (<pod UID>_<container>) after its pod's namespace and name, and removes directories of pods
// that are gone. K8sPodLister asks the API server; tests use an in-memory lister.

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "k8s/client.h"

namespace fracgpu::monitor {

/// A pod of this node.
struct PodRef {
  std::string uid;
  std::string namespace_name;
  std::string name;
  /// CRI container ID (status.containerStatuses[].containerID without "<runtime>://") → name:
  /// how the enforcement maps a process's cgroup to its container.
  std::map<std::string, std::string> container_names;
  /// Annotation fracgpu.io/enforcement ("report" | "kill"), "" when absent: the pod's opt-in
  /// memory action (docs/enforcement.md).
  std::string enforcement;
  /// Annotation fracgpu.io/park ("true" | "false"), "" when absent: the pod's opt-in to parking
  /// when idle (docs/reclaim.md; monitor/parking.h decides with the namespace default).
  std::string park;

  bool operator==(const PodRef&) const = default;
};

/// Lists the pods bound to a node.
class PodLister {
 public:
  virtual ~PodLister() = default;
  /// Every pod whose spec.nodeName is `node` (any phase). Errors: the API server's
  /// (kUnavailable, kPermissionDenied, …); on error the caller must not remove anything.
  virtual Result<std::vector<PodRef>> ListNodePods(const std::string& node) = 0;
};

/// Extracts the pods of a PodList object (core/v1). Items without metadata.uid are skipped.
/// Errors: kInvalidArgument when `list` has no `items` array.
Result<std::vector<PodRef>> PodsFromList(const nlohmann::json& list);

/// PodLister over the API server: GET /api/v1/pods?fieldSelector=spec.nodeName=<node>
/// (consistent read, paged). `client` is not owned and must outlive the lister.
class K8sPodLister final : public PodLister {
 public:
  explicit K8sPodLister(k8s::Client* client) : client_(client) {}
  Result<std::vector<PodRef>> ListNodePods(const std::string& node) override;

 private:
  k8s::Client* client_;
};

}  // namespace fracgpu::monitor
