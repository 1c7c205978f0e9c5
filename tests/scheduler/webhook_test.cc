// The admission webhook: every docs/design/CONTRACT.md §1–3 rule, bad values, system-annotation
// locks.
#include "scheduler/webhook.h"

#include <gtest/gtest.h>

#include "admission_patch.h"
#include "core/request.h"

namespace fracgpu::scheduler {
namespace {

using nlohmann::json;

json Container(const std::string& name, json limits, json extra = json::object()) {
  json c = {{"name", name}, {"image", "x"}, {"resources", {{"limits", limits}}}};
  c.update(extra);
  return c;
}

json PodWith(json containers, json annotations = json::object(), json spec_extra = json::object()) {
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "p"}, {"namespace", "ml"}}},
              {"spec", {{"containers", containers}, {"schedulerName", "default-scheduler"}}}};
  if (!annotations.empty()) pod["metadata"]["annotations"] = annotations;
  pod["spec"].update(spec_extra);
  return pod;
}

AdmissionRequest Create(const json& pod, const std::string& user = "alice") {
  AdmissionRequest r;
  r.api_version = "admission.k8s.io/v1";
  r.uid = "req-1";
  r.operation = "CREATE";
  r.kind = "Pod";
  r.namespace_ = "ml";
  r.username = user;
  r.object = pod;
  return r;
}

AdmissionRequest Update(const json& old_pod, const json& pod, const std::string& user) {
  AdmissionRequest r = Create(pod, user);
  r.operation = "UPDATE";
  r.old_object = old_pod;
  return r;
}

WebhookConfig Config() {
  WebhookConfig c;
  c.scheduler_name = "fracgpu-scheduler";
  c.allowed_schedulers = {"volcano"};
  return c;
}

