#include "scheduler/webhook.h"

#include <openssl/evp.h>

#include <algorithm>
#include <set>

#include "base/strings.h"
#include "core/annotations.h"
#include "core/codec_json.h"
#include "core/dra_convert.h"
#include "core/quantity.h"
#include "core/request.h"
#include "core/signature.h"
#include "k8s/client.h"

namespace fracgpu::scheduler {
namespace {

using nlohmann::json;

const char* TypeName(const json& j) { return j.type_name(); }

std::string Base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()),
                          static_cast<int>(in.size()));
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
                             {"reason", code == 400   ? "BadRequest"
                                        : code == 403 ? "Forbidden"
                                                      : "InternalError"},
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

json Patched(const AdmissionRequest& req, const json& patch,
             const std::vector<std::string>& warnings) {
  json r = Response(req, true);
  if (!patch.empty()) {
    r["response"]["patchType"] = "JSONPatch";
    r["response"]["patch"] = Base64(patch.dump());
  }
  if (!warnings.empty()) r["response"]["warnings"] = warnings;
  return r;
}

// DRA mode, a GPU pod that passed validation: its claims instead of the extender's protocol
// (no schedulerName, no limit defaults: kube-scheduler places the claims, and the nvidia.com/*
// resources the defaults would write are removed).
json AdmitCreateDra(const AdmissionRequest& req, const WebhookConfig& config, json patch,
                    std::vector<std::string> warnings) {
  auto conversion = core::ConvertHamiPod(req.object, config.names);
  if (!conversion.ok()) return Deny(req, 400, "DRA mode: " + conversion.status().message());
  if (!config.create_claim_template) {
    return Deny(req, 500,
                "DRA mode: the webhook has no API client to create ResourceClaimTemplates");
  }
  for (json& t : conversion->templates) {
    // The request's namespace is authoritative (metadata.namespace may be empty on CREATE).
    if (!req.namespace_.empty()) t["metadata"]["namespace"] = req.namespace_;
    if (req.dry_run) continue;
    Status st = config.create_claim_template(t);
    if (!st.ok()) {
      return Deny(req, 500,
                  "DRA mode: cannot create ResourceClaimTemplate " +
                      t["metadata"].value("namespace", "") + "/" + t["metadata"].value("name", "") +
                      " for this pod (pod refused, nothing placed): " + st.message());
    }
  }
  for (auto& op : conversion->pod_patch) patch.push_back(std::move(op));
  return Patched(req, patch, warnings);
}

// HAMi's overwriteEnv (pkg/device/nvidia/device.go MutateAdmission): every container that
// asks for no GPU gets NVIDIA_VISIBLE_DEVICES=none, so the NVIDIA container runtime gives it no
// GPU even when its image or spec says `all` (issue 32 item 6). An entry the spec already has is
// replaced whole (a valueFrom goes too); otherwise one is added. Ephemeral containers are not
// part of a CREATE.
// The NVIDIA container runtime's variable (api::kEnvVisibleDevices; scheduler/ may not include
// api/).
constexpr char kVisibleDevices[] = "NVIDIA_VISIBLE_DEVICES";

