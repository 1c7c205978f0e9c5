#pragma once
// The one declaration set of NVML (nvml.h, API version 13) in fracgpu: the types, values and
// entry points that libvgpu.so hooks, that the daemons load with dlopen (src/nvml, the monitor,
// the enforcer) and that the fake NVML (tests/fakes/nvml) defines. Declared by us, so no NVIDIA
// header is needed to build; header-only, no dependencies (libvgpu.so includes it).
// Return codes, struct layouts and ELF names: docs/design/wire-apis.md §8. The event-set API
// (nvmlEventSetCreate, nvmlDeviceRegisterEvents, nvmlEventSetWait_v2, nvmlEventSetFree,
// nvmlEventData_t, nvmlEventTypeXidCriticalError = 0x8) from NVIDIA's NVML API reference, "Event
// Handling Methods"; the architecture, compute capability and driver version getters and the
// NVML_DEVICE_ARCH_* values from §8.2 and §8.5; the link topology getters and their types
// (nvmlGpuTopologyLevel_t, nvmlEnableState_t, nvmlIntNvLinkDeviceType_t, NVML_NVLINK_MAX_LINKS)
// from nvml.h, "Topology Queries" and "NvLink Methods"; nvmlDeviceGetPersistenceMode,
// nvmlDeviceGetMigMode (NVML_DEVICE_MIG_DISABLE = 0, NVML_DEVICE_MIG_ENABLE = 1) and
// nvmlDeviceGetMPSComputeRunningProcesses_v3 from nvml.h (API version 13).
// A loader takes a function's pointer type as decltype(&nvmlName), so the prototype here is the
// only one.
#include <cstdint>

