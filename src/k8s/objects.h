#pragma once
// Typed accessors for the few fields of Kubernetes objects fracgpu reads. They never throw:
// a missing or mistyped field reads as empty / the default.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace fracgpu::k8s {

/// metadata.name ("" when absent).
std::string Name(const nlohmann::json& obj);
/// metadata.namespace ("" for cluster-scoped objects).
std::string Namespace(const nlohmann::json& obj);
/// metadata.uid.
std::string Uid(const nlohmann::json& obj);
/// metadata.resourceVersion.
std::string ResourceVersion(const nlohmann::json& obj);
/// "<namespace>/<name>", or "<name>" for cluster-scoped objects (the informer store key).
std::string Key(const nlohmann::json& obj);
/// metadata.annotations[key], nullopt when absent or not a string.
std::optional<std::string> Annotation(const nlohmann::json& obj, const std::string& key);
/// metadata.labels[key], nullopt when absent or not a string.
std::optional<std::string> Label(const nlohmann::json& obj, const std::string& key);
/// spec.nodeName of a pod.
std::string PodNodeName(const nlohmann::json& pod);
/// status.phase of a pod ("Pending", "Running", "Succeeded", "Failed", "Unknown" or "").
std::string PodPhase(const nlohmann::json& pod);
/// spec.schedulerName of a pod ("" when absent).
std::string PodSchedulerName(const nlohmann::json& pod);
/// metadata.creationTimestamp ("" when absent or not a string; the API server writes RFC 3339
/// UTC in whole seconds, so two such strings order as the times do).
std::string CreationTimestamp(const nlohmann::json& obj);
/// True when metadata.deletionTimestamp is set.
bool IsTerminating(const nlohmann::json& obj);
/// status.allocatable[resource] of a node as an integer (0 when absent or not a whole number).
int64_t NodeAllocatable(const nlohmann::json& node, const std::string& resource);

}  // namespace fracgpu::k8s