void OverwriteVisibleDevices(const json& pod, const core::PodRequest& request, json* patch) {
  const json* spec = Obj(pod, "spec");
  if (spec == nullptr) return;
  const json entry = {{"name", kVisibleDevices}, {"value", "none"}};
  for (const char* list : {"initContainers", "containers"}) {
    auto it = spec->find(list);
    if (it == spec->end() || !it->is_array()) continue;
    for (size_t i = 0; i < it->size(); ++i) {
      const json& c = (*it)[i];
      const std::string name = Str(c, "name");
      bool gpu = false;
      for (const auto& r : request.containers)
        if (r.name == name && r.UsesGpu()) gpu = true;
      if (gpu) continue;
      const std::string base = std::string("/spec/") + list + "/" + std::to_string(i) + "/env";
      auto env = c.find("env");
      if (env == c.end() || !env->is_array()) {
        patch->push_back({{"op", "add"}, {"path", base}, {"value", json::array({entry})}});
        continue;
      }
      bool found = false;
      for (size_t j = 0; j < env->size(); ++j) {
        if (!(*env)[j].is_object() || Str((*env)[j], "name") != kVisibleDevices) continue;
        patch->push_back(
            {{"op", "replace"}, {"path", base + "/" + std::to_string(j)}, {"value", entry}});
        found = true;
      }
      if (!found) patch->push_back({{"op", "add"}, {"path", base + "/-"}, {"value", entry}});
    }
  }
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
  if (config.overwrite_env) OverwriteVisibleDevices(pod, *request, &patch);

  if (request->UsesGpu()) {
    const json* spec = Obj(pod, "spec");
    for (const auto& [list, c] : AllContainers(pod)) {
      if (Privileged(*c)) {
        return Deny(
            req, 403,
            "container \"" + Str(*c, "name") +
                "\" is privileged: a privileged container reaches every GPU of the node, past all "
                "fracgpu limits; remove securityContext.privileged or the fracgpu resources");
      }
    }
    std::string scheduler = spec ? Str(*spec, "schedulerName") : "";
    bool allowed_other =
        std::find(config.allowed_schedulers.begin(), config.allowed_schedulers.end(), scheduler) !=
        config.allowed_schedulers.end();
    // In DRA mode the claims are placed by whichever scheduler runs the pod (kube-scheduler's
    // DynamicResources plugin), so any schedulerName is fine.
    bool alias = std::find(config.scheduler_aliases.begin(), config.scheduler_aliases.end(),
                           scheduler) != config.scheduler_aliases.end();
    if (!config.dra_mode && !scheduler.empty() && scheduler != "default-scheduler" &&
        scheduler != config.scheduler_name && !allowed_other && !alias) {
      return Deny(req, 403,
                  "spec.schedulerName is \"" + scheduler + "\", but GPU slices are placed by \"" +
                      config.scheduler_name + "\": remove spec.schedulerName (or set it to \"" +
                      config.scheduler_name + "\")");
    }
    if (spec != nullptr && !Str(*spec, "nodeName").empty()) {
      return Deny(req, 403,
                  "spec.nodeName is set to \"" + Str(*spec, "nodeName") +
                      "\": fracgpu must choose the node and its GPUs; use a nodeSelector or node "
                      "affinity instead");
    }
    // A borrower runs on memory a parked owner lends and is evicted when the owner wakes
    // (docs/reclaim.md "Lending"): it must not outrank ordinary pods, or kube-scheduler's
    // preemption would evict ordinary pods to make room for it. spec.priority is set from
    // priorityClassName by the Priority admission plugin, which runs before webhooks.
    if (request->borrower && spec != nullptr) {
      auto pr = spec->find("priority");
      if (pr != spec->end() && pr->is_number_integer() && pr->get<int64_t>() > 0) {
        const std::string cls = Str(*spec, "priorityClassName");
        return Deny(req, 403,
                    std::string("annotation ") + core::kAnnotationBorrower +
                        " is \"true\" but spec.priority is " + std::to_string(pr->get<int64_t>()) +
                        (cls.empty() ? std::string() : " (priorityClassName \"" + cls + "\")") +
                        ": a borrower is evicted when the owner of the memory it borrows wakes, "
                        "so it may not outrank ordinary pods; use a PriorityClass of value 0 or "
                        "below, or remove the annotation");
      }
      // The node agent gives an evicted borrower at most kBorrowerGraceSeconds to stop
      // (monitor/borrowers.h, DeleteOptions of its eviction): a longer
      // terminationGracePeriodSeconds would only promise the tenant time it does not get, and
      // the woken owner waits for it (issue 36 review finding 5). Refused, not capped, so the
      // spec the tenant wrote is the one that runs.
      constexpr int64_t kBorrowerGraceSeconds = 30;
      auto grace = spec->find("terminationGracePeriodSeconds");
      if (grace != spec->end() && grace->is_number_integer() &&
          grace->get<int64_t>() > kBorrowerGraceSeconds) {
        return Deny(req, 403,
                    std::string("annotation ") + core::kAnnotationBorrower +
                        " is \"true\" but spec.terminationGracePeriodSeconds is " +
                        std::to_string(grace->get<int64_t>()) + ": a borrower is given at most " +
                        std::to_string(kBorrowerGraceSeconds) +
                        " s to stop when the owner of the memory it borrows wakes; set it to " +
                        std::to_string(kBorrowerGraceSeconds) + " or less");
      }
      // Priority 0 still outranks pods of negative-priority classes, whom kube-scheduler's
      // DefaultPreemption would evict for a borrower (issue 36 review, lesser finding): a
      // borrower never preempts, spec.preemptionPolicy "Never" (k8s.io/api core/v1
      // PreemptNever; DefaultPreemption's PodEligibleToPreemptOthers skips such pods). The
      // policy comes only from a PriorityClass: the Priority admission plugin resolved it before
      // this webhook and, re-run after any webhook changed the pod, refuses a policy or priority
      // other than its class's (seen on v1.37.2: "the string value of PreemptionPolicy (Never)
      // must not be provided in pod spec"). So a borrower naming no class is given
      // kBorrowerPriorityClass with its value and policy, which the re-run finds consistent; one
      // whose class lets it preempt is refused rather than moved to another class, so the spec
      // the tenant wrote is the one that runs.
      const std::string policy = Str(*spec, "preemptionPolicy");
      if (policy != "Never") {
        const std::string cls = Str(*spec, "priorityClassName");
        if (!cls.empty()) {
          return Deny(req, 403,
                      std::string("annotation ") + core::kAnnotationBorrower +
                          " is \"true\" but priorityClassName \"" + cls +
                          "\" has preemptionPolicy \"" +
                          (policy.empty() ? std::string("PreemptLowerPriority") : policy) +
                          "\": a borrower may never preempt other pods; name the PriorityClass " +
                          kBorrowerPriorityClass +
                          " (or another with preemptionPolicy: Never), or none and the webhook "
                          "gives it " +
                          kBorrowerPriorityClass);
        }
        patch.push_back({{"op", "add"},
                         {"path", "/spec/priorityClassName"},
                         {"value", kBorrowerPriorityClass}});
        patch.push_back({{"op", "add"}, {"path", "/spec/priority"}, {"value", kBorrowerPriority}});
        patch.push_back({{"op", "add"}, {"path", "/spec/preemptionPolicy"}, {"value", "Never"}});
      }
    }
    for (const auto& c : request->containers) {
      if (c.UsesGpu() && c.disable_control.value_or(false) && !c.WholeCards()) {
        return Deny(req, 403,
                    "container \"" + c.name +
                        "\": CUDA_DISABLE_CONTROL=true switches GPU isolation off, which is "
                        "allowed only for "
                        "whole, exclusive cards (nvidia.com/gpucores: 100 and the whole memory)");
      }
    }
    // HAMi sets the configured runtime class on GPU pods that name none (in DRA mode too).
    if (!config.runtime_class_name.empty() &&
        (spec == nullptr || !spec->contains("runtimeClassName") ||
         spec->at("runtimeClassName").is_null())) {
      patch.push_back({{"op", "add"},
                       {"path", "/spec/runtimeClassName"},
                       {"value", config.runtime_class_name}});
    }
    if (config.dra_mode) {
      // Fail closed: a GPU quota nothing can enforce for claims is not silently skipped.
      const std::string quota = config.gpu_quota_in ? config.gpu_quota_in(req.namespace_) : "";
      if (!quota.empty()) {
        return Deny(req, 403,
                    "DRA mode: namespace " + req.namespace_ + " has the GPU ResourceQuota " +
                        quota +
                        ", which fracgpu enforces only through its scheduler extender; in DRA "
                        "mode kube-scheduler allocates the claims, so the pod is refused rather "
                        "than run outside its quota (remove the quota's limits.* GPU entries, or "
                        "run the namespace's GPU pods in extender mode)");
      }
      return AdmitCreateDra(req, config, std::move(patch), std::move(warnings));
    }
    if (config.quota_check) {
      Status quota = config.quota_check(req.namespace_, *request);
      if (!quota.ok()) return Deny(req, 403, quota.message());
    }
    if (!allowed_other && scheduler != config.scheduler_name) {
      patch.push_back(
          {{"op", "add"}, {"path", "/spec/schedulerName"}, {"value", config.scheduler_name}});
    }
  }
  // Defaults into limits (and request-only values copied), for every container.
  auto limits = core::LimitDefaultsPatch(pod, config.names);
  if (!limits.ok()) return Deny(req, 400, limits.status().message());
  for (auto& op : *limits) patch.push_back(std::move(op));
  return Patched(req, patch, warnings);
}

