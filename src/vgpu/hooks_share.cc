// Memory and events shared between processes: the IPC handles (cuIpcGetMemHandle,
// cuIpcOpenMemHandle and _v2, cuIpcGetEventHandle, cuIpcOpenEventHandle) and the pool exports
// and pointer imports (cuMemPoolExportToShareableHandle, cuMemPoolExportPointer,
// cuMemPoolImportPointer). They charge nothing (docs/vgpu.md "Memory shared between
// processes": the exporter pays at its allocation), and each answer is the driver's, unchanged.
// They are hooked only to record, once the driver succeeded, that the process shared memory or
// events (RecordUse, api/region.h RegionSlot::uses): the CUDA checkpoint API does not support
// IPC (NVIDIA/cuda-checkpoint README), so the node agent must not checkpoint such a process.
// Cost: the driver's call, then three atomic loads (an atomic OR the first time); no lock, no
// allocation.
#include "vgpu/interpose.h"
#include "vgpu/state.h"

using namespace fracgpu::vgpu;

namespace {
CUresult Record(CUresult r, uint32_t bit) {
  if (r == CUDA_SUCCESS) RecordUse(bit);
  return r;
}
}  // namespace

FRACGPU_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr dptr) noexcept {
  return Record(REAL(cuIpcGetMemHandle)(handle, dptr), kSlotUsedIpcMemory);
}
FRACGPU_EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr* dptr, CUipcMemHandle handle,
                                           unsigned int flags) noexcept {
  return Record(REAL(cuIpcOpenMemHandle)(dptr, handle, flags), kSlotUsedIpcMemory);
}
FRACGPU_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* dptr, CUipcMemHandle handle,
                                              unsigned int flags) noexcept {
  return Record(REAL(cuIpcOpenMemHandle_v2)(dptr, handle, flags), kSlotUsedIpcMemory);
}
FRACGPU_EXPORT CUresult cuIpcGetEventHandle(CUipcEventHandle* handle, CUevent event) noexcept {
  return Record(REAL(cuIpcGetEventHandle)(handle, event), kSlotUsedIpcEvent);
}
FRACGPU_EXPORT CUresult cuIpcOpenEventHandle(CUevent* event, CUipcEventHandle handle) noexcept {
  return Record(REAL(cuIpcOpenEventHandle)(event, handle), kSlotUsedIpcEvent);
}
FRACGPU_EXPORT CUresult cuMemPoolExportToShareableHandle(void* handle_out, CUmemoryPool pool,
                                                         CUmemAllocationHandleType type,
                                                         unsigned long long flags) noexcept {
  return Record(REAL(cuMemPoolExportToShareableHandle)(handle_out, pool, type, flags),
                kSlotSharedPool);
}
FRACGPU_EXPORT CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData* data,
                                               CUdeviceptr ptr) noexcept {
  return Record(REAL(cuMemPoolExportPointer)(data, ptr), kSlotSharedPool);
}
FRACGPU_EXPORT CUresult cuMemPoolImportPointer(CUdeviceptr* ptr, CUmemoryPool pool,
                                               CUmemPoolPtrExportData* data) noexcept {
  return Record(REAL(cuMemPoolImportPointer)(ptr, pool, data), kSlotSharedPool);
}