extern "C" {

#define FRACGPU_NVML_API noexcept

typedef int nvmlReturn_t;
enum : nvmlReturn_t {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_UNKNOWN = 999,
};
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;
/// nvml.h: `typedef unsigned int nvmlDeviceArchitecture_t;`, values NVML_DEVICE_ARCH_*.
typedef unsigned int nvmlDeviceArchitecture_t;

/// NVML_DEVICE_ARCH_* (T23X is Orin).
inline constexpr nvmlDeviceArchitecture_t NVML_DEVICE_ARCH_KEPLER = 2;
inline constexpr nvmlDeviceArchitecture_t NVML_DEVICE_ARCH_MAXWELL = 3;
inline constexpr nvmlDeviceArchitecture_t NVML_DEVICE_ARCH_PASCAL = 4;
inline constexpr nvmlDeviceArchitecture_t NVML_DEVICE_ARCH_VOLTA = 5;
inline constexpr nvmlDeviceArchitecture_t NVML_DEVICE_ARCH_TURING = 6;
inline constexpr nvmlDeviceArchitecture_t NVML_DEVICE_ARCH_AMPERE = 7;
inline constexpr nvmlDeviceArchitecture_t NVML_DEVICE_ARCH_ADA = 8;
inline constexpr nvmlDeviceArchitecture_t NVML_DEVICE_ARCH_HOPPER = 9;
inline constexpr nvmlDeviceArchitecture_t NVML_DEVICE_ARCH_BLACKWELL = 10;
inline constexpr nvmlDeviceArchitecture_t NVML_DEVICE_ARCH_T23X = 11;
inline constexpr nvmlDeviceArchitecture_t NVML_DEVICE_ARCH_UNKNOWN = 0xffffffffu;

/// nvmlGpuTopologyLevel_t (nvml.h enum nvmlGpuLevel_enum): the closest common ancestor of two
/// GPUs on the PCIe tree, what nvmlDeviceGetTopologyCommonAncestor answers. NVML_TOPOLOGY_NODE
/// was NVML_TOPOLOGY_CPU.
typedef unsigned int nvmlGpuTopologyLevel_t;
inline constexpr nvmlGpuTopologyLevel_t NVML_TOPOLOGY_INTERNAL = 0;
inline constexpr nvmlGpuTopologyLevel_t NVML_TOPOLOGY_SINGLE = 10;
inline constexpr nvmlGpuTopologyLevel_t NVML_TOPOLOGY_MULTIPLE = 20;
inline constexpr nvmlGpuTopologyLevel_t NVML_TOPOLOGY_HOSTBRIDGE = 30;
inline constexpr nvmlGpuTopologyLevel_t NVML_TOPOLOGY_NODE = 40;
inline constexpr nvmlGpuTopologyLevel_t NVML_TOPOLOGY_SYSTEM = 50;
/// nvmlEnableState_t (enum nvmlEnableState_enum): what nvmlDeviceGetNvLinkState answers.
typedef unsigned int nvmlEnableState_t;
inline constexpr nvmlEnableState_t NVML_FEATURE_DISABLED = 0;
inline constexpr nvmlEnableState_t NVML_FEATURE_ENABLED = 1;
/// nvmlIntNvLinkDeviceType_t (enum nvmlIntNvLinkDeviceType_enum): the device at the far end of
/// an NVLink.
typedef unsigned int nvmlIntNvLinkDeviceType_t;
inline constexpr nvmlIntNvLinkDeviceType_t NVML_NVLINK_DEVICE_TYPE_GPU = 0x00;
inline constexpr nvmlIntNvLinkDeviceType_t NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01;
inline constexpr nvmlIntNvLinkDeviceType_t NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02;
inline constexpr nvmlIntNvLinkDeviceType_t NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF;
/// NVML_DEVICE_MIG_DISABLE / NVML_DEVICE_MIG_ENABLE: the modes nvmlDeviceGetMigMode answers.
inline constexpr unsigned int NVML_DEVICE_MIG_DISABLE = 0;
inline constexpr unsigned int NVML_DEVICE_MIG_ENABLE = 1;
/// NVML_NVLINK_MAX_LINKS: links are numbered 0 .. 17 (18 on Hopper and Blackwell).
inline constexpr unsigned int NVML_NVLINK_MAX_LINKS = 18;

/// Event type bits (nvmlEventType*).
inline constexpr unsigned long long nvmlEventTypeSingleBitEccError = 0x1ULL;
inline constexpr unsigned long long nvmlEventTypeDoubleBitEccError = 0x2ULL;
inline constexpr unsigned long long nvmlEventTypeXidCriticalError = 0x8ULL;

/// NVML_VALUE_NOT_AVAILABLE: what usedGpuMemory holds when the driver cannot tell.
inline constexpr unsigned long long kNvmlValueNotAvailable = ~0ULL;

/// nvmlMemory_t (v1): bytes.
typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;
/// nvmlMemory_v2_t: bytes; `version` must be kNvmlMemoryV2Version.
typedef struct {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;
/// NVML_STRUCT_VERSION(Memory, 2) = sizeof(nvmlMemory_v2_t) | (2 << 24) = 0x02000028.
constexpr unsigned int kNvmlMemoryV2Version =
    static_cast<unsigned int>(sizeof(nvmlMemory_v2_t)) | (2u << 24);
/// nvmlProcessInfo_t (v2 layout, used by the _v2 and _v3 process queries).
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_t;

/// nvmlProcessInfo_v1_t: the layout of the unversioned nvmlDeviceGetComputeRunningProcesses.
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes
} nvmlProcessInfo_v1_t;

/// Buffer sizes NVML documents for the string getters (NVML_DEVICE_UUID_BUFFER_SIZE,
/// NVML_DEVICE_NAME_V2_BUFFER_SIZE, NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE).
constexpr unsigned int kNvmlDeviceUuidBufferSize = 80;
constexpr unsigned int kNvmlDeviceNameBufferSize = 96;
constexpr unsigned int kNvmlDriverVersionBufferSize = 80;

/// nvmlPciInfo_t (the _v3 entry point's layout).
typedef struct {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

/// nvmlEventData_t: for an Xid event, eventData holds the Xid number.
typedef struct {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;

/// nvmlProcessUtilizationSample_t: one process's utilisation (percent) over the sample
/// period ending at timeStamp (CPU time in microseconds). nvml.h, API version 13.
typedef struct {
  unsigned int pid;
  unsigned long long timeStamp;  // us
  unsigned int smUtil;           // percent
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
} nvmlProcessUtilizationSample_t;
/// nvmlUtilization_t: device utilisation, percent of time over the last sample period.
typedef struct {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

nvmlReturn_t nvmlInit_v2(void) FRACGPU_NVML_API;
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) FRACGPU_NVML_API;
nvmlReturn_t nvmlShutdown(void) FRACGPU_NVML_API;
const char* nvmlErrorString(nvmlReturn_t result) FRACGPU_NVML_API;
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) FRACGPU_NVML_API;
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index,
                                           nvmlDevice_t* device) FRACGPU_NVML_API;
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) FRACGPU_NVML_API;
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) FRACGPU_NVML_API;
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid,
                               unsigned int length) FRACGPU_NVML_API;
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name,
                               unsigned int length) FRACGPU_NVML_API;
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) FRACGPU_NVML_API;
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device,
                                        nvmlMemory_v2_t* memory) FRACGPU_NVML_API;
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) FRACGPU_NVML_API;
/// Processes with a graphics context (OpenGL, Vulkan) on the device; same arguments as
/// nvmlDeviceGetComputeRunningProcesses_v3 (nvml.h). A process with both kinds of context is
/// in both lists.
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                      nvmlProcessInfo_t* infos) FRACGPU_NVML_API;
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t* utilization,
                                             unsigned int* processSamplesCount,
                                             unsigned long long lastSeenTimeStamp) FRACGPU_NVML_API;
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                           nvmlUtilization_t* utilization) FRACGPU_NVML_API;
// Legacy forms real programs still call (same arguments as their newer forms).
nvmlReturn_t nvmlInit(void) FRACGPU_NVML_API;
nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) FRACGPU_NVML_API;
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) FRACGPU_NVML_API;
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) FRACGPU_NVML_API;
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int* count,
                                                  nvmlProcessInfo_v1_t* infos) FRACGPU_NVML_API;
