#include "monitor/park_host.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <memory>
#include <utility>

#include "api/region.h"
#include "core/lent.h"
#include "enforce/proc.h"
#include "monitor/container_dirs.h"
#include "monitor/enforcement.h"
#include "monitor/monitor.h"
#include "vgpu/cuda_api.h"

namespace fracgpu::monitor {

// ---- The CUDA driver's checkpoint calls.

Result<node::CheckpointDriver> LoadCheckpointDriver(const std::string& library) {
  void* lib = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = ::dlerror();
    return Unavailable("cannot load the CUDA driver " + library + ": " +
                       (err ? err : "unknown error"));
  }
  using Init = CUresult (*)(unsigned int);
  using GetState = CUresult (*)(int, CUprocessState*);
  using Lock = CUresult (*)(int, CUcheckpointLockArgs*);
  using Checkpoint = CUresult (*)(int, CUcheckpointCheckpointArgs*);
  using Restore = CUresult (*)(int, CUcheckpointRestoreArgs*);
  using Unlock = CUresult (*)(int, CUcheckpointUnlockArgs*);
  const char* const names[] = {"cuInit",
                               "cuCheckpointProcessGetState",
                               "cuCheckpointProcessLock",
                               "cuCheckpointProcessCheckpoint",
                               "cuCheckpointProcessRestore",
                               "cuCheckpointProcessUnlock"};
  void* syms[6] = {};
  for (int i = 0; i < 6; ++i) {
    syms[i] = ::dlsym(lib, names[i]);
    if (syms[i] == nullptr) {
      ::dlclose(lib);  // nothing of it ran yet
      return Unavailable("the CUDA driver " + library + " lacks " + names[i] +
                         " (the checkpoint API needs a CUDA 12.8 or newer driver)");
    }
  }
  const auto init = reinterpret_cast<Init>(syms[0]);
  if (CUresult r = init(0); r != CUDA_SUCCESS) {
    // Kept loaded: the driver ran, and unloading it under its own threads is not safe.
    return Unavailable("cuInit(0) of " + library + " failed: CUresult " + std::to_string(r));
  }
  node::CheckpointDriver d;
  const auto get_state = reinterpret_cast<GetState>(syms[1]);
  const auto lock = reinterpret_cast<Lock>(syms[2]);
  const auto checkpoint = reinterpret_cast<Checkpoint>(syms[3]);
  const auto restore = reinterpret_cast<Restore>(syms[4]);
  const auto unlock = reinterpret_cast<Unlock>(syms[5]);
  d.get_state = [get_state](int pid, int* state) {
    CUprocessState st = CU_PROCESS_STATE_RUNNING;
    CUresult r = get_state(pid, &st);
    if (r == CUDA_SUCCESS) *state = static_cast<int>(st);
    return static_cast<int>(r);
  };
  d.lock = [lock](int pid, unsigned timeout_ms) {
    CUcheckpointLockArgs args{};  // reserved fields zero, as cuda.h requires
    args.timeoutMs = timeout_ms;
    return static_cast<int>(lock(pid, &args));
  };
  d.checkpoint = [checkpoint](int pid) { return static_cast<int>(checkpoint(pid, nullptr)); };
  d.restore = [restore](int pid) { return static_cast<int>(restore(pid, nullptr)); };
  d.unlock = [unlock](int pid) { return static_cast<int>(unlock(pid, nullptr)); };
  return d;
}

// ---- NVML's facts.

NvmlParkFacts::NvmlParkFacts(std::unique_ptr<nvml::Library> lib) : lib_(std::move(lib)) {}

Result<std::unique_ptr<NvmlParkFacts>> NvmlParkFacts::Open(const std::string& library) {
  auto lib = nvml::Library::Open(library, {"nvmlDeviceGetHandleByUUID", "nvmlDeviceGetMemoryInfo"});
  if (!lib.ok()) return lib.status();
  return std::unique_ptr<NvmlParkFacts>(new NvmlParkFacts(std::move(*lib)));
}

Result<nvmlDevice_t> NvmlParkFacts::Handle(const std::string& uuid) const {
  const auto by_uuid =
      lib_->Get<decltype(&::nvmlDeviceGetHandleByUUID)>("nvmlDeviceGetHandleByUUID");
  nvmlDevice_t h = nullptr;
  if (nvmlReturn_t r = by_uuid(uuid.c_str(), &h); r != NVML_SUCCESS)
    return Unavailable(lib_->Error("nvmlDeviceGetHandleByUUID(" + uuid + ")", r));
  return h;
}

