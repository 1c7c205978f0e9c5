#include "node_agent.h"

#include <openssl/evp.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "../support/files.h"
#include "k8s/objects.h"

namespace fracgpu::e2e {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
constexpr auto kStartWait = std::chrono::seconds(30);
constexpr auto kContainerWait = std::chrono::seconds(30);
constexpr const char* kGpuResource = "nvidia.com/gpu";

struct Mount {
  std::string container_path, host_path;
};

// A container path as the host sees it through the mounts (longest container path wins).
std::string Translate(const std::vector<Mount>& mounts, const std::string& path) {
  const Mount* best = nullptr;
  for (const auto& m : mounts) {
    bool under = path == m.container_path ||
                 (path.size() > m.container_path.size() &&
                  path.compare(0, m.container_path.size(), m.container_path) == 0 &&
                  path[m.container_path.size()] == '/');
    if (under && (best == nullptr || m.container_path.size() > best->container_path.size()))
      best = &m;
  }
  return best == nullptr ? path : best->host_path + path.substr(best->container_path.size());
}

// The container's `nvidia.com/gpu` limit (the webhook wrote defaults into limits), 0 if none.
int GpuCount(const json& container) {
  const json* limits = nullptr;
  if (container.contains("resources") && container["resources"].is_object() &&
      container["resources"].contains("limits") && container["resources"]["limits"].is_object()) {
    limits = &container["resources"]["limits"];
  }
  if (limits == nullptr || !limits->contains(kGpuResource)) return 0;
  const json& v = (*limits)[kGpuResource];
  if (v.is_number_integer()) return v.get<int>();
  if (v.is_string()) return std::atoi(v.get<std::string>().c_str());
  return 0;
}

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// The CRI container ID the emulated runtime gives a container: 64 hex digits (SHA-256 of
// pod UID and name), as containerd's IDs look.
std::string ContainerId(const std::string& uid, const std::string& name) {
  std::string in = uid + "/" + name;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(in.data(), in.size(), md, &n, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

}  // namespace

NodeAgent::NodeAgent(std::string name, std::vector<GpuSpec> gpus, Artifacts artifacts,
                     std::string dir)
    : name_(std::move(name)),
      gpus_(std::move(gpus)),
      artifacts_(std::move(artifacts)),
      dir_(std::move(dir)) {}

NodeAgent::~NodeAgent() { Stop(); }

bool NodeAgent::Start(const std::string& api_url, const std::string& kubelet_token,
                      const std::string& plugin_kubeconfig, const std::string& key_file,
                      std::string* error) {
  std::error_code ec;
  for (const char* sub : {"/dp", "/hook/vgpu", "/gpu-state", "/containers", "/proc"})
    fs::create_directories(dir_ + sub, ec);
  fs::copy_file(artifacts_.libvgpu_testpath, dir_ + "/hook/vgpu/libvgpu.so",
                fs::copy_options::overwrite_existing, ec);
  if (ec) {
    *error = "cannot copy " + artifacts_.libvgpu_testpath + ": " + ec.message();
    return false;
  }
  std::ofstream(dir_ + "/device-config.yaml") << "nvidia:\n  deviceSplitCount: 10\n";

  kubelet_ = std::make_unique<fakes::FakeKubelet>(dir_ + "/dp");
  if (!kubelet_->Start()) {
    *error = "fake kubelet cannot serve in " + dir_ + "/dp";
    return false;
  }
  std::string devices;
  for (const auto& g : gpus_)
    devices += (devices.empty() ? "" : ",") + g.uuid + ":" + std::to_string(g.mib);
  auto env = CurrentEnvironment();
  env["FAKE_GPU_DEVICES"] = devices;
  plugin_ = std::make_unique<Daemon>(
      std::vector<std::string>{
          artifacts_.fracgpu, "device-plugin", "--node-name=" + name_,
          "--hook-path=" + dir_ + "/hook", "--socket-dir=" + dir_ + "/dp",
          "--config-file=" + dir_ + "/device-config.yaml",
          "--node-config=" + dir_ + "/no-node-config.json", "--signing-key-file=" + key_file,
          "--kubeconfig=" + plugin_kubeconfig, "--nvml-library=" + artifacts_.fake_nvml},
      env, dir_ + "/device-plugin.log");
  if (!plugin_->running()) {
    *error = "cannot start the device plugin";
    return false;
  }
  size_t want = gpus_.size() * 10;
  if (!kubelet_->WaitForRegistrations(1, kStartWait) ||
      !kubelet_->WaitForDevices([&](const auto& d) { return d.size() == want; }, kStartWait)) {
    *error = "the device plugin of " + name_ + " did not register " + std::to_string(want) +
             " devices; log:\n" + plugin_->Log();
    return false;
  }
  if (enforce_) {
    // The node agent's monitor (the DaemonSet's second container): same account as the plugin,
    // the node's NVML and driver state, this node's emulated /proc (hostPID).
    auto menv = CurrentEnvironment();
    menv["FAKE_GPU_DEVICES"] = devices;
    menv["FAKE_GPU_STATE_DIR"] = dir_ + "/gpu-state";
    std::vector<std::string> argv = {artifacts_.fracgpu,
                                     "monitor",
                                     "--node-name=" + name_,
                                     "--hook-path=" + dir_ + "/hook",
                                     "--listen=127.0.0.1:0",
                                     "--node-dir",
                                     "",
                                     "--interval=0.1",
                                     "--enforce-interval=0.1",
                                     "--no-remove",
                                     "--kubeconfig=" + plugin_kubeconfig,
                                     "--nvml-library=" + artifacts_.fake_nvml,
                                     "--proc-root=" + dir_ + "/proc"};
    if (park_idle_s_ > 0) {
      // Parking over the fake driver: its checkpoint calls, the emulated cgroup tree.
      fs::create_directories(dir_ + "/cgroup", ec);
      for (std::string flag : std::vector<std::string>{
               "--park", "--park-drivers=580.", "--park-idle=" + std::to_string(park_idle_s_),
               "--park-interval=0.1",
               "--cuda-library=" + artifacts_.fakes_lib_dir + "/libcuda.so.1",
               "--cgroup-root=" + dir_ + "/cgroup"})
        argv.push_back(std::move(flag));
    }
    monitor_ = std::make_unique<Daemon>(argv, menv, dir_ + "/monitor.log");
    if (!monitor_->running() || !monitor_->WaitForLog("enforcement on", kStartWait) ||
        (park_idle_s_ > 0 && !monitor_->WaitForLog("parking on", kStartWait))) {
      *error = "the monitor of " + name_ + " did not start enforcing" +
               (park_idle_s_ > 0 ? " and parking" : "") + "; log:\n" +
               (monitor_ ? monitor_->Log() : "");
      return false;
    }
  }
  k8s::Config config;
  config.server = api_url;
  config.token = kubelet_token;
  auto client = k8s::Client::Create(config);
  if (!client.ok()) {
    *error = client.status().ToString();
    return false;
  }
  client_ = std::move(*client);
  // kubelet publishes the device plugin's resource count in the node status.
  std::string count = std::to_string(want);
  auto patched = client_->MergePatch(
      k8s::NodePath(name_) + "/status",
      {{"status",
        {{"capacity", {{kGpuResource, count}}}, {"allocatable", {{kGpuResource, count}}}}}});
  if (!patched.ok()) {
    *error = "node status: " + patched.status().ToString();
    return false;
  }
  k8s::InformerOptions options;
  options.path = "/api/v1/pods";
  options.field_selector = "spec.nodeName=" + name_;
  k8s::InformerHandlers handlers;
  handlers.on_upsert = [this](const json& pod) { OnPod(pod); };
  handlers.on_delete = [this](const json& pod) { OnPodDeleted(pod); };
  pods_ = std::make_unique<k8s::Informer>(client_.get(), options, handlers);
  pods_->Start();
  if (!pods_->WaitForSync(kStartWait)) {
    *error = "the kubelet's pod watch did not sync";
    return false;
  }
  return true;
}

void NodeAgent::Stop() {
  if (pods_) pods_->Stop();
  std::vector<PodRun*> runs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& [uid, run] : runs_) runs.push_back(run.get());
  }
  cv_.notify_all();
  for (PodRun* run : runs) {
    std::lock_guard<std::mutex> lock(run->mu);
    run->stop = true;
    for (auto& c : run->containers) {
      if (c->process) c->process->Kill();
    }
  }
  for (PodRun* run : runs) {
    if (run->worker.joinable()) run->worker.join();
  }
  if (monitor_) monitor_->Stop(SIGTERM);
  if (plugin_) plugin_->Stop(SIGTERM);
  if (kubelet_) kubelet_->Stop();
}

