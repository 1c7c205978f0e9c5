#pragma once
// The fields of Node and Pod objects that the cluster model (core/cluster_state.h) reads, taken
// from the API objects: the one reading of them for the scheduler's cache and the UI.

#include <nlohmann/json.hpp>
#include <string>

#include "core/cluster_state.h"

namespace fracgpu::k8s {

/// metadata.name, the register, cordon and topology annotations, and
/// status.allocatable[`gpu_resource`] (0 when absent or unparsable) of a Node object.
core::NodeObject NodeObjectOf(const nlohmann::json& node, const std::string& gpu_resource);

/// Key, UID, phase, spec.nodeName, the allocation annotations (node, allocated, signature), the
/// number of init containers, their statuses (terminated with exit code 0) and whether a
/// container lists `gpu_resource` in its limits or requests, of a Pod object. Missing or
/// mistyped fields read as absent.
core::PodObject PodObjectOf(const nlohmann::json& pod, const std::string& gpu_resource);

}  // namespace fracgpu::k8s
