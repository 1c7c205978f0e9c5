#pragma once
// A small HTTP server in front of the fake API server (tests/fakes/apiserver) that adds what
// the fake does not serve: SubjectAccessReviews (authorization.k8s.io/v1, answered from an
// allow-list of (user, verb, namespace)) and Notebooks (kubeflow.org/v1: create — 409
// AlreadyExists for a taken name — and list, kept in memory). Every other GET under /api/v1/
// and /apis/resource.k8s.io/v1/ (DRA mode) is proxied to the fake. Used by tests/ui
// (in-process) and by the browser test harness (tests/browser), which reads what the UI sent
// through GET /apis/kubeflow.org/v1/namespaces/<ns>/notebooks and GET /test/reviews.
#include <httplib.h>

#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "fake_apiserver.h"

namespace fracgpu::ui::uitest {

using nlohmann::json;

// SubjectAccessReview and Notebook routes; everything else is proxied to the fake API server.
class AuthzAndNotebooks {
 public:
  explicit AuthzAndNotebooks(const fakes::FakeApiServer& fake) : fake_port_(fake.port()) {
    server_.Post("/apis/authorization.k8s.io/v1/subjectaccessreviews",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   json review = json::parse(req.body, nullptr, false);
                   if (!review.is_object() || !review["spec"].is_object() ||
                       !review["spec"]["resourceAttributes"].is_object() ||
                       !review["spec"]["user"].is_string()) {
                     res.status = 400;
                     return;
                   }
                   std::unique_lock<std::mutex> lock(mu_);
                   reviews_.push_back(review);
                   if (review_delay_.count() > 0) {
                     // As a slow authorizer: recorded at once, answered after the delay.
                     const auto delay = review_delay_;
                     lock.unlock();
                     std::this_thread::sleep_for(delay);
                     lock.lock();
                   }
                   if (fail_reviews_ > 0) {
                     // As an API server that cannot answer (e.g. its webhook authorizer down).
                     --fail_reviews_;
                     res.status = 500;
                     res.set_content(R"({"kind":"Status","status":"Failure","code":500,)"
                                     R"("message":"authorizer unavailable"})",
                                     "application/json");
                     return;
                   }
                   const json& ra = review["spec"]["resourceAttributes"];
                   bool allowed = ra["group"] == "kubeflow.org" && ra["resource"] == "notebooks" &&
                                  allowed_.count({review["spec"]["user"].get<std::string>(),
                                                  ra["verb"].get<std::string>(),
                                                  ra["namespace"].get<std::string>()});
                   review["status"] = {{"allowed", allowed}};
                   if (!allowed) review["status"]["reason"] = "no RBAC policy matched";
                   res.status = 201;
                   res.set_content(review.dump(), "application/json");
                 });
    // API discovery of group kubeflow.org/v1 (an APIResourceList), as the API server answers
    // once Kubeflow's Notebook CRD is installed.
    server_.Get("/apis/kubeflow.org/v1", [](const httplib::Request&, httplib::Response& res) {
      json list = {
          {"kind", "APIResourceList"},
          {"apiVersion", "v1"},
          {"groupVersion", "kubeflow.org/v1"},
          {"resources",
           json::array({{{"name", "notebooks"}, {"namespaced", true}, {"kind", "Notebook"}}})}};
      res.set_content(list.dump(), "application/json");
    });
    server_.Post(
        R"(/apis/kubeflow.org/v1/namespaces/([a-z0-9-]+)/notebooks)",
        [this](const httplib::Request& req, httplib::Response& res) {
          json nb = json::parse(req.body, nullptr, false);
          if (!nb.is_object()) {
            res.status = 400;
            return;
          }
          std::lock_guard<std::mutex> lock(mu_);
          const std::string name =
              nb["metadata"].is_object() ? nb["metadata"].value("name", "") : "";
          for (const auto& [ns, existing] : created_) {
            if (ns == req.matches[1].str() && existing["metadata"]["name"] == name) {
              // As the API server answers (metav1.Status, reason AlreadyExists).
              res.status = 409;
              res.set_content(
                  json({{"kind", "Status"},
                        {"apiVersion", "v1"},
                        {"status", "Failure"},
                        {"reason", "AlreadyExists"},
                        {"code", 409},
                        {"message", "notebooks.kubeflow.org \"" + name + "\" already exists"}})
                      .dump(),
                  "application/json");
              return;
            }
          }
          created_.push_back({req.matches[1].str(), nb});
          res.status = 201;
          res.set_content(nb.dump(), "application/json");
        });
    server_.Get(R"(/apis/kubeflow.org/v1/namespaces/([a-z0-9-]+)/notebooks)",
                [this](const httplib::Request& req, httplib::Response& res) {
                  std::lock_guard<std::mutex> lock(mu_);
                  json items = json::array();
                  for (const auto& [ns, nb] : created_) {
                    if (ns == req.matches[1].str()) items.push_back(nb);
                  }
                  res.set_content(json({{"kind", "NotebookList"},
                                        {"apiVersion", "kubeflow.org/v1"},
                                        {"metadata", {{"resourceVersion", "1"}}},
                                        {"items", items}})
                                      .dump(),
                                  "application/json");
                });
    // For out-of-process tests: every SubjectAccessReview received so far, in order.
    server_.Get("/test/reviews", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      res.set_content(json(reviews_).dump(), "application/json");
    });
    server_.Get(R"((/api/v1/|/apis/resource\.k8s\.io/v1/).*)",
                [this](const httplib::Request& req, httplib::Response& res) {
                  httplib::Client fake("127.0.0.1", fake_port_);
                  auto r = fake.Get(req.path, req.params, httplib::Headers{});
                  if (!r) {
                    res.status = 502;
                    return;
                  }
                  res.status = r->status;
                  res.set_content(r->body, "application/json");
                });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    if (port_ > 0) fakes::WaitUntilRunning(server_);
  }
  ~AuthzAndNotebooks() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void Allow(const std::string& user, const std::string& verb, const std::string& ns) {
    std::lock_guard<std::mutex> lock(mu_);
    allowed_.insert({user, verb, ns});
  }
  // The next `n` SubjectAccessReviews are answered 500 (and still recorded).
  void FailReviews(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_reviews_ = n;
  }
  // Each SubjectAccessReview is answered `delay` after it is received (and recorded).
  void SetReviewDelay(std::chrono::milliseconds delay) {
    std::lock_guard<std::mutex> lock(mu_);
    review_delay_ = delay;
  }
  std::vector<json> reviews() {
    std::lock_guard<std::mutex> lock(mu_);
    return reviews_;
  }
  std::vector<std::pair<std::string, json>> created() {
    std::lock_guard<std::mutex> lock(mu_);
    return created_;
  }
  void SetStatus(size_t i, const json& status) {
    std::lock_guard<std::mutex> lock(mu_);
    created_[i].second["status"] = status;
  }

 private:
  int fake_port_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::set<std::tuple<std::string, std::string, std::string>> allowed_;
  std::vector<json> reviews_;
  int fail_reviews_ = 0;
  std::chrono::milliseconds review_delay_{0};
  std::vector<std::pair<std::string, json>> created_;
};

}  // namespace fracgpu::ui::uitest
