// Stream-ordered allocation (cuMemAllocAsync, cuMemAllocFromPoolAsync, cuMemFreeAsync, their
// _ptsz variants) and memory pools. A pool is charged what it reserves
// (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), not what is live: memory freed into a pool stays
// charged until the pool gives it back (at synchronisation, down to its release threshold,
// or on cuMemPoolTrimTo), exactly as it stays unavailable to other processes. An allocation
// captured into a graph (the stream is capturing) reserves nothing here: hooks_graph.cc charges
// the graph's memory.
// A pool imported from another process (cuMemPoolImportFromShareableHandle) is the exporter's
// memory (docs/vgpu.md "Memory shared between processes"): it is never charged here, even if
// the driver reports the exporter's reservation for it, and allocations from it (which cuda.h
// says the driver refuses) go straight to the driver.
// The pool list is small and guarded by a spinlock; nothing here allocates heap memory.

#include "vgpu/accounting.h"
#include "vgpu/interpose.h"
#include "vgpu/spinlock.h"
#include "vgpu/state.h"
#include "vgpu/table.h"

using namespace fracgpu::vgpu;

namespace {

constexpr int kMaxPools = 64;
constexpr uint64_t kPoolGranule = 2ull << 20;  // reservations grow in 2 MiB steps

struct PoolRecord {
  CUmemoryPool pool;
  int dev;
  uint64_t charged;  // bytes of reservation charged
};

SpinLock g_lock;
PoolRecord g_pools[kMaxPools];
int g_pool_count = 0;
CUmemoryPool g_imported[kMaxPools];  // pools imported from other processes: never charged
int g_imported_count = 0;

struct Guard : SpinGuard {
  Guard() : SpinGuard(g_lock) {}
};

uint64_t Reserved(CUmemoryPool pool) {
  cuuint64_t v = 0;
  if (REAL(cuMemPoolGetAttribute)(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v) != CUDA_SUCCESS)
    return 0;
  return v;
}
uint64_t Used(CUmemoryPool pool) {
  cuuint64_t v = 0;
  if (REAL(cuMemPoolGetAttribute)(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v) != CUDA_SUCCESS)
    return 0;
  return v;
}

// True when `stream` is being captured into a graph (any capture status but NONE).
bool Capturing(CUstream stream, bool ptsz) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult r = ptsz ? REAL(cuStreamIsCapturing_ptsz)(stream, &status)
                    : REAL(cuStreamIsCapturing)(stream, &status);
  return r == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE;
}

// True when `pool` was imported from another process (under the pool lock).
bool IsImported(CUmemoryPool pool) {
  for (int i = 0; i < g_imported_count; ++i)
    if (g_imported[i] == pool) return true;
  return false;
}

// Index of the pool's record, adding it (charged 0) if new; -1 if the list is full.
int FindOrAdd(CUmemoryPool pool, int dev) {
  for (int i = 0; i < g_pool_count; ++i)
    if (g_pools[i].pool == pool) return i;
  if (g_pool_count == kMaxPools) return -1;
  g_pools[g_pool_count] = PoolRecord{pool, dev, 0};
  return g_pool_count++;
}

// Brings the pool's charge to its current reservation. Growth beyond the limit is charged
// anyway only in `force` mode (the memory is already taken); returns false if refused.
void Settle(PoolRecord& p) {
  uint64_t reserved = Reserved(p.pool);
  if (reserved < p.charged) {
    Uncharge(p.dev, p.charged - reserved);
    p.charged = reserved;
  } else if (reserved > p.charged && Charge(p.dev, reserved - p.charged) == CUDA_SUCCESS) {
    p.charged = reserved;
  }
}