node::CheckpointFacts NvmlParkFacts::GpuFacts(const std::string& uuid) const {
  node::CheckpointFacts f;
  auto h = Handle(uuid);
  if (!h.ok()) {
    f.unknown = h.status().message();
    return f;
  }
  auto missing = [&](const char* name) {
    f.unknown = "NVML library " + lib_->path() + " lacks entry point " + name;
    return f;
  };
  const auto version =
      lib_->Get<decltype(&::nvmlSystemGetDriverVersion)>("nvmlSystemGetDriverVersion");
  const auto persistence =
      lib_->Get<decltype(&::nvmlDeviceGetPersistenceMode)>("nvmlDeviceGetPersistenceMode");
  const auto mig = lib_->Get<decltype(&::nvmlDeviceGetMigMode)>("nvmlDeviceGetMigMode");
  const auto mps = lib_->Get<decltype(&::nvmlDeviceGetMPSComputeRunningProcesses_v3)>(
      "nvmlDeviceGetMPSComputeRunningProcesses_v3");
  if (!version) return missing("nvmlSystemGetDriverVersion");
  if (!persistence) return missing("nvmlDeviceGetPersistenceMode");
  if (!mig) return missing("nvmlDeviceGetMigMode");
  if (!mps) return missing("nvmlDeviceGetMPSComputeRunningProcesses_v3");

  char text[kNvmlDriverVersionBufferSize] = {};
  if (nvmlReturn_t r = version(text, sizeof(text)); r != NVML_SUCCESS) {
    f.unknown = lib_->Error("nvmlSystemGetDriverVersion", r);
    return f;
  }
  text[sizeof(text) - 1] = '\0';
  f.driver_version = text;
  nvmlEnableState_t pm = NVML_FEATURE_DISABLED;
  if (nvmlReturn_t r = persistence(*h, &pm); r != NVML_SUCCESS) {
    f.unknown = lib_->Error("nvmlDeviceGetPersistenceMode(" + uuid + ")", r);
    return f;
  }
  f.persistence_mode = pm == NVML_FEATURE_ENABLED;
  unsigned int current = 0, pending = 0;
  if (nvmlReturn_t r = mig(*h, &current, &pending); r == NVML_ERROR_NOT_SUPPORTED) {
    current = NVML_DEVICE_MIG_DISABLE;  // a GPU without MIG (Slurm gpu_nvml.c reads it so)
  } else if (r != NVML_SUCCESS) {
    f.unknown = lib_->Error("nvmlDeviceGetMigMode(" + uuid + ")", r);
    return f;
  }
  // Anything but "disabled" counts as enabled: an unknown mode is never taken for none.
  f.mig_enabled = current != NVML_DEVICE_MIG_DISABLE;
  // The count alone (infos null, count 0): NVML_SUCCESS with 0, or INSUFFICIENT_SIZE with more.
  unsigned int count = 0;
  nvmlReturn_t r = mps(*h, &count, nullptr);
  if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
    f.mps_active = true;
  } else if (r == NVML_SUCCESS) {
    f.mps_active = count > 0;
  } else {
    f.unknown = lib_->Error("nvmlDeviceGetMPSComputeRunningProcesses_v3(" + uuid + ")", r);
  }
  return f;
}

Result<nvmlMemory_t> NvmlParkFacts::MemoryInfo(const std::string& uuid) const {
  auto h = Handle(uuid);
  if (!h.ok()) return h.status();
  const auto info = lib_->Get<decltype(&::nvmlDeviceGetMemoryInfo)>("nvmlDeviceGetMemoryInfo");
  nvmlMemory_t m{};
  if (nvmlReturn_t r = info(*h, &m); r != NVML_SUCCESS)
    return Unavailable(lib_->Error("nvmlDeviceGetMemoryInfo(" + uuid + ")", r));
  return m;
}

Result<uint64_t> NvmlParkFacts::FreeBytes(const std::string& uuid) const {
  auto m = MemoryInfo(uuid);
  if (!m.ok()) return m.status();
  return static_cast<uint64_t>(m->free);
}

Result<uint64_t> NvmlParkFacts::TotalBytes(const std::string& uuid) const {
  auto m = MemoryInfo(uuid);
  if (!m.ok()) return m.status();
  return static_cast<uint64_t>(m->total);
}

// ---- The container's cgroup memory.

namespace {

constexpr size_t kMaxCgroupFile = 64 * 1024;  // /proc/<pid>/cgroup
constexpr size_t kMaxValue = 32;              // memory.max and friends: a number or "max"
constexpr size_t kMaxCgroupPath = 4096;
constexpr uint64_t kV1Unlimited = 1ull << 62;  // v1's "no limit" is PAGE_COUNTER_MAX pages, > 2^62

// Reads at most `max` bytes of the regular file `fd`; more is an error. Closes fd.
Result<std::string> ReadSmall(int fd, size_t max, const std::string& what) {
  std::string out;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(what + " is not a regular file");
  }
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::string err = std::strerror(errno);
      ::close(fd);
      return Unavailable("read " + what + ": " + err);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max) {
      ::close(fd);
      return InvalidArgument(what + " is longer than " + std::to_string(max) + " bytes");
    }
  }
  ::close(fd);
  return out;
}

