#pragma once
// The mutating admission webhook (`/webhook`, AdmissionReview admission.k8s.io/v1,
// docs/design/wire-apis.md §5; docs/design/CONTRACT.md §1–3). Pure functions: AdmissionReview in,
// AdmissionReview out; no I/O, so the same code runs under the HTTP server, the fuzzer and the unit
// tests. The one exception is DRA mode (WebhookConfig::dra_mode), whose single side effect —
// creating the pod's ResourceClaimTemplates — goes through the WebhookConfig::create_claim_template
// callback (ClaimTemplateCreator over the API server in `fracgpu scheduler --dra-mode`, a fake in
// tests).
//
// CREATE: removes system annotations (every pod); for a pod that uses fracgpu: validates the
// request (400 naming container, resource and value), denies privileged containers, foreign
// schedulers, a preset nodeName and CUDA_DISABLE_CONTROL=true on a shared slice (403), sets
// spec.schedulerName, writes the limit defaults (core::LimitDefaultsPatch), adds warnings.
// CREATE in DRA mode (docs/dra.md "HAMi-style pods"): the same validation and denials, then
// instead of the scheduler name and the limit defaults, core::ConvertHamiPod: each GPU
// container's request becomes a ResourceClaimTemplate (resource.k8s.io/v1) created in the
// pod's namespace, and the patch adds spec.resourceClaims and the containers'
// resources.claims and removes the nvidia.com/* limits and requests; kube-scheduler then
// places the claims. A template that cannot be created denies the pod (500, fail closed).
// UPDATE: denies (403) any change to system annotations unless userInfo.username is the
// scheduler's service account (all keys) or the device plugin's (to-allocate and bind-phase).

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/request.h"
#include "node/config.h"

namespace fracgpu::k8s {
class Client;
}

