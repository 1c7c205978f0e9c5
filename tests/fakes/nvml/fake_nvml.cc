// Fake libnvidia-ml.so.1: devices and UUIDs from FAKE_GPU_DEVICES (NVML index = list order,
// CUDA_VISIBLE_DEVICES ignored, as with the real NVML), memory and per-process usage from the
// processes publishing in FAKE_GPU_STATE_DIR (fake_gpu.h) plus the graphics processes a test
// declares there (`gfx-<pid>`, GraphicsProcesses below); PIDs as the host sees them
// (FAKE_NVML_HOST_PID_OFFSET emulates a PID namespace), Xid events from the lines a test appends
// to FAKE_GPU_STATE_DIR/xid-events. Return codes and struct layouts:
// docs/design/wire-apis.md §8.
//
// The optional facts the DRA driver publishes answer what an H100 / H200 reports, unless set
// (read on every call):
//   FAKE_NVML_ARCHITECTURE        nvmlDeviceGetArchitecture's value (default 9,
//                                 NVML_DEVICE_ARCH_HOPPER)
//   FAKE_NVML_COMPUTE_CAPABILITY  nvmlDeviceGetCudaComputeCapability's "major.minor" (default
//   "9.0") FAKE_NVML_DRIVER_VERSION      nvmlSystemGetDriverVersion's string (default "580.95.05")
//   FAKE_NVML_NOT_SUPPORTED       comma list of those three entry points that answer
//                                 NVML_ERROR_NOT_SUPPORTED instead
//
// The checkpoint eligibility facts the node agent reads (monitor/park_host.h), read on every
// call, for every device:
//   FAKE_NVML_PERSISTENCE   nvmlDeviceGetPersistenceMode: 1 enabled (default), 0 disabled
//   FAKE_NVML_MIG           nvmlDeviceGetMigMode's current and pending mode: 0 disabled
//                           (default), 1 enabled, "unsupported": NVML_ERROR_NOT_SUPPORTED (a GPU
//                           without MIG)
//   FAKE_NVML_MPS_PIDS      nvmlDeviceGetMPSComputeRunningProcesses_v3's list: a comma list of
//                           pids (each listed with 0 bytes); unset or empty: none
//   FAKE_NVML_FAIL          comma list of those three entry points (and
//                           nvmlSystemGetDriverVersion, nvmlDeviceGetMemoryInfo,
//                           nvmlDeviceGetHandleByUUID) that answer NVML_ERROR_UNKNOWN instead
//
// The GPU link topology (nvmlDeviceGetPciInfo_v3, nvmlDeviceGetTopologyCommonAncestor and the
// NVLink getters) models the box FAKE_GPU_TOPOLOGY names (read on every call); unset, those
// entry points answer NVML_ERROR_NOT_SUPPORTED (no PCI info, no topology: the fake's old
// behaviour):
//   nvlink2x   GPUs paired by an NVLink bridge, 0-1, 2-3, ...: 4 NVLinks from each GPU to its
//              peer (remote device type GPU); every pair shares the CPU (NVML_TOPOLOGY_NODE)
//   nvlink8x   an HGX / DGX box: 18 NVLinks from every GPU to the NVSwitches (remote device
//              type SWITCH, remote PCI id the switch's), all to all; GPUs of the first half of
//              the indices on one CPU socket, the rest on the other (NVML_TOPOLOGY_NODE within
//              a half, NVML_TOPOLOGY_SYSTEM across)
//   pcie       no NVLink; every pair shares the CPU (NVML_TOPOLOGY_NODE)
//   links:<a>-<b>x<n>,...  direct NVLinks: <n> links between GPUs <a> and <b> (indices);
//              every pair shares the CPU
// GPU i's PCI bus id is 00000000:<0x18 + 8i, two hex digits>:00.0.
// Built a second time with FAKE_NVML_WITHOUT_FACTS (fake_nvml_without_facts, an older driver):
// those three entry points and nvmlDeviceGetNvLinkRemoteDeviceType are not exported at all.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "../cuda/fake_clock.h"
#include "../cuda/fake_gpu.h"
#include "api/nvml.h"

// An event set: the devices registered and how many xid-events lines it has delivered.
struct nvmlEventSet_st {
  std::vector<int> registered;
  size_t consumed = 0;
};

