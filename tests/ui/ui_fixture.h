#pragma once
// Test fixture shared by tests/ui and tests/browser: `fracgpu ui`'s service on port 0 over the
// fake API server (nodes, pods), through a small handler that adds what the fake does not
// serve: SubjectAccessReviews (authorization.k8s.io/v1) and Notebooks (kubeflow.org/v1).
#include <httplib.h>

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "fake_apiserver.h"
#include "http/server.h"
#include "k8s/client.h"
#include "ui/cluster.h"
#include "ui/service.h"

namespace fracgpu::ui::uitest {

using nlohmann::json;

// SubjectAccessReview and Notebook routes; everything else is proxied to the fake API server.
class AuthzAndNotebooks {
 public:
  explicit AuthzAndNotebooks(const fakes::FakeApiServer& fake) : fake_port_(fake.port()) {
    server_.Post("/apis/authorization.k8s.io/v1/subjectaccessreviews",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   json review = json::parse(req.body);
                   std::lock_guard<std::mutex> lock(mu_);
                   reviews_.push_back(review);
                   const json& ra = review["spec"]["resourceAttributes"];
                   bool allowed = ra["group"] == "kubeflow.org" && ra["resource"] == "notebooks" &&
                                  allowed_.count({review["spec"]["user"].get<std::string>(),
                                                  ra["verb"].get<std::string>(), ra["namespace"].get<std::string>()});
                   review["status"] = {{"allowed", allowed}};
                   if (!allowed) review["status"]["reason"] = "no RBAC policy matched";
                   res.status = 201;
                   res.set_content(review.dump(), "application/json");
                 });
    server_.Post(R"(/apis/kubeflow.org/v1/namespaces/([a-z0-9-]+)/notebooks)",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   json nb = json::parse(req.body);
                   std::lock_guard<std::mutex> lock(mu_);
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
                  res.set_content(json({{"kind", "NotebookList"}, {"apiVersion", "kubeflow.org/v1"},
                                        {"metadata", {{"resourceVersion", "1"}}}, {"items", items}})
                                      .dump(),
                                  "application/json");
                });
    server_.Get(R"(/api/v1/.*)", [this](const httplib::Request& req, httplib::Response& res) {
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
  std::vector<std::pair<std::string, json>> created_;
};

inline json GpuNode(const std::string& name, const std::string& register_json, int allocatable) {
  json node = {{"metadata", {{"name", name}, {"annotations", json::object()}}},
               {"status", {{"allocatable", {{"nvidia.com/gpu", std::to_string(allocatable)}}}}}};
  if (!register_json.empty()) node["metadata"]["annotations"]["hami.io/node-nvidia-register"] = register_json;
  return node;
}

inline json PlacedPod(const std::string& ns, const std::string& name, const std::string& node, const std::string& allocated) {
  return {{"metadata",
           {{"name", name},
            {"namespace", ns},
            {"annotations", {{"hami.io/vgpu-node", node}, {"hami.io/vgpu-devices-allocated", allocated}}}}},
          {"spec", {{"nodeName", node}, {"containers", json::array({{{"name", "c"}, {"image", "x"}}})}}},
          {"status", {{"phase", "Running"}}}};
}

// Fixture cluster:
//   node-a: GPU-a0, GPU-a1  NVIDIA-A100-SXM4-40GB, 40960 MiB, count 10; GPU-a1 holds pod
//           team-b/train (30720 MiB, cores 0), so it has 10240 MiB free.
//   node-b: GPU-b0 NVIDIA-Tesla T4, 15360 MiB; holds team-a/infer (10000 MiB, 50 %): 5360 MiB free.
//           Node is cordoned (spec.unschedulable); GPU-b0 is healthy.
//   node-c: no register annotation (no GPUs count).
class UiApiTest : public ::testing::Test {
 protected:
  virtual UiOptions Options() const { return {}; }
  void SetUp() override {
    fake_.Put("nodes", GpuNode("node-a",
                               R"([{"id":"GPU-a0","index":0,"count":10,"devmem":40960,"devcore":100,"type":"NVIDIA-A100-SXM4-40GB","numa":0,"health":true,"mode":"hami-core"},
                                   {"id":"GPU-a1","index":1,"count":10,"devmem":40960,"devcore":100,"type":"NVIDIA-A100-SXM4-40GB","numa":0,"health":true,"mode":"hami-core"}])",
                               20));
    json b = GpuNode("node-b",
                     R"([{"id":"GPU-b0","index":0,"count":10,"devmem":15360,"devcore":100,"type":"NVIDIA-Tesla T4","numa":0,"health":true,"mode":"hami-core"}])",
                     10);
    b["spec"] = {{"unschedulable", true}};
    fake_.Put("nodes", b);
    fake_.Put("nodes", GpuNode("node-c", "", 0));
    fake_.Put("pods", PlacedPod("team-b", "train", "node-a", "GPU-a1,NVIDIA,30720,0:;"));
    fake_.Put("pods", PlacedPod("team-a", "infer", "node-b", "GPU-b0,NVIDIA,10000,50:;"));

    k8s::Config config;
    config.server = authz_.url();
    k8s::ClientOptions client_options;
    client_options.retries = 0;
    auto client = k8s::Client::Create(config, client_options);
    ASSERT_TRUE(client.ok()) << client.status().message();
    client_ = std::move(*client);
    cluster_ = std::make_unique<ClusterSource>(client_.get(), std::chrono::milliseconds(0));
    UiOptions options = Options();
    options.images = {"jupyter-scipy:v1", "jupyter-pytorch-cuda:v1"};
    service_ = std::make_unique<UiService>(client_.get(), cluster_.get(), options);
    server_ = std::make_unique<http::Server>(http::ServerOptions{});
    service_->Register(*server_);
    ASSERT_TRUE(server_->Start().ok());
    http_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }

  // POST to the UI; returns {status, body}.
  std::pair<int, json> Post(const std::string& path, const std::string& body, const std::string& user = "") {
    httplib::Headers h;
    if (!user.empty()) h.emplace("kubeflow-userid", user);
    auto r = http_->Post(path.c_str(), h, body, "application/json");
    if (!r) return {0, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  std::pair<int, json> Get(const std::string& path, const std::string& user = "") {
    httplib::Headers h;
    if (!user.empty()) h.emplace("kubeflow-userid", user);
    auto r = http_->Get(path.c_str(), h);
    if (!r) return {0, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  json Preview(const std::string& slice_and_more) {
    auto [status, body] = Post("/api/preview", R"({"name":"nb1","namespace":"team-a","image":"jupyter-scipy:v1",)" +
                                                   slice_and_more + "}");
    EXPECT_EQ(status, 200) << body.dump();
    return body;
  }

  fakes::FakeApiServer fake_;
  AuthzAndNotebooks authz_{fake_};
  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<ClusterSource> cluster_;
  std::unique_ptr<UiService> service_;
  std::unique_ptr<http::Server> server_;
  std::unique_ptr<httplib::Client> http_;
};

}  // namespace fracgpu::ui::uitest
