#pragma once
// Allocate and GetPreferredAllocation (docs/design/CONTRACT.md §2–3, docs/design/hami-behaviour.md
// §4.4–4.5): find the pod being bound on this node, check that fracgpu's scheduler decided its
// allocation, hand the next container its GPUs with the limit environment, the limits file and the
// mounts (node/container_edits.h, the builder the DRA driver shares), and record progress on the
// pod (blank the served entry; bind-phase success or failed; release the node lock).

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "core/device.h"
#include "deviceplugin/cluster_api.h"
#include "node/config.h"
#include "node/container_edits.h"

namespace fracgpu::deviceplugin {

/// Checks the scheduler's signature of a decision (docs/design/CONTRACT.md §2): OK when `signature`
/// is the HMAC-SHA256 of "<pod_uid>\n<node>\n<allocated>"; kPermissionDenied otherwise.
using SignatureVerifier =
    std::function<Status(const std::string& pod_uid, const std::string& node,
                         const std::string& allocated, const std::string& signature)>;

/// How a container's GPUs are named to the container runtime: NVIDIA k8s-device-plugin's
/// `--device-list-strategy` values (any non-empty combination). `envvar`: NVIDIA_VISIBLE_DEVICES
/// (the NVIDIA runtime, legacy mode, reads it); `cdi-annotations`: the Allocate response's
/// annotation `cdi.k8s.io/fracgpu-device-plugin_<pod UID>-<container index>` (the CDI
/// annotation format of tags.cncf.io/container-device-interface pkg/cdi/annotations.go), which
/// the kubelet passes on as a container annotation; `cdi-cri`: the response's `cdi_devices`
/// (device plugin API v1beta1 ContainerAllocateResponse.CDIDevices, kubelet feature
/// DevicePluginCDIDevices, GA in 1.31), which the kubelet passes as
/// CreateContainerRequest.config.CDI_devices. The CDI names resolve through the CDI spec on the
/// node that declares DeviceListStrategy::cdi_kind (docs/install.md "Runtime class and CDI").
struct DeviceListStrategy {
  bool envvar = true;
  bool cdi_annotations = false;
  bool cdi_cri = false;
  /// The CDI kind "<vendor>/<class>" GPUs are named under: "nvidia.com/gpu", the kind
  /// `nvidia-ctk cdi generate` (the NVIDIA Container Toolkit, also run by the GPU Operator)
  /// writes to /var/run/cdi/nvidia.yaml.
  std::string cdi_kind = "nvidia.com/gpu";
  /// How a GPU is named within the kind: "uuid" (GPU-…) or "index" (the NVML index); the
  /// spec must declare that name (`nvidia-ctk cdi generate --device-name-strategy`).
  std::string cdi_device_name = "uuid";

  bool Cdi() const { return cdi_annotations || cdi_cri; }
};

/// Parses `--device-list-strategy` (comma-separated: envvar, cdi-annotations, cdi-cri; at
/// least one, no repeats), `--cdi-kind` ("<vendor>/<class>", each starting with a letter,
/// ending with a letter or digit, of [A-Za-z0-9_.-]: the CDI reference library's
/// pkg/parser ValidateVendorName/ValidateClassName) and `--cdi-device-name-strategy` ("uuid" or
/// "index"). Errors: kInvalidArgument naming the flag and the value.
Result<DeviceListStrategy> ParseDeviceListStrategy(const std::string& strategies,
                                                   const std::string& cdi_kind,
                                                   const std::string& cdi_device_name);

/// Settings of the Allocate logic.
struct AllocatorOptions {
  std::string node_name;
  /// The spec.schedulerName values a pod may carry to be served (several during a migration
  /// from HAMi: fracgpu-scheduler and hami-scheduler, docs/hami-migration.md).
  std::vector<std::string> scheduler_names = {"fracgpu-scheduler"};
  /// HOOK_PATH: host directory whose `vgpu/` holds libvgpu.so, ld.so.preload, the per-container
  /// region directories (`vgpu/containers/<pod UID>_<container>`), limits files
  /// (`vgpu/limits/<pod UID>_<container>.env`) and the node directory (`vgpu/node`). The
  /// plugin sees it at the same path.
  std::string hook_path = "/usr/local";
  /// Serve decisions without a signature (a cluster still on HAMi's scheduler). Such pods are
  /// only served when the node lock names them.
  bool allow_unsigned = false;
  SignatureVerifier verify_signature;
  node::DeviceConfig config;
  /// How the GPUs reach the container runtime (envvar and/or CDI).
  DeviceListStrategy device_list;
  /// Attempts of each write to the API server that fails with kUnavailable (with backoff).
  int write_attempts = 5;
  std::chrono::milliseconds retry_delay{200};  ///< first backoff delay; doubles each attempt
};

/// What one container gets.
struct ContainerAllocation {
  std::string pod;        ///< "<namespace>/<name>"
  std::string container;  ///< container name
  std::vector<std::string> uuids;
  std::map<std::string, std::string> envs;
  std::vector<node::MountSpec> mounts;
  /// Fully qualified CDI device names ("nvidia.com/gpu=GPU-…") for the response's cdi_devices
  /// (DeviceListStrategy::cdi_cri), one per GPU in the order of `uuids`.
  std::vector<std::string> cdi_devices;
  /// The response's annotations (DeviceListStrategy::cdi_annotations).
  std::map<std::string, std::string> annotations;
};

/// One container of a GetPreferredAllocation request (docs/design/wire-apis.md §1.3).
struct PreferredRequest {
  std::vector<std::string> available;
  std::vector<std::string> must_include;
  int32_t size = 0;
};

/// The Allocate logic. Calls are serialised (kubelet may call concurrently). Thread-safe.
class Allocator {
 public:
  /// `api` and `clock` are not owned and must outlive the allocator; `devices` returns the
  /// node's GPUs as currently registered (health included).
  Allocator(AllocatorOptions options, ClusterApi* api, base::Clock* clock,
            std::function<std::vector<core::DeviceInfo>()> devices);

