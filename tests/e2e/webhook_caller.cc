#include "webhook_caller.h"

#include <httplib.h>
#include <openssl/evp.h>

#include <atomic>

namespace fracgpu::e2e {
namespace {

using nlohmann::json;

bool IgnoredBySelector(const json& obj) {
  if (!obj.is_object()) return true;  // absent (old object on CREATE): does not hold the label
  const json* labels =
      obj.contains("metadata") && obj["metadata"].is_object() && obj["metadata"].contains("labels")
          ? &obj["metadata"]["labels"]
          : nullptr;
  return labels != nullptr && labels->is_object() &&
         labels->value("hami.io/webhook", "") == "ignore";
}

fakes::AdmissionVerdict Deny(int code, const std::string& message) {
  fakes::AdmissionVerdict v;
  v.allowed = false;
  v.code = code;
  v.message = message;
  return v;
}

}  // namespace

bool DecodeBase64(const std::string& text, std::string* out) {
  if (text.size() % 4 != 0) return false;
  std::string buf(text.size() / 4 * 3 + 1, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(buf.data()),
                          reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  if (n < 0) return false;
  size_t pad = 0;
  if (!text.empty() && text.back() == '=') ++pad;
  if (text.size() > 1 && text[text.size() - 2] == '=') ++pad;
  buf.resize(static_cast<size_t>(n) - pad);
  *out = buf;
  return true;
}

fakes::AdmissionVerdict CallPodWebhook(const std::function<std::string()>& base_url,
                                       const fakes::AdmissionCall& call) {
  // objectSelector {hami.io/webhook NotIn [ignore]} matches when either object matches it.
  bool new_ignored = IgnoredBySelector(call.object);
  bool old_ignored = call.old_object.is_null() ? true : IgnoredBySelector(call.old_object);
  if (new_ignored && old_ignored) return {};
  static std::atomic<int> next_uid{1};
  std::string uid = "e2e-admission-" + std::to_string(next_uid++);
  json request = {
      {"uid", uid},
      {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
      {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
      {"requestKind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
      {"requestResource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
      {"name", call.name},
      {"namespace", call.ns},
      {"operation", call.operation},
      {"userInfo", {{"username", call.user}, {"groups", json::array({"system:authenticated"})}}},
      {"object", call.object},
      {"oldObject", call.old_object},
      {"dryRun", false},
      {"options",
       {{"kind", call.operation == "CREATE" ? "CreateOptions" : "UpdateOptions"},
        {"apiVersion", "meta.k8s.io/v1"}}}};
  json review = {
      {"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", request}};
  std::string url = base_url();
  if (url.empty()) return Deny(500, "failed calling webhook: no endpoint available");
  httplib::Client http(url);
  http.set_connection_timeout(5, 0);
  http.set_read_timeout(10, 0);
  auto res = http.Post("/webhook?timeout=10s", review.dump(), "application/json");
  if (!res) return Deny(500, "failed calling webhook: " + httplib::to_string(res.error()));
  if (res->status != 200)
    return Deny(500, "failed calling webhook: HTTP " + std::to_string(res->status));
  json answer = json::parse(res->body, nullptr, false);
  if (!answer.is_object() || answer.value("apiVersion", "") != "admission.k8s.io/v1" ||
      answer.value("kind", "") != "AdmissionReview" || !answer.contains("response") ||
      !answer["response"].is_object()) {
    return Deny(500,
                "failed calling webhook: the answer is not an AdmissionReview v1: " + res->body);
  }
  const json& response = answer["response"];
  if (response.value("uid", "") != uid)
    return Deny(500, "failed calling webhook: response.uid does not match");
  if (!response.value("allowed", false)) {
    int code = 403;
    std::string message;
    if (response.contains("status") && response["status"].is_object()) {
      code = response["status"].value("code", 403);
      message = response["status"].value("message", "");
    }
    return Deny(code, message);
  }
  fakes::AdmissionVerdict v;
  if (response.contains("patch")) {
    if (response.value("patchType", "") != "JSONPatch")
      return Deny(500, "patch without patchType JSONPatch");
    std::string decoded;
    if (!response["patch"].is_string() ||
        !DecodeBase64(response["patch"].get<std::string>(), &decoded)) {
      return Deny(500, "the webhook's patch is not base64");
    }
    v.patch = json::parse(decoded, nullptr, false);
    if (!v.patch.is_array()) return Deny(500, "the webhook's patch is not a JSON array");
  }
  return v;
}

}  // namespace fracgpu::e2e
