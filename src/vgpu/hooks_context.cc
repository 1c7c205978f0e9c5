// Context hooks: a context occupies device memory of its own, charged when the context
// appears (cuDevicePrimaryCtxRetain's first retain, cuCtxCreate_v2/_v3/_v4) and returned when
// it goes; when the process's last context on a device goes, the driver has freed every
// allocation and module of that device, so their charges are dropped too. The context's size
// is measured, not guessed: the process's usage as NVML reports it
// (nvmlDeviceGetComputeRunningProcesses_v3, matched by the host PID, host_pid.h) minus what
// this process has already charged there; it lands in the slot's context_bytes. The host PID
// is found right here, around the first context (host_pid.h). Where NVML cannot see us (no
// NVML, or the host PID is still undecided) a context is charged 0 bytes; docs/vgpu.md says so.
#include <unistd.h>

#include "vgpu/accounting.h"
#include "vgpu/host_pid.h"
#include "vgpu/interpose.h"
#include "vgpu/state.h"
#include "vgpu/table.h"

using namespace fracgpu::vgpu;

namespace {

constexpr int kMaxOrdinals = 64;
std::atomic<int> g_primary_refs[kMaxOrdinals];
std::atomic<int> g_live[kMaxDevices];  // contexts alive per device (primary counts once)
constexpr uint64_t kPrimaryKeyBit = 1ull << 63;

uint64_t MeasureContextBytes(int dev) {
  int32_t host_pid = OwnHostPid();
  if (host_pid <= 0) return 0;
  NvmlProcs procs;
  ListNvmlProcesses(dev, &procs);
  for (unsigned i = 0; i < procs.count; ++i) {
    if (procs.pid[i] != static_cast<unsigned>(host_pid) || procs.used[i] == ~0ull) continue;
    uint64_t charged = ProcessCharged(dev);
    return procs.used[i] > charged ? procs.used[i] - charged : 0;
  }
  return 0;
}

// Charges a new context on `dev` under `key`; false if it does not fit.
// `ctx` is the new context (for the host-PID probe), `before` NVML's processes before it;
// `aux` is kept in its table entry (a green context's CUDA ordinal, kGreenBit set).
bool ChargeContext(int dev, uint64_t key, CUcontext ctx, const NvmlProcs* before,
                   uint64_t aux = 0) {
  HostPidAfterContext(dev, ctx, before);
  uint64_t bytes = MeasureContextBytes(dev);
  // A context NVML cannot size costs nothing, even on a device that fails closed: the
  // refusal belongs to allocations.
  if (bytes > 0 && Charge(dev, bytes, ChargeKind::kContext, "a new context") != CUDA_SUCCESS)
    return false;
  Entry e;
  e.kind = Kind::kContext;
  e.key = key;
  e.dev = static_cast<int8_t>(dev);
  e.size = bytes;
  e.aux = aux;
  TableInsert(e);
  g_live[dev].fetch_add(1, std::memory_order_relaxed);
  return true;
}

void ContextGone(uint64_t key) {
  g_context_epoch.fetch_add(1, std::memory_order_acq_rel);  // drop cached context → device
  Entry e;
  if (!TableRemove(Kind::kContext, key, &e)) return;
  Uncharge(e.dev, e.size, ChargeKind::kContext);
  if (g_live[e.dev].fetch_sub(1, std::memory_order_relaxed) == 1) DropDeviceCharges(e.dev);
}

// NVML's processes on the device of `ordinal` before a context is created there (only while
// this process's host PID is unknown).
void SnapshotBefore(CUdevice ordinal, NvmlProcs* before) {
  before->ok = false;
  before->count = 0;
  if (OwnHostPid() > 0) return;
  int dev = DeviceIndexForOrdinal(ordinal);
  if (dev >= 0) HostPidBeforeContext(dev, before);
}

template <typename Create>
CUresult CreateContext(CUcontext* ctx, CUdevice ordinal, Create create) {
  NvmlProcs before;
  SnapshotBefore(ordinal, &before);
  CUresult r = create();
  if (r != CUDA_SUCCESS || !ctx) return r;
  int dev = DeviceIndexForOrdinal(ordinal);
  // Contexts on denied devices are not charged: every allocation there is refused anyway.
  if (dev == kUnmanaged || dev == kDenied) return r;
  if (!ChargeContext(dev, reinterpret_cast<uint64_t>(*ctx), *ctx, &before)) {
    REAL(cuCtxDestroy_v2)(*ctx);
    *ctx = nullptr;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return r;
}

}  // namespace

namespace fracgpu::vgpu {
void ContextsResetAfterFork() noexcept {
  for (auto& r : g_primary_refs) r.store(0, std::memory_order_relaxed);
  for (auto& l : g_live) l.store(0, std::memory_order_relaxed);
}
}  // namespace fracgpu::vgpu

FRACGPU_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice ordinal) noexcept {
  NvmlProcs before;
  before.ok = false;
  if (ordinal >= 0 && ordinal < kMaxOrdinals &&
      g_primary_refs[ordinal].load(std::memory_order_relaxed) == 0) {
    SnapshotBefore(ordinal, &before);
  }
  CUresult r = REAL(cuDevicePrimaryCtxRetain)(ctx, ordinal);
  if (r != CUDA_SUCCESS || ordinal < 0 || ordinal >= kMaxOrdinals) return r;
  int dev = DeviceIndexForOrdinal(ordinal);
  if (dev == kUnmanaged || dev == kDenied) return r;
  if (g_primary_refs[ordinal].fetch_add(1, std::memory_order_relaxed) == 0) {
    if (!ChargeContext(dev, kPrimaryKeyBit | static_cast<uint64_t>(ordinal), ctx ? *ctx : nullptr,
                       &before)) {
      g_primary_refs[ordinal].fetch_sub(1, std::memory_order_relaxed);
      REAL(cuDevicePrimaryCtxRelease_v2)(ordinal);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  return r;
}

namespace {
// After the driver released (v1 or _v2: the same operation, cudaTypedefs.h v7000 / v11000).
CUresult AfterPrimaryRelease(CUresult r, CUdevice ordinal) {
  if (r != CUDA_SUCCESS || ordinal < 0 || ordinal >= kMaxOrdinals) return r;
  int prev = g_primary_refs[ordinal].load(std::memory_order_relaxed);
  while (prev > 0 && !g_primary_refs[ordinal].compare_exchange_weak(prev, prev - 1)) {
  }
  if (prev == 1) ContextGone(kPrimaryKeyBit | static_cast<uint64_t>(ordinal));
  return r;
}

// After the driver reset the primary context (what cudaDeviceReset does): its charges go.
CUresult AfterPrimaryReset(CUresult r, CUdevice ordinal) {
  if (r != CUDA_SUCCESS || ordinal < 0 || ordinal >= kMaxOrdinals) return r;
  if (g_primary_refs[ordinal].exchange(0, std::memory_order_relaxed) > 0) {
    ContextGone(kPrimaryKeyBit | static_cast<uint64_t>(ordinal));
  }
  return r;
}
}  // namespace

FRACGPU_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice ordinal) noexcept {
  return AfterPrimaryRelease(REAL(cuDevicePrimaryCtxRelease_v2)(ordinal), ordinal);
}
FRACGPU_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice ordinal) noexcept {
  return AfterPrimaryRelease(REAL(cuDevicePrimaryCtxRelease)(ordinal), ordinal);
}
FRACGPU_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice ordinal) noexcept {
  return AfterPrimaryReset(REAL(cuDevicePrimaryCtxReset_v2)(ordinal), ordinal);
}
FRACGPU_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice ordinal) noexcept {
  return AfterPrimaryReset(REAL(cuDevicePrimaryCtxReset)(ordinal), ordinal);
}

