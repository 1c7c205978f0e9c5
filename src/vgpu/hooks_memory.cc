// Hooks of the synchronous allocation paths: cuMemAlloc_v2, cuMemAllocPitch_v2,
// cuMemAllocManaged, cuMemFree_v2 and the legacy v1 cuMemAlloc / cuMemAllocPitch / cuMemFree,
// arrays (v1 and _v2), and VMM (cuMemCreate / cuMemRelease / cuMemMap /
// cuMemUnmap). Pattern: find the device, charge (refuse with CUDA_ERROR_OUT_OF_MEMORY before
// the driver sees the call), call the driver, undo the charge if it failed, record the
// pointer. A charged allocation the driver refuses for lack of physical memory on a device the
// node agent lends from waits, bounded, for the agent's reclaim before it fails (AwaitReclaim). A
// free of a pointer we never recorded is passed through untouched. Each hook takes the region lock
// and the table spinlock; none allocates heap memory.
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "vgpu/accounting.h"
#include "vgpu/interpose.h"
#include "vgpu/platform.h"
#include "vgpu/state.h"
#include "vgpu/table.h"

using namespace fracgpu::vgpu;

namespace {

constexpr uint64_t kPitchAlign = 512;  // upper bound of the driver's row alignment

// Charges `bytes` on `dev` (reconciling pools first when short), or says why not: a refusal
// for the limit is reported once, naming `api` (by default the calling hook's name).
CUresult ChargeOrOom(int dev, uint64_t bytes, const char* api = __builtin_FUNCTION()) {
  if (dev == kDenied) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = Charge(dev, bytes);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    ReconcilePools(dev);  // pools may have given memory back since we last looked
    r = Charge(dev, bytes, ChargeKind::kData, api);
  }
  return r;
}

void Record(Kind kind, uint64_t key, int dev, uint64_t size, uint64_t aux = 0) {
  Entry e;
  e.kind = kind;
  e.key = key;
  e.dev = static_cast<int8_t>(dev);
  e.size = size;
  e.aux = aux;
  if (!TableInsert(e)) {
    // Out of address space for the table: keep the charge (never under-count) and say so.
    Log(kLogError, "allocation table full: %llu bytes stay charged until exit",
        static_cast<unsigned long long>(size));
  }
}

// The reclaim (issue 36 item 4, docs/reclaim.md "The fallback"): `call`, an allocation of `bytes`
// on `dev` that libvgpu.so charged within the limit, came back CUDA_ERROR_OUT_OF_MEMORY from the
// driver: the slice has room, the GPU does not. When the node agent lends this device's
// never-allocated part (Region::reclaim_lending), a borrower may hold it: one reclaim request is
// raised and the driver asked again, with a backoff of 10 ms doubling to 500 ms, until it answers
// otherwise or FRACGPU_RECLAIM_WAIT_MS (ReclaimWaitNs) has passed, or the agent stops marking the
// device. The charge stays held meanwhile (taken once, returned by the caller if this fails), so
// no other process of the container takes the room being reclaimed. Not lending: the driver's
// answer at once, as before. Cold: the failure path only; the allocation that succeeds never
// gets here.
template <typename Call>
__attribute__((noinline)) CUresult AwaitReclaim(int dev, uint64_t bytes, Call call,
                                                const char* api) {
  const uint64_t wait_ns = ReclaimWaitNs(dev);
  if (wait_ns == 0) return CUDA_ERROR_OUT_OF_MEMORY;
  RequestReclaim(bytes);
  const uint64_t start = platform::MonotonicClockNs();
  const uint64_t deadline = start + wait_ns;
  uint64_t pause = 10'000'000;
  for (uint64_t now = start; now < deadline; now = platform::MonotonicClockNs()) {
    platform::SleepUntilMonotonicNs(now + pause < deadline ? now + pause : deadline);
    pause = pause * 2 < 500'000'000 ? pause * 2 : 500'000'000;
    CUresult r = call();
    if (r != CUDA_ERROR_OUT_OF_MEMORY) {
      if (r == CUDA_SUCCESS)
        Log(kLogInfo, "%s of %llu MiB: the GPU had room again %llu ms after the reclaim request",
            api, static_cast<unsigned long long>(bytes >> 20),
            static_cast<unsigned long long>((platform::MonotonicClockNs() - start) / 1'000'000));
      return r;
    }
    if (ReclaimWaitNs(dev) == 0) break;  // the agent no longer lends the device
  }
  Log(kLogWarning,
      "%s of %llu MiB: the GPU stayed full %llu ms after the reclaim request: out of memory", api,
      static_cast<unsigned long long>(bytes >> 20),
      static_cast<unsigned long long>((platform::MonotonicClockNs() - start) / 1'000'000));
  return CUDA_ERROR_OUT_OF_MEMORY;
}