  /// Serves one Allocate call: `requests[k]` holds the device IDs kubelet chose for the k-th
  /// container of the call; the answer has one entry per request, in order.
  /// Errors (the pod's bind-phase becomes `failed` and the lock is released whenever the pod
  /// was identified): kNotFound (no pod being bound on this node), kPermissionDenied (not
  /// decided by our scheduler: foreign scheduler, bad or missing signature, not named by the
  /// lock), kInvalidArgument (malformed annotations, device count mismatch, unknown GPU),
  /// kUnavailable (unhealthy GPU, API server unreachable after retries), kInternal (host files).
  Result<std::vector<ContainerAllocation>> Allocate(
      const std::vector<std::vector<std::string>>& requests);

  /// GetPreferredAllocation: for the k-th request, the first available replica of each GPU the
  /// scheduler granted the pod's k-th container that still awaits allocation (must-include IDs
  /// kept). Falls back to kubelet's own order (first `size` available IDs) when no pod is found.
  std::vector<std::vector<std::string>> PreferredAllocation(
      const std::vector<PreferredRequest>& requests);

  /// node::PrepareHostFiles(options().hook_path): the node's shared host files (ld.so.preload,
  /// the region, limits and node directories). Errors: kInternal naming the path.
  Status PrepareHostFiles();

  const AllocatorOptions& options() const { return options_; }

 private:
  struct FoundPod;
  Result<FoundPod> FindPod();
  Status Verify(const FoundPod& found);
  Result<json> WriteWithRetry(const std::function<Result<json>()>& write, const std::string& what);
  Status Commit(const FoundPod& found, const std::vector<size_t>& served);
  void ReleaseLock(const std::string& ns, const std::string& name);
  void MarkFailed(const FoundPod& found, const std::string& reason);
  Result<ContainerAllocation> Serve(const FoundPod& found, size_t index,
                                    const std::vector<std::string>& device_ids);

  AllocatorOptions options_;
  ClusterApi* api_;
  base::Clock* clock_;
  std::function<std::vector<core::DeviceInfo>()> devices_;
  std::mutex mu_;
};

/// The pod {namespace, name} a node lock value names (decoded by core::DecodeNodeLock, the one
/// rule for `hami.io/mutex.lock`). Errors (kInvalidArgument, message prefixed with the key): the
/// decoder's, or "names no pod" for a valid value without both names (HAMi's legacy bare time,
/// an empty namespace or name): Allocate then looks for the pending pod by listing the node.
Result<std::pair<std::string, std::string>> LockedPod(const std::string& value);

/// A start-up warning when `<hook_path>/vgpu/libvgpu.so` is not a regular file (every Allocate
/// would then be refused: no isolation, no GPU); "" when it is there. The message names the
/// path and says how it gets there (the DaemonSet's init container copies it from the image).
std::string MissingLibraryWarning(const std::string& hook_path);

}  // namespace fracgpu::deviceplugin
