// Graph memory: allocations made by graph memory nodes (cuGraphAddMemAllocNode, cuGraphAddNode(_v2)
// with CU_GRAPH_NODE_TYPE_MEM_ALLOC, cuMemAllocAsync captured from a stream). The driver keeps
// one graph memory pool per device and process. Physical memory is reserved for an executable
// graph when it is uploaded (cuGraphUpload, or cuGraphInstantiateWithParams with
// CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) or first launched — never at a plain instantiate, when the
// stream it will run in is not known yet — and kept across its launches. cuGraphExecDestroy
// leaves the memory in the pool for the next graph; cuDeviceGraphMemTrim gives back what no
// graph is executing or scheduled to execute; the device's last context going frees it all.
// Like a stream-ordered pool (pools.cc), the graph pool is charged what it reserves
// (CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), not what is live.
//
// An executable graph's need is read at instantiate with the driver's own queries
// (cuGraphGetNodes, cuGraphNodeGetType, cuGraphMemAllocNodeGetParams, and child graphs through
// cuGraphChildGraphNodeGetGraph), so however an allocation node got into the graph, its size and
// device come back from the driver. Its footprint per device is the sum of those sizes, each
// rounded up to kGraphGranule: an upper bound, since the driver may let allocations whose
// lifetimes do not overlap share memory.
//
// Before a call that can make the pool grow (upload, first launch, instantiate with upload),
// the growth it can cause is charged: min(footprint, max(used, resident) + footprint - reserved),
// with used = CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT and resident = the footprints of the
// executable graphs whose memory we saw reserved. If it does not fit, the call is refused with
// CUDA_ERROR_OUT_OF_MEMORY before the driver sees it: nothing is charged or reserved. After the
// call the charge is settled to what the driver reports reserved. A launch of a graph whose
// memory is reserved ("resident") is not accounted at all.
//
// Executable graphs with graph memory are recorded in a fixed open-addressing table whose keys
// are read without a lock (the launch path) and written under a spinlock. Nothing here
// allocates heap memory; the walk at instantiate maps its node list with mmap.
#include <sys/mman.h>

#include "vgpu/accounting.h"
#include "vgpu/interpose.h"
#include "vgpu/spinlock.h"
#include "vgpu/state.h"

using namespace fracgpu::vgpu;

namespace fracgpu::vgpu {
std::atomic<int> g_graph_pending{0};
}  // namespace fracgpu::vgpu

