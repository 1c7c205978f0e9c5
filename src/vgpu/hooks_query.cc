// Virtualised memory queries (docs/design/CONTRACT.md §4): cuMemGetInfo_v2, cuDeviceTotalMem_v2
// (and their legacy v1 variants), nvmlDeviceGetMemoryInfo and _v2 report the container's
// slice, so frameworks and nvidia-smi see a card of the limit's size; and cuInit, which loads
// the configuration early.
// Devices are matched by UUID. Unlimited devices are passed through untouched.
#include "vgpu/interpose.h"
#include "vgpu/state.h"

using namespace fracgpu::vgpu;

FRACGPU_EXPORT CUresult cuInit(unsigned int flags) noexcept {
  CUresult r = REAL(cuInit)(flags);
  if (r == CUDA_SUCCESS) EnsureInit();
  return r;
}

namespace {
// The slice of the current context's device as cuMemGetInfo reports it, from the driver's own
// figures: total = min(limit, physical); free = max(0, min(total - used, physical free)).
// Unchanged on an unlimited device; 0 and 0 on a denied one. Never grows a value, so the
// legacy v1 (32-bit) figures stay in range.
void VirtualiseInfo(uint64_t* free_bytes, uint64_t* total_bytes) {
  CUdevice ord;
  int dev = CurrentDeviceIndex(&ord);
  if (dev == kDenied) {
    *free_bytes = 0;
    *total_bytes = 0;
    return;
  }
  uint64_t limit = dev >= 0 ? DeviceLimit(dev) : 0;
  if (limit == 0) return;
  uint64_t total = limit < *total_bytes ? limit : *total_bytes;
  uint64_t used = DeviceUsed(dev);
  uint64_t free = used >= total ? 0 : total - used;
  if (free > *free_bytes) free = *free_bytes;
  *total_bytes = total;
  *free_bytes = free;
}

// cuDeviceTotalMem: the limit where it is below the physical size; 0 on a denied device.
uint64_t VirtualiseTotal(uint64_t bytes, CUdevice ordinal) {
  int dev = DeviceIndexForOrdinal(ordinal);
  uint64_t limit = dev >= 0 ? DeviceLimit(dev) : 0;
  if (dev == kDenied) return 0;
  return limit != 0 && limit < bytes ? limit : bytes;
}
}  // namespace

FRACGPU_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) noexcept {
  CUresult r = REAL(cuMemGetInfo_v2)(free_bytes, total_bytes);
  if (r != CUDA_SUCCESS) return r;
  uint64_t f = *free_bytes, t = *total_bytes;
  VirtualiseInfo(&f, &t);
  *free_bytes = f;
  *total_bytes = t;
  return r;
}

/// Legacy v1 (PFN_cuMemGetInfo_v2000, 32-bit figures): the same slice as cuMemGetInfo_v2.
FRACGPU_EXPORT CUresult cuMemGetInfo(unsigned int* free_bytes, unsigned int* total_bytes) noexcept {
  CUresult r = REAL(cuMemGetInfo)(free_bytes, total_bytes);
  if (r != CUDA_SUCCESS) return r;
  uint64_t f = *free_bytes, t = *total_bytes;
  VirtualiseInfo(&f, &t);
  *free_bytes = static_cast<unsigned int>(f);  // never above the driver's 32-bit value
  *total_bytes = static_cast<unsigned int>(t);
  return r;
}

FRACGPU_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice ordinal) noexcept {
  CUresult r = REAL(cuDeviceTotalMem_v2)(bytes, ordinal);
  if (r == CUDA_SUCCESS) *bytes = VirtualiseTotal(*bytes, ordinal);
  return r;
}

/// Legacy v1 (PFN_cuDeviceTotalMem_v2000, 32-bit figure).
FRACGPU_EXPORT CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice ordinal) noexcept {
  CUresult r = REAL(cuDeviceTotalMem)(bytes, ordinal);
  if (r == CUDA_SUCCESS) *bytes = static_cast<unsigned int>(VirtualiseTotal(*bytes, ordinal));
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
