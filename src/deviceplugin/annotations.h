#pragma once
// Annotation keys the device plugin reads and writes (docs/design/CONTRACT.md §2). Declared once in
// core/annotations.h; these are the device plugin's names for the same constants.

#include "core/annotations.h"

namespace fracgpu::deviceplugin {

inline constexpr const char* kNodeRegisterKey = core::kAnnotationNodeRegister;
inline constexpr const char* kNodeLockKey = core::kAnnotationNodeLock;
inline constexpr const char* kVgpuNodeKey = core::kAnnotationVgpuNode;
inline constexpr const char* kAllocatedKey = core::kAnnotationVgpuDevicesAllocated;
inline constexpr const char* kToAllocateKey = core::kAnnotationVgpuDevicesToAllocate;
inline constexpr const char* kBindPhaseKey = core::kAnnotationBindPhase;
inline constexpr const char* kBindTimeKey = core::kAnnotationBindTime;
inline constexpr const char* kSignatureKey = core::kAnnotationAllocationSignature;

inline constexpr const char* kBindPhaseAllocating = core::kBindPhaseAllocating;
inline constexpr const char* kBindPhaseSuccess = core::kBindPhaseSuccess;
inline constexpr const char* kBindPhaseFailed = core::kBindPhaseFailed;

}  // namespace fracgpu::deviceplugin
