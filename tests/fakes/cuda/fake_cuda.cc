// Fake libcuda.so.1: the CUDA driver API surface libvgpu.so touches, with host memory behind
// device pointers (see fake_gpu.h for the configuration). It follows the real driver's
// observable behaviour: ELF names and versioned variants, cuGetProcAddress(_v2) flag and
// version semantics (docs/design/wire-apis.md §7.8), CUresult codes, contexts (primary and
// created), streams, memory pools that reserve in 2 MiB chunks and give memory back at
// synchronisation down to their release threshold, VMM handles with device and host locations
// (physical memory freed when released and unmapped), arrays, managed memory, graphs with memory
// nodes and their per-device graph memory pool ("Graphs" below), green contexts ("Green
// contexts"), IPC memory handles across processes ("IPC") and the checkpoint API
// ("Checkpoint").
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "fake_clock.h"
#include "fake_gpu.h"
#include "vgpu/cuda_api.h"

namespace {

using fracgpu::fakes::FakeDevice;
using fracgpu::fakes::FakeProcState;
using fracgpu::fakes::kMiB;

constexpr uint64_t kGranularity = 2 * kMiB;  // pool and VMM granularity

uint64_t RoundUp(uint64_t v, uint64_t g) { return (v + g - 1) / g * g; }

struct GreenCtx;
struct Ctx {
  int phys;  // physical (NVML) index
  bool primary;
  GreenCtx* green = nullptr;  // the green context this CUcontext is (cuCtxFromGreenCtx), if any
  // cuCtxSetLimit: stack size, printf FIFO, malloc heap (CUlimit 0..2, the real driver's
  // defaults), and the device memory taken above what those defaults take (in ctx_bytes).
  uint64_t limits[3] = {1024, 1ull << 20, 8ull << 20};
  uint64_t limit_bytes = 0;
};

// A green context (cuGreenCtxCreate): its SMs, its own device memory (FAKE_CUDA_GREEN_CTX_BYTES)
// and the CUcontext cuCtxFromGreenCtx returns, a primary-context handle of its own.
struct GreenCtx {
  int phys;
  unsigned sm_count;
  unsigned long long id;
  Ctx ctx;
};
// What cuDevResourceGenerateDesc made (CUdevResourceDesc).
struct ResourceDesc {
  int phys;
  unsigned sm_count;
};

// An IPC memory handle (cuIpcGetMemHandle) as the fake lays it out in CUipcMemHandle's 64 bytes.
struct FakeIpcHandle {
  uint32_t magic;
  uint32_t pid;     // exporting process
  uint64_t serial;  // the exported allocation (Alloc::serial)
  uint64_t size;
  int32_t phys;
  uint32_t zero;
};
constexpr uint32_t kIpcMagic = 0x46495043;  // "FIPC"
static_assert(sizeof(FakeIpcHandle) <= sizeof(CUipcMemHandle));
// A mapping opened with cuIpcOpenMemHandle in this process.
struct IpcOpen {
  uint32_t pid;
  uint64_t serial;
  int refs;
};

struct Pool {
  int phys;
  uint64_t reserved = 0, used = 0, threshold = 0, reserved_high = 0, used_high = 0;
  std::map<CUdeviceptr, uint64_t> live;
  int handle_types = 0;  // CUmemPoolProps::handleTypes: exportable as these
};

// A pool imported with cuMemPoolImportFromShareableHandle (never in State::pools, so no
// allocation can come from it: cuda.h, "imported memory pools do not support creating new
// allocations"). Imported in its exporting process, it reports that pool's figures, the
// physical memory both name; imported in another, 0 (the fake cannot see other processes'
// pools).
struct ImportedPool {
  Pool* origin;  // nullptr: another process's, or destroyed since
};
// What cuMemPoolExportToShareableHandle writes in the file descriptor it returns (a memfd).
struct PoolExport {
  uint32_t magic;
  uint32_t pid;
  Pool* pool;
};
constexpr uint32_t kPoolExportMagic = 0x46504f4c;  // "FPOL"

struct VmmHandle {
  int phys;  // -1: host location
  uint64_t size;
  int mappings = 0;
  bool released = false;
  int handle_types = 0;  // CUmemAllocationProp::requestedHandleTypes (exportable as)
  // Imported (cuMemImportFromShareableHandle): the handle of this process it names (0: none),
  // or foreign (another process's memory: nothing to give back here).
  CUmemGenericAllocationHandle origin = 0;
  bool foreign = false;
  int imports = 0;         // live handles imported from this one: its memory stays while they do
  int retains = 0;         // cuMemRetainAllocationHandle references not yet released
  int binds = 0;           // multicast bindings of this memory (cuMulticastBindMem/Addr)
  bool multicast = false;  // a multicast object (cuMulticastCreate): no memory of its own
};
// What cuMemExportToShareableHandle writes in the file descriptor it returns (a memfd).
struct VmmExport {
  uint32_t magic;
  uint32_t pid;
  CUmemGenericAllocationHandle handle;
  uint64_t size;
  int32_t phys;
};
constexpr uint32_t kVmmExportMagic = 0x46564d4d;  // "FVMM"

struct Alloc {
  int phys;
  uint64_t size;
  void* base;
  uint64_t serial = 0;    // unique per allocation of this process (IPC handles name it)
  bool exported = false;  // cuIpcGetMemHandle published it (FAKE_GPU_STATE_DIR/ipc-<pid>-<serial>)
};

// ---- Graphs (the fake's model of CUDA graph memory; see "Graphs" below) ----
struct GraphNodeRec;
struct GraphRec {
  std::vector<GraphNodeRec*> nodes;
  int execs = 0;           // live executable graphs made from it
  bool mem_nodes = false;  // has allocation or free nodes: one executable graph at a time
};
struct GraphNodeRec {
  GraphRec* graph = nullptr;
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  CUDA_MEM_ALLOC_NODE_PARAMS alloc{};   // MEM_ALLOC: as given, dptr assigned at creation
  std::vector<CUmemAccessDesc> access;  // MEM_ALLOC: node-owned copy of accessDescs
  CUdeviceptr free_dptr = 0;            // MEM_FREE
};
// An allocation node's address, for as long as the fake lives (a free node may name it after
// its graph is gone).
struct GraphAllocRec {
  int phys;
  uint64_t bytes;   // bytesize rounded up to kGranularity
  GraphRec* graph;  // owning graph; nullptr after cuGraphDestroy
  bool freed_in_graph = false, freed_elsewhere = false;
};
struct GraphExecRec {
  uint64_t flags = 0;
  GraphRec* graph = nullptr;                                 // nullptr after cuGraphDestroy
  uint64_t footprint[fracgpu::fakes::kFakeMaxDevices] = {};  // bytes per device, see GraphMap
  bool mapped[fracgpu::fakes::kFakeMaxDevices] = {};         // its footprint is in the reserve
  std::vector<CUdeviceptr> keeps;  // allocations a launch leaves live (no free node here)
  std::vector<CUdeviceptr> frees;  // allocations of other graphs its free nodes free
};
// A graph allocation alive after the launch that made it (until a free node, cuMemFreeAsync,
// cuMemFree_v2 or an auto-free relaunch).
struct GraphLive {
  int phys;
  uint64_t bytes;
  GraphExecRec* owner;  // nullptr once its executable graph is destroyed
};
struct GraphPoolRec {
  uint64_t reserved = 0, reserved_high = 0, used_high = 0;
};

struct State {
  std::mutex mu;
  bool initialised = false;
  std::vector<FakeDevice> devices;
  std::vector<int> visible;  // CUDA ordinal -> physical index
  uint64_t used[fracgpu::fakes::kFakeMaxDevices] = {};
  std::map<CUdeviceptr, Alloc> allocs;  // cuMemAlloc/Pitch/Managed
  std::map<CUdeviceptr, std::pair<Pool*, uint64_t>> pool_allocs;
  std::vector<Pool*> pools;
  Pool* default_pool[fracgpu::fakes::kFakeMaxDevices] = {};
  std::map<CUmemGenericAllocationHandle, VmmHandle> vmm;
  CUmemGenericAllocationHandle next_handle = 1;
  std::map<CUdeviceptr, uint64_t> reservations;                                   // VA ranges
  std::map<CUdeviceptr, std::pair<CUmemGenericAllocationHandle, uint64_t>> maps;  // VA -> handle
  CUdeviceptr next_va = 0x7f0000000000ull;
  CUdeviceptr next_va32 = 0x10000000ull;  // legacy v1 allocations: 32-bit addresses
  std::map<void*, std::pair<int, uint64_t>> arrays;
  // External memory (cuImportExternalMemory): object -> its record; mapped buffers and
  // mipmapped arrays -> the object they map (released with cuMemFree / cuMipmappedArrayDestroy).
  struct ExtMem {
    int phys;
    uint64_t size;
    int mapped = 0;
    bool destroyed = false;
  };
  std::map<void*, ExtMem> ext;
  // Sparse array tiles (cuMemMapArrayAsync): (array, subresource type, level or layer, x, y, z
  // or mip-tail offset) -> the mapped memory (one mapping of it, like cuMemMap).
  std::map<std::tuple<void*, int, unsigned, unsigned, unsigned long long, unsigned, unsigned>,
           CUmemGenericAllocationHandle>
      tiles;
  // Multicast bindings: (multicast object, physical device, mcOffset) -> the bound memory.
  std::map<std::tuple<uint64_t, int, uint64_t>, CUmemGenericAllocationHandle> mc_binds;
  std::map<uint64_t, void*> ext_maps;
  Ctx* primary[fracgpu::fakes::kFakeMaxDevices] = {};
  int primary_refs[fracgpu::fakes::kFakeMaxDevices] = {};
  uint64_t ctx_bytes = 0;
  uint64_t green_ctx_bytes = 0;  // FAKE_CUDA_GREEN_CTX_BYTES, default ctx_bytes
  uint64_t module_bytes = 0;
  std::set<GreenCtx*> green;
  std::set<ResourceDesc*> descs;
  unsigned long long next_green_id = 1;
  uint64_t next_alloc_serial = 1;
  std::map<CUdeviceptr, IpcOpen> ipc_opens;
  std::set<ImportedPool*> imported_pools;  // cuIpcOpenMemHandle mappings (no device memory)
  struct Module {
    int phys;  // -1: loaded with no current context (a library: nothing resident yet)
    uint64_t bytes;
    bool library;
  };
  std::map<void*, Module> modules;  // CUmodule / CUlibrary handles
  int driver_version = 12080;
  FakeProcState* published = nullptr;
  std::set<GraphRec*> graphs;
  std::set<GraphNodeRec*> graph_nodes;
  std::set<GraphExecRec*> graph_execs;
  std::map<CUdeviceptr, GraphAllocRec> graph_allocs;
  std::map<CUdeviceptr, GraphLive> graph_live;
  GraphPoolRec graph_pool[fracgpu::fakes::kFakeMaxDevices];
  CUdeviceptr next_graph_va = 0x7e0000000000ull;
  // Checkpoint (cuCheckpointProcess*, "Checkpoint" below): this process's state, the driver's
  // API gate (a test holds it with fakeCudaCheckpointHoldGate), the calls waiting at it, what
  // the checkpoint released per device and the device bytes it copied aside.
  CUprocessState ckpt_state = CU_PROCESS_STATE_RUNNING;
  std::condition_variable ckpt_cv;
  bool ckpt_gate_held = false;
  int ckpt_waiters = 0;
  bool ckpt_restore_broken = false;  // FAKE_CUDA_CHECKPOINT_STICKY_OOM after a refused restore
  bool device_wide_oom = false;      // FAKE_CUDA_DEVICE_WIDE_OOM=1 (fake_gpu.h)
  uint64_t ckpt_bytes[fracgpu::fakes::kFakeMaxDevices] = {};
  uint32_t ckpt_contexts[fracgpu::fakes::kFakeMaxDevices] = {};
  std::vector<std::pair<void*, std::vector<unsigned char>>> ckpt_copies;
};

State& S() {
  static State* s = new State();  // never destroyed: hooks may run during exit
  return *s;
}

thread_local std::vector<Ctx*> tls_ctx_stack;

Ctx* Current() { return tls_ctx_stack.empty() ? nullptr : tls_ctx_stack.back(); }

void Publish(State& s, int phys) {
  if (s.published) s.published->used[phys].store(s.used[phys], std::memory_order_relaxed);
}

// Takes `bytes` of physical device memory; false when the device is full.
uint64_t DeviceUsedAllProcesses(State& s, int phys);
bool Take(State& s, int phys, uint64_t bytes) {
  const uint64_t used = s.device_wide_oom ? DeviceUsedAllProcesses(s, phys) : s.used[phys];
  if (used + bytes > s.devices[phys].total_bytes) return false;
  s.used[phys] += bytes;
  Publish(s, phys);
  return true;
}
void Give(State& s, int phys, uint64_t bytes) {
  s.used[phys] -= std::min(bytes, s.used[phys]);
  Publish(s, phys);
}

// Live contexts of this process per device, published for the fake NVML's process list.
void PublishContexts(State& s, int phys, int delta) {
  if (s.published) s.published->contexts[phys].fetch_add(static_cast<uint32_t>(delta));
}

// FAKE_CUDA_CTX_BARRIER (fake_gpu.h): phase 1 before the context exists (every process has
// arrived), phase 2 after (every process has one). A process's mark stays in its file after
// it exits, so a fast process leaving early never strands a slower one. Gives up after 20 s.
void CtxBarrier(State& s, uint32_t phase) {
  const char* v = std::getenv("FAKE_CUDA_CTX_BARRIER");
  int n = v ? std::atoi(v) : 0;
  const char* dir = std::getenv("FAKE_GPU_STATE_DIR");
  if (n <= 1 || !s.published || !dir) return;
  s.published->creating.store(phase);
  for (int waited = 0; waited < 20000; ++waited) {
    int have = 0;
    if (auto* d = ::opendir(dir)) {
      while (auto* e = ::readdir(d)) {
        if (std::strncmp(e->d_name, "proc-", 5) != 0) continue;
        int fd = ::open((std::string(dir) + "/" + e->d_name).c_str(), O_RDONLY);
        if (fd < 0) continue;
        FakeProcState st;
        if (::pread(fd, &st, sizeof(st), 0) == static_cast<ssize_t>(sizeof(st)) &&
            st.creating.load() >= phase) {
          ++have;
        }
        ::close(fd);
      }
      ::closedir(d);
    }
    if (have >= n) return;
    ::usleep(1000);
  }
}

// Physical used bytes of a device across every process publishing in FAKE_GPU_STATE_DIR.
uint64_t DeviceUsedAllProcesses(State& s, int phys) {
  const char* dir = std::getenv("FAKE_GPU_STATE_DIR");
  if (!dir) return s.used[phys];
  uint64_t total = s.used[phys];
  if (auto* d = ::opendir(dir)) {
    while (auto* e = ::readdir(d)) {
      if (std::strncmp(e->d_name, "proc-", 5) != 0) continue;
      int pid = std::atoi(e->d_name + 5);
      if (pid == getpid() || kill(pid, 0) != 0) continue;
      std::string path = std::string(dir) + "/" + e->d_name;
      int fd = ::open(path.c_str(), O_RDONLY);
      if (fd < 0) continue;
      FakeProcState st;
      if (::pread(fd, &st, sizeof(st), 0) == static_cast<ssize_t>(sizeof(st))) {
        total += st.used[phys].load(std::memory_order_relaxed);
      }
      ::close(fd);
    }
    ::closedir(d);
  }
  return total;
}

}  // namespace
extern "C" {
namespace {
void StartCheckpointServer();  // "Checkpoint" below (C linkage: defined in the extern "C" part)
}  // namespace
}  // extern "C"
namespace {

void Initialise(State& s) {
  s.devices = fracgpu::fakes::LoadFakeDevices();
  if (const char* v = std::getenv("FAKE_CUDA_CTX_BYTES"))
    s.ctx_bytes = std::strtoull(v, nullptr, 10);
  s.green_ctx_bytes = s.ctx_bytes;
  if (const char* v = std::getenv("FAKE_CUDA_GREEN_CTX_BYTES"))
    s.green_ctx_bytes = std::strtoull(v, nullptr, 10);
  if (const char* v = std::getenv("FAKE_CUDA_MODULE_BYTES"))
    s.module_bytes = std::strtoull(v, nullptr, 10);
  if (const char* v = std::getenv("FAKE_CUDA_DRIVER_VERSION")) s.driver_version = std::atoi(v);
  if (const char* v = std::getenv("FAKE_CUDA_DEVICE_WIDE_OOM")) s.device_wide_oom = v[0] == '1';
  // CUDA_VISIBLE_DEVICES: indices or UUID prefixes; the list stops at the first invalid
  // entry, as with the real driver.
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!cvd) {
    for (size_t i = 0; i < s.devices.size(); ++i) s.visible.push_back(static_cast<int>(i));
  } else {
    std::string spec = cvd;
    size_t pos = 0;
    while (pos < spec.size()) {
      size_t end = spec.find(',', pos);
      if (end == std::string::npos) end = spec.size();
      std::string tok = spec.substr(pos, end - pos);
      pos = end + 1;
      int found = -1;
      if (!tok.empty() && tok.find_first_not_of("0123456789") == std::string::npos) {
        int idx = std::atoi(tok.c_str());
        if (idx < static_cast<int>(s.devices.size())) found = idx;
      } else if (tok.rfind("GPU-", 0) == 0) {
        for (size_t i = 0; i < s.devices.size(); ++i)
          if (s.devices[i].uuid.rfind(tok, 0) == 0) found = static_cast<int>(i);
      }
      if (found < 0 || std::count(s.visible.begin(), s.visible.end(), found)) break;
      s.visible.push_back(found);
    }
  }
  if (const char* dir = std::getenv("FAKE_GPU_STATE_DIR")) {
    std::string path = std::string(dir) + "/proc-" + std::to_string(getpid());
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0 && ::ftruncate(fd, sizeof(FakeProcState)) == 0) {
      void* p = ::mmap(nullptr, sizeof(FakeProcState), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p != MAP_FAILED) {
        s.published = static_cast<FakeProcState*>(p);
        s.published->pid.store(static_cast<uint32_t>(getpid()));
      }
    }
    if (fd >= 0) ::close(fd);
    // Another process's checkpoint calls of this one are carried out here ("Checkpoint").
    if (s.published) StartCheckpointServer();
  }
  s.initialised = true;
}