// Two strings that are the same Kubernetes quantity ("16Gi" and "16384Mi", "50" and "50").
bool SameQuantity(const std::string& a, const std::string& b) {
  auto qa = core::ParseQuantity(a);
  auto qb = core::ParseQuantity(b);
  if (!qa.ok() || !qb.ok() || qa->negative != qb->negative) return false;
  int64_t va = 0, vb = 0;
  return core::QuantityToInt64(*qa, &va, 0) == core::WholeStatus::kOk &&
         core::QuantityToInt64(*qb, &vb, 0) == core::WholeStatus::kOk && va == vb;
}

json AdmitUpdate(const AdmissionRequest& req, const WebhookConfig& config) {
  auto now = Annotations(req.object);
  auto before = Annotations(req.old_object);
  // The borrower flag is fixed at creation, for every user (fracgpu's own accounts never
  // change it either): a borrower that removed it would escape eviction when the owner of
  // the memory it borrows wakes, and a pending pod that added it, landed on lent memory and
  // removed it again would hold that memory for good (docs/reclaim.md "Lending").
  {
    auto a = before.find(core::kAnnotationBorrower);
    auto b = now.find(core::kAnnotationBorrower);
    bool had = a != before.end(), has = b != now.end();
    if (had != has || (had && a->second != b->second)) {
      return Deny(req, 403,
                  std::string("annotation ") + core::kAnnotationBorrower +
                      " is set when the pod is created and cannot be added, removed or changed "
                      "afterwards; delete and recreate the pod instead");
    }
  }
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
  const std::string keys = base::Join(changed, ", ");
  return Deny(req, 403,
              "annotations " + keys + " are written by fracgpu only; user \"" + req.username +
                  "\" may not change them");
}

}  // namespace

