#pragma once
// The wire side of core/dra.h: resource.k8s.io/v1 ResourceSlices and allocated ResourceClaims
// (the JSON kube-scheduler reads and writes) read into the DeviceUsage that FirstFitDevices
// places on, and a claim's device request read into a ShareRequest. Used by the tests' allocator
// stand-in (dra/placement.h re-exports it) and by the UI's DRA mode (ui/dra_cluster.h).
// Outside input: every field is type-checked, an error names the object, the field and the
// value (clipped), and lists are bounded by the API's own validation limits. Pure: no I/O.

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/dra.h"

namespace fracgpu::core {

/// resource/v1 validation limits, enforced on read.
inline constexpr size_t kDraMaxDevicesPerSlice = 128;  ///< ResourceSliceMaxDevices
inline constexpr size_t kDraMaxResults = 32;           ///< AllocationResultsMaxSize
/// ResourceSliceMaxAttributesAndCapacitiesPerDevice: attributes + capacities of one device.
inline constexpr size_t kDraMaxAttributesAndCapacities = 32;

/// Reads the devices of `driver` from `slices` (ResourceSlice objects; per pool only the
/// highest generation counts), in slice order then device order, and what `claims`
/// (ResourceClaim objects; those without status.allocation are skipped) already consume on
/// them: per result of `driver` naming one of those devices, consumedCapacity `memory` (whole
/// MiB) and `cores` (whole units), keys plain or qualified ("<driver>/memory"); a result
/// without consumedCapacity, or on a device without allowMultipleAllocations, takes the whole
/// device. Results naming devices not in `slices` (another pool, a stale slice) are ignored.
///
/// `problems` null (strict): the first malformed object is the error (kInvalidArgument naming
/// it: "ResourceSlice <name> spec.devices[2] (gpu-2) capacity.memory.value \"x\": …",
/// "ResourceClaim <ns>/<name> status.allocation.devices.results[0].consumedCapacity.memory …").
/// `problems` non-null (lenient, for displays): each malformed slice, device or claim is
/// appended there instead and skipped, and a device that a malformed result names is marked
/// taken whole (what the claim consumes is unknown, so nothing more is placed there); never
/// fails then. Bounded: more than kDraMaxDevicesPerSlice devices, kDraMaxResults results or
/// kDraMaxAttributesAndCapacities attributes + capacities is malformed; sums of consumed
/// capacity saturate instead of overflowing.
Result<std::vector<DeviceUsage>> UsageFromSlices(const std::vector<nlohmann::json>& slices,
                                                 const std::vector<nlohmann::json>& claims,
                                                 const std::string& driver,
                                                 std::vector<std::string>* problems = nullptr);

/// One request of a claim's spec.devices.requests (resource/v1 DeviceRequest, as
/// core::ConvertHamiPod writes it): `name`, and of `exactly` the `count` (allocationMode
/// ExactCount, default 1; 1..kDraMaxResults) and capacity.requests `memory` (whole MiB) and
/// `cores` (whole units); an absent capacity is -1 (the request policy's default). The
/// selector is left empty: selectors are CEL, the caller's (core::DeviceSelected evaluates
/// fracgpu's own rules). Errors: kInvalidArgument naming the field and value (`what` prefixes
/// it), also for what fracgpu's claims never use (firstAvailable, allocationMode All).
Result<ShareRequest> ShareRequestOf(const nlohmann::json& device_request,
                                    const std::string& what = "request");

}  // namespace fracgpu::core