// Every call but the checkpoint API's waits while the process is not RUNNING (cuda.h: a
// LOCKED process's "further CUDA API calls will block").
void CheckpointGate(State& s, std::unique_lock<std::mutex>& lk) {
  if (s.ckpt_state == CU_PROCESS_STATE_RUNNING) return;
  ++s.ckpt_waiters;
  s.ckpt_cv.notify_all();  // fakeCudaCheckpointAwaitWaiters' callers
  s.ckpt_cv.wait(lk, [&] { return s.ckpt_state == CU_PROCESS_STATE_RUNNING; });
  --s.ckpt_waiters;
}
// Set while the process is not RUNNING: the launch path, which takes no lock, reads it.
std::atomic<bool> g_ckpt_blocking{false};
// The gate for the calls that take no lock (launches, copies): one relaxed load while RUNNING.
void GateIfLocked() {
  if (!g_ckpt_blocking.load(std::memory_order_relaxed)) return;
  State& s = S();
  std::unique_lock<std::mutex> lk(s.mu);
  CheckpointGate(s, lk);
}

#define FAKE_LOCK()                                      \
  State& s = S();                                        \
  std::unique_lock<std::mutex> lk(s.mu);                 \
  if (!s.initialised) return CUDA_ERROR_NOT_INITIALIZED; \
  CheckpointGate(s, lk)

// Physical index of a CUDA ordinal, -1 if invalid.
int PhysOf(State& s, CUdevice dev) {
  if (dev < 0 || dev >= static_cast<int>(s.visible.size())) return -1;
  return s.visible[dev];
}
int OrdinalOf(State& s, int phys) {
  for (size_t i = 0; i < s.visible.size(); ++i)
    if (s.visible[i] == phys) return static_cast<int>(i);
  return -1;
}

CUdeviceptr HostAlloc(uint64_t size) {
  void* p = std::aligned_alloc(256, RoundUp(std::max<uint64_t>(size, 1), 256));
  return reinterpret_cast<CUdeviceptr>(p);
}

Pool* DefaultPool(State& s, int phys) {
  if (!s.default_pool[phys]) {
    s.default_pool[phys] = new Pool{};
    s.default_pool[phys]->phys = phys;
    s.pools.push_back(s.default_pool[phys]);
  }
  return s.default_pool[phys];
}

// Gives back pool memory above max(threshold, used), as the real pools do at synchronisation.
// A threshold at or above what is reserved keeps everything: UINT64_MAX is the documented
// "never release" setting (CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, cuda.h), and rounding it up
// would overflow to a small floor.
void ReleaseToThreshold(State& s, Pool* p, uint64_t keep) {
  if (keep >= p->reserved) return;
  uint64_t floor = RoundUp(std::max(p->used, keep), kGranularity);
  if (p->reserved > floor) {
    Give(s, p->phys, p->reserved - floor);
    p->reserved = floor;
  }
}

