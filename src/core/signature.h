#pragma once
// The scheduler's signature of an allocation decision (docs/design/CONTRACT.md §2, lock 3):
// annotation `fracgpu.io/allocation-signature` = standard padded base64 of HMAC-SHA256 over the
// UTF-8 bytes of "<pod UID>\n<node name>\n<value of hami.io/vgpu-devices-allocated>", keyed by a
// Secret only the scheduler and the device plugins mount. The scheduler signs, the device
// plugin verifies, with these two functions. Pure; thread-safe.

#include <string>

namespace fracgpu::core {

/// Pod annotation holding the signature.
inline constexpr char kAnnotationAllocationSignature[] = "fracgpu.io/allocation-signature";

/// base64(HMAC-SHA256(key, pod_uid + "\n" + node + "\n" + allocated)), 44 characters.
std::string SignAllocation(const std::string& key, const std::string& pod_uid,
                           const std::string& node, const std::string& allocated);

/// True when `signature` is SignAllocation(key, pod_uid, node, allocated); compared in
/// constant time. An empty key never verifies.
bool VerifyAllocation(const std::string& key, const std::string& pod_uid, const std::string& node,
                      const std::string& allocated, const std::string& signature);

}  // namespace fracgpu::core
