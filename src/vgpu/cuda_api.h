#pragma once
// The subset of the CUDA driver API (cuda.h, CUDA 12/13) that libvgpu.so and the fake driver
// touch, declared by us so nothing here needs NVIDIA headers. Types, enum values and ELF
// symbol names follow docs/design/wire-apis.md §7 (CUDA 13.0 header, 64-bit Linux).
// Every function is declared under its ELF name (cuMemAlloc_v2, not cuMemAlloc).
#include <cstddef>
#include <cstdint>

// C linkage, except in tests/vgpu/pfn_types_test.cc, which includes this header inside a
// namespace next to NVIDIA's cuda.h to compare every hook's type with its PFN typedef.
#ifndef FRACGPU_CUDA_API_C_LINKAGE
#define FRACGPU_CUDA_API_C_LINKAGE 1
#endif
#if FRACGPU_CUDA_API_C_LINKAGE
extern "C" {
#endif

/// Every hook and every fake function is noexcept: a C ABI must never unwind.
#define FRACGPU_CU_API noexcept

typedef int CUresult;  // enum cudaError_enum, docs/design/wire-apis.md §7.2
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
/// The 32-bit device pointer of the legacy v1 entry points (cuda.h, CUDA < 3.2 ABI).
typedef unsigned int CUdeviceptr_v1;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef uint64_t cuuint64_t;
typedef struct CUctx_st* CUcontext;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
typedef struct CUfunc_st* CUfunction;
typedef struct CUarray_st* CUarray;
typedef struct CUmipmappedArray_st* CUmipmappedArray;
typedef struct CUmemPoolHandle_st* CUmemoryPool;
typedef struct CUgraphExec_st* CUgraphExec;
typedef struct CUmod_st* CUmodule;
typedef struct CUlib_st* CUlibrary;
typedef int CUjit_option;     // enum CUjit_option_enum
typedef int CUlibraryOption;  // enum CUlibraryOption_enum (CUDA 12.0)
typedef struct CUuuid_st {
  char bytes[16];
} CUuuid;

enum : CUresult {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_DEINITIALIZED = 4,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_MAP_FAILED = 205,
  CUDA_ERROR_OPERATING_SYSTEM = 304,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_ILLEGAL_STATE = 401,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_NOT_PERMITTED = 800,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
  CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
  CUDA_ERROR_INVALID_RESOURCE_TYPE = 914,
  CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION = 915,
  CUDA_ERROR_UNKNOWN = 999,
};

/// The checkpoint API's types (cuda.h, CUDA 13.0, "CUDA Process States" and the
/// CUcheckpoint*Args structs; the API since CUDA 12.8). Reserved fields must be zero.
typedef int CUprocessState;  // enum CUprocessState_enum
enum : CUprocessState {
  CU_PROCESS_STATE_RUNNING = 0,
  CU_PROCESS_STATE_LOCKED = 1,
  CU_PROCESS_STATE_CHECKPOINTED = 2,
  CU_PROCESS_STATE_FAILED = 3,
};
typedef struct CUcheckpointLockArgs_st {
  unsigned int timeoutMs;  ///< 0: no timeout
  unsigned int reserved0;
  cuuint64_t reserved1[7];
} CUcheckpointLockArgs;
typedef struct CUcheckpointCheckpointArgs_st {
  cuuint64_t reserved[8];
} CUcheckpointCheckpointArgs;
typedef struct CUcheckpointGpuPair_st {
  CUuuid oldUuid;
  CUuuid newUuid;
} CUcheckpointGpuPair;
typedef struct CUcheckpointRestoreArgs_st {
  CUcheckpointGpuPair* gpuPairs;
  unsigned int gpuPairsCount;
  char reserved[52 - sizeof(CUcheckpointGpuPair*)];
  cuuint64_t reserved1;
} CUcheckpointRestoreArgs;
typedef struct CUcheckpointUnlockArgs_st {
  cuuint64_t reserved[8];
} CUcheckpointUnlockArgs;

/// cuGetProcAddress flags and symbol status (docs/design/wire-apis.md §7.8).
enum : cuuint64_t {
  CU_GET_PROC_ADDRESS_DEFAULT = 0,
  CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1,
  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 2,
};
typedef int CUdriverProcAddressQueryResult;
enum : CUdriverProcAddressQueryResult {
  CU_GET_PROC_ADDRESS_SUCCESS = 0,
  CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
  CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
};

/// CUdevice_attribute values (cuda.h, CUDA 13.0; tests/vgpu/pfn_types_test.cc checks each
/// against cuda.h when it is present). libvgpu reads MULTIPROCESSOR_COUNT; the others are for
/// the fake driver's attribute table.
typedef int CUdevice_attribute;
/// CUlimit (cuda.h): CU_LIMIT_STACK_SIZE 0 (bytes per thread), CU_LIMIT_PRINTF_FIFO_SIZE 1 and
/// CU_LIMIT_MALLOC_HEAP_SIZE 2 (bytes), 3..9 the others.
typedef int CUlimit;
enum : CUlimit {
  CU_LIMIT_STACK_SIZE = 0,
  CU_LIMIT_PRINTF_FIFO_SIZE = 1,
  CU_LIMIT_MALLOC_HEAP_SIZE = 2
};
enum : CUdevice_attribute {
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY = 9,
  CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
  CU_DEVICE_ATTRIBUTE_MAX_PITCH = 11,
  CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12,
  CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
  CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT = 14,
  CU_DEVICE_ATTRIBUTE_GPU_OVERLAP = 15,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_INTEGRATED = 18,
  CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19,
  CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS = 31,
  CU_DEVICE_ATTRIBUTE_ECC_ENABLED = 32,
  CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36,
  CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37,
  CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
  CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED = 78,
  CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED = 79,
  CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED = 80,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
  CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR = 82,
  CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 83,
  CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 89,
  CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED = 90,
  CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH = 95,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
  CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = 103,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR = 106,
  CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK = 111,
  CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115,
  CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH = 120,
  CU_DEVICE_ATTRIBUTE_MAX = 148,
};

/// CUarray_format values and their bytes per channel (docs/design/wire-apis.md §7.4).
typedef int CUarray_format;
enum : CUarray_format {
  CU_AD_FORMAT_UNSIGNED_INT8 = 0x01,
  CU_AD_FORMAT_UNSIGNED_INT16 = 0x02,
  CU_AD_FORMAT_UNSIGNED_INT32 = 0x03,
  CU_AD_FORMAT_SIGNED_INT8 = 0x08,
  CU_AD_FORMAT_SIGNED_INT16 = 0x09,
  CU_AD_FORMAT_SIGNED_INT32 = 0x0a,
  CU_AD_FORMAT_HALF = 0x10,
  CU_AD_FORMAT_FLOAT = 0x20,
};
typedef struct {
  size_t Width;
  size_t Height;
  CUarray_format Format;
  unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;
/// Legacy v1 descriptors (cuda.h under __CUDA_API_VERSION_INTERNAL): 32-bit extents.
typedef struct {
  unsigned int Width;
  unsigned int Height;
  CUarray_format Format;
  unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR_v1;
typedef struct {
  unsigned int Width;
  unsigned int Height;
  unsigned int Depth;
  CUarray_format Format;
  unsigned int NumChannels;
  unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR_v1;
typedef struct {
  size_t Width;
  size_t Height;
  size_t Depth;
  CUarray_format Format;
  unsigned int NumChannels;
  unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR;

/// CUmemLocationType: DEVICE = 1, HOST = 2, HOST_NUMA = 3, HOST_NUMA_CURRENT = 4.
typedef int CUmemLocationType;
enum : CUmemLocationType {
  CU_MEM_LOCATION_TYPE_INVALID = 0,
  CU_MEM_LOCATION_TYPE_DEVICE = 1,
  CU_MEM_LOCATION_TYPE_HOST = 2,
  CU_MEM_LOCATION_TYPE_HOST_NUMA = 3,
  CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT = 4,
};
typedef struct {
  CUmemLocationType type;
  int id;
} CUmemLocation;
typedef struct {
  int type;  // CUmemAllocationType, CU_MEM_ALLOCATION_TYPE_PINNED = 1
  int requestedHandleTypes;
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
} CUmemAllocationProp;
typedef struct {
  int allocType;
  int handleTypes;
  CUmemLocation location;
  void* win32SecurityAttributes;
  size_t maxSize;
  unsigned short usage;
  unsigned char reserved[54];
} CUmemPoolProps;

/// CUmemPool_attribute (cuda.h): the attributes the interposer reads.
typedef int CUmemPool_attribute;
enum : CUmemPool_attribute {
  CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,
  CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5,
  CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH = 6,
  CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7,
  CU_MEMPOOL_ATTR_USED_MEM_HIGH = 8,
};

// ---- Graphs and graph memory (cuda.h: CUDA 10.0 graphs, 11.4 memory nodes, 12.x params) ----
typedef struct CUgraph_st* CUgraph;
typedef struct CUgraphNode_st* CUgraphNode;
typedef struct {
  CUmemLocation location;
  int flags;  // CUmemAccess_flags
} CUmemAccessDesc;
typedef struct {
  unsigned char from_port, to_port, type;
  unsigned char reserved[5];
} CUgraphEdgeData;
typedef int CUgraphNodeType;  // enum CUgraphNodeType_enum
enum : CUgraphNodeType {
  CU_GRAPH_NODE_TYPE_KERNEL = 0,
  CU_GRAPH_NODE_TYPE_MEMCPY = 1,
  CU_GRAPH_NODE_TYPE_MEMSET = 2,
  CU_GRAPH_NODE_TYPE_HOST = 3,
  CU_GRAPH_NODE_TYPE_GRAPH = 4,  ///< child graph
  CU_GRAPH_NODE_TYPE_EMPTY = 5,
  CU_GRAPH_NODE_TYPE_WAIT_EVENT = 6,
  CU_GRAPH_NODE_TYPE_EVENT_RECORD = 7,
  CU_GRAPH_NODE_TYPE_MEM_ALLOC = 10,
  CU_GRAPH_NODE_TYPE_MEM_FREE = 11,
};
/// CUgraphMem_attribute (cuDeviceGetGraphMemAttribute): bytes of the device's graph pool.
typedef int CUgraphMem_attribute;
enum : CUgraphMem_attribute {
  CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT = 0,
  CU_GRAPH_MEM_ATTR_USED_MEM_HIGH = 1,
  CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT = 2,
  CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH = 3,
};
/// CUgraphInstantiate_flags.
enum : unsigned long long {
  CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH = 1,
  CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD = 2,  ///< cuGraphInstantiateWithParams only
  CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH = 4,
  CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY = 8,
};
typedef int CUgraphInstantiateResult;
enum : CUgraphInstantiateResult {
  CUDA_GRAPH_INSTANTIATE_SUCCESS = 0,
  CUDA_GRAPH_INSTANTIATE_ERROR = 1,
  CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED = 3,
};
typedef struct {
  cuuint64_t flags;
  CUstream hUploadStream;
  CUgraphNode hErrNode_out;
  CUgraphInstantiateResult result_out;
} CUDA_GRAPH_INSTANTIATE_PARAMS;
/// CUDA_MEM_ALLOC_NODE_PARAMS (_v1 and _v2 share this layout): bytesize in bytes; dptr is
/// written by the driver at node creation (a virtual address fixed for the node's lifetime).
typedef struct {
  CUmemPoolProps poolProps;
  const CUmemAccessDesc* accessDescs;
  size_t accessDescCount;
  size_t bytesize;
  CUdeviceptr dptr;
} CUDA_MEM_ALLOC_NODE_PARAMS;
typedef struct {
  CUdeviceptr dptr;
} CUDA_MEM_FREE_NODE_PARAMS;
/// CUgraphNodeParams (cuGraphAddNode, CUDA 12.2): the members the interposer and the fake read.
typedef struct {
  CUgraphNodeType type;
  int reserved0[3];
  union {
    long long reserved1[29];
    CUDA_MEM_ALLOC_NODE_PARAMS alloc;
    CUDA_MEM_FREE_NODE_PARAMS free;
  };
  long long reserved2;
} CUgraphNodeParams;
typedef int CUstreamCaptureStatus;  // NONE 0, ACTIVE 1, INVALIDATED 2
enum : CUstreamCaptureStatus {
  CU_STREAM_CAPTURE_STATUS_NONE = 0,
  CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
  CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2,
};
typedef int CUstreamCaptureMode;  // GLOBAL 0, THREAD_LOCAL 1, RELAXED 2

// ---- Green contexts (CUDA 12.4, cuda.h "Green Contexts") ----
typedef struct CUgreenCtx_st* CUgreenCtx;
/// Opaque descriptor made by cuDevResourceGenerateDesc.
typedef struct CUdevResourceDesc_st* CUdevResourceDesc;
/// CUgreenCtxCreate_flags: CU_GREEN_CTX_DEFAULT_STREAM is required by cuGreenCtxCreate.
enum : unsigned int { CU_GREEN_CTX_DEFAULT_STREAM = 0x1 };
/// CUdevSmResourceSplit_flags (cuDevSmResourceSplitByCount's useFlags).
enum : unsigned int {
  CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING = 0x1,
  CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE = 0x2,
};
typedef int CUdevResourceType;
enum : CUdevResourceType { CU_DEV_RESOURCE_TYPE_INVALID = 0, CU_DEV_RESOURCE_TYPE_SM = 1 };
/// SM counts of a resource (outputs of the driver only).
typedef struct {
  unsigned int smCount;
  unsigned int minSmPartitionSize;
  unsigned int smCoscheduledAlignment;
} CUdevSmResource;
/// CUdevResource_v1 (RESOURCE_ABI_VERSION 1): a tagged union of 144 bytes; the padding is the
/// driver's (the fake keeps its own bookkeeping there).
typedef struct {
  CUdevResourceType type;
  unsigned char _internal_padding[92];
  union {
    CUdevSmResource sm;
    unsigned char _oversize[48];  // RESOURCE_ABI_EXTERNAL_BYTES
  };
} CUdevResource;
/// CU_STREAM_NON_BLOCKING, which cuGreenCtxStreamCreate requires.
enum : unsigned int { CU_STREAM_NON_BLOCKING = 0x1 };

// ---- Memory shared between processes (cuda.h "IPC", VMM, stream-ordered pools) ----
/// CUipcMemHandle_v1: CU_IPC_HANDLE_SIZE (64) opaque bytes, passed by value.
typedef struct {
  char reserved[64];
} CUipcMemHandle;
/// CUipcEventHandle_v1: CU_IPC_HANDLE_SIZE (64) opaque bytes, passed by value.
typedef struct {
  char reserved[64];
} CUipcEventHandle;
/// CUipcMem_flags: the only flag of cuIpcOpenMemHandle.
enum : unsigned int { CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1 };
/// CUmemAllocationHandleType: NONE 0, POSIX_FILE_DESCRIPTOR 1 (an int), WIN32 2, WIN32_KMT 4,
/// FABRIC 8.
typedef int CUmemAllocationHandleType;
enum : CUmemAllocationHandleType {
  CU_MEM_HANDLE_TYPE_NONE = 0x0,
  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1,
};
/// CUmemPoolPtrExportData_v1: 64 opaque bytes.
typedef struct {
  unsigned char reserved[64];
} CUmemPoolPtrExportData;

typedef struct CUlaunchAttribute_st CUlaunchAttribute;
typedef struct {
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned int numAttrs;
} CUlaunchConfig;
/// One device's launch of cuLaunchCooperativeKernelMultiDevice (CUDA_LAUNCH_PARAMS_v1, cuda.h).
typedef struct CUDA_LAUNCH_PARAMS_st {
  CUfunction function;
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  void** kernelParams;
} CUDA_LAUNCH_PARAMS;

// ---- Functions, by ELF name (docs/design/wire-apis.md §7.3–7.8) ----
CUresult cuInit(unsigned int flags) FRACGPU_CU_API;
CUresult cuDriverGetVersion(int* version) FRACGPU_CU_API;
CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version,
                          cuuint64_t flags) FRACGPU_CU_API;
CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) FRACGPU_CU_API;
CUresult cuGetErrorName(CUresult error, const char** str) FRACGPU_CU_API;
CUresult cuGetExportTable(const void** table, const CUuuid* id) FRACGPU_CU_API;

CUresult cuDeviceGet(CUdevice* dev, int ordinal) FRACGPU_CU_API;
CUresult cuDeviceGetCount(int* count) FRACGPU_CU_API;
CUresult cuDeviceGetName(char* name, int len, CUdevice dev) FRACGPU_CU_API;
CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) FRACGPU_CU_API;
CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) FRACGPU_CU_API;
CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) FRACGPU_CU_API;
CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attr, CUdevice dev) FRACGPU_CU_API;
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev) FRACGPU_CU_API;
CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) FRACGPU_CU_API;