// Opens the path of `components` (each checked already) under the directory `root`, every
// component with O_NOFOLLOW: no symlink is followed out of root.
Result<int> OpenUnder(const std::string& root, const std::vector<std::string>& components) {
  int dir = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return Unavailable("open " + root + ": " + std::strerror(errno));
  std::string at = root;
  for (size_t i = 0; i < components.size(); ++i) {
    const bool last = i + 1 == components.size();
    int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (last ? O_NONBLOCK : O_DIRECTORY);
    int next = ::openat(dir, components[i].c_str(), flags);
    const int err = errno;
    at += "/" + components[i];
    ::close(dir);
    if (next < 0) return Unavailable("open " + at + ": " + std::strerror(err));
    dir = next;
  }
  return dir;
}

// Splits an absolute cgroup path into components; "." , "..", NUL or control bytes refused.
Result<std::vector<std::string>> PathComponents(const std::string& path) {
  if (path.empty() || path[0] != '/' || path.size() > kMaxCgroupPath)
    return InvalidArgument("cgroup path '" + path.substr(0, 256) + "' is not absolute or too long");
  std::vector<std::string> out;
  size_t pos = 1;
  while (pos <= path.size()) {
    size_t end = path.find('/', pos);
    if (end == std::string::npos) end = path.size();
    std::string c = path.substr(pos, end - pos);
    pos = end + 1;
    if (c.empty()) continue;
    if (c == "." || c == "..")
      return InvalidArgument("cgroup path '" + path.substr(0, 256) + "' has a '" + c +
                             "' component");
    for (unsigned char ch : c)
      if (ch < 0x20 || ch == 0x7f)
        return InvalidArgument("cgroup path '" + path.substr(0, 256) + "' has a control byte");
    out.push_back(std::move(c));
  }
  return out;
}

// A value file: decimal digits (a trailing newline allowed), or "max" where `max_ok`.
// Returns ~0 for "max".
Result<uint64_t> ReadValue(const std::string& root, std::vector<std::string> components,
                           const std::string& file, bool max_ok) {
  components.push_back(file);
  std::string what = root;
  for (const auto& c : components) what += "/" + c;
  auto fd = OpenUnder(root, components);
  if (!fd.ok()) return fd.status();
  auto text = ReadSmall(*fd, kMaxValue, what);
  if (!text.ok()) return text.status();
  std::string v = *text;
  if (!v.empty() && v.back() == '\n') v.pop_back();
  if (max_ok && v == "max") return ~0ull;
  if (v.empty() || v.size() > 20 || v.find_first_not_of("0123456789") != std::string::npos)
    return InvalidArgument(what + " holds '" + v.substr(0, kMaxValue) + "', not a number");
  errno = 0;
  unsigned long long n = std::strtoull(v.c_str(), nullptr, 10);
  if (errno == ERANGE) return InvalidArgument(what + " holds '" + v + "', out of range");
  return static_cast<uint64_t>(n);
}

}  // namespace

HostMemory ReadCgroupMemory(const std::string& proc_root, const std::string& cgroup_root, int pid) {
  HostMemory out;
  if (pid <= 0) {
    out.reason = "pid " + std::to_string(pid) + " is not a host pid";
    return out;
  }
  auto fd = OpenUnder(proc_root, {std::to_string(pid), "cgroup"});
  if (!fd.ok()) {
    out.reason = fd.status().message();
    return out;
  }
  const std::string cgroup_file = proc_root + "/" + std::to_string(pid) + "/cgroup";
  auto text = ReadSmall(*fd, kMaxCgroupFile, cgroup_file);
  if (!text.ok()) {
    out.reason = text.status().message();
    return out;
  }
  std::string v1_path, v2_path;
  bool v1 = false, v2 = false;
  size_t pos = 0;
  while (pos < text->size()) {
    size_t end = text->find('\n', pos);
    if (end == std::string::npos) end = text->size();
    std::string line = text->substr(pos, end - pos);
    pos = end + 1;
    size_t a = line.find(':');
    size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (id == "0" && controllers.empty()) {
      v2 = true;
      v2_path = path;
      continue;
    }
    std::string list = "," + controllers + ",";
    if (list.find(",memory,") != std::string::npos) {
      v1 = true;
      v1_path = path;
    }
  }
  if (!v1 && !v2) {
    out.reason = cgroup_file + " names no memory cgroup (no v1 memory line, no v2 '0::' line)";
    return out;
  }
  const std::string& path = v1 ? v1_path : v2_path;
  auto comps = PathComponents(path);
  if (!comps.ok()) {
    out.reason = cgroup_file + ": " + comps.status().message();
    return out;
  }
  Result<uint64_t> limit = Unavailable("");
  Result<uint64_t> used = Unavailable("");
  if (v1) {
    comps->insert(comps->begin(), "memory");
    limit = ReadValue(cgroup_root, *comps, "memory.limit_in_bytes", false);
    if (limit.ok()) used = ReadValue(cgroup_root, *comps, "memory.usage_in_bytes", false);
  } else {
    limit = ReadValue(cgroup_root, *comps, "memory.max", true);
    if (limit.ok()) used = ReadValue(cgroup_root, *comps, "memory.current", false);
  }
  if (!limit.ok() || !used.ok()) {
    out.reason = (!limit.ok() ? limit : used).status().message();
    return out;
  }
  out.known = true;
  out.limit_bytes = *limit >= kV1Unlimited ? 0 : *limit;  // v1's huge value and v2's "max"
  out.used_bytes = *used;
  return out;
}

