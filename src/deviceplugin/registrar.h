#pragma once
// Node registration: the `hami.io/node-nvidia-register` annotation (docs/design/CONTRACT.md §2),
// written on start, on change and periodically, and patched only when its value differs; with it
// the GPU link scores `hami.io/node-nvidia-score` (deviceplugin/topology.h) when there are some.

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "core/device.h"
#include "deviceplugin/cluster_api.h"

namespace fracgpu::deviceplugin {

/// Writes the register annotation of one node. Thread-compatible.
class NodeRegistrar {
 public:
  /// `api` not owned.
  NodeRegistrar(std::string node_name, ClusterApi* api) : node_(std::move(node_name)), api_(api) {}
  /// Reads the node and patches the annotation to EncodeNodeRegister(devices) when the node's
  /// value differs. Returns true when it patched. Errors: the API server's (kUnavailable, …).
  /// Also patches `hami.io/node-nvidia-score` (the link scores) when the node's value differs.
  Result<bool> Sync(const std::vector<core::DeviceInfo>& devices);
  /// The link scores' value (EncodeTopologyScores) Sync writes from now on; "" (the default):
  /// Sync leaves that annotation alone.
  void set_topology_scores(std::string value) { topology_scores_ = std::move(value); }

 private:
  std::string node_;
  ClusterApi* api_;
  std::string topology_scores_;
};

}  // namespace fracgpu::deviceplugin