CUresult PoolAlloc(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool, int dev, CUstream stream,
                   bool from_pool, bool ptsz) {
  auto call = [&] {
    if (from_pool) {
      return ptsz ? REAL(cuMemAllocFromPoolAsync_ptsz)(dptr, bytes, pool, stream)
                  : REAL(cuMemAllocFromPoolAsync)(dptr, bytes, pool, stream);
    }
    return ptsz ? REAL(cuMemAllocAsync_ptsz)(dptr, bytes, stream)
                : REAL(cuMemAllocAsync)(dptr, bytes, stream);
  };
  if (dev == kUnmanaged || !dptr || bytes == 0 || !pool) return call();
  if (dev == kDenied) return CUDA_ERROR_OUT_OF_MEMORY;
  Guard g;
  if (IsImported(pool)) return call();  // the exporter's memory: the driver answers, uncharged
  int idx = FindOrAdd(pool, dev);
  if (idx < 0) {
    Log(kLogError, "more than %d memory pools: refusing stream-ordered allocation", kMaxPools);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  PoolRecord& p = g_pools[idx];
  Settle(p);
  // Growth this allocation can cause: what does not fit in the reserved-but-unused part,
  // rounded up to the pool's reservation step. Charged before the driver sees the call.
  uint64_t reserved = p.charged, used = Used(pool);
  uint64_t need = used + bytes > reserved ? used + bytes - reserved : 0;
  uint64_t pre = (need + kPoolGranule - 1) / kPoolGranule * kPoolGranule;
  // Captured into a graph (stream capture): the call adds an allocation node and the pool does
  // not grow; the graph's memory is charged when it is uploaded or launched (hooks_graph.cc).
  // Asked only when the pool would have to grow, so the steady state pays nothing for it.
  if (pre > 0 && Capturing(stream, ptsz)) return call();
  if (pre > 0) {
    CUresult c = Charge(dev, pre);
    if (c != CUDA_SUCCESS) {
      for (int i = 0; i < g_pool_count; ++i)  // pools may have given memory back
        if (g_pools[i].dev == dev) Settle(g_pools[i]);
      c = Charge(
          dev, pre, ChargeKind::kData,
          from_pool ? "cuMemAllocFromPoolAsync's pool growth" : "cuMemAllocAsync's pool growth");
      if (c != CUDA_SUCCESS) return c;
    }
    p.charged += pre;
  }
  CUresult r = call();
  uint64_t after = Reserved(pool);
  if (after < p.charged) {
    Uncharge(dev, p.charged - after);
    p.charged = after;
  } else if (after > p.charged) {
    // The driver reserved more than the step we charged (larger internal chunk).
    if (Charge(dev, after - p.charged) == CUDA_SUCCESS) {
      p.charged = after;
    } else if (r == CUDA_SUCCESS) {
      // Over the limit after all: undo the allocation and give the growth back.
      if (ptsz)
        REAL(cuMemFreeAsync_ptsz)(*dptr, stream);
      else
        REAL(cuMemFreeAsync)(*dptr, stream);
      REAL(cuStreamSynchronize)(stream);
      REAL(cuMemPoolTrimTo)(pool, p.charged > used ? p.charged : used);
      Settle(p);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  if (r == CUDA_SUCCESS) {
    Entry e;
    e.kind = Kind::kPoolPtr;
    e.key = *dptr;
    e.aux = reinterpret_cast<uint64_t>(pool);
    e.dev = static_cast<int8_t>(dev);
    e.size = bytes;
    TableInsert(e);
  }
  return r;
}

CUresult FreeAsync(CUdeviceptr dptr, CUstream stream, bool ptsz) {
  Entry e;
  bool known = TableRemove(Kind::kPoolPtr, dptr, &e);
  CUresult r = ptsz ? REAL(cuMemFreeAsync_ptsz)(dptr, stream) : REAL(cuMemFreeAsync)(dptr, stream);
  if (known && r != CUDA_SUCCESS) TableInsert(e);
  // The memory returns to its pool, which stays charged until it releases it.
  return r;
}

CUmemoryPool CurrentPool(CUdevice ordinal) {
  CUmemoryPool pool = nullptr;
  if (ordinal < 0 || REAL(cuDeviceGetMemPool)(&pool, ordinal) != CUDA_SUCCESS) return nullptr;
  return pool;
}

}  // namespace

namespace fracgpu::vgpu {

void ReconcileStreamPools(int dev) noexcept {
  Guard g;
  for (int i = 0; i < g_pool_count; ++i)
    if (dev < 0 || g_pools[i].dev == dev) Settle(g_pools[i]);
}

void ReconcilePools(int dev) noexcept {
  ReconcileStreamPools(dev);  // the pool lock is released before the graph lock is taken
  ReconcileGraphMemory(dev);
}

void PoolsForgetDevice(int dev) noexcept {
  Guard g;
  for (int i = 0; i < g_pool_count;) {
    if (g_pools[i].dev == dev) {
      Uncharge(dev, g_pools[i].charged);
      g_pools[i] = g_pools[--g_pool_count];
    } else {
      ++i;
    }
  }
}

void PoolsResetAfterFork() noexcept {
  g_lock.ResetAfterFork();
  g_pool_count = 0;
  g_imported_count = 0;
}

}  // namespace fracgpu::vgpu

FRACGPU_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream stream) noexcept {
  CUdevice ord;
  int dev = CurrentDeviceIndex(&ord);
  return PoolAlloc(dptr, bytes, CurrentPool(ord), dev, stream, false, false);
}
FRACGPU_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes,
                                             CUstream stream) noexcept {
  CUdevice ord;
  int dev = CurrentDeviceIndex(&ord);
  return PoolAlloc(dptr, bytes, CurrentPool(ord), dev, stream, false, true);
}
FRACGPU_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                                CUstream stream) noexcept {
  int dev = kUnmanaged;
  {
    Guard g;
    for (int i = 0; i < g_pool_count; ++i)
      if (g_pools[i].pool == pool) dev = g_pools[i].dev;
  }
  if (dev == kUnmanaged) {
    CUdevice ord;
    dev = CurrentDeviceIndex(&ord);
  }
  return PoolAlloc(dptr, bytes, pool, dev, stream, true, false);
}
FRACGPU_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes,
                                                     CUmemoryPool pool, CUstream stream) noexcept {
  int dev = kUnmanaged;
  {
    Guard g;
    for (int i = 0; i < g_pool_count; ++i)
      if (g_pools[i].pool == pool) dev = g_pools[i].dev;
  }
  if (dev == kUnmanaged) {
    CUdevice ord;
    dev = CurrentDeviceIndex(&ord);
  }
  return PoolAlloc(dptr, bytes, pool, dev, stream, true, true);
}
FRACGPU_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) noexcept {
  return FreeAsync(dptr, stream, false);
}
FRACGPU_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) noexcept {
  return FreeAsync(dptr, stream, true);
}

