// Virtualised memory queries (docs/design/CONTRACT.md §4): cuMemGetInfo_v2, cuDeviceTotalMem_v2,
// nvmlDeviceGetMemoryInfo and _v2 report the container's slice, so frameworks and nvidia-smi
// see a card of the limit's size; and cuInit, which loads the configuration early.
// Devices are matched by UUID. Unlimited devices are passed through untouched.
#include "vgpu/interpose.h"
#include "vgpu/state.h"

using namespace fracgpu::vgpu;

FRACGPU_EXPORT CUresult cuInit(unsigned int flags) noexcept {
  CUresult r = REAL(cuInit)(flags);
  if (r == CUDA_SUCCESS) EnsureInit();
  return r;
}

FRACGPU_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) noexcept {
  CUresult r = REAL(cuMemGetInfo_v2)(free_bytes, total_bytes);
  if (r != CUDA_SUCCESS) return r;
  CUdevice ord;
  int dev = CurrentDeviceIndex(&ord);
  if (dev == kDenied) {
    *free_bytes = 0;
    *total_bytes = 0;
    return r;
  }
  uint64_t limit = dev >= 0 ? DeviceLimit(dev) : 0;
  if (limit == 0) return r;
  // total = min(limit, physical); free = max(0, min(total - used, physical free)).
  uint64_t total = limit < *total_bytes ? limit : *total_bytes;
  uint64_t used = DeviceUsed(dev);
  uint64_t free = used >= total ? 0 : total - used;
  if (free > *free_bytes) free = *free_bytes;
  *total_bytes = total;
  *free_bytes = free;
  return r;
}

FRACGPU_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice ordinal) noexcept {
  CUresult r = REAL(cuDeviceTotalMem_v2)(bytes, ordinal);
  if (r != CUDA_SUCCESS) return r;
  int dev = DeviceIndexForOrdinal(ordinal);
  uint64_t limit = dev >= 0 ? DeviceLimit(dev) : 0;
  if (dev == kDenied) *bytes = 0;
  else if (limit != 0 && limit < *bytes) *bytes = limit;
  return r;
}

namespace {
// Region device index of an NVML handle, by UUID; -1 if not a limited device of ours.
int NvmlDeviceIndex(nvmlDevice_t device) {
  char uuid[kNvmlDeviceUuidBufferSize];
  ResolveNvml();
  if (REAL(nvmlDeviceGetUUID)(device, uuid, sizeof(uuid)) != NVML_SUCCESS) return -1;
  int dev = DeviceIndexForUuid(uuid);
  return dev >= 0 && DeviceLimit(dev) != 0 ? dev : -1;
}
// total = limit, used = the container's usage, free = total - used (HAMi-compatible view).
void Virtualise(int dev, unsigned long long* total, unsigned long long* free,
                unsigned long long* used) {
  uint64_t limit = DeviceLimit(dev);
  uint64_t u = DeviceUsed(dev);
  *total = limit < *total ? limit : *total;
  *used = u;
  *free = u >= *total ? 0 : *total - u;
}
}  // namespace

FRACGPU_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device,
                                                    nvmlMemory_t* memory) noexcept {
  nvmlReturn_t r = REAL(nvmlDeviceGetMemoryInfo)(device, memory);
  if (r != NVML_SUCCESS || !memory) return r;
  int dev = NvmlDeviceIndex(device);
  if (dev >= 0) Virtualise(dev, &memory->total, &memory->free, &memory->used);
  return r;
}

FRACGPU_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device,
                                                       nvmlMemory_v2_t* memory) noexcept {
  nvmlReturn_t r = REAL(nvmlDeviceGetMemoryInfo_v2)(device, memory);
  if (r != NVML_SUCCESS || !memory) return r;
  int dev = NvmlDeviceIndex(device);
  if (dev >= 0) {
    Virtualise(dev, &memory->total, &memory->free, &memory->used);
    memory->reserved = 0;
  }
  return r;
}
