// The webhook's DRA mode (docs/dra.md "HAMi-style pods"): a HAMi-style GPU request becomes a
// ResourceClaimTemplate created in the fake API server plus the pod patch that uses it; an
// identical existing template is accepted, a different one or an API server that fails denies
// the pod (fail closed).
#include <gtest/gtest.h>

#include "admission_patch.h"
#include "fake_apiserver.h"
#include "k8s/client.h"
#include "scheduler/quota.h"
#include "scheduler/webhook.h"

namespace fracgpu::scheduler {
namespace {

using nlohmann::json;

// Pod "train" in namespace "ml": container "main" asks for one GPU, 3000 MiB and 30 % of the
// cores (plus a CPU limit that must stay); container "side" uses no GPU.
json TrainPod(json gpu_limits = {{"nvidia.com/gpu", "1"},
                                 {"nvidia.com/gpumem", "3000"},
                                 {"nvidia.com/gpucores", "30"}}) {
  json limits = gpu_limits;
  limits["cpu"] = "2";
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", "train"}, {"namespace", "ml"}}},
          {"spec",
           {{"schedulerName", "default-scheduler"},
            {"containers",
             json::array({{{"name", "main"}, {"image", "x"}, {"resources", {{"limits", limits}}}},
                          {{"name", "side"}, {"image", "y"}}})}}}};
}

AdmissionRequest Create(const json& pod) {
  AdmissionRequest r;
  r.api_version = "admission.k8s.io/v1";
  r.uid = "req-dra";
  r.operation = "CREATE";
  r.kind = "Pod";
  r.namespace_ = "ml";
  r.username = "alice";
  r.object = pod;
  return r;
}

// What ConvertHamiPod must ask for, written out from the pod above and the resource/v1 types:
// ResourceClaimTemplate.spec (ResourceClaimTemplateSpec) .spec (ResourceClaimSpec) .devices
// (DeviceClaim) .requests[] (DeviceRequest: name, exactly: ExactDeviceRequest).
json ExpectedSpec(const std::string& memory, const std::string& cores) {
  return {
      {"spec",
       {{"devices",
         {{"requests",
           json::array(
               {{{"name", "gpu"},
                 {"exactly",
                  {{"deviceClassName", "gpu.fracgpu.io"},
                   {"allocationMode", "ExactCount"},
                   {"count", 1},
                   {"capacity", {{"requests", {{"memory", memory}, {"cores", cores}}}}}}}}})}}}}}};
}

class WebhookDraTest : public ::testing::Test {
 protected:
  void SetUp() override {
    k8s::Config config;
    config.server = api_.url();
    auto c = k8s::Client::Create(config, k8s::ClientOptions{.retries = 0});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(*c);
    config_.dra_mode = true;
    config_.create_claim_template = ClaimTemplateCreator(client_.get());
  }
  int TemplatePosts() { return api_.CountRequests("POST", ClaimTemplatePath("ml")); }