FRACGPU_EXPORT CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) noexcept {
  CUresult r = REAL(cuMemPoolCreate)(pool, props);
  if (r == CUDA_SUCCESS && pool && props && props->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
    int dev = DeviceIndexForOrdinal(props->location.id);
    if (dev >= 0) {
      Guard g;
      FindOrAdd(*pool, dev);
    }
  }
  return r;
}

FRACGPU_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) noexcept {
  CUresult r = REAL(cuMemPoolDestroy)(pool);
  if (r == CUDA_SUCCESS) {
    Guard g;
    for (int i = 0; i < g_imported_count; ++i) {
      if (g_imported[i] == pool) {
        g_imported[i] = g_imported[--g_imported_count];
        break;
      }
    }
    for (int i = 0; i < g_pool_count; ++i) {
      if (g_pools[i].pool == pool) {
        Uncharge(g_pools[i].dev, g_pools[i].charged);
        g_pools[i] = g_pools[--g_pool_count];
        break;
      }
    }
  }
  return r;
}

// The imported pool is remembered so that no pool hook ever charges it.
FRACGPU_EXPORT CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool* pool_out, void* handle,
                                                           CUmemAllocationHandleType type,
                                                           unsigned long long flags) noexcept {
  CUresult r = REAL(cuMemPoolImportFromShareableHandle)(pool_out, handle, type, flags);
  if (r == CUDA_SUCCESS) RecordUse(kSlotSharedPool);  // no checkpoint of shared memory
  if (r != CUDA_SUCCESS || !pool_out || !*pool_out) return r;
  Guard g;
  if (IsImported(*pool_out)) return r;
  if (g_imported_count == kMaxPools) {
    Log(kLogError, "more than %d imported memory pools: pool %p may be charged to this process",
        kMaxPools, static_cast<void*>(*pool_out));
    return r;
  }
  g_imported[g_imported_count++] = *pool_out;
  return r;
}

FRACGPU_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) noexcept {
  CUresult r = REAL(cuMemPoolTrimTo)(pool, keep);
  ReconcilePools(-1);
  return r;
}

FRACGPU_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                              void* value) noexcept {
  CUresult r = REAL(cuMemPoolSetAttribute)(pool, attr, value);
  ReconcilePools(-1);
  return r;
}

FRACGPU_EXPORT CUresult cuStreamSynchronize(CUstream stream) noexcept {
  CUresult r = REAL(cuStreamSynchronize)(stream);
  ReconcilePools(-1);
  return r;
}
FRACGPU_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream stream) noexcept {
  CUresult r = REAL(cuStreamSynchronize_ptsz)(stream);
  ReconcilePools(-1);
  return r;
}
FRACGPU_EXPORT CUresult cuCtxSynchronize(void) noexcept {
  CUresult r = REAL(cuCtxSynchronize)();
  ReconcilePools(-1);
  return r;
}
FRACGPU_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx) noexcept {
  CUresult r = REAL(cuCtxSynchronize_v2)(ctx);
  ReconcilePools(-1);
  return r;
}