std::string NodeAgent::MonitorLog() const { return monitor_ ? monitor_->Log() : ""; }

bool NodeAgent::CloseStdin(const std::string& ns, const std::string& pod, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  const Started* s = FindLocked(ns, pod, name);
  if (s == nullptr || !s->process) return false;
  s->process->CloseStdin();
  return true;
}

void NodeAgent::HoldAllocations(bool hold) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = hold;
  }
  cv_.notify_all();
}

int NodeAgent::admitted_pods() const {
  std::lock_guard<std::mutex> lock(mu_);
  return admitted_;
}

std::string NodeAgent::PluginLog() const { return plugin_ ? plugin_->Log() : ""; }

void NodeAgent::OnPod(const json& pod) {
  std::string uid = k8s::Uid(pod);
  std::string phase = k8s::PodPhase(pod);
  if (k8s::IsTerminating(pod) || phase == "Succeeded" || phase == "Failed") return;
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ || runs_.count(uid) != 0) return;
  auto run = std::make_unique<PodRun>();
  run->uid = uid;
  run->ns = k8s::Namespace(pod);
  run->name = k8s::Name(pod);
  run->pod = pod;
  PodRun* raw = run.get();
  runs_[uid] = std::move(run);
  raw->worker = std::thread([this, raw] { RunPod(raw); });
}