namespace {

using fracgpu::fakes::FakeDevice;
using fracgpu::fakes::FakeProcState;

struct Nvml {
  std::vector<FakeDevice> devices = fracgpu::fakes::LoadFakeDevices();
  std::atomic<int> refs{0};
};
Nvml& N() {
  static Nvml* n = new Nvml();
  return *n;
}

// Device handles are 1-based indices disguised as pointers.
nvmlDevice_t Handle(unsigned idx) {
  return reinterpret_cast<nvmlDevice_t>(static_cast<uintptr_t>(idx + 1));
}
int IndexOf(nvmlDevice_t d) {
  auto v = reinterpret_cast<uintptr_t>(d);
  if (v == 0 || v > N().devices.size()) return -1;
  return static_cast<int>(v - 1);
}

// The lines "<NVML index> <xid>" of FAKE_GPU_STATE_DIR/xid-events, in order.
std::vector<std::pair<int, unsigned long long>> XidLines() {
  std::vector<std::pair<int, unsigned long long>> out;
  const char* dir = std::getenv("FAKE_GPU_STATE_DIR");
  if (!dir) return out;
  FILE* f = std::fopen((std::string(dir) + "/xid-events").c_str(), "r");
  if (!f) return out;
  int idx = 0;
  unsigned long long xid = 0;
  while (std::fscanf(f, "%d %llu", &idx, &xid) == 2) out.emplace_back(idx, xid);
  std::fclose(f);
  return out;
}

struct ProcUsage {
  unsigned pid;
  unsigned long long used;
};
// Every live process's usage of NVML device `idx`.
std::vector<ProcUsage> Processes(int idx) {
  std::vector<ProcUsage> out;
  const char* dir = std::getenv("FAKE_GPU_STATE_DIR");
  if (!dir) return out;
  DIR* d = ::opendir(dir);
  if (!d) return out;
  while (auto* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, "proc-", 5) != 0) continue;
    int pid = std::atoi(e->d_name + 5);
    if (kill(pid, 0) != 0) continue;
    std::string path = std::string(dir) + "/" + e->d_name;
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) continue;
    FakeProcState st;
    if (::pread(fd, &st, sizeof(st), 0) == static_cast<ssize_t>(sizeof(st))) {
      unsigned long long used = st.used[idx].load(std::memory_order_relaxed);
      // Listed while it has a context there (as the real NVML lists compute processes) or
      // holds memory; the PID as the host sees it.
      if (used > 0 || st.contexts[idx].load(std::memory_order_relaxed) > 0) {
        out.push_back({static_cast<unsigned>(pid) + fracgpu::fakes::HostPidOffset(), used});
      }
    }
    ::close(fd);
  }
  ::closedir(d);
  return out;
}

// Graphics (OpenGL / Vulkan) processes of NVML device `idx`: files `gfx-<pid>` in
// FAKE_GPU_STATE_DIR, written by a test, one line "<NVML index> <bytes>" per device the
// process holds memory on (the fake CUDA driver never sees such memory), listed while <pid>
// lives.
std::vector<ProcUsage> GraphicsProcesses(int idx) {
  std::vector<ProcUsage> out;
  const char* dir = std::getenv("FAKE_GPU_STATE_DIR");
  if (!dir) return out;
  DIR* d = ::opendir(dir);
  if (!d) return out;
  while (auto* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, "gfx-", 4) != 0) continue;
    int pid = std::atoi(e->d_name + 4);
    if (pid <= 0 || kill(pid, 0) != 0) continue;
    std::string path = std::string(dir) + "/" + e->d_name;
    FILE* f = std::fopen(path.c_str(), "r");
    if (!f) continue;
    int index = -1;
    unsigned long long bytes = 0;
    while (std::fscanf(f, "%d %llu", &index, &bytes) == 2) {
      if (index == idx)
        out.push_back({static_cast<unsigned>(pid) + fracgpu::fakes::HostPidOffset(), bytes});
    }
    std::fclose(f);
  }
  ::closedir(d);
  return out;
}

unsigned long long UsedBytes(int idx) {
  unsigned long long total = 0;
  for (const auto& p : Processes(idx)) total += p.used;
  for (const auto& p : GraphicsProcesses(idx)) total += p.used;
  return total;
}