ParkHost MakeParkHost(node::CheckpointDriver driver, NvmlParkFacts* nvml,
                      enforce::ProcessSource* processes, std::string proc_root,
                      std::string cgroup_root, std::string limits_dir) {
  ParkHost host;
  host.driver = std::move(driver);
  // The reason a pod's host memory is unknown, logged when it changes (the loop retries every
  // poll; the eligibility reason alone does not name the file).
  auto last_reason = std::make_shared<std::map<std::string, std::string>>();
  host.facts = [nvml, proc_root, cgroup_root, last_reason](const std::string& uuid,
                                                           const std::string& pod_uid,
                                                           const std::vector<int>& pids) {
    node::CheckpointFacts f = nvml->GpuFacts(uuid);
    HostMemory m = ReadCgroupMemory(proc_root, cgroup_root, pids.empty() ? 0 : pids[0]);
    f.host_limit_known = m.known;
    f.host_limit_bytes = m.limit_bytes;
    f.host_used_bytes = m.used_bytes;
    if (m.known) {
      last_reason->erase(pod_uid);
    } else if (std::string& last = (*last_reason)[pod_uid]; last != m.reason) {
      last = m.reason;
      spdlog::warn("parking: pod {}: its memory limit is unknown, so it is not parked: {}", pod_uid,
                   m.reason);
    }
    return f;
  };
  host.free_bytes = [nvml](const std::string& uuid) -> uint64_t {
    auto free = nvml->FreeBytes(uuid);
    if (!free.ok()) {
      spdlog::warn("parking: {}", free.status().message());
      return 0;
    }
    return *free;
  };
  host.total_bytes = [nvml](const std::string& uuid) -> uint64_t {
    auto total = nvml->TotalBytes(uuid);
    return total.ok() ? *total : 0;
  };
  host.grant = [limits_dir](const std::string& dir_name) {
    return ReadSliceGrant(limits_dir, dir_name);
  };
  auto reader = std::make_shared<enforce::ProcReader>(proc_root);
  host.verify_process = [reader, processes](int pid, const ContainerDir& dir, const PodRef* pod,
                                            const std::string& uuid,
                                            bool on_gpu) -> Result<uint64_t> {
    if (pid <= 0) return InvalidArgument("not a process id");
    // The enforcement's mapping: the cgroup's pod UID and container ID, read between two reads
    // of the start time (a PID reused meanwhile is refused).
    auto id = reader->Identify(static_cast<uint32_t>(pid));
    if (!id.ok()) return id.status();
    if (id->cgroup.pod_uid != dir.pod_uid)
      return PermissionDenied("its cgroup is pod " + id->cgroup.pod_uid + "'s, not " + dir.pod_uid +
                              "'s");
    if (pod == nullptr) return Unavailable("pod " + dir.pod_uid + " is not listed");
    std::map<std::string, PodRef> one = {{pod->uid, *pod}};
    const std::optional<std::string> name = NamedContainer(id->cgroup, one);
    if (!name) return Unavailable("the API server does not name its container yet");
    if (*name != dir.container)
      return PermissionDenied("its cgroup is container " + *name + "'s, not " + dir.container +
                              "'s");
    if (on_gpu) {
      if (processes == nullptr) return Unavailable("no NVML process list");
      std::vector<std::string> errors;
      auto gpus = processes->Sample(&errors);
      if (!gpus.ok()) return gpus.status();
      bool listed = false;
      for (const enforce::GpuSample& g : *gpus) {
        if (g.uuid.size() != uuid.size() || !std::equal(g.uuid.begin(), g.uuid.end(), uuid.begin(),
                                                        [](unsigned char a, unsigned char b) {
                                                          return std::tolower(a) == std::tolower(b);
                                                        }))
          continue;
        if (!g.processes_ok) return Unavailable("NVML cannot list the processes of " + uuid);
        for (const enforce::DriverProcess& p : g.processes)
          listed = listed || p.host_pid == static_cast<uint32_t>(pid);
      }
      if (!listed) return PermissionDenied("NVML lists it on no GPU of its grant (" + uuid + ")");
    }
    return id->start_time;
  };
  host.start_time = [reader](int pid) -> Result<uint64_t> {
    if (pid <= 0) return InvalidArgument("not a process id");
    return reader->StartTime(static_cast<uint32_t>(pid));
  };
  // The driver's account the bypass detection reads (NVML's process lists with their memory):
  // the idle-lending fallback's live bytes of a container on its granted GPU.
  host.gpu_processes = [processes]() -> Result<std::vector<enforce::GpuSample>> {
    if (processes == nullptr) return Unavailable("no NVML process list");
    std::vector<std::string> errors;  // a GPU NVML cannot list has processes_ok false
    return processes->Sample(&errors);
  };
  return host;
}