// What the daemons read besides (src/nvml: inventory, health, the ResourceSlice facts).
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) FRACGPU_NVML_API;
nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) FRACGPU_NVML_API;
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                      nvmlEventSet_t set) FRACGPU_NVML_API;
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                 unsigned int timeoutms) FRACGPU_NVML_API;
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) FRACGPU_NVML_API;
nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device,
                                       nvmlDeviceArchitecture_t* arch) FRACGPU_NVML_API;
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major,
                                                int* minor) FRACGPU_NVML_API;
nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) FRACGPU_NVML_API;
// The GPU link topology (src/nvml Topology: the device plugin's hami.io/node-nvidia-score).
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                 nvmlGpuTopologyLevel_t* pathInfo) FRACGPU_NVML_API;
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t* isActive) FRACGPU_NVML_API;
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t* pci) FRACGPU_NVML_API;
nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                 nvmlIntNvLinkDeviceType_t* pNvLinkDeviceType)
    FRACGPU_NVML_API;

// The checkpoint eligibility facts (monitor/park_host.h: persistence mode, MIG mode, MPS
// clients; nvml.h "Device Queries" and "Multi Instance GPU Management").
nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device,
                                          nvmlEnableState_t* mode) FRACGPU_NVML_API;
/// `currentMode` and `pendingMode`: NVML_DEVICE_MIG_DISABLE or NVML_DEVICE_MIG_ENABLE.
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* currentMode,
                                  unsigned int* pendingMode) FRACGPU_NVML_API;
/// Processes running through an MPS server on the device; same arguments as
/// nvmlDeviceGetComputeRunningProcesses_v3.
nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t device,
                                                        unsigned int* infoCount,
                                                        nvmlProcessInfo_t* infos) FRACGPU_NVML_API;

}  // extern "C"