template <typename Key, typename Call>
CUresult ChargedAlloc(int dev, uint64_t bytes, Kind kind, Key* key_out, Call call,
                      const char* api = __builtin_FUNCTION()) {
  if (dev == kUnmanaged) return call();
  CUresult r = ChargeOrOom(dev, bytes, api);
  if (r != CUDA_SUCCESS) return r;
  r = call();
  if (r != CUDA_SUCCESS) {
    if (r == CUDA_ERROR_OUT_OF_MEMORY) r = AwaitReclaim(dev, bytes, call, api);
    if (r != CUDA_SUCCESS) {
      Uncharge(dev, bytes);
      return r;
    }
  }
  Record(kind, static_cast<uint64_t>(*key_out), dev, bytes);
  return r;
}

uint64_t ArrayBytes(uint64_t w, uint64_t h, uint64_t d, CUarray_format f, unsigned channels,
                    unsigned levels) {
  uint64_t fb = CuArrayFormatBytes(f);
  if (fb == 0) fb = 4;  // block-compressed/video formats: charge 4 bytes per channel
  uint64_t total = 0;
  for (unsigned l = 0; l < levels && l < 64; ++l) {
    uint64_t lw = w >> l ? w >> l : 1, lh = h >> l ? h >> l : 1, ld = d >> l ? d >> l : 1;
    total += lw * lh * ld * channels * fb;
  }
  return total;
}

// External memory (cuImportExternalMemory): the object's size is charged from the import until
// it is destroyed and every buffer and mipmapped array mapped from it is freed (cuda.h: they
// "must be explicitly freed"; the memory lives while they do). `destroy`: the object's own
// reference goes, else one mapping's.
void ExtUnref(uint64_t key, bool destroy) {
  Entry e;
  if (!TableFind(Kind::kExtMem, key, &e)) return;
  if (destroy)
    e.aux2 = 1;
  else if (e.aux > 0)
    e.aux--;
  if (e.aux2 == 1 && e.aux == 0) {
    TableRemove(Kind::kExtMem, key, nullptr);
    Uncharge(e.dev, e.size);
  } else {
    TableInsert(e);
  }
}

std::atomic<int64_t> g_array_maps{0};  // live kArrayMap entries: array frees look only if > 0
void DropArrayMappings(uint64_t array);

CUresult ArrayFree(Kind kind, uint64_t key, CUresult (*real)(void*)) {
  Entry e;
  bool known = TableRemove(kind, key, &e);
  CUresult r = real(reinterpret_cast<void*>(key));
  if (r == CUDA_SUCCESS && __builtin_expect(g_array_maps.load(std::memory_order_relaxed) > 0, 0))
    DropArrayMappings(key);  // the array's tiles go with it
  if (known) {
    if (r == CUDA_SUCCESS) {
      Uncharge(e.dev, e.size);
      if (e.aux2 == kExtMapped) ExtUnref(e.aux, /*destroy=*/false);
    } else {
      TableInsert(e);
    }
  }
  return r;
}

bool DropIfDevice(const Entry& e, void* ctx) {
  int dev = *static_cast<int*>(ctx);
  if (e.dev != dev) return false;
  if (e.kind == Kind::kAlloc || e.kind == Kind::kArray) {
    Uncharge(dev, e.size);
    return true;
  }
  if (e.kind == Kind::kModule) {  // modules go with the device's last context too
    Uncharge(dev, e.size, ChargeKind::kModule);
    return true;
  }
  if (e.kind == Kind::kCtxLimit || e.kind == Kind::kExtMem) {  // they go with the contexts
    Uncharge(dev, e.size, e.kind == Kind::kCtxLimit ? ChargeKind::kContext : ChargeKind::kData);
    return true;
  }
  return e.kind == Kind::kPoolPtr;  // pools are dropped by PoolsForgetDevice
}

}  // namespace

namespace fracgpu::vgpu {
void PoolsForgetDevice(int dev) noexcept;
void DropDeviceCharges(int dev) noexcept {
  TableSweep(&DropIfDevice, &dev);
  PoolsForgetDevice(dev);
  GraphsForgetDevice(dev);
}
}  // namespace fracgpu::vgpu

FRACGPU_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) noexcept {
  CUdevice ord;
  int dev = CurrentDeviceIndex(&ord);
  if (!dptr || bytesize == 0) return REAL(cuMemAlloc_v2)(dptr, bytesize);
  return ChargedAlloc(dev, bytesize, Kind::kAlloc, dptr,
                      [&] { return REAL(cuMemAlloc_v2)(dptr, bytesize); });
}

FRACGPU_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize,
                                          unsigned int flags) noexcept {
  CUdevice ord;
  int dev = CurrentDeviceIndex(&ord);
  if (!dptr || bytesize == 0) return REAL(cuMemAllocManaged)(dptr, bytesize, flags);
  // Managed memory is charged in full to the current device (policy: it can live there).
  // The slot records it: the checkpoint API does not support UVM (RecordUse).
  CUresult r = ChargedAlloc(dev, bytesize, Kind::kAlloc, dptr,
                            [&] { return REAL(cuMemAllocManaged)(dptr, bytesize, flags); });
  if (r == CUDA_SUCCESS) RecordUse(kSlotUsedManagedMemory);
  return r;
}