nvmlReturn_t ListProcesses(const std::vector<ProcUsage>& procs, unsigned int* count,
                           nvmlProcessInfo_t* infos) {
  if (*count < procs.size() || (!infos && !procs.empty())) {
    *count = static_cast<unsigned>(procs.size());
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (size_t k = 0; k < procs.size(); ++k)
    infos[k] = nvmlProcessInfo_t{procs[k].pid, procs[k].used, 0xFFFFFFFFu, 0xFFFFFFFFu};
  *count = static_cast<unsigned>(procs.size());
  return NVML_SUCCESS;
}

// True when FAKE_NVML_FAIL lists `entry_point`.
bool Fails(const char* entry_point) {
  const char* list = std::getenv("FAKE_NVML_FAIL");
  if (!list) return false;
  std::string all = std::string(",") + list + ",";
  return all.find(std::string(",") + entry_point + ",") != std::string::npos;
}

}  // namespace

#define NVML_CHECK_INIT() \
  if (N().refs.load() <= 0) return NVML_ERROR_UNINITIALIZED

extern "C" {

nvmlReturn_t nvmlInit_v2(void) noexcept {
  N().refs.fetch_add(1);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlInitWithFlags(unsigned int) noexcept { return nvmlInit_v2(); }
nvmlReturn_t nvmlShutdown(void) noexcept {
  NVML_CHECK_INIT();
  N().refs.fetch_sub(1);
  return NVML_SUCCESS;
}
const char* nvmlErrorString(nvmlReturn_t r) noexcept {
  switch (r) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NOT_FOUND:
      return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
      return "Argument version mismatch";
    default:
      return "Unknown Error";
  }
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) noexcept {
  NVML_CHECK_INIT();
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  *count = static_cast<unsigned>(N().devices.size());
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) noexcept {
  NVML_CHECK_INIT();
  if (!device || index >= N().devices.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *device = Handle(index);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) noexcept {
  NVML_CHECK_INIT();
  if (!uuid || !device) return NVML_ERROR_INVALID_ARGUMENT;
  if (Fails("nvmlDeviceGetHandleByUUID")) return NVML_ERROR_UNKNOWN;
  for (size_t i = 0; i < N().devices.size(); ++i) {
    if (N().devices[i].uuid == uuid) {
      *device = Handle(static_cast<unsigned>(i));
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) noexcept {
  NVML_CHECK_INIT();
  int i = IndexOf(device);
  if (i < 0 || !index) return NVML_ERROR_INVALID_ARGUMENT;
  *index = static_cast<unsigned>(i);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) noexcept {
  NVML_CHECK_INIT();
  int i = IndexOf(device);
  if (i < 0 || !uuid) return NVML_ERROR_INVALID_ARGUMENT;
  const std::string& u = N().devices[i].uuid;
  if (length < u.size() + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(uuid, u.c_str(), u.size() + 1);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) noexcept {
  NVML_CHECK_INIT();
  int i = IndexOf(device);
  if (i < 0 || !name || length == 0) return NVML_ERROR_INVALID_ARGUMENT;
  std::snprintf(name, length, "%s", N().devices[i].name.c_str());
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) noexcept {
  NVML_CHECK_INIT();
  int i = IndexOf(device);
  if (i < 0 || !memory) return NVML_ERROR_INVALID_ARGUMENT;
  if (Fails("nvmlDeviceGetMemoryInfo")) return NVML_ERROR_UNKNOWN;
  memory->total = N().devices[i].total_bytes;
  memory->used = UsedBytes(i);
  memory->free = memory->used >= memory->total ? 0 : memory->total - memory->used;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) noexcept {
  NVML_CHECK_INIT();
  int i = IndexOf(device);
  if (i < 0 || !memory) return NVML_ERROR_INVALID_ARGUMENT;
  if (memory->version != kNvmlMemoryV2Version) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  memory->total = N().devices[i].total_bytes;
  memory->reserved = 0;
  memory->used = UsedBytes(i);
  memory->free = memory->used >= memory->total ? 0 : memory->total - memory->used;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) noexcept {
  NVML_CHECK_INIT();
  int i = IndexOf(device);
  if (i < 0 || !count) return NVML_ERROR_INVALID_ARGUMENT;
  return ListProcesses(Processes(i), count, infos);
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                      nvmlProcessInfo_t* infos) noexcept {
  NVML_CHECK_INIT();
  int i = IndexOf(device);
  if (i < 0 || !count) return NVML_ERROR_INVALID_ARGUMENT;
  return ListProcesses(GraphicsProcesses(i), count, infos);
}

// The checkpoint eligibility facts (FAKE_NVML_PERSISTENCE, FAKE_NVML_MIG, FAKE_NVML_MPS_PIDS,
// FAKE_NVML_FAIL: the header comment).
nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t* mode) noexcept {
  NVML_CHECK_INIT();
  if (IndexOf(device) < 0 || !mode) return NVML_ERROR_INVALID_ARGUMENT;
  if (Fails("nvmlDeviceGetPersistenceMode")) return NVML_ERROR_UNKNOWN;
  const char* v = std::getenv("FAKE_NVML_PERSISTENCE");
  *mode = v && std::string(v) == "0" ? NVML_FEATURE_DISABLED : NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current,
                                  unsigned int* pending) noexcept {
  NVML_CHECK_INIT();
  if (IndexOf(device) < 0 || !current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
  if (Fails("nvmlDeviceGetMigMode")) return NVML_ERROR_UNKNOWN;
  const char* v = std::getenv("FAKE_NVML_MIG");
  if (v && std::string(v) == "unsupported") return NVML_ERROR_NOT_SUPPORTED;
  *current = *pending =
      v && std::string(v) == "1" ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                        nvmlProcessInfo_t* infos) noexcept {
  NVML_CHECK_INIT();
  if (IndexOf(device) < 0 || !count) return NVML_ERROR_INVALID_ARGUMENT;
  if (Fails("nvmlDeviceGetMPSComputeRunningProcesses_v3")) return NVML_ERROR_UNKNOWN;
  std::vector<ProcUsage> procs;
  const char* v = std::getenv("FAKE_NVML_MPS_PIDS");
  std::string list = std::string(v ? v : "") + ",";
  size_t pos = 0;
  for (size_t end; (end = list.find(',', pos)) != std::string::npos; pos = end + 1) {
    unsigned pid =
        static_cast<unsigned>(std::strtoul(list.substr(pos, end - pos).c_str(), nullptr, 10));
    if (pid != 0) procs.push_back({pid, 0});
  }
  return ListProcesses(procs, count, infos);
}

// Legacy names real programs still call (HAMi-core's cuInit path uses the first two):
// nvmlDeviceGetHandleByIndex (v1, same arguments as _v2), nvmlDeviceGetComputeRunningProcesses
// (v1: nvmlProcessInfo_v1_t {unsigned int pid; unsigned long long usedGpuMemory;}, nvml.h)
// and _v2 (the v2 layout of _v3).
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) noexcept {
  return nvmlDeviceGetHandleByIndex_v2(index, device);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) noexcept {
  return nvmlDeviceGetComputeRunningProcesses_v3(device, count, infos);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int* count,
                                                  nvmlProcessInfo_v1_t* infos) noexcept {
  NVML_CHECK_INIT();
  int i = IndexOf(device);
  if (i < 0 || !count) return NVML_ERROR_INVALID_ARGUMENT;
  std::vector<ProcUsage> procs = Processes(i);
  if (*count < procs.size() || (!infos && !procs.empty())) {
    *count = static_cast<unsigned>(procs.size());
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (size_t k = 0; k < procs.size(); ++k)
    infos[k] = nvmlProcessInfo_v1_t{procs[k].pid, procs[k].used};
  *count = static_cast<unsigned>(procs.size());
  return NVML_SUCCESS;
}

// Utilisation from the virtual clock (tests/fakes/cuda/fake_clock.h). Samples are taken at the
// caller's virtual time, in its simulation turn; timestamps are virtual microseconds. Busy
// time is kept per process, not per device: the fake reports it on every device (tests use
// one device per process).
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t* utilization,
                                             unsigned int* processSamplesCount,
                                             unsigned long long lastSeenTimeStamp) noexcept {
  NVML_CHECK_INIT();
  if (IndexOf(device) < 0 || !processSamplesCount) return NVML_ERROR_INVALID_ARGUMENT;
  namespace fk = fracgpu::fakes;
  fk::ClockTurn();
  fk::ClockState* s = fk::Clock().state;
  uint64_t now = fk::Me().t.load();
  uint64_t from = fk::ClockFromNvmlUs(lastSeenTimeStamp);
  // Like the real NVML, a sample covers at most the last second.
  if (now > 1'000'000'000 && from < now - 1'000'000'000) from = now - 1'000'000'000;
  std::vector<nvmlProcessUtilizationSample_t> out;
  for (const auto& p : s->parts) {
    if (p.pid.load() == 0 || now <= from) continue;
    uint64_t busy = fk::ClockBusy(p, from, now);
    if (busy == 0) continue;
    unsigned pct = static_cast<unsigned>((busy * 100 + (now - from) / 2) / (now - from));
    out.push_back({static_cast<unsigned>(p.pid.load()) + fracgpu::fakes::HostPidOffset(),
                   fk::ClockToNvmlUs(now), pct > 100 ? 100 : pct, 0, 0, 0});
  }
  fk::ClockUnlock(s);
  if (!utilization || *processSamplesCount < out.size()) {
    *processSamplesCount = static_cast<unsigned>(out.size());
    return out.empty() && !utilization ? NVML_ERROR_NOT_FOUND : NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (size_t k = 0; k < out.size(); ++k) utilization[k] = out[k];
  *processSamplesCount = static_cast<unsigned>(out.size());
  return out.empty() ? NVML_ERROR_NOT_FOUND : NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                           nvmlUtilization_t* utilization) noexcept {
  NVML_CHECK_INIT();
  if (IndexOf(device) < 0 || !utilization) return NVML_ERROR_INVALID_ARGUMENT;
  namespace fk = fracgpu::fakes;
  fk::ClockTurn();
  fk::ClockState* s = fk::Clock().state;
  uint64_t now = fk::Me().t.load();
  uint64_t from = now > 1'000'000'000 ? now - 1'000'000'000 : 0;
  uint64_t busy = 0;
  for (const auto& p : s->parts)
    if (p.pid.load() != 0 && now > from) busy += fk::ClockBusy(p, from, now);
  fk::ClockUnlock(s);
  // Sum over processes, capped: kernels of different processes that overlapped count twice
  // (documented approximation of "time with any kernel running").
  unsigned pct = now > from ? static_cast<unsigned>(busy * 100 / (now - from)) : 0;
  utilization->gpu = pct > 100 ? 100 : pct;
  utilization->memory = 0;
  return NVML_SUCCESS;
}

#ifndef FAKE_NVML_WITHOUT_FACTS
}  // extern "C"

namespace {

// True when FAKE_NVML_NOT_SUPPORTED lists `entry_point`.
bool NotSupported(const char* entry_point) {
  const char* list = std::getenv("FAKE_NVML_NOT_SUPPORTED");
  if (!list) return false;
  std::string all = std::string(",") + list + ",";
  return all.find(std::string(",") + entry_point + ",") != std::string::npos;
}

std::string EnvOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

}  // namespace

extern "C" {

// nvml.h: nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t, nvmlDeviceArchitecture_t*),
// nvmlDeviceArchitecture_t being unsigned int.
nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, unsigned int* arch) noexcept {
  NVML_CHECK_INIT();
  if (IndexOf(device) < 0 || !arch) return NVML_ERROR_INVALID_ARGUMENT;
  if (NotSupported("nvmlDeviceGetArchitecture")) return NVML_ERROR_NOT_SUPPORTED;
  *arch =
      static_cast<unsigned>(std::strtoul(EnvOr("FAKE_NVML_ARCHITECTURE", "9").c_str(), nullptr, 0));
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major,
                                                int* minor) noexcept {
  NVML_CHECK_INIT();
  if (IndexOf(device) < 0 || !major || !minor) return NVML_ERROR_INVALID_ARGUMENT;
  if (NotSupported("nvmlDeviceGetCudaComputeCapability")) return NVML_ERROR_NOT_SUPPORTED;
  std::string cc = EnvOr("FAKE_NVML_COMPUTE_CAPABILITY", "9.0");
  if (std::sscanf(cc.c_str(), "%d.%d", major, minor) != 2) return NVML_ERROR_UNKNOWN;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) noexcept {
  NVML_CHECK_INIT();
  if (!version) return NVML_ERROR_INVALID_ARGUMENT;
  if (NotSupported("nvmlSystemGetDriverVersion")) return NVML_ERROR_NOT_SUPPORTED;
  if (Fails("nvmlSystemGetDriverVersion")) return NVML_ERROR_UNKNOWN;
  std::string v = EnvOr("FAKE_NVML_DRIVER_VERSION", "580.95.05");
  if (length < v.size() + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(version, v.c_str(), v.size() + 1);
  return NVML_SUCCESS;
}
#endif  // FAKE_NVML_WITHOUT_FACTS

// Xid events: a test appends lines "<NVML index> <xid>" to FAKE_GPU_STATE_DIR/xid-events; each
// event set delivers every line written after it was created, once, for the devices registered
// with nvmlEventTypeXidCriticalError (the fake's only event type).
nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) noexcept {
  NVML_CHECK_INIT();
  if (!set) return NVML_ERROR_INVALID_ARGUMENT;
  auto* s = new (std::nothrow) nvmlEventSet_st;
  if (!s) return NVML_ERROR_UNKNOWN;
  s->consumed = XidLines().size();
  *set = s;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types,
                                      nvmlEventSet_t set) noexcept {
  NVML_CHECK_INIT();
  int i = IndexOf(device);
  if (i < 0 || !set) return NVML_ERROR_INVALID_ARGUMENT;
  if ((types & ~nvmlEventTypeXidCriticalError) != 0) return NVML_ERROR_NOT_SUPPORTED;
  set->registered.push_back(i);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                 unsigned int timeoutms) noexcept {
  NVML_CHECK_INIT();
  if (!set || !data) return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned waited = 0;; waited += 20) {
    auto lines = XidLines();
    while (set->consumed < lines.size()) {
      auto [idx, xid] = lines[set->consumed++];
      for (int r : set->registered) {
        if (r != idx) continue;
        *data = {};
        data->device = Handle(static_cast<unsigned>(idx));
        data->eventType = nvmlEventTypeXidCriticalError;
        data->eventData = xid;
        return NVML_SUCCESS;
      }
    }
    if (waited >= timeoutms) return NVML_ERROR_TIMEOUT;
    ::usleep(20 * 1000);
  }
}
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) noexcept {
  delete set;
  return NVML_SUCCESS;
}

}  // extern "C"

namespace {

// The far end of one enabled NVLink: a GPU's index, or kSwitch.
constexpr int kSwitch = -1;
constexpr unsigned kFakeLinkSlots = NVML_NVLINK_MAX_LINKS;

struct FakeTopology {
  bool on = false;                      // FAKE_GPU_TOPOLOGY names a box
  std::vector<std::vector<int>> links;  // per GPU: its enabled links' far ends, links 0, 1, ...
  int sockets = 1;                      // GPUs split in index halves over this many sockets
};

// The box FAKE_GPU_TOPOLOGY names for `n` GPUs (off when unset or not understood).
FakeTopology Topology() {
  FakeTopology t;
  const char* env = std::getenv("FAKE_GPU_TOPOLOGY");
  std::string spec = env ? env : "";
  size_t n = N().devices.size();
  t.links.assign(n, {});
  if (spec == "pcie") {
    t.on = true;
  } else if (spec == "nvlink2x") {
    t.on = true;
    for (size_t i = 0; i + 1 < n; i += 2) {
      for (int k = 0; k < 4; ++k) {
        t.links[i].push_back(static_cast<int>(i + 1));
        t.links[i + 1].push_back(static_cast<int>(i));
      }
    }
  } else if (spec == "nvlink8x") {
    t.on = true;
    t.sockets = 2;
    for (auto& l : t.links) l.assign(18, kSwitch);
  } else if (spec.starts_with("links:")) {
    t.on = true;
    std::string list = spec.substr(6) + ",";
    size_t pos = 0;
    for (size_t end; (end = list.find(',', pos)) != std::string::npos; pos = end + 1) {
      unsigned a = 0, b = 0, count = 0;
      if (std::sscanf(list.substr(pos, end - pos).c_str(), "%u-%ux%u", &a, &b, &count) != 3 ||
          a >= n || b >= n || a == b) {
        continue;
      }
      for (unsigned k = 0; k < count; ++k) {
        if (t.links[a].size() < kFakeLinkSlots) t.links[a].push_back(static_cast<int>(b));
        if (t.links[b].size() < kFakeLinkSlots) t.links[b].push_back(static_cast<int>(a));
      }
    }
  }
  return t;
}

void FillPci(nvmlPciInfo_t* pci, unsigned bus) {
  *pci = {};
  pci->domain = 0;
  pci->bus = bus;
  std::snprintf(pci->busId, sizeof(pci->busId), "00000000:%02X:00.0", bus);
  std::snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "0000:%02X:00.0", bus);
}

unsigned GpuBus(int idx) { return 0x18u + 8u * static_cast<unsigned>(idx); }

}  // namespace

