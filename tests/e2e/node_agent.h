#pragma once
// One simulated GPU node of the end-to-end tests: `fracgpu device-plugin` as a child process
// over the fake NVML, and the kubelet's part around the fake kubelet (tests/fakes/kubelet):
//
//  * it advertises the node's allocatable `nvidia.com/gpu` from ListAndWatch (node status);
//  * it watches the pods bound to its node; for a new one it admits the pod as kubelet's device
//    manager does — GetPreferredAllocation + Allocate for every container that asks for GPUs,
//    init containers first, before any container starts — and then "starts" the containers:
//    init containers one by one to completion, then the app containers;
//  * a container is tests/vgpu/vgpu_app run with the container's `args` (or SetDefaultArgs) as
//    its operations and the environment Allocate returned, its mounts emulated by path
//    translation: a path under a mount's container path is rewritten to the host path (the
//    region file, and the same key in the limits file); the limits file is copied to
//    `fracgpu-limits.env` in the container's working directory (libvgpu_testpath.so reads it there
//    instead of /etc/fracgpu/limits.env);
//    `/etc/ld.so.preload` becomes LD_PRELOAD of the library it names. The container runtime's
//    part (only the GPUs in NVIDIA_VISIBLE_DEVICES are visible) is FAKE_GPU_DEVICES;
//  * a pod whose Allocate fails is marked Failed with reason UnexpectedAdmissionError (kubelet's
//    answer to a device-plugin admission error); app containers that reached their `wait` op
//    make the pod Running; a deleted pod's containers are killed and reaped before the next
//    watch event is handled (so its memory is free before the next pod starts).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fake_kubelet.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "process.h"

namespace fracgpu::e2e {

/// One fake GPU of a node.
struct GpuSpec {
  std::string uuid;  ///< "GPU-" + 32 hex digits with dashes
  int64_t mib = 0;   ///< device memory, MiB
};

/// Where the built artifacts are (compile definitions of the test targets).
struct Artifacts {
  std::string fracgpu;           ///< the `fracgpu` executable
  std::string fake_nvml;         ///< fake libnvidia-ml.so.1
  std::string fakes_lib_dir;     ///< folder holding the fake libcuda.so.1 and libnvidia-ml.so.1
  std::string libvgpu_testpath;  ///< libvgpu_testpath.so (reads ./fracgpu-limits.env)
  std::string vgpu_app;          ///< tests/vgpu/vgpu_app
  std::string bypass_app;        ///< tests/enforce/bypass_app (image kBypassImage)
};

/// A container whose `image` is this runs the bypass recipe of issue 14 (tests/enforce/
/// bypass_app.cc: allocates through the driver around libvgpu.so) instead of vgpu_app.
inline constexpr const char* kBypassImage = "fracgpu-e2e/bypass:1";

/// What one started container looked like (for assertions).
struct ContainerView {
  std::string name;
  bool init = false;
  std::vector<std::string> device_ids;              ///< kubelet's device IDs given to Allocate
  std::map<std::string, std::string> allocate_env;  ///< Allocate's `envs`, untranslated
  std::map<std::string, std::string> env;           ///< the environment the process got
  std::string limits_file;                          ///< the limits file as the plugin wrote it
  std::vector<std::string> lines;                   ///< what the process printed
  std::optional<int> exit_status;                   ///< wait status once it exited
};

/// A simulated GPU node. Thread-safe.
class NodeAgent {
 public:
  /// `dir` (must exist, short: Unix socket paths) holds everything of this node.
  NodeAgent(std::string name, std::vector<GpuSpec> gpus, Artifacts artifacts, std::string dir);
  ~NodeAgent();
  NodeAgent(const NodeAgent&) = delete;
  NodeAgent& operator=(const NodeAgent&) = delete;

  /// Starts the fake kubelet and the device plugin (kubeconfig `plugin_kubeconfig`, signing key
  /// `key_file`), waits for registration and the device list, publishes allocatable through
  /// `kubelet_client`'s identity, and starts watching pods. False (with `error`) on failure.
  bool Start(const std::string& api_url, const std::string& kubelet_token,
             const std::string& plugin_kubeconfig, const std::string& key_file, std::string* error);
  /// Stops everything (pods' containers killed, monitor and plugin SIGTERM).
  void Stop();