namespace {
// cuMemAllocPitch_v2 and the legacy v1 cuMemAllocPitch (32-bit pointer, pitch and extents):
// the pitch is known only afterwards, so the most it can be is charged, then settled.
// `alloc()` calls the driver; `release(ptr)` frees what it returned.
template <typename Ptr, typename Size, typename Alloc, typename Release>
CUresult PitchAlloc(int dev, Ptr* dptr, Size* pitch, uint64_t width, uint64_t height, Alloc alloc,
                    Release release, const char* api = __builtin_FUNCTION()) {
  if (dev == kUnmanaged || !dptr || !pitch || width == 0 || height == 0 ||
      width > (UINT64_MAX - kPitchAlign) || height > UINT64_MAX / (width + kPitchAlign)) {
    return alloc();
  }
  uint64_t bound = (width + kPitchAlign - 1) / kPitchAlign * kPitchAlign * height;
  CUresult r = ChargeOrOom(dev, bound, api);
  if (r != CUDA_SUCCESS) return r;
  r = alloc();
  if (r != CUDA_SUCCESS) {
    if (r == CUDA_ERROR_OUT_OF_MEMORY) r = AwaitReclaim(dev, bound, alloc, api);
    if (r != CUDA_SUCCESS) {
      Uncharge(dev, bound);
      return r;
    }
  }
  uint64_t actual = static_cast<uint64_t>(*pitch) * height;
  if (actual < bound) {
    Uncharge(dev, bound - actual);
  } else if (actual > bound &&
             Charge(dev, actual - bound, ChargeKind::kData, api) != CUDA_SUCCESS) {
    release(*dptr);
    Uncharge(dev, bound);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Record(Kind::kAlloc, static_cast<uint64_t>(*dptr), dev, actual);
  return r;
}

// cuMemFree_v2 and the legacy v1 cuMemFree: a pointer of either width is one table key.
template <typename Free>
CUresult ChargedFree(uint64_t key, Free free_call) {
  Entry e;
  if (!TableRemove(Kind::kAlloc, key, &e)) return free_call();
  CUresult r = free_call();
  if (r == CUDA_SUCCESS) {
    Uncharge(e.dev, e.size);
    if (e.aux2 == kExtMapped) ExtUnref(e.aux, /*destroy=*/false);
  } else {
    TableInsert(e);
  }
  return r;
}
}  // namespace

FRACGPU_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width,
                                           size_t height, unsigned int elem) noexcept {
  CUdevice ord;
  int dev = CurrentDeviceIndex(&ord);
  return PitchAlloc(
      dev, dptr, pitch, width, height,
      [&] { return REAL(cuMemAllocPitch_v2)(dptr, pitch, width, height, elem); },
      [](CUdeviceptr p) { (void)REAL(cuMemFree_v2)(p); });
}

FRACGPU_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) noexcept {
  return ChargedFree(dptr, [&] { return REAL(cuMemFree_v2)(dptr); });
}

// ---- Legacy v1 entry points (PFN_<name>_v2000): 32-bit sizes, CUdeviceptr_v1. Charged and
// recorded exactly like their _v2 counterparts; a v1 pointer may be freed by either cuMemFree.
FRACGPU_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1* dptr, unsigned int bytesize) noexcept {
  CUdevice ord;
  int dev = CurrentDeviceIndex(&ord);
  if (!dptr || bytesize == 0) return REAL(cuMemAlloc)(dptr, bytesize);
  return ChargedAlloc(dev, bytesize, Kind::kAlloc, dptr,
                      [&] { return REAL(cuMemAlloc)(dptr, bytesize); });
}

FRACGPU_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1* dptr, unsigned int* pitch,
                                        unsigned int width, unsigned int height,
                                        unsigned int elem) noexcept {
  CUdevice ord;
  int dev = CurrentDeviceIndex(&ord);
  return PitchAlloc(
      dev, dptr, pitch, width, height,
      [&] { return REAL(cuMemAllocPitch)(dptr, pitch, width, height, elem); },
      [](CUdeviceptr_v1 p) { (void)REAL(cuMemFree)(p); });
}

FRACGPU_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr) noexcept {
  return ChargedFree(dptr, [&] { return REAL(cuMemFree)(dptr); });
}