const std::vector<std::string>& SystemAnnotations() {
  static const std::vector<std::string> kKeys(core::kSystemPodAnnotations.begin(),
                                              core::kSystemPodAnnotations.end());
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
    return InvalidArgument(std::string("AdmissionReview must be a JSON object, got ") +
                           TypeName(review));
  }
  AdmissionRequest out;
  out.api_version = Str(review, "apiVersion");
  if (!out.api_version.empty() && out.api_version != "admission.k8s.io/v1" &&
      out.api_version != "admission.k8s.io/v1beta1") {
    return InvalidArgument("AdmissionReview apiVersion \"" + out.api_version +
                           "\" is not admission.k8s.io/v1");
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
      return InvalidArgument(std::string("AdmissionReview.request.") + key +
                             " must be a string, got " +
                             (it == r.end() ? "nothing" : TypeName(*it)));
    }
  }
  out.uid = r["uid"].get<std::string>();
  out.operation = r["operation"].get<std::string>();
  if (const json* kind = Obj(r, "kind")) out.kind = Str(*kind, "kind");
  out.sub_resource = Str(r, "subResource");
  out.namespace_ = Str(r, "namespace");
  if (const json* ui = Obj(r, "userInfo")) out.username = Str(*ui, "username");
  if (auto dr = r.find("dryRun"); dr != r.end() && !dr->is_null()) {
    if (!dr->is_boolean()) {
      return InvalidArgument(std::string("AdmissionReview.request.dryRun must be a boolean, got ") +
                             TypeName(*dr));
    }
    out.dry_run = dr->get<bool>();
  }
  for (const char* key : {"object", "oldObject"}) {
    auto it = r.find(key);
    if (it == r.end() || it->is_null()) continue;
    if (!it->is_object()) {
      return InvalidArgument(std::string("AdmissionReview.request.") + key +
                             " must be an object, got " + TypeName(*it));
    }
    FRACGPU_RETURN_IF_ERROR(
        core::CheckObjectMetaStrings(*it, std::string("AdmissionReview.request.") + key));
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
    if (!request.object.is_object())
      return Deny(request, 400, "AdmissionReview.request.object is missing");
    return AdmitCreate(request, config);
  }
  if (request.operation == "UPDATE") {
    if (!request.object.is_object() || !request.old_object.is_object()) {
      return Deny(request, 400,
                  "AdmissionReview.request.object and oldObject are required on UPDATE");
    }
    return AdmitUpdate(request, config);
  }
  return Response(request, true);
}

