#pragma once
// Decoding of kube-scheduler's extender requests (k8s.io/kube-scheduler/extender/v1,
// docs/design/wire-apis.md §4). The Go types carry no json tags, so kube-scheduler sends
// capitalised keys
// (`Pod`, `NodeNames`, `PodName`, …) while older clients send lower-case ones; keys are
// matched case-insensitively, as Go's decoder does.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace fracgpu::scheduler {

/// ExtenderArgs (filter and prioritize).
struct ExtenderArgs {
  nlohmann::json pod;  ///< full v1.Pod
  std::vector<std::string>
      node_names;               ///< NodeNames, or the names of Nodes.items when not cache-capable
  bool had_nodes_list = false;  ///< the request carried full Nodes (nodeCacheCapable: false)
  /// The Nodes v1.NodeList as received (its items in node_names' order) when had_nodes_list,
  /// else null. /filter answers such a request with the passing items of this list.
  nlohmann::json nodes;
};

/// ExtenderBindingArgs (bind).
struct ExtenderBindingArgs {
  std::string pod_name, pod_namespace, pod_uid, node;
};

/// The member of `obj` whose key equals `key` ignoring ASCII case (exact match preferred);
/// nullptr when absent.
const nlohmann::json* FindKeyIgnoringCase(const nlohmann::json& obj, const std::string& key);

/// DNS-1123 label as k8s.io/apimachinery/pkg/util/validation defines it (IsDNS1123Label):
/// 1..63 characters of [a-z0-9-], starting and ending with [a-z0-9]. Namespaces are labels.
bool IsDns1123Label(std::string_view s);
/// DNS-1123 subdomain (IsDNS1123Subdomain): 1..253 characters, labels joined by '.'.
/// Pod and Node names are subdomains (ValidatePodName / ValidateNodeName).
bool IsDns1123Subdomain(std::string_view s);

/// Which DNS-1123 rule a name follows.
enum class NameRule { kLabel, kSubdomain };
/// kInvalidArgument naming `field`, the (quoted, shortened) value and the rule, unless valid.
Status CheckName(std::string_view value, const std::string& field, NameRule rule);
/// A pod UID as the API server writes it (a UUID): required, 1..128 characters of
/// [A-Za-z0-9-_.]; kInvalidArgument naming `field` otherwise.
Status CheckUid(std::string_view value, const std::string& field);

/// The checks DecodeExtenderArgs applies after decoding, in this order: the Pod's annotation
/// and label values are strings, its metadata.name/namespace/uid (when present) are a DNS-1123
/// subdomain / label / UID, and every node name is a DNS-1123 subdomain. kInvalidArgument
/// naming the field (e.g. "ExtenderArgs.NodeNames[3] \"a/b\" is not a DNS-1123 subdomain …").
Status ValidateExtenderArgs(const ExtenderArgs& args);

/// Decodes ExtenderArgs. Errors (kInvalidArgument naming the field and its JSON type): not
/// JSON, nesting deeper than core::kMaxJsonDepth, not an object, Pod missing or not an object,
/// a non-string annotation or label value of the Pod, a Pod name/namespace/uid that is not a
/// DNS-1123 subdomain/label/UID, NodeNames not an array of strings, a node name that is not a
/// DNS-1123 subdomain, neither NodeNames nor Nodes given, Nodes.items malformed (an
/// `items: null` NodeList, which Go writes for an empty list, is an empty list).
Result<ExtenderArgs> DecodeExtenderArgs(const std::string& body);
/// Decodes ExtenderBindingArgs. Errors: not JSON (or nested deeper than core::kMaxJsonDepth) /
/// not an object; PodName, PodNamespace, PodUID or Node missing, empty or not strings;
/// PodName or Node not a DNS-1123 subdomain, PodNamespace not a DNS-1123 label, PodUID not a
/// UID. Nothing is looked up or changed for a refused call, so a name cannot steer an API path.
Result<ExtenderBindingArgs> DecodeExtenderBindingArgs(const std::string& body);

}  // namespace fracgpu::scheduler
