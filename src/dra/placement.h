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
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace fracgpu::dra {

using nlohmann::json;

/// A capacity's request policy (resource/v1 CapacityRequestPolicy with validRange), in the
/// capacity's unit (MiB for memory, percent for cores).
struct CapacityPolicy {
  int64_t total = 0;
  bool has_policy = false;
  int64_t default_value = 0;
  int64_t min = 0;
  int64_t max = 0;   ///< 0 = no max (total applies)
  int64_t step = 0;  ///< 0 = no step
};

/// One device of a node's pool with what is already consumed on it.
struct DeviceUsage {
  std::string pool;
  std::string device;
  bool multiple_allocations = false;  ///< allowMultipleAllocations
  bool allocated_whole = false;       ///< taken by a whole-device allocation
  CapacityPolicy memory;              ///< MiB
  CapacityPolicy cores;               ///< percent
  int64_t used_memory = 0;            ///< MiB consumed by existing shares
  int64_t used_cores = 0;
  int32_t shares = 0;                 ///< allocations on this device
  json attributes = json::object();   ///< the slice's attributes (for selectors)
};

/// One exact-count device request of a claim.
struct ShareRequest {
  std::string name = "gpu";
  int32_t count = 1;
  int64_t memory_mib = -1;  ///< -1 = not requested (the policy default)
  int64_t cores = -1;       ///< -1 = not requested
  /// A selector over the device's attributes (the DeviceClass + claim CEL, evaluated by the
  /// caller); empty = every device.
  std::function<bool(const json& attributes)> selector;
};

/// The amount a request consumes of a capacity under `p` (rounded up to min + n·step), or -1
/// when it violates the policy or exceeds max / the total.
int64_t ConsumedAmount(const CapacityPolicy& p, int64_t requested);

/// Reads one node's devices of `driver` from `slices` (ResourceSlice objects; only the
/// highest pool generation counts) and subtracts what `claims` (ResourceClaim objects with
/// status.allocation) already consume. Errors: kInvalidArgument naming a malformed field.
Result<std::vector<DeviceUsage>> UsageFromSlices(const std::vector<json>& slices, const std::vector<json>& claims,
                                                 const std::string& driver);

/// First fit: for each of `request.count` devices, the first device in order that is free
/// (whole) or whose remaining capacity fits; a claim's devices are distinct. Updates `usage`
/// and returns the allocation results (wire format) with shareIDs from `new_share_id` for
/// multi-allocatable devices. Errors: kResourceExhausted when the request does not fit (usage
/// unchanged).
Result<json> FirstFit(std::vector<DeviceUsage>* usage, const ShareRequest& request, const std::string& driver,
                      const std::function<std::string()>& new_share_id);

/// A quantity in MiB the way the API server serialises it canonically: "<n>Gi" when a whole
/// number of GiB, else "<n>Mi".
std::string MiBQuantity(int64_t mib);

}  // namespace fracgpu::dra
