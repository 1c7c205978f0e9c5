#pragma once
// The fields of Node and Pod objects that the cluster model (core/cluster_state.h) reads, taken
// from the API objects: the one reading of them for the scheduler's cache and the UI.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/cluster_state.h"

namespace fracgpu::k8s {

/// A pod's effective CPU and memory requests, as kube-scheduler's NodeResourcesFit counts them
/// (k8s.io/component-helpers/resource PodRequests): the sum over app containers and restartable
/// init containers (sidecars, restartPolicy Always), raised to each init container's request
/// plus the sidecars declared before it when that is larger; pod-level spec.resources.requests
/// (PodLevelResources) replace the container sum for the resources they name; then
/// spec.overhead is added. A container's request is resources.requests[r], else
/// resources.limits[r] (the API server's defaulting of requests from limits). Quantities are
/// read by core::ParseQuantity; an unreadable one counts 0.
struct HostRequests {
  int64_t cpu_milli = 0;  ///< millicores, rounded up (Quantity.MilliValue)
  int64_t mem_mib = 0;    ///< MiB: bytes / 2^20, rounded up
};
HostRequests PodHostRequests(const nlohmann::json& pod);

/// A quantity as millicores ("2" → 2000, "500m" → 500), rounded down (`round_up` false) or up;
/// nullopt when it does not parse, is negative or beyond int64.
std::optional<int64_t> QuantityMilli(const std::string& text, bool round_up);
/// A quantity of bytes as MiB ("1Gi" → 1024, "1G" → 953 or 954), rounded down or up; nullopt
/// as QuantityMilli.
std::optional<int64_t> QuantityMib(const std::string& text, bool round_up);

/// metadata.name, the register, cordon and topology annotations,
/// status.allocatable[`gpu_resource`] (0 when absent or unparsable), and status.allocatable's
/// cpu (millicores, rounded down) and memory (MiB, rounded down; 0 when absent) of a Node object.
core::NodeObject NodeObjectOf(const nlohmann::json& node, const std::string& gpu_resource);

/// Key, UID, phase, spec.nodeName, the allocation annotations (node, allocated, signature), the
/// number of init containers, their statuses (terminated with exit code 0) and whether a
/// container lists `gpu_resource` in its limits or requests, and its PodHostRequests, of a Pod
/// object. Missing or mistyped fields read as absent.
core::PodObject PodObjectOf(const nlohmann::json& pod, const std::string& gpu_resource);

}  // namespace fracgpu::k8s
