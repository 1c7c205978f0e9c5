#pragma once
// Annotation keys the device plugin reads and writes (CONTRACT.md §2).

namespace fracgpu::deviceplugin {

inline constexpr const char* kNodeRegisterKey = "hami.io/node-nvidia-register";
inline constexpr const char* kNodeLockKey = "hami.io/mutex.lock";
inline constexpr const char* kVgpuNodeKey = "hami.io/vgpu-node";
inline constexpr const char* kAllocatedKey = "hami.io/vgpu-devices-allocated";
inline constexpr const char* kToAllocateKey = "hami.io/vgpu-devices-to-allocate";
inline constexpr const char* kBindPhaseKey = "hami.io/bind-phase";
inline constexpr const char* kBindTimeKey = "hami.io/bind-time";
inline constexpr const char* kSignatureKey = "fracgpu.io/allocation-signature";

inline constexpr const char* kBindPhaseAllocating = "allocating";
inline constexpr const char* kBindPhaseSuccess = "success";
inline constexpr const char* kBindPhaseFailed = "failed";

}  // namespace fracgpu::deviceplugin
