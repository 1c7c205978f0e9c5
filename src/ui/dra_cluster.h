#pragma once
// The UI in DRA mode (`fracgpu ui --dra-mode`, docs/ui.md "DRA mode"): the cluster is fracgpu's
// devices in resource.k8s.io/v1 ResourceSlices (driver gpu.fracgpu.io, capacities memory and
// cores) with what allocated ResourceClaims consume on them (status.allocation.devices.results
// with consumedCapacity), read with core::UsageFromSlices; the fit preview converts the
// notebook's pod as the webhook's DRA mode does (core::ConvertHamiPod) and places its claims
// with kube-scheduler's first fit over devices, core::FirstFitDevices — the code of the
// simulator's DRA-FirstFit row and of the tests' allocator stand-in.

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/dra.h"
#include "core/request.h"

namespace fracgpu::ui {

struct ClusterSnapshot;

/// Upper bounds on what one snapshot reads; the rest is left out and said in `problems`.
inline constexpr size_t kDraMaxSlices = 5000;
inline constexpr size_t kDraMaxClaims = 100000;

/// fracgpu's DRA devices per node.
struct DraCluster {
  struct Node {
    std::string name;
    std::vector<core::DeviceUsage> devices;  ///< in slice order (kube-scheduler's first-fit order)
  };
  std::vector<Node> nodes;  ///< nodes of the cluster with at least one device, sorted by name
  /// Every malformed slice, device or claim (skipped; a device a malformed result names counts
  /// as taken whole), each naming the object, the field and the value; lists cut at the bounds;
  /// devices of slices for no node of the cluster.
  std::vector<std::string> problems;
};

/// Builds the DRA view from the listed Node, ResourceSlice and ResourceClaim objects; only
/// slices of `driver` count. Never fails: what cannot be read is in `problems`.
DraCluster BuildDraCluster(const std::vector<nlohmann::json>& nodes,
                           const std::vector<nlohmann::json>& slices,
                           const std::vector<nlohmann::json>& claims,
                           const std::string& driver = core::kDraDriverName);

/// GET /api/cluster in DRA mode: the same shape as ClusterJson (so the dashboard draws it) with
/// "mode": "dra" and "problems"; per GPU the device's `device`, `pool`, `shared`
/// (allowMultipleAllocations), `devmem_mib` / `devcore` its capacities, `used_mem_mib` /
/// `used_cores` the consumed capacity (a whole allocation consumes all), `used` the claims on
/// it and `slices` [{pod, namespace, claim, mem_mib, cores, whole}] (pod: status.reservedFor's
/// first pod, else the claim's name). No `count`: a shared device has no share limit. As in
/// ClusterJson, a slice names pod, namespace and claim only when `visible(namespace)` (null:
/// never); others have them null, after the named ones, largest first. A problem about a claim
/// (ClaimProblemNamespace) is in `problems` only for a viewer of its namespace, else counted in
/// `problems_hidden`.
nlohmann::json DraClusterJson(const ClusterSnapshot& snapshot,
                              const std::function<bool(const std::string& ns)>& visible = nullptr);

/// The namespace a DraCluster problem belongs to: nullopt for one that names no claim (slices,
/// nodes, the listing's bounds: shown to everyone); the claim's namespace for
/// core::UsageFromSlices' "ResourceClaim <ns>/<name> …"; "" (shown to nobody) for a claim without
/// readable metadata.
std::optional<std::string> ClaimProblemNamespace(const std::string& problem);

/// The DRA part of GET /api/options: GPU types (the devices' `type` attribute) and every device
/// {uuid, node, type, index}.
nlohmann::json DraGpuOptionsJson(const ClusterSnapshot& snapshot);

/// Where the claims of `templates` (core::ConvertHamiPod's ResourceClaimTemplates for the pod
/// of `request`) fit now: FitPreviewJson's shape, plus "mode": "dra". Per node (the nodes with
/// devices): the claims are placed in template order by core::FirstFitDevices on the node's
/// devices, each device selected by core::DeviceSelected; `gpus` the UUIDs first fit takes,
/// `eligible` the devices that could take one device of the first claim alone, `candidates`
/// [{uuid, device, mem_mib (what it would consume), devmem_mib, free_mem_mib}], `reason` when it
/// does not fit: the container, the first-fit error and why each device refused. A cordoned node
/// never fits (kCordonedNodeReason).
nlohmann::json DraFitPreviewJson(const std::vector<nlohmann::json>& templates,
                                 const core::PodRequest& request, const ClusterSnapshot& snapshot);

}  // namespace fracgpu::ui