void NodeAgent::OnPodDeleted(const json& pod) {
  PodRun* run = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = runs_.find(k8s::Uid(pod));
    if (it == runs_.end()) return;
    run = it->second.get();
  }
  {
    // Kill and reap every container before the next event is handled: the next pod on this
    // GPU must find the memory free, as after a real container's teardown.
    std::lock_guard<std::mutex> lock(run->mu);
    run->stop = true;
    for (auto& c : run->containers) {
      if (c->process) c->process->Kill();
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
  }  // the pod's worker is waiting on cv_ or sees run->stop
  cv_.notify_all();
  ReleaseDevices(run->uid);
}

void NodeAgent::ReleaseDevices(const std::string& uid) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = device_owner_.begin(); it != device_owner_.end();) {
    it = it->second == uid ? device_owner_.erase(it) : std::next(it);
  }
}

void NodeAgent::PatchPodStatus(const std::string& ns, const std::string& name, const json& status) {
  auto r = client_->MergePatch(k8s::PodPath(ns, name) + "/status", {{"status", status}});
  (void)r;  // a pod deleted meanwhile gives 404: nothing left to report on
}

bool NodeAgent::AllocateFor(const std::string& uid, int count,
                            const std::vector<std::string>& reusable, ContainerView* view,
                            v1beta1::ContainerAllocateResponse* out, std::string* error) {
  std::vector<std::string> available;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& d : kubelet_->devices()) {
      if (d.health() != "Healthy") continue;
      bool reuse = std::find(reusable.begin(), reusable.end(), d.id()) != reusable.end();
      if (device_owner_.count(d.id()) == 0 || reuse) available.push_back(d.id());
    }
  }
  if (static_cast<int>(available.size()) < count) {
    *error =
        "Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. "
        "Requested: " +
        std::to_string(count) + ", Available: " + std::to_string(available.size()) +
        ", which is unexpected";
    return false;
  }
  std::vector<std::string> chosen;
  auto regs = kubelet_->registrations();
  if (!regs.empty() && regs.back().options.get_preferred_allocation_available()) {
    v1beta1::PreferredAllocationRequest request;
    auto* c = request.add_container_requests();
    for (const auto& id : available) c->add_available_deviceids(id);
    c->set_allocation_size(count);
    v1beta1::PreferredAllocationResponse response;
    if (kubelet_->GetPreferredAllocation(request, &response).ok() &&
        response.container_responses_size() == 1) {
      for (const auto& id : response.container_responses(0).deviceids()) {
        if (std::find(available.begin(), available.end(), id) != available.end())
          chosen.push_back(id);
      }
    }
    if (static_cast<int>(chosen.size()) != count) chosen.clear();
  }
  if (chosen.empty()) chosen.assign(available.begin(), available.begin() + count);
  v1beta1::AllocateResponse response;
  grpc::Status st = kubelet_->Allocate({chosen}, &response);
  if (!st.ok()) {
    *error = "Allocate failed due to " + st.error_message() + ", which is unexpected";
    return false;
  }
  if (response.container_responses_size() != 1) {
    *error = "Allocate answered " + std::to_string(response.container_responses_size()) +
             " containers for 1";
    return false;
  }
  *out = response.container_responses(0);
  view->device_ids = chosen;
  for (const auto& [k, v] : out->envs()) view->allocate_env[k] = v;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& id : chosen) device_owner_[id] = uid;
  return true;
}