// ---- Metrics.

void ParkedSlices::Publish(std::vector<ParkedSample> slices) {
  std::lock_guard<std::mutex> lock(mu_);
  slices_ = std::move(slices);
}

std::vector<ParkedSample> ParkedSlices::Get() const {
  std::lock_guard<std::mutex> lock(mu_);
  return slices_;
}

void ParkedSlices::PublishCounts(uint64_t evictions, uint64_t reclaim_timeouts, uint64_t refusals) {
  std::lock_guard<std::mutex> lock(mu_);
  evictions_ = evictions;
  reclaim_timeouts_ = reclaim_timeouts;
  refusals_ = refusals;
}

uint64_t ParkedSlices::refusals() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refusals_;
}

uint64_t ParkedSlices::evictions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return evictions_;
}

uint64_t ParkedSlices::reclaim_timeouts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reclaim_timeouts_;
}

void ParkedSlices::PublishIdleLent(std::map<std::string, uint64_t> bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_lent_ = std::move(bytes);
}

std::map<std::string, uint64_t> ParkedSlices::idle_lent() const {
  std::lock_guard<std::mutex> lock(mu_);
  return idle_lent_;
}

void RegisterParkingMetrics(metrics::Registry* registry, const std::string& node,
                            const ParkedSlices* parked) {
  registry->Describe("fracgpu_container_parked", metrics::Type::kGauge,
                     "1 while this node's agent holds the container slice parked (its device "
                     "memory checkpointed to host memory; issue 36); absent otherwise.");
  registry->Describe("fracgpu_container_parked_bytes", metrics::Type::kGauge,
                     "Device memory the park of the container slice released, bytes.");
  registry->Describe("fracgpu_parked_bytes", metrics::Type::kGauge,
                     "Device memory released by every slice parked on this node, bytes.");
  registry->Describe("fracgpu_gpu_idle_lent_bytes", metrics::Type::kGauge,
                     "The never-allocated part (limit - live - margin) that opted-in slices idle "
                     "for --park-idle and not parked lend on the GPU, bytes (docs/reclaim.md).");
  registry->Describe("fracgpu_borrowers_evicted_total", metrics::Type::kCounter,
                     "Borrower pods this agent evicted to give a waking parked container its "
                     "memory back (Event GPUMemoryReclaimed on each).");
  registry->Describe("fracgpu_wake_reclaim_timeouts_total", metrics::Type::kCounter,
                     "Wakes whose borrowers' eviction did not free the memory within "
                     "--park-reclaim-timeout (not restored; the eviction is retried).");
  registry->Describe("fracgpu_park_refusals_total", metrics::Type::kCounter,
                     "Park attempts refused because the slice's grant (its limits file) or a "
                     "process its region names could not be verified (the container's cgroup, "
                     "NVML on the granted GPU); the reason is in the agent's log.");
  registry->AddCollector([node, parked](metrics::Registry::Scrape& s) {
    uint64_t total = 0;
    for (const ParkedSample& p : parked->Get()) {
      const metrics::Labels labels = {{"node", node},
                                      {"namespace", p.namespace_name},
                                      {"pod", p.pod},
                                      {"container", p.container},
                                      {"device_uuid", p.device_uuid}};
      s.Set("fracgpu_container_parked", labels, 1);
      s.Set("fracgpu_container_parked_bytes", labels, static_cast<double>(p.bytes));
      total += p.bytes;
    }
    s.Set("fracgpu_parked_bytes", {{"node", node}}, static_cast<double>(total));
    for (const auto& [uuid, bytes] : parked->idle_lent())
      s.Set("fracgpu_gpu_idle_lent_bytes", {{"node", node}, {"device_uuid", uuid}},
            static_cast<double>(bytes));
    s.Set("fracgpu_borrowers_evicted_total", {{"node", node}},
          static_cast<double>(parked->evictions()));
    s.Set("fracgpu_wake_reclaim_timeouts_total", {{"node", node}},
          static_cast<double>(parked->reclaim_timeouts()));
    s.Set("fracgpu_park_refusals_total", {{"node", node}}, static_cast<double>(parked->refusals()));
  });
}