namespace fracgpu::scheduler {

/// Pod annotations only the system may write (docs/design/CONTRACT.md §2).
const std::vector<std::string>& SystemAnnotations();
/// The subset the device plugin may change on UPDATE.
const std::vector<std::string>& DevicePluginAnnotations();

/// The PriorityClass the webhook gives a borrower pod (annotation fracgpu.io/borrower "true")
/// that names none, and its value and policy as deploy/priority-class.yaml (and the chart) ship
/// it. The Priority admission plugin, re-run after a webhook changed the pod, refuses a pod whose
/// spec.priority or spec.preemptionPolicy differs from its class's (kube-apiserver
/// plugin/pkg/admission/priority, v1.34-v1.37): the manifest and these change together.
inline constexpr char kBorrowerPriorityClass[] = "fracgpu-borrower";
/// spec.priority of kBorrowerPriorityClass: below ordinary pods' 0, so borrowers queue behind them.
inline constexpr int kBorrowerPriority = -1000;

/// Webhook settings (flags of `fracgpu scheduler`).
struct WebhookConfig {
  std::string scheduler_name = "fracgpu-scheduler";
  /// Other schedulers that speak this contract (pods naming them are admitted unchanged).
  std::vector<std::string> allowed_schedulers;
  /// Other names of this scheduler: a GPU pod naming one is admitted and its
  /// spec.schedulerName set to scheduler_name, as a pod naming none. "hami-scheduler" (HAMi's
  /// scheduler name) by default, so that workloads written for HAMi move over unchanged
  /// (docs/hami-migration.md).
  std::vector<std::string> scheduler_aliases = {"hami-scheduler"};
  std::string scheduler_user = "system:serviceaccount:fracgpu-system:fracgpu-scheduler";
  std::string device_plugin_user = "system:serviceaccount:fracgpu-system:fracgpu-device-plugin";
  core::ResourceNames names;
  /// DRA mode (`--dra-mode`): GPU requests become ResourceClaims (see the file comment).
  bool dra_mode = false;
  /// HAMi's `overwriteEnv` (`--overwrite-env`, default on): every container of a created pod
  /// that asks for no GPU gets NVIDIA_VISIBLE_DEVICES=none, replacing any value it set, so the
  /// NVIDIA runtime mounts it no GPU (a pod with no GPU request and `all` gets none). Pods with
  /// the opt-out label hami.io/webhook=ignore (fracgpu's own DaemonSets) are left alone.
  bool overwrite_env = true;
  /// HAMi's `runtimeClassName` (device config `nvidia.runtimeClassName`, chart value
  /// `devicePlugin.runtimeClassName`; pkg/device/nvidia/device.go MutateAdmission): when not
  /// empty, every created pod with a GPU request that sets no spec.runtimeClassName gets this
  /// one (a pod's own value is kept). For clusters whose NVIDIA runtime is not the default
  /// (k3s, the GPU Operator): the kubelet then runs the pod with that RuntimeClass's handler.
  /// A DNS-1123 subdomain (RuntimeClass names are; the device config parser checks it).
  std::string runtime_class_name;
  /// Namespace GPU quotas at admission (scheduler/quota.h; not in DRA mode): called for a
  /// created GPU pod with the request's namespace and the pod's request; an error denies the pod
  /// (403) with its message. Empty = no check. SchedulerService sets it.
  std::function<Status(const std::string& ns, const core::PodRequest& request)> quota_check;
  /// DRA mode: the ResourceQuota of a namespace that limits GPU memory or cores, as
  /// "<ns>/<name> limits.<resource>", or "" (QuotaTracker::LimitingQuota). kube-scheduler's DRA
  /// plugin allocates the claims, not fracgpu's extender, so such a quota cannot be enforced:
  /// a created GPU pod in that namespace is denied (403) naming the quota, rather than run
  /// outside it. Empty function = no check. SchedulerService sets it.
  std::function<std::string(const std::string& ns)> gpu_quota_in;
  /// Creates one ResourceClaimTemplate object; OK when created or when one with the same
  /// content exists. Required in DRA mode (a GPU pod is denied without it).
  std::function<Status(const nlohmann::json& claim_template)> create_claim_template;
};

/// Applies the cluster device config (`fracgpu scheduler --device-config-file`, the file the
/// device plugin reads) to the webhook: resource names and request defaults (defaultMemory,
/// defaultCores, defaultGPUNum, memoryFactor) always, overwriteEnv and runtimeClassName when
/// the file sets them.
void ApplyDeviceConfig(const node::DeviceConfig& device_config, WebhookConfig* config);

/// A decoded AdmissionReview request (the fields the webhook reads).
struct AdmissionRequest {
  std::string api_version;  ///< echoed in the response ("admission.k8s.io/v1")
  std::string uid;
  std::string operation;  ///< CREATE | UPDATE | DELETE | CONNECT
  std::string kind;       ///< request.kind.kind, e.g. "Pod"
  std::string sub_resource;
  std::string namespace_;
  std::string username;   ///< request.userInfo.username
  bool dry_run = false;   ///< request.dryRun: no side effects (DRA mode creates no template)
  nlohmann::json object;  ///< null when absent
  nlohmann::json old_object;
};

/// Decodes an AdmissionReview body. Errors (kInvalidArgument, mapped to HTTP 400): not JSON,
/// not an object, missing `request`, `request.uid` or `request.operation` not a string,
/// `object`/`oldObject` present but not objects, the field and the JSON type named.
Result<AdmissionRequest> DecodeAdmissionReview(const std::string& body);

/// The webhook's decision for one request: the full AdmissionReview response object
/// (apiVersion, kind, response{uid, allowed, status?, patchType?, patch?, warnings?}).
nlohmann::json Admit(const AdmissionRequest& request, const WebhookConfig& config);

/// The REST path of ResourceClaimTemplates in `ns`, or of one (`name` non-empty):
/// "/apis/resource.k8s.io/v1/namespaces/<ns>/resourceclaimtemplates[/<name>]".
std::string ClaimTemplatePath(const std::string& ns, const std::string& name = "");

/// True when `have` (an object read back from the API server) carries every field of `want`
/// with the same value: objects by key (extra keys of `have`, e.g. server defaults and
/// metadata, are ignored), arrays element by element and of the same length, strings equal or
/// equal as Kubernetes quantities ("16384Mi" = "16Gi").
bool SameContent(const nlohmann::json& have, const nlohmann::json& want);

/// WebhookConfig::create_claim_template over the API server: POST to ClaimTemplatePath; on 409
/// (AlreadyExists) GET the existing one and accept it when its spec has the same content
/// (SameContent), else kConflict naming the template. Other errors: the client's (the method,
/// path and HTTP status named). `client` must outlive the function.
std::function<Status(const nlohmann::json&)> ClaimTemplateCreator(k8s::Client* client);

/// Decodes the body and admits; a body that does not decode gives kInvalidArgument.
Result<nlohmann::json> HandleAdmissionReview(const std::string& body, const WebhookConfig& config);

}  // namespace fracgpu::scheduler
