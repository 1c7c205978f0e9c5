#pragma once
// Our own declarations of the few NVML types and entry points fracgpu loads with dlopen, so
// the build needs no NVIDIA header. Values and prototypes from docs/design/wire-apis.md
// §8 (NVML API version 13); the event-set API (nvmlEventSetCreate, nvmlDeviceRegisterEvents,
// nvmlEventSetWait_v2, nvmlEventSetFree, nvmlEventData_t, nvmlEventTypeXidCriticalError =
// 0x8) as documented in NVIDIA's NVML API reference, "Event Handling Methods"; the optional
// facts of the ResourceSlice (nvmlDeviceGetArchitecture and the NVML_DEVICE_ARCH_* values,
// nvmlDeviceGetCudaComputeCapability, nvmlSystemGetDriverVersion) from §8.2 and §8.5.

#include <cstdint>

namespace fracgpu::nvml::abi {

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
using nvmlEventSet_t = struct nvmlEventSet_st*;
/// nvml.h: `typedef unsigned int nvmlDeviceArchitecture_t;`, values NVML_DEVICE_ARCH_*.
using nvmlDeviceArchitecture_t = unsigned int;

inline constexpr nvmlReturn_t NVML_SUCCESS = 0;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_FOUND = 6;
inline constexpr nvmlReturn_t NVML_ERROR_TIMEOUT = 10;
inline constexpr nvmlReturn_t NVML_ERROR_GPU_IS_LOST = 15;

/// Buffer sizes NVML documents for the string getters.
inline constexpr unsigned kUuidBufferSize = 80;
inline constexpr unsigned kNameBufferSize = 96;
/// NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE.
inline constexpr unsigned kDriverVersionBufferSize = 80;

/// nvmlDeviceArchitecture_t values (NVML_DEVICE_ARCH_*; T23X is Orin).
inline constexpr nvmlDeviceArchitecture_t kArchKepler = 2;
inline constexpr nvmlDeviceArchitecture_t kArchMaxwell = 3;
inline constexpr nvmlDeviceArchitecture_t kArchPascal = 4;
inline constexpr nvmlDeviceArchitecture_t kArchVolta = 5;
inline constexpr nvmlDeviceArchitecture_t kArchTuring = 6;
inline constexpr nvmlDeviceArchitecture_t kArchAmpere = 7;
inline constexpr nvmlDeviceArchitecture_t kArchAda = 8;
inline constexpr nvmlDeviceArchitecture_t kArchHopper = 9;
inline constexpr nvmlDeviceArchitecture_t kArchBlackwell = 10;
inline constexpr nvmlDeviceArchitecture_t kArchT23x = 11;
inline constexpr nvmlDeviceArchitecture_t kArchUnknown = 0xffffffffu;

/// Event type bits (nvmlEventType*).
inline constexpr unsigned long long kEventTypeSingleBitEccError = 0x1ULL;
inline constexpr unsigned long long kEventTypeDoubleBitEccError = 0x2ULL;
inline constexpr unsigned long long kEventTypeXidCriticalError = 0x8ULL;

/// nvmlMemory_t (v1): bytes.
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

/// nvmlPciInfo_t (the _v3 entry point's layout).
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};

/// nvmlEventData_t: for an Xid event, eventData holds the Xid number.
struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using ErrorStringFn = const char* (*)(nvmlReturn_t);
using DeviceGetCountFn = nvmlReturn_t (*)(unsigned int*);
using DeviceGetHandleByIndexFn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using DeviceGetIndexFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);
using DeviceGetStringFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);
using DeviceGetMemoryInfoFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
using DeviceGetPciInfoFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t*);
using EventSetCreateFn = nvmlReturn_t (*)(nvmlEventSet_t*);
using DeviceRegisterEventsFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
using EventSetWaitFn = nvmlReturn_t (*)(nvmlEventSet_t, nvmlEventData_t*, unsigned int);
using EventSetFreeFn = nvmlReturn_t (*)(nvmlEventSet_t);
using DeviceGetArchitectureFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlDeviceArchitecture_t*);
using DeviceGetCudaComputeCapabilityFn = nvmlReturn_t (*)(nvmlDevice_t, int* major, int* minor);
using SystemGetDriverVersionFn = nvmlReturn_t (*)(char* version, unsigned int length);

}  // namespace fracgpu::nvml::abi