namespace {

// The array-create hooks (2D and 3D, v1 32-bit and _v2 descriptors): the array's bytes from its
// descriptor (depth 1 for a 2D one), charged to the current device as one allocation keyed by
// the CUarray. `real` calls the driver's own entry point; a null argument goes straight to it.
// `api` is the calling hook's name (for the refusal line).
template <typename Desc, typename Real>
CUresult ChargedArrayCreate(CUarray* array, const Desc* d, Real real,
                            const char* api = __builtin_FUNCTION()) {
  CUdevice ord;
  int dev = CurrentDeviceIndex(&ord);
  if (!array || !d) return real();
  uint64_t depth = 1;
  if constexpr (requires { d->Depth; }) depth = d->Depth;
  uint64_t bytes = ArrayBytes(d->Width, d->Height, depth, d->Format, d->NumChannels, 1);
  uint64_t key = 0;
  return ChargedAlloc(
      dev, bytes, Kind::kArray, &key,
      [&] {
        CUresult r = real();
        key = reinterpret_cast<uint64_t>(*array);
        return r;
      },
      api);
}

}  // namespace

FRACGPU_EXPORT CUresult cuArrayCreate(CUarray* array, const CUDA_ARRAY_DESCRIPTOR_v1* d) noexcept {
  return ChargedArrayCreate(array, d, [&] { return REAL(cuArrayCreate)(array, d); });
}

FRACGPU_EXPORT CUresult cuArray3DCreate(CUarray* array,
                                        const CUDA_ARRAY3D_DESCRIPTOR_v1* d) noexcept {
  return ChargedArrayCreate(array, d, [&] { return REAL(cuArray3DCreate)(array, d); });
}

FRACGPU_EXPORT CUresult cuArrayCreate_v2(CUarray* array, const CUDA_ARRAY_DESCRIPTOR* d) noexcept {
  return ChargedArrayCreate(array, d, [&] { return REAL(cuArrayCreate_v2)(array, d); });
}

FRACGPU_EXPORT CUresult cuArray3DCreate_v2(CUarray* array,
                                           const CUDA_ARRAY3D_DESCRIPTOR* d) noexcept {
  return ChargedArrayCreate(array, d, [&] { return REAL(cuArray3DCreate_v2)(array, d); });
}

FRACGPU_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray* array,
                                               const CUDA_ARRAY3D_DESCRIPTOR* d,
                                               unsigned int levels) noexcept {
  CUdevice ord;
  int dev = CurrentDeviceIndex(&ord);
  if (!array || !d) return REAL(cuMipmappedArrayCreate)(array, d, levels);
  uint64_t bytes = ArrayBytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels, levels);
  uint64_t key = 0;
  return ChargedAlloc(dev, bytes, Kind::kArray, &key, [&] {
    CUresult r = REAL(cuMipmappedArrayCreate)(array, d, levels);
    key = reinterpret_cast<uint64_t>(*array);
    return r;
  });
}

FRACGPU_EXPORT CUresult cuArrayDestroy(CUarray array) noexcept {
  return ArrayFree(Kind::kArray, reinterpret_cast<uint64_t>(array),
                   [](void* a) noexcept { return REAL(cuArrayDestroy)(static_cast<CUarray>(a)); });
}

FRACGPU_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray array) noexcept {
  return ArrayFree(Kind::kArray, reinterpret_cast<uint64_t>(array), [](void* a) noexcept {
    return REAL(cuMipmappedArrayDestroy)(static_cast<CUmipmappedArray>(a));
  });
}

// ---- VMM: physical memory is charged from cuMemCreate until it is really freed, i.e. when
// every handle reference to it has been released and every mapping of it unmapped
// (docs/design/wire-apis.md §7.4). Host locations are never charged. Handle references
// (issue 32 item 3): the creator's, one per cuMemRetainAllocationHandle ("must be released with
// corresponding number of calls to cuMemRelease", cuda.h) and one per handle imported in this
// process from its own export (cuMemImportFromShareableHandle of a POSIX fd this process
// exported: the same physical memory under another handle value). All count on the origin's
// entry, so releasing the original while an import or a retain lives keeps the charge: the
// charge goes exactly once, with the last reference.
namespace {
void HandleUnref(CUmemGenericAllocationHandle h, bool release) {
  Entry e;
  if (!TableFind(Kind::kVmmHandle, h, &e)) return;
  if (release) {
    if (e.aux2 >= 2)
      e.aux2 -= 2;  // an extra reference goes
    else
      e.aux2 |= 1;  // the last one
  } else if (e.aux > 0) {
    e.aux--;
  }
  if (e.aux2 == 1 && e.aux == 0) {
    TableRemove(Kind::kVmmHandle, h, nullptr);
    Uncharge(e.dev, e.size);
  } else {
    TableInsert(e);
  }
}

// One more handle reference to the charged handle `h` (a retain or a same-process import).
bool HandleRef(CUmemGenericAllocationHandle h) {
  Entry e;
  if (!TableFind(Kind::kVmmHandle, h, &e)) return false;
  e.aux2 += 2;
  TableInsert(e);
  return true;
}

// The charged handle that `h` names: its origin when `h` was imported from our own export.
CUmemGenericAllocationHandle Origin(CUmemGenericAllocationHandle h) {
  Entry i;
  return TableFind(Kind::kVmmImport, h, &i) ? i.aux : h;
}

// The identity of the open file behind `fd` (st_dev, st_ino; a dup or the same fd received
// again has the same), 0 when unknown. The raw system call: glibc's fstat symbol is 2.33
// (docs/vgpu.md "Packaging"); struct stat is the kernel's layout on x86-64 and arm64.
uint64_t FileKey(int fd) {
  struct stat st;
  if (fd < 0 || syscall(SYS_fstat, fd, &st) != 0) return 0;
  uint64_t key =
      static_cast<uint64_t>(st.st_ino) * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(st.st_dev);
  return key ? key : 1;
}

// One cuMemUnmap may cover any number of mappings: they are collected kUnmapChunk at a time
// (a fixed buffer on the stack: no allocation), each collected one removed from the table, and
// the sweep repeated until a pass finds fewer than a chunk. (Before issue 32 a mapping past the
// 62nd was removed without being collected, so its handle's charge was never released.)
constexpr uint64_t kUnmapChunk = 62;
struct UnmapRange {
  uint64_t begin, end, count;
  uint64_t handles[kUnmapChunk];
};
bool CollectMapping(const Entry& e, void* ctx) {
  auto* range = static_cast<UnmapRange*>(ctx);
  if (e.kind != Kind::kVmmMap || e.key < range->begin || e.key >= range->end) return false;
  if (range->count >= kUnmapChunk) return false;  // the next pass takes it
  range->handles[range->count++] = e.aux;
  return true;
}
}  // namespace

