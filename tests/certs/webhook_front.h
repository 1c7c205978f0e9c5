#pragma once
// Test helper: an HTTP front for the fake API server (tests/fakes/apiserver) that serves the
// two kinds `fracgpu certs` writes and the fake does not (it serves nodes, pods, leases and
// events only):
//   - Secrets (core/v1, namespaced): GET, POST (409 when it exists), PUT (409 on a stale
//     metadata.resourceVersion);
//   - MutatingWebhookConfigurations (admissionregistration.k8s.io/v1, cluster-scoped): GET, and
//     PATCH with an RFC 7386 merge patch (409 when the patch carries a stale resourceVersion).
// Every other request is forwarded to the fake unchanged.
#include <httplib.h>

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fake_apiserver.h"

namespace fracgpu::certs::testing {

using nlohmann::json;

class WebhookFront {
 public:
  explicit WebhookFront(const fakes::FakeApiServer& fake) : fake_port_(fake.port()) {
    const std::string hooks =
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/";
    const std::string secrets = R"(/api/v1/namespaces/([a-z0-9-]+)/secrets)";
    server_.Get(
        hooks + "([a-z0-9.-]+)", [this](const httplib::Request& req, httplib::Response& res) {
          std::lock_guard<std::mutex> lock(mu_);
          if (Injected(req, res)) return;
          auto it = configs_.find(req.matches[1].str());
          if (it == configs_.end()) {
            return Fail(res, 404,
                        "mutatingwebhookconfigurations \"" + req.matches[1].str() + "\" not found");
          }
          res.set_content(it->second.dump(), "application/json");
        });
    server_.Patch(hooks + "([a-z0-9.-]+)",
                  [this](const httplib::Request& req, httplib::Response& res) {
                    std::lock_guard<std::mutex> lock(mu_);
                    ++patches_;
                    if (Injected(req, res)) return;
                    auto it = configs_.find(req.matches[1].str());
                    if (it == configs_.end()) return Fail(res, 404, "not found");
                    json patch = json::parse(req.body, nullptr, false);
                    if (!patch.is_object()) return Fail(res, 400, "patch is not a JSON object");
                    std::string rv = patch.value("/metadata/resourceVersion"_json_pointer, "");
                    if (!rv.empty() && rv != it->second["metadata"]["resourceVersion"])
                      return Fail(res, 409, "stale resourceVersion");
                    it->second.merge_patch(patch);
                    it->second["metadata"]["resourceVersion"] = std::to_string(++rv_);
                    res.set_content(it->second.dump(), "application/json");
                  });
    server_.Get(secrets + "/([a-z0-9.-]+)",
                [this](const httplib::Request& req, httplib::Response& res) {
                  std::lock_guard<std::mutex> lock(mu_);
                  if (Injected(req, res)) return;
                  auto it = secrets_.find(req.matches[1].str() + "/" + req.matches[2].str());
                  if (it == secrets_.end())
                    return Fail(res, 404, "secrets \"" + req.matches[2].str() + "\" not found");
                  res.set_content(it->second.dump(), "application/json");
                });
    server_.Post(secrets, [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      ++secret_writes_;
      if (Injected(req, res)) return;
      json body = json::parse(req.body, nullptr, false);
      if (!body.is_object() || !body.contains("metadata")) return Fail(res, 400, "bad Secret");
      std::string key = req.matches[1].str() + "/" + body["metadata"].value("name", "");
      if (secrets_.count(key)) return Fail(res, 409, "secrets already exists");
      body["metadata"]["namespace"] = req.matches[1].str();
      body["metadata"]["resourceVersion"] = std::to_string(++rv_);
      secrets_[key] = body;
      res.status = 201;
      res.set_content(body.dump(), "application/json");
    });
    server_.Put(secrets + "/([a-z0-9.-]+)",
                [this](const httplib::Request& req, httplib::Response& res) {
                  std::lock_guard<std::mutex> lock(mu_);
                  ++secret_writes_;
                  if (Injected(req, res)) return;
                  auto it = secrets_.find(req.matches[1].str() + "/" + req.matches[2].str());
                  if (it == secrets_.end()) return Fail(res, 404, "not found");
                  json body = json::parse(req.body, nullptr, false);
                  if (!body.is_object()) return Fail(res, 400, "bad Secret");
                  if (body["metadata"].value("resourceVersion", "") !=
                      it->second["metadata"]["resourceVersion"]) {
                    return Fail(res, 409, "the object has been modified");
                  }
                  body["metadata"]["resourceVersion"] = std::to_string(++rv_);
                  it->second = body;
                  res.set_content(body.dump(), "application/json");
                });
    auto forward = [this](const httplib::Request& req, httplib::Response& res) {
      httplib::Client fake("127.0.0.1", fake_port_);
      std::string target = req.path;
      std::string query;
      for (const auto& [k, v] : req.params) query += (query.empty() ? "?" : "&") + k + "=" + v;
      target += query;
      std::string ct = req.get_header_value("Content-Type");
      auto call = [&]() -> httplib::Result {
        if (req.method == "POST") return fake.Post(target, req.body, ct);
        if (req.method == "PUT") return fake.Put(target, req.body, ct);
        if (req.method == "PATCH") return fake.Patch(target, req.body, ct);
        if (req.method == "DELETE") return fake.Delete(target);
        return fake.Get(target);
      };
      httplib::Result r = call();
      if (!r) return Fail(res, 502, "fake API server unreachable");
      res.status = r->status;
      res.set_content(r->body, "application/json");
    };
    server_.Get(R"(/api/.*)", forward);
    server_.Post(R"(/api/.*)", forward);
    server_.Put(R"(/api/.*)", forward);
    server_.Patch(R"(/api/.*)", forward);
    server_.Delete(R"(/api/.*)", forward);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    if (port_ > 0) fakes::WaitUntilRunning(server_);
  }
  ~WebhookFront() {
    server_.stop();
    thread_.join();
  }
  WebhookFront(const WebhookFront&) = delete;
  WebhookFront& operator=(const WebhookFront&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  /// Stores a MutatingWebhookConfiguration (resourceVersion assigned).
  void PutConfig(json config) {
    std::lock_guard<std::mutex> lock(mu_);
    config["metadata"]["resourceVersion"] = std::to_string(++rv_);
    configs_[config["metadata"]["name"].get<std::string>()] = config;
  }
  std::optional<json> Config(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = configs_.find(name);
    if (it == configs_.end()) return std::nullopt;
    return it->second;
  }
  /// Stores a Secret as is (resourceVersion assigned).
  void PutSecret(json secret) {
    std::lock_guard<std::mutex> lock(mu_);
    secret["metadata"]["resourceVersion"] = std::to_string(++rv_);
    secrets_[secret["metadata"]["namespace"].get<std::string>() + "/" +
             secret["metadata"]["name"].get<std::string>()] = secret;
  }
  std::optional<json> Secret(const std::string& ns, const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = secrets_.find(ns + "/" + name);
    if (it == secrets_.end()) return std::nullopt;
    return it->second;
  }
  void RemoveSecret(const std::string& ns, const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    secrets_.erase(ns + "/" + name);
  }
  /// PATCH requests received on webhook configurations; POST/PUT requests on Secrets.
  int patches() {
    std::lock_guard<std::mutex> lock(mu_);
    return patches_;
  }
  int secret_writes() {
    std::lock_guard<std::mutex> lock(mu_);
    return secret_writes_;
  }
  /// (method, path) of every Secret and webhook-configuration request, in order.
  std::vector<std::pair<std::string, std::string>> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }
  /// The next request with `method` whose path starts with `prefix` gets HTTP `status`.
  void FailNext(const std::string& method, const std::string& prefix, int status) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_ = {method, prefix, status};
  }

