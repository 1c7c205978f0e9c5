#pragma once
// DRA semantics fracgpu shares between the DRA driver (src/dra/), the webhook's DRA mode
// (src/scheduler/) and the simulator (src/sim/): the names of fracgpu's DRA driver, and the
// capacity check and first-fit placement of kube-scheduler's structured-parameters allocator
// (k8s.io/dynamic-resource-allocation/structured) over one node's devices — devices in slice
// order, the first whose remaining consumable capacity (KEP-5075) fits the request after the
// request policy's rounding. Pure: no I/O; the wire format is the caller's (dra/placement.h).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/frag.h"

namespace fracgpu::core {

/// fracgpu's DRA driver name (ResourceSlice spec.driver, allocation results' driver): a DNS
/// subdomain ending in a domain fracgpu owns (resource/v1 ResourceSliceSpec.Driver).
inline constexpr const char* kDraDriverName = "gpu.fracgpu.io";
/// Capacity names published per device (unqualified: in the driver's domain).
inline constexpr const char* kDraCapacityMemory = "memory";  ///< MiB of device memory
inline constexpr const char* kDraCapacityCores = "cores";    ///< percent of the SMs, 0..100
/// DeviceClass names deploy/dra/ installs.
inline constexpr const char* kDraFractionalClass = "gpu.fracgpu.io";
inline constexpr const char* kDraWholeClass = "whole-gpu.fracgpu.io";

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

/// One allocation of a device as a claim records it (status.allocation.devices.results[]);
/// for display, FirstFitDevices does not read it.
struct DeviceAllocation {
  std::string claim;       ///< "<namespace>/<name>" of the ResourceClaim
  std::string pod;         ///< the first pod of status.reservedFor; "" when none
  bool whole = false;      ///< no consumed capacity: the whole device
  int64_t memory_mib = 0;  ///< consumed memory, MiB (0 when whole)
  int64_t cores = 0;       ///< consumed cores, percent (0 when whole)
};

/// One device of a node's pool with what is already consumed on it.
struct DeviceUsage {
  std::string pool;
  std::string device;
  std::string node;  ///< spec.nodeName of its ResourceSlice ("" when not node-local)
  bool multiple_allocations = false;  ///< allowMultipleAllocations
  bool allocated_whole = false;       ///< taken by a whole-device allocation
  CapacityPolicy memory;              ///< MiB
  CapacityPolicy cores;               ///< percent
  int64_t used_memory = 0;            ///< MiB consumed by existing shares
  int64_t used_cores = 0;
  int32_t shares = 0;                                    ///< allocations on this device
  nlohmann::json attributes = nlohmann::json::object();  ///< the slice's attributes (for selectors)
  std::vector<DeviceAllocation> allocations;             ///< the claims on it (UsageFromSlices)
};

/// One exact-count device request of a claim.
struct ShareRequest {
  std::string name = "gpu";
  int32_t count = 1;
  int64_t memory_mib = -1;  ///< -1 = not requested (the policy default)
  int64_t cores = -1;       ///< -1 = not requested
  /// A selector over the device (the DeviceClass + claim CEL over its attributes, evaluated by
  /// the caller); called with the element of the usage list itself; empty = every device.
  std::function<bool(const DeviceUsage& device)> selector;
};

/// One device a first fit took, with what it consumes there.
struct DeviceTake {
  size_t device = 0;       ///< index into the usage list
  bool shared = false;     ///< a share of a multi-allocatable device (else the whole device)
  int64_t memory_mib = 0;  ///< consumed (shared only)
  int64_t cores = 0;       ///< consumed (shared only)
};

/// The amount a request consumes of a capacity under `p` (rounded up to min + n·step), or -1
/// when it violates the policy or exceeds max / the total.
int64_t ConsumedAmount(const CapacityPolicy& p, int64_t requested);

/// First fit: for each of `request.count` devices, the first device in order that is free
/// (whole) or whose remaining capacity fits (ConsumedAmount); a claim's devices are distinct.
/// Updates `usage` and returns the devices taken, in request order. Errors:
/// kResourceExhausted naming the request and which of its devices fits nowhere (usage unchanged).
Result<std::vector<DeviceTake>> FirstFitDevices(std::vector<DeviceUsage>* usage,
                                                const ShareRequest& request);

/// kube-scheduler's DRA first fit on the simulator's compact node: each GPU is a
/// multi-allocatable device with capacity `cores` = its leftover in milli-GPU of 1000 (step 1,
/// a whole-card demand consumes all of it, as the whole class's default does; memory never
/// constrains the trace, docs/simulate.md), allowed by `demand`'s type mask; FirstFitDevices
/// picks the GPUs. Returns a pick with count 0 when the node's GPUs do not fit (CPU and host
/// memory are the caller's check, core::Fits).
GpuPick DraFirstFitPick(const FragNode& node, const FragDemand& demand);

}  // namespace fracgpu::core
