// Compile-time check, when NVIDIA's headers are present (the CUDA 13.0 wheels of
// scripts/deps/cuda-wheels.sh, added by tests/vgpu/CMakeLists.txt; built a second time against
// the newest 13.x wheels as vgpu_pfn_types_newest_test): every hook in src/vgpu/hooks.def has the
// shape of the PFN typedef of its own variant in cudaTypedefs.h — PFN_<base>_v<introduced>[_ptsz] —
// so no cuGetProcAddress answer can be a function of another signature. Shape: the same number of
// parameters and, for each parameter and the result, the same size, the same pointer-ness,
// and for pointers the same pointee size where both are complete (unsigned int* of a v1
// entry point vs size_t* of _v2 differ). Our declarations (src/vgpu/cuda_api.h) are read in a
// namespace, without C linkage, next to cuda.h's. Without the headers the test is skipped.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#if __has_include(<cudaTypedefs.h>)
#define FRACGPU_HAVE_CUDA_HEADERS 1
// Legacy v1 PFN typedefs (e.g. PFN_cuDevicePrimaryCtxRelease_v7000) live under this macro,
// which also keeps cuda.h from renaming cuMemAlloc to cuMemAlloc_v2 and so on.
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaTypedefs.h>

#define FRACGPU_CUDA_API_C_LINKAGE 0
namespace ours {
#include "vgpu/cuda_api.h"
}
#include "vgpu/hooks.def"

