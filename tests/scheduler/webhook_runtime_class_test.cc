// HAMi's runtimeClassName (issue 34 item 2): the webhook sets the configured RuntimeClass on GPU
// pods that name none, keeps a pod's own, leaves pods without GPU alone.
#include <gtest/gtest.h>

#include "admission_patch.h"
#include "scheduler/webhook.h"

namespace fracgpu::scheduler {
namespace {

using nlohmann::json;

json Pod(json limits, json spec_extra = json::object()) {
  json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", "p"}, {"namespace", "ml"}}},
      {"spec",
       {{"containers", {{{"name", "c"}, {"image", "x"}, {"resources", {{"limits", limits}}}}}}}}};
  pod["spec"].update(spec_extra);
  return pod;
}

AdmissionRequest Create(const json& pod) {
  AdmissionRequest r;
  r.api_version = "admission.k8s.io/v1";
  r.uid = "req-1";
  r.operation = "CREATE";
  r.kind = "Pod";
  r.namespace_ = "ml";
  r.username = "alice";
  r.object = pod;
  return r;
}

WebhookConfig WithRuntimeClass(const std::string& name) {
  WebhookConfig c;
  c.runtime_class_name = name;
  return c;
}

TEST(WebhookRuntimeClassTest, GpuPodWithoutOneGetsTheConfiguredRuntimeClass) {
  for (json limits : {json{{"nvidia.com/gpu", "1"}}, json{{"nvidia.com/gpumem", "1024"}},
                      json{{"nvidia.com/gpumem-percentage", "20"}}}) {
    SCOPED_TRACE(limits.dump());
    json pod = Pod(limits);
    json r = Admit(Create(pod), WithRuntimeClass("nvidia"));
    ASSERT_TRUE(r["response"]["allowed"]) << r.dump();
    EXPECT_EQ(Patched(pod, r)["spec"]["runtimeClassName"], "nvidia");
  }
}

TEST(WebhookRuntimeClassTest, PodsOwnRuntimeClassIsKept) {
  json pod = Pod({{"nvidia.com/gpu", "1"}}, {{"runtimeClassName", "kata-nvidia"}});
  json r = Admit(Create(pod), WithRuntimeClass("nvidia"));
  ASSERT_TRUE(r["response"]["allowed"]) << r.dump();
  EXPECT_EQ(Patched(pod, r)["spec"]["runtimeClassName"], "kata-nvidia");
}

TEST(WebhookRuntimeClassTest, PodWithoutGpuAndUnsetConfigAreLeftAlone) {
  json cpu = Pod(json::object());
  EXPECT_FALSE(Patched(cpu, Admit(Create(cpu), WithRuntimeClass("nvidia")))["spec"].contains(
      "runtimeClassName"));
  json gpu = Pod({{"nvidia.com/gpu", "1"}});
  EXPECT_FALSE(
      Patched(gpu, Admit(Create(gpu), WithRuntimeClass("")))["spec"].contains("runtimeClassName"));
}

TEST(WebhookRuntimeClassTest, DraModeGpuPodGetsItToo) {
  WebhookConfig c = WithRuntimeClass("nvidia");
  c.dra_mode = true;
  c.create_claim_template = [](const json&) { return Status(); };
  json pod = Pod({{"nvidia.com/gpu", "1"}});
  json r = Admit(Create(pod), c);
  ASSERT_TRUE(r["response"]["allowed"]) << r.dump();
  EXPECT_EQ(Patched(pod, r)["spec"]["runtimeClassName"], "nvidia");
}

}  // namespace
}  // namespace fracgpu::scheduler

namespace fracgpu::scheduler {
namespace {

// HAMi's scheduler name (issue 34 item 3): a GPU pod written for HAMi names hami-scheduler; it is
// admitted and placed by fracgpu, as a pod naming no scheduler; with the alias list emptied it is
// denied as any foreign scheduler.
TEST(WebhookSchedulerAliasTest, HamiSchedulerNameIsAcceptedAndRewritten) {
  json pod = Pod({{"nvidia.com/gpu", "1"}}, {{"schedulerName", "hami-scheduler"}});
  json r = Admit(Create(pod), WebhookConfig());
  ASSERT_TRUE(r["response"]["allowed"]) << r.dump();
  EXPECT_EQ(Patched(pod, r)["spec"]["schedulerName"], "fracgpu-scheduler");
  WebhookConfig strict;
  strict.scheduler_aliases.clear();
  r = Admit(Create(pod), strict);
  EXPECT_FALSE(r["response"]["allowed"]);
  EXPECT_EQ(r["response"]["status"]["code"], 403);
}

}  // namespace
}  // namespace fracgpu::scheduler