FRACGPU_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                    const CUmemAllocationProp* prop,
                                    unsigned long long flags) noexcept {
  if (!handle || !prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || size == 0) {
    return REAL(cuMemCreate)(handle, size, prop, flags);
  }
  int dev = DeviceIndexForOrdinal(prop->location.id);
  return ChargedAlloc(dev, size, Kind::kVmmHandle, handle,
                      [&] { return REAL(cuMemCreate)(handle, size, prop, flags); });
}

namespace {
std::atomic<int64_t> g_mc_binds{0};  // live multicast bindings: cuMemRelease looks only if > 0
void DropMulticastBindings(CUmemGenericAllocationHandle mc);
}  // namespace

FRACGPU_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) noexcept {
  CUresult r = REAL(cuMemRelease)(handle);
  if (r != CUDA_SUCCESS) return r;
  if (__builtin_expect(g_mc_binds.load(std::memory_order_relaxed) > 0, false))
    DropMulticastBindings(handle);  // a multicast object's release unbinds what it holds
  Entry i;
  if (TableFind(Kind::kVmmImport, handle, &i)) {  // one reference of an import goes
    if (i.aux2 > 1) {
      i.aux2--;
      TableInsert(i);
    } else {
      TableRemove(Kind::kVmmImport, handle, nullptr);
    }
    HandleUnref(i.aux, /*release=*/true);
    return r;
  }
  HandleUnref(handle, /*release=*/true);
  return r;
}

FRACGPU_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                 CUmemGenericAllocationHandle handle,
                                 unsigned long long flags) noexcept {
  CUresult r = REAL(cuMemMap)(ptr, size, offset, handle, flags);
  CUmemGenericAllocationHandle origin = Origin(handle);  // a mapping of an import: the origin's
  Entry h;
  if (r == CUDA_SUCCESS && TableFind(Kind::kVmmHandle, origin, &h)) {
    h.aux++;
    TableInsert(h);
    Entry m;
    m.kind = Kind::kVmmMap;
    m.key = ptr;
    m.size = size;
    m.aux = origin;
    m.dev = h.dev;
    TableInsert(m);
  }
  return r;
}

// cuMemRetainAllocationHandle: the handle mapped at `addr`, "the same handle value used to map
// the memory", one more reference to release (cuda.h).
FRACGPU_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle,
                                                    void* addr) noexcept {
  CUresult r = REAL(cuMemRetainAllocationHandle)(handle, addr);
  if (r != CUDA_SUCCESS || !handle) return r;
  Entry i;
  if (TableFind(Kind::kVmmImport, *handle, &i)) {
    i.aux2++;
    TableInsert(i);
    HandleRef(i.aux);
  } else {
    HandleRef(*handle);
  }
  return r;
}