namespace {

template <typename T, typename = void>
struct Complete : std::false_type {};
template <typename T>
struct Complete<T, std::void_t<decltype(sizeof(T))>> : std::true_type {};

template <typename A, typename B>
constexpr bool SameArg() {
  if (sizeof(A) != sizeof(B) || std::is_pointer_v<A> != std::is_pointer_v<B>) return false;
  if constexpr (std::is_pointer_v<A> && std::is_pointer_v<B>) {
    using PA = std::remove_cv_t<std::remove_pointer_t<A>>;
    using PB = std::remove_cv_t<std::remove_pointer_t<B>>;
    if constexpr (!std::is_void_v<PA> && !std::is_void_v<PB> && Complete<PA>::value &&
                  Complete<PB>::value && !std::is_function_v<PA> && !std::is_function_v<PB>) {
      return sizeof(PA) == sizeof(PB);
    }
  }
  return true;
}

template <typename A, typename B>
struct SameShape : std::false_type {};
template <typename RA, typename... A, typename RB, typename... B>
struct SameShape<RA (*)(A...) noexcept, RB (*)(B...)> {
  static constexpr bool Args() {
    if constexpr (sizeof...(A) != sizeof...(B)) {
      return false;
    } else {
      return (SameArg<A, B>() && ...);
    }
  }
  static constexpr bool value = sizeof(RA) == sizeof(RB) && Args();
};

#define FRACGPU_PFN_0(base, ver) PFN_##base##_v##ver
#define FRACGPU_PFN_1(base, ver) PFN_##base##_v##ver##_ptsz
#define FRACGPU_CHECK_HOOK(elf, base, ver, pt)                                       \
  static_assert(SameShape<decltype(&ours::elf), FRACGPU_PFN_##pt(base, ver)>::value, \
                #elf " does not have the shape of its PFN typedef (" #base " v" #ver ")");
FRACGPU_CUDA_HOOKS(FRACGPU_CHECK_HOOK)

#define FRACGPU_COUNT(...) +1
constexpr int kHooksChecked = 0 FRACGPU_CUDA_HOOKS(FRACGPU_COUNT);

// The check itself can fail: the v1 cuCtxSynchronize hook against the v13000 typedef.
static_assert(!SameShape<decltype(&ours::cuCtxSynchronize), PFN_cuCtxSynchronize_v13000>::value);
static_assert(!SameShape<decltype(&ours::cuMemAlloc_v2), PFN_cuMemAlloc_v2000>::value);
// The legacy v1 hooks (32-bit sizes, CUdeviceptr_v1, v1 descriptors) are not the _v2 shapes,
// so each is checked against its own v2000 typedef above, not merely against any.
static_assert(!SameShape<decltype(&ours::cuMemAlloc), PFN_cuMemAlloc_v3020>::value);
static_assert(!SameShape<decltype(&ours::cuMemAllocPitch), PFN_cuMemAllocPitch_v3020>::value);
static_assert(!SameShape<decltype(&ours::cuMemFree), PFN_cuMemFree_v3020>::value);
static_assert(!SameShape<decltype(&ours::cuMemGetInfo), PFN_cuMemGetInfo_v3020>::value);
static_assert(!SameShape<decltype(&ours::cuDeviceTotalMem), PFN_cuDeviceTotalMem_v3020>::value);
static_assert(!SameShape<decltype(&ours::cuArrayCreate), PFN_cuArrayCreate_v3020>::value);
static_assert(!SameShape<decltype(&ours::cuArray3DCreate), PFN_cuArray3DCreate_v3020>::value);
// Our device attribute values are cuda.h's (the fake's H100 table is keyed by them).
#define FRACGPU_SAME_ATTR(n) static_assert(ours::n == static_cast<int>(::n), #n);
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_WARP_SIZE)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_MAX_PITCH)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_CLOCK_RATE)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_GPU_OVERLAP)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_INTEGRATED)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_ECC_ENABLED)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH)
// Our declarations are 13.0's. Later releases append attributes (13.5: MAX 162) and grow
// CUdevSmResource (13.5: 20 bytes, resource ABI v2; CUdevResource keeps 144 bytes and sm at 96).
#if CUDA_VERSION == 13000
FRACGPU_SAME_ATTR(CU_DEVICE_ATTRIBUTE_MAX)
#else
static_assert(ours::CU_DEVICE_ATTRIBUTE_MAX <= static_cast<int>(::CU_DEVICE_ATTRIBUTE_MAX));
#endif
#undef FRACGPU_SAME_ATTR
// Our v1 descriptors have the layout of cuda.h's.
static_assert(sizeof(ours::CUDA_ARRAY_DESCRIPTOR_v1) == sizeof(::CUDA_ARRAY_DESCRIPTOR_v1));
static_assert(sizeof(ours::CUDA_ARRAY3D_DESCRIPTOR_v1) == sizeof(::CUDA_ARRAY3D_DESCRIPTOR_v1));
static_assert(offsetof(ours::CUDA_ARRAY3D_DESCRIPTOR_v1, Format) ==
              offsetof(::CUDA_ARRAY3D_DESCRIPTOR_v1, Format));
static_assert(offsetof(ours::CUDA_ARRAY3D_DESCRIPTOR_v1, NumChannels) ==
              offsetof(::CUDA_ARRAY3D_DESCRIPTOR_v1, NumChannels));
static_assert(sizeof(ours::CUdeviceptr_v1) == sizeof(::CUdeviceptr_v1));
// The graph hooks: the legacy 5-argument cuGraphInstantiate is not cuGraphInstantiateWithFlags,
// and the structures they read have cuda.h's layout.
static_assert(
    !SameShape<decltype(&ours::cuGraphInstantiate), PFN_cuGraphInstantiateWithFlags_v11040>::value);
static_assert(
    !SameShape<decltype(&ours::cuGraphInstantiateWithFlags), PFN_cuGraphInstantiate_v11000>::value);