namespace {

constexpr uint64_t kGraphGranule = 2ull << 20;  // bytes; each allocation is rounded up to it
constexpr uint32_t kExecSlots = 1024;           // table slots (a power of two)
constexpr int kMaxExecs = kExecSlots * 3 / 4;   // live executable graphs with graph memory
constexpr uintptr_t kEmptyKey = 0, kDeadKey = 1;
constexpr int kMaxGraphDepth = 8;  // child graphs are walked this deep

struct ExecRecord {
  std::atomic<uintptr_t> key{kEmptyKey};  // the CUgraphExec, kEmptyKey or kDeadKey
  std::atomic<uint32_t> resident{0};      // 1: its memory is reserved (uploaded or launched)
  uint64_t bytes[kMaxDevices];            // footprint per region device; under g_lock
};

struct DevicePool {
  CUdevice ordinal = -1;  // CUDA ordinal; -1 until a graph needed memory on the device
  uint64_t charged = 0;   // bytes of the device's graph reservation charged
};

SpinLock g_lock;
ExecRecord g_execs[kExecSlots];
int g_exec_count = 0, g_dead_count = 0;  // live and deleted keys in g_execs
DevicePool g_pools[kMaxDevices];
std::atomic<bool> g_any_pool{false};  // some DevicePool has an ordinal

struct Guard : SpinGuard {
  Guard() : SpinGuard(g_lock) {}
};

uint32_t FirstSlot(uintptr_t key) {
  return static_cast<uint32_t>(((key >> 4) * 0x9E3779B97F4A7C15ull) >> 54) & (kExecSlots - 1);
}

// The record of `exec`, or nullptr. Lock-free: only keys and `resident` are read.
ExecRecord* Find(CUgraphExec exec) {
  auto key = reinterpret_cast<uintptr_t>(exec);
  if (key <= kDeadKey) return nullptr;
  for (uint32_t i = FirstSlot(key), n = 0; n < kExecSlots; ++n, i = (i + 1) & (kExecSlots - 1)) {
    uintptr_t k = g_execs[i].key.load(std::memory_order_acquire);
    if (k == key) return &g_execs[i];
    if (k == kEmptyKey) return nullptr;
  }
  return nullptr;
}

// Under g_lock.
void SetResident(ExecRecord* r, bool resident) {
  if ((r->resident.load(std::memory_order_relaxed) != 0) == resident) return;
  r->resident.store(resident ? 1 : 0, std::memory_order_relaxed);
  g_graph_pending.fetch_add(resident ? -1 : 1, std::memory_order_relaxed);
}

// Under g_lock.
void Remove(ExecRecord* r) {
  SetResident(r, true);  // leaves the pending count
  r->key.store(kDeadKey, std::memory_order_release);
  --g_exec_count;
  ++g_dead_count;
  if (g_exec_count == 0) {  // no live key: a reader can only miss, whatever it sees
    for (ExecRecord& e : g_execs) e.key.store(kEmptyKey, std::memory_order_relaxed);
    g_dead_count = 0;
  }
}

// Under g_lock. Records `exec` with its footprint; nullptr when the table is full.
ExecRecord* Insert(CUgraphExec exec, const uint64_t* bytes, bool resident) {
  if (ExecRecord* stale = Find(exec)) Remove(stale);  // a handle reused after its context went
  if (g_exec_count >= kMaxExecs) return nullptr;
  auto key = reinterpret_cast<uintptr_t>(exec);
  for (uint32_t i = FirstSlot(key), n = 0; n < kExecSlots; ++n, i = (i + 1) & (kExecSlots - 1)) {
    ExecRecord& r = g_execs[i];
    uintptr_t k = r.key.load(std::memory_order_relaxed);
    if (k != kEmptyKey && k != kDeadKey) continue;
    for (int d = 0; d < kMaxDevices; ++d) r.bytes[d] = bytes[d];
    r.resident.store(1, std::memory_order_relaxed);
    if (k == kDeadKey) --g_dead_count;
    ++g_exec_count;
    r.key.store(key, std::memory_order_release);
    SetResident(&r, resident);
    return &r;
  }
  return nullptr;
}

bool Attr(CUdevice ordinal, CUgraphMem_attribute attr, uint64_t* out) {
  cuuint64_t v = 0;
  if (REAL(cuDeviceGetGraphMemAttribute)(ordinal, attr, &v) != CUDA_SUCCESS) return false;
  *out = v;
  return true;
}

// Under g_lock: brings device `d`'s charge to its graph pool's reservation. Growth that does
// not fit the limit stays uncharged (the memory is taken already) and is retried at the next
// settle; returns false in that case.
bool Settle(int d) {
  DevicePool& p = g_pools[d];
  uint64_t reserved = 0;
  if (p.ordinal < 0 || !Attr(p.ordinal, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved))
    return true;
  if (reserved < p.charged) {
    Uncharge(d, p.charged - reserved);
    p.charged = reserved;
  } else if (reserved > p.charged) {
    if (Charge(d, reserved - p.charged) != CUDA_SUCCESS) return false;
    p.charged = reserved;
  }
  return true;
}

// Under g_lock: after a call that may have reserved, for every device of `bytes`.
void SettleAfter(const uint64_t* bytes, const char* api) {
  for (int d = 0; d < kMaxDevices; ++d) {
    if (bytes[d] != 0 && !Settle(d)) {
      Log(kLogWarning,
          "%s: the graph memory pool of GPU %d grew past the limit; charged when room is made", api,
          d);
    }
  }
}

// Under g_lock: footprints of the resident executable graphs on device `d`.
uint64_t ResidentBytes(int d) {
  uint64_t sum = 0;
  for (const ExecRecord& r : g_execs) {
    uintptr_t k = r.key.load(std::memory_order_relaxed);
    if (k != kEmptyKey && k != kDeadKey && r.resident.load(std::memory_order_relaxed))
      sum += r.bytes[d];
  }
  return sum;
}

// Under g_lock: charges, on every device of `bytes`, the growth of the graph pool that
// reserving `bytes` can cause (file comment). All or nothing: false, with nothing charged,
// when a device's limit does not allow it; the refusal is reported naming `api`.
bool Reserve(const uint64_t* bytes, const char* api) {
  uint64_t pre[kMaxDevices] = {};
  for (int d = 0; d < kMaxDevices; ++d) {
    if (bytes[d] == 0) continue;
    DevicePool& p = g_pools[d];
    Settle(d);
    uint64_t reserved = 0, used = 0;
    Attr(p.ordinal, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved);
    Attr(p.ordinal, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used);
    uint64_t resident = ResidentBytes(d);
    uint64_t in_use = used > resident ? used : resident;
    uint64_t need = in_use + bytes[d] > reserved ? in_use + bytes[d] - reserved : 0;
    if (need > bytes[d]) need = bytes[d];
    need = (need + kGraphGranule - 1) / kGraphGranule * kGraphGranule;
    if (need == 0) continue;
    CUresult c = Charge(d, need);
    if (c != CUDA_SUCCESS) {
      ReconcileStreamPools(d);  // stream-ordered pools may have given memory back
      c = Charge(d, need, ChargeKind::kData, api);
    }
    if (c != CUDA_SUCCESS) {
      for (int u = 0; u < d; ++u) {
        if (pre[u] == 0) continue;
        Uncharge(u, pre[u]);
        g_pools[u].charged -= pre[u];
      }
      return false;
    }
    pre[d] = need;
    p.charged += need;
  }
  return true;
}

// What a graph's allocation nodes need, per region device.
struct Footprint {
  uint64_t bytes[kMaxDevices] = {};
  CUdevice ordinal[kMaxDevices];
  uint64_t total = 0;
  bool denied = false;  // an allocation on a device outside the container
  Footprint() {
    for (CUdevice& o : ordinal) o = -1;
  }
};

// Under g_lock: the devices of `fp` get their pools' ordinals.
void NotePools(const Footprint& fp) {
  for (int d = 0; d < kMaxDevices; ++d) {
    if (fp.bytes[d] == 0 || g_pools[d].ordinal >= 0) continue;
    g_pools[d].ordinal = fp.ordinal[d];
    g_any_pool.store(true, std::memory_order_relaxed);
  }
}

constexpr CUresult kWalkInvalidGraph = -1;  // the driver does not know the graph

// Adds the allocation nodes of `graph` (and of its child graphs) to *fp. CUDA_SUCCESS;
// kWalkInvalidGraph when the driver rejects the top-level graph (the instantiate gets the
// driver's own answer); CUDA_ERROR_OUT_OF_MEMORY when the graph could not be read (logged).
CUresult Walk(CUgraph graph, Footprint* fp, int depth) {
  size_t count = 0;
  CUresult r = REAL(cuGraphGetNodes)(graph, nullptr, &count);
  if (r != CUDA_SUCCESS) {
    if (depth == 0) return kWalkInvalidGraph;
    Log(kLogError, "cannot read a child graph's nodes (CUresult %d): instantiate refused", r);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (count == 0) return CUDA_SUCCESS;
  const size_t len = count * sizeof(CUgraphNode);
  void* mem = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    Log(kLogError, "cannot map %zu bytes for a graph's node list: instantiate refused", len);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  auto* nodes = static_cast<CUgraphNode*>(mem);
  size_t got = count;
  r = REAL(cuGraphGetNodes)(graph, nodes, &got);
  for (size_t i = 0; r == CUDA_SUCCESS && i < got && i < count; ++i) {
    CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
    r = REAL(cuGraphNodeGetType)(nodes[i], &type);
    if (r != CUDA_SUCCESS) break;
    if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
      CUDA_MEM_ALLOC_NODE_PARAMS p{};
      r = REAL(cuGraphMemAllocNodeGetParams)(nodes[i], &p);
      if (r != CUDA_SUCCESS || p.poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE) continue;
      int dev = DeviceIndexForOrdinal(p.poolProps.location.id);
      if (dev == kDenied) fp->denied = true;
      if (dev < 0) continue;  // kUnmanaged: not limited
      uint64_t bytes = (p.bytesize + kGraphGranule - 1) / kGraphGranule * kGraphGranule;
      fp->bytes[dev] += bytes;
      fp->ordinal[dev] = p.poolProps.location.id;
      fp->total += bytes;
    } else if (type == CU_GRAPH_NODE_TYPE_GRAPH) {
      if (depth + 1 >= kMaxGraphDepth) {
        Log(kLogWarning,
            "child graphs nested deeper than %d levels: their memory is charged once reserved",
            kMaxGraphDepth);
        continue;
      }
      CUgraph child = nullptr;
      r = REAL(cuGraphChildGraphNodeGetGraph)(nodes[i], &child);
      if (r == CUDA_SUCCESS) r = Walk(child, fp, depth + 1);
    }
  }
  munmap(mem, len);
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_OUT_OF_MEMORY) {
    Log(kLogError, "cannot read a graph's memory nodes (CUresult %d): instantiate refused", r);
    r = CUDA_ERROR_OUT_OF_MEMORY;
  }
  return r;
}