// A POSIX fd export of a charged handle is remembered by the fd's file identity, so an import of
// it in this process is known for what it is (below). Other handle types are not tracked: their
// imports are another process's memory (the exporter pays; docs/vgpu.md).
FRACGPU_EXPORT CUresult cuMemExportToShareableHandle(void* shareable,
                                                     CUmemGenericAllocationHandle handle,
                                                     CUmemAllocationHandleType type,
                                                     unsigned long long flags) noexcept {
  CUresult r = REAL(cuMemExportToShareableHandle)(shareable, handle, type, flags);
  if (r == CUDA_SUCCESS) RecordUse(kSlotSharedVmmHandle);  // no checkpoint of shared memory
  if (r != CUDA_SUCCESS || !shareable || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return r;
  CUmemGenericAllocationHandle origin = Origin(handle);
  Entry o;
  uint64_t key = FileKey(*static_cast<int*>(shareable));
  if (key == 0 || !TableFind(Kind::kVmmHandle, origin, &o)) return r;
  Entry x;
  x.kind = Kind::kVmmExport;
  x.key = key;
  x.aux = origin;
  x.size = o.size;
  x.dev = o.dev;
  TableInsert(x);
  return r;
}

// An import of this process's own export (issue 32: export, import, release the original, 28
// times, held 14,336 MiB against 1,000 with nothing charged): the import is one more reference
// to the origin, which keeps its charge until the last one goes. If the origin is gone already
// (the export outlived it), the import is charged afresh as a new allocation, refused with
// CUDA_ERROR_OUT_OF_MEMORY (the imported handle released) when it does not fit. An import of
// another process's export is that process's memory and is passed through, as before.
FRACGPU_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle,
                                                       void* os_handle,
                                                       CUmemAllocationHandleType type) noexcept {
  uint64_t key = type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
                     ? FileKey(static_cast<int>(reinterpret_cast<intptr_t>(os_handle)))
                     : 0;
  Entry x;
  bool own = key != 0 && TableFind(Kind::kVmmExport, key, &x);
  CUresult r = REAL(cuMemImportFromShareableHandle)(handle, os_handle, type);
  if (r == CUDA_SUCCESS) RecordUse(kSlotSharedVmmHandle);  // no checkpoint of shared memory
  if (r != CUDA_SUCCESS || !handle || !own) return r;
  if (HandleRef(x.aux)) {
    Entry i;
    i.kind = Kind::kVmmImport;
    i.key = *handle;
    i.aux = x.aux;
    i.aux2 = 1;
    i.dev = x.dev;
    TableInsert(i);
    return r;
  }
  CUresult c = ChargeOrOom(x.dev, x.size);
  if (c != CUDA_SUCCESS) {
    (void)REAL(cuMemRelease)(*handle);
    *handle = 0;
    return c;
  }
  Record(Kind::kVmmHandle, *handle, x.dev, x.size);
  return r;
}

FRACGPU_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) noexcept {
  CUresult r = REAL(cuMemUnmap)(ptr, size);
  if (r != CUDA_SUCCESS) return r;
  // One unmap may cover several mappings: every one starting inside the range, chunk by chunk.
  UnmapRange range;
  range.begin = ptr;
  range.end = ptr + size;
  do {
    range.count = 0;
    TableSweep(&CollectMapping, &range);
    for (uint64_t i = 0; i < range.count; ++i) HandleUnref(range.handles[i], /*release=*/false);
  } while (range.count == kUnmapChunk);
  return r;
}

// ---- External memory (issue 32 item 3): memory another API (Vulkan, EGL, dma-buf) allocated,
// imported into CUDA. It is charged to the importing container at cuImportExternalMemory, its
// descriptor's size on the current context's device, before the driver sees the call (refused
// with CUDA_ERROR_OUT_OF_MEMORY when it does not fit), and returned when the object is destroyed
// and every buffer / mipmapped array mapped from it is freed (ExtUnref above). The mappings
// themselves take no memory of their own (they are views of the object).
FRACGPU_EXPORT CUresult cuImportExternalMemory(
    CUexternalMemory* ext_mem, const CUDA_EXTERNAL_MEMORY_HANDLE_DESC* desc) noexcept {
  CUdevice ord;
  int dev = CurrentDeviceIndex(&ord);
  if (!ext_mem || !desc || desc->size == 0) return REAL(cuImportExternalMemory)(ext_mem, desc);
  uint64_t key = 0;
  return ChargedAlloc(dev, desc->size, Kind::kExtMem, &key, [&] {
    CUresult r = REAL(cuImportExternalMemory)(ext_mem, desc);
    key = reinterpret_cast<uint64_t>(*ext_mem);
    return r;
  });
}

namespace {
// Records a buffer or mipmapped array mapped from external memory `ext` (kind kAlloc / kArray,
// size 0): one more reference to the object.
void RecordExtMapping(Kind kind, uint64_t key, CUexternalMemory ext) {
  Entry o;
  if (!TableFind(Kind::kExtMem, reinterpret_cast<uint64_t>(ext), &o)) return;
  o.aux++;
  TableInsert(o);
  Entry m;
  m.kind = kind;
  m.key = key;
  m.dev = o.dev;
  m.size = 0;
  m.aux = reinterpret_cast<uint64_t>(ext);
  m.aux2 = kExtMapped;
  TableInsert(m);
}
}  // namespace