 private:
  struct Failure {
    std::string method, prefix;
    int status = 0;
  };
  bool Injected(const httplib::Request& req, httplib::Response& res) {
    log_.push_back({req.method, req.path});
    if (fail_.status == 0 || fail_.method != req.method || req.path.rfind(fail_.prefix, 0) != 0)
      return false;
    Fail(res, fail_.status, "injected failure");
    fail_ = {};
    return true;
  }
  static void Fail(httplib::Response& res, int status, const std::string& message) {
    res.status = status;
    res.set_content(json({{"kind", "Status"},
                          {"apiVersion", "v1"},
                          {"status", "Failure"},
                          {"message", message},
                          {"code", status}})
                        .dump(),
                    "application/json");
  }

  int fake_port_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::map<std::string, json> configs_;
  std::map<std::string, json> secrets_;
  int64_t rv_ = 1000;
  int patches_ = 0;
  int secret_writes_ = 0;
  Failure fail_;
  std::vector<std::pair<std::string, std::string>> log_;
};

/// A MutatingWebhookConfiguration like deploy/webhook.yaml's, with `hooks` webhooks and no
/// caBundle.
inline json SampleWebhookConfig(const std::string& name, int hooks = 1) {
  json list = json::array();
  for (int i = 0; i < hooks; ++i) {
    list.push_back({{"name", "hook" + std::to_string(i) + ".fracgpu.io"},
                    {"clientConfig",
                     {{"service",
                       {{"name", "fracgpu-scheduler"},
                        {"namespace", "fracgpu-system"},
                        {"path", "/webhook"},
                        {"port", 443}}}}},
                    {"sideEffects", "None"},
                    {"admissionReviewVersions", {"v1"}}});
  }
  return {{"apiVersion", "admissionregistration.k8s.io/v1"},
          {"kind", "MutatingWebhookConfiguration"},
          {"metadata", {{"name", name}}},
          {"webhooks", list}};
}

}  // namespace fracgpu::certs::testing
