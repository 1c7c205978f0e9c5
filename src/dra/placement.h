#pragma once
// DRA first-fit (item 5 of docs/dra.md "The same core"): how kube-scheduler's structured
// allocator (k8s.io/dynamic-resource-allocation/structured) places a claim on one node's
// ResourceSlices — devices in slice order, the first whose remaining consumable capacity
// (KEP-5075) fits the request after the request policy's rounding — and the allocation
// result it writes (resource/v1 DeviceRequestAllocationResult with shareID and
// consumedCapacity, every capacity of the device included). Used by the tests' allocator
// stand-in and by the simulator's DRA-first-fit baseline; not a scheduler.

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/dra.h"
#include "core/dra_wire.h"

namespace fracgpu::dra {

using nlohmann::json;

// The capacity check and first fit are core's (core/dra.h), shared with the simulator.
using core::CapacityPolicy;
using core::ConsumedAmount;
using core::DeviceUsage;
using core::ShareRequest;

/// Reading ResourceSlices and allocated claims into DeviceUsage is core's too (core/dra_wire.h,
/// shared with the UI's DRA mode).
using core::UsageFromSlices;

/// First fit (core::FirstFitDevices): for each of `request.count` devices, the first device in
/// order that is free (whole) or whose remaining capacity fits; a claim's devices are distinct.
/// Updates `usage` and returns the allocation results (wire format) with shareIDs from
/// `new_share_id` for multi-allocatable devices. Errors: kResourceExhausted when the request does
/// not fit (usage unchanged).
Result<json> FirstFit(std::vector<DeviceUsage>* usage, const ShareRequest& request,
                      const std::string& driver, const std::function<std::string()>& new_share_id);

/// A quantity in MiB the way the API server serialises it canonically: "<n>Gi" when a whole
/// number of GiB, else "<n>Mi".
std::string MiBQuantity(int64_t mib);

}  // namespace fracgpu::dra
