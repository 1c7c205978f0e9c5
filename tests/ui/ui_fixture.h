#pragma once
// Test fixture of tests/ui: `fracgpu ui`'s service on port 0 over the fake API server (nodes,
// pods), through AuthzAndNotebooks (authz_notebooks.h), which adds what the fake does not
// serve: SubjectAccessReviews (authorization.k8s.io/v1) and Notebooks (kubeflow.org/v1).
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "authz_notebooks.h"
#include "fake_apiserver.h"
#include "http/server.h"
#include "k8s/client.h"
#include "test_client.h"
#include "ui/cluster.h"
#include "ui/service.h"

namespace fracgpu::ui::uitest {

using nlohmann::json;

inline json GpuNode(const std::string& name, const std::string& register_json, int allocatable) {
  json node = {{"metadata", {{"name", name}, {"annotations", json::object()}}},
               {"status", {{"allocatable", {{"nvidia.com/gpu", std::to_string(allocatable)}}}}}};
  if (!register_json.empty())
    node["metadata"]["annotations"]["hami.io/node-nvidia-register"] = register_json;
  return node;
}

inline json PlacedPod(const std::string& ns, const std::string& name, const std::string& node,
                      const std::string& allocated) {
  return {{"metadata",
           {{"name", name},
            {"namespace", ns},
            {"annotations",
             {{"hami.io/vgpu-node", node}, {"hami.io/vgpu-devices-allocated", allocated}}}}},
          {"spec",
           {{"nodeName", node}, {"containers", json::array({{{"name", "c"}, {"image", "x"}}})}}},
          {"status", {{"phase", "Running"}}}};
}

// `fracgpu ui`'s service on port 0 over the fake API server (through AuthzAndNotebooks), and
// the HTTP calls the tests make to it. A suite seeds `fake_` in its SetUp, then calls StartUi.
class UiHarness : public ::testing::Test {
 protected:
  void StartUi(UiOptions options, bool dra_mode = false) {
    // The access cache's clock is the test's: it moves only with Advance().
    if (!options.clock) {
      options.clock = [this] {
        return std::chrono::steady_clock::time_point(std::chrono::milliseconds(clock_ms_.load()));
      };
    }
    auto client = fakes::NoRetryClient(authz_.url());
    ASSERT_TRUE(client.ok()) << client.status().message();
    client_ = std::move(*client);
    cluster_ = std::make_unique<ClusterSource>(client_.get(), std::chrono::milliseconds(0),
                                               "nvidia.com/gpu", dra_mode);
    options.dra_mode = dra_mode;
    service_ = std::make_unique<UiService>(client_.get(), cluster_.get(), options);
    server_ = std::make_unique<http::Server>(http::ServerOptions{});
    service_->Register(*server_);
    ASSERT_TRUE(server_->Start().ok());
    http_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }

  // Moves the access cache's clock on by `d`.
  void Advance(std::chrono::milliseconds d) { clock_ms_ += d.count(); }

  // POST to the UI; returns {status, body}.
  std::pair<int, json> Post(const std::string& path, const std::string& body,
                            const std::string& user = "") {
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
  // The preview of notebook nb1 in team-a with `slice_and_more` (the body's GPU fields).
  json Preview(const std::string& slice_and_more) {
    auto [status, body] =
        Post("/api/preview", R"({"name":"nb1","namespace":"team-a","image":"jupyter-scipy:v1",)" +
                                 slice_and_more + "}");
    EXPECT_EQ(status, 200) << body.dump();
    return body;
  }

  std::atomic<int64_t> clock_ms_{1000000};  // the access cache's clock, in ms
  fakes::FakeApiServer fake_;
  AuthzAndNotebooks authz_{fake_};
  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<ClusterSource> cluster_;
  std::unique_ptr<UiService> service_;
  std::unique_ptr<http::Server> server_;
  std::unique_ptr<httplib::Client> http_;
};

// Fixture cluster:
//   node-a: GPU-a0, GPU-a1  NVIDIA-A100-SXM4-40GB, 40960 MiB, count 10; GPU-a1 holds pod
//           team-b/train (30720 MiB, cores 0), so it has 10240 MiB free.
//   node-b: GPU-b0 NVIDIA-Tesla T4, 15360 MiB; holds team-a/infer (10000 MiB, 50 %): 5360 MiB free.
//           Node is cordoned (spec.unschedulable); GPU-b0 is healthy.
//   node-c: no register annotation (no GPUs count).
class UiApiTest : public UiHarness {
 protected:
  virtual UiOptions Options() const { return {}; }
  void SetUp() override {
    fake_.Put(
        "nodes",
        GpuNode(
            "node-a",
            R"([{"id":"GPU-a0","index":0,"count":10,"devmem":40960,"devcore":100,"type":"NVIDIA-A100-SXM4-40GB","numa":0,"health":true,"mode":"hami-core"},
                                   {"id":"GPU-a1","index":1,"count":10,"devmem":40960,"devcore":100,"type":"NVIDIA-A100-SXM4-40GB","numa":0,"health":true,"mode":"hami-core"}])",
            20));
    json b = GpuNode(
        "node-b",
        R"([{"id":"GPU-b0","index":0,"count":10,"devmem":15360,"devcore":100,"type":"NVIDIA-Tesla T4","numa":0,"health":true,"mode":"hami-core"}])",
        10);
    b["spec"] = {{"unschedulable", true}};
    fake_.Put("nodes", b);
    fake_.Put("nodes", GpuNode("node-c", "", 0));
    fake_.Put("pods", PlacedPod("team-b", "train", "node-a", "GPU-a1,NVIDIA,30720,0:;"));
    fake_.Put("pods", PlacedPod("team-a", "infer", "node-b", "GPU-b0,NVIDIA,10000,50:;"));

    UiOptions options = Options();
    options.images = {"jupyter-scipy:v1", "jupyter-pytorch-cuda:v1"};
    StartUi(options);
  }
};

}  // namespace fracgpu::ui::uitest
