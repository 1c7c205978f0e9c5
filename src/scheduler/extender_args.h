#pragma once
// Decoding of kube-scheduler's extender requests (k8s.io/kube-scheduler/extender/v1,
// wire-apis.md §4). The Go types carry no json tags, so kube-scheduler sends capitalised keys
// (`Pod`, `NodeNames`, `PodName`, …) while older clients send lower-case ones; keys are
// matched case-insensitively, as Go's decoder does.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace fracgpu::scheduler {

/// ExtenderArgs (filter and prioritize).
struct ExtenderArgs {
  nlohmann::json pod;                   ///< full v1.Pod
  std::vector<std::string> node_names;  ///< NodeNames, or the names of Nodes.items when not cache-capable
  bool had_nodes_list = false;          ///< the request carried full Nodes (nodeCacheCapable: false)
};

/// ExtenderBindingArgs (bind).
struct ExtenderBindingArgs {
  std::string pod_name, pod_namespace, pod_uid, node;
};

/// The member of `obj` whose key equals `key` ignoring ASCII case (exact match preferred);
/// nullptr when absent.
const nlohmann::json* FindKeyIgnoringCase(const nlohmann::json& obj, const std::string& key);

/// Decodes ExtenderArgs. Errors (kInvalidArgument naming the field and its JSON type): not
/// JSON, not an object, Pod missing or not an object, NodeNames not an array of strings,
/// neither NodeNames nor Nodes given, Nodes.items malformed.
Result<ExtenderArgs> DecodeExtenderArgs(const std::string& body);
/// Decodes ExtenderBindingArgs. Errors: not JSON / not an object, PodName, PodNamespace or
/// Node missing or not strings, PodUID present but not a string.
Result<ExtenderBindingArgs> DecodeExtenderBindingArgs(const std::string& body);

}  // namespace fracgpu::scheduler
