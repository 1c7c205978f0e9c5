#include "scheduler/webhook.h"

#include <openssl/evp.h>

#include <algorithm>
#include <set>

#include "core/annotations.h"
#include "core/codec_json.h"
#include "core/signature.h"

namespace fracgpu::scheduler {
namespace {

using nlohmann::json;

const char* TypeName(const json& j) { return j.type_name(); }

std::string Base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// RFC 6901 escaping of one reference token.
std::string Escape(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

const json* Obj(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it != j.end() && it->is_object() ? &*it : nullptr;
}

std::string Str(const json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// The annotations map of an object (empty when absent or mistyped). DecodeAdmissionReview has
// refused non-string values (core::CheckObjectMetaStrings); none is dumped here.
std::map<std::string, std::string> Annotations(const json& obj) {
  std::map<std::string, std::string> out;
  const json* md = Obj(obj, "metadata");
  const json* ann = md ? Obj(*md, "annotations") : nullptr;
  if (ann == nullptr) return out;
  for (auto it = ann->begin(); it != ann->end(); ++it) {
    if (it->is_string()) out[it.key()] = it->get<std::string>();
  }
  return out;
}

json Response(const AdmissionRequest& req, bool allowed) {
  return {{"apiVersion", req.api_version.empty() ? "admission.k8s.io/v1" : req.api_version},
          {"kind", "AdmissionReview"},
          {"response", {{"uid", req.uid}, {"allowed", allowed}}}};
}

json Deny(const AdmissionRequest& req, int code, const std::string& message) {
  json r = Response(req, false);
  r["response"]["status"] = {{"status", "Failure"},
                             {"code", code},
                             {"reason", code == 400 ? "BadRequest" : "Forbidden"},
                             {"message", message}};
  return r;
}

// Every container of the pod spec in the order the API lists them, with its kind.
std::vector<std::pair<std::string, const json*>> AllContainers(const json& pod) {
  std::vector<std::pair<std::string, const json*>> out;
  const json* spec = Obj(pod, "spec");
  if (spec == nullptr) return out;
  for (const char* list : {"initContainers", "containers", "ephemeralContainers"}) {
    auto it = spec->find(list);
    if (it == spec->end() || !it->is_array()) continue;
    for (const auto& c : *it) out.emplace_back(list, &c);
  }
  return out;
}

bool Privileged(const json& container) {
  const json* sc = Obj(container, "securityContext");
  if (sc == nullptr) return false;
  auto it = sc->find("privileged");
  return it != sc->end() && it->is_boolean() && it->get<bool>();
}

json AdmitCreate(const AdmissionRequest& req, const WebhookConfig& config) {
  const json& pod = req.object;
  json patch = json::array();
  std::vector<std::string> warnings;

  // The handler honours the opt-out label itself in case the selectors are misconfigured.
  const json* md = Obj(pod, "metadata");
  const json* labels = md ? Obj(*md, "labels") : nullptr;
  if (labels != nullptr && Str(*labels, "hami.io/webhook") == "ignore") return Response(req, true);

  // Lock 1 (docs/design/CONTRACT.md §2): system annotations are removed from every pod on CREATE.
  auto annotations = Annotations(pod);
  for (const auto& key : SystemAnnotations()) {
    if (annotations.count(key)) {
      patch.push_back({{"op", "remove"}, {"path", "/metadata/annotations/" + Escape(key)}});
      warnings.push_back("annotation " + key + " is written by fracgpu only; removed");
    }
  }

  auto request = core::ParsePodRequest(pod, config.names);
  if (!request.ok()) return Deny(req, 400, request.status().message());
  for (const auto& w : request->warnings) warnings.push_back(w);

  if (request->UsesGpu()) {
    const json* spec = Obj(pod, "spec");
    for (const auto& [list, c] : AllContainers(pod)) {
      if (Privileged(*c)) {
        return Deny(req, 403,
                    "container \"" + Str(*c, "name") +
                        "\" is privileged: a privileged container reaches every GPU of the node, past all "
                        "fracgpu limits; remove securityContext.privileged or the fracgpu resources");
      }
    }
    std::string scheduler = spec ? Str(*spec, "schedulerName") : "";
    bool allowed_other = std::find(config.allowed_schedulers.begin(), config.allowed_schedulers.end(), scheduler) !=
                         config.allowed_schedulers.end();
    if (!scheduler.empty() && scheduler != "default-scheduler" && scheduler != config.scheduler_name &&
        !allowed_other) {
      return Deny(req, 403,
                  "spec.schedulerName is \"" + scheduler + "\", but GPU slices are placed by \"" +
                      config.scheduler_name + "\": remove spec.schedulerName (or set it to \"" +
                      config.scheduler_name + "\")");
    }
    if (spec != nullptr && !Str(*spec, "nodeName").empty()) {
      return Deny(req, 403,
                  "spec.nodeName is set to \"" + Str(*spec, "nodeName") +
                      "\": fracgpu must choose the node and its GPUs; use a nodeSelector or node affinity instead");
    }
    for (const auto& c : request->containers) {
      if (c.UsesGpu() && c.disable_control.value_or(false) && !c.WholeCards()) {
        return Deny(req, 403,
                    "container \"" + c.name +
                        "\": CUDA_DISABLE_CONTROL=true switches GPU isolation off, which is allowed only for "
                        "whole, exclusive cards (nvidia.com/gpucores: 100 and the whole memory)");
      }
    }
    if (!allowed_other && scheduler != config.scheduler_name) {
      patch.push_back({{"op", "add"}, {"path", "/spec/schedulerName"}, {"value", config.scheduler_name}});
    }
  }
  // Defaults into limits (and request-only values copied), for every container.
  auto limits = core::LimitDefaultsPatch(pod, config.names);
  if (!limits.ok()) return Deny(req, 400, limits.status().message());
  for (auto& op : *limits) patch.push_back(std::move(op));

  json r = Response(req, true);
  if (!patch.empty()) {
    r["response"]["patchType"] = "JSONPatch";
    r["response"]["patch"] = Base64(patch.dump());
  }
  if (!warnings.empty()) r["response"]["warnings"] = warnings;
  return r;
}

json AdmitUpdate(const AdmissionRequest& req, const WebhookConfig& config) {
  auto now = Annotations(req.object);
  auto before = Annotations(req.old_object);
  std::vector<std::string> changed;
  for (const auto& key : SystemAnnotations()) {
    auto a = before.find(key);
    auto b = now.find(key);
    bool had = a != before.end(), has = b != now.end();
    if (had != has || (had && a->second != b->second)) changed.push_back(key);
  }
  if (changed.empty()) return Response(req, true);
  if (req.username == config.scheduler_user) return Response(req, true);
  if (req.username == config.device_plugin_user) {
    const auto& allowed = DevicePluginAnnotations();
    bool ok = std::all_of(changed.begin(), changed.end(), [&](const std::string& k) {
      return std::find(allowed.begin(), allowed.end(), k) != allowed.end();
    });
    if (ok) return Response(req, true);
  }
  std::string keys;
  for (const auto& k : changed) keys += (keys.empty() ? "" : ", ") + k;
  return Deny(req, 403,
              "annotations " + keys + " are written by fracgpu only; user \"" + req.username +
                  "\" may not change them");
}

}  // namespace

const std::vector<std::string>& SystemAnnotations() {
  static const std::vector<std::string> kKeys(core::kSystemPodAnnotations.begin(), core::kSystemPodAnnotations.end());
  return kKeys;
}

const std::vector<std::string>& DevicePluginAnnotations() {
  static const std::vector<std::string> kKeys(core::kDevicePluginPodAnnotations.begin(),
                                              core::kDevicePluginPodAnnotations.end());
  return kKeys;
}

Result<AdmissionRequest> DecodeAdmissionReview(const std::string& body) {
  auto parsed = core::ParseJsonBounded(body, "AdmissionReview body");
  if (!parsed.ok()) return parsed.status();
  json review = std::move(*parsed);
  if (!review.is_object()) {
    return InvalidArgument(std::string("AdmissionReview must be a JSON object, got ") + TypeName(review));
  }
  AdmissionRequest out;
  out.api_version = Str(review, "apiVersion");
  if (!out.api_version.empty() && out.api_version != "admission.k8s.io/v1" &&
      out.api_version != "admission.k8s.io/v1beta1") {
    return InvalidArgument("AdmissionReview apiVersion \"" + out.api_version + "\" is not admission.k8s.io/v1");
  }
  auto rit = review.find("request");
  if (rit == review.end() || !rit->is_object()) {
    return InvalidArgument(std::string("AdmissionReview.request must be an object, got ") +
                           (rit == review.end() ? "nothing" : TypeName(*rit)));
  }
  const json& r = *rit;
  for (const char* key : {"uid", "operation"}) {
    auto it = r.find(key);
    if (it == r.end() || !it->is_string()) {
      return InvalidArgument(std::string("AdmissionReview.request.") + key + " must be a string, got " +
                             (it == r.end() ? "nothing" : TypeName(*it)));
    }
  }
  out.uid = r["uid"].get<std::string>();
  out.operation = r["operation"].get<std::string>();
  if (const json* kind = Obj(r, "kind")) out.kind = Str(*kind, "kind");
  out.sub_resource = Str(r, "subResource");
  out.namespace_ = Str(r, "namespace");
  if (const json* ui = Obj(r, "userInfo")) out.username = Str(*ui, "username");
  for (const char* key : {"object", "oldObject"}) {
    auto it = r.find(key);
    if (it == r.end() || it->is_null()) continue;
    if (!it->is_object()) {
      return InvalidArgument(std::string("AdmissionReview.request.") + key + " must be an object, got " +
                             TypeName(*it));
    }
    FRACGPU_RETURN_IF_ERROR(core::CheckObjectMetaStrings(*it, std::string("AdmissionReview.request.") + key));
    (std::string(key) == "object" ? out.object : out.old_object) = *it;
  }
  return out;
}

json Admit(const AdmissionRequest& request, const WebhookConfig& config) {
  // Only pods (the registration selects pods; anything else passes untouched), and only
  // the pod itself, not its status or other subresources.
  if ((!request.kind.empty() && request.kind != "Pod") || !request.sub_resource.empty()) {
    return Response(request, true);
  }
  if (request.operation == "CREATE") {
    if (!request.object.is_object()) return Deny(request, 400, "AdmissionReview.request.object is missing");
    return AdmitCreate(request, config);
  }
  if (request.operation == "UPDATE") {
    if (!request.object.is_object() || !request.old_object.is_object()) {
      return Deny(request, 400, "AdmissionReview.request.object and oldObject are required on UPDATE");
    }
    return AdmitUpdate(request, config);
  }
  return Response(request, true);
}

Result<json> HandleAdmissionReview(const std::string& body, const WebhookConfig& config) {
  auto req = DecodeAdmissionReview(body);
  if (!req.ok()) return req.status();
  return Admit(*req, config);
}

}  // namespace fracgpu::scheduler