static_assert(sizeof(ours::CUmemPoolProps) == sizeof(::CUmemPoolProps));
static_assert(sizeof(ours::CUmemAccessDesc) == sizeof(::CUmemAccessDesc));
static_assert(sizeof(ours::CUgraphEdgeData) == sizeof(::CUgraphEdgeData));
static_assert(sizeof(ours::CUDA_MEM_ALLOC_NODE_PARAMS) == sizeof(::CUDA_MEM_ALLOC_NODE_PARAMS_v1));
static_assert(sizeof(ours::CUDA_MEM_ALLOC_NODE_PARAMS) == sizeof(::CUDA_MEM_ALLOC_NODE_PARAMS_v2));
static_assert(offsetof(ours::CUDA_MEM_ALLOC_NODE_PARAMS, bytesize) ==
              offsetof(::CUDA_MEM_ALLOC_NODE_PARAMS_v1, bytesize));
static_assert(offsetof(ours::CUDA_MEM_ALLOC_NODE_PARAMS, dptr) ==
              offsetof(::CUDA_MEM_ALLOC_NODE_PARAMS_v1, dptr));
static_assert(offsetof(ours::CUDA_MEM_ALLOC_NODE_PARAMS, poolProps) +
                  offsetof(ours::CUmemPoolProps, location) ==
              offsetof(::CUDA_MEM_ALLOC_NODE_PARAMS_v1, poolProps) +
                  offsetof(::CUmemPoolProps, location));
static_assert(sizeof(ours::CUgraphNodeParams) == sizeof(::CUgraphNodeParams));
static_assert(offsetof(ours::CUgraphNodeParams, alloc) == offsetof(::CUgraphNodeParams, alloc));
static_assert(offsetof(ours::CUgraphNodeParams, free) == offsetof(::CUgraphNodeParams, free));
static_assert(sizeof(ours::CUDA_GRAPH_INSTANTIATE_PARAMS) ==
              sizeof(::CUDA_GRAPH_INSTANTIATE_PARAMS));
static_assert(offsetof(ours::CUDA_GRAPH_INSTANTIATE_PARAMS, hErrNode_out) ==
              offsetof(::CUDA_GRAPH_INSTANTIATE_PARAMS, hErrNode_out));
static_assert(offsetof(ours::CUDA_GRAPH_INSTANTIATE_PARAMS, result_out) ==
              offsetof(::CUDA_GRAPH_INSTANTIATE_PARAMS, result_out));
// Our enum constants have cuda.h's values (compared as integers: the enums differ in type).
constexpr bool SameValue(long long a, long long b) { return a == b; }
static_assert(SameValue(ours::CU_GRAPH_NODE_TYPE_MEM_ALLOC, ::CU_GRAPH_NODE_TYPE_MEM_ALLOC) &&
              SameValue(ours::CU_GRAPH_NODE_TYPE_MEM_FREE, ::CU_GRAPH_NODE_TYPE_MEM_FREE) &&
              SameValue(ours::CU_GRAPH_NODE_TYPE_GRAPH, ::CU_GRAPH_NODE_TYPE_GRAPH) &&
              SameValue(ours::CU_GRAPH_NODE_TYPE_EMPTY, ::CU_GRAPH_NODE_TYPE_EMPTY));
static_assert(SameValue(ours::CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT,
                        ::CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT) &&
              SameValue(ours::CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT,
                        ::CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT) &&
              SameValue(ours::CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH,
                        ::CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH));
static_assert(SameValue(ours::CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD,
                        ::CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) &&
              SameValue(ours::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH,
                        ::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));

// Green contexts and memory shared between processes: the structures and constants the hooks
// and the fake share with cuda.h.
static_assert(sizeof(ours::CUdevResource) == sizeof(::CUdevResource));
static_assert(offsetof(ours::CUdevResource, sm) == offsetof(::CUdevResource, sm));
#if CUDA_VERSION == 13000
static_assert(sizeof(ours::CUdevSmResource) == sizeof(::CUdevSmResource));
#else
static_assert(sizeof(ours::CUdevSmResource) <= sizeof(::CUdevSmResource));  // ours, a prefix
#endif
static_assert(offsetof(ours::CUdevSmResource, minSmPartitionSize) ==
              offsetof(::CUdevSmResource, minSmPartitionSize));
