// vgpu_app's issue-32 operations (vgpu_app_attack.h). Each prints one line.
//   infonull:<f|t|b>:<v2|v1>  cuMemGetInfo(_v2) with the free (f), total (t) or both (b)
//       pointers NULL: "infonull <rc> <free or -> <total or ->" (what was written; - for NULL)
//   nullout  every hook with an out-pointer, called with it NULL (and otherwise valid
//       arguments): "nullout <calls> <name>=<rc> ..."; reaching the end is the point (a hook
//       that dereferences NULL kills the process)
//   vmmmany:<n>:<bytes>  n VMM handles of <bytes> each, mapped side by side in one reservation
//       and released, then unmapped by ONE cuMemUnmap of the whole range:
//       "vmmmany <rc of the first failing create/map or 0> <unmap rc>"
//   vmmreimport:<times>:<bytes>  the import attack: <times> x (create an exportable handle,
//       export it as a POSIX fd, import the fd in this same process, close it, release the
//       original, keep the import): "vmmreimport <rounds done> <rc that stopped it or 0>"
//   vmmdropimports  releases every import kept: "vmmdropimports <rc>"
//   vmmretain:<bytes>  create, map, cuMemRetainAllocationHandle at an inner address, release the
//       creator's handle, unmap (the retain keeps the memory): "vmmretain <rc> <same handle 1|0>"
//   vmmdropretains  releases every retained handle: "vmmdropretains <rc>"
//   deepbind:<plugin path>:<bytes>  dlopen(plugin, RTLD_NOW | RTLD_DEEPBIND), then its
//       vgpu_plugin_alloc(bytes): "deepbind <rc>" (-1: the plugin did not load)
//   extmem:<bytes>:<buffers>  imports <bytes> of external memory (an opaque fd), maps <buffers>
//       buffers of 1 MiB and one mipmapped array from it, destroys the object (the mappings stay):
//       "extmem <import rc> <first failing map rc or 0> <destroy rc>"
//   extfree  frees the mapped buffers and arrays: "extfree <rc>"
//   mcbind:<bytes>:<0 mem|1 addr>  creates and maps a VMM allocation, a multicast object of the
//       same size, binds the allocation (cuMulticastBindMem or cuMulticastBindAddr), then
//       releases and unmaps the allocation (the binding keeps it): "mcbind <rc>"
//   mcunbind  unbinds it: "mcunbind <rc>";  mcrelease  releases the multicast object instead
//   tilemap:<bytes>  creates a VMM allocation and an array, maps the allocation into a tile of
//       the array (cuMemMapArrayAsync), then releases the allocation's handle: "tilemap <rc>"
//   tileunmap  unmaps that tile: "tileunmap <rc>";  tilearrayfree  destroys the array instead
//   setlimit:<CUlimit>:<value>  cuCtxSetLimit on the current context: "setlimit <rc> <value
//       cuCtxGetLimit reads back>"
//   zeroregion  the tenant edits its own region (CUDA_DEVICE_MEMORY_SHARED_CACHE): every
//       device's and every slot's usage set to 0: "zeroregion <0 done | -1 cannot map>"
#include "vgpu_app_attack.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "api/nvml.h"
#include "api/region.h"
#include "vgpu/cuda_api.h"

