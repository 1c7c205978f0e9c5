#pragma once
// The subset of NVML (nvml.h, API version 13) that libvgpu.so and the fake NVML touch,
// declared by us. Return codes, struct layouts and ELF names: docs/design/wire-apis.md §8.
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
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_UNKNOWN = 999,
};
typedef struct nvmlDevice_st* nvmlDevice_t;

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

constexpr unsigned int kNvmlDeviceUuidBufferSize = 80;

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
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t* utilization,
                                             unsigned int* processSamplesCount,
                                             unsigned long long lastSeenTimeStamp) FRACGPU_NVML_API;
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                           nvmlUtilization_t* utilization) FRACGPU_NVML_API;

}  // extern "C"