FRACGPU_EXPORT CUresult
cuExternalMemoryGetMappedBuffer(CUdeviceptr* dptr, CUexternalMemory ext_mem,
                                const CUDA_EXTERNAL_MEMORY_BUFFER_DESC* desc) noexcept {
  CUresult r = REAL(cuExternalMemoryGetMappedBuffer)(dptr, ext_mem, desc);
  if (r == CUDA_SUCCESS && dptr) RecordExtMapping(Kind::kAlloc, *dptr, ext_mem);
  return r;
}

FRACGPU_EXPORT CUresult cuExternalMemoryGetMappedMipmappedArray(
    CUmipmappedArray* mipmap, CUexternalMemory ext_mem,
    const CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC* desc) noexcept {
  CUresult r = REAL(cuExternalMemoryGetMappedMipmappedArray)(mipmap, ext_mem, desc);
  if (r == CUDA_SUCCESS && mipmap)
    RecordExtMapping(Kind::kArray, reinterpret_cast<uint64_t>(*mipmap), ext_mem);
  return r;
}

FRACGPU_EXPORT CUresult cuDestroyExternalMemory(CUexternalMemory ext_mem) noexcept {
  CUresult r = REAL(cuDestroyExternalMemory)(ext_mem);
  if (r == CUDA_SUCCESS) ExtUnref(reinterpret_cast<uint64_t>(ext_mem), /*destroy=*/true);
  return r;
}

// ---- Multicast objects (issue 32 item 3). A multicast object holds no device memory of its own
// (cuMulticastCreate / AddDevice / GetGranularity pass through); what it holds is the VMM memory
// bound to it (cuMulticastBindMem / cuMulticastBindAddr: cuMemCreate allocations, charged
// there), which stays alive while bound, as while mapped. So a binding is one more reference to
// the bound allocation's charge (kMcBind), dropped by cuMulticastUnbind or by the release of the
// multicast object; the charge goes with the allocation's last reference or mapping.
namespace {
uint64_t McKey(CUmemGenericAllocationHandle mc, int dev, uint64_t mc_offset) {
  uint64_t k = (static_cast<uint64_t>(mc) * 0x9E3779B97F4A7C15ull) ^
               (mc_offset * 0xC2B2AE3D27D4EB4Full) ^ static_cast<uint64_t>(dev + 1);
  return k ? k : 1;
}

void RecordBinding(CUmemGenericAllocationHandle mc, uint64_t mc_offset,
                   CUmemGenericAllocationHandle origin) {
  Entry h;
  if (!TableFind(Kind::kVmmHandle, origin, &h) || !HandleRef(origin)) return;
  Entry b;
  b.kind = Kind::kMcBind;
  b.key = McKey(mc, h.dev, mc_offset);
  b.aux = origin;
  b.size = mc;
  b.dev = h.dev;
  TableInsert(b);
  g_mc_binds.fetch_add(1, std::memory_order_relaxed);
}

struct McSweep {
  CUmemGenericAllocationHandle mc;
  uint64_t count;
  uint64_t handles[kUnmapChunk];
};
bool CollectBinding(const Entry& e, void* ctx) {
  auto* sweep = static_cast<McSweep*>(ctx);
  if (e.kind != Kind::kMcBind || e.size != sweep->mc || sweep->count >= kUnmapChunk) return false;
  sweep->handles[sweep->count++] = e.aux;
  return true;
}
void DropMulticastBindings(CUmemGenericAllocationHandle mc) {
  McSweep sweep;
  sweep.mc = mc;
  do {
    sweep.count = 0;
    TableSweep(&CollectBinding, &sweep);
    for (uint64_t i = 0; i < sweep.count; ++i) {
      g_mc_binds.fetch_sub(1, std::memory_order_relaxed);
      HandleUnref(sweep.handles[i], /*release=*/true);
    }
  } while (sweep.count == kUnmapChunk);
}

struct MapLookup {
  uint64_t addr;
  uint64_t handle;  // 0: no mapping contains addr
};
bool FindMapping(const Entry& e, void* ctx) {
  auto* look = static_cast<MapLookup*>(ctx);
  if (e.kind == Kind::kVmmMap && e.key <= look->addr && look->addr - e.key < e.size)
    look->handle = e.aux;
  return false;
}
}  // namespace

FRACGPU_EXPORT CUresult cuMulticastBindMem(CUmemGenericAllocationHandle mc, size_t mc_offset,
                                           CUmemGenericAllocationHandle mem, size_t mem_offset,
                                           size_t size, unsigned long long flags) noexcept {
  CUresult r = REAL(cuMulticastBindMem)(mc, mc_offset, mem, mem_offset, size, flags);
  if (r == CUDA_SUCCESS) RecordBinding(mc, mc_offset, Origin(mem));
  return r;
}

FRACGPU_EXPORT CUresult cuMulticastBindAddr(CUmemGenericAllocationHandle mc, size_t mc_offset,
                                            CUdeviceptr memptr, size_t size,
                                            unsigned long long flags) noexcept {
  CUresult r = REAL(cuMulticastBindAddr)(mc, mc_offset, memptr, size, flags);
  if (r != CUDA_SUCCESS) return r;
  MapLookup look{memptr, 0};
  TableSweep(&FindMapping, &look);
  if (look.handle != 0) RecordBinding(mc, mc_offset, look.handle);
  return r;
}