CUresult PoolAlloc(CUdeviceptr* dptr, size_t size, Pool* pool) {
  State& s = S();
  if (!dptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  if (pool->used + size > pool->reserved) {
    uint64_t grow = RoundUp(pool->used + size, kGranularity) - pool->reserved;
    if (!Take(s, pool->phys, grow)) return CUDA_ERROR_OUT_OF_MEMORY;
    pool->reserved += grow;
    pool->reserved_high = std::max(pool->reserved_high, pool->reserved);
  }
  pool->used += size;
  pool->used_high = std::max(pool->used_high, pool->used);
  CUdeviceptr p = HostAlloc(size);
  pool->live[p] = size;
  s.pool_allocs[p] = {pool, size};
  *dptr = p;
  return CUDA_SUCCESS;
}

struct FakeStream;
FakeStream* Capturing(CUstream stream);
CUresult CaptureFree(State& s, FakeStream* fs, CUdeviceptr dptr);
bool FreeGraphAllocation(State& s, CUdeviceptr dptr);

CUresult FreeAsync(CUdeviceptr dptr, CUstream stream) {
  FAKE_LOCK();
  if (FakeStream* fs = Capturing(stream)) return CaptureFree(s, fs, dptr);
  if (FreeGraphAllocation(s, dptr)) return CUDA_SUCCESS;
  auto it = s.pool_allocs.find(dptr);
  if (it == s.pool_allocs.end()) return CUDA_ERROR_INVALID_VALUE;
  Pool* pool = it->second.first;
  pool->used -= it->second.second;
  pool->live.erase(dptr);
  std::free(reinterpret_cast<void*>(dptr));
  s.pool_allocs.erase(it);
  return CUDA_SUCCESS;
}

CUresult SyncDevice(State& s, int phys) {
  for (Pool* p : s.pools)
    if (p->phys == phys) ReleaseToThreshold(s, p, p->threshold);
  return CUDA_SUCCESS;
}

std::atomic<uint64_t> g_launches{0};
std::atomic<uint64_t> g_cost_ps{0};  // per-thread cost of a kernel (fakeCudaSetKernelCostPs)
// End (virtual ns) of the last kernel on each device's legacy default stream, this process.
std::atomic<uint64_t> g_default_end[fracgpu::fakes::kFakeMaxDevices];
// End (virtual ns) of the last kernel submitted on any stream of this process.
std::atomic<uint64_t> g_work_end{0};

struct FakeStream {
  int phys;
  std::atomic<uint64_t> end{0};  // virtual ns at which its last kernel ends
  // Stream capture (under State::mu): the graph being captured and its newest node.
  GraphRec* capture = nullptr;
  GraphNodeRec* capture_last = nullptr;
};

FakeStream* NewFakeStream(int phys) {
  auto* fs = new FakeStream();
  fs->phys = phys;
  return fs;
}

// Adds a node captured on `fs` (under State::mu), ordered after the previous captured one.
GraphNodeRec* CaptureNode(State& s, FakeStream* fs, CUgraphNodeType type) {
  auto* n = new GraphNodeRec();
  n->graph = fs->capture;
  n->type = type;
  fs->capture->nodes.push_back(n);
  s.graph_nodes.insert(n);
  fs->capture_last = n;
  return n;
}
FakeStream* Capturing(CUstream stream) {
  auto* fs = reinterpret_cast<FakeStream*>(stream);
  return fs && fs->capture ? fs : nullptr;
}

std::atomic<uint64_t>& StreamEnd(int phys, CUstream stream) {
  return stream ? reinterpret_cast<FakeStream*>(stream)->end : g_default_end[phys];
}

// Runs a kernel on the virtual clock (fake_clock.h): takes the simulation turn, charges the
// launch overhead, and schedules grid × block × cost on the stream's device.
CUresult Launch(CUfunction f, uint64_t grid = 1, uint64_t block = 1, CUstream stream = nullptr) {
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (stream && reinterpret_cast<FakeStream*>(stream)->capture) {  // captured: a kernel node
    State& s = S();
    std::lock_guard<std::mutex> lk(s.mu);
    if (FakeStream* fs = Capturing(stream)) {
      CaptureNode(s, fs, CU_GRAPH_NODE_TYPE_KERNEL);
      return CUDA_SUCCESS;
    }
  }
  GateIfLocked();
  g_launches.fetch_add(1, std::memory_order_relaxed);
  int phys = stream ? reinterpret_cast<FakeStream*>(stream)->phys : -1;
  if (phys < 0) {
    Ctx* c = Current();
    if (!c) return CUDA_SUCCESS;  // kept permissive as before: counted only
    phys = c->phys;
  }
  State& s = S();
  int sm_count = phys < static_cast<int>(s.devices.size()) ? s.devices[phys].sm_count : 1;
  if (sm_count < 1) sm_count = 1;
  uint64_t cost = g_cost_ps.load(std::memory_order_relaxed);
  if (cost == 0) return CUDA_SUCCESS;  // no simulated cost set: counted only (cheap, for benches)
  uint64_t waves = (grid + static_cast<uint64_t>(sm_count) - 1) / static_cast<uint64_t>(sm_count);
  uint64_t dur = waves * block * cost / 1000;
  uint32_t sms = static_cast<uint32_t>(grid < static_cast<uint64_t>(sm_count) ? grid : sm_count);
  namespace fk = fracgpu::fakes;
  fk::ClockTurn();
  fk::ClockParticipant& me = fk::Me();
  uint64_t now = me.t.load() + (fk::Clock().realtime ? 0 : fk::kLaunchOverheadNs);
  me.t.store(now);
  if (dur > 0 && sms > 0) {
    std::atomic<uint64_t>& end = StreamEnd(phys, stream);
    uint64_t ready = end.load() > now ? end.load() : now;
    uint64_t e = fk::ClockSchedule(phys, sm_count, sms, dur, ready);
    fk::ClockAddBusy(me, e - dur, e);
    end.store(e);
    uint64_t w = g_work_end.load();  // the end of all submitted work (checkpoint Lock waits)
    while (w < e && !g_work_end.compare_exchange_weak(w, e)) {
    }
  }
  fk::ClockUnlock(fk::Clock().state);
  fk::ClockAdvanced(fk::Clock().state);
  return CUDA_SUCCESS;
}

// Synchronisation on the virtual clock: the caller's time moves to `end`. In realtime mode
// (fake_clock.h) the caller first really sleeps until the wall reaches `end`.
void WaitUntil(uint64_t end) {
  fracgpu::fakes::ClockParticipant& me = fracgpu::fakes::Me();
  fracgpu::fakes::ClockView& v = fracgpu::fakes::Clock();
  if (v.realtime) {
    uint64_t at = fracgpu::fakes::ClockEpochNs(v.state) + end;
    timespec ts{static_cast<time_t>(at / 1'000'000'000ull),
                static_cast<long>(at % 1'000'000'000ull)};
    while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
  }
  if (me.t.load() < end) {
    me.t.store(end);
    fracgpu::fakes::ClockAdvanced(fracgpu::fakes::Clock().state);
  }
}

CUresult CreateContext(CUcontext* ctx, CUdevice dev) {
  FAKE_LOCK();
  int phys = PhysOf(s, dev);
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
  CtxBarrier(s, 1);
  if (!Take(s, phys, s.ctx_bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  PublishContexts(s, phys, 1);
  CtxBarrier(s, 2);
  Ctx* c = new Ctx{phys, false};
  tls_ctx_stack.push_back(c);
  *ctx = reinterpret_cast<CUcontext>(c);
  return CUDA_SUCCESS;
}

// ---- Graphs: the fake's model of CUDA graph memory (cuda.h "cuGraphAddMemAllocNode",
// "cuDeviceGraphMemTrim"; CUDA Programming Guide, "Graph Memory Nodes") ----
// An allocation node gets its virtual address when it is created; no physical memory is taken
// then. An executable graph needs, per device, its footprint: the sum of its allocation
// nodes' sizes, each rounded up to 2 MiB (the fake never lets two allocations of one graph
// share memory, unlike the real driver: an upper bound of it). Physical memory comes from
// the device's graph pool, which grows (takes device memory, so cuMemGetInfo and NVML show
// it) when an executable graph is mapped: at cuGraphUpload, at its first cuGraphLaunch, or at
// cuGraphInstantiateWithParams with CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD; a mapped graph keeps
// its memory across launches, and growth that does not fit the device fails the call with
// CUDA_ERROR_OUT_OF_MEMORY, changing nothing. The pool's used memory is what mapped graphs
// hold plus graph allocations left alive outside one; reserved is what it took from the
// device. cuGraphExecDestroy unmaps its graph (the memory stays reserved, for the next graph);
// cuDeviceGraphMemTrim unmaps every graph of the device (the fake's graph work completes at
// launch: none is executing or scheduled when the trim runs) and gives back all but the live
// allocations; the device's last context going frees the pool. Everything under State::mu.

uint64_t GraphUsed(State& s, int phys) {
  uint64_t used = 0;
  for (GraphExecRec* e : s.graph_execs)
    if (e->mapped[phys]) used += e->footprint[phys];
  for (const auto& [ptr, live] : s.graph_live)
    if (live.phys == phys && !(live.owner && live.owner->mapped[phys])) used += live.bytes;
  return used;
}

// Maps `e`'s footprint on every device it needs, growing the pools: all or nothing. False
// when a device lacks the memory.
bool GraphMap(State& s, GraphExecRec* e) {
  const int n = static_cast<int>(s.devices.size());
  uint64_t grow[fracgpu::fakes::kFakeMaxDevices] = {};
  for (int d = 0; d < n; ++d) {
    if (e->footprint[d] == 0 || e->mapped[d]) continue;
    uint64_t own = 0;  // its live allocations, counted outside any mapped graph until now
    for (const auto& [ptr, live] : s.graph_live)
      if (live.owner == e && live.phys == d) own += live.bytes;
    uint64_t need = GraphUsed(s, d) - own + e->footprint[d];
    if (need > s.graph_pool[d].reserved) {
      grow[d] = need - s.graph_pool[d].reserved;
      if (s.used[d] + grow[d] > s.devices[d].total_bytes) return false;
    }
  }
  for (int d = 0; d < n; ++d) {
    if (e->footprint[d] == 0 || e->mapped[d]) continue;
    GraphPoolRec& p = s.graph_pool[d];
    Take(s, d, grow[d]);
    p.reserved += grow[d];
    p.reserved_high = std::max(p.reserved_high, p.reserved);
    e->mapped[d] = true;
    p.used_high = std::max(p.used_high, GraphUsed(s, d));
  }
  return true;
}

void GraphTrim(State& s, int phys) {
  for (GraphExecRec* e : s.graph_execs) e->mapped[phys] = false;
  GraphPoolRec& p = s.graph_pool[phys];
  uint64_t keep = GraphUsed(s, phys);  // live allocations stay
  if (p.reserved > keep) {
    Give(s, phys, p.reserved - keep);
    p.reserved = keep;
  }
}

// The device's last context went: the driver frees its graph memory.
void DropGraphMemory(State& s, int phys) {
  for (GraphExecRec* e : s.graph_execs) e->mapped[phys] = false;
  std::erase_if(s.graph_live, [phys](const auto& kv) { return kv.second.phys == phys; });
  Give(s, phys, s.graph_pool[phys].reserved);
  s.graph_pool[phys].reserved = 0;
}

// cuMemFreeAsync / cuMemFree_v2 of a graph allocation alive after its launch.
bool FreeGraphAllocation(State& s, CUdeviceptr dptr) { return s.graph_live.erase(dptr) != 0; }

void AssignGraphAddress(State& s, GraphNodeRec* n, int phys) {
  uint64_t bytes = RoundUp(n->alloc.bytesize, kGranularity);
  n->alloc.dptr = s.next_graph_va;
  s.next_graph_va += bytes + kGranularity;
  s.graph_allocs[n->alloc.dptr] = GraphAllocRec{phys, bytes, n->graph};
  n->graph->mem_nodes = true;
}

// A free node of `dptr` in graph `g` (cuGraphAddMemFreeNode's rules): the address must come
// from an allocation node and be freed once, in its own graph or in one other.
CUresult CheckGraphFree(State& s, GraphRec* g, CUdeviceptr dptr) {
  auto it = s.graph_allocs.find(dptr);
  if (it == s.graph_allocs.end() || it->second.freed_in_graph || it->second.freed_elsewhere)
    return CUDA_ERROR_INVALID_VALUE;
  if (it->second.graph == g)
    it->second.freed_in_graph = true;
  else
    it->second.freed_elsewhere = true;
  g->mem_nodes = true;
  return CUDA_SUCCESS;
}

CUresult CaptureAlloc(State& s, FakeStream* fs, CUdeviceptr* dptr, size_t bytes, int phys) {
  if (!dptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  GraphNodeRec* n = CaptureNode(s, fs, CU_GRAPH_NODE_TYPE_MEM_ALLOC);
  n->alloc.poolProps.allocType = 1;  // CU_MEM_ALLOCATION_TYPE_PINNED
  n->alloc.poolProps.location = {CU_MEM_LOCATION_TYPE_DEVICE, OrdinalOf(s, phys)};
  n->alloc.bytesize = bytes;
  AssignGraphAddress(s, n, phys);
  *dptr = n->alloc.dptr;
  return CUDA_SUCCESS;
}

CUresult CaptureFree(State& s, FakeStream* fs, CUdeviceptr dptr) {
  CUresult r = CheckGraphFree(s, fs->capture, dptr);
  if (r != CUDA_SUCCESS) return r;
  CaptureNode(s, fs, CU_GRAPH_NODE_TYPE_MEM_FREE)->free_dptr = dptr;
  return CUDA_SUCCESS;
}

GraphRec* KnownGraph(State& s, CUgraph graph) {
  auto* g = reinterpret_cast<GraphRec*>(graph);
  return g && s.graphs.count(g) ? g : nullptr;
}
GraphNodeRec* KnownNode(State& s, CUgraphNode node) {
  auto* n = reinterpret_cast<GraphNodeRec*>(node);
  return n && s.graph_nodes.count(n) ? n : nullptr;
}
GraphExecRec* KnownExec(State& s, CUgraphExec exec) {
  auto* e = reinterpret_cast<GraphExecRec*>(exec);
  return e && s.graph_execs.count(e) ? e : nullptr;
}

// The arguments every cuGraphAdd*Node shares: an output, a graph, and dependencies that are
// distinct nodes of that graph.
CUresult CheckNodeArgs(State& s, CUgraphNode* out, CUgraph graph, const CUgraphNode* deps,
                       size_t ndeps) {
  GraphRec* g = KnownGraph(s, graph);
  if (!out || !g || (ndeps > 0 && !deps)) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < ndeps; ++i) {
    GraphNodeRec* d = KnownNode(s, deps[i]);
    if (!d || d->graph != g) return CUDA_ERROR_INVALID_VALUE;
    for (size_t j = 0; j < i; ++j)
      if (deps[j] == deps[i]) return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

GraphNodeRec* NewNode(State& s, CUgraphNode* out, CUgraph graph, CUgraphNodeType type) {
  GraphRec* g = KnownGraph(s, graph);
  auto* n = new GraphNodeRec();
  n->graph = g;
  n->type = type;
  g->nodes.push_back(n);
  s.graph_nodes.insert(n);
  *out = reinterpret_cast<CUgraphNode>(n);
  return n;
}

CUresult AddAllocNode(State& s, CUgraphNode* out, CUgraph graph, const CUgraphNode* deps,
                      size_t ndeps, CUDA_MEM_ALLOC_NODE_PARAMS* params) {
  CUresult r = CheckNodeArgs(s, out, graph, deps, ndeps);
  if (r != CUDA_SUCCESS) return r;
  if (!params || params->bytesize == 0 || params->poolProps.allocType != 1 ||
      params->poolProps.handleTypes != 0 ||
      params->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      (params->accessDescCount > 0 && !params->accessDescs) ||
      params->accessDescCount > s.visible.size())
    return CUDA_ERROR_INVALID_VALUE;
  int phys = PhysOf(s, params->poolProps.location.id);
  if (phys < 0) return CUDA_ERROR_INVALID_VALUE;
  GraphNodeRec* n = NewNode(s, out, graph, CU_GRAPH_NODE_TYPE_MEM_ALLOC);
  n->alloc = *params;
  n->access.assign(params->accessDescs, params->accessDescs + params->accessDescCount);
  n->alloc.accessDescs = n->access.empty() ? nullptr : n->access.data();
  AssignGraphAddress(s, n, phys);
  params->dptr = n->alloc.dptr;
  return CUDA_SUCCESS;
}

CUresult AddFreeNode(State& s, CUgraphNode* out, CUgraph graph, const CUgraphNode* deps,
                     size_t ndeps, CUdeviceptr dptr) {
  CUresult r = CheckNodeArgs(s, out, graph, deps, ndeps);
  if (r == CUDA_SUCCESS) r = CheckGraphFree(s, KnownGraph(s, graph), dptr);
  if (r == CUDA_SUCCESS) NewNode(s, out, graph, CU_GRAPH_NODE_TYPE_MEM_FREE)->free_dptr = dptr;
  return r;
}

CUresult AddPlainNode(State& s, CUgraphNode* out, CUgraph graph, const CUgraphNode* deps,
                      size_t ndeps, CUgraphNodeType type) {
  CUresult r = CheckNodeArgs(s, out, graph, deps, ndeps);
  if (r == CUDA_SUCCESS) NewNode(s, out, graph, type);
  return r;
}

// cuGraphAddNode(_v2): memory nodes as their own calls, the plain kinds as no-op nodes; child
// graphs, conditionals and the rest are not modelled.
CUresult AddNodeByParams(State& s, CUgraphNode* out, CUgraph graph, const CUgraphNode* deps,
                         size_t ndeps, CUgraphNodeParams* params) {
  if (!params) return CUDA_ERROR_INVALID_VALUE;
  switch (params->type) {
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
      return AddAllocNode(s, out, graph, deps, ndeps, &params->alloc);
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
      return AddFreeNode(s, out, graph, deps, ndeps, params->free.dptr);
    case CU_GRAPH_NODE_TYPE_KERNEL:
    case CU_GRAPH_NODE_TYPE_MEMCPY:
    case CU_GRAPH_NODE_TYPE_MEMSET:
    case CU_GRAPH_NODE_TYPE_HOST:
    case CU_GRAPH_NODE_TYPE_EMPTY:
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
      return AddPlainNode(s, out, graph, deps, ndeps, params->type);
    default:
      return CUDA_ERROR_NOT_SUPPORTED;
  }
}

// Every instantiate entry point. `upload`: map now (CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD).
// *result: the CUgraphInstantiateResult of cuGraphInstantiateWithParams.
CUresult InstantiateGraph(State& s, CUgraphExec* out, CUgraph graph, cuuint64_t flags, bool upload,
                          CUgraphInstantiateResult* result) {
  *result = CUDA_GRAPH_INSTANTIATE_ERROR;
  GraphRec* g = KnownGraph(s, graph);
  constexpr cuuint64_t kKnown =
      CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
      CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
  if (!out || !g || (flags & ~kKnown) ||
      ((flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) &&
       (flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)))
    return CUDA_ERROR_INVALID_VALUE;
  if (g->mem_nodes && g->execs > 0)
    return CUDA_ERROR_INVALID_VALUE;  // one executable graph at a time
  if (g->mem_nodes && (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH)) {
    *result = CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED;
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto* e = new GraphExecRec();
  e->flags = flags & ~cuuint64_t{CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD};
  e->graph = g;
  for (GraphNodeRec* n : g->nodes) {
    if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
      const GraphAllocRec& a = s.graph_allocs[n->alloc.dptr];
      e->footprint[a.phys] += a.bytes;
      if (!a.freed_in_graph) e->keeps.push_back(n->alloc.dptr);
    } else if (n->type == CU_GRAPH_NODE_TYPE_MEM_FREE && s.graph_allocs[n->free_dptr].graph != g) {
      e->frees.push_back(n->free_dptr);
    }
  }
  if (upload && !GraphMap(s, e)) {
    delete e;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  s.graph_execs.insert(e);
  g->execs++;
  *out = reinterpret_cast<CUgraphExec>(e);
  *result = CUDA_GRAPH_INSTANTIATE_SUCCESS;
  return CUDA_SUCCESS;
}

CUresult BeginCapture(CUstream stream, CUstreamCaptureMode mode) {
  FAKE_LOCK();
  auto* fs = reinterpret_cast<FakeStream*>(stream);
  if (!fs) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // the legacy stream cannot be captured
  if (mode < 0 || mode > 2 || fs->capture) return CUDA_ERROR_INVALID_VALUE;
  fs->capture = new GraphRec();
  s.graphs.insert(fs->capture);
  fs->capture_last = nullptr;
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

/// Test-only: a data object with a driver-like name. libvgpu.so's dlsym hook must hand it out as
/// it is, never behind a wake trampoline (issue 36 review: a reader would get code bytes);
/// tests/vgpu/park_wake_test.cc reads its value through dlsym.
__attribute__((visibility("default"))) extern const uint64_t cuFakeDriverData;
const uint64_t cuFakeDriverData = 0x0123456789abcdefull;

/// Test-only: with FAKE_CUDA_CTOR_CALL=1 the fake's constructor calls cuDriverGetVersion as the
/// process finds it (dlsym(RTLD_DEFAULT): libvgpu.so's export when it is preloaded), as a driver
/// whose initialisation calls back into its own entry points would; its CUresult, -1 when not
/// asked, -2 when no such symbol (tests/vgpu/park_wake_test.cc: resolution re-entered from the
/// driver's own load).
__attribute__((visibility("default"))) extern int fakeCudaCtorRc;
int fakeCudaCtorRc = -1;

/// Test-only: number of kernel launches the fake has run in this process.
__attribute__((visibility("default"))) uint64_t fakeCudaLaunchCount() noexcept {
  return g_launches.load();
}

/// Test-only: per-thread cost of every later kernel of this process, in picoseconds.
__attribute__((visibility("default"))) void fakeCudaSetKernelCostPs(uint64_t ps) noexcept {
  g_cost_ps.store(ps);
}
/// Test-only: this process's virtual time (ns, fake_clock.h), read in its simulation turn so
/// that what the caller then reads of shared state (libvgpu's pacing horizon) is read in
/// virtual-time order, deterministically.
__attribute__((visibility("default"))) uint64_t fakeClockNowNs() noexcept {
  fracgpu::fakes::ClockTurn();
  uint64_t t = fracgpu::fakes::Me().t.load();
  fracgpu::fakes::ClockUnlock(fracgpu::fakes::Clock().state);
  return t;
}
/// Test-only: a virtual sleep: this process's time moves to `t` ns (never backwards).
__attribute__((visibility("default"))) void fakeClockSleepUntilNs(uint64_t t) noexcept {
  WaitUntil(t);
}
/// Test-only: busy ns of this process's kernels in virtual [from, to) ns.
__attribute__((visibility("default"))) uint64_t fakeClockBusyNs(uint64_t from,
                                                                uint64_t to) noexcept {
  return fracgpu::fakes::ClockBusy(fracgpu::fakes::Me(), from, to);
}
/// Test-only: leaves the simulation (others stop waiting for this process).
__attribute__((visibility("default"))) void fakeClockLeave() noexcept {
  fracgpu::fakes::ClockLeave();
}

CUresult cuInit(unsigned int flags) noexcept {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = S();
  std::lock_guard<std::mutex> lk(s.mu);
  if (!s.initialised) Initialise(s);
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* version) noexcept {
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  const char* v = std::getenv("FAKE_CUDA_DRIVER_VERSION");
  *version = v ? std::atoi(v) : 12080;
  return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char** str) noexcept {
  if (!str) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS:
      *str = "CUDA_SUCCESS";
      break;
    case CUDA_ERROR_INVALID_VALUE:
      *str = "CUDA_ERROR_INVALID_VALUE";
      break;
    case CUDA_ERROR_OUT_OF_MEMORY:
      *str = "CUDA_ERROR_OUT_OF_MEMORY";
      break;
    case CUDA_ERROR_NOT_INITIALIZED:
      *str = "CUDA_ERROR_NOT_INITIALIZED";
      break;
    default:
      *str = nullptr;
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult cuGetExportTable(const void** table, const CUuuid* id) noexcept {
  static const void* kEmpty[1] = {nullptr};
  if (!table || !id) return CUDA_ERROR_INVALID_VALUE;
  *table = kEmpty;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) noexcept {
  FAKE_LOCK();
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = static_cast<int>(s.visible.size());
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* dev, int ordinal) noexcept {
  FAKE_LOCK();
  if (!dev) return CUDA_ERROR_INVALID_VALUE;
  if (PhysOf(s, ordinal) < 0) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice dev) noexcept {
  FAKE_LOCK();
  int phys = PhysOf(s, dev);
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<size_t>(len), "%s", s.devices[phys].name.c_str());
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) noexcept {
  FAKE_LOCK();
  int phys = PhysOf(s, dev);
  if (!uuid) return CUDA_ERROR_INVALID_VALUE;
  if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
  std::memcpy(uuid->bytes, s.devices[phys].raw, 16);
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) noexcept {
  return cuDeviceGetUuid_v2(uuid, dev);
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) noexcept {
  FAKE_LOCK();
  int phys = PhysOf(s, dev);
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = s.devices[phys].total_bytes;
  return CUDA_SUCCESS;
}

// Device attributes of an NVIDIA H100 SXM5 80 GB HBM3 (compute capability 9.0), as its
// driver reports them. Per-block and per-SM limits: CUDA C++ Programming Guide, "Features and
// Technical Specifications", compute capability 9.0 (2048 threads, 32 blocks, 64 K registers,
// 228 KiB shared memory per SM, 227 KiB opt-in and 1 KiB reserved per block). Clocks, bus
// width and L2: the H100 SXM5 80 GB as NVIDIA's deviceQuery sample prints it (1980 MHz GPU
// clock, 2619 MHz memory clock, 5120-bit bus, 50 MiB L2). The SM count comes from
// FAKE_GPU_DEVICES (default 108); memory from the same list. An attribute this table does not
// list reads 0 (not supported); one outside [1, CU_DEVICE_ATTRIBUTE_MAX) is
// CUDA_ERROR_INVALID_VALUE, as from the driver. HAMi-core, for one, sizes its SM-limit token
// bucket from MAX_THREADS_PER_MULTIPROCESSOR x SM count: with 0 it never launches.
}  // extern "C"
namespace {
struct AttributeValue {
  CUdevice_attribute attr;
  int value;
};
constexpr AttributeValue kH100Attributes[] = {
    {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, 1024},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, 65535},
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 49152},
    {CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, 65536},
    {CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32},
    {CU_DEVICE_ATTRIBUTE_MAX_PITCH, 2147483647},
    {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, 65536},
    {CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 1980000},  // kHz
    {CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, 512},
    {CU_DEVICE_ATTRIBUTE_GPU_OVERLAP, 1},
    {CU_DEVICE_ATTRIBUTE_INTEGRATED, 0},
    {CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 1},
    {CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, 1},
    {CU_DEVICE_ATTRIBUTE_ECC_ENABLED, 1},
    {CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, 2619000},  // kHz
    {CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, 5120},
    {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 52428800},
    {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 2048},
    {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1},
    {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9},
    {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0},
    {CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 233472},
    {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, 65536},
    {CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 1},
    {CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 1},
    {CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, 1},
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 232448},
    {CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, 32},
    {CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, 1024},
    {CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, 1},
};
}  // namespace
extern "C" {

CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attr, CUdevice dev) noexcept {
  FAKE_LOCK();
  int phys = PhysOf(s, dev);
  if (!value || attr < 1 || attr >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
  *value = 0;
  if (attr == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) {
    *value = s.devices[phys].sm_count;
    return CUDA_SUCCESS;
  }
  for (const AttributeValue& a : kH100Attributes)
    if (a.attr == attr) *value = a.value;
  return CUDA_SUCCESS;
}

// ---- Contexts ----
CUresult cuCtxCreate_v2(CUcontext* ctx, unsigned int, CUdevice dev) noexcept {
  return CreateContext(ctx, dev);
}
CUresult cuCtxCreate_v3(CUcontext* ctx, void*, int, unsigned int, CUdevice dev) noexcept {
  return CreateContext(ctx, dev);
}
CUresult cuCtxCreate_v4(CUcontext* ctx, void*, unsigned int, CUdevice dev) noexcept {
  return CreateContext(ctx, dev);
}

// cuCtxSetLimit / cuCtxGetLimit of the current context. The fake reserves device memory at
// once for the three limits that take it: the stack, value x SMs x 2048 threads per SM
// (MAX_THREADS_PER_MULTIPROCESSOR, every resident thread gets one); the printf FIFO and the
// malloc heap, value bytes. Other limits are stored nowhere and take nothing. A growth that does
// not fit: CUDA_ERROR_OUT_OF_MEMORY, the limit unchanged.
static uint64_t LimitBytes(const State& s, int phys, int limit, uint64_t value) {
  if (limit == 0) return value * s.devices[phys].sm_count * 2048;
  return limit <= 2 ? value : 0;
}
CUresult cuCtxSetLimit(CUlimit limit, size_t value) noexcept {
  Ctx* c = Current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  FAKE_LOCK();
  if (limit < 0 || limit > 9) return CUDA_ERROR_INVALID_VALUE;  // CU_LIMIT_MAX is 10 in 13.0
  if (limit > 2) return CUDA_SUCCESS;
  uint64_t old_bytes = LimitBytes(s, c->phys, limit, c->limits[limit]);
  uint64_t new_bytes = LimitBytes(s, c->phys, limit, value);
  if (new_bytes > old_bytes && !Take(s, c->phys, new_bytes - old_bytes))
    return CUDA_ERROR_OUT_OF_MEMORY;
  if (new_bytes < old_bytes) Give(s, c->phys, old_bytes - new_bytes);
  c->limit_bytes = c->limit_bytes + new_bytes - old_bytes;
  c->limits[limit] = value;
  return CUDA_SUCCESS;
}
CUresult cuCtxGetLimit(size_t* value, CUlimit limit) noexcept {
  Ctx* c = Current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  FAKE_LOCK();
  if (!value || limit < 0 || limit > 9) return CUDA_ERROR_INVALID_VALUE;
  *value = limit <= 2 ? c->limits[limit] : 0;
  return CUDA_SUCCESS;
}

CUresult cuCtxDestroy_v2(CUcontext ctx) noexcept {
  FAKE_LOCK();
  Ctx* c = reinterpret_cast<Ctx*>(ctx);
  if (!c || c->primary) return CUDA_ERROR_INVALID_CONTEXT;
  Give(s, c->phys, s.ctx_bytes + c->limit_bytes);
  PublishContexts(s, c->phys, -1);
  std::erase(tls_ctx_stack, c);
  delete c;
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx) noexcept {
  Ctx* c = reinterpret_cast<Ctx*>(ctx);
  if (tls_ctx_stack.empty()) {
    if (c) tls_ctx_stack.push_back(c);
  } else if (c) {
    tls_ctx_stack.back() = c;
  } else {
    tls_ctx_stack.pop_back();
  }
  return CUDA_SUCCESS;
}
CUresult cuCtxGetCurrent(CUcontext* ctx) noexcept {
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  *ctx = reinterpret_cast<CUcontext>(Current());
  return CUDA_SUCCESS;
}
CUresult cuCtxPushCurrent_v2(CUcontext ctx) noexcept {
  if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  tls_ctx_stack.push_back(reinterpret_cast<Ctx*>(ctx));
  return CUDA_SUCCESS;
}
CUresult cuCtxPopCurrent_v2(CUcontext* ctx) noexcept {
  if (tls_ctx_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx) *ctx = reinterpret_cast<CUcontext>(tls_ctx_stack.back());
  tls_ctx_stack.pop_back();
  return CUDA_SUCCESS;
}
CUresult cuCtxGetDevice(CUdevice* dev) noexcept {
  Ctx* c = Current();
  if (!dev) return CUDA_ERROR_INVALID_VALUE;
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  State& s = S();
  *dev = OrdinalOf(s, c->phys);  // visible list is immutable after cuInit
  return CUDA_SUCCESS;
}
CUresult cuCtxSynchronize(void) noexcept {
  Ctx* c = Current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  WaitUntil(g_default_end[c->phys].load());  // streams of this context: see docs/sm-limiter.md
  FAKE_LOCK();
  return SyncDevice(s, c->phys);
}

// CUDA 13.0 (cuda.h): synchronises `ctx`; NULL means the current context.
CUresult cuCtxSynchronize_v2(CUcontext ctx) noexcept {
  Ctx* c = ctx ? reinterpret_cast<Ctx*>(ctx) : Current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  WaitUntil(g_default_end[c->phys].load());
  FAKE_LOCK();
  return SyncDevice(s, c->phys);
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) noexcept {
  FAKE_LOCK();
  int phys = PhysOf(s, dev);
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
  if (!s.primary[phys]) s.primary[phys] = new Ctx{phys, true};
  if (s.primary_refs[phys] == 0) {
    CtxBarrier(s, 1);
    if (!Take(s, phys, s.ctx_bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
    PublishContexts(s, phys, 1);
    CtxBarrier(s, 2);
  }
  s.primary_refs[phys]++;
  *ctx = reinterpret_cast<CUcontext>(s.primary[phys]);
  return CUDA_SUCCESS;
}

// ---- IPC (cuIpcGetMemHandle / cuIpcOpenMemHandle / cuIpcCloseMemHandle) across the processes
// of FAKE_GPU_STATE_DIR (without it IPC is CUDA_ERROR_NOT_SUPPORTED). Exporting an allocation of
// cuMemAlloc_v2 publishes the empty file <dir>/ipc-<pid>-<serial>, removed when it is freed; the
// handle names the exporter's pid, the serial, the size and the device. Opening it in another
// process checks the file is there and maps it: a new address with host memory behind it and
// NO device memory taken (the memory is the exporter's; contents are not shared in the fake).
// The same handle opened again in a process gets the same address and one more reference
// (cuda.h); cuIpcCloseMemHandle drops one. The fake's answers for bad input (its choice where
// cuda.h lists several codes): a handle that is not the fake's, or whose allocation was freed
// or whose process is gone, CUDA_ERROR_INVALID_HANDLE; opening in the exporting process itself,
// CUDA_ERROR_INVALID_CONTEXT; flags other than 0 / CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS or a null
// output, CUDA_ERROR_INVALID_VALUE; closing an address not opened, CUDA_ERROR_INVALID_VALUE.
static std::string IpcMarker(uint32_t pid, uint64_t serial) {
  const char* dir = std::getenv("FAKE_GPU_STATE_DIR");
  return dir ? std::string(dir) + "/ipc-" + std::to_string(pid) + "-" + std::to_string(serial)
             : std::string();
}
static void Unexport(Alloc& a) {
  if (!a.exported) return;
  ::unlink(IpcMarker(static_cast<uint32_t>(getpid()), a.serial).c_str());
  a.exported = false;
}

// Frees every allocation and module of a device (the driver does so when its context goes
// away; a library handle stays valid, with nothing resident).
void DropDeviceMemory(State& s, int phys) {
  DropGraphMemory(s, phys);
  for (auto it = s.modules.begin(); it != s.modules.end();) {
    if (it->second.phys != phys) {
      ++it;
      continue;
    }
    Give(s, phys, it->second.bytes);
    if (it->second.library) {
      it->second = {-1, 0, true};
      ++it;
    } else {
      delete static_cast<char*>(it->first);
      it = s.modules.erase(it);
    }
  }
  for (auto it = s.allocs.begin(); it != s.allocs.end();) {
    if (it->second.phys == phys) {
      Unexport(it->second);
      Give(s, phys, it->second.size);
      std::free(it->second.base);
      it = s.allocs.erase(it);
    } else {
      ++it;
    }
  }
}

// One reference of the primary context of `phys` goes (a release, or a green context's
// destruction); the last one frees it and everything allocated on the device.
// A primary context's cuCtxSetLimit growth goes with it, its limits back to the defaults.
static void ResetPrimaryLimits(State& s, int phys) {
  if (Ctx* p = s.primary[phys]) {
    Give(s, phys, p->limit_bytes);
    *p = Ctx{phys, true, p->green};
  }
}
static void ReleasePrimary(State& s, int phys) {
  if (--s.primary_refs[phys] == 0) {
    ResetPrimaryLimits(s, phys);
    Give(s, phys, s.ctx_bytes);
    PublishContexts(s, phys, -1);
    DropDeviceMemory(s, phys);
  }
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) noexcept {
  FAKE_LOCK();
  int phys = PhysOf(s, dev);
  if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
  if (s.primary_refs[phys] == 0) return CUDA_ERROR_INVALID_CONTEXT;
  ReleasePrimary(s, phys);
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) noexcept {
  FAKE_LOCK();
  int phys = PhysOf(s, dev);
  if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
  if (s.primary_refs[phys] > 0) {
    ResetPrimaryLimits(s, phys);
    Give(s, phys, s.ctx_bytes);
    PublishContexts(s, phys, -1);
  }
  s.primary_refs[phys] = 0;
  DropDeviceMemory(s, phys);
  return CUDA_SUCCESS;
}

// Legacy v1 (PFN_..._v7000): the same operations as _v2.
CUresult cuDevicePrimaryCtxRelease(CUdevice dev) noexcept {
  return cuDevicePrimaryCtxRelease_v2(dev);
}
CUresult cuDevicePrimaryCtxReset(CUdevice dev) noexcept { return cuDevicePrimaryCtxReset_v2(dev); }

// ---- Green contexts (cuda.h "Green Contexts"): SM resources of a device (minimum partition
// 8 SMs, co-scheduled in 8s, as on compute capability 9.0; 2 and 2 with
// CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING), split by count into equal groups and a
// remainder, a descriptor of one split's groups, and green contexts made from it. A green
// context retains the device's primary context (created, taking FAKE_CUDA_CTX_BYTES, if it had
// no reference) and takes FAKE_CUDA_GREEN_CTX_BYTES of its own; cuGreenCtxDestroy gives that
// back and releases the primary context (its last reference frees every allocation of the
// device, as a release does). cuCtxFromGreenCtx gives a CUcontext of its own, a primary one
// (cuCtxDestroy refuses it) usable with every memory call. Bookkeeping in a resource's
// padding: bytes 0-3 the device + 1, 4-11 the split it came from (0: the device's own).
namespace {
constexpr unsigned kSmMinPartition = 8, kSmAlignment = 8;
std::atomic<uint64_t> g_next_split{1};
void FillSm(CUdevResource* r, int phys, uint64_t split, unsigned sms, unsigned min_part,
            unsigned align) {
  std::memset(r, 0, sizeof(*r));
  r->type = CU_DEV_RESOURCE_TYPE_SM;
  int tag = phys + 1;
  std::memcpy(r->_internal_padding, &tag, sizeof(tag));
  std::memcpy(r->_internal_padding + 4, &split, sizeof(split));
  r->sm.smCount = sms;
  r->sm.minSmPartitionSize = min_part;
  r->sm.smCoscheduledAlignment = align;
}
int ResourcePhys(const CUdevResource* r) {
  int tag = 0;
  std::memcpy(&tag, r->_internal_padding, sizeof(tag));
  return tag - 1;
}
uint64_t ResourceSplit(const CUdevResource* r) {
  uint64_t split = 0;
  std::memcpy(&split, r->_internal_padding + 4, sizeof(split));
  return split;
}
GreenCtx* KnownGreen(State& s, CUgreenCtx g) {
  auto* gc = reinterpret_cast<GreenCtx*>(g);
  return gc && s.green.count(gc) ? gc : nullptr;
}
}  // namespace

CUresult cuDeviceGetDevResource(CUdevice dev, CUdevResource* resource,
                                CUdevResourceType type) noexcept {
  FAKE_LOCK();
  int phys = PhysOf(s, dev);
  if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
  if (!resource) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
  FillSm(resource, phys, 0, static_cast<unsigned>(s.devices[phys].sm_count), kSmMinPartition,
         kSmAlignment);
  return CUDA_SUCCESS;
}

CUresult cuDevSmResourceSplitByCount(CUdevResource* result, unsigned int* groups,
                                     const CUdevResource* input, CUdevResource* remaining,
                                     unsigned int use_flags, unsigned int min_count) noexcept {
  FAKE_LOCK();
  if (!groups || !input || (use_flags & ~3u)) return CUDA_ERROR_INVALID_VALUE;
  if (input->type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
  int phys = ResourcePhys(input);
  if (phys < 0 || phys >= static_cast<int>(s.devices.size()) || min_count > input->sm.smCount)
    return CUDA_ERROR_INVALID_VALUE;
  if (ResourceSplit(input) != 0)
    return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;  // split again: cuda.h
  bool fine = use_flags & CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING;
  unsigned min_part = fine ? 2 : kSmMinPartition, align = fine ? 2 : kSmAlignment;
  unsigned size = std::max(min_count, min_part);
  size = (size + align - 1) / align * align;
  unsigned possible = input->sm.smCount / size;
  if (!result) {
    *groups = possible;
    return CUDA_SUCCESS;
  }
  unsigned made = std::min(*groups, possible);
  uint64_t split = g_next_split.fetch_add(1);
  for (unsigned i = 0; i < made; ++i) FillSm(&result[i], phys, split, size, min_part, align);
  if (remaining) FillSm(remaining, phys, split, input->sm.smCount - made * size, min_part, align);
  *groups = made;
  return CUDA_SUCCESS;
}

CUresult cuDevResourceGenerateDesc(CUdevResourceDesc* desc, CUdevResource* resources,
                                   unsigned int count) noexcept {
  FAKE_LOCK();
  if (!desc || !resources || count == 0) return CUDA_ERROR_INVALID_VALUE;
  unsigned sms = 0;
  for (unsigned i = 0; i < count; ++i) {
    if (resources[i].type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
    if (ResourcePhys(&resources[i]) != ResourcePhys(&resources[0]) ||
        (count > 1 && ResourceSplit(&resources[i]) != ResourceSplit(&resources[0])))
      return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
    sms += resources[i].sm.smCount;
  }
  int phys = ResourcePhys(&resources[0]);
  if (phys < 0 || phys >= static_cast<int>(s.devices.size())) return CUDA_ERROR_INVALID_VALUE;
  auto* d = new ResourceDesc{phys, sms};
  s.descs.insert(d);
  *desc = reinterpret_cast<CUdevResourceDesc>(d);
  return CUDA_SUCCESS;
}

CUresult cuGreenCtxCreate(CUgreenCtx* ctx, CUdevResourceDesc desc, CUdevice dev,
                          unsigned int flags) noexcept {
  FAKE_LOCK();
  int phys = PhysOf(s, dev);
  if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
  auto* d = reinterpret_cast<ResourceDesc*>(desc);
  if (!ctx || !d || !s.descs.count(d) || d->phys != phys || flags != CU_GREEN_CTX_DEFAULT_STREAM)
    return CUDA_ERROR_INVALID_VALUE;
  if (!s.primary[phys]) s.primary[phys] = new Ctx{phys, true};
  bool new_primary = s.primary_refs[phys] == 0;
  if (new_primary && !Take(s, phys, s.ctx_bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  if (!Take(s, phys, s.green_ctx_bytes)) {
    if (new_primary) Give(s, phys, s.ctx_bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (new_primary) PublishContexts(s, phys, 1);
  s.primary_refs[phys]++;
  auto* g = new GreenCtx{phys, d->sm_count, s.next_green_id++, Ctx{phys, true}};
  g->ctx.green = g;
  s.green.insert(g);
  *ctx = reinterpret_cast<CUgreenCtx>(g);
  return CUDA_SUCCESS;
}

CUresult cuGreenCtxDestroy(CUgreenCtx ctx) noexcept {
  FAKE_LOCK();
  GreenCtx* g = KnownGreen(s, ctx);
  if (!g) return CUDA_ERROR_INVALID_CONTEXT;
  s.green.erase(g);
  std::erase(tls_ctx_stack, &g->ctx);
  Give(s, g->phys, s.green_ctx_bytes);
  if (s.primary_refs[g->phys] > 0) ReleasePrimary(s, g->phys);  // a reset may have dropped it
  delete g;
  return CUDA_SUCCESS;
}

CUresult cuCtxFromGreenCtx(CUcontext* ctx, CUgreenCtx green) noexcept {
  FAKE_LOCK();
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  GreenCtx* g = KnownGreen(s, green);
  if (!g) return CUDA_ERROR_INVALID_CONTEXT;
  *ctx = reinterpret_cast<CUcontext>(&g->ctx);
  return CUDA_SUCCESS;
}

CUresult cuGreenCtxGetDevResource(CUgreenCtx green, CUdevResource* resource,
                                  CUdevResourceType type) noexcept {
  FAKE_LOCK();
  GreenCtx* g = KnownGreen(s, green);
  if (!g) return CUDA_ERROR_INVALID_CONTEXT;
  if (!resource) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
  FillSm(resource, g->phys, 0, g->sm_count, kSmMinPartition, kSmAlignment);
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevResource(CUcontext ctx, CUdevResource* resource,
                             CUdevResourceType type) noexcept {
  auto* c = reinterpret_cast<Ctx*>(ctx);
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  if (c->green)
    return cuGreenCtxGetDevResource(reinterpret_cast<CUgreenCtx>(c->green), resource, type);
  FAKE_LOCK();
  if (!resource) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
  FillSm(resource, c->phys, 0, static_cast<unsigned>(s.devices[c->phys].sm_count), kSmMinPartition,
         kSmAlignment);
  return CUDA_SUCCESS;
}

CUresult cuGreenCtxStreamCreate(CUstream* stream, CUgreenCtx green, unsigned int flags,
                                int) noexcept {
  FAKE_LOCK();
  if (!stream || flags != CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
  GreenCtx* g = KnownGreen(s, green);
  if (!g) return CUDA_ERROR_INVALID_CONTEXT;
  *stream = reinterpret_cast<CUstream>(NewFakeStream(g->phys));
  return CUDA_SUCCESS;
}

CUresult cuGreenCtxGetId(CUgreenCtx green, unsigned long long* id) noexcept {
  FAKE_LOCK();
  if (!id) return CUDA_ERROR_INVALID_VALUE;
  GreenCtx* g = green ? KnownGreen(s, green) : (Current() ? Current()->green : nullptr);
  if (!g) return CUDA_ERROR_INVALID_CONTEXT;
  *id = g->id;
  return CUDA_SUCCESS;
}

// ---- Modules and libraries: FAKE_CUDA_MODULE_BYTES each, on the current context's device ----
static CUresult LoadModule(void** handle, bool library) {
  Ctx* c = Current();
  if (!c && !library) return CUDA_ERROR_INVALID_CONTEXT;
  FAKE_LOCK();
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  int phys = c ? c->phys : -1;
  uint64_t bytes = phys >= 0 ? s.module_bytes : 0;
  if (phys >= 0 && !Take(s, phys, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  void* h = new char(0);
  s.modules[h] = {phys, bytes, library};
  *handle = h;
  return CUDA_SUCCESS;
}
static CUresult UnloadModule(void* handle, bool library) {
  FAKE_LOCK();
  auto it = s.modules.find(handle);
  if (it == s.modules.end() || it->second.library != library) return CUDA_ERROR_INVALID_HANDLE;
  if (it->second.phys >= 0) Give(s, it->second.phys, it->second.bytes);
  delete static_cast<char*>(it->first);
  s.modules.erase(it);
  return CUDA_SUCCESS;
}
CUresult cuModuleLoad(CUmodule* module, const char* fname) noexcept {
  if (!fname) return CUDA_ERROR_INVALID_VALUE;
  return LoadModule(reinterpret_cast<void**>(module), false);
}
CUresult cuModuleLoadData(CUmodule* module, const void* image) noexcept {
  if (!image) return CUDA_ERROR_INVALID_VALUE;
  return LoadModule(reinterpret_cast<void**>(module), false);
}
CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int, CUjit_option*,
                            void**) noexcept {
  if (!image) return CUDA_ERROR_INVALID_VALUE;
  return LoadModule(reinterpret_cast<void**>(module), false);
}
CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fat_cubin) noexcept {
  if (!fat_cubin) return CUDA_ERROR_INVALID_VALUE;
  return LoadModule(reinterpret_cast<void**>(module), false);
}
CUresult cuModuleUnload(CUmodule module) noexcept { return UnloadModule(module, false); }
CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option*, void**,
                           unsigned int, CUlibraryOption*, void**, unsigned int) noexcept {
  if (!code) return CUDA_ERROR_INVALID_VALUE;
  return LoadModule(reinterpret_cast<void**>(library), true);
}
CUresult cuLibraryLoadFromFile(CUlibrary* library, const char* file_name, CUjit_option*, void**,
                               unsigned int, CUlibraryOption*, void**, unsigned int) noexcept {
  if (!file_name) return CUDA_ERROR_INVALID_VALUE;
  return LoadModule(reinterpret_cast<void**>(library), true);
}
CUresult cuLibraryUnload(CUlibrary library) noexcept { return UnloadModule(library, true); }

// ---- Memory ----
CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) noexcept {
  Ctx* c = Current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  FAKE_LOCK();
  // Either pointer may be NULL: the figure is then not written (issue 32: applications such as
  // OptiX pass NULL for the figure they do not need, and the driver answers CUDA_SUCCESS).
  uint64_t total = s.devices[c->phys].total_bytes;
  uint64_t used = DeviceUsedAllProcesses(s, c->phys);
  if (total_bytes) *total_bytes = total;
  if (free_bytes) *free_bytes = used >= total ? 0 : total - used;
  return CUDA_SUCCESS;
}

static CUresult PlainAlloc(CUdeviceptr* dptr, uint64_t size) {
  Ctx* c = Current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  FAKE_LOCK();
  if (!dptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  if (!Take(s, c->phys, size)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUdeviceptr p = HostAlloc(size);
  s.allocs[p] = Alloc{c->phys, size, reinterpret_cast<void*>(p), s.next_alloc_serial++};
  *dptr = p;
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) noexcept {
  return PlainAlloc(dptr, bytesize);
}
CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) noexcept {
  if (flags != 1 && flags != 2) return CUDA_ERROR_INVALID_VALUE;
  return PlainAlloc(dptr, bytesize);
}
CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                            unsigned int elem) noexcept {
  if (!pitch || width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16))
    return CUDA_ERROR_INVALID_VALUE;
  size_t p = RoundUp(width, 512);  // the real driver aligns rows to its texture pitch
  CUresult r = PlainAlloc(dptr, p * height);
  if (r == CUDA_SUCCESS) *pitch = p;
  return r;
}
static bool ExtUnmap(State& s, uint64_t key);  // external memory (below)
static void ExtMaybeFree(State& s, void* obj);

CUresult cuMemFree_v2(CUdeviceptr dptr) noexcept {
  FAKE_LOCK();
  if (dptr == 0) return CUDA_SUCCESS;
  if (FreeGraphAllocation(s, dptr)) return CUDA_SUCCESS;
  auto it = s.allocs.find(dptr);
  if (it == s.allocs.end()) return CUDA_ERROR_INVALID_VALUE;
  ExtUnmap(s, dptr);
  Unexport(it->second);
  Give(s, it->second.phys, it->second.size);
  std::free(it->second.base);
  s.allocs.erase(it);
  return CUDA_SUCCESS;
}

CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr dptr) noexcept {
  FAKE_LOCK();
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  if (!std::getenv("FAKE_GPU_STATE_DIR")) return CUDA_ERROR_NOT_SUPPORTED;
  auto it = s.allocs.find(dptr);
  if (it == s.allocs.end() || !it->second.base)
    return CUDA_ERROR_INVALID_VALUE;  // not an allocation's base
  Alloc& a = it->second;
  if (!a.exported) {
    int fd = ::open(IpcMarker(static_cast<uint32_t>(getpid()), a.serial).c_str(),
                    O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return CUDA_ERROR_MAP_FAILED;
    ::close(fd);
    a.exported = true;
  }
  FakeIpcHandle h{kIpcMagic, static_cast<uint32_t>(getpid()), a.serial, a.size, a.phys, 0};
  std::memset(handle, 0, sizeof(*handle));
  std::memcpy(handle->reserved, &h, sizeof(h));
  return CUDA_SUCCESS;
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* dptr, CUipcMemHandle handle,
                               unsigned int flags) noexcept {
  if (!Current()) return CUDA_ERROR_INVALID_CONTEXT;
  FAKE_LOCK();
  if (!dptr || (flags & ~unsigned{CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS}))
    return CUDA_ERROR_INVALID_VALUE;
  if (!std::getenv("FAKE_GPU_STATE_DIR")) return CUDA_ERROR_NOT_SUPPORTED;
  FakeIpcHandle h;
  std::memcpy(&h, handle.reserved, sizeof(h));
  if (h.magic != kIpcMagic || h.phys < 0 || h.phys >= static_cast<int>(s.devices.size()))
    return CUDA_ERROR_INVALID_HANDLE;
  if (h.pid == static_cast<uint32_t>(getpid())) return CUDA_ERROR_INVALID_CONTEXT;
  if (kill(static_cast<pid_t>(h.pid), 0) != 0 ||
      ::access(IpcMarker(h.pid, h.serial).c_str(), F_OK) != 0)
    return CUDA_ERROR_INVALID_HANDLE;
  for (auto& [ptr, open] : s.ipc_opens) {
    if (open.pid == h.pid && open.serial == h.serial) {
      open.refs++;
      *dptr = ptr;
      return CUDA_SUCCESS;
    }
  }
  CUdeviceptr p = HostAlloc(h.size);
  s.ipc_opens[p] = IpcOpen{h.pid, h.serial, 1};
  *dptr = p;
  return CUDA_SUCCESS;
}
// The v4010 entry point: the same operation and signature (PFN_cuIpcOpenMemHandle_v4010).
CUresult cuIpcOpenMemHandle(CUdeviceptr* dptr, CUipcMemHandle handle, unsigned int flags) noexcept {
  return cuIpcOpenMemHandle_v2(dptr, handle, flags);
}

CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) noexcept {
  if (!Current()) return CUDA_ERROR_INVALID_CONTEXT;
  FAKE_LOCK();
  auto it = s.ipc_opens.find(dptr);
  if (it == s.ipc_opens.end()) return CUDA_ERROR_INVALID_VALUE;
  if (--it->second.refs == 0) {
    std::free(reinterpret_cast<void*>(dptr));
    s.ipc_opens.erase(it);
  }
  return CUDA_SUCCESS;
}

// ---- Legacy v1 entry points (PFN_<name>_v2000, cudaTypedefs.h): the _v2 operations with
// 32-bit sizes and pointers. A v1 allocation gets an address below 4 GiB (it must fit a
// CUdeviceptr_v1; the fake backs it with no host memory: v1 memcpy is not modelled) and may be
// freed by either cuMemFree. 32-bit figures that do not fit (cuMemGetInfo and cuDeviceTotalMem
// of a device over 4 GiB) saturate at UINT32_MAX — the fake's choice; a real driver's clamping
// is not documented.
static unsigned int Saturate32(uint64_t v) {
  return v > 0xffffffffull ? 0xffffffffu : static_cast<unsigned int>(v);
}

CUresult cuMemGetInfo(unsigned int* free_bytes, unsigned int* total_bytes) noexcept {
  size_t f = 0, t = 0;  // NULL pointers as cuMemGetInfo_v2: the figure is not written
  CUresult r = cuMemGetInfo_v2(&f, &t);
  if (r != CUDA_SUCCESS) return r;
  if (free_bytes) *free_bytes = Saturate32(f);
  if (total_bytes) *total_bytes = Saturate32(t);
  return CUDA_SUCCESS;
}
CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) noexcept {
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  size_t b = 0;
  CUresult r = cuDeviceTotalMem_v2(&b, dev);
  if (r == CUDA_SUCCESS) *bytes = Saturate32(b);
  return r;
}
static CUresult LegacyAlloc(CUdeviceptr_v1* dptr, uint64_t size) {
  Ctx* c = Current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  FAKE_LOCK();
  if (!dptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  uint64_t span = RoundUp(size, 512);
  if (s.next_va32 + span > 0xffffffffull) return CUDA_ERROR_OUT_OF_MEMORY;  // no 32-bit room left
  if (!Take(s, c->phys, size)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUdeviceptr p = s.next_va32;
  s.next_va32 += span;
  s.allocs[p] = Alloc{c->phys, size, nullptr};
  *dptr = static_cast<CUdeviceptr_v1>(p);
  return CUDA_SUCCESS;
}
CUresult cuMemAlloc(CUdeviceptr_v1* dptr, unsigned int bytesize) noexcept {
  return LegacyAlloc(dptr, bytesize);
}
CUresult cuMemAllocPitch(CUdeviceptr_v1* dptr, unsigned int* pitch, unsigned int width,
                         unsigned int height, unsigned int elem) noexcept {
  if (!pitch || width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16))
    return CUDA_ERROR_INVALID_VALUE;
  uint64_t p = RoundUp(width, 512);
  if (p > 0xffffffffull) return CUDA_ERROR_INVALID_VALUE;  // the pitch must fit its 32 bits
  CUresult r = LegacyAlloc(dptr, p * height);
  if (r == CUDA_SUCCESS) *pitch = static_cast<unsigned int>(p);
  return r;
}
CUresult cuMemFree(CUdeviceptr_v1 dptr) noexcept { return cuMemFree_v2(dptr); }

CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) noexcept {
  if (!pp || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  *pp = std::malloc(bytesize);
  return *pp ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult cuMemFreeHost(void* p) noexcept {
  std::free(p);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) noexcept {
  GateIfLocked();
  std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) noexcept {
  GateIfLocked();
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  return CUDA_SUCCESS;
}

// ---- Pools ----
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev) noexcept {
  FAKE_LOCK();
  int phys = PhysOf(s, dev);
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
  *pool = reinterpret_cast<CUmemoryPool>(DefaultPool(s, phys));
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) noexcept {
  return cuDeviceGetDefaultMemPool(pool, dev);
}
CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) noexcept {
  FAKE_LOCK();
  if (!pool || !props || props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return CUDA_ERROR_INVALID_VALUE;
  int phys = PhysOf(s, props->location.id);
  if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
  Pool* p = new Pool{};
  p->phys = phys;
  p->handle_types = props->handleTypes;
  s.pools.push_back(p);
  *pool = reinterpret_cast<CUmemoryPool>(p);
  return CUDA_SUCCESS;
}
CUresult cuMemPoolDestroy(CUmemoryPool pool) noexcept {
  FAKE_LOCK();
  if (auto* ip = reinterpret_cast<ImportedPool*>(pool); s.imported_pools.erase(ip)) {
    delete ip;
    return CUDA_SUCCESS;
  }
  Pool* p = reinterpret_cast<Pool*>(pool);
  for (ImportedPool* ip : s.imported_pools)
    if (ip->origin == p) ip->origin = nullptr;
  auto it = std::find(s.pools.begin(), s.pools.end(), p);
  if (it == s.pools.end() || p == s.default_pool[p->phys]) return CUDA_ERROR_INVALID_VALUE;
  // Memory of a destroyed pool goes back once its allocations are freed; the fake frees it now.
  for (auto& [ptr, size] : p->live) {
    s.pool_allocs.erase(ptr);
    std::free(reinterpret_cast<void*>(ptr));
  }
  Give(s, p->phys, p->reserved);
  s.pools.erase(it);
  delete p;
  return CUDA_SUCCESS;
}
CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) noexcept {
  FAKE_LOCK();
  Pool* p = reinterpret_cast<Pool*>(pool);
  if (std::find(s.pools.begin(), s.pools.end(), p) == s.pools.end())
    return CUDA_ERROR_INVALID_VALUE;
  ReleaseToThreshold(s, p, keep);
  return CUDA_SUCCESS;
}
CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) noexcept {
  FAKE_LOCK();
  Pool* p = reinterpret_cast<Pool*>(pool);
  if (!value || std::find(s.pools.begin(), s.pools.end(), p) == s.pools.end())
    return CUDA_ERROR_INVALID_VALUE;
  if (attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) {
    p->threshold = *static_cast<cuuint64_t*>(value);
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;
}
CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) noexcept {
  FAKE_LOCK();
  Pool* p = reinterpret_cast<Pool*>(pool);
  if (auto* ip = reinterpret_cast<ImportedPool*>(pool); s.imported_pools.count(ip)) {
    static Pool kNothing{};
    p = ip->origin ? ip->origin : &kNothing;
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    cuuint64_t* out = static_cast<cuuint64_t*>(value);
    switch (attr) {
      case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        *out = p->threshold;
        return CUDA_SUCCESS;
      case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
        *out = p->reserved;
        return CUDA_SUCCESS;
      case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        *out = p->reserved_high;
        return CUDA_SUCCESS;
      case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
        *out = p->used;
        return CUDA_SUCCESS;
      case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        *out = p->used_high;
        return CUDA_SUCCESS;
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
  }
  if (!value || std::find(s.pools.begin(), s.pools.end(), p) == s.pools.end())
    return CUDA_ERROR_INVALID_VALUE;
  cuuint64_t* out = static_cast<cuuint64_t*>(value);
  switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      *out = p->threshold;
      break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
      *out = p->reserved;
      break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      *out = p->reserved_high;
      break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
      *out = p->used;
      break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      *out = p->used_high;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream st) noexcept {
  Ctx* c = Current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  FAKE_LOCK();
  if (FakeStream* fs = Capturing(st)) return CaptureAlloc(s, fs, dptr, bytesize, c->phys);
  return PoolAlloc(dptr, bytesize, DefaultPool(s, c->phys));
}
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream st) noexcept {
  return cuMemAllocAsync(dptr, bytesize, st);
}
CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                 CUstream st) noexcept {
  FAKE_LOCK();
  Pool* p = reinterpret_cast<Pool*>(pool);
  if (std::find(s.pools.begin(), s.pools.end(), p) == s.pools.end())
    return CUDA_ERROR_INVALID_VALUE;
  if (FakeStream* fs = Capturing(st)) return CaptureAlloc(s, fs, dptr, bytesize, p->phys);
  return PoolAlloc(dptr, bytesize, p);
}
// Pool export and import with POSIX file descriptors only (other handle types:
// CUDA_ERROR_NOT_SUPPORTED); the pool must have been created with that handle type.
CUresult cuMemPoolExportToShareableHandle(void* handle_out, CUmemoryPool pool,
                                          CUmemAllocationHandleType type,
                                          unsigned long long flags) noexcept {
  FAKE_LOCK();
  Pool* p = reinterpret_cast<Pool*>(pool);
  if (!handle_out || flags != 0 || std::find(s.pools.begin(), s.pools.end(), p) == s.pools.end())
    return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  if (!(p->handle_types & type)) return CUDA_ERROR_INVALID_VALUE;
  int fd = ::memfd_create("fake-cuda-pool", MFD_CLOEXEC);
  PoolExport e{kPoolExportMagic, static_cast<uint32_t>(getpid()), p};
  if (fd < 0 || ::pwrite(fd, &e, sizeof(e), 0) != static_cast<ssize_t>(sizeof(e))) {
    if (fd >= 0) ::close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *static_cast<int*>(handle_out) = fd;
  return CUDA_SUCCESS;
}
// `handle` is the file descriptor itself, cast to a pointer (as NVIDIA's samples pass it).
CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool* pool_out, void* handle,
                                            CUmemAllocationHandleType type,
                                            unsigned long long flags) noexcept {
  FAKE_LOCK();
  if (!pool_out || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  PoolExport e{};
  int fd = static_cast<int>(reinterpret_cast<intptr_t>(handle));
  if (::pread(fd, &e, sizeof(e), 0) != static_cast<ssize_t>(sizeof(e)) ||
      e.magic != kPoolExportMagic)
    return CUDA_ERROR_INVALID_VALUE;
  bool own = e.pid == static_cast<uint32_t>(getpid()) &&
             std::find(s.pools.begin(), s.pools.end(), e.pool) != s.pools.end();
  auto* ip = new ImportedPool{own ? e.pool : nullptr};
  s.imported_pools.insert(ip);
  *pool_out = reinterpret_cast<CUmemoryPool>(ip);
  return CUDA_SUCCESS;
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream st) noexcept {
  return cuMemAllocFromPoolAsync(dptr, bytesize, pool, st);
}
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream st) noexcept { return FreeAsync(dptr, st); }
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream st) noexcept { return FreeAsync(dptr, st); }

// ---- Streams ----
CUresult cuStreamCreate(CUstream* stream, unsigned int) noexcept {
  Ctx* c = Current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  if (!stream) return CUDA_ERROR_INVALID_VALUE;
  *stream = reinterpret_cast<CUstream>(NewFakeStream(c->phys));
  return CUDA_SUCCESS;
}
CUresult cuStreamDestroy_v2(CUstream stream) noexcept {
  delete reinterpret_cast<FakeStream*>(stream);
  return CUDA_SUCCESS;
}
CUresult cuStreamSynchronize(CUstream stream) noexcept {
  if (stream && reinterpret_cast<FakeStream*>(stream)->capture)
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  Ctx* c = Current();
  int phys = stream ? reinterpret_cast<FakeStream*>(stream)->phys : (c ? c->phys : -1);
  if (phys < 0) return CUDA_ERROR_INVALID_CONTEXT;
  WaitUntil(StreamEnd(phys, stream).load());
  FAKE_LOCK();
  return SyncDevice(s, phys);
}
CUresult cuStreamSynchronize_ptsz(CUstream stream) noexcept { return cuStreamSynchronize(stream); }

// ---- VMM ----
CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                     const CUmemAllocationProp* prop, unsigned long long flags) noexcept {
  FAKE_LOCK();
  if (!handle || !prop || flags != 0 || size == 0 || size % kGranularity != 0)
    return CUDA_ERROR_INVALID_VALUE;
  int phys = -1;
  switch (prop->location.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      phys = PhysOf(s, prop->location.id);
      if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
      if (!Take(s, phys, size)) return CUDA_ERROR_OUT_OF_MEMORY;
      break;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  CUmemGenericAllocationHandle h = s.next_handle++;
  s.vmm[h] = VmmHandle{phys, size};
  s.vmm[h].handle_types = prop->requestedHandleTypes;
  *handle = h;
  return CUDA_SUCCESS;
}
// A handle's memory goes when it is released and unmapped and no handle imported from it is
// left; an imported handle then lets its origin go (the physical memory is the origin's).
static void MaybeFreeHandle(State& s, CUmemGenericAllocationHandle h) {
  auto it = s.vmm.find(h);
  if (it == s.vmm.end() || !it->second.released || it->second.mappings > 0 ||
      it->second.imports > 0 || it->second.retains > 0 || it->second.binds > 0)
    return;
  CUmemGenericAllocationHandle origin = it->second.origin;
  if (origin == 0 && !it->second.foreign && it->second.phys >= 0)
    Give(s, it->second.phys, it->second.size);
  s.vmm.erase(it);
  if (auto o = s.vmm.find(origin); origin != 0 && o != s.vmm.end()) {
    o->second.imports--;
    MaybeFreeHandle(s, origin);
  }
}

// VMM shareable handles, POSIX file descriptors only (other types: CUDA_ERROR_NOT_SUPPORTED); the
// allocation must have requested that type at cuMemCreate. The fd is a memfd naming the exporter's
// pid and handle. Imported in the exporting process, the new handle names the same physical
// memory (kept until both are released and unmapped); imported in another process it takes no
// device memory there (the memory is the exporter's; contents are not shared in the fake).
CUresult cuMemExportToShareableHandle(void* shareable, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType type,
                                      unsigned long long flags) noexcept {
  FAKE_LOCK();
  auto it = s.vmm.find(handle);
  if (!shareable || flags != 0 || it == s.vmm.end() || it->second.released)
    return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  if (!(it->second.handle_types & type) || it->second.phys < 0) return CUDA_ERROR_INVALID_VALUE;
  int fd = ::memfd_create("fake-cuda-vmm", MFD_CLOEXEC);
  VmmExport e{kVmmExportMagic, static_cast<uint32_t>(getpid()), handle, it->second.size,
              it->second.phys};
  if (fd < 0 || ::pwrite(fd, &e, sizeof(e), 0) != static_cast<ssize_t>(sizeof(e))) {
    if (fd >= 0) ::close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *static_cast<int*>(shareable) = fd;
  return CUDA_SUCCESS;
}
// `os_handle` is the file descriptor itself, cast to a pointer.
CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* os_handle,
                                        CUmemAllocationHandleType type) noexcept {
  FAKE_LOCK();
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  VmmExport e{};
  int fd = static_cast<int>(reinterpret_cast<intptr_t>(os_handle));
  if (::pread(fd, &e, sizeof(e), 0) != static_cast<ssize_t>(sizeof(e)) ||
      e.magic != kVmmExportMagic)
    return CUDA_ERROR_INVALID_VALUE;
  VmmHandle v{e.phys, e.size};
  auto o = s.vmm.find(e.handle);
  if (e.pid == static_cast<uint32_t>(getpid())) {
    if (o == s.vmm.end() || o->second.origin != 0 || o->second.foreign)
      return CUDA_ERROR_INVALID_VALUE;
    o->second.imports++;
    v.origin = e.handle;
  } else {
    v.foreign = true;
  }
  CUmemGenericAllocationHandle h = s.next_handle++;
  s.vmm[h] = v;
  *handle = h;
  return CUDA_SUCCESS;
}
// A release drops a retain first (cuMemRetainAllocationHandle: "released with corresponding
// number of calls to cuMemRelease"), then the creator's reference.
CUresult cuMemRelease(CUmemGenericAllocationHandle handle) noexcept {
  FAKE_LOCK();
  auto it = s.vmm.find(handle);
  if (it == s.vmm.end() || (it->second.released && it->second.retains == 0))
    return CUDA_ERROR_INVALID_VALUE;
  if (it->second.retains > 0)
    it->second.retains--;
  else
    it->second.released = true;
  if (it->second.multicast && it->second.released) {  // the object goes: its bindings too
    for (auto b = s.mc_binds.begin(); b != s.mc_binds.end();) {
      if (std::get<0>(b->first) != handle) {
        ++b;
        continue;
      }
      CUmemGenericAllocationHandle mem = b->second;
      b = s.mc_binds.erase(b);
      s.vmm[mem].binds--;
      MaybeFreeHandle(s, mem);
    }
  }
  MaybeFreeHandle(s, handle);
  return CUDA_SUCCESS;
}

// ---- Multicast objects (CUDA 12.1; the fake's model): a handle of its own released with
// cuMemRelease, taking no device memory; a binding keeps the bound VMM memory alive (as a
// mapping does) until it is unbound or the multicast object is released.
CUresult cuMulticastCreate(CUmemGenericAllocationHandle* mc,
                           const CUmulticastObjectProp* prop) noexcept {
  FAKE_LOCK();
  if (!mc || !prop || prop->numDevices == 0 || prop->size == 0 || prop->size % kGranularity != 0)
    return CUDA_ERROR_INVALID_VALUE;
  CUmemGenericAllocationHandle h = s.next_handle++;
  s.vmm[h] = VmmHandle{-1, prop->size};
  s.vmm[h].multicast = true;
  *mc = h;
  return CUDA_SUCCESS;
}
CUresult cuMulticastAddDevice(CUmemGenericAllocationHandle mc, CUdevice dev) noexcept {
  FAKE_LOCK();
  auto it = s.vmm.find(mc);
  if (it == s.vmm.end() || !it->second.multicast) return CUDA_ERROR_INVALID_VALUE;
  return PhysOf(s, dev) < 0 ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}
CUresult cuMulticastGetGranularity(size_t* granularity, const CUmulticastObjectProp* prop,
                                   CUmulticastGranularity_flags) noexcept {
  if (!granularity || !prop) return CUDA_ERROR_INVALID_VALUE;
  *granularity = kGranularity;
  return CUDA_SUCCESS;
}
static CUresult McBind(State& s, CUmemGenericAllocationHandle mc, uint64_t mc_offset,
                       CUmemGenericAllocationHandle mem, uint64_t size) {
  auto m = s.vmm.find(mc);
  auto h = s.vmm.find(mem);
  if (m == s.vmm.end() || !m->second.multicast || m->second.released || h == s.vmm.end() ||
      h->second.multicast || h->second.phys < 0 || size == 0 || mc_offset + size > m->second.size)
    return CUDA_ERROR_INVALID_VALUE;
  auto key = std::make_tuple(static_cast<uint64_t>(mc), h->second.phys, mc_offset);
  if (s.mc_binds.count(key)) return CUDA_ERROR_INVALID_VALUE;
  s.mc_binds[key] = mem;
  h->second.binds++;
  return CUDA_SUCCESS;
}
CUresult cuMulticastBindMem(CUmemGenericAllocationHandle mc, size_t mc_offset,
                            CUmemGenericAllocationHandle mem, size_t mem_offset, size_t size,
                            unsigned long long flags) noexcept {
  FAKE_LOCK();
  auto h = s.vmm.find(mem);
  if (flags != 0 || h == s.vmm.end() || h->second.released || mem_offset + size > h->second.size)
    return CUDA_ERROR_INVALID_VALUE;
  return McBind(s, mc, mc_offset, mem, size);
}
CUresult cuMulticastBindAddr(CUmemGenericAllocationHandle mc, size_t mc_offset, CUdeviceptr memptr,
                             size_t size, unsigned long long flags) noexcept {
  FAKE_LOCK();
  auto it = s.maps.upper_bound(memptr);
  if (flags != 0 || it == s.maps.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  if (memptr + size > it->first + it->second.second) return CUDA_ERROR_INVALID_VALUE;
  return McBind(s, mc, mc_offset, it->second.first, size);
}
CUresult cuMulticastUnbind(CUmemGenericAllocationHandle mc, CUdevice dev, size_t mc_offset,
                           size_t) noexcept {
  FAKE_LOCK();
  int phys = PhysOf(s, dev);
  if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
  auto b = s.mc_binds.find(std::make_tuple(static_cast<uint64_t>(mc), phys, mc_offset));
  if (b == s.mc_binds.end()) return CUDA_ERROR_INVALID_VALUE;
  CUmemGenericAllocationHandle mem = b->second;
  s.mc_binds.erase(b);
  s.vmm[mem].binds--;
  MaybeFreeHandle(s, mem);
  return CUDA_SUCCESS;
}
// The handle mapped at `addr` (any address inside a mapping), one more reference (cuda.h).
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) noexcept {
  FAKE_LOCK();
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  auto a = reinterpret_cast<CUdeviceptr>(addr);
  auto it = s.maps.upper_bound(a);
  if (it == s.maps.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  if (a >= it->first + it->second.second) return CUDA_ERROR_INVALID_VALUE;
  s.vmm[it->second.first].retains++;
  *handle = it->second.first;
  return CUDA_SUCCESS;
}
CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t, CUdeviceptr,
                             unsigned long long) noexcept {
  FAKE_LOCK();
  if (!ptr || size == 0 || size % kGranularity != 0) return CUDA_ERROR_INVALID_VALUE;
  *ptr = s.next_va;
  s.reservations[s.next_va] = size;
  s.next_va += RoundUp(size, kGranularity) + kGranularity;
  return CUDA_SUCCESS;
}
CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) noexcept {
  FAKE_LOCK();
  auto it = s.reservations.find(ptr);
  if (it == s.reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  s.reservations.erase(it);
  return CUDA_SUCCESS;
}
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) noexcept {
  FAKE_LOCK();
  auto it = s.vmm.find(handle);
  if (it == s.vmm.end() || it->second.released || flags != 0 || offset != 0 ||
      size != it->second.size || s.maps.count(ptr))
    return CUDA_ERROR_INVALID_VALUE;
  it->second.mappings++;
  s.maps[ptr] = {handle, size};
  return CUDA_SUCCESS;
}
// The range must be "the entire contiguous address range that was mapped to" (cuda.h): one
// mapping, or several adjacent mappings that tile [ptr, ptr + size) exactly; each is unmapped.
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) noexcept {
  FAKE_LOCK();
  const CUdeviceptr end = ptr + size;
  CUdeviceptr at = ptr;
  for (auto it = s.maps.find(ptr); at < end; ++it) {
    if (it == s.maps.end() || it->first != at || it->second.second > end - at)
      return CUDA_ERROR_INVALID_VALUE;
    at += it->second.second;
  }
  if (size == 0) return CUDA_ERROR_INVALID_VALUE;
  while (ptr < end) {
    auto it = s.maps.find(ptr);
    CUmemGenericAllocationHandle h = it->second.first;
    ptr += it->second.second;
    s.maps.erase(it);
    s.vmm[h].mappings--;
    MaybeFreeHandle(s, h);
  }
  return CUDA_SUCCESS;
}

// ---- External memory (another API's allocation imported into CUDA; cuda.h) ----
// The fake's model: the imported allocation occupies device memory (size bytes) on the current
// context's device from the import until the object is destroyed and every buffer and mipmapped
// array mapped from it is freed (cuda.h: those "must be explicitly freed"). Opaque and dma-buf
// file descriptors only (any fd >= 0; other types: CUDA_ERROR_NOT_SUPPORTED).
CUresult cuImportExternalMemory(CUexternalMemory* out,
                                const CUDA_EXTERNAL_MEMORY_HANDLE_DESC* d) noexcept {
  Ctx* c = Current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  FAKE_LOCK();
  if (!out || !d || d->size == 0) return CUDA_ERROR_INVALID_VALUE;
  if (d->type != 1 && d->type != 9) return CUDA_ERROR_NOT_SUPPORTED;
  if (d->handle.fd < 0) return CUDA_ERROR_INVALID_VALUE;
  if (!Take(s, c->phys, d->size)) return CUDA_ERROR_OUT_OF_MEMORY;
  void* obj = new char(0);
  s.ext[obj] = State::ExtMem{c->phys, d->size};
  *out = static_cast<CUexternalMemory>(obj);
  return CUDA_SUCCESS;
}
CUresult cuExternalMemoryGetMappedBuffer(CUdeviceptr* dptr, CUexternalMemory ext,
                                         const CUDA_EXTERNAL_MEMORY_BUFFER_DESC* d) noexcept {
  FAKE_LOCK();
  auto e = s.ext.find(ext);
  if (!dptr || !d || e == s.ext.end() || e->second.destroyed || d->size == 0 ||
      d->offset + d->size > e->second.size)
    return CUDA_ERROR_INVALID_VALUE;
  CUdeviceptr p = HostAlloc(d->size);
  s.allocs[p] = Alloc{e->second.phys, 0, reinterpret_cast<void*>(p), s.next_alloc_serial++};
  s.ext_maps[p] = ext;
  e->second.mapped++;
  *dptr = p;
  return CUDA_SUCCESS;
}
CUresult cuExternalMemoryGetMappedMipmappedArray(
    CUmipmappedArray* mipmap, CUexternalMemory ext,
    const CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC* d) noexcept {
  FAKE_LOCK();
  auto e = s.ext.find(ext);
  if (!mipmap || !d || e == s.ext.end() || e->second.destroyed || d->numLevels == 0)
    return CUDA_ERROR_INVALID_VALUE;
  void* handle = std::malloc(16);
  s.arrays[handle] = {e->second.phys, 0};  // the memory is the object's
  s.ext_maps[reinterpret_cast<uint64_t>(handle)] = ext;
  e->second.mapped++;
  *mipmap = static_cast<CUmipmappedArray>(handle);
  return CUDA_SUCCESS;
}
CUresult cuDestroyExternalMemory(CUexternalMemory ext) noexcept {
  FAKE_LOCK();
  auto e = s.ext.find(ext);
  if (e == s.ext.end() || e->second.destroyed) return CUDA_ERROR_INVALID_HANDLE;
  e->second.destroyed = true;
  ExtMaybeFree(s, ext);
  return CUDA_SUCCESS;
}

// ---- Arrays ----
static CUresult ArrayCreate(void** out, uint64_t w, uint64_t h, uint64_t d, CUarray_format f,
                            unsigned channels, unsigned levels) {
  Ctx* c = Current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  FAKE_LOCK();
  size_t fb = CuArrayFormatBytes(f);
  if (!out || w == 0 || fb == 0 || (channels != 1 && channels != 2 && channels != 4) || levels == 0)
    return CUDA_ERROR_INVALID_VALUE;
  uint64_t bytes = 0;
  for (unsigned l = 0; l < levels; ++l) {
    bytes += std::max<uint64_t>(w >> l, 1) * std::max<uint64_t>(h >> l, 1) *
             std::max<uint64_t>(d >> l, 1) * channels * fb;
  }
  if (!Take(s, c->phys, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  void* handle = std::malloc(16);
  s.arrays[handle] = {c->phys, bytes};
  *out = handle;
  return CUDA_SUCCESS;
}
// One mapping of an external memory object goes (a buffer freed, a mipmapped array destroyed);
// false if `key` maps none. The object's memory goes when it is destroyed and unmapped.
static void ExtMaybeFree(State& s, void* obj) {
  auto e = s.ext.find(obj);
  if (e == s.ext.end() || !e->second.destroyed || e->second.mapped > 0) return;
  Give(s, e->second.phys, e->second.size);
  delete static_cast<char*>(obj);
  s.ext.erase(e);
}
static bool ExtUnmap(State& s, uint64_t key) {
  auto m = s.ext_maps.find(key);
  if (m == s.ext_maps.end()) return false;
  void* obj = m->second;
  s.ext_maps.erase(m);
  s.ext[obj].mapped--;
  ExtMaybeFree(s, obj);
  return true;
}
static void DropTiles(State& s, void* array) {
  for (auto t = s.tiles.begin(); t != s.tiles.end();) {
    if (std::get<0>(t->first) != array) {
      ++t;
      continue;
    }
    CUmemGenericAllocationHandle h = t->second;
    t = s.tiles.erase(t);
    s.vmm[h].mappings--;
    MaybeFreeHandle(s, h);
  }
}
// cuMemMapArrayAsync (the fake's model: any array of ours, any tile): a MAP of a generic handle
// is one mapping of its memory, an UNMAP drops the tile's; applied at once (the stream is not
// modelled). Destroying the array drops its tiles.
static CUresult MapArray(CUarrayMapInfo* list, unsigned int count) {
  FAKE_LOCK();
  if (!list || count == 0) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned int i = 0; i < count; ++i) {
    const CUarrayMapInfo& m = list[i];
    void* array = reinterpret_cast<void*>(m.resource.array);
    if (!s.arrays.count(array) || (m.memOperationType != 1 && m.memOperationType != 2))
      return CUDA_ERROR_INVALID_VALUE;
    auto key = m.subresourceType == 0
                   ? std::make_tuple(
                         array, 0, m.subresource.sparseLevel.level, m.subresource.sparseLevel.layer,
                         0ull + m.subresource.sparseLevel.offsetX,
                         m.subresource.sparseLevel.offsetY, m.subresource.sparseLevel.offsetZ)
                   : std::make_tuple(array, 1, 0u, m.subresource.miptail.layer,
                                     m.subresource.miptail.offset, 0u, 0u);
    if (auto t = s.tiles.find(key); t != s.tiles.end()) {
      CUmemGenericAllocationHandle h = t->second;
      s.tiles.erase(t);
      s.vmm[h].mappings--;
      MaybeFreeHandle(s, h);
    }
    if (m.memOperationType == 2) continue;
    auto h = s.vmm.find(m.memHandle.memHandle);
    if (m.memHandleType != 0 || h == s.vmm.end() || h->second.released || h->second.multicast)
      return CUDA_ERROR_INVALID_VALUE;
    h->second.mappings++;
    s.tiles[key] = m.memHandle.memHandle;
  }
  return CUDA_SUCCESS;
}
CUresult cuMemMapArrayAsync(CUarrayMapInfo* list, unsigned int count, CUstream) noexcept {
  return MapArray(list, count);
}
CUresult cuMemMapArrayAsync_ptsz(CUarrayMapInfo* list, unsigned int count, CUstream) noexcept {
  return MapArray(list, count);
}
static CUresult ArrayDestroy(void* handle) {
  FAKE_LOCK();
  ExtUnmap(s, reinterpret_cast<uint64_t>(handle));
  DropTiles(s, handle);
  auto it = s.arrays.find(handle);
  if (it == s.arrays.end()) return CUDA_ERROR_INVALID_HANDLE;
  Give(s, it->second.first, it->second.second);
  s.arrays.erase(it);
  std::free(handle);
  return CUDA_SUCCESS;
}
CUresult cuArrayCreate_v2(CUarray* array, const CUDA_ARRAY_DESCRIPTOR* d) noexcept {
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  return ArrayCreate(reinterpret_cast<void**>(array), d->Width, d->Height, 1, d->Format,
                     d->NumChannels, 1);
}
CUresult cuArray3DCreate_v2(CUarray* array, const CUDA_ARRAY3D_DESCRIPTOR* d) noexcept {
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  return ArrayCreate(reinterpret_cast<void**>(array), d->Width, d->Height, d->Depth, d->Format,
                     d->NumChannels, 1);
}
CUresult cuMipmappedArrayCreate(CUmipmappedArray* array, const CUDA_ARRAY3D_DESCRIPTOR* d,
                                unsigned int levels) noexcept {
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  return ArrayCreate(reinterpret_cast<void**>(array), d->Width, d->Height, d->Depth, d->Format,
                     d->NumChannels, levels);
}
// Legacy v1 (32-bit extents).
CUresult cuArrayCreate(CUarray* array, const CUDA_ARRAY_DESCRIPTOR_v1* d) noexcept {
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  return ArrayCreate(reinterpret_cast<void**>(array), d->Width, d->Height, 1, d->Format,
                     d->NumChannels, 1);
}
CUresult cuArray3DCreate(CUarray* array, const CUDA_ARRAY3D_DESCRIPTOR_v1* d) noexcept {
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  return ArrayCreate(reinterpret_cast<void**>(array), d->Width, d->Height, d->Depth, d->Format,
                     d->NumChannels, 1);
}
CUresult cuArrayDestroy(CUarray array) noexcept { return ArrayDestroy(array); }
CUresult cuMipmappedArrayDestroy(CUmipmappedArray array) noexcept { return ArrayDestroy(array); }

// ---- Launches ----
#define FAKE_GRID 1ull * gx *gy *gz, 1ull * bx *by *bz, st
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned, CUstream st, void**, void**) noexcept {
  return Launch(f, FAKE_GRID);
}
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned, CUstream st, void**,
                             void**) noexcept {
  return Launch(f, FAKE_GRID);
}
CUresult cuLaunchKernelEx(const CUlaunchConfig* cfg, CUfunction f, void**, void**) noexcept {
  if (!cfg) return CUDA_ERROR_INVALID_VALUE;
  return Launch(f, 1ull * cfg->gridDimX * cfg->gridDimY * cfg->gridDimZ,
                1ull * cfg->blockDimX * cfg->blockDimY * cfg->blockDimZ, cfg->hStream);
}
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* cfg, CUfunction f, void** p,
                               void** e) noexcept {
  return cuLaunchKernelEx(cfg, f, p, e);
}
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                   unsigned by, unsigned bz, unsigned, CUstream st,
                                   void**) noexcept {
  return Launch(f, FAKE_GRID);
}
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                        unsigned bx, unsigned by, unsigned bz, unsigned,
                                        CUstream st, void**) noexcept {
  return Launch(f, FAKE_GRID);
}
// Legacy launches (deprecated in cuda.h, still exported): a 1-block cuLaunch (the fake keeps no
// cuFuncSetBlockShape state: blocks of one thread), a width x height grid, and a multi-device
// cooperative launch, each of its entries on its own stream.
CUresult cuLaunch(CUfunction f) noexcept { return Launch(f); }
CUresult cuLaunchGrid(CUfunction f, int w, int h) noexcept {
  if (w <= 0 || h <= 0) return CUDA_ERROR_INVALID_VALUE;
  return Launch(f, 1ull * static_cast<unsigned>(w) * static_cast<unsigned>(h));
}
CUresult cuLaunchGridAsync(CUfunction f, int w, int h, CUstream st) noexcept {
  if (w <= 0 || h <= 0) return CUDA_ERROR_INVALID_VALUE;
  return Launch(f, 1ull * static_cast<unsigned>(w) * static_cast<unsigned>(h), 1, st);
}
CUresult cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS* list, unsigned int n,
                                              unsigned int) noexcept {
  if (!list || n == 0) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned int i = 0; i < n; ++i) {
    const CUDA_LAUNCH_PARAMS& p = list[i];
    CUresult r = Launch(p.function, 1ull * p.gridDimX * p.gridDimY * p.gridDimZ,
                        1ull * p.blockDimX * p.blockDimY * p.blockDimZ, p.hStream);
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}
// ---- Graphs (the model: "Graphs" above) ----
CUresult cuGraphCreate(CUgraph* graph, unsigned int flags) noexcept {
  FAKE_LOCK();
  if (!graph || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  auto* g = new GraphRec();
  s.graphs.insert(g);
  *graph = reinterpret_cast<CUgraph>(g);
  return CUDA_SUCCESS;
}
// Destroying a graph leaves its executable graphs and live allocations alone.
CUresult cuGraphDestroy(CUgraph graph) noexcept {
  FAKE_LOCK();
  GraphRec* g = KnownGraph(s, graph);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  for (GraphExecRec* e : s.graph_execs)
    if (e->graph == g) e->graph = nullptr;
  for (auto& [ptr, a] : s.graph_allocs)
    if (a.graph == g) a.graph = nullptr;
  for (GraphNodeRec* n : g->nodes) {
    s.graph_nodes.erase(n);
    delete n;
  }
  s.graphs.erase(g);
  delete g;
  return CUDA_SUCCESS;
}
CUresult cuGraphAddEmptyNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                             size_t ndeps) noexcept {
  FAKE_LOCK();
  return AddPlainNode(s, node, graph, deps, ndeps, CU_GRAPH_NODE_TYPE_EMPTY);
}
// Kernel nodes are no-ops here; their parameters (CUDA_KERNEL_NODE_PARAMS v1/v2) are not read.
CUresult cuGraphAddKernelNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                              size_t ndeps, const void* params) noexcept {
  FAKE_LOCK();
  if (!params) return CUDA_ERROR_INVALID_VALUE;
  return AddPlainNode(s, node, graph, deps, ndeps, CU_GRAPH_NODE_TYPE_KERNEL);
}
CUresult cuGraphAddKernelNode_v2(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                                 size_t ndeps, const void* params) noexcept {
  return cuGraphAddKernelNode(node, graph, deps, ndeps, params);
}
CUresult cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                                size_t ndeps, CUDA_MEM_ALLOC_NODE_PARAMS* params) noexcept {
  FAKE_LOCK();
  return AddAllocNode(s, node, graph, deps, ndeps, params);
}
CUresult cuGraphAddMemFreeNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                               size_t ndeps, CUdeviceptr dptr) noexcept {
  FAKE_LOCK();
  return AddFreeNode(s, node, graph, deps, ndeps, dptr);
}
CUresult cuGraphAddNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t ndeps,
                        CUgraphNodeParams* params) noexcept {
  FAKE_LOCK();
  return AddNodeByParams(s, node, graph, deps, ndeps, params);
}
// CUDA 12.3: edge data per dependency (ignored: the fake keeps no edges).
CUresult cuGraphAddNode_v2(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                           const CUgraphEdgeData*, size_t ndeps,
                           CUgraphNodeParams* params) noexcept {
  FAKE_LOCK();
  return AddNodeByParams(s, node, graph, deps, ndeps, params);
}
CUresult cuGraphGetNodes(CUgraph graph, CUgraphNode* nodes, size_t* num_nodes) noexcept {
  FAKE_LOCK();
  GraphRec* g = KnownGraph(s, graph);
  if (!g || !num_nodes) return CUDA_ERROR_INVALID_VALUE;
  if (!nodes) {
    *num_nodes = g->nodes.size();
    return CUDA_SUCCESS;
  }
  size_t n = std::min(*num_nodes, g->nodes.size());
  for (size_t i = 0; i < *num_nodes; ++i)
    nodes[i] = i < n ? reinterpret_cast<CUgraphNode>(g->nodes[i]) : nullptr;
  *num_nodes = n;
  return CUDA_SUCCESS;
}
CUresult cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType* type) noexcept {
  FAKE_LOCK();
  GraphNodeRec* n = KnownNode(s, node);
  if (!n || !type) return CUDA_ERROR_INVALID_VALUE;
  *type = n->type;
  return CUDA_SUCCESS;
}
CUresult cuGraphMemAllocNodeGetParams(CUgraphNode node,
                                      CUDA_MEM_ALLOC_NODE_PARAMS* params) noexcept {
  FAKE_LOCK();
  GraphNodeRec* n = KnownNode(s, node);
  if (!n || n->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC || !params) return CUDA_ERROR_INVALID_VALUE;
  *params = n->alloc;
  return CUDA_SUCCESS;
}
CUresult cuGraphMemFreeNodeGetParams(CUgraphNode node, CUdeviceptr* dptr) noexcept {
  FAKE_LOCK();
  GraphNodeRec* n = KnownNode(s, node);
  if (!n || n->type != CU_GRAPH_NODE_TYPE_MEM_FREE || !dptr) return CUDA_ERROR_INVALID_VALUE;
  *dptr = n->free_dptr;
  return CUDA_SUCCESS;
}
// The legacy 5-argument cuGraphInstantiate (v10000) and its v11000 re-export: no flags; the
// error node and log are cleared (the fake has no structural errors to report).
CUresult cuGraphInstantiate(CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node,
                            char* log_buffer, size_t buffer_size) noexcept {
  FAKE_LOCK();
  if (error_node) *error_node = nullptr;
  if (log_buffer && buffer_size > 0) log_buffer[0] = '\0';
  CUgraphInstantiateResult result;
  return InstantiateGraph(s, exec, graph, 0, false, &result);
}
CUresult cuGraphInstantiate_v2(CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node,
                               char* log_buffer, size_t buffer_size) noexcept {
  return cuGraphInstantiate(exec, graph, error_node, log_buffer, buffer_size);
}
// CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD is a flag of cuGraphInstantiateWithParams only.
CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph,
                                     unsigned long long flags) noexcept {
  FAKE_LOCK();
  if (flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) return CUDA_ERROR_INVALID_VALUE;
  CUgraphInstantiateResult result;
  return InstantiateGraph(s, exec, graph, flags, false, &result);
}
CUresult cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph graph,
                                      CUDA_GRAPH_INSTANTIATE_PARAMS* params) noexcept {
  FAKE_LOCK();
  if (!params) return CUDA_ERROR_INVALID_VALUE;
  CUgraphInstantiateResult result;
  CUresult r = InstantiateGraph(s, exec, graph, params->flags,
                                (params->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) != 0, &result);
  params->hErrNode_out = nullptr;
  params->result_out = result;
  return r;
}
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* exec, CUgraph graph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS* params) noexcept {
  return cuGraphInstantiateWithParams(exec, graph, params);
}
CUresult cuGraphExecGetFlags(CUgraphExec exec, cuuint64_t* flags) noexcept {
  FAKE_LOCK();
  GraphExecRec* e = KnownExec(s, exec);
  if (!e || !flags) return CUDA_ERROR_INVALID_VALUE;
  *flags = e->flags;
  return CUDA_SUCCESS;
}
CUresult cuGraphUpload(CUgraphExec exec, CUstream) noexcept {
  FAKE_LOCK();
  GraphExecRec* e = KnownExec(s, exec);
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  return GraphMap(s, e) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult cuGraphUpload_ptsz(CUgraphExec exec, CUstream st) noexcept {
  return cuGraphUpload(exec, st);
}
// A launch maps the graph if it is not (out of memory: nothing runs), frees what an
// auto-free-on-launch graph left alive (without that flag, unfreed allocations of a previous
// launch make it CUDA_ERROR_INVALID_VALUE, as documented for cuGraphLaunch), then runs as one
// kernel of grid 1 x block 1 times the process's kernel cost.
std::atomic<uint64_t> g_graph_grid{1}, g_graph_block{1};
CUresult cuGraphLaunch(CUgraphExec exec, CUstream st) noexcept {
  {
    FAKE_LOCK();
    GraphExecRec* e = KnownExec(s, exec);
    if (!e) return CUDA_ERROR_INVALID_VALUE;
    bool unfreed = false;
    for (CUdeviceptr p : e->keeps) unfreed |= s.graph_live.count(p) != 0;
    if (unfreed && !(e->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH))
      return CUDA_ERROR_INVALID_VALUE;
    if (!GraphMap(s, e)) return CUDA_ERROR_OUT_OF_MEMORY;
    for (CUdeviceptr p : e->keeps) {
      const GraphAllocRec& a = s.graph_allocs[p];
      s.graph_live[p] = GraphLive{a.phys, a.bytes, e};
    }
    for (CUdeviceptr p : e->frees) s.graph_live.erase(p);
  }
  return Launch(reinterpret_cast<CUfunction>(exec), g_graph_grid.load(), g_graph_block.load(), st);
}
CUresult cuGraphLaunch_ptsz(CUgraphExec g, CUstream st) noexcept { return cuGraphLaunch(g, st); }
// The graph's memory stays reserved in the pool (cuDeviceGraphMemTrim gives it back); what it
// left alive stays allocated until freed.
CUresult cuGraphExecDestroy(CUgraphExec exec) noexcept {
  FAKE_LOCK();
  GraphExecRec* e = KnownExec(s, exec);
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  for (auto& [ptr, live] : s.graph_live)
    if (live.owner == e) live.owner = nullptr;
  if (e->graph) e->graph->execs--;
  s.graph_execs.erase(e);
  delete e;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGraphMemTrim(CUdevice dev) noexcept {
  FAKE_LOCK();
  int phys = PhysOf(s, dev);
  if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
  GraphTrim(s, phys);
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetGraphMemAttribute(CUdevice dev, CUgraphMem_attribute attr,
                                      void* value) noexcept {
  FAKE_LOCK();
  int phys = PhysOf(s, dev);
  if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  const GraphPoolRec& p = s.graph_pool[phys];
  cuuint64_t* out = static_cast<cuuint64_t*>(value);
  switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
      *out = GraphUsed(s, phys);
      break;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
      *out = p.used_high;
      break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
      *out = p.reserved;
      break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
      *out = p.reserved_high;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
// Only the high watermarks can be set, and only to zero (cuda.h).
CUresult cuDeviceSetGraphMemAttribute(CUdevice dev, CUgraphMem_attribute attr,
                                      void* value) noexcept {
  FAKE_LOCK();
  int phys = PhysOf(s, dev);
  if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
  if (!value || *static_cast<cuuint64_t*>(value) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (attr == CU_GRAPH_MEM_ATTR_USED_MEM_HIGH)
    s.graph_pool[phys].used_high = 0;
  else if (attr == CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH)
    s.graph_pool[phys].reserved_high = 0;
  else
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

// ---- Stream capture: allocations and frees become memory nodes, launches kernel nodes ----
CUresult cuStreamBeginCapture(CUstream stream) noexcept { return BeginCapture(stream, 0); }
CUresult cuStreamBeginCapture_ptsz(CUstream stream) noexcept { return BeginCapture(stream, 0); }
CUresult cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode mode) noexcept {
  return BeginCapture(stream, mode);
}
CUresult cuStreamBeginCapture_v2_ptsz(CUstream stream, CUstreamCaptureMode mode) noexcept {
  return BeginCapture(stream, mode);
}
CUresult cuStreamEndCapture(CUstream stream, CUgraph* graph) noexcept {
  FAKE_LOCK();
  FakeStream* fs = Capturing(stream);
  if (!fs || !graph) return CUDA_ERROR_INVALID_VALUE;
  *graph = reinterpret_cast<CUgraph>(fs->capture);
  fs->capture = nullptr;
  fs->capture_last = nullptr;
  return CUDA_SUCCESS;
}
CUresult cuStreamEndCapture_ptsz(CUstream stream, CUgraph* graph) noexcept {
  return cuStreamEndCapture(stream, graph);
}
CUresult cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus* status) noexcept {
  FAKE_LOCK();
  if (!status) return CUDA_ERROR_INVALID_VALUE;
  *status = Capturing(stream) ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
CUresult cuStreamIsCapturing_ptsz(CUstream stream, CUstreamCaptureStatus* status) noexcept {
  return cuStreamIsCapturing(stream, status);
}

// ---- cuGetProcAddress: the driver's variant table (src/vgpu/cuda_variants.def, generated from
// the CUDA 13.0 toolkit) with the fake's function for each ELF name (fake_exports.cc) ----
namespace fracgpu::fakes {
struct FakeVariant {
  const char* base;
  int version;
  int flavour;
  const char* elf;
  void* fn;
};
extern const FakeVariant kFakeVariants[];
extern const int kFakeVariantCount;
}  // namespace fracgpu::fakes

namespace {
// FAKE_CUDA_NEWER_VARIANT=<base>:<version>: the driver has a variant of <base> introduced at
// <version>, newer than the CUDA 13.0 tables know (a future driver); requests at or above it
// get this function, which answers CUDA_ERROR_NOT_SUPPORTED if ever called.
CUresult FakeNewerVariant() noexcept { return CUDA_ERROR_NOT_SUPPORTED; }

// FAKE_CUDA_LOG_PROC=<path>: the logging driver. Every request is appended to <path> as
// "<symbol> <cudaVersion> <flags>" (one write per line, O_APPEND) before it is answered, so
// scripts/cuda-tables/capture_cudart.py can record what NVIDIA's libcudart asks for.
void LogProcRequest(const char* symbol, int cuda_version, cuuint64_t flags) {
  static const char* path = std::getenv("FAKE_CUDA_LOG_PROC");
  if (!path || !symbol) return;
  char line[512];
  int n = std::snprintf(line, sizeof(line), "%s %d %llu\n", symbol, cuda_version,
                        static_cast<unsigned long long>(flags));
  if (n <= 0 || n >= static_cast<int>(sizeof(line))) return;
  int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  ssize_t w = ::write(fd, line, static_cast<size_t>(n));
  (void)w;
  ::close(fd);
}

CUresult ProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                     CUdriverProcAddressQueryResult* status) {
  LogProcRequest(symbol, cuda_version, flags);
  if (!symbol || !pfn || flags > 2) return CUDA_ERROR_INVALID_VALUE;
  int driver = 12080;
  cuDriverGetVersion(&driver);
  if (cuda_version > driver) return CUDA_ERROR_INVALID_VALUE;
  if (const char* nv = std::getenv("FAKE_CUDA_NEWER_VARIANT")) {
    const char* colon = std::strchr(nv, ':');
    if (colon && std::strncmp(nv, symbol, static_cast<size_t>(colon - nv)) == 0 &&
        symbol[colon - nv] == '\0' && cuda_version >= std::atoi(colon + 1)) {
      *pfn = reinterpret_cast<void*>(&FakeNewerVariant);
      if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  }
  if (const char* alias = std::getenv("FAKE_CUDA_ALIAS")) {  // <base>:<version>:<elf>
    const char* c1 = std::strchr(alias, ':');
    const char* c2 = c1 ? std::strchr(c1 + 1, ':') : nullptr;
    if (c2 && std::strncmp(alias, symbol, static_cast<size_t>(c1 - alias)) == 0 &&
        symbol[c1 - alias] == '\0' && cuda_version >= std::atoi(c1 + 1)) {
      for (int i = 0; i < fracgpu::fakes::kFakeVariantCount; ++i) {
        if (std::strcmp(fracgpu::fakes::kFakeVariants[i].elf, c2 + 1) != 0) continue;
        *pfn = fracgpu::fakes::kFakeVariants[i].fn;
        if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
        return CUDA_SUCCESS;
      }
    }
  }
  const bool want_ptsz = flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  const fracgpu::fakes::FakeVariant* best = nullptr;
  bool found_name = false;
  for (int i = 0; i < fracgpu::fakes::kFakeVariantCount; ++i) {
    const fracgpu::fakes::FakeVariant& e = fracgpu::fakes::kFakeVariants[i];
    if (std::strcmp(e.base, symbol) != 0) continue;
    found_name = true;
    if (e.version > cuda_version) continue;
    bool pt = e.flavour != 0;
    if (pt && !want_ptsz) continue;
    if (!best || pt > (best->flavour != 0) ||
        (pt == (best->flavour != 0) && e.version > best->version))
      best = &e;
  }
  *pfn = best ? best->fn : nullptr;
  if (status) {
    *status = best ? CU_GET_PROC_ADDRESS_SUCCESS
                   : (found_name ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                 : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  }
  // Unknown symbols and too-old versions are CUDA_SUCCESS with a null pointer (§7.8).
  return CUDA_SUCCESS;
}
}  // namespace

CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version,
                          cuuint64_t flags) noexcept {
  return ProcAddress(symbol, pfn, cuda_version, flags, nullptr);
}
CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) noexcept {
  return ProcAddress(symbol, pfn, cuda_version, flags, status);
}

// Not modelled, but each its own function answering CUDA_ERROR_NOT_SUPPORTED (not the shared
// stub of fake_exports.cc): libvgpu.so hooks them (hooks_share.cc) and matches the driver's
// cuGetProcAddress answers to its hooks by pointer identity, which one stub shared by many
// names would confuse.
CUresult cuIpcGetEventHandle(CUipcEventHandle*, CUevent) noexcept {
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuIpcOpenEventHandle(CUevent*, CUipcEventHandle) noexcept {
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData*, CUdeviceptr) noexcept {
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuMemPoolImportPointer(CUdeviceptr*, CUmemoryPool, CUmemPoolPtrExportData*) noexcept {
  return CUDA_ERROR_NOT_SUPPORTED;
}

// ---- Checkpoint (cuda.h "CUDA Checkpointing", CUDA 12.8+; semantics from cuda.h 13.0 and
// NVIDIA/cuda-checkpoint's README and issues). A per-process state machine, RUNNING -Lock->
// LOCKED -Checkpoint-> CHECKPOINTED -Restore-> LOCKED -Unlock-> RUNNING; any other transition
// is CUDA_ERROR_ILLEGAL_STATE, the process unchanged. While the process is not RUNNING every
// other call of it blocks (CheckpointGate), and calls of the checkpoint API are answered.
// * Lock waits for submitted work: the caller's virtual time moves to the end of the process's
//   last kernel. With timeoutMs > 0 and work ending later than that (virtual ms), or the API
//   gate held by another thread (fakeCudaCheckpointHoldGate; real ms), it gives up after the
//   timeout with CUDA_ERROR_NOT_READY, the code cuda.h lists for Lock (not CUDA_ERROR_TIMEOUT),
//   leaving the process RUNNING as cuda.h says. timeoutMs 0: no timeout.
// * Checkpoint copies the contents of every cuMemAlloc/Pitch/Managed and pool allocation to host
//   memory, overwrites the device bytes with 0xDB (the fake's device memory is host heap; real
//   device pages would be gone), and releases ALL of the process's device memory (contexts,
//   modules, pools, VMM, arrays included), so cuMemGetInfo of other processes and the fake NVML
//   show it free and the process no longer listed. The caller's time moves by bytes /
//   FAKE_CUDA_CHECKPOINT_MIB_PER_S.
// * Restore takes the memory back, all or nothing: a device lacking the room (every process of
//   FAKE_GPU_STATE_DIR counted) answers CUDA_ERROR_OUT_OF_MEMORY and the process stays
//   CHECKPOINTED (cuda-checkpoint#44, step 5); with FAKE_CUDA_CHECKPOINT_STICKY_OOM=1 every later
//   Restore answers CUDA_ERROR_OPERATING_SYSTEM (#44, step 7). Then the contents come back and
//   the time moves as for Checkpoint. GPU remapping: only pairs naming the same GPU are accepted
//   (others CUDA_ERROR_NOT_SUPPORTED: the fake does not move memory between GPUs).
// * Processes are separate (a child is checkpointed on its own, cuda-checkpoint#28). GetState
//   answers for any process of FAKE_GPU_STATE_DIR (from its proc file). Lock, Checkpoint,
//   Restore and Unlock of another pid are carried out by that process, as the real driver
//   does the work in the target's restore thread: every fake process of FAKE_GPU_STATE_DIR
//   serves them on a thread of its own (from cuInit; an abstract Unix socket named by its
//   pid, CheckpointSocketName), and the caller waits for the answer, which is the target's own
//   call's; the caller's virtual time then moves to the target's end of the call (the copy
//   time). A pid that is no live fake process: CUDA_ERROR_INVALID_VALUE (the fake's choice
//   among cuda.h's codes). GetRestoreThreadId answers the pid (the serving thread stands for
//   the restore thread).
// * FAKE_CUDA_CHECKPOINT=unsupported: every call CUDA_ERROR_NOT_SUPPORTED. Before cuInit:
//   CUDA_ERROR_NOT_INITIALIZED. A reserved field not zero: CUDA_ERROR_INVALID_VALUE.
namespace {

bool CheckpointUnsupported() {
  const char* v = std::getenv("FAKE_CUDA_CHECKPOINT");
  return v && std::strcmp(v, "unsupported") == 0;
}

void PublishCheckpointState(State& s, CUprocessState st) {
  s.ckpt_state = st;
  if (s.published) s.published->ckpt_state.store(static_cast<uint32_t>(st));
  g_ckpt_blocking.store(st != CU_PROCESS_STATE_RUNNING);
  if (st == CU_PROCESS_STATE_RUNNING) s.ckpt_cv.notify_all();
}

// The state of another process of FAKE_GPU_STATE_DIR; false when `pid` is none.
bool OtherProcessState(int pid, CUprocessState* out) {
  const char* dir = std::getenv("FAKE_GPU_STATE_DIR");
  if (!dir || pid <= 0 || ::kill(pid, 0) != 0) return false;
  int fd = ::open((std::string(dir) + "/proc-" + std::to_string(pid)).c_str(), O_RDONLY);
  if (fd < 0) return false;
  FakeProcState st;
  bool ok = ::pread(fd, &st, sizeof(st), 0) == static_cast<ssize_t>(sizeof(st));
  ::close(fd);
  if (ok) *out = static_cast<CUprocessState>(st.ckpt_state.load());
  return ok;
}

// The common checks of Lock, Checkpoint, Restore and Unlock (under State::mu).
CUresult CheckpointTarget(State& s, int pid) {
  if (CheckpointUnsupported()) return CUDA_ERROR_NOT_SUPPORTED;
  if (!s.initialised) return CUDA_ERROR_NOT_INITIALIZED;
  // Another pid's call was forwarded to it (ForwardCheckpointCall) before coming here.
  return pid == getpid() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

bool AllZero(const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i)
    if (b[i]) return false;
  return true;
}

// Moves the caller's virtual time by the copy of `bytes` (FAKE_CUDA_CHECKPOINT_MIB_PER_S).
void CopyTime(uint64_t bytes) {
  const char* v = std::getenv("FAKE_CUDA_CHECKPOINT_MIB_PER_S");
  double mibs = v ? std::strtod(v, nullptr) : 0;
  if (mibs <= 0 || bytes == 0) return;
  auto ns = static_cast<uint64_t>(static_cast<double>(bytes) * 1e9 / (mibs * kMiB));
  WaitUntil(fracgpu::fakes::Me().t.load() + ns);
}

// ---- Another process's checkpoint calls, carried out by that process (see above).
enum class CkptOp : uint32_t { kLock = 1, kCheckpoint, kRestore, kUnlock };
constexpr unsigned kMaxRemoteGpuPairs = 64;  // more pairs than GPUs a fake node has
struct CkptRequest {
  uint32_t op = 0;
  uint32_t has_args = 0;
  unsigned char args[sizeof(CUcheckpointRestoreArgs)] = {};  // the largest of the four
  uint32_t pair_count = 0;
  CUcheckpointGpuPair pairs[kMaxRemoteGpuPairs] = {};
};
struct CkptReply {
  int32_t result = 0;
  uint64_t t_end = 0;  // the target's virtual time after the call
};
static_assert(sizeof(CUcheckpointLockArgs) <= sizeof(CUcheckpointRestoreArgs) &&
              sizeof(CUcheckpointCheckpointArgs) <= sizeof(CUcheckpointRestoreArgs) &&
              sizeof(CUcheckpointUnlockArgs) <= sizeof(CUcheckpointRestoreArgs));

// The abstract socket address of `pid`'s serving thread (per FAKE_GPU_STATE_DIR: the dir's
// hash keeps two tests' processes apart even if a pid is reused).
socklen_t CheckpointSocketName(int pid, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  const char* dir = std::getenv("FAKE_GPU_STATE_DIR");
  const size_t h = std::hash<std::string>{}(dir ? dir : "");
  const int n = std::snprintf(addr->sun_path + 1, sizeof(addr->sun_path) - 1,
                              "fracgpu-fake-ckpt-%zx-%d", h, pid);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

CUresult LocalCheckpointCall(const CkptRequest& rq);  // below: the call on this process

// Held by the serving thread from a request's arrival until its answer is sent. An Unlock
// releases the process's blocked calls before its answer goes out, and the process may then
// finish and exit at once: exit waits on this (atexit) so the caller gets the answer the call
// gave, not a closed connection (seen as CUDA_ERROR_INVALID_VALUE).
std::mutex g_serving_mu;

std::atomic<int> g_serving_pid{0};  // the process whose thread serves (not a forked child)

void AwaitCheckpointAnswer() {
  if (g_serving_pid.load() != getpid()) return;  // a child forked mid-answer: no server here
  std::lock_guard<std::mutex> lk(g_serving_mu);
}

// The serving thread: one request per connection, answered with this process's own call.
void ServeCheckpointCalls(int listener) {
  for (;;) {
    const int c = ::accept(listener, nullptr, nullptr);
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;
    }
    CkptRequest rq;
    CkptReply rp;
    std::lock_guard<std::mutex> answering(g_serving_mu);
    if (::recv(c, &rq, sizeof(rq), MSG_WAITALL) == static_cast<ssize_t>(sizeof(rq))) {
      rp.result = LocalCheckpointCall(rq);
      rp.t_end = fracgpu::fakes::Me().t.load();
      (void)!::send(c, &rp, sizeof(rp), MSG_NOSIGNAL);
    }
    ::close(c);
  }
}

// Started by Initialise when the process shares FAKE_GPU_STATE_DIR with others.
void StartCheckpointServer() {
  const int l = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (l < 0) return;
  sockaddr_un addr;
  const socklen_t len = CheckpointSocketName(getpid(), &addr);
  if (::bind(l, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(l, 8) != 0) {
    ::close(l);
    return;
  }
  g_serving_pid.store(getpid());
  std::atexit(AwaitCheckpointAnswer);
  std::thread(ServeCheckpointCalls, l).detach();
}

// Sends `rq` to `pid`'s serving thread and waits for its answer (no timeout of its own: Lock's
// timeout is the target's, as with the real driver).
CUresult RemoteCheckpointCall(int pid, const CkptRequest& rq) {
  CUprocessState other;
  if (!OtherProcessState(pid, &other)) return CUDA_ERROR_INVALID_VALUE;
  const int c = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c < 0) return CUDA_ERROR_OPERATING_SYSTEM;
  sockaddr_un addr;
  const socklen_t len = CheckpointSocketName(pid, &addr);
  CkptReply rp;
  bool ok = ::connect(c, reinterpret_cast<sockaddr*>(&addr), len) == 0 &&
            ::send(c, &rq, sizeof(rq), MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof(rq)) &&
            ::recv(c, &rp, sizeof(rp), MSG_WAITALL) == static_cast<ssize_t>(sizeof(rp));
  ::close(c);
  if (!ok) return CUDA_ERROR_INVALID_VALUE;  // not serving: no live fake process (any more)
  WaitUntil(rp.t_end);
  return static_cast<CUresult>(rp.result);
}

// A call of the checkpoint API naming another pid: checked here as far as the caller can,
// then carried out by that process.
CUresult ForwardCheckpointCall(int pid, CkptOp op, const void* args, size_t size) {
  if (CheckpointUnsupported()) return CUDA_ERROR_NOT_SUPPORTED;
  {
    State& s = S();
    std::lock_guard<std::mutex> lk(s.mu);
    if (!s.initialised) return CUDA_ERROR_NOT_INITIALIZED;
  }
  CkptRequest rq;
  rq.op = static_cast<uint32_t>(op);
  if (args) {
    rq.has_args = 1;
    std::memcpy(rq.args, args, size);
    if (op == CkptOp::kRestore) {
      const auto* ra = static_cast<const CUcheckpointRestoreArgs*>(args);
      if (ra->gpuPairsCount > kMaxRemoteGpuPairs || (ra->gpuPairsCount > 0 && !ra->gpuPairs))
        return CUDA_ERROR_INVALID_VALUE;
      rq.pair_count = ra->gpuPairsCount;
      for (unsigned i = 0; i < ra->gpuPairsCount; ++i) rq.pairs[i] = ra->gpuPairs[i];
    }
  }
  return RemoteCheckpointCall(pid, rq);
}

}  // namespace

CUresult cuCheckpointProcessGetState(int pid, CUprocessState* state) noexcept {
  if (CheckpointUnsupported()) return CUDA_ERROR_NOT_SUPPORTED;
  State& s = S();
  std::lock_guard<std::mutex> lk(s.mu);
  if (!s.initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (!state) return CUDA_ERROR_INVALID_VALUE;
  if (pid == getpid()) {
    *state = s.ckpt_state;
    return CUDA_SUCCESS;
  }
  return OtherProcessState(pid, state) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuCheckpointProcessGetRestoreThreadId(int pid, int* tid) noexcept {
  if (CheckpointUnsupported()) return CUDA_ERROR_NOT_SUPPORTED;
  State& s = S();
  std::lock_guard<std::mutex> lk(s.mu);
  if (!s.initialised) return CUDA_ERROR_NOT_INITIALIZED;
  CUprocessState other;
  if (!tid || (pid != getpid() && !OtherProcessState(pid, &other))) return CUDA_ERROR_INVALID_VALUE;
  *tid = pid;
  return CUDA_SUCCESS;
}

CUresult cuCheckpointProcessLock(int pid, CUcheckpointLockArgs* args) noexcept {
  if (pid != getpid()) return ForwardCheckpointCall(pid, CkptOp::kLock, args, sizeof(*args));
  State& s = S();
  std::unique_lock<std::mutex> lk(s.mu);
  if (CUresult r = CheckpointTarget(s, pid); r != CUDA_SUCCESS) return r;
  if (args && (args->reserved0 || !AllZero(args->reserved1, sizeof(args->reserved1))))
    return CUDA_ERROR_INVALID_VALUE;
  if (s.ckpt_state != CU_PROCESS_STATE_RUNNING) return CUDA_ERROR_ILLEGAL_STATE;
  const unsigned timeout_ms = args ? args->timeoutMs : 0;
  auto gate_free = [&] { return !s.ckpt_gate_held; };
  if (timeout_ms == 0) {
    s.ckpt_cv.wait(lk, gate_free);
  } else if (!s.ckpt_cv.wait_for(lk, std::chrono::milliseconds(timeout_ms), gate_free)) {
    return CUDA_ERROR_NOT_READY;
  }
  const uint64_t now = fracgpu::fakes::Me().t.load(), end = g_work_end.load();
  if (end > now) {
    const uint64_t timeout_ns = uint64_t{timeout_ms} * 1'000'000;
    if (timeout_ns > 0 && end - now > timeout_ns) {
      WaitUntil(now + timeout_ns);
      return CUDA_ERROR_NOT_READY;
    }
    WaitUntil(end);
  }
  PublishCheckpointState(s, CU_PROCESS_STATE_LOCKED);
  return CUDA_SUCCESS;
}

CUresult cuCheckpointProcessCheckpoint(int pid, CUcheckpointCheckpointArgs* args) noexcept {
  if (pid != getpid()) return ForwardCheckpointCall(pid, CkptOp::kCheckpoint, args, sizeof(*args));
  State& s = S();
  std::lock_guard<std::mutex> lk(s.mu);
  if (CUresult r = CheckpointTarget(s, pid); r != CUDA_SUCCESS) return r;
  if (args && !AllZero(args->reserved, sizeof(args->reserved))) return CUDA_ERROR_INVALID_VALUE;
  if (s.ckpt_state != CU_PROCESS_STATE_LOCKED) return CUDA_ERROR_ILLEGAL_STATE;
  s.ckpt_copies.clear();
  auto aside = [&](void* p, uint64_t n) {
    auto* b = static_cast<unsigned char*>(p);
    s.ckpt_copies.emplace_back(p, std::vector<unsigned char>(b, b + n));
    std::memset(b, 0xDB, n);
  };
  for (auto& [ptr, a] : s.allocs) aside(a.base, a.size);
  for (auto& [ptr, pa] : s.pool_allocs) aside(reinterpret_cast<void*>(ptr), pa.second);
  uint64_t total = 0;
  for (size_t d = 0; d < s.devices.size(); ++d) {
    s.ckpt_bytes[d] = s.used[d];
    total += s.used[d];
    Give(s, static_cast<int>(d), s.used[d]);
    s.ckpt_contexts[d] = s.published ? s.published->contexts[d].exchange(0) : 0;
  }
  CopyTime(total);
  PublishCheckpointState(s, CU_PROCESS_STATE_CHECKPOINTED);
  return CUDA_SUCCESS;
}

CUresult cuCheckpointProcessRestore(int pid, CUcheckpointRestoreArgs* args) noexcept {
  if (pid != getpid()) return ForwardCheckpointCall(pid, CkptOp::kRestore, args, sizeof(*args));
  State& s = S();
  std::lock_guard<std::mutex> lk(s.mu);
  if (CUresult r = CheckpointTarget(s, pid); r != CUDA_SUCCESS) return r;
  if (args && (!AllZero(args->reserved, sizeof(args->reserved)) || args->reserved1 ||
               (args->gpuPairsCount > 0 && !args->gpuPairs)))
    return CUDA_ERROR_INVALID_VALUE;
  if (s.ckpt_state != CU_PROCESS_STATE_CHECKPOINTED) return CUDA_ERROR_ILLEGAL_STATE;
  for (unsigned i = 0; args && i < args->gpuPairsCount; ++i)
    if (std::memcmp(&args->gpuPairs[i].oldUuid, &args->gpuPairs[i].newUuid, sizeof(CUuuid)) != 0)
      return CUDA_ERROR_NOT_SUPPORTED;
  if (s.ckpt_restore_broken) return CUDA_ERROR_OPERATING_SYSTEM;
  for (size_t d = 0; d < s.devices.size(); ++d) {
    if (DeviceUsedAllProcesses(s, static_cast<int>(d)) + s.ckpt_bytes[d] >
        s.devices[d].total_bytes) {
      const char* sticky = std::getenv("FAKE_CUDA_CHECKPOINT_STICKY_OOM");
      if (sticky && std::strcmp(sticky, "1") == 0) s.ckpt_restore_broken = true;
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  uint64_t total = 0;
  for (size_t d = 0; d < s.devices.size(); ++d) {
    s.used[d] += s.ckpt_bytes[d];
    Publish(s, static_cast<int>(d));
    total += s.ckpt_bytes[d];
    s.ckpt_bytes[d] = 0;
    if (s.published) s.published->contexts[d].fetch_add(s.ckpt_contexts[d]);
    s.ckpt_contexts[d] = 0;
  }
  for (auto& [p, bytes] : s.ckpt_copies) std::memcpy(p, bytes.data(), bytes.size());
  s.ckpt_copies.clear();
  CopyTime(total);
  PublishCheckpointState(s, CU_PROCESS_STATE_LOCKED);
  return CUDA_SUCCESS;
}

CUresult cuCheckpointProcessUnlock(int pid, CUcheckpointUnlockArgs* args) noexcept {
  if (pid != getpid()) return ForwardCheckpointCall(pid, CkptOp::kUnlock, args, sizeof(*args));
  State& s = S();
  std::lock_guard<std::mutex> lk(s.mu);
  if (CUresult r = CheckpointTarget(s, pid); r != CUDA_SUCCESS) return r;
  if (args && !AllZero(args->reserved, sizeof(args->reserved))) return CUDA_ERROR_INVALID_VALUE;
  if (s.ckpt_state != CU_PROCESS_STATE_LOCKED) return CUDA_ERROR_ILLEGAL_STATE;
  PublishCheckpointState(s, CU_PROCESS_STATE_RUNNING);
  return CUDA_SUCCESS;
}

namespace {
// The call `rq` names, on this process (the serving thread of another process's call).
CUresult LocalCheckpointCall(const CkptRequest& rq) {
  const int me = getpid();
  switch (static_cast<CkptOp>(rq.op)) {
    case CkptOp::kLock: {
      CUcheckpointLockArgs a;
      std::memcpy(&a, rq.args, sizeof(a));
      return cuCheckpointProcessLock(me, rq.has_args ? &a : nullptr);
    }
    case CkptOp::kCheckpoint: {
      CUcheckpointCheckpointArgs a;
      std::memcpy(&a, rq.args, sizeof(a));
      return cuCheckpointProcessCheckpoint(me, rq.has_args ? &a : nullptr);
    }
    case CkptOp::kRestore: {
      CUcheckpointRestoreArgs a;
      std::memcpy(&a, rq.args, sizeof(a));
      CUcheckpointGpuPair pairs[kMaxRemoteGpuPairs];
      const unsigned n = std::min<unsigned>(rq.pair_count, kMaxRemoteGpuPairs);
      for (unsigned i = 0; i < n; ++i) pairs[i] = rq.pairs[i];
      a.gpuPairs = n > 0 ? pairs : nullptr;
      a.gpuPairsCount = n;
      return cuCheckpointProcessRestore(me, rq.has_args ? &a : nullptr);
    }
    case CkptOp::kUnlock: {
      CUcheckpointUnlockArgs a;
      std::memcpy(&a, rq.args, sizeof(a));
      return cuCheckpointProcessUnlock(me, rq.has_args ? &a : nullptr);
    }
  }
  return CUDA_ERROR_INVALID_VALUE;
}
}  // namespace

/// Test-only: holds (1) or releases (0) the driver's API gate, as a thread inside a long CUDA
/// call would: cuCheckpointProcessLock waits for it (real time, its timeout).
__attribute__((visibility("default"))) void fakeCudaCheckpointHoldGate(int held) noexcept {
  State& s = S();
  std::lock_guard<std::mutex> lk(s.mu);
  s.ckpt_gate_held = held != 0;
  if (!s.ckpt_gate_held) s.ckpt_cv.notify_all();
}

/// Test-only: waits until at least `n` calls of this process are blocked by a checkpoint lock,
/// then returns how many are.
__attribute__((visibility("default"))) int fakeCudaCheckpointAwaitWaiters(int n) noexcept {
  State& s = S();
  std::unique_lock<std::mutex> lk(s.mu);
  s.ckpt_cv.wait(lk, [&] { return s.ckpt_waiters >= n; });
  return s.ckpt_waiters;
}

}  // extern "C"

namespace {
// FAKE_CUDA_CTOR_CALL (fakeCudaCtorRc above).
__attribute__((constructor)) void FakeCudaCallFromConstructor() {
  const char* on = std::getenv("FAKE_CUDA_CTOR_CALL");
  if (!on || std::strcmp(on, "1") != 0) return;
  using Fn = CUresult (*)(int*);
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "cuDriverGetVersion"));
  int version = 0;
  fakeCudaCtorRc = fn ? static_cast<int>(fn(&version)) : -2;
}
}  // namespace