void ApplyDeviceConfig(const node::DeviceConfig& device_config, WebhookConfig* config) {
  config->names = device_config.resources;
  if (device_config.overwrite_env) config->overwrite_env = *device_config.overwrite_env;
  if (!device_config.runtime_class_name.empty()) {
    config->runtime_class_name = device_config.runtime_class_name;
  }
}

std::string ClaimTemplatePath(const std::string& ns, const std::string& name) {
  std::string path = "/apis/resource.k8s.io/v1/namespaces/" + ns + "/resourceclaimtemplates";
  return name.empty() ? path : path + "/" + name;
}

bool SameContent(const json& have, const json& want) {
  if (want.is_object()) {
    if (!have.is_object()) return false;
    for (auto it = want.begin(); it != want.end(); ++it) {
      auto h = have.find(it.key());
      if (h == have.end() || !SameContent(*h, it.value())) return false;
    }
    return true;
  }
  if (want.is_array()) {
    if (!have.is_array() || have.size() != want.size()) return false;
    for (size_t i = 0; i < want.size(); ++i) {
      if (!SameContent(have[i], want[i])) return false;
    }
    return true;
  }
  if (want.is_string() && have.is_string()) {
    const auto& a = have.get_ref<const std::string&>();
    const auto& b = want.get_ref<const std::string&>();
    return a == b || SameQuantity(a, b);
  }
  return have == want;
}

std::function<Status(const json&)> ClaimTemplateCreator(k8s::Client* client) {
  return [client](const json& t) -> Status {
    const json& md = t.value("metadata", json::object());
    const std::string ns = md.value("namespace", ""), name = md.value("name", "");
    auto created = client->Create(ClaimTemplatePath(ns), t);
    if (created.ok()) return Status();
    if (created.status().code() != StatusCode::kConflict) return created.status();
    // AlreadyExists: another replica of the same workload (generateName) made it, or an old one.
    auto existing = client->Get(ClaimTemplatePath(ns, name));
    if (!existing.ok()) return existing.status();
    if (!SameContent(existing->value("spec", json::object()), t.value("spec", json::object()))) {
      return Conflict(
          "ResourceClaimTemplate " + ns + "/" + name +
          " already exists with a different spec (delete it, or rename the pod or container)");
    }
    return Status();
  };
}

Result<json> HandleAdmissionReview(const std::string& body, const WebhookConfig& config) {
  auto req = DecodeAdmissionReview(body);
  if (!req.ok()) return req.status();
  return Admit(*req, config);
}

}  // namespace fracgpu::scheduler