extern "C" {

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) noexcept {
  NVML_CHECK_INIT();
  int i = IndexOf(device);
  if (i < 0 || !pci) return NVML_ERROR_INVALID_ARGUMENT;
  if (!Topology().on) return NVML_ERROR_NOT_SUPPORTED;
  FillPci(pci, GpuBus(i));
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                 nvmlGpuTopologyLevel_t* level) noexcept {
  NVML_CHECK_INIT();
  int a = IndexOf(device1), b = IndexOf(device2);
  if (a < 0 || b < 0 || !level) return NVML_ERROR_INVALID_ARGUMENT;
  FakeTopology t = Topology();
  if (!t.on) return NVML_ERROR_NOT_SUPPORTED;
  int n = static_cast<int>(N().devices.size());
  auto socket = [&](int idx) { return idx * t.sockets / n; };
  *level = socket(a) == socket(b) ? NVML_TOPOLOGY_NODE : NVML_TOPOLOGY_SYSTEM;
  return NVML_SUCCESS;
}
// A GPU without NVLink answers NVML_ERROR_NOT_SUPPORTED for every link; one with some answers
// ENABLED for its links and DISABLED for the other slots below NVML_NVLINK_MAX_LINKS.
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t* active) noexcept {
  NVML_CHECK_INIT();
  int i = IndexOf(device);
  if (i < 0 || !active || link >= kFakeLinkSlots) return NVML_ERROR_INVALID_ARGUMENT;
  FakeTopology t = Topology();
  if (!t.on || t.links[i].empty()) return NVML_ERROR_NOT_SUPPORTED;
  *active = link < t.links[i].size() ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t* pci) noexcept {
  NVML_CHECK_INIT();
  int i = IndexOf(device);
  if (i < 0 || !pci || link >= kFakeLinkSlots) return NVML_ERROR_INVALID_ARGUMENT;
  FakeTopology t = Topology();
  if (!t.on || t.links[i].empty()) return NVML_ERROR_NOT_SUPPORTED;
  if (link >= t.links[i].size()) return NVML_ERROR_INVALID_ARGUMENT;
  int far = t.links[i][link];
  // The four NVSwitch chips of an HGX H100 board, links spread over them.
  FillPci(pci, far == kSwitch ? 0xC0u + link % 4 : GpuBus(far));
  return NVML_SUCCESS;
}
#ifndef FAKE_NVML_WITHOUT_FACTS
nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                 nvmlIntNvLinkDeviceType_t* type) noexcept {
  NVML_CHECK_INIT();
  int i = IndexOf(device);
  if (i < 0 || !type || link >= kFakeLinkSlots) return NVML_ERROR_INVALID_ARGUMENT;
  FakeTopology t = Topology();
  if (!t.on || t.links[i].empty()) return NVML_ERROR_NOT_SUPPORTED;
  if (link >= t.links[i].size()) return NVML_ERROR_INVALID_ARGUMENT;
  *type =
      t.links[i][link] == kSwitch ? NVML_NVLINK_DEVICE_TYPE_SWITCH : NVML_NVLINK_DEVICE_TYPE_GPU;
  return NVML_SUCCESS;
}
#endif  // FAKE_NVML_WITHOUT_FACTS

}  // extern "C"