// Every instantiate entry point: `call` runs the driver's. `upload`: the driver reserves the
// graph's memory within the call (CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD). `api` names the call in
// a refusal.
template <typename Call>
CUresult Instantiate(CUgraphExec* exec, CUgraph graph, bool upload, Call call, const char* api) {
  if (!exec || !graph) return call();  // the driver's own answer
  CUdevice ordinal = -1;
  if (CurrentDeviceIndex(&ordinal) == kUnmanaged && ordinal >= 0)
    return call();  // no limit configured
  Footprint fp;
  CUresult w = Walk(graph, &fp, 0);
  if (w == kWalkInvalidGraph) return call();
  if (w != CUDA_SUCCESS) return w;
  if (fp.denied) return CUDA_ERROR_OUT_OF_MEMORY;
  if (fp.total == 0) return call();  // no graph memory: nothing to account
  if (!upload) {
    CUresult r = call();
    if (r != CUDA_SUCCESS) return r;
    Guard g;
    NotePools(fp);
    if (Insert(*exec, fp.bytes, false)) return r;
    REAL(cuGraphExecDestroy)(*exec);  // cannot be accounted: undone
    *exec = nullptr;
    Log(kLogError, "%s refused: more than %d executable graphs with graph memory", api, kMaxExecs);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Guard g;
  if (g_exec_count >= kMaxExecs) {
    Log(kLogError, "%s refused: more than %d executable graphs with graph memory", api, kMaxExecs);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  NotePools(fp);
  if (!Reserve(fp.bytes, api)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = call();
  SettleAfter(fp.bytes, api);
  if (r == CUDA_SUCCESS) Insert(*exec, fp.bytes, true);
  return r;
}

// Upload and launch: a pending executable graph is charged its growth first (file comment).
template <typename Call>
CUresult Reserving(CUgraphExec exec, Call call, const char* api) {
  if (g_graph_pending.load(std::memory_order_relaxed) == 0) return call();
  ExecRecord* rec = Find(exec);
  if (!rec || rec->resident.load(std::memory_order_relaxed)) return call();
  Guard g;
  rec = Find(exec);
  if (!rec || rec->resident.load(std::memory_order_relaxed)) return call();
  uint64_t bytes[kMaxDevices];
  for (int d = 0; d < kMaxDevices; ++d) bytes[d] = rec->bytes[d];
  if (!Reserve(bytes, api)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = call();
  SettleAfter(bytes, api);
  if (r == CUDA_SUCCESS) SetResident(rec, true);
  return r;
}

}  // namespace

namespace fracgpu::vgpu {

CUresult GraphLaunchReserving(CUgraphExec exec, CUstream stream, bool ptsz) noexcept {
  if (ptsz) {
    return Reserving(
        exec, [&] { return REAL(cuGraphLaunch_ptsz)(exec, stream); },
        "cuGraphLaunch_ptsz's graph memory");
  }
  return Reserving(
      exec, [&] { return REAL(cuGraphLaunch)(exec, stream); }, "cuGraphLaunch's graph memory");
}

void ReconcileGraphMemory(int dev) noexcept {
  if (!g_any_pool.load(std::memory_order_relaxed)) return;
  Guard g;
  for (int d = 0; d < kMaxDevices; ++d)
    if (dev < 0 || d == dev) Settle(d);
}

void GraphsForgetDevice(int dev) noexcept {
  if (dev < 0 || dev >= kMaxDevices) return;
  Guard g;
  Uncharge(dev, g_pools[dev].charged);
  g_pools[dev].charged = 0;
  for (ExecRecord& r : g_execs) {  // the executable graphs went with the context
    uintptr_t k = r.key.load(std::memory_order_relaxed);
    if (k != kEmptyKey && k != kDeadKey && r.bytes[dev] != 0) Remove(&r);
  }
}

void GraphsResetAfterFork() noexcept {
  g_lock.ResetAfterFork();
  for (ExecRecord& r : g_execs) {
    r.key.store(kEmptyKey, std::memory_order_relaxed);
    r.resident.store(0, std::memory_order_relaxed);
  }
  g_exec_count = g_dead_count = 0;
  for (DevicePool& p : g_pools) p = DevicePool{};
  g_any_pool.store(false, std::memory_order_relaxed);
  g_graph_pending.store(0, std::memory_order_relaxed);
}

}  // namespace fracgpu::vgpu

// ---- Instantiation: every variant with its own signature (cudaTypedefs.h) ----
// The legacy 5-argument cuGraphInstantiate (PFN_cuGraphInstantiate_v10000) and its v11000
// re-export cuGraphInstantiate_v2 take no flags: they never upload.
FRACGPU_EXPORT CUresult cuGraphInstantiate(CUgraphExec* exec, CUgraph graph,
                                           CUgraphNode* error_node, char* log_buffer,
                                           size_t buffer_size) noexcept {
  return Instantiate(
      exec, graph, false,
      [&] { return REAL(cuGraphInstantiate)(exec, graph, error_node, log_buffer, buffer_size); },
      "cuGraphInstantiate");
}
FRACGPU_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec* exec, CUgraph graph,
                                              CUgraphNode* error_node, char* log_buffer,
                                              size_t buffer_size) noexcept {
  return Instantiate(
      exec, graph, false,
      [&] { return REAL(cuGraphInstantiate_v2)(exec, graph, error_node, log_buffer, buffer_size); },
      "cuGraphInstantiate_v2");
}
FRACGPU_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph,
                                                    unsigned long long flags) noexcept {
  return Instantiate(
      exec, graph, false, [&] { return REAL(cuGraphInstantiateWithFlags)(exec, graph, flags); },
      "cuGraphInstantiateWithFlags");
}
namespace {
// cuGraphInstantiateWithParams(_ptsz): a refusal reports in the parameters as a failing driver
// does (CUDA_GRAPH_INSTANTIATE_ERROR: "described by the return value"; no error node).
template <typename Call>
CUresult InstantiateWithParams(CUgraphExec* exec, CUgraph graph,
                               CUDA_GRAPH_INSTANTIATE_PARAMS* params, Call call, const char* api) {
  if (!params) return call();
  CUresult r = Instantiate(exec, graph, (params->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) != 0,
                           call, api);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    params->hErrNode_out = nullptr;
    params->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
  }
  return r;
}
}  // namespace

