#pragma once
// The mutating admission webhook (`/webhook`, AdmissionReview admission.k8s.io/v1,
// docs/design/wire-apis.md §5; docs/design/CONTRACT.md §1–3). Pure functions: AdmissionReview in, AdmissionReview
// out; no I/O, so the same code runs under the HTTP server, the fuzzer and the unit tests.
//
// CREATE: removes system annotations (every pod); for a pod that uses fracgpu: validates the
// request (400 naming container, resource and value), denies privileged containers, foreign
// schedulers, a preset nodeName and CUDA_DISABLE_CONTROL=true on a shared slice (403), sets
// spec.schedulerName, writes the limit defaults (core::LimitDefaultsPatch), adds warnings.
// UPDATE: denies (403) any change to system annotations unless userInfo.username is the
// scheduler's service account (all keys) or the device plugin's (to-allocate and bind-phase).

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/request.h"
#include "core/status.h"

namespace fracgpu::scheduler {

/// Pod annotations only the system may write (docs/design/CONTRACT.md §2).
const std::vector<std::string>& SystemAnnotations();
/// The subset the device plugin may change on UPDATE.
const std::vector<std::string>& DevicePluginAnnotations();

/// Webhook settings (flags of `fracgpu scheduler`).
struct WebhookConfig {
  std::string scheduler_name = "fracgpu-scheduler";
  /// Other schedulers that speak this contract (pods naming them are admitted unchanged).
  std::vector<std::string> allowed_schedulers;
  std::string scheduler_user = "system:serviceaccount:fracgpu-system:fracgpu-scheduler";
  std::string device_plugin_user = "system:serviceaccount:fracgpu-system:fracgpu-device-plugin";
  core::ResourceNames names;
};

/// A decoded AdmissionReview request (the fields the webhook reads).
struct AdmissionRequest {
  std::string api_version;  ///< echoed in the response ("admission.k8s.io/v1")
  std::string uid;
  std::string operation;    ///< CREATE | UPDATE | DELETE | CONNECT
  std::string kind;         ///< request.kind.kind, e.g. "Pod"
  std::string sub_resource;
  std::string namespace_;
  std::string username;     ///< request.userInfo.username
  nlohmann::json object;    ///< null when absent
  nlohmann::json old_object;
};

/// Decodes an AdmissionReview body. Errors (kInvalidArgument, mapped to HTTP 400): not JSON,
/// not an object, missing `request`, `request.uid` or `request.operation` not a string,
/// `object`/`oldObject` present but not objects, the field and the JSON type named.
Result<AdmissionRequest> DecodeAdmissionReview(const std::string& body);

/// The webhook's decision for one request: the full AdmissionReview response object
/// (apiVersion, kind, response{uid, allowed, status?, patchType?, patch?, warnings?}).
nlohmann::json Admit(const AdmissionRequest& request, const WebhookConfig& config);

/// Decodes the body and admits; a body that does not decode gives kInvalidArgument.
Result<nlohmann::json> HandleAdmissionReview(const std::string& body, const WebhookConfig& config);

}  // namespace fracgpu::scheduler