bool NodeAgent::StartContainer(PodRun* run, const json& spec, bool init, ContainerView view,
                               const v1beta1::ContainerAllocateResponse* response,
                               std::string* error) {
  view.name = spec.value("name", "");
  view.init = init;
  std::string cwd = dir_ + "/containers/" + run->uid + "_" + view.name;
  std::error_code ec;
  fs::create_directories(cwd, ec);
  std::map<std::string, std::string> env = {{"PATH", "/usr/bin:/bin"},
                                            {"LD_LIBRARY_PATH", artifacts_.fakes_lib_dir},
                                            {"FAKE_GPU_STATE_DIR", dir_ + "/gpu-state"},
                                            {"FAKE_GPU_DEVICES", ""}};
  if (spec.contains("env") && spec["env"].is_array()) {
    for (const auto& e : spec["env"]) {
      if (e.contains("name") && e.contains("value") && e["value"].is_string())
        env[e["name"]] = e["value"];
    }
  }
  if (response != nullptr) {
    std::vector<Mount> mounts;
    for (const auto& m : response->mounts()) mounts.push_back({m.container_path(), m.host_path()});
    for (const auto& [k, v] : response->envs()) env[k] = v;
    if (env.count("CUDA_DEVICE_MEMORY_SHARED_CACHE")) {
      env["CUDA_DEVICE_MEMORY_SHARED_CACHE"] =
          Translate(mounts, env["CUDA_DEVICE_MEMORY_SHARED_CACHE"]);
    }
    for (const auto& m : mounts) {
      if (m.container_path == "/etc/fracgpu/limits.env") {
        view.limits_file = test_support::ReadWholeFile(m.host_path);
        std::stringstream in(view.limits_file);
        std::ofstream out(cwd + "/fracgpu-limits.env");
        for (std::string line; std::getline(in, line);) {
          constexpr std::string_view kRegion = "CUDA_DEVICE_MEMORY_SHARED_CACHE=";
          if (line.compare(0, kRegion.size(), kRegion) == 0) {
            line = std::string(kRegion) + Translate(mounts, line.substr(kRegion.size()));
          }
          out << line << "\n";
        }
      } else if (m.container_path == "/etc/ld.so.preload") {
        std::stringstream in(test_support::ReadWholeFile(m.host_path));
        std::string lib;
        std::getline(in, lib);
        if (!lib.empty()) env["LD_PRELOAD"] = Translate(mounts, lib);
      }
    }
    // The container runtime exposes only the GPUs named in NVIDIA_VISIBLE_DEVICES.
    std::string visible;
    for (const auto& uuid : SplitComma(env["NVIDIA_VISIBLE_DEVICES"])) {
      for (const auto& g : gpus_) {
        if (g.uuid == uuid)
          visible += (visible.empty() ? "" : ",") + g.uuid + ":" + std::to_string(g.mib);
      }
    }
    env["FAKE_GPU_DEVICES"] = visible;
  }
  view.env = env;
  const bool bypass = spec.value("image", "") == kBypassImage;
  std::vector<std::string> argv = {bypass ? artifacts_.bypass_app : artifacts_.vgpu_app};
  if (spec.contains("args") && spec["args"].is_array()) {
    for (const auto& a : spec["args"])
      argv.push_back(a.is_string() ? a.get<std::string>() : a.dump());
  } else {
    argv.insert(argv.end(), default_args_.begin(), default_args_.end());
  }
  std::lock_guard<std::mutex> lock(run->mu);
  if (run->stop) {
    *error = "pod deleted";
    return false;
  }
  auto started = std::make_unique<Started>();
  started->view = std::move(view);
  started->process = std::make_unique<ContainerProcess>(argv, env, cwd, cwd + ".stderr");
  bool ok = started->process->started();
  if (!ok) *error = "cannot start " + argv[0];
  if (ok && enforce_) {
    // The runtime's part the monitor reads (hostPID): the process's cgroup as kubelet's
    // systemd driver and containerd name it, and its real stat (start time, PID-reuse check).
    // Written right after fork, complete or not at all (renamed into place): a poll before
    // this finds no entry and skips the PID until the next one.
    std::string pid = std::to_string(started->process->pid());
    std::string slice_uid = run->uid;
    std::replace(slice_uid.begin(), slice_uid.end(), '-', '_');
    std::string tmp = dir_ + "/proc/.new-" + pid;
    fs::create_directories(tmp, ec);
    std::ofstream(tmp + "/stat") << test_support::ReadWholeFile("/proc/" + pid + "/stat");
    std::ofstream(tmp + "/cgroup")
        << "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" << slice_uid
        << ".slice/cri-containerd-" << ContainerId(run->uid, started->view.name) << ".scope\n";
    fs::remove_all(dir_ + "/proc/" + pid, ec);  // a reused PID's old entry
    fs::rename(tmp, dir_ + "/proc/" + pid, ec);
    if (park_idle_s_ > 0) {
      // Its memory cgroup (v2), where the parking loop reads the room for the host copy.
      std::string cg = dir_ +
                       "/cgroup/kubepods.slice/kubepods-burstable.slice/"
                       "kubepods-burstable-pod" +
                       slice_uid + ".slice/cri-containerd-" +
                       ContainerId(run->uid, started->view.name) + ".scope";
      fs::create_directories(cg, ec);
      std::ofstream(cg + "/memory.max") << (4ull << 30) << "\n";
      std::ofstream(cg + "/memory.current") << (64ull << 20) << "\n";
    }
  }
  run->containers.push_back(std::move(started));
  return ok;
}