FRACGPU_EXPORT CUresult cuCtxCreate_v2(CUcontext* ctx, unsigned int flags, CUdevice dev) noexcept {
  return CreateContext(ctx, dev, [&] { return REAL(cuCtxCreate_v2)(ctx, flags, dev); });
}
FRACGPU_EXPORT CUresult cuCtxCreate_v3(CUcontext* ctx, void* params, int num_params,
                                       unsigned int flags, CUdevice dev) noexcept {
  return CreateContext(ctx, dev,
                       [&] { return REAL(cuCtxCreate_v3)(ctx, params, num_params, flags, dev); });
}
FRACGPU_EXPORT CUresult cuCtxCreate_v4(CUcontext* ctx, void* params, unsigned int flags,
                                       CUdevice dev) noexcept {
  return CreateContext(ctx, dev, [&] { return REAL(cuCtxCreate_v4)(ctx, params, flags, dev); });
}

FRACGPU_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) noexcept {
  CUresult r = REAL(cuCtxDestroy_v2)(ctx);
  if (r == CUDA_SUCCESS) ContextGone(reinterpret_cast<uint64_t>(ctx));  // bumps the epoch too
  return r;
}

// ---- Green contexts (CUDA 12.4). cuGreenCtxCreate retains the device's primary context and
// cuGreenCtxDestroy releases it (cuda.h). The hook retains the primary context itself first,
// through the cuDevicePrimaryCtxRetain hook (what cuda.h advises, "to have the primary context
// active before calling this API"), so the primary context's footprint is charged as the primary
// context's, once, and what the driver then adds is the green context's own, measured like any
// context (MeasureContextBytes) and charged as context_bytes under the green handle. That
// retain is released after the driver destroyed the green context, through the release hook:
// the last reference going drops the device's charges, as the driver frees them. Over the limit
// (the primary context or the green context's own bytes): CUDA_ERROR_OUT_OF_MEMORY, the green
// context destroyed and our retain released, so nothing stays created or charged. Memory
// allocated while the CUcontext of cuCtxFromGreenCtx is current is charged by the allocation
// hooks as usual (that CUcontext is a primary context of the device).
namespace {
constexpr uint64_t kGreenBit = 1ull << 62;  // table entry aux: a green context; low bits: ordinal
}  // namespace

