// Virtualised memory queries (docs/design/CONTRACT.md §4): cuMemGetInfo_v2, cuDeviceTotalMem_v2
// (and their legacy v1 variants), nvmlDeviceGetMemoryInfo and _v2 report the container's
// slice, so frameworks and nvidia-smi see a card of the limit's size; and cuInit, which loads
// the configuration early.
// Devices are matched by UUID. Unlimited devices are passed through untouched.
#include "vgpu/interpose.h"
#include "vgpu/state.h"

using namespace fracgpu::vgpu;

// A limits file that breaks its grammar (limits.h ParseLimitsFile) refuses CUDA before the
// driver is initialised: the driver then answers every later call CUDA_ERROR_NOT_INITIALIZED, so
// nothing runs, with or without a limit (issue 32 item 4; one log line names file, line, key and
// value). Every hook fails closed too, for a caller that never calls cuInit.
FRACGPU_EXPORT CUresult cuInit(unsigned int flags) noexcept {
  if (LimitsFileRefused()) return CUDA_ERROR_NOT_PERMITTED;
  return REAL(cuInit)(flags);
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

namespace {
// cuMemGetInfo_v2 and the legacy v1 cuMemGetInfo with the caller's out-pointers, either of which
// may be NULL (issue 32: OptiX and others pass NULL for the figure they do not need). cuda.h
// (CUDA 13.0) lists no NULL rule for either pointer, only CUDA_ERROR_INVALID_VALUE among the
// codes, so the driver decides: it is called with the caller's own pointers first and its status
// is the answer. On success the hook never dereferences a NULL pointer: when one is NULL and the
// device is limited, the driver is asked again with local figures (the slice needs both) and only
// the non-NULL pointers are written. `real(f, t)` calls the driver's variant.
template <typename T, typename Real>
CUresult MemGetInfo(T* free_bytes, T* total_bytes, Real real) {
  CUresult r = real(free_bytes, total_bytes);
  if (r != CUDA_SUCCESS) return r;
  T f = 0, t = 0;
  if (free_bytes && total_bytes) {
    f = *free_bytes;
    t = *total_bytes;
  } else {
    if (!free_bytes && !total_bytes) return r;  // nothing to write
    CUdevice ord;
    int dev = CurrentDeviceIndex(&ord);
    if (dev != kDenied && (dev < 0 || DeviceLimit(dev) == 0)) return r;  // unlimited: as is
    if (real(&f, &t) != CUDA_SUCCESS) f = t = 0;  // cannot virtualise: report nothing
  }
  uint64_t f64 = f, t64 = t;
  VirtualiseInfo(&f64, &t64);
  // Never above the driver's value (VirtualiseInfo never grows one), so the legacy v1 32-bit
  // figures stay in range.
  if (free_bytes) *free_bytes = static_cast<T>(f64);
  if (total_bytes) *total_bytes = static_cast<T>(t64);
  return r;
}
}  // namespace

FRACGPU_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) noexcept {
  return MemGetInfo(free_bytes, total_bytes,
                    [](size_t* f, size_t* t) { return REAL(cuMemGetInfo_v2)(f, t); });
}

/// Legacy v1 (PFN_cuMemGetInfo_v2000, 32-bit figures): the same slice as cuMemGetInfo_v2.
FRACGPU_EXPORT CUresult cuMemGetInfo(unsigned int* free_bytes, unsigned int* total_bytes) noexcept {
  return MemGetInfo(free_bytes, total_bytes,
                    [](unsigned int* f, unsigned int* t) { return REAL(cuMemGetInfo)(f, t); });
}

FRACGPU_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice ordinal) noexcept {
  CUresult r = REAL(cuDeviceTotalMem_v2)(bytes, ordinal);
  if (r == CUDA_SUCCESS && bytes) *bytes = VirtualiseTotal(*bytes, ordinal);
  return r;
}

/// Legacy v1 (PFN_cuDeviceTotalMem_v2000, 32-bit figure).
FRACGPU_EXPORT CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice ordinal) noexcept {
  CUresult r = REAL(cuDeviceTotalMem)(bytes, ordinal);
  if (r == CUDA_SUCCESS && bytes)
    *bytes = static_cast<unsigned int>(VirtualiseTotal(*bytes, ordinal));
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