static_assert(sizeof(ours::CUipcMemHandle) == sizeof(::CUipcMemHandle));
static_assert(sizeof(ours::CUmemPoolPtrExportData) == sizeof(::CUmemPoolPtrExportData));
static_assert(SameValue(ours::CU_GREEN_CTX_DEFAULT_STREAM, ::CU_GREEN_CTX_DEFAULT_STREAM) &&
              SameValue(ours::CU_DEV_RESOURCE_TYPE_SM, ::CU_DEV_RESOURCE_TYPE_SM) &&
              SameValue(ours::CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING,
                        ::CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING) &&
              SameValue(ours::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS,
                        ::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) &&
              SameValue(ours::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                        ::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) &&
              SameValue(ours::CU_STREAM_NON_BLOCKING, ::CU_STREAM_NON_BLOCKING));
static_assert(SameValue(ours::CUDA_ERROR_INVALID_RESOURCE_TYPE,
                        ::CUDA_ERROR_INVALID_RESOURCE_TYPE) &&
              SameValue(ours::CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION,
                        ::CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION) &&
              SameValue(ours::CUDA_ERROR_CONTEXT_IS_DESTROYED, ::CUDA_ERROR_CONTEXT_IS_DESTROYED) &&
              SameValue(ours::CUDA_ERROR_MAP_FAILED, ::CUDA_ERROR_MAP_FAILED));
// The fake's functions that libvgpu does not hook have cuda.h's shape too (the tests call them
// directly, so a wrong declaration would test another ABI).
static_assert(
    SameShape<decltype(&ours::cuCtxFromGreenCtx), PFN_cuCtxFromGreenCtx_v12040>::value &&
    SameShape<decltype(&ours::cuDeviceGetDevResource), PFN_cuDeviceGetDevResource_v12040>::value &&
    SameShape<decltype(&ours::cuDevSmResourceSplitByCount),
              PFN_cuDevSmResourceSplitByCount_v12040>::value &&
    SameShape<decltype(&ours::cuDevResourceGenerateDesc),
              PFN_cuDevResourceGenerateDesc_v12040>::value &&
    SameShape<decltype(&ours::cuGreenCtxGetDevResource),
              PFN_cuGreenCtxGetDevResource_v12040>::value &&
    SameShape<decltype(&ours::cuCtxGetDevResource), PFN_cuCtxGetDevResource_v12040>::value &&
    SameShape<decltype(&ours::cuGreenCtxStreamCreate), PFN_cuGreenCtxStreamCreate_v12050>::value &&
    SameShape<decltype(&ours::cuGreenCtxGetId), PFN_cuGreenCtxGetId_v12090>::value &&
    SameShape<decltype(&ours::cuIpcGetMemHandle), PFN_cuIpcGetMemHandle_v4010>::value &&
    SameShape<decltype(&ours::cuIpcOpenMemHandle), PFN_cuIpcOpenMemHandle_v4010>::value &&
    SameShape<decltype(&ours::cuIpcOpenMemHandle_v2), PFN_cuIpcOpenMemHandle_v11000>::value &&
    SameShape<decltype(&ours::cuIpcCloseMemHandle), PFN_cuIpcCloseMemHandle_v4010>::value &&
    SameShape<decltype(&ours::cuMemExportToShareableHandle),
              PFN_cuMemExportToShareableHandle_v10020>::value &&
    SameShape<decltype(&ours::cuMemImportFromShareableHandle),
              PFN_cuMemImportFromShareableHandle_v10020>::value &&
    SameShape<decltype(&ours::cuMemPoolExportToShareableHandle),
              PFN_cuMemPoolExportToShareableHandle_v11020>::value &&
    SameShape<decltype(&ours::cuMemPoolImportFromShareableHandle),
              PFN_cuMemPoolImportFromShareableHandle_v11020>::value);

}  // namespace
#endif