CUresult cuCtxCreate_v2(CUcontext* ctx, unsigned int flags, CUdevice dev) FRACGPU_CU_API;
CUresult cuCtxCreate_v3(CUcontext* ctx, void* params, int num_params, unsigned int flags,
                        CUdevice dev) FRACGPU_CU_API;
CUresult cuCtxCreate_v4(CUcontext* ctx, void* params, unsigned int flags,
                        CUdevice dev) FRACGPU_CU_API;
CUresult cuCtxDestroy_v2(CUcontext ctx) FRACGPU_CU_API;
CUresult cuCtxSetCurrent(CUcontext ctx) FRACGPU_CU_API;
CUresult cuCtxGetCurrent(CUcontext* ctx) FRACGPU_CU_API;
CUresult cuCtxGetDevice(CUdevice* dev) FRACGPU_CU_API;
CUresult cuCtxPushCurrent_v2(CUcontext ctx) FRACGPU_CU_API;
CUresult cuCtxPopCurrent_v2(CUcontext* ctx) FRACGPU_CU_API;
CUresult cuCtxSynchronize(void) FRACGPU_CU_API;
CUresult cuCtxSetLimit(CUlimit limit, size_t value) FRACGPU_CU_API;
CUresult cuCtxGetLimit(size_t* value, CUlimit limit) FRACGPU_CU_API;
/// CUDA 13.0: synchronises `ctx` (PFN_cuCtxSynchronize_v13000, cudaTypedefs.h).
CUresult cuCtxSynchronize_v2(CUcontext ctx) FRACGPU_CU_API;
/// Legacy v1 primary-context release/reset (PFN_..._v7000): same signature as _v2.
CUresult cuDevicePrimaryCtxRelease(CUdevice dev) FRACGPU_CU_API;
CUresult cuDevicePrimaryCtxReset(CUdevice dev) FRACGPU_CU_API;
CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) FRACGPU_CU_API;
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) FRACGPU_CU_API;
CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) FRACGPU_CU_API;

CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) FRACGPU_CU_API;
// Legacy v1 entry points (PFN_<name>_v2000, cudaTypedefs.h): 32-bit sizes and pointers. Still
// exported by the driver, so a program can dlsym them or ask cuGetProcAddress below 3020.
CUresult cuMemGetInfo(unsigned int* free_bytes, unsigned int* total_bytes) FRACGPU_CU_API;
CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) FRACGPU_CU_API;
CUresult cuMemAlloc(CUdeviceptr_v1* dptr, unsigned int bytesize) FRACGPU_CU_API;
CUresult cuMemAllocPitch(CUdeviceptr_v1* dptr, unsigned int* pitch, unsigned int width_bytes,
                         unsigned int height, unsigned int element_size_bytes) FRACGPU_CU_API;
CUresult cuMemFree(CUdeviceptr_v1 dptr) FRACGPU_CU_API;
CUresult cuArrayCreate(CUarray* array, const CUDA_ARRAY_DESCRIPTOR_v1* desc) FRACGPU_CU_API;
CUresult cuArray3DCreate(CUarray* array, const CUDA_ARRAY3D_DESCRIPTOR_v1* desc) FRACGPU_CU_API;
CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) FRACGPU_CU_API;
CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width_bytes, size_t height,
                            unsigned int element_size_bytes) FRACGPU_CU_API;
CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) FRACGPU_CU_API;
CUresult cuMemFree_v2(CUdeviceptr dptr) FRACGPU_CU_API;
CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream stream) FRACGPU_CU_API;
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream stream) FRACGPU_CU_API;
CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                 CUstream stream) FRACGPU_CU_API;
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream stream) FRACGPU_CU_API;
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) FRACGPU_CU_API;
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) FRACGPU_CU_API;
CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) FRACGPU_CU_API;
CUresult cuMemPoolDestroy(CUmemoryPool pool) FRACGPU_CU_API;
CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t min_bytes_to_keep) FRACGPU_CU_API;
CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                               void* value) FRACGPU_CU_API;
CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                               void* value) FRACGPU_CU_API;
CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                     const CUmemAllocationProp* prop, unsigned long long flags) FRACGPU_CU_API;
CUresult cuMemRelease(CUmemGenericAllocationHandle handle) FRACGPU_CU_API;
/// The handle mapped at `addr`, one more reference (PFN_cuMemRetainAllocationHandle_v11000).
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle,
                                     void* addr) FRACGPU_CU_API;
CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) FRACGPU_CU_API;
CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) FRACGPU_CU_API;
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) FRACGPU_CU_API;
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) FRACGPU_CU_API;
CUresult cuArrayCreate_v2(CUarray* array, const CUDA_ARRAY_DESCRIPTOR* desc) FRACGPU_CU_API;
CUresult cuArray3DCreate_v2(CUarray* array, const CUDA_ARRAY3D_DESCRIPTOR* desc) FRACGPU_CU_API;
CUresult cuArrayDestroy(CUarray array) FRACGPU_CU_API;
CUresult cuMipmappedArrayCreate(CUmipmappedArray* array, const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                unsigned int num_levels) FRACGPU_CU_API;
CUresult cuMipmappedArrayDestroy(CUmipmappedArray array) FRACGPU_CU_API;
// Modules and libraries (cuda.h; cuLibrary* since CUDA 12.0).
CUresult cuModuleLoad(CUmodule* module, const char* fname) FRACGPU_CU_API;
CUresult cuModuleLoadData(CUmodule* module, const void* image) FRACGPU_CU_API;
CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int num_options,
                            CUjit_option* options, void** option_values) FRACGPU_CU_API;
CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fat_cubin) FRACGPU_CU_API;
CUresult cuModuleUnload(CUmodule module) FRACGPU_CU_API;
CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option* jit_options,
                           void** jit_option_values, unsigned int num_jit_options,
                           CUlibraryOption* library_options, void** library_option_values,
                           unsigned int num_library_options) FRACGPU_CU_API;
CUresult cuLibraryLoadFromFile(CUlibrary* library, const char* file_name, CUjit_option* jit_options,
                               void** jit_option_values, unsigned int num_jit_options,
                               CUlibraryOption* library_options, void** library_option_values,
                               unsigned int num_library_options) FRACGPU_CU_API;
CUresult cuLibraryUnload(CUlibrary library) FRACGPU_CU_API;

CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) FRACGPU_CU_API;
CUresult cuMemFreeHost(void* p) FRACGPU_CU_API;
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) FRACGPU_CU_API;
CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) FRACGPU_CU_API;

CUresult cuStreamCreate(CUstream* stream, unsigned int flags) FRACGPU_CU_API;
CUresult cuStreamDestroy_v2(CUstream stream) FRACGPU_CU_API;
CUresult cuStreamSynchronize(CUstream stream) FRACGPU_CU_API;
CUresult cuStreamSynchronize_ptsz(CUstream stream) FRACGPU_CU_API;