void NodeAgent::RunPod(PodRun* run) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !hold_ || stopping_; });
    if (stopping_) return;
    ++admitted_;
  }
  {
    std::lock_guard<std::mutex> lock(run->mu);
    if (run->stop) return;
  }
  const json& spec = run->pod["spec"];
  struct Entry {
    json spec;
    bool init;
    ContainerView view;
    std::optional<v1beta1::ContainerAllocateResponse> response;
  };
  std::vector<Entry> entries;
  for (const char* key : {"initContainers", "containers"}) {
    if (!spec.contains(key) || !spec[key].is_array()) continue;
    for (const auto& c : spec[key])
      entries.push_back({c, std::string(key) == "initContainers", {}, std::nullopt});
  }
  auto fail = [&](const std::string& reason, const std::string& message) {
    PatchPodStatus(run->ns, run->name,
                   {{"phase", "Failed"}, {"reason", reason}, {"message", message}});
    ReleaseDevices(run->uid);
  };
  // Admission: the device manager allocates every container before any starts.
  std::vector<std::string> reusable;
  for (auto& e : entries) {
    int count = GpuCount(e.spec);
    if (count <= 0) continue;
    v1beta1::ContainerAllocateResponse response;
    std::string error;
    if (!AllocateFor(run->uid, count, e.init ? std::vector<std::string>{} : reusable, &e.view,
                     &response, &error)) {
      return fail("UnexpectedAdmissionError", error);
    }
    e.response = response;
    if (e.init) {
      reusable.insert(reusable.end(), e.view.device_ids.begin(), e.view.device_ids.end());
    } else {
      for (const auto& id : e.view.device_ids)
        reusable.erase(std::remove(reusable.begin(), reusable.end(), id), reusable.end());
    }
  }
  // Init containers one by one, to completion.
  for (auto& e : entries) {
    if (!e.init) continue;
    std::string error;
    if (!StartContainer(run, e.spec, true, e.view, e.response ? &*e.response : nullptr, &error)) {
      return fail("ContainerCannotRun", error);
    }
    ContainerProcess* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(run->mu);
      p = run->containers.back()->process.get();
    }
    auto status = p->WaitExit(kContainerWait);
    {
      std::lock_guard<std::mutex> lock(run->mu);
      run->containers.back()->view.exit_status = status;
      if (run->stop) return;
    }
    if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
      return fail("Init:Error", "init container " + e.view.name + " failed");
    }
  }
  // App containers, all started, then Running once each is ready (or exited).
  size_t first_app = 0;
  {
    std::lock_guard<std::mutex> lock(run->mu);
    first_app = run->containers.size();
  }
  for (auto& e : entries) {
    if (e.init) continue;
    std::string error;
    if (!StartContainer(run, e.spec, false, e.view, e.response ? &*e.response : nullptr, &error)) {
      return fail("ContainerCannotRun", error);
    }
  }
  std::vector<ContainerProcess*> apps;
  {
    std::lock_guard<std::mutex> lock(run->mu);
    for (size_t i = first_app; i < run->containers.size(); ++i)
      apps.push_back(run->containers[i]->process.get());
  }
  bool all_exited = true, all_ok = true;
  for (ContainerProcess* p : apps) {
    if (p->WaitForLine("ready", kContainerWait)) {
      all_exited = false;
    } else {
      auto status = p->WaitExit(std::chrono::milliseconds(0));
      if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) all_ok = false;
    }
  }
  {
    std::lock_guard<std::mutex> lock(run->mu);
    if (run->stop) return;
  }
  // The containers' statuses as kubelet reports them: name and CRI container ID (what the node
  // agent maps a process's cgroup to, docs/enforcement.md), init containers terminated.
  json statuses = json::array(), init_statuses = json::array();
  for (const auto& e : entries) {
    const std::string cname = e.spec.value("name", "");
    json cs = {{"name", cname},
               {"containerID", "containerd://" + ContainerId(run->uid, cname)},
               {"ready", !e.init}};
    (e.init ? init_statuses : statuses).push_back(std::move(cs));
  }
  PatchPodStatus(run->ns, run->name,
                 {{"phase", all_exited ? (all_ok ? "Succeeded" : "Failed") : "Running"},
                  {"containerStatuses", statuses},
                  {"initContainerStatuses", init_statuses}});
  // The pod's worker lives as long as the pod (kubelet's pod worker does): the containers were
  // forked by this thread and die with it (PR_SET_PDEATHSIG is per thread), so it returns only
  // once the pod is deleted or the node stops.
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] {
    std::lock_guard<std::mutex> run_lock(run->mu);
    return stopping_ || run->stop;
  });
}