FRACGPU_EXPORT CUresult cuGraphInstantiateWithParams(
    CUgraphExec* exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS* params) noexcept {
  return InstantiateWithParams(
      exec, graph, params, [&] { return REAL(cuGraphInstantiateWithParams)(exec, graph, params); },
      "cuGraphInstantiateWithParams's graph memory");
}
FRACGPU_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(
    CUgraphExec* exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS* params) noexcept {
  return InstantiateWithParams(
      exec, graph, params,
      [&] { return REAL(cuGraphInstantiateWithParams_ptsz)(exec, graph, params); },
      "cuGraphInstantiateWithParams_ptsz's graph memory");
}

// ---- Upload, destruction, trim ----
FRACGPU_EXPORT CUresult cuGraphUpload(CUgraphExec exec, CUstream stream) noexcept {
  return Reserving(
      exec, [&] { return REAL(cuGraphUpload)(exec, stream); }, "cuGraphUpload's graph memory");
}
FRACGPU_EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec exec, CUstream stream) noexcept {
  return Reserving(
      exec, [&] { return REAL(cuGraphUpload_ptsz)(exec, stream); },
      "cuGraphUpload_ptsz's graph memory");
}

// The driver keeps the graph's memory in the pool (reusable by the next graph, still charged):
// only the record goes.
FRACGPU_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec) noexcept {
  CUresult r = REAL(cuGraphExecDestroy)(exec);
  if (r != CUDA_SUCCESS || !Find(exec)) return r;
  Guard g;
  if (ExecRecord* rec = Find(exec)) {
    uint64_t bytes[kMaxDevices];
    for (int d = 0; d < kMaxDevices; ++d) bytes[d] = rec->bytes[d];
    Remove(rec);
    SettleAfter(bytes, "cuGraphExecDestroy");
  }
  return r;
}

// The driver gives back what no graph is executing or scheduled to execute, so an idle
// executable graph loses its memory and reserves it again at its next upload or launch: when
// the pool now uses less than the graphs we saw resident hold, they are all pending again.
FRACGPU_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice device) noexcept {
  CUresult r = REAL(cuDeviceGraphMemTrim)(device);
  if (r != CUDA_SUCCESS || !g_any_pool.load(std::memory_order_relaxed)) return r;
  int d = DeviceIndexForOrdinal(device);
  if (d < 0) return r;
  Guard g;
  if (g_pools[d].ordinal < 0) return r;
  Settle(d);
  uint64_t used = 0;
  if (!Attr(g_pools[d].ordinal, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used) ||
      used >= ResidentBytes(d))
    return r;
  for (ExecRecord& rec : g_execs) {
    uintptr_t k = rec.key.load(std::memory_order_relaxed);
    if (k != kEmptyKey && k != kDeadKey && rec.bytes[d] != 0) SetResident(&rec, false);
  }
  return r;
}