CUresult cuLaunchKernel(CUfunction f, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,
                        unsigned int block_x, unsigned int block_y, unsigned int block_z,
                        unsigned int shared_mem_bytes, CUstream stream, void** kernel_params,
                        void** extra) FRACGPU_CU_API;
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int grid_x, unsigned int grid_y,
                             unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                             unsigned int block_z, unsigned int shared_mem_bytes, CUstream stream,
                             void** kernel_params, void** extra) FRACGPU_CU_API;
CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** kernel_params,
                          void** extra) FRACGPU_CU_API;
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** kernel_params,
                               void** extra) FRACGPU_CU_API;
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int grid_x, unsigned int grid_y,
                                   unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                                   unsigned int block_z, unsigned int shared_mem_bytes,
                                   CUstream stream, void** kernel_params) FRACGPU_CU_API;
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int grid_x, unsigned int grid_y,
                                        unsigned int grid_z, unsigned int block_x,
                                        unsigned int block_y, unsigned int block_z,
                                        unsigned int shared_mem_bytes, CUstream stream,
                                        void** kernel_params) FRACGPU_CU_API;
// Legacy launches (deprecated; PFN_cuLaunch_v2000, PFN_cuLaunchGrid_v2000,
// PFN_cuLaunchGridAsync_v2000, PFN_cuLaunchCooperativeKernelMultiDevice_v9000).
CUresult cuLaunch(CUfunction f) FRACGPU_CU_API;
CUresult cuLaunchGrid(CUfunction f, int grid_width, int grid_height) FRACGPU_CU_API;
CUresult cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height,
                           CUstream stream) FRACGPU_CU_API;
CUresult cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS* list, unsigned int num_devices,
                                              unsigned int flags) FRACGPU_CU_API;
CUresult cuGraphLaunch(CUgraphExec graph, CUstream stream) FRACGPU_CU_API;
CUresult cuGraphLaunch_ptsz(CUgraphExec graph, CUstream stream) FRACGPU_CU_API;
// Graphs: construction, instantiation (the legacy 5-argument cuGraphInstantiate of v10000 and
// its v11000 _v2 re-export, WithFlags 11.4, WithParams 12.0), upload, destruction, graph memory.
CUresult cuGraphCreate(CUgraph* graph, unsigned int flags) FRACGPU_CU_API;
CUresult cuGraphDestroy(CUgraph graph) FRACGPU_CU_API;
CUresult cuGraphAddEmptyNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* dependencies,
                             size_t num_dependencies) FRACGPU_CU_API;
CUresult cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* dependencies,
                                size_t num_dependencies,
                                CUDA_MEM_ALLOC_NODE_PARAMS* params) FRACGPU_CU_API;
CUresult cuGraphAddMemFreeNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* dependencies,
                               size_t num_dependencies, CUdeviceptr dptr) FRACGPU_CU_API;
CUresult cuGraphAddNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* dependencies,
                        size_t num_dependencies, CUgraphNodeParams* params) FRACGPU_CU_API;
CUresult cuGraphAddNode_v2(CUgraphNode* node, CUgraph graph, const CUgraphNode* dependencies,
                           const CUgraphEdgeData* edge_data, size_t num_dependencies,
                           CUgraphNodeParams* params) FRACGPU_CU_API;
CUresult cuGraphGetNodes(CUgraph graph, CUgraphNode* nodes, size_t* num_nodes) FRACGPU_CU_API;
CUresult cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType* type) FRACGPU_CU_API;
CUresult cuGraphMemAllocNodeGetParams(CUgraphNode node,
                                      CUDA_MEM_ALLOC_NODE_PARAMS* params) FRACGPU_CU_API;
CUresult cuGraphMemFreeNodeGetParams(CUgraphNode node, CUdeviceptr* dptr) FRACGPU_CU_API;
CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode node, CUgraph* graph) FRACGPU_CU_API;
CUresult cuGraphInstantiate(CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node,
                            char* log_buffer, size_t buffer_size) FRACGPU_CU_API;
CUresult cuGraphInstantiate_v2(CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node,
                               char* log_buffer, size_t buffer_size) FRACGPU_CU_API;
CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph,
                                     unsigned long long flags) FRACGPU_CU_API;
CUresult cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph graph,
                                      CUDA_GRAPH_INSTANTIATE_PARAMS* params) FRACGPU_CU_API;
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* exec, CUgraph graph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS* params) FRACGPU_CU_API;
CUresult cuGraphExecGetFlags(CUgraphExec exec, cuuint64_t* flags) FRACGPU_CU_API;
CUresult cuGraphUpload(CUgraphExec exec, CUstream stream) FRACGPU_CU_API;
CUresult cuGraphUpload_ptsz(CUgraphExec exec, CUstream stream) FRACGPU_CU_API;
CUresult cuGraphExecDestroy(CUgraphExec exec) FRACGPU_CU_API;
CUresult cuDeviceGraphMemTrim(CUdevice device) FRACGPU_CU_API;
CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
                                      void* value) FRACGPU_CU_API;
CUresult cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
                                      void* value) FRACGPU_CU_API;
