#pragma once
// The whole end-to-end cluster in one test process tree (docs/e2e.md):
//   the fake API server (in process) with a bearer token per component and the scheduler's
//   /webhook installed as its pod admission webhook; `fracgpu scheduler` (child process);
//   the kube-scheduler driver (in process); one NodeAgent per node (device plugin child +
//   fake kubelet). Users act over HTTP with their own token, through admission.
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fake_apiserver.h"
#include "node_agent.h"
#include "process.h"
#include "scheduler_driver.h"

namespace fracgpu::e2e {

/// Identities (the users the fake API server maps the tokens to).
inline constexpr const char* kSchedulerUser =
    "system:serviceaccount:fracgpu-system:fracgpu-scheduler";
inline constexpr const char* kDevicePluginUser =
    "system:serviceaccount:fracgpu-system:fracgpu-device-plugin";
inline constexpr const char* kKubeSchedulerUser = "system:kube-scheduler";
inline constexpr const char* kUserAlice = "alice";
inline constexpr const char* kAliceToken = "token-alice";
inline constexpr const char* kSchedulerName = "fracgpu-scheduler";
inline constexpr auto kWait = std::chrono::seconds(30);

/// The built artifacts, from the test target's compile definitions.
Artifacts BuiltArtifacts();

/// Shape and configuration of a cluster.
struct ClusterOptions {
  std::vector<std::pair<std::string, std::vector<GpuSpec>>> nodes;  ///< node name → GPUs
  std::string node_policy = "binpack";                              ///< --node-scheduler-policy
  std::string gpu_policy = "binpack";                               ///< --gpu-scheduler-policy
  bool leader_elect = false;                                        ///< --leader-elect
  bool enforce = false;  ///< each node also runs `fracgpu monitor` (NodeAgent::EnableEnforcement)
  /// > 0: each node's monitor also parks idle opted-in containers after this many seconds
  /// (NodeAgent::EnableParking; implies `enforce`).
  double park_idle_s = 0;
  /// The nodes that park when park_idle_s > 0; empty = every node.
  std::vector<std::string> park_nodes = {};
  /// More bearer tokens → user names, beside the components' and alice's (the sandbox's UI and
  /// notebook controller).
  std::map<std::string, std::string> extra_tokens = {};
  /// The cluster's folder (made, and removed with the cluster); "" = a new /tmp/fge2e-XXXXXX.
  /// Unix socket paths live under it: keep it short.
  std::string dir = "";
  /// vgpu_app operations of containers without `args` (NodeAgent::SetDefaultArgs).
  std::vector<std::string> default_container_args = {};
};

/// An HTTP answer of the fake API server.
struct HttpResult {
  int status = 0;  ///< 0 = transport error
  nlohmann::json body;
};

/// The cluster. Not copyable; stops everything on destruction.
class Cluster {
 public:
  explicit Cluster(ClusterOptions options);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  /// Starts every part and waits until the scheduler is ready and every node advertises its
  /// GPUs. False (with `error`) on failure.
  bool Start(std::string* error);

  fakes::FakeApiServer& api() { return *api_; }
  SchedulerDriver& driver() { return *driver_; }
  NodeAgent& node(const std::string& name);
  /// The scheduler's base URL ("" while it is stopped).
  std::string scheduler_url() const;
  /// Stops the scheduler process with `sig` (SIGKILL: a crash).
  void StopScheduler(int sig);
  /// Starts a scheduler process (a new one after StopScheduler) and waits until ready.
  bool StartScheduler(std::string* error);
  /// The scheduler's log so far.
  std::string SchedulerLog() const;

  // ---- a user's requests over HTTP (through authentication and admission) ----
  HttpResult CreatePod(const nlohmann::json& pod, const std::string& token = kAliceToken);
  HttpResult PatchPod(const std::string& ns, const std::string& name,
                      const nlohmann::json& merge_patch, const std::string& token = kAliceToken);
  HttpResult DeletePod(const std::string& ns, const std::string& name,
                       const std::string& token = kAliceToken);

  /// The stored pod (direct store access, not audited).
  std::optional<nlohmann::json> Pod(const std::string& ns, const std::string& name) const;
  /// Waits until the stored pod satisfies `pred` (false when absent).
  bool WaitForPod(const std::string& ns, const std::string& name,
                  const std::function<bool(const nlohmann::json&)>& pred,
                  std::chrono::milliseconds timeout = kWait) const;
  /// Waits until the pod is Running (its app containers reached their `wait` op).
  bool WaitRunning(const std::string& ns, const std::string& name,
                   std::chrono::milliseconds timeout = kWait) const;

  const std::string& dir() const { return dir_; }
  /// Writes `<dir>/kubeconfig-<name>`: this cluster's API server with bearer `token`; its path.
  std::string WriteKubeconfig(const std::string& name, const std::string& token) const;

 private:
  HttpResult Request(const std::string& method, const std::string& path, const std::string& body,
                     const std::string& content_type, const std::string& token);

  ClusterOptions options_;
  std::string dir_;
  std::unique_ptr<fakes::FakeApiServer> api_;
  std::unique_ptr<Daemon> scheduler_;
  int scheduler_starts_ = 0;
  mutable std::mutex url_mu_;
  std::string scheduler_url_;
  std::unique_ptr<SchedulerDriver> driver_;
  std::vector<std::unique_ptr<NodeAgent>> nodes_;
};

// ---- pods as users write them ----

/// One container of a test pod: `gpumem_mib` 0 = no GPU; `args` = vgpu_app operations.
struct ContainerDef {
  std::string name;
  int64_t gpumem_mib = 0;
  std::vector<std::string> args;
  bool init = false;
};

/// A pod in namespace "ml" as a user writes it: each GPU container asks for `nvidia.com/gpu`
/// 1 and `nvidia.com/gpumem` in the API server's canonical quantity form ("3k" for 3000, as
/// the webhook receives it, docs/design/CONTRACT.md §1).
nlohmann::json UserPod(const std::string& name, const std::vector<ContainerDef>& containers);

/// vgpu_app operations that allocate the whole slice, one MiB more, query memory, and (when
/// `keep_running`) stay up: expected output ExpectedSliceLines().
std::vector<std::string> SliceProbe(int64_t mib, bool keep_running = true);
/// The lines SliceProbe prints when the limit is `mib`: the slice succeeds (0), one MiB more is
/// CUDA_ERROR_OUT_OF_MEMORY (2), cuMemGetInfo reports 0 free of `mib` MiB total.
std::vector<std::string> ExpectedSliceLines(int64_t mib, bool keep_running = true);

/// One GPU of an allocation annotation.
struct Grant {
  std::string uuid;
  int64_t mib = 0;
  int cores = 0;
};
/// Parses `hami.io/vgpu-devices-allocated` (docs/design/CONTRACT.md §2) independently of the code
/// under test: one vector per container part (init containers first).
std::vector<std::vector<Grant>> ParseAllocation(const std::string& value);

/// The pod's annotation or "".
std::string AnnotationOf(const nlohmann::json& pod, const std::string& key);

}  // namespace fracgpu::e2e