const NodeAgent::Started* NodeAgent::FindLocked(const std::string& ns, const std::string& pod,
                                                const std::string& name) const {
  for (const auto& [uid, run] : runs_) {
    if (run->ns != ns || run->name != pod) continue;
    std::lock_guard<std::mutex> lock(run->mu);
    for (const auto& c : run->containers) {
      if (c->view.name == name) return c.get();
    }
  }
  return nullptr;
}

std::optional<ContainerView> NodeAgent::Container(const std::string& ns, const std::string& pod,
                                                  const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Started* s = FindLocked(ns, pod, name);
  if (s == nullptr) return std::nullopt;
  ContainerView v = s->view;
  if (s->process) {
    v.lines = s->process->Lines();
    v.exit_status = s->process->WaitExit(std::chrono::milliseconds(0));
  }
  return v;
}

bool NodeAgent::WaitForLine(const std::string& ns, const std::string& pod, const std::string& name,
                            const std::string& line, std::chrono::milliseconds timeout) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  ContainerProcess* p = nullptr;
  // The container may not have started yet: wait for it (its start is a pod-watch event away).
  if (!PollUntil(
          [&] {
            std::lock_guard<std::mutex> lock(mu_);
            const Started* s = FindLocked(ns, pod, name);
            p = s != nullptr ? s->process.get() : nullptr;
            return p != nullptr;
          },
          timeout)) {
    return false;
  }
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return p->WaitForLine(line, std::max(left, std::chrono::milliseconds(0)));
}

std::optional<NodeAgent::NvmlMemory> NodeAgent::Nvml(int index) const {
  std::string devices;
  for (const auto& g : gpus_)
    devices += (devices.empty() ? "" : ",") + g.uuid + ":" + std::to_string(g.mib);
  // No cuInit: the probe is no process of the fake driver's state, only an NVML reader.
  std::map<std::string, std::string> env = {{"PATH", "/usr/bin:/bin"},
                                            {"LD_LIBRARY_PATH", artifacts_.fakes_lib_dir},
                                            {"FAKE_GPU_STATE_DIR", dir_ + "/gpu-state"},
                                            {"FAKE_GPU_DEVICES", devices}};
  ContainerProcess probe({artifacts_.vgpu_app, "nvml:" + std::to_string(index)}, env, dir_,
                         dir_ + "/nvml-probe.stderr");
  auto status = probe.WaitExit(kContainerWait);
  auto lines = probe.Lines();
  if (!status || lines.size() != 1) return std::nullopt;
  // "nvml <rc> <total> <used> <free> <v2 total> <v2 used>"
  std::istringstream in(lines[0]);
  std::string op;
  int rc = -1;
  NvmlMemory m;
  if (!(in >> op >> rc >> m.total >> m.used >> m.free) || op != "nvml" || rc != 0)
    return std::nullopt;
  return m;
}

std::optional<int> NodeAgent::WaitExit(const std::string& ns, const std::string& pod,
                                       const std::string& name,
                                       std::chrono::milliseconds timeout) const {
  ContainerProcess* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const Started* s = FindLocked(ns, pod, name);
    if (s == nullptr || !s->process) return std::nullopt;
    p = s->process.get();
  }
  return p->WaitExit(timeout);
}

}  // namespace fracgpu::e2e