namespace {

unsigned long long Arg(const std::vector<std::string>& a, size_t i) {
  return i < a.size() ? std::strtoull(a[i].c_str(), nullptr, 10) : 0;
}
std::string Str(const std::vector<std::string>& a, size_t i) { return i < a.size() ? a[i] : ""; }

void InfoNull(const std::vector<std::string>& a) {
  const std::string which = Str(a, 1);
  const bool v1 = Str(a, 2) == "v1";
  const bool null_free = which == "f" || which == "b", null_total = which == "t" || which == "b";
  size_t f = 7, t = 7;  // sentinels: a NULL slot must stay untouched
  unsigned int f1 = 7, t1 = 7;
  CUresult r;
  if (v1) {
    r = cuMemGetInfo(null_free ? nullptr : &f1, null_total ? nullptr : &t1);
    f = f1;
    t = t1;
  } else {
    r = cuMemGetInfo_v2(null_free ? nullptr : &f, null_total ? nullptr : &t);
  }
  std::printf("infonull %d %s %s\n", r, null_free ? "-" : std::to_string(f).c_str(),
              null_total ? "-" : std::to_string(t).c_str());
}

void NullOut(int ordinal) {
  std::string out;
  int calls = 0;
  auto note = [&](const char* name, int rc) {
    out += " ";
    out += name;
    out += "=" + std::to_string(rc);
    ++calls;
  };
  note("cuMemGetInfo_v2", cuMemGetInfo_v2(nullptr, nullptr));
  note("cuMemGetInfo", cuMemGetInfo(nullptr, nullptr));
  note("cuDeviceTotalMem_v2", cuDeviceTotalMem_v2(nullptr, ordinal));
  note("cuDeviceTotalMem", cuDeviceTotalMem(nullptr, ordinal));
  note("cuMemAlloc_v2", cuMemAlloc_v2(nullptr, 1 << 20));
  note("cuMemAlloc", cuMemAlloc(nullptr, 1 << 20));
  size_t pitch = 0;
  CUdeviceptr p = 0;
  note("cuMemAllocPitch_v2.dptr", cuMemAllocPitch_v2(nullptr, &pitch, 1024, 16, 4));
  note("cuMemAllocPitch_v2.pitch", cuMemAllocPitch_v2(&p, nullptr, 1024, 16, 4));
  unsigned int pitch1 = 0;
  CUdeviceptr_v1 p1 = 0;
  note("cuMemAllocPitch.dptr", cuMemAllocPitch(nullptr, &pitch1, 1024, 16, 4));
  note("cuMemAllocPitch.pitch", cuMemAllocPitch(&p1, nullptr, 1024, 16, 4));
  note("cuMemAllocManaged", cuMemAllocManaged(nullptr, 1 << 20, 1));
  note("cuMemAllocAsync", cuMemAllocAsync(nullptr, 1 << 20, nullptr));
  CUmemoryPool pool = nullptr;
  cuDeviceGetMemPool(&pool, ordinal);
  note("cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync(nullptr, 1 << 20, pool, nullptr));
  CUmemPoolProps props{};
  props.allocType = 1;  // CU_MEM_ALLOCATION_TYPE_PINNED
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = ordinal;
  note("cuMemPoolCreate", cuMemPoolCreate(nullptr, &props));
  note("cuMemPoolImportFromShareableHandle",
       cuMemPoolImportFromShareableHandle(nullptr, nullptr,
                                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  CUmemAllocationProp prop{};
  prop.type = 1;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = ordinal;
  note("cuMemCreate", cuMemCreate(nullptr, 2 << 20, &prop, 0));
  note("cuMemImportFromShareableHandle",
       cuMemImportFromShareableHandle(nullptr, nullptr, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  CUDA_ARRAY_DESCRIPTOR d2{64, 64, CU_AD_FORMAT_FLOAT, 1};
  CUDA_ARRAY3D_DESCRIPTOR d3{64, 64, 4, CU_AD_FORMAT_FLOAT, 1, 0};
  CUDA_ARRAY_DESCRIPTOR_v1 d2v1{64, 64, CU_AD_FORMAT_FLOAT, 1};
  CUDA_ARRAY3D_DESCRIPTOR_v1 d3v1{64, 64, 4, CU_AD_FORMAT_FLOAT, 1, 0};
  note("cuArrayCreate_v2", cuArrayCreate_v2(nullptr, &d2));
  note("cuArray3DCreate_v2", cuArray3DCreate_v2(nullptr, &d3));
  note("cuArrayCreate", cuArrayCreate(nullptr, &d2v1));
  note("cuArray3DCreate", cuArray3DCreate(nullptr, &d3v1));
  note("cuMipmappedArrayCreate", cuMipmappedArrayCreate(nullptr, &d3, 2));
  note("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(nullptr, ordinal));
  note("cuCtxCreate_v2", cuCtxCreate_v2(nullptr, 0, ordinal));
  note("cuCtxCreate_v3", cuCtxCreate_v3(nullptr, nullptr, 0, 0, ordinal));
  note("cuCtxCreate_v4", cuCtxCreate_v4(nullptr, nullptr, 0, ordinal));
  note("cuGreenCtxCreate", cuGreenCtxCreate(nullptr, nullptr, ordinal, 1));
  static const char kImage[] = "fake module";
  note("cuModuleLoad", cuModuleLoad(nullptr, "/dev/null"));
  note("cuModuleLoadData", cuModuleLoadData(nullptr, kImage));
  note("cuModuleLoadDataEx", cuModuleLoadDataEx(nullptr, kImage, 0, nullptr, nullptr));
  note("cuModuleLoadFatBinary", cuModuleLoadFatBinary(nullptr, kImage));
  note("cuLibraryLoadData",
       cuLibraryLoadData(nullptr, kImage, nullptr, nullptr, 0, nullptr, nullptr, 0));
  note("cuLibraryLoadFromFile",
       cuLibraryLoadFromFile(nullptr, "/dev/null", nullptr, nullptr, 0, nullptr, nullptr, 0));
  CUgraph graph = nullptr;
  cuGraphCreate(&graph, 0);
  note("cuGraphInstantiate", cuGraphInstantiate(nullptr, graph, nullptr, nullptr, 0));
  note("cuGraphInstantiate_v2", cuGraphInstantiate_v2(nullptr, graph, nullptr, nullptr, 0));
  note("cuGraphInstantiateWithFlags", cuGraphInstantiateWithFlags(nullptr, graph, 0));
  note("cuGraphInstantiateWithParams", cuGraphInstantiateWithParams(nullptr, graph, nullptr));
  note("cuGraphInstantiateWithParams_ptsz",
       cuGraphInstantiateWithParams_ptsz(nullptr, graph, nullptr));
  note("cuGetProcAddress", cuGetProcAddress("cuMemAlloc", nullptr, 12000, 0));
  note("cuGetProcAddress_v2", cuGetProcAddress_v2("cuMemAlloc", nullptr, 12000, 0, nullptr));
  void* fn = nullptr;
  note("cuGetProcAddress_v2.status", cuGetProcAddress_v2("cuMemAlloc", &fn, 12000, 0, nullptr));
  nvmlDevice_t dev = nullptr;
  nvmlInit_v2();
  nvmlDeviceGetHandleByIndex_v2(0, &dev);
  note("nvmlDeviceGetMemoryInfo", nvmlDeviceGetMemoryInfo(dev, nullptr));
  note("nvmlDeviceGetMemoryInfo_v2", nvmlDeviceGetMemoryInfo_v2(dev, nullptr));
  std::printf("nullout %d%s\n", calls, out.c_str());
}

void VmmMany(const std::vector<std::string>& a, int ordinal) {
  const unsigned long long n = Arg(a, 1), bytes = Arg(a, 2);
  CUdeviceptr va = 0;
  CUresult r = cuMemAddressReserve(&va, n * bytes, 0, 0, 0);
  CUmemAllocationProp prop{};
  prop.type = 1;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = ordinal;
  for (unsigned long long i = 0; i < n && r == CUDA_SUCCESS; ++i) {
    CUmemGenericAllocationHandle h = 0;
    r = cuMemCreate(&h, bytes, &prop, 0);
    if (r != CUDA_SUCCESS) break;
    r = cuMemMap(va + i * bytes, bytes, 0, h, 0);
    CUresult rr = cuMemRelease(h);  // the mapping keeps the memory
    if (r == CUDA_SUCCESS) r = rr;
  }
  CUresult u = r == CUDA_SUCCESS ? cuMemUnmap(va, n * bytes) : CUDA_ERROR_INVALID_VALUE;
  std::printf("vmmmany %d %d\n", r, u);
}

std::vector<CUmemGenericAllocationHandle> g_imports, g_retains;
CUmemGenericAllocationHandle g_mc = 0;
CUarray g_tile_array = nullptr;

std::vector<CUdeviceptr> g_ext_buffers;
std::vector<CUmipmappedArray> g_ext_arrays;

void ExtMem(const std::vector<std::string>& a) {
  CUDA_EXTERNAL_MEMORY_HANDLE_DESC d{};
  d.type = 1;  // CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD
  d.handle.fd = 0;
  d.size = Arg(a, 1);
  CUexternalMemory ext = nullptr;
  CUresult r = cuImportExternalMemory(&ext, &d), m = CUDA_SUCCESS, x = CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS) {
    for (unsigned long long i = 0; i < Arg(a, 2) && m == CUDA_SUCCESS; ++i) {
      CUDA_EXTERNAL_MEMORY_BUFFER_DESC b{};
      b.offset = i << 20;
      b.size = 1 << 20;
      CUdeviceptr p = 0;
      m = cuExternalMemoryGetMappedBuffer(&p, ext, &b);
      if (m == CUDA_SUCCESS) g_ext_buffers.push_back(p);
    }
    CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC md{};
    md.arrayDesc = CUDA_ARRAY3D_DESCRIPTOR{64, 64, 0, CU_AD_FORMAT_FLOAT, 1, 0};
    md.numLevels = 1;
    CUmipmappedArray arr = nullptr;
    if (m == CUDA_SUCCESS) m = cuExternalMemoryGetMappedMipmappedArray(&arr, ext, &md);
    if (m == CUDA_SUCCESS) g_ext_arrays.push_back(arr);
    x = cuDestroyExternalMemory(ext);
  }
  std::printf("extmem %d %d %d\n", r, m, x);
}

CUresult ExtFree() {
  CUresult r = CUDA_SUCCESS;
  for (CUdeviceptr p : g_ext_buffers)
    if (cuMemFree_v2(p) != CUDA_SUCCESS) r = CUDA_ERROR_UNKNOWN;
  for (CUmipmappedArray m : g_ext_arrays)
    if (cuMipmappedArrayDestroy(m) != CUDA_SUCCESS) r = CUDA_ERROR_UNKNOWN;
  g_ext_buffers.clear();
  g_ext_arrays.clear();
  return r;
}

CUmemAllocationProp DeviceProp(int ordinal, int handle_types) {
  CUmemAllocationProp prop{};
  prop.type = 1;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = ordinal;
  prop.requestedHandleTypes = handle_types;
  return prop;
}

void VmmReimport(const std::vector<std::string>& a, int ordinal) {
  const unsigned long long times = Arg(a, 1), bytes = Arg(a, 2);
  CUmemAllocationProp prop = DeviceProp(ordinal, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  unsigned long long done = 0;
  CUresult r = CUDA_SUCCESS;
  for (; done < times; ++done) {
    CUmemGenericAllocationHandle h = 0, imported = 0;
    if ((r = cuMemCreate(&h, bytes, &prop, 0)) != CUDA_SUCCESS) break;
    int fd = -1;
    r = cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (r == CUDA_SUCCESS)
      r = cuMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(intptr_t{fd}),
                                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (fd >= 0) close(fd);
    if (r == CUDA_SUCCESS) g_imports.push_back(imported);
    CUresult rr = cuMemRelease(h);
    if (r == CUDA_SUCCESS) r = rr;
    if (r != CUDA_SUCCESS) break;
  }
  std::printf("vmmreimport %llu %d\n", done, r);
}

void VmmRetain(const std::vector<std::string>& a, int ordinal) {
  const unsigned long long bytes = Arg(a, 1);
  CUmemAllocationProp prop = DeviceProp(ordinal, 0);
  CUmemGenericAllocationHandle h = 0, retained = 0;
  CUdeviceptr va = 0;
  CUresult r = cuMemCreate(&h, bytes, &prop, 0);
  if (r == CUDA_SUCCESS) r = cuMemAddressReserve(&va, bytes, 0, 0, 0);
  if (r == CUDA_SUCCESS) r = cuMemMap(va, bytes, 0, h, 0);
  if (r == CUDA_SUCCESS)
    r = cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(va + 4096));
  if (r == CUDA_SUCCESS) g_retains.push_back(retained);
  if (h != 0) {
    CUresult rr = cuMemRelease(h);
    if (r == CUDA_SUCCESS) r = rr;
  }
  if (va != 0) {
    CUresult rr = cuMemUnmap(va, bytes);
    if (r == CUDA_SUCCESS) r = rr;
  }
  std::printf("vmmretain %d %d\n", r, retained == h ? 1 : 0);
}

CUresult ReleaseAll(std::vector<CUmemGenericAllocationHandle>& handles) {
  CUresult r = CUDA_SUCCESS;
  for (CUmemGenericAllocationHandle h : handles)
    if (cuMemRelease(h) != CUDA_SUCCESS) r = CUDA_ERROR_UNKNOWN;
  handles.clear();
  return r;
}

void McBind(const std::vector<std::string>& a, int ordinal) {
  const unsigned long long bytes = Arg(a, 1);
  CUmemAllocationProp prop = DeviceProp(ordinal, 0);
  CUmemGenericAllocationHandle h = 0;
  CUdeviceptr va = 0;
  CUresult r = cuMemCreate(&h, bytes, &prop, 0);
  if (r == CUDA_SUCCESS) r = cuMemAddressReserve(&va, bytes, 0, 0, 0);
  if (r == CUDA_SUCCESS) r = cuMemMap(va, bytes, 0, h, 0);
  CUmulticastObjectProp mp{1, bytes, 0, 0};
  if (r == CUDA_SUCCESS) r = cuMulticastCreate(&g_mc, &mp);
  if (r == CUDA_SUCCESS) r = cuMulticastAddDevice(g_mc, ordinal);
  if (r == CUDA_SUCCESS)
    r = Arg(a, 2) ? cuMulticastBindAddr(g_mc, 0, va, bytes, 0)
                  : cuMulticastBindMem(g_mc, 0, h, 0, bytes, 0);
  if (h != 0 && cuMemRelease(h) != CUDA_SUCCESS && r == CUDA_SUCCESS) r = CUDA_ERROR_UNKNOWN;
  if (va != 0 && cuMemUnmap(va, bytes) != CUDA_SUCCESS && r == CUDA_SUCCESS) r = CUDA_ERROR_UNKNOWN;
  std::printf("mcbind %d\n", r);
}

CUarrayMapInfo TileInfo(int op, CUmemGenericAllocationHandle h) {
  CUarrayMapInfo m{};
  m.resourceType = 0;  // CU_RESOURCE_TYPE_ARRAY
  m.resource.array = g_tile_array;
  m.subresourceType = 0;
  m.subresource.sparseLevel.extentWidth = m.subresource.sparseLevel.extentHeight = 64;
  m.subresource.sparseLevel.extentDepth = 1;
  m.memOperationType = op;
  m.memHandleType = 0;
  m.memHandle.memHandle = h;
  return m;
}

void TileMap(const std::vector<std::string>& a, int ordinal) {
  CUmemAllocationProp prop = DeviceProp(ordinal, 0);
  CUmemGenericAllocationHandle h = 0;
  CUDA_ARRAY_DESCRIPTOR d{64, 64, CU_AD_FORMAT_FLOAT, 1};
  CUresult r = cuArrayCreate_v2(&g_tile_array, &d);
  if (r == CUDA_SUCCESS) r = cuMemCreate(&h, Arg(a, 1), &prop, 0);
  CUarrayMapInfo m = TileInfo(CU_MEM_OPERATION_TYPE_MAP, h);
  if (r == CUDA_SUCCESS) r = cuMemMapArrayAsync(&m, 1, nullptr);
  if (h != 0 && cuMemRelease(h) != CUDA_SUCCESS && r == CUDA_SUCCESS) r = CUDA_ERROR_UNKNOWN;
  std::printf("tilemap %d\n", r);
}

void ZeroRegion() {
  const char* path = std::getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE");
  int fd = path ? ::open(path, O_RDWR | O_CLOEXEC) : -1;
  void* m = fd >= 0 ? ::mmap(nullptr, sizeof(fracgpu::api::Region), PROT_READ | PROT_WRITE,
                             MAP_SHARED, fd, 0)
                    : MAP_FAILED;
  if (fd >= 0) ::close(fd);
  if (m == MAP_FAILED) {
    std::printf("zeroregion -1\n");
    return;
  }
  auto* r = static_cast<fracgpu::api::Region*>(m);
  for (auto& d : r->devices) d.used.store(0);
  for (auto& s : r->slots) {
    for (auto& u : s.used) u.store(0);
    for (auto& u : s.data_bytes) u.store(0);
  }
  ::munmap(m, sizeof(fracgpu::api::Region));
  std::printf("zeroregion 0\n");
}

}  // namespace

bool RunAttackOp(const std::vector<std::string>& a, int ordinal) {
  const std::string& op = a[0];
  if (op == "zeroregion") {
    ZeroRegion();
  } else if (op == "infonull") {
    InfoNull(a);
  } else if (op == "nullout") {
    NullOut(ordinal);
  } else if (op == "vmmmany") {
    VmmMany(a, ordinal);
  } else if (op == "deepbind") {
    void* lib = dlopen(Str(a, 1).c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    using AllocFn = int (*)(unsigned long long);
    auto fn = reinterpret_cast<AllocFn>(lib ? dlsym(lib, "vgpu_plugin_alloc") : nullptr);
    std::printf("deepbind %d\n", fn ? fn(Arg(a, 2)) : -1);
  } else if (op == "extmem") {
    ExtMem(a);
  } else if (op == "extfree") {
    std::printf("extfree %d\n", ExtFree());
  } else if (op == "mcbind") {
    McBind(a, ordinal);
  } else if (op == "mcunbind") {
    std::printf("mcunbind %d\n", cuMulticastUnbind(g_mc, ordinal, 0, 0));
  } else if (op == "mcrelease") {
    std::printf("mcrelease %d\n", cuMemRelease(g_mc));
  } else if (op == "tilemap") {
    TileMap(a, ordinal);
  } else if (op == "tileunmap") {
    CUarrayMapInfo m = TileInfo(CU_MEM_OPERATION_TYPE_UNMAP, 0);
    std::printf("tileunmap %d\n", cuMemMapArrayAsync(&m, 1, nullptr));
  } else if (op == "tilearrayfree") {
    std::printf("tilearrayfree %d\n", cuArrayDestroy(g_tile_array));
  } else if (op == "setlimit") {
    CUresult r = cuCtxSetLimit(static_cast<CUlimit>(Arg(a, 1)), Arg(a, 2));
    size_t v = 0;
    cuCtxGetLimit(&v, static_cast<CUlimit>(Arg(a, 1)));
    std::printf("setlimit %d %zu\n", r, v);
  } else if (op == "vmmreimport") {
    VmmReimport(a, ordinal);
  } else if (op == "vmmdropimports") {
    std::printf("vmmdropimports %d\n", ReleaseAll(g_imports));
  } else if (op == "vmmretain") {
    VmmRetain(a, ordinal);
  } else if (op == "vmmdropretains") {
    std::printf("vmmdropretains %d\n", ReleaseAll(g_retains));
  } else {
    return false;
  }
  return true;
}