FRACGPU_EXPORT CUresult cuGreenCtxCreate(CUgreenCtx* green, CUdevResourceDesc desc,
                                         CUdevice ordinal, unsigned int flags) noexcept {
  int dev = green ? DeviceIndexForOrdinal(ordinal) : kUnmanaged;
  if (dev == kUnmanaged || dev == kDenied)
    return REAL(cuGreenCtxCreate)(green, desc, ordinal, flags);
  CUcontext primary = nullptr;
  CUresult r = cuDevicePrimaryCtxRetain(&primary, ordinal);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return r;  // the primary context does not fit: nothing created
  // Any other failure: the driver answers the call itself, with its own code.
  if (r != CUDA_SUCCESS) return REAL(cuGreenCtxCreate)(green, desc, ordinal, flags);
  NvmlProcs before;
  SnapshotBefore(ordinal, &before);
  r = REAL(cuGreenCtxCreate)(green, desc, ordinal, flags);
  if (r == CUDA_SUCCESS && !ChargeContext(dev, reinterpret_cast<uint64_t>(*green), primary, &before,
                                          kGreenBit | static_cast<uint32_t>(ordinal))) {
    REAL(cuGreenCtxDestroy)(*green);
    *green = nullptr;
    r = CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (r != CUDA_SUCCESS) cuDevicePrimaryCtxRelease_v2(ordinal);
  return r;
}

FRACGPU_EXPORT CUresult cuGreenCtxDestroy(CUgreenCtx green) noexcept {
  Entry e;
  bool known =
      TableFind(Kind::kContext, reinterpret_cast<uint64_t>(green), &e) && (e.aux & kGreenBit);
  CUresult r = REAL(cuGreenCtxDestroy)(green);
  if (r != CUDA_SUCCESS || !known) return r;
  ContextGone(reinterpret_cast<uint64_t>(green));
  cuDevicePrimaryCtxRelease_v2(static_cast<CUdevice>(static_cast<uint32_t>(e.aux)));
  return r;
}