  fakes::FakeApiServer api_;
  std::unique_ptr<k8s::Client> client_;
  WebhookConfig config_;
};

TEST_F(WebhookDraTest, GpuRequestBecomesTemplateAndClaims) {
  const json pod = TrainPod();
  json r = Admit(Create(pod), config_);
  ASSERT_EQ(r["response"]["allowed"], true) << r.dump();
  json p = Patched(pod, r);
  // core/v1 PodSpec.resourceClaims[] (PodResourceClaim: name, resourceClaimTemplateName) and
  // Container.resources.claims[] (ResourceClaim: name).
  EXPECT_EQ(
      p["spec"]["resourceClaims"],
      json::parse(R"([{"name": "main-gpu", "resourceClaimTemplateName": "train-main-gpu"}])"));
  EXPECT_EQ(p["spec"]["containers"][0]["resources"]["claims"],
            json::parse(R"([{"name": "main-gpu"}])"));
  EXPECT_EQ(p["spec"]["containers"][0]["resources"]["limits"], json::parse(R"({"cpu": "2"})"));
  EXPECT_FALSE(p["spec"]["containers"][1].contains("resources"));
  // kube-scheduler places the claims: the pod keeps its scheduler, gets no fracgpu defaults.
  EXPECT_EQ(p["spec"]["schedulerName"], "default-scheduler");

  auto t = api_.Get("resourceclaimtemplates", "ml", "train-main-gpu");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ((*t)["apiVersion"], "resource.k8s.io/v1");
  EXPECT_EQ((*t)["kind"], "ResourceClaimTemplate");
  EXPECT_EQ((*t)["spec"], ExpectedSpec("3000Mi", "30")) << (*t)["spec"].dump();
  EXPECT_EQ(TemplatePosts(), 1);
}

// DRA mode reads the device config's defaultMemory (and memoryFactor) too: a HAMi-style pod
// without gpumem asks for defaultMemory, not the whole card, and gpumem counts in
// memoryFactor units.
TEST_F(WebhookDraTest, DeviceConfigDefaultMemoryAndMemoryFactorReachTheClaim) {
  auto dc = node::ParseDeviceConfigYaml("nvidia:\n  defaultMemory: 4096\n  memoryFactor: 1024\n");
  ASSERT_TRUE(dc.ok()) << dc.status().ToString();
  ApplyDeviceConfig(*dc, &config_);
  json r =
      Admit(Create(TrainPod({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "30"}})), config_);
  ASSERT_EQ(r["response"]["allowed"], true) << r.dump();
  auto t = api_.Get("resourceclaimtemplates", "ml", "train-main-gpu");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ((*t)["spec"], ExpectedSpec("4096Mi", "30")) << (*t)["spec"].dump();

  json pod2 = TrainPod({{"nvidia.com/gpumem", "3"}, {"nvidia.com/gpucores", "30"}});
  pod2["metadata"]["name"] = "train2";
  json r2 = Admit(Create(pod2), config_);
  ASSERT_EQ(r2["response"]["allowed"], true) << r2.dump();
  auto t2 = api_.Get("resourceclaimtemplates", "ml", "train2-main-gpu");
  ASSERT_TRUE(t2.has_value());
  EXPECT_EQ((*t2)["spec"], ExpectedSpec("3072Mi", "30")) << (*t2)["spec"].dump();
}

// The API server stores quantities canonically (16384Mi as "16Gi"): a replica of the same
// workload finds the template from its predecessor, 409 → GET → same content → admitted.
TEST_F(WebhookDraTest, IdenticalExistingTemplateIsAccepted) {
  const json pod = TrainPod(
      {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "16384"}, {"nvidia.com/gpucores", "50"}});
  api_.Put("resourceclaimtemplates",
           {{"metadata", {{"name", "train-main-gpu"}, {"namespace", "ml"}}},
            {"spec", ExpectedSpec("16Gi", "50")}});
  json r = Admit(Create(pod), config_);
  ASSERT_EQ(r["response"]["allowed"], true) << r.dump();
  EXPECT_EQ(TemplatePosts(), 1);
  EXPECT_EQ(api_.CountRequests("GET", ClaimTemplatePath("ml", "train-main-gpu")), 1);
  EXPECT_EQ(Patched(pod, r)["spec"]["resourceClaims"][0]["resourceClaimTemplateName"],
            "train-main-gpu");
}

TEST_F(WebhookDraTest, DifferentExistingTemplateDeniesThePod) {
  api_.Put("resourceclaimtemplates",
           {{"metadata", {{"name", "train-main-gpu"}, {"namespace", "ml"}}},
            {"spec", ExpectedSpec("8Gi", "30")}});
  json r = Admit(Create(TrainPod()), config_);
  EXPECT_EQ(r["response"]["allowed"], false);
  EXPECT_EQ(r["response"]["status"]["code"], 500);
  const std::string msg = r["response"]["status"]["message"];
  EXPECT_NE(msg.find("ml/train-main-gpu"), std::string::npos) << msg;
  EXPECT_NE(msg.find("already exists with a different spec"), std::string::npos) << msg;
  EXPECT_FALSE(r["response"].contains("patch"));
}

