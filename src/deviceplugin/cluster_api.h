#pragma once
// The few Kubernetes API calls the device plugin makes, behind a narrow interface so the
// Allocate logic can be tested in memory (docs/design/STYLE.md: the network comes in through a
// small interface). K8sClusterApi implements it over k8s::Client; tests/fakes/apiserver serves it
// over real HTTP in the integration test.

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace fracgpu::k8s {
class Client;
}

namespace fracgpu::deviceplugin {

using nlohmann::json;

/// Builds a merge patch (RFC 7386) from the object's current state; a null json means "no
/// change"; an error aborts the patch and is returned as is.
using PatchFn = std::function<Result<json>(const json& current)>;

/// Nodes and pods as the device plugin reads and writes them.
class ClusterApi {
 public:
  virtual ~ClusterApi() = default;
  /// GET the node. Errors: kNotFound, kUnavailable, … (k8s/client.h mapping).
  virtual Result<json> GetNode(const std::string& name) = 0;
  /// GET the pod `ns/name`.
  virtual Result<json> GetPod(const std::string& ns, const std::string& name) = 0;
  /// Pods whose spec.nodeName is `node`: a JSON array of pod objects.
  virtual Result<json> ListPodsOnNode(const std::string& node) = 0;
  /// Read-modify-write of a pod with optimistic concurrency: reads it, calls `make_patch`,
  /// applies the patch guarded by the read resourceVersion, and on a conflict starts over.
  /// Returns the patched object (the current one when `make_patch` returned null).
  virtual Result<json> PatchPod(const std::string& ns, const std::string& name,
                                const PatchFn& make_patch) = 0;
  /// The same for a node.
  virtual Result<json> PatchNode(const std::string& name, const PatchFn& make_patch) = 0;
};

/// ClusterApi over the REST client (`client` not owned; must outlive this). Thread-safe.
class K8sClusterApi final : public ClusterApi {
 public:
  explicit K8sClusterApi(k8s::Client* client) : client_(client) {}
  Result<json> GetNode(const std::string& name) override;
  Result<json> GetPod(const std::string& ns, const std::string& name) override;
  Result<json> ListPodsOnNode(const std::string& node) override;
  Result<json> PatchPod(const std::string& ns, const std::string& name,
                        const PatchFn& make_patch) override;
  Result<json> PatchNode(const std::string& name, const PatchFn& make_patch) override;

 private:
  k8s::Client* client_;
};

}  // namespace fracgpu::deviceplugin