// ---- Containers an earlier agent left parked.

OrphanWaker::OrphanWaker(ParkHost host, const ParkingOptions& options)
    : host_(std::move(host)),
      parker_(host_.driver, options.allowed_drivers, options.lock_timeout_ms),
      reclaim_timeout_ns_(
          static_cast<uint64_t>(std::max<int64_t>(0, options.reclaim_timeout.count()))) {}

std::set<std::string> OrphanWaker::Poll(const std::vector<ContainerDir>& dirs,
                                        const ParkController& controller,
                                        const std::map<std::string, PodRef>& pods,
                                        uint64_t now_ns) {
  std::set<std::string> still;
  std::set<std::string> seen;
  for (const ContainerDir& dir : dirs) {
    if (controller.parked().count(dir.name)) continue;
    const std::string path = dir.path + "/region.cache";
    auto region = ReadRegionFile(path);
    if (!region.ok() || region->devices.size() != 1 ||
        region->devices[0].park_state != api::kParkParked)
      continue;
    seen.insert(dir.name);
    auto log = [&](const std::string& outcome, bool error) {
      if (last_[dir.name] == outcome) return;
      last_[dir.name] = outcome;
      if (error) {
        spdlog::error("parking: {}: {}", dir.name, outcome);
      } else {
        spdlog::warn("parking: {}: {}", dir.name, outcome);
      }
    };
    // The mark and the pids are the tenant's to write: the GPU and the room come from the grant,
    // and only the container's own processes are touched.
    Result<SliceGrant> grant =
        host_.grant ? host_.grant(dir.name) : Result<SliceGrant>(Unavailable("no grant reader"));
    if (!grant.ok()) {
      still.insert(dir.name);
      log("left parked, not woken: its grant is unknown: " + grant.status().message(), true);
      continue;
    }
    auto pod = pods.find(dir.pod_uid);
    std::vector<int> pids;
    std::vector<uint64_t> start_times;
    std::string refused;
    for (int32_t pid : region->host_pids) {
      if (std::find(pids.begin(), pids.end(), pid) != pids.end()) continue;
      Result<uint64_t> start =
          host_.verify_process
              ? host_.verify_process(pid, dir, pod == pods.end() ? nullptr : &pod->second,
                                     grant->uuid, /*on_gpu=*/false)
              : Result<uint64_t>(Unavailable("no process verifier"));
      if (!start.ok()) {
        refused += (refused.empty() ? "" : "; ") + std::string("pid ") + std::to_string(pid) +
                   ": " + start.status().message();
        continue;
      }
      pids.push_back(pid);
      start_times.push_back(*start);
    }
    if (!refused.empty()) {
      // A pid named that is not the container's own: the region is forged or stale; nothing of
      // it is touched (a process of the container that is parked waits for a later poll).
      still.insert(dir.name);
      log("left parked, not woken: a process it names is not verified: " + refused, true);
      continue;
    }
    std::vector<int> asleep;
    std::vector<uint64_t> asleep_starts;
    bool checkpointed = false;  // some process's memory was released
    std::string unknown;
    for (size_t i = 0; i < pids.size(); ++i) {
      const int pid = pids[i];
      int state = -1;
      const int rc = host_.driver.get_state(pid, &state);
      if (rc != node::kCudaSuccess) {
        unknown += (unknown.empty() ? "" : ", ") + std::string("pid ") + std::to_string(pid) +
                   " (cuCheckpointProcessGetState: CUresult " + std::to_string(rc) + ")";
        continue;
      }
      if (state != node::kProcessStateRunning) {
        asleep.push_back(pid);
        asleep_starts.push_back(start_times[i]);
      }
      if (state == node::kProcessStateCheckpointed) checkpointed = true;
    }
    std::string outcome;
    if (asleep.empty() && !unknown.empty()) {
      // Nothing known asleep, but a process the driver cannot answer for: leave it marked.
      outcome = "left parked: the driver cannot tell the state of " + unknown;
      still.insert(dir.name);
    } else if (asleep.empty()) {
      Status w = WriteParkState(path, 0, api::kParkRunning);
      outcome = w.ok() ? "park_state reset: no process of it is parked" : w.message();
      if (!w.ok()) still.insert(dir.name);
    } else {
      node::ParkTarget t;
      t.pids = asleep;
      const std::string uuid = grant->uuid;
      t.facts = [] { return node::CheckpointFacts{}; };  // Wake reads no facts
      t.free_bytes = [this, uuid] { return host_.free_bytes(uuid); };
      t.same = [this, pids = asleep, starts = asleep_starts](int pid) -> std::string {
        auto at = std::find(pids.begin(), pids.end(), pid);
        if (at == pids.end()) return "not a process verified";
        if (!host_.start_time) return "no start time to check";
        auto now = host_.start_time(pid);
        if (!now.ok()) return now.status().message();
        return *now == starts[static_cast<size_t>(at - pids.begin())] ? "" : "started again";
      };
      // Locked only (the agent died between Lock and Checkpoint): the memory was never
      // released, an Unlock needs none. Otherwise the grant's whole memory on its GPU: at least
      // what the checkpointed processes released (the region's charge is the tenant's to write).
      const uint64_t room = checkpointed ? grant->bytes : 0;
      node::ParkResult r = parker_.Wake(t, room);
      if (r.outcome == node::ParkOutcome::kAwake) {
        Status w = WriteParkState(path, 0, api::kParkRunning);
        outcome = "woken (left parked by an earlier agent)";
        if (!w.ok()) outcome += "; park_state not reset: " + w.message();
        reclaim_since_.erase(dir.name);
      } else {
        outcome = "left parked by an earlier agent, not woken: " + r.reason;
        still.insert(dir.name);
        // No room: the borrowers of the grant's GPU may hold it (an earlier agent lent it).
        // Evicted once for what NVML lacks of the grant, then the wake is tried every poll;
        // after reclaim_timeout without the room, said, counted and evicted again.
        if (r.outcome == node::ParkOutcome::kNoRoom && host_.reclaim) {
          auto since = reclaim_since_.find(dir.name);
          const uint64_t waited =
              since != reclaim_since_.end() && now_ns > since->second ? now_ns - since->second : 0;
          if (since != reclaim_since_.end() && waited < reclaim_timeout_ns_) {
            outcome += "; waiting for the evicted borrowers to free it";
          } else if (since != reclaim_since_.end()) {
            ++reclaim_timeouts_;
            reclaim_since_.erase(since);
            outcome += "; the memory is still not free " + std::to_string(waited / 1'000'000'000) +
                       " s after evicting the GPU's borrowers: not restored, evicting again";
          } else {
            const uint64_t free = host_.free_bytes(uuid);
            const uint64_t need = room > free ? room - free : 0;
            const std::string owner = pod == pods.end()
                                          ? dir.pod_uid
                                          : pod->second.namespace_name + "/" + pod->second.name;
            Result<int> evicted = host_.reclaim(uuid, need, owner);
            reclaim_since_[dir.name] = std::max<uint64_t>(now_ns, 1);
            if (evicted.ok()) {
              evictions_ += static_cast<uint64_t>(std::max(0, *evicted));
              outcome += "; evicted " + std::to_string(*evicted) + " borrower(s) of " + uuid +
                         " for " + std::to_string((need + (1 << 20) - 1) >> 20) + " MiB";
            } else {
              outcome += "; evicting the GPU's borrowers: " + evicted.status().message();
            }
          }
        }
      }
    }
    log(outcome, still.count(dir.name) > 0);
  }
  for (auto it = last_.begin(); it != last_.end();)
    it = seen.count(it->first) ? std::next(it) : last_.erase(it);
  for (auto it = reclaim_since_.begin(); it != reclaim_since_.end();)
    it = still.count(it->first) ? std::next(it) : reclaim_since_.erase(it);
  return still;
}

// ---- The loop.

void RunParkingLoop(ParkController* controller, const ParkingLoopSources& sources,
                    std::chrono::nanoseconds interval, base::StopSignal* stop,
                    ParkedSlices* parked) {
  std::map<std::string, PodRef> pods;
  std::vector<PendingBorrower> borrower;
  uint64_t pods_at = 0, borrower_at = 0;
  bool listed = false, asked = false;
  std::vector<ContainerDir> dirs;
  auto scan = [&] {
    auto s = ScanContainerDirs(sources.containers_root);
    if (s.ok()) {
      dirs = std::move(s->dirs);
    } else {
      spdlog::warn("parking: {}", s.status().message());  // the last scan is kept
    }
  };
  std::unique_ptr<OrphanWaker> orphans;
  if (sources.host && sources.options)
    orphans = std::make_unique<OrphanWaker>(*sources.host, *sources.options);
  auto publish = [&] {
    if (!parked) return;
    std::vector<ParkedSample> out;
    for (const auto& [name, slice] : controller->parked()) {
      ParkedSample p;
      auto c = ParseContainerDirName(name);
      const std::string uid = c.ok() ? c->pod_uid : name;
      p.container = c.ok() ? c->container : "";
      auto pod = pods.find(uid);
      p.namespace_name = pod == pods.end() ? "" : pod->second.namespace_name;
      p.pod = pod == pods.end() ? uid : pod->second.name;
      p.device_uuid = slice.uuid;
      p.bytes = slice.released_bytes;
      out.push_back(std::move(p));
    }
    parked->Publish(std::move(out));
    parked->PublishCounts(
        controller->evictions() + (orphans ? orphans->evictions() : 0),
        controller->reclaim_timeouts() + (orphans ? orphans->reclaim_timeouts() : 0),
        controller->refusals());
    parked->PublishIdleLent(controller->idle_lent());
  };
  // The lent-memory record: `lent_sig` is the last one written, stamped 1 ("" when
  // removed), valid once `lent_ok`.
  std::string lent_sig;
  bool lent_ok = false, lent_tried = false;
  uint64_t lent_at = 0;
  std::string lent_error;
  const auto lend_period = static_cast<uint64_t>(std::max<int64_t>(0, sources.lend_period.count()));
  auto lend = [&](bool final) {
    if (!sources.lend) return;
    const uint64_t now = MonotonicNowNs();
    const int64_t unix_now = sources.unix_now ? sources.unix_now() : std::time(nullptr);
    core::LentMemory lent = final
                                ? core::LentMemory{}
                                : LentFromSlices(controller->parked(), controller->idle_lent(), 1);
    std::string sig = lent.gpus.empty() ? "" : core::FormatLentMemory(lent);
    const bool changed = !lent_ok || sig != lent_sig;
    const bool due = !lent_tried || final ||
                     (changed && (lent_ok || now - lent_at >= 1'000'000'000ull)) ||
                     (!sig.empty() && now - lent_at >= lend_period);
    if (!due) return;
    lent.at_unix = std::max<int64_t>(1, unix_now);
    Status st = sources.lend(sig.empty() ? "" : core::FormatLentMemory(lent));
    lent_tried = true;
    lent_at = now;
    lent_ok = st.ok();
    if (st.ok()) {
      lent_sig = sig;
      if (!lent_error.empty()) spdlog::info("parking: the lent-memory record is written again");
      lent_error.clear();
    } else if (lent_error != st.message()) {
      lent_error = st.message();
      spdlog::warn("parking: writing the node's lent-memory record: {}", lent_error);
    }
  };
  const auto pods_period = static_cast<uint64_t>(sources.pods_period.count());
  const auto borrower_period = static_cast<uint64_t>(sources.borrower_period.count());
  auto clock = [&sources] { return sources.now ? sources.now() : MonotonicNowNs(); };
  do {
    const uint64_t now = MonotonicNowNs();  // the periods are the agent's own time
    if (sources.pods && (!listed || now - pods_at >= pods_period)) {
      auto list = sources.pods->ListNodePods(sources.node_name);
      if (list.ok()) {
        pods.clear();
        for (PodRef& p : *list) pods[p.uid] = std::move(p);
        listed = true;
      } else {
        spdlog::warn("parking: listing the node's pods: {}", list.status().message());
      }
      pods_at = now;
    }
    bool any_opted_in = !sources.opted_in;
    for (const auto& [uid, pod] : pods) any_opted_in = any_opted_in || sources.opted_in(pod);
    if (!any_opted_in) {
      borrower.clear();  // nothing here may park: no need to ask
      asked = false;     // ask at once when a pod opts in
    } else if (sources.borrower_pending && (!asked || now - borrower_at >= borrower_period)) {
      auto b = sources.borrower_pending();
      if (b.ok()) {
        borrower = std::move(*b);
      } else {
        borrower.clear();  // unknown: nothing parks
        spdlog::warn("parking: asking for a pending borrower: {}", b.status().message());
      }
      asked = true;
      borrower_at = now;
    }
    scan();
    if (orphans) {
      // Before the controller: it would take an orphan for a running container.
      std::set<std::string> still = orphans->Poll(dirs, *controller, pods, clock());
      std::vector<ContainerDir> rest;
      for (ContainerDir& d : dirs)
        if (!still.count(d.name)) rest.push_back(d);
      controller->Poll(clock(), rest, pods, borrower);
    } else {
      controller->Poll(clock(), dirs, pods, borrower);
    }
    publish();
    lend(false);
  } while (!stop->WaitFor(interval));
  // Stopping (SIGTERM, a rolling update): wake what this agent parked, as a container that no
  // longer opts in (no pod listed) is woken; a wake without room leaves it parked, logged.
  if (!controller->parked().empty()) {
    scan();
    controller->Poll(clock(), dirs, {}, false);
    for (const auto& [name, slice] : controller->parked())
      spdlog::error(
          "parking: {} stays parked at exit on {}: {}", name, slice.uuid,
          controller->last_outcome().count(name) ? controller->last_outcome().at(name) : "");
    publish();
  }
  lend(true);
}

}  // namespace fracgpu::monitor
