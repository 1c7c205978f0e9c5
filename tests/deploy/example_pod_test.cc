// docs/install.md "Verify": the sample pod deploy/examples/gpu-pod.yaml sent through
// `fracgpu scheduler`'s webhook at the path deploy/webhook.yaml registers (over real HTTP), as
// the API server would send it; and the extender verbs of the KubeSchedulerConfiguration are
// routes the scheduler serves.
#include <gtest/gtest.h>
#include <httplib.h>

#include "certs/pki.h"
#include "manifest_check.h"
#include "scheduler/service.h"

namespace fracgpu::deploytest {
namespace {

using nlohmann::json;

const std::string kSource = FRACGPU_SOURCE_DIR;

// Kubernetes' canonical decimal-SI form of a whole quantity (what a webhook receives):
// 3000 → "3k", 30 → "30" (resource.Quantity: the largest power-of-1000 suffix that keeps an
// integer mantissa).
std::string CanonicalQuantity(int64_t n) {
  static const char* kSuffix[] = {"", "k", "M", "G", "T", "P", "E"};
  int i = 0;
  while (n != 0 && n % 1000 == 0 && i < 6) {
    n /= 1000;
    ++i;
  }
  return std::to_string(n) + kSuffix[i];
}

class ExamplePodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto b = LoadDeploy(kSource + "/deploy");
    ASSERT_TRUE(b.ok());
    bundle_ = *b;
    // The scheduler as deploy/scheduler.yaml runs it (its name and users), on plain HTTP.
    YAML::Node dep = FindObject(bundle_, "Deployment", "fracgpu-scheduler");
    std::vector<std::string> args;
    for (const auto& a : dep["spec"]["template"]["spec"]["containers"][0]["args"])
      args.push_back(a.as<std::string>());
    auto parsed = ParseFracgpuArgs(args);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    scheduler::SchedulerOptions o;
    o.http.host = "127.0.0.1";
    o.http.port = 0;
    o.webhook.scheduler_name = parsed->Get("--scheduler-name");
    o.webhook.scheduler_user = parsed->Get("--scheduler-user");
    o.webhook.device_plugin_user = parsed->Get("--device-plugin-user");
    service_ = std::make_unique<scheduler::SchedulerService>(o, nullptr);
    ASSERT_TRUE(service_->Start().ok());
    http_ = std::make_unique<httplib::Client>("127.0.0.1", service_->port());
  }
  void TearDown() override {
    if (service_) service_->Stop();
  }

  Bundle bundle_;
  std::unique_ptr<scheduler::SchedulerService> service_;
  std::unique_ptr<httplib::Client> http_;
};

TEST_F(ExamplePodTest, SamplePodIsAdmittedAndSentToOurScheduler) {
  json pod = fakes::YamlToJson(YAML::LoadFile(kSource + "/deploy/examples/gpu-pod.yaml"));
  for (auto& [name, value] : pod["spec"]["containers"][0]["resources"]["limits"].items()) {
    ASSERT_TRUE(value.is_number_integer()) << name;
    value = CanonicalQuantity(value.get<int64_t>());
  }
  EXPECT_EQ(pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"], "3k");
  json review = {{"apiVersion", "admission.k8s.io/v1"},
                 {"kind", "AdmissionReview"},
                 {"request",
                  {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
                   {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                   {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                   {"operation", "CREATE"},
                   {"namespace", pod["metadata"]["namespace"]},
                   {"name", pod["metadata"]["name"]},
                   {"userInfo", {{"username", "alice"}}},
                   {"object", pod}}}};
  YAML::Node hook =
      FindObject(bundle_, "MutatingWebhookConfiguration", "fracgpu-webhook")["webhooks"][0];
  std::string path = hook["clientConfig"]["service"]["path"].as<std::string>() +
                     "?timeout=" + hook["timeoutSeconds"].as<std::string>() + "s";
  auto r = http_->Post(path, review.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json reply = json::parse(r->body);
  const json& resp = reply["response"];
  EXPECT_EQ(resp["uid"], review["request"]["uid"]);
  ASSERT_EQ(resp["allowed"], true) << r->body;
  ASSERT_EQ(resp["patchType"], "JSONPatch");
  json patch = json::parse(*certs::Base64Decode(resp["patch"].get<std::string>()));
  bool scheduler_set = false;
  for (const auto& op : patch) {
    if (op["path"] == "/spec/schedulerName") scheduler_set = op["value"] == "fracgpu-scheduler";
  }
  EXPECT_TRUE(scheduler_set) << patch.dump();
  // The patched pod is what a user would get: apply it and read the schedulerName back.
  json patched = pod.patch(patch);
  EXPECT_EQ(patched["spec"]["schedulerName"], "fracgpu-scheduler");
  EXPECT_EQ(patched["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpucores"], "30");
}

TEST_F(ExamplePodTest, ExtenderVerbsAreRoutesOfTheScheduler) {
  YAML::Node ksc = YAML::Load(
      FindObject(bundle_, "ConfigMap", "fracgpu-kube-scheduler-config")["data"]["config.yaml"]
          .as<std::string>());
  const YAML::Node e = ksc["extenders"][0];
  json pod = {{"metadata", {{"name", "p"}, {"namespace", "default"}, {"uid", "u1"}}},
              {"spec", {{"containers", json::array({{{"name", "c"}}})}}}};
  for (const char* verb : {"filterVerb", "prioritizeVerb"}) {
    auto r = http_->Post("/" + e[verb].as<std::string>(),
                         json({{"Pod", pod}, {"NodeNames", json::array({"n1"})}}).dump(),
                         "application/json");
    ASSERT_TRUE(r) << verb;
    // No API client here, so the service is not ready: /filter answers an Error (200), and
    // /prioritize, whose reply has no error member, 503; neither a 404.
    EXPECT_EQ(r->status, std::string(verb) == "filterVerb" ? 200 : 503) << verb << ": " << r->body;
    EXPECT_NE(r->body.find("not ready"), std::string::npos) << verb << ": " << r->body;
    EXPECT_TRUE(json::accept(r->body)) << r->body;
  }
  auto bind = http_->Post(
      "/" + e["bindVerb"].as<std::string>(),
      json({{"PodName", "p"}, {"PodNamespace", "default"}, {"PodUID", "u1"}, {"Node", "n1"}})
          .dump(),
      "application/json");
  ASSERT_TRUE(bind);
  EXPECT_EQ(bind->status, 200) << bind->body;
  EXPECT_TRUE(json::parse(bind->body).contains("Error"))
      << bind->body;  // no API client here: an Error, not a 404
}

}  // namespace
}  // namespace fracgpu::deploytest