// Stream capture (v10000 cuStreamBeginCapture took no mode; _v2 of 10010 does).
CUresult cuStreamBeginCapture(CUstream stream) FRACGPU_CU_API;
CUresult cuStreamBeginCapture_ptsz(CUstream stream) FRACGPU_CU_API;
CUresult cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode mode) FRACGPU_CU_API;
CUresult cuStreamBeginCapture_v2_ptsz(CUstream stream, CUstreamCaptureMode mode) FRACGPU_CU_API;
CUresult cuStreamEndCapture(CUstream stream, CUgraph* graph) FRACGPU_CU_API;
CUresult cuStreamEndCapture_ptsz(CUstream stream, CUgraph* graph) FRACGPU_CU_API;
CUresult cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus* status) FRACGPU_CU_API;
CUresult cuStreamIsCapturing_ptsz(CUstream stream, CUstreamCaptureStatus* status) FRACGPU_CU_API;

// Green contexts (CUDA 12.4+; cuGreenCtxStreamCreate 12.5, cuGreenCtxGetId 12.9).
CUresult cuGreenCtxCreate(CUgreenCtx* ctx, CUdevResourceDesc desc, CUdevice dev,
                          unsigned int flags) FRACGPU_CU_API;
CUresult cuGreenCtxDestroy(CUgreenCtx ctx) FRACGPU_CU_API;
CUresult cuCtxFromGreenCtx(CUcontext* ctx, CUgreenCtx green) FRACGPU_CU_API;
CUresult cuDeviceGetDevResource(CUdevice dev, CUdevResource* resource,
                                CUdevResourceType type) FRACGPU_CU_API;
CUresult cuCtxGetDevResource(CUcontext ctx, CUdevResource* resource,
                             CUdevResourceType type) FRACGPU_CU_API;
CUresult cuGreenCtxGetDevResource(CUgreenCtx ctx, CUdevResource* resource,
                                  CUdevResourceType type) FRACGPU_CU_API;
CUresult cuDevSmResourceSplitByCount(CUdevResource* result, unsigned int* groups,
                                     const CUdevResource* input, CUdevResource* remaining,
                                     unsigned int use_flags, unsigned int min_count) FRACGPU_CU_API;
CUresult cuDevResourceGenerateDesc(CUdevResourceDesc* desc, CUdevResource* resources,
                                   unsigned int count) FRACGPU_CU_API;
CUresult cuGreenCtxStreamCreate(CUstream* stream, CUgreenCtx green, unsigned int flags,
                                int priority) FRACGPU_CU_API;
CUresult cuGreenCtxGetId(CUgreenCtx green, unsigned long long* id) FRACGPU_CU_API;
// IPC memory handles (v4010; cuIpcOpenMemHandle_v2 of v11000 has the same signature).
CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr dptr) FRACGPU_CU_API;
CUresult cuIpcOpenMemHandle(CUdeviceptr* dptr, CUipcMemHandle handle,
                            unsigned int flags) FRACGPU_CU_API;
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* dptr, CUipcMemHandle handle,
                               unsigned int flags) FRACGPU_CU_API;
CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) FRACGPU_CU_API;
// IPC event handles (v4010).
CUresult cuIpcGetEventHandle(CUipcEventHandle* handle, CUevent event) FRACGPU_CU_API;
CUresult cuIpcOpenEventHandle(CUevent* event, CUipcEventHandle handle) FRACGPU_CU_API;
// VMM shareable handles (v10020).
CUresult cuMemExportToShareableHandle(void* shareable, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType type,
                                      unsigned long long flags) FRACGPU_CU_API;
CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* os_handle,
                                        CUmemAllocationHandleType type) FRACGPU_CU_API;
// Sparse array mapping (v11010; CUarrayMapInfo_v1 of cuda.h). resourceType: CUresourcetype
// (MIPMAPPED_ARRAY 1, ARRAY 0); subresourceType 0 sparse level, 1 mip tail; memOperationType
// MAP 1, UNMAP 2; memHandleType GENERIC 0.
typedef struct CUarrayMapInfo_st {
  int resourceType;
  union {
    CUmipmappedArray mipmap;
    CUarray array;
  } resource;
  int subresourceType;
  union {
    struct {
      unsigned int level, layer, offsetX, offsetY, offsetZ, extentWidth, extentHeight, extentDepth;
    } sparseLevel;
    struct {
      unsigned int layer;
      unsigned long long offset, size;
    } miptail;
  } subresource;
  int memOperationType;
  int memHandleType;
  union {
    CUmemGenericAllocationHandle memHandle;
  } memHandle;
  unsigned long long offset;
  unsigned int deviceBitMask;
  unsigned int flags;
  unsigned int reserved[2];
} CUarrayMapInfo;
enum : int { CU_MEM_OPERATION_TYPE_MAP = 1, CU_MEM_OPERATION_TYPE_UNMAP = 2 };
CUresult cuMemMapArrayAsync(CUarrayMapInfo* map_info_list, unsigned int count,
                            CUstream stream) FRACGPU_CU_API;