TEST(WebhookTest, ResponseEchoesUidAndKind) {
  json r = Admit(Create(PodWith({Container("c", json::object())})), Config());
  EXPECT_EQ(r["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(r["kind"], "AdmissionReview");
  EXPECT_EQ(r["response"]["uid"], "req-1");
  EXPECT_EQ(r["response"]["allowed"], true);
  WebhookConfig keep = Config();
  keep.overwrite_env = false;
  r = Admit(Create(PodWith({Container("c", json::object())})), keep);
  EXPECT_FALSE(r["response"].contains("patch"));  // no GPU, nothing to change
}

// HAMi's overwriteEnv (issue 32 item 6): a container that asks for no GPU gets
// NVIDIA_VISIBLE_DEVICES=none, whatever it set (value or valueFrom), in a pod with or without
// GPU containers; GPU containers keep theirs; off with overwrite_env = false.
TEST(WebhookTest, ContainersAskingForNoGpuGetNvidiaVisibleDevicesNone) {
  json sneaky = Container("sneaky", json::object(),
                          {{"env",
                            {{{"name", "A"}, {"value", "1"}},
                             {{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}},
                             {{"name", "NVIDIA_VISIBLE_DEVICES"},
                              {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}}}}});
  json plain = Container("plain", json::object(), {{"env", {{{"name", "B"}, {"value", "2"}}}}});
  json gpu = Container("train", {{"nvidia.com/gpu", "1"}},
                       {{"env", {{{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}}}}});
  json init = Container("setup", json::object());
  const json none = {{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "none"}};
  for (bool with_gpu : {false, true}) {
    SCOPED_TRACE(with_gpu ? "pod with a GPU container" : "pod without GPU");
    json containers = {sneaky, plain};
    if (with_gpu) containers.push_back(gpu);
    json pod = PodWith(containers, json::object(), {{"initContainers", {init}}});
    json r = Admit(Create(pod), Config());
    ASSERT_TRUE(r["response"]["allowed"]) << r.dump();
    json out = Patched(pod, r);
    const json& cs = out["spec"]["containers"];
    EXPECT_EQ(cs[0]["env"], (json{{{"name", "A"}, {"value", "1"}}, none, none}));
    EXPECT_EQ(cs[1]["env"], (json{{{"name", "B"}, {"value", "2"}}, none}));
    EXPECT_EQ(out["spec"]["initContainers"][0]["env"], (json{none}));
    if (with_gpu) {
      EXPECT_EQ(cs[2]["env"], gpu["env"]);  // a GPU container is the plugin's
    }
  }
  WebhookConfig keep = Config();
  keep.overwrite_env = false;
  json pod = PodWith({sneaky});
  EXPECT_EQ(Patched(pod, Admit(Create(pod), keep)), pod);
}

TEST(WebhookTest, BareGpuGetsSchedulerAndExclusiveCores) {
  json pod = PodWith({Container("train", {{"nvidia.com/gpu", "2"}})});
  json r = Admit(Create(pod), Config());
  ASSERT_TRUE(r["response"]["allowed"]);
  json out = Patched(pod, r);
  EXPECT_EQ(out["spec"]["schedulerName"], "fracgpu-scheduler");
  EXPECT_EQ(out["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpucores"], "100");
  EXPECT_FALSE(out["spec"]["containers"][0]["resources"]["limits"].contains("nvidia.com/gpumem"));
}

TEST(WebhookTest, MemoryWithoutGpuCountGetsOneGpuAndNoCores) {
  // The apiserver canonicalises 3000 to "3k": accepted as 3000 MiB.
  json pod = PodWith({Container("c", {{"nvidia.com/gpumem", "3k"}})});
  pod["spec"].erase("schedulerName");  // absent schedulerName is "ours"
  json r = Admit(Create(pod), Config());
  ASSERT_TRUE(r["response"]["allowed"]) << r.dump();
  json out = Patched(pod, r);
  EXPECT_EQ(out["spec"]["schedulerName"], "fracgpu-scheduler");
  EXPECT_EQ(out["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "1");
  EXPECT_FALSE(out["spec"]["containers"][0]["resources"]["limits"].contains("nvidia.com/gpucores"));
}

// The device config the device plugin reads, applied to the webhook (what `fracgpu scheduler
// --device-config-file` does): custom names, defaultGPUNum written into limits, overwriteEnv
// off, and a pod under the default nvidia.com/* names is not a GPU pod of this cluster.
TEST(WebhookTest, DeviceConfigNamesDefaultsAndOverwriteEnv) {
  auto dc = node::ParseDeviceConfigYaml(R"(
nvidia:
  resourceCountName: example.com/vgpu
  resourceMemoryName: example.com/vgpu-memory
  resourceCoreName: example.com/vgpu-cores
  defaultGPUNum: 2
  overwriteEnv: false
)");
  ASSERT_TRUE(dc.ok()) << dc.status().ToString();
  WebhookConfig config = Config();
  ApplyDeviceConfig(*dc, &config);
  EXPECT_FALSE(config.overwrite_env);
  json pod = PodWith(
      {Container("c", {{"example.com/vgpu-cores", "30"}}), Container("side", json::object())});
  json r = Admit(Create(pod), config);
  ASSERT_TRUE(r["response"]["allowed"]) << r.dump();
  json out = Patched(pod, r);
  EXPECT_EQ(out["spec"]["schedulerName"], "fracgpu-scheduler");
  EXPECT_EQ(out["spec"]["containers"][0]["resources"]["limits"]["example.com/vgpu"], "2");
  EXPECT_FALSE(out["spec"]["containers"][1].contains("env"));  // overwriteEnv: false
  // A gpucores value over 100 under the custom name is denied by that name.
  json bad = Admit(Create(PodWith({Container("c", {{"example.com/vgpu-cores", "150"}})})), config);
  EXPECT_FALSE(bad["response"]["allowed"]);
  EXPECT_NE(bad["response"]["status"]["message"].get<std::string>().find("example.com/vgpu-cores"),
            std::string::npos);
  // nvidia.com/gpu is just another extended resource here: no scheduler name, no defaults.
  json plain = PodWith({Container("c", {{"nvidia.com/gpu", "1"}})});
  json pr = Admit(Create(plain), config);
  ASSERT_TRUE(pr["response"]["allowed"]);
  EXPECT_EQ(Patched(plain, pr)["spec"]["schedulerName"], "default-scheduler");
}

TEST(WebhookTest, RequestsOnlyValuesAreCopiedToLimits) {
  json c = {
      {"name", "c"},
      {"resources", {{"requests", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "4096"}}}}}};
  json pod = PodWith({c});
  json r = Admit(Create(pod), Config());
  ASSERT_TRUE(r["response"]["allowed"]) << r.dump();
  json out = Patched(pod, r);
  EXPECT_EQ(out["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "1");
  EXPECT_EQ(out["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"], "4096");
}

TEST(WebhookTest, BothMemoryKeysWarn) {
  json pod = PodWith({Container("c", {{"nvidia.com/gpu", "1"},
                                      {"nvidia.com/gpumem", "1000"},
                                      {"nvidia.com/gpumem-percentage", "50"}})});
  json r = Admit(Create(pod), Config());
  ASSERT_TRUE(r["response"]["allowed"]);
  ASSERT_TRUE(r["response"].contains("warnings"));
  EXPECT_NE(r["response"]["warnings"].dump().find("nvidia.com/gpumem-percentage"),
            std::string::npos);
}

TEST(WebhookTest, SliceKeysAsAnnotationsWarn) {
  json pod = PodWith({Container("c", {{"nvidia.com/gpu", "1"}})}, {{"nvidia.com/gpumem", "3000"}});
  json r = Admit(Create(pod), Config());
  ASSERT_TRUE(r["response"]["allowed"]);
  EXPECT_NE(r["response"]["warnings"].dump().find("nvidia.com/gpumem"), std::string::npos);
}

TEST(WebhookTest, BadValuesAreDenied400NamingContainerResourceAndValue) {
  struct Case {
    json limits;
    std::string want;
  } cases[] = {
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "150"}}, "150"},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "-1"}},
       "nvidia.com/gpumem-percentage"},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "101"}}, "101"},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "-1"}}, "-1"},
      {{{"nvidia.com/gpu", "500m"}}, "500m"},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3Gi"}}, "3Gi"},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "lots"}}, "lots"},
      {{{"nvidia.com/gpu", "0"}, {"nvidia.com/gpumem", "1000"}}, "nvidia.com/gpu"},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/priority", "2"}}, "nvidia.com/priority"},
  };
  for (const auto& c : cases) {
    json r = Admit(Create(PodWith({Container("train", c.limits)})), Config());
    SCOPED_TRACE(c.limits.dump());
    ASSERT_FALSE(r["response"]["allowed"]);
    EXPECT_EQ(r["response"]["status"]["code"], 400);
    std::string msg = r["response"]["status"]["message"];
    EXPECT_NE(msg.find("train"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.want), std::string::npos) << msg;
  }
}

