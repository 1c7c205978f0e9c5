#pragma once
// Reading a ResourceClaim's allocation (resource.k8s.io/v1 ResourceClaimStatus.allocation:
// devices.results[] {request, driver, pool, device, shareID, consumedCapacity}) as written by
// kube-scheduler, into the shares this node must enforce. Outside input: every field is
// checked and named in the error; nothing is trusted to fit the node.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/device.h"

namespace fracgpu::dra {

using nlohmann::json;

/// One allocated device (or share of one) of a claim, for this driver.
struct AllocatedShare {
  std::string request;   ///< results[].request (may be "<request>/<subrequest>")
  std::string pool;      ///< results[].pool (this node's pool)
  std::string device;    ///< results[].device, "gpu-<index>"
  std::string uuid;      ///< the GPU's UUID on this node
  int64_t mem_mib = 0;   ///< consumed memory, MiB (the whole card when not shared)
  int32_t cores = 0;     ///< consumed cores, percent 0..100 (100 when not shared)
  std::string share_id;  ///< results[].shareID ("" for a whole-device allocation)
  bool operator==(const AllocatedShare&) const = default;
};

/// Largest allocation.devices.results accepted (resource/v1 AllocationResultsMaxSize).
inline constexpr size_t kMaxResults = 32;

/// The shares of `claim` (a ResourceClaim object) that `driver` serves from pool `pool`,
/// resolved against the node's devices (`devices`, the register entries with health).
/// consumedCapacity keys may be "memory"/"cores" or qualified with the driver's domain
/// ("<driver>/memory"); a result without consumedCapacity takes the whole device.
/// Errors: kInvalidArgument naming the field and value (no allocation, no result for this
/// driver, more than kMaxResults results, a result of another pool, a field of the wrong type,
/// a quantity that is not whole MiB / whole percent, beyond the device, the same device twice
/// in one claim, adminAccess on one of this driver's results, opaque config for this driver, a
/// request that asked for capacity allocated without consumedCapacity); kNotFound when a device is
/// not one of this node's; kUnavailable when the device is unhealthy.
Result<std::vector<AllocatedShare>> ParseClaimAllocation(
    const json& claim, const std::string& driver, const std::string& pool,
    const std::vector<core::DeviceInfo>& devices);

/// AllocatedShare ⇄ JSON (the checkpoint's form).
json ShareToJson(const AllocatedShare& s);
Result<AllocatedShare> ShareFromJson(const json& j);

}  // namespace fracgpu::dra