  /// Before Start: also run `fracgpu monitor` as the node's agent (driver-truth enforcement,
  /// docs/enforcement.md) over the node's fake NVML and driver state, with the device plugin's
  /// kubeconfig (the DaemonSet's account), polling every 100 ms, `--proc-root` the node's
  /// emulated /proc: each container process gets <dir>/proc/<pid>/cgroup (a kubelet-style
  /// cgroup v2 path naming its pod UID and container ID) and a copy of its real stat.
  void EnableEnforcement() { enforce_ = true; }
  /// Before Start: the monitor (EnableEnforcement's, which this implies) also parks idle
  /// opted-in containers while a borrower is pending, lends their memory and wakes them on their
  /// next CUDA call (docs/reclaim.md): `--park` over the fake driver (`libcuda.so.1` of the
  /// fakes, driver allow-list `580.`, the fake NVML's default version), idle time `idle_s`
  /// seconds (the monitor's minimum is 1), polled every 100 ms. Each container then also gets a
  /// cgroup v2 memory account under <dir>/cgroup (memory.max 4 GiB, memory.current 64 MiB: room
  /// for the host copy of its device memory).
  void EnableParking(double idle_s) {
    enforce_ = true;
    park_idle_s_ = idle_s;
  }
  /// The node's GPU `index` as an NVML client sees it (vgpu_app `nvml:<index>` over the fake
  /// NVML of this node's driver state, without libvgpu.so), bytes; nullopt when it fails.
  struct NvmlMemory {
    uint64_t total = 0, used = 0, free = 0;
  };
  std::optional<NvmlMemory> Nvml(int index) const;
  /// Before Start: the vgpu_app operations of a container whose spec has no `args` (what its
  /// image would run; by default none, so such a container exits at once). The sandbox
  /// (tests/e2e/fake_cluster_main.cc) runs a notebook's container as {"init", "info", "wait"}.
  void SetDefaultArgs(std::vector<std::string> args) { default_args_ = std::move(args); }
  /// The monitor's log so far ("" when not enabled).
  std::string MonitorLog() const;
  /// Closes the container's stdin (vgpu_app's `wait` returns and its next ops run).
  bool CloseStdin(const std::string& ns, const std::string& pod, const std::string& name);

  /// While held, newly bound pods wait before Allocate (a kubelet slow to admit them).
  void HoldAllocations(bool hold);
  /// Number of pods that passed the hold and went through admission.
  int admitted_pods() const;

  /// The container's view once it was started (or failed), else nullopt.
  std::optional<ContainerView> Container(const std::string& ns, const std::string& pod,
                                         const std::string& name) const;
  /// Waits until the container printed `line` (its process is running or exited).
  bool WaitForLine(const std::string& ns, const std::string& pod, const std::string& name,
                   const std::string& line, std::chrono::milliseconds timeout) const;
  /// Waits until the container's process exited; its wait status or nullopt.
  std::optional<int> WaitExit(const std::string& ns, const std::string& pod,
                              const std::string& name, std::chrono::milliseconds timeout) const;

  const std::string& name() const { return name_; }
  const std::vector<GpuSpec>& gpus() const { return gpus_; }
  const std::string& dir() const { return dir_; }
  /// The device plugin's log so far.
  std::string PluginLog() const;

 private:
  struct Started {
    ContainerView view;
    std::unique_ptr<ContainerProcess> process;
  };
  struct PodRun {
    std::string uid, ns, name;
    nlohmann::json pod;
    std::thread worker;
    std::mutex mu;
    bool stop = false;
    std::vector<std::unique_ptr<Started>> containers;
  };

  void OnPod(const nlohmann::json& pod);
  void OnPodDeleted(const nlohmann::json& pod);
  void RunPod(PodRun* run);
  // Chooses devices for `count` GPUs (GetPreferredAllocation when offered) and calls Allocate;
  // on success fills `out` and reserves the devices for `uid`.
  bool AllocateFor(const std::string& uid, int count, const std::vector<std::string>& reusable,
                   ContainerView* view, v1beta1::ContainerAllocateResponse* out,
                   std::string* error);
  bool StartContainer(PodRun* run, const nlohmann::json& spec, bool init, ContainerView view,
                      const v1beta1::ContainerAllocateResponse* response, std::string* error);
  void PatchPodStatus(const std::string& ns, const std::string& name, const nlohmann::json& status);
  void ReleaseDevices(const std::string& uid);
  const Started* FindLocked(const std::string& ns, const std::string& pod,
                            const std::string& name) const;

  std::string name_;
  std::vector<GpuSpec> gpus_;
  Artifacts artifacts_;
  std::string dir_;
  std::unique_ptr<fakes::FakeKubelet> kubelet_;
  std::unique_ptr<Daemon> plugin_;
  bool enforce_ = false;
  double park_idle_s_ = 0;  // 0: no parking
  std::vector<std::string> default_args_;
  std::unique_ptr<Daemon> monitor_;
  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<k8s::Informer> pods_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool hold_ = false;
  bool stopping_ = false;
  int admitted_ = 0;
  std::map<std::string, std::unique_ptr<PodRun>> runs_;  // by pod UID
  std::map<std::string, std::string> device_owner_;      // device ID → pod UID
};

}  // namespace fracgpu::e2e