TEST(WebhookTest, BinarySuffixMessageSaysTheUnit) {
  json r = Admit(
      Create(PodWith({Container("c", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3Gi"}})})),
      Config());
  std::string msg = r["response"]["status"]["message"];
  EXPECT_NE(msg.find("3072"), std::string::npos) << msg;
}

TEST(WebhookTest, GpuZeroUsesNoGpu) {
  json pod = PodWith({Container("c", {{"nvidia.com/gpu", "0"}})});
  json r = Admit(Create(pod), Config());
  ASSERT_TRUE(r["response"]["allowed"]);
  EXPECT_EQ(Patched(pod, r)["spec"]["schedulerName"], "default-scheduler");
}

TEST(WebhookTest, PolicyDenialsAre403) {
  json gpu = {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}};
  json privileged =
      Container("side", json::object(), {{"securityContext", {{"privileged", true}}}});
  struct Case {
    json pod;
    std::string want;
  } cases[] = {
      {PodWith({Container("c", gpu), privileged}), "\"side\" is privileged"},
      {[&] {
         json p = PodWith({Container("c", gpu)});
         p["spec"]["initContainers"] = {privileged};
         return p;
       }(),
       "\"side\" is privileged"},
      {PodWith({Container("c", gpu)}, json::object(), {{"schedulerName", "my-scheduler"}}),
       "my-scheduler"},
      {PodWith({Container("c", gpu)}, json::object(), {{"nodeName", "node-a"}}), "spec.nodeName"},
      {PodWith({Container("c", gpu,
                          {{"env", {{{"name", "CUDA_DISABLE_CONTROL"}, {"value", "TRUE"}}}}})}),
       "CUDA_DISABLE_CONTROL"},
      // A borrower outranking ordinary pods (docs/reclaim.md "Lending").
      {PodWith({Container("c", gpu)}, {{"fracgpu.io/borrower", "true"}},
               {{"priority", 1000}, {"priorityClassName", "high"}}),
       "annotation fracgpu.io/borrower is \"true\" but spec.priority is 1000 (priorityClassName "
       "\"high\"): a borrower is evicted when the owner of the memory it borrows wakes, so it "
       "may not outrank ordinary pods"},
      // A borrower asking for more time to stop than the node agent gives it (issue 36 review
      // finding 5).
      {PodWith({Container("c", gpu)}, {{"fracgpu.io/borrower", "true"}},
               {{"terminationGracePeriodSeconds", 31}}),
       "annotation fracgpu.io/borrower is \"true\" but spec.terminationGracePeriodSeconds is 31: "
       "a borrower is given at most 30 s to stop"},
  };
  for (const auto& c : cases) {
    json r = Admit(Create(c.pod), Config());
    ASSERT_FALSE(r["response"]["allowed"]) << c.want;
    EXPECT_EQ(r["response"]["status"]["code"], 403) << c.want;
    EXPECT_NE(r["response"]["status"]["message"].get<std::string>().find(c.want), std::string::npos)
        << r["response"]["status"]["message"];
  }
}

TEST(WebhookTest, BorrowerOfPriorityZeroOrBelowIsAdmitted) {
  json gpu = {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}};
  for (json extra :
       {json::object(), json{{"priority", 0}}, json{{"priority", -10}},
        json{{"terminationGracePeriodSeconds", 30}}, json{{"terminationGracePeriodSeconds", 0}}}) {
    json r = Admit(Create(PodWith({Container("c", gpu)}, {{"fracgpu.io/borrower", "true"}}, extra)),
                   Config());
    EXPECT_TRUE(r["response"]["allowed"]) << extra.dump() << " " << r.dump();
  }
  // Not a borrower ("false"): any priority.
  json r = Admit(Create(PodWith({Container("c", gpu)}, {{"fracgpu.io/borrower", "false"}},
                                {{"priority", 1000}, {"terminationGracePeriodSeconds", 3600}})),
                 Config());
  EXPECT_TRUE(r["response"]["allowed"]) << r.dump();
}

TEST(WebhookTest, ABorrowerNeverPreempts) {
  json gpu = {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}};
  // No class (the Priority admission plugin, before the webhook, gave it the default policy or
  // none): the webhook gives it the borrower class with that class's value and policy, all
  // three, so the plugin's re-run after the webhook finds them consistent.
  for (json extra : {json::object(), json{{"preemptionPolicy", "PreemptLowerPriority"}},
                     json{{"preemptionPolicy", "PreemptLowerPriority"}, {"priority", 0}},
                     json{{"priority", -10}}}) {
    json pod = PodWith({Container("c", gpu)}, {{"fracgpu.io/borrower", "true"}}, extra);
    json r = Admit(Create(pod), Config());
    ASSERT_TRUE(r["response"]["allowed"]) << extra.dump() << " " << r.dump();
    json out = Patched(pod, r);
    EXPECT_EQ(out["spec"]["preemptionPolicy"], "Never") << extra.dump();
    EXPECT_EQ(out["spec"]["priorityClassName"], "fracgpu-borrower") << extra.dump();
    EXPECT_EQ(out["spec"]["priority"], -1000) << extra.dump();
  }
  // A class of its own that never preempts: kept as it is.
  json own = PodWith(
      {Container("c", gpu)}, {{"fracgpu.io/borrower", "true"}},
      {{"priorityClassName", "batch-low"}, {"priority", -5}, {"preemptionPolicy", "Never"}});
  json r = Admit(Create(own), Config());
  ASSERT_TRUE(r["response"]["allowed"]) << r.dump();
  EXPECT_EQ(Patched(own, r)["spec"]["priorityClassName"], "batch-low");
  EXPECT_EQ(Patched(own, r)["spec"]["priority"], -5);
  // A class of its own that may preempt (named by the tenant or the cluster's global default):
  // refused, naming the class, its policy and the way out.
  json preempting = PodWith({Container("c", gpu)}, {{"fracgpu.io/borrower", "true"}},
                            {{"priorityClassName", "batch-low"},
                             {"priority", -5},
                             {"preemptionPolicy", "PreemptLowerPriority"}});
  r = Admit(Create(preempting), Config());
  ASSERT_FALSE(r["response"]["allowed"]) << r.dump();
  EXPECT_EQ(r["response"]["status"]["code"], 403);
  EXPECT_EQ(r["response"]["status"]["message"],
            "annotation fracgpu.io/borrower is \"true\" but priorityClassName \"batch-low\" has "
            "preemptionPolicy \"PreemptLowerPriority\": a borrower may never preempt other pods; "
            "name the PriorityClass fracgpu-borrower (or another with preemptionPolicy: Never), or "
            "none and the webhook gives it fracgpu-borrower");
  // An ordinary pod keeps what its class gave it.
  json pod = PodWith({Container("c", gpu)}, {{"fracgpu.io/borrower", "false"}},
                     {{"preemptionPolicy", "PreemptLowerPriority"}});
  json out = Patched(pod, Admit(Create(pod), Config()));
  EXPECT_EQ(out["spec"]["preemptionPolicy"], "PreemptLowerPriority");
  EXPECT_FALSE(out["spec"].contains("priorityClassName"));
}

TEST(WebhookTest, PrivilegedWithoutGpuIsAllowed) {
  json pod =
      PodWith({Container("c", json::object(), {{"securityContext", {{"privileged", true}}}})});
  EXPECT_TRUE(Admit(Create(pod), Config())["response"]["allowed"]);
}

TEST(WebhookTest, AllowListedSchedulerIsKept) {
  json pod = PodWith({Container("c", {{"nvidia.com/gpu", "1"}})}, json::object(),
                     {{"schedulerName", "volcano"}});
  json r = Admit(Create(pod), Config());
  ASSERT_TRUE(r["response"]["allowed"]);
  EXPECT_EQ(Patched(pod, r)["spec"]["schedulerName"], "volcano");
}

TEST(WebhookTest, DisableControlRules) {
  auto env = [](const std::string& v) {
    return json{{"env", {{{"name", "CUDA_DISABLE_CONTROL"}, {"value", v}}}}};
  };
  // Whole exclusive card: allowed.
  EXPECT_TRUE(Admit(Create(PodWith({Container("c", {{"nvidia.com/gpu", "1"}}, env("true"))})),
                    Config())["response"]["allowed"]);
  // Not a boolean: HAMi reads it as false; allowed with a warning, isolation stays on.
  json bad =
      Admit(Create(PodWith({Container("c", {{"nvidia.com/gpu", "1"}}, env("yes"))})), Config());
  ASSERT_TRUE(bad["response"]["allowed"]);
  EXPECT_NE(bad["response"]["warnings"].dump().find("isolation stays on"), std::string::npos);
  // false on a shared slice: fine. Irrelevant without GPU, even if malformed.
  EXPECT_TRUE(Admit(Create(PodWith({Container("c", {{"nvidia.com/gpumem", "100"}}, env("False"))})),
                    Config())["response"]["allowed"]);
  EXPECT_TRUE(Admit(Create(PodWith({Container("c", json::object(), env("maybe"))})),
                    Config())["response"]["allowed"]);
  // valueFrom cannot be checked: ignored.
  json vf = {{"env",
              {{{"name", "CUDA_DISABLE_CONTROL"},
                {"valueFrom", {{"configMapKeyRef", {{"name", "x"}, {"key", "y"}}}}}}}}};
  EXPECT_TRUE(Admit(Create(PodWith({Container("c", {{"nvidia.com/gpumem", "100"}}, vf)})),
                    Config())["response"]["allowed"]);
}

TEST(WebhookTest, CreateRemovesSystemAnnotationsFromEveryPod) {
  json ann = {{"hami.io/vgpu-devices-allocated", "GPU-1,NVIDIA,80000,100:;"},
              {"hami.io/vgpu-devices-to-allocate", "GPU-1,NVIDIA,80000,100:;"},
              {"hami.io/vgpu-node", "n"},
              {"hami.io/bind-phase", "success"},
              {"fracgpu.io/allocation-signature", "forged"},
              {"keep", "me"}};
  for (json limits : {json::object(), json{{"nvidia.com/gpu", "1"}}}) {
    json pod = PodWith({Container("c", limits)}, ann, {{"schedulerName", "someone-else"}});
    if (!limits.empty()) pod["spec"]["schedulerName"] = "default-scheduler";
    json r = Admit(Create(pod), Config());
    ASSERT_TRUE(r["response"]["allowed"]) << r.dump();
    json out = Patched(pod, r);
    EXPECT_EQ(out["metadata"]["annotations"], (json{{"keep", "me"}}));
  }
}

TEST(WebhookTest, IgnoreLabelAllowsWithoutPatch) {
  json pod =
      PodWith({Container("c", {{"nvidia.com/gpucores", "900"}})}, {{"hami.io/vgpu-node", "x"}});
  pod["metadata"]["labels"] = {{"hami.io/webhook", "ignore"}};
  json r = Admit(Create(pod), Config());
  EXPECT_TRUE(r["response"]["allowed"]);
  EXPECT_FALSE(r["response"].contains("patch"));
}

TEST(WebhookTest, UpdateLockBySystemAnnotationsAndUser) {
  WebhookConfig c = Config();
  json old_pod =
      PodWith({Container("c", {{"nvidia.com/gpu", "1"}})}, {{"hami.io/bind-phase", "allocating"}});
  json phase = old_pod;
  phase["metadata"]["annotations"]["hami.io/bind-phase"] = "success";
  json alloc = old_pod;
  alloc["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] = "GPU-1,NVIDIA,1,0:;";
  json removed = old_pod;
  removed["metadata"]["annotations"].erase("hami.io/bind-phase");
  json label = old_pod;
  label["metadata"]["labels"] = {{"team", "a"}};
  struct Case {
    json pod;
    std::string user;
    bool allowed;
  } cases[] = {
      {phase, "alice", false},
      {alloc, "alice", false},
      {removed, "alice", false},
      {label, "alice", true},  // other changes pass
      {phase, c.scheduler_user, true},
      {alloc, c.scheduler_user, true},
      {phase, c.device_plugin_user, true},
      {alloc, c.device_plugin_user, false},  // the plugin may not rewrite the decision
  };
  for (const auto& k : cases) {
    json r = Admit(Update(old_pod, k.pod, k.user), c);
    EXPECT_EQ(r["response"]["allowed"], k.allowed) << k.user << " " << k.pod["metadata"].dump();
    if (!k.allowed) {
      EXPECT_EQ(r["response"]["status"]["code"], 403);
      EXPECT_NE(r["response"]["status"]["message"].get<std::string>().find(k.user),
                std::string::npos);
    }
  }
}

// Issue 36 finding 4: the borrower flag is frozen after creation for every user, so a
// borrower cannot shed it to escape eviction, nor a pod add it to land on lent memory.
TEST(WebhookTest, UpdateCannotAddRemoveOrChangeTheBorrowerFlag) {
  WebhookConfig c = Config();
  json plain = PodWith({Container("c", {{"nvidia.com/gpu", "1"}})}, {{"keep", "me"}});
  json borrower = plain;
  borrower["metadata"]["annotations"][core::kAnnotationBorrower] = "true";
  json changed = plain;
  changed["metadata"]["annotations"][core::kAnnotationBorrower] = "false";
  json relabelled = borrower;
  relabelled["metadata"]["labels"] = {{"team", "a"}};
  struct Case {
    json old_pod, pod;
    std::string user;
    bool allowed;
  } cases[] = {
      {borrower, plain, "alice", false},           // removed
      {plain, borrower, "alice", false},           // added
      {borrower, changed, "alice", false},         // changed
      {borrower, plain, c.scheduler_user, false},  // no one may change it
      {borrower, plain, c.device_plugin_user, false},
      {borrower, relabelled, "alice", true},  // other changes of a borrower pass
      {borrower, borrower, "alice", true},
  };
  for (const auto& k : cases) {
    json r = Admit(Update(k.old_pod, k.pod, k.user), c);
    EXPECT_EQ(r["response"]["allowed"], k.allowed)
        << k.user << " " << k.old_pod["metadata"].dump() << " -> " << k.pod["metadata"].dump();
    if (!k.allowed) {
      EXPECT_EQ(r["response"]["status"]["code"], 403);
      EXPECT_NE(
          r["response"]["status"]["message"].get<std::string>().find(core::kAnnotationBorrower),
          std::string::npos);
    }
  }
}

TEST(WebhookTest, DecodeRejectsMalformedReviews) {
  struct Case {
    std::string body, want;
  } cases[] = {
      {"", "not valid JSON"},
      {"{\"request\":", "not valid JSON"},
      {"[]", "must be a JSON object"},
      {"{}", "request must be an object"},
      {R"({"request":{"uid":1,"operation":"CREATE"}})", "request.uid must be a string, got number"},
      {R"({"request":{"uid":"u"}})", "request.operation must be a string"},
      {R"({"request":{"uid":"u","operation":"CREATE","object":"pod"}})",
       "request.object must be an object, got string"},
      {R"({"apiVersion":"v2","request":{"uid":"u","operation":"CREATE"}})", "apiVersion"},
  };
  for (const auto& c : cases) {
    auto r = DecodeAdmissionReview(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status().message();
  }
}

TEST(WebhookTest, WrongTypesInsideThePodAreDenied400) {
  json pod = PodWith({Container("c", {{"nvidia.com/gpu", "1"}})});
  pod["spec"]["containers"][0]["resources"]["limits"] = "lots";
  json r = Admit(Create(pod), Config());
  ASSERT_FALSE(r["response"]["allowed"]);
  EXPECT_EQ(r["response"]["status"]["code"], 400);
}

TEST(WebhookTest, DeleteAndSubresourcesPass) {
  AdmissionRequest r = Create(PodWith({Container("c", {{"nvidia.com/gpucores", "900"}})}));
  r.operation = "DELETE";
  EXPECT_TRUE(Admit(r, Config())["response"]["allowed"]);
  r.operation = "CREATE";
  r.sub_resource = "status";
  EXPECT_TRUE(Admit(r, Config())["response"]["allowed"]);
}

}  // namespace
}  // namespace fracgpu::scheduler
