#pragma once
// HAMi-style pods in DRA mode: the conversion is pure and lives in core/dra_convert.h (the
// webhook's DRA mode calls it from src/scheduler/); re-exported here for the driver's code.

#include "core/dra.h"
#include "core/dra_convert.h"

namespace fracgpu::dra {

using core::CelSelector;
using core::ConvertHamiPod;
using core::HamiConversion;

/// DeviceClass names deploy/dra/ installs (core/dra.h).
inline constexpr const char* kFractionalClass = core::kDraFractionalClass;
inline constexpr const char* kWholeClass = core::kDraWholeClass;

}  // namespace fracgpu::dra