// Everywhere (no toolkit needed): each hook names a row of the committed variant table
// (src/vgpu/cuda_variants.def) — its ELF name, base name, version and flavour.
#include "vgpu/cuda_variants.def"
#include "vgpu/hooks.def"
namespace {
struct Row {
  const char* base;
  int version;
  int flavour;
  const char* elf;
};
#define FRACGPU_ROW(base, ver, fl, elf) {#base, ver, fl, #elf},
constexpr Row kRows[] = {FRACGPU_CUDA_VARIANTS(FRACGPU_ROW)};
constexpr bool StrEq(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}
constexpr bool InTable(const char* elf, const char* base, int ver, int pt) {
  for (const Row& r : kRows)
    if (StrEq(r.elf, elf)) return StrEq(r.base, base) && r.version == ver && r.flavour == pt;
  return false;
}
#define FRACGPU_IN_TABLE(elf, base, ver, pt) \
  static_assert(InTable(#elf, #base, ver, pt), #elf " is not the table's " #base " v" #ver);
FRACGPU_CUDA_HOOKS(FRACGPU_IN_TABLE)
static_assert(!InTable("cuCtxSynchronize", "cuCtxSynchronize", 13000, 0));
static_assert(!InTable("cuMemAlloc", "cuMemAlloc", 3020, 0));
// The legacy v1 rows are hooked (issue 13): cuMemAlloc, cuMemAllocPitch, cuMemFree,
// cuMemGetInfo, cuDeviceTotalMem, cuArrayCreate, cuArray3DCreate at 2000.
constexpr bool Hooked(const char* elf) {
  constexpr const char* kHooked[] = {
#define FRACGPU_NAME(elf, ...) #elf,
      FRACGPU_CUDA_HOOKS(FRACGPU_NAME)
#undef FRACGPU_NAME
  };
  for (const char* h : kHooked)
    if (StrEq(h, elf)) return true;
  return false;
}
static_assert(Hooked("cuMemAlloc") && Hooked("cuMemAllocPitch") && Hooked("cuMemFree") &&
              Hooked("cuMemGetInfo") && Hooked("cuDeviceTotalMem") && Hooked("cuArrayCreate") &&
              Hooked("cuArray3DCreate"));
// Every variant of the hooked graph-memory bases (the table's rows of cuGraphInstantiate,
// cuGraphInstantiateWithFlags, cuGraphInstantiateWithParams, cuGraphUpload, cuGraphLaunch,
// cuGraphExecDestroy, cuDeviceGraphMemTrim) has its hook.
constexpr bool EveryVariantHooked(const char* base) {
  for (const Row& r : kRows)
    if (StrEq(r.base, base) && !Hooked(r.elf)) return false;
  return true;
}
static_assert(EveryVariantHooked("cuGraphInstantiate") &&
              EveryVariantHooked("cuGraphInstantiateWithFlags") &&
              EveryVariantHooked("cuGraphInstantiateWithParams") &&
              EveryVariantHooked("cuGraphUpload") && EveryVariantHooked("cuGraphLaunch") &&
              EveryVariantHooked("cuGraphExecDestroy") &&
              EveryVariantHooked("cuDeviceGraphMemTrim"));
static_assert(!EveryVariantHooked("cuGraphAddNode"));  // node building is passed through
// Green contexts are charged like contexts: both of their lifetime calls are hooked.
static_assert(EveryVariantHooked("cuGreenCtxCreate") && EveryVariantHooked("cuGreenCtxDestroy"));
}  // namespace

TEST(VgpuPfnTypes, EveryHookHasItsVariantsShape) {
#ifdef FRACGPU_HAVE_CUDA_HEADERS
  EXPECT_GT(kHooksChecked, 50);  // the static_asserts above ran for each of them
#else
  GTEST_SKIP() << "no cuda.h/cudaTypedefs.h: the CUDA 13.0 wheels are not installed (bash "
                  "scripts/deps/cuda-wheels.sh, then configure the build again)";
#endif
}