FRACGPU_EXPORT CUresult cuMulticastUnbind(CUmemGenericAllocationHandle mc, CUdevice dev,
                                          size_t mc_offset, size_t size) noexcept {
  CUresult r = REAL(cuMulticastUnbind)(mc, dev, mc_offset, size);
  if (r != CUDA_SUCCESS) return r;
  int d = DeviceIndexForOrdinal(dev);
  Entry b;
  if (d >= 0 && TableRemove(Kind::kMcBind, McKey(mc, d, mc_offset), &b)) {
    g_mc_binds.fetch_sub(1, std::memory_order_relaxed);
    HandleUnref(b.aux, /*release=*/true);
  }
  return r;
}

// ---- Sparse arrays (issue 32 item 3): cuMemMapArrayAsync maps VMM memory (cuMemCreate
// allocations, charged there) into tiles of sparse arrays; like cuMemMap, a tile mapping keeps
// the memory alive after its handle is released. Each MAP of a generic handle is one more
// reference to the allocation's charge (kArrayMap, keyed by array and subresource); the UNMAP of
// that tile, or the array's destruction, drops it. The list is walked in place: no allocation.
namespace {
uint64_t TileKey(const CUarrayMapInfo& m) {
  auto mix = [](uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001B3ull; };
  uint64_t h = mix(0xCBF29CE484222325ull, reinterpret_cast<uint64_t>(m.resource.array));
  h = mix(h, static_cast<uint64_t>(m.subresourceType));
  if (m.subresourceType == 0) {
    const auto& l = m.subresource.sparseLevel;
    h = mix(mix(mix(mix(mix(h, l.level), l.layer), l.offsetX), l.offsetY), l.offsetZ);
  } else {
    h = mix(mix(h, m.subresource.miptail.layer), m.subresource.miptail.offset);
  }
  return h ? h : 1;
}

struct ArraySweep {
  uint64_t array;
  uint64_t count;
  uint64_t handles[kUnmapChunk];
};
bool CollectTile(const Entry& e, void* ctx) {
  auto* sweep = static_cast<ArraySweep*>(ctx);
  if (e.kind != Kind::kArrayMap || e.size != sweep->array || sweep->count >= kUnmapChunk)
    return false;
  sweep->handles[sweep->count++] = e.aux;
  return true;
}

void ArrayMapsAfter(const CUarrayMapInfo* list, unsigned int count) {
  for (unsigned int i = 0; i < count; ++i) {
    const CUarrayMapInfo& m = list[i];
    const uint64_t key = TileKey(m);
    Entry old;
    if (TableRemove(Kind::kArrayMap, key, &old)) {  // an unmap, or a map over a mapped tile
      g_array_maps.fetch_sub(1, std::memory_order_relaxed);
      HandleUnref(old.aux, /*release=*/true);
    }
    if (m.memOperationType != CU_MEM_OPERATION_TYPE_MAP || m.memHandleType != 0) continue;
    CUmemGenericAllocationHandle origin = Origin(m.memHandle.memHandle);
    Entry h;
    if (!TableFind(Kind::kVmmHandle, origin, &h) || !HandleRef(origin)) continue;
    Entry t;
    t.kind = Kind::kArrayMap;
    t.key = key;
    t.aux = origin;
    t.size = reinterpret_cast<uint64_t>(m.resource.array);
    t.dev = h.dev;
    TableInsert(t);
    g_array_maps.fetch_add(1, std::memory_order_relaxed);
  }
}
}  // namespace

namespace {
void DropArrayMappings(uint64_t array) {
  ArraySweep sweep;
  sweep.array = array;
  do {
    sweep.count = 0;
    TableSweep(&CollectTile, &sweep);
    for (uint64_t i = 0; i < sweep.count; ++i) {
      g_array_maps.fetch_sub(1, std::memory_order_relaxed);
      HandleUnref(sweep.handles[i], /*release=*/true);
    }
  } while (sweep.count == kUnmapChunk);
}
}  // namespace

FRACGPU_EXPORT CUresult cuMemMapArrayAsync(CUarrayMapInfo* list, unsigned int count,
                                           CUstream stream) noexcept {
  CUresult r = REAL(cuMemMapArrayAsync)(list, count, stream);
  if (r == CUDA_SUCCESS && list) ArrayMapsAfter(list, count);
  return r;
}
FRACGPU_EXPORT CUresult cuMemMapArrayAsync_ptsz(CUarrayMapInfo* list, unsigned int count,
                                                CUstream stream) noexcept {
  CUresult r = REAL(cuMemMapArrayAsync_ptsz)(list, count, stream);
  if (r == CUDA_SUCCESS && list) ArrayMapsAfter(list, count);
  return r;
}