CUresult cuMemMapArrayAsync_ptsz(CUarrayMapInfo* map_info_list, unsigned int count,
                                 CUstream stream) FRACGPU_CU_API;
// Multicast objects (v12010; CUmulticastObjectProp_v1 of cuda.h).
typedef struct CUmulticastObjectProp_st {
  unsigned int numDevices;
  size_t size;  ///< bytes bindable per device
  unsigned long long handleTypes;
  unsigned long long flags;
} CUmulticastObjectProp;
typedef int CUmulticastGranularity_flags;
CUresult cuMulticastCreate(CUmemGenericAllocationHandle* mc_handle,
                           const CUmulticastObjectProp* prop) FRACGPU_CU_API;
CUresult cuMulticastAddDevice(CUmemGenericAllocationHandle mc_handle, CUdevice dev) FRACGPU_CU_API;
CUresult cuMulticastGetGranularity(size_t* granularity, const CUmulticastObjectProp* prop,
                                   CUmulticastGranularity_flags option) FRACGPU_CU_API;
CUresult cuMulticastBindMem(CUmemGenericAllocationHandle mc_handle, size_t mc_offset,
                            CUmemGenericAllocationHandle mem_handle, size_t mem_offset, size_t size,
                            unsigned long long flags) FRACGPU_CU_API;
CUresult cuMulticastBindAddr(CUmemGenericAllocationHandle mc_handle, size_t mc_offset,
                             CUdeviceptr memptr, size_t size,
                             unsigned long long flags) FRACGPU_CU_API;
CUresult cuMulticastUnbind(CUmemGenericAllocationHandle mc_handle, CUdevice dev, size_t mc_offset,
                           size_t size) FRACGPU_CU_API;
// External memory (v10000; CUDA_EXTERNAL_MEMORY_*_v1 of cuda.h).
typedef struct CUextMemory_st* CUexternalMemory;
typedef struct CUDA_EXTERNAL_MEMORY_HANDLE_DESC_st {
  int type;  ///< CUexternalMemoryHandleType: OPAQUE_FD 1, ..., DMABUF_FD 9
  union {
    int fd;
    struct {
      void* handle;
      const void* name;
    } win32;
    const void* nvSciBufObject;
  } handle;
  unsigned long long size;  ///< bytes
  unsigned int flags;
  unsigned int reserved[16];
} CUDA_EXTERNAL_MEMORY_HANDLE_DESC;
typedef struct CUDA_EXTERNAL_MEMORY_BUFFER_DESC_st {
  unsigned long long offset, size;
  unsigned int flags;
  unsigned int reserved[16];
} CUDA_EXTERNAL_MEMORY_BUFFER_DESC;
typedef struct CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC_st {
  unsigned long long offset;
  CUDA_ARRAY3D_DESCRIPTOR arrayDesc;
  unsigned int numLevels;
  unsigned int reserved[16];
} CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC;
CUresult cuImportExternalMemory(CUexternalMemory* ext_mem,
                                const CUDA_EXTERNAL_MEMORY_HANDLE_DESC* desc) FRACGPU_CU_API;
CUresult cuExternalMemoryGetMappedBuffer(CUdeviceptr* dptr, CUexternalMemory ext_mem,
                                         const CUDA_EXTERNAL_MEMORY_BUFFER_DESC* desc)
    FRACGPU_CU_API;
CUresult cuExternalMemoryGetMappedMipmappedArray(
    CUmipmappedArray* mipmap, CUexternalMemory ext_mem,
    const CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC* desc) FRACGPU_CU_API;
CUresult cuDestroyExternalMemory(CUexternalMemory ext_mem) FRACGPU_CU_API;
// Pools shared between processes (v11020).
CUresult cuMemPoolExportToShareableHandle(void* handle_out, CUmemoryPool pool,
                                          CUmemAllocationHandleType type,
                                          unsigned long long flags) FRACGPU_CU_API;
CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool* pool_out, void* handle,
                                            CUmemAllocationHandleType type,
                                            unsigned long long flags) FRACGPU_CU_API;
CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData* data, CUdeviceptr ptr) FRACGPU_CU_API;
CUresult cuMemPoolImportPointer(CUdeviceptr* ptr, CUmemoryPool pool,
                                CUmemPoolPtrExportData* data) FRACGPU_CU_API;

#if FRACGPU_CUDA_API_C_LINKAGE
}  // extern "C"
#endif

/// Bytes per channel of a CUarray_format, 0 for formats the interposer does not size
/// (block-compressed and video formats; docs/design/wire-apis.md §7.4).
constexpr size_t CuArrayFormatBytes(CUarray_format format) {
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
      return 4;
    default:
      return 0;
  }
}