// Fail closed: the API server refuses the POST (503) → the pod is denied, naming the template
// and the HTTP status, and nothing is patched.
TEST_F(WebhookDraTest, ApiServerFailureDeniesThePod) {
  api_.FailNext("POST", ClaimTemplatePath("ml"), 503);
  json r = Admit(Create(TrainPod()), config_);
  EXPECT_EQ(r["response"]["allowed"], false);
  EXPECT_EQ(r["response"]["status"]["code"], 500);
  EXPECT_EQ(r["response"]["status"]["reason"], "InternalError");
  const std::string msg = r["response"]["status"]["message"];
  EXPECT_NE(msg.find("cannot create ResourceClaimTemplate ml/train-main-gpu"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("503"), std::string::npos) << msg;
  EXPECT_FALSE(api_.Get("resourceclaimtemplates", "ml", "train-main-gpu").has_value());
}

// kube-scheduler's DRA plugin allocates DRA claims, not fracgpu's extender, so a HAMi GPU quota
// cannot be enforced on them: a GPU pod of a namespace with one is denied, naming the quota,
// and no template is created; another namespace and a namespace whose quota has no GPU entry
// are admitted as before (fail closed, not silently outside the quota).
TEST_F(WebhookDraTest, AGpuQuotaTheDraPathCannotEnforceDeniesThePod) {
  QuotaTracker quotas;
  quotas.Upsert({{"metadata", {{"name", "gpu-quota"}, {"namespace", "ml"}}},
                 {"spec", {{"hard", {{"limits.nvidia.com/gpumem", "20000"}}}}}});
  quotas.Upsert({{"metadata", {{"name", "cpu-only"}, {"namespace", "dev"}}},
                 {"spec", {{"hard", {{"limits.cpu", "8"}}}}}});
  config_.gpu_quota_in = [&](const std::string& ns) { return quotas.LimitingQuota(ns); };
  json r = Admit(Create(TrainPod()), config_);
  EXPECT_EQ(r["response"]["allowed"], false) << r.dump();
  EXPECT_EQ(r["response"]["status"]["code"], 403);
  const std::string message = r["response"]["status"]["message"];
  EXPECT_NE(message.find("namespace ml has the GPU ResourceQuota ml/gpu-quota "
                         "limits.nvidia.com/gpumem"),
            std::string::npos)
      << message;
  EXPECT_EQ(TemplatePosts(), 0);

  AdmissionRequest dev = Create(TrainPod());
  dev.namespace_ = "dev";
  json d = Admit(dev, config_);
  EXPECT_EQ(d["response"]["allowed"], true) << d.dump();
  quotas.Remove({{"metadata", {{"name", "gpu-quota"}, {"namespace", "ml"}}}});
  json again = Admit(Create(TrainPod()), config_);
  EXPECT_EQ(again["response"]["allowed"], true) << again.dump();
}

TEST(WebhookDra, UnreachableApiServerDeniesThePod) {
  k8s::Config config;
  {
    fakes::FakeApiServer gone;  // a port that was just served and is closed now
    config.server = gone.url();
  }
  config.timeout_s = 2;
  auto client = k8s::Client::Create(config, k8s::ClientOptions{.retries = 0});
  ASSERT_TRUE(client.ok());
  WebhookConfig c;
  c.dra_mode = true;
  c.create_claim_template = ClaimTemplateCreator(client->get());
  json r = Admit(Create(TrainPod()), c);
  EXPECT_EQ(r["response"]["allowed"], false);
  const std::string msg = r["response"]["status"]["message"];
  EXPECT_NE(msg.find("cannot create ResourceClaimTemplate ml/train-main-gpu"), std::string::npos)
      << msg;
}

TEST(WebhookDra, NoApiClientDeniesGpuPods) {
  WebhookConfig c;
  c.dra_mode = true;
  json r = Admit(Create(TrainPod()), c);
  EXPECT_EQ(r["response"]["allowed"], false);
  EXPECT_NE(r["response"]["status"]["message"].get<std::string>().find("no API client"),
            std::string::npos);
  // A pod without GPU requests needs no client.
  json cpu = TrainPod(json::object());
  EXPECT_EQ(Admit(Create(cpu), c)["response"]["allowed"], true);
}

TEST(WebhookDra, PercentageMemoryIsRefusedByName) {
  int calls = 0;
  WebhookConfig c;
  c.dra_mode = true;
  c.create_claim_template = [&](const json&) {
    ++calls;
    return Status();
  };
  json r =
      Admit(Create(TrainPod({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "50"}})), c);
  EXPECT_EQ(r["response"]["allowed"], false);
  EXPECT_EQ(r["response"]["status"]["code"], 400);
  const std::string msg = r["response"]["status"]["message"];
  EXPECT_NE(msg.find("container \"main\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("nvidia.com/gpumem-percentage 50"), std::string::npos) << msg;
  EXPECT_EQ(calls, 0);
}

// dryRun: the patch as for a real request, no template created; the request's namespace wins
// over a pod without metadata.namespace.
TEST(WebhookDra, DryRunCreatesNothingAndNamespaceComesFromTheRequest) {
  std::vector<json> created;
  WebhookConfig c;
  c.dra_mode = true;
  c.create_claim_template = [&](const json& t) {
    created.push_back(t);
    return Status();
  };
  json pod = TrainPod();
  pod["metadata"].erase("namespace");
  AdmissionRequest req = Create(pod);
  req.dry_run = true;
  json r = Admit(req, c);
  ASSERT_EQ(r["response"]["allowed"], true);
  EXPECT_TRUE(created.empty());
  EXPECT_EQ(Patched(pod, r)["spec"]["resourceClaims"][0]["resourceClaimTemplateName"],
            "train-main-gpu");
  req.dry_run = false;
  r = Admit(req, c);
  ASSERT_EQ(created.size(), 1u);
  EXPECT_EQ(created[0]["metadata"]["namespace"], "ml");
}

TEST(WebhookDra, DecodesDryRun) {
  auto ok = DecodeAdmissionReview(
      R"({"apiVersion":"admission.k8s.io/v1","request":{"uid":"u","operation":"CREATE","dryRun":true}})");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE(ok->dry_run);
  auto bad =
      DecodeAdmissionReview(R"({"request":{"uid":"u","operation":"CREATE","dryRun":"yes"}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("request.dryRun must be a boolean, got string"),
            std::string::npos)
      << bad.status().message();
}

// Off by default: the extender's protocol, no claims.
TEST(WebhookDra, OffByDefault) {
  WebhookConfig c;
  EXPECT_FALSE(c.dra_mode);
  json p = Patched(TrainPod(), Admit(Create(TrainPod()), c));
  EXPECT_FALSE(p["spec"].contains("resourceClaims"));
  EXPECT_EQ(p["spec"]["schedulerName"], "fracgpu-scheduler");
}

TEST(WebhookDra, SameContent) {
  EXPECT_TRUE(SameContent(json::parse(R"({"a": "16Gi", "b": [1, "x"], "extra": 1})"),
                          json::parse(R"({"a": "16384Mi", "b": [1, "x"]})")));
  EXPECT_TRUE(SameContent(json::parse(R"({"c": "50"})"), json::parse(R"({"c": "50"})")));
  EXPECT_FALSE(SameContent(json::parse(R"({"a": "16Gi"})"), json::parse(R"({"a": "16000Mi"})")));
  EXPECT_FALSE(SameContent(json::parse(R"({"b": [1]})"), json::parse(R"({"b": [1, 2]})")));
  EXPECT_FALSE(SameContent(json::parse(R"({})"), json::parse(R"({"a": "x"})")));
  EXPECT_FALSE(SameContent(json::parse(R"({"a": "gpu"})"), json::parse(R"({"a": "gpu2"})")));
  EXPECT_EQ(ClaimTemplatePath("ml", "t"),
            "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaimtemplates/t");
}

}  // namespace
}  // namespace fracgpu::scheduler
