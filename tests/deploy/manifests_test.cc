// deploy/ parsed and cross-checked (manifest_check.h): the real manifests have no problem, and
// each broken variant in the table is caught with a message naming what is wrong.
#include <gtest/gtest.h>

#include <functional>

#include "manifest_check.h"

namespace fracgpu::deploytest {
namespace {

const std::string kDeploy = std::string(FRACGPU_SOURCE_DIR) + "/deploy";

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += "  " + s + "\n";
  return out;
}

// The first object of `kind` named `name`, mutable (shares the bundle's tree).
YAML::Node Obj(Bundle& b, const std::string& kind, const std::string& name) {
  for (auto& m : b.objects) {
    if (m.node["kind"].as<std::string>() == kind &&
        m.node["metadata"]["name"].as<std::string>() == name)
      return m.node;
  }
  ADD_FAILURE() << kind << "/" << name << " not found";
  return YAML::Node();
}
// The pod spec's container `name` of a workload.
YAML::Node Container(YAML::Node workload, const std::string& name,
                     const char* list = "containers") {
  for (auto c : workload["spec"]["template"]["spec"][list]) {
    if (c["name"].as<std::string>() == name) return c;
  }
  ADD_FAILURE() << "container " << name << " not found";
  return YAML::Node();
}
// Replaces the arg starting with `prefix` in a container's args.
void SetArg(YAML::Node c, const std::string& prefix, const std::string& value) {
  for (size_t i = 0; i < c["args"].size(); ++i) {
    if (c["args"][i].as<std::string>().rfind(prefix, 0) == 0) {
      c["args"][i] = value;
      return;
    }
  }
  c["args"].push_back(value);
}
// The KubeSchedulerConfiguration text, edited by `edit`.
void EditSchedulerConfig(Bundle& b, const std::function<void(YAML::Node&)>& edit) {
  YAML::Node cm = Obj(b, "ConfigMap", "fracgpu-kube-scheduler-config");
  YAML::Node config = YAML::Load(cm["data"]["config.yaml"].as<std::string>());
  edit(config);
  YAML::Emitter out;
  out << config;
  cm["data"]["config.yaml"] = std::string(out.c_str());
}
void RemoveObject(Bundle& b, const std::string& kind, const std::string& name) {
  std::erase_if(b.objects, [&](const Manifest& m) {
    return m.node["kind"].as<std::string>() == kind &&
           m.node["metadata"]["name"].as<std::string>() == name;
  });
}

TEST(DeployManifests, EveryManifestIsConsistentWithTheBinariesAndTheContract) {
  auto b = LoadDeploy(kDeploy);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  // Independent count of what deploy/ must hold (by hand from the task): 5 service accounts,
  // 1 namespace, 1 webhook configuration, scheduler + kube-scheduler + ui Deployments, one
  // DaemonSet, the certs Job and CronJob, 3 Services, 3 ConfigMaps.
  EXPECT_EQ(ObjectsOfKind(*b, "ServiceAccount").size(), 5u);
  EXPECT_EQ(ObjectsOfKind(*b, "Namespace").size(), 1u);
  EXPECT_EQ(ObjectsOfKind(*b, "MutatingWebhookConfiguration").size(), 1u);
  EXPECT_EQ(ObjectsOfKind(*b, "Deployment").size(), 3u);
  EXPECT_EQ(ObjectsOfKind(*b, "DaemonSet").size(), 1u);
  EXPECT_EQ(ObjectsOfKind(*b, "Job").size(), 1u);
  EXPECT_EQ(ObjectsOfKind(*b, "CronJob").size(), 1u);
  EXPECT_EQ(ObjectsOfKind(*b, "Service").size(), 3u);
  EXPECT_EQ(ObjectsOfKind(*b, "ConfigMap").size(), 3u);
  auto problems = Check(*b);
  EXPECT_TRUE(problems.empty()) << Join(problems);
}

TEST(DeployManifests, CronJobRunsTheSameCertsCommandAsTheJob) {
  auto b = LoadDeploy(kDeploy);
  ASSERT_TRUE(b.ok());
  YAML::Node job = FindObject(*b, "Job", "fracgpu-certs");
  YAML::Node cron = FindObject(*b, "CronJob", "fracgpu-certs-renew");
  auto args = [](const YAML::Node& n) {
    std::vector<std::string> out;
    for (const auto& a : n) out.push_back(a.as<std::string>());
    return out;
  };
  EXPECT_EQ(args(job["spec"]["template"]["spec"]["containers"][0]["args"]),
            args(cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]));
}

TEST(DeployManifests, ArgsParseWithTheRealFlagDefinitions) {
  auto ok = ParseFracgpuArgs({"scheduler", "--listen=0.0.0.0:9443", "--leader-elect"});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->sub, "scheduler");
  EXPECT_EQ(ok->Get("--listen"), "0.0.0.0:9443");
  // The deprecated spellings are checked as their current names (issue 38 item 5).
  auto old = ParseFracgpuArgs({"scheduler", "--http-bind=0.0.0.0:9444"});
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->Get("--listen"), "0.0.0.0:9444");
  EXPECT_EQ(ok->Get("--leader-elect"), "true");
  EXPECT_EQ(ok->Get("--scheduler-name"), "fracgpu-scheduler");  // captured default
  auto unknown = ParseFracgpuArgs({"scheduler", "--no-such-flag=1"});
  EXPECT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("--no-such-flag"), std::string::npos)
      << unknown.status().message();
  EXPECT_FALSE(ParseFracgpuArgs({"device-plugin", "--register-interval=0"}).ok());
  EXPECT_FALSE(ParseFracgpuArgs({"no-such-command"}).ok());
}

struct BadCase {
  std::string name;
  std::function<void(Bundle&)> edit;
  std::string problem;  // substring of one reported problem
};

TEST(DeployManifests, CheckerRejectsEachBrokenVariant) {
  auto loaded = LoadDeploy(kDeploy);
  ASSERT_TRUE(loaded.ok());
  const std::vector<BadCase> cases = {
      {"monitor reads another node directory than the plugin's",
       [](Bundle& b) {
         YAML::Node ds = Obj(b, "DaemonSet", "fracgpu-device-plugin");
         SetArg(Container(ds, "monitor"), "--node-dir", "--node-dir=/run/fracgpu/node");
         for (auto m : Container(ds, "monitor")["volumeMounts"]) {
           if (m["name"].as<std::string>() == "node-dir") m["mountPath"] = "/run/fracgpu/node";
         }
         for (auto v : ds["spec"]["template"]["spec"]["volumes"]) {
           if (v["name"].as<std::string>() == "node-dir")
             v["hostPath"]["path"] = "/run/fracgpu/node";
         }
       },
       "--node-dir \"/run/fracgpu/node\" is not the device plugin's node directory "
       "/usr/local/vgpu/node"},
      {"borrower PriorityClass of another value than the webhook writes",
       [](Bundle& b) { Obj(b, "PriorityClass", "fracgpu-borrower")["value"] = -10; },
       "PriorityClass/fracgpu-borrower: value -10 is not the webhook's -1000"},
      {"borrower PriorityClass that preempts",
       [](Bundle& b) {
         Obj(b, "PriorityClass", "fracgpu-borrower")["preemptionPolicy"] = "PreemptLowerPriority";
       },
       "PriorityClass/fracgpu-borrower: preemptionPolicy \"PreemptLowerPriority\" is not Never"},
      {"admission policy's system list misses an annotation",
       [](Bundle& b) {
         for (auto v :
              Obj(b, "ValidatingAdmissionPolicy", "fracgpu-pod-annotations")["spec"]["variables"]) {
           if (v["name"].as<std::string>() == "system")
             v["expression"] = "['hami.io/vgpu-node', 'hami.io/vgpu-devices-allocated']";
         }
       },
       "variable system lists hami.io/vgpu-devices-allocated, hami.io/vgpu-node, not "
       "core::kSystemPodAnnotations"},
      {"admission policy lets the device plugin change the allocation",
       [](Bundle& b) {
         for (auto v : Obj(b, "ValidatingAdmissionPolicy",
                           "fracgpu-pod-annotations")["spec"]["validations"]) {
           std::string e = v["expression"].as<std::string>();
           if (e.find("variables.devicePlugin") != std::string::npos)
             v["expression"] =
                 "!variables.devicePlugin || variables.changedSystem.all(k, k in "
                 "['hami.io/vgpu-devices-to-allocate', 'hami.io/bind-phase', "
                 "'hami.io/vgpu-devices-allocated'])";
         }
       },
       "the device plugin's rule lists hami.io/bind-phase, hami.io/vgpu-devices-allocated, "
       "hami.io/vgpu-devices-to-allocate, not core::kDevicePluginPodAnnotations"},
      {"webhook skips the device plugin without the policy",
       [](Bundle& b) { RemoveObject(b, "ValidatingAdmissionPolicy", "fracgpu-pod-annotations"); },
       "missing, and the webhook skips the device plugin's UPDATEs"},
      {"webhook skips the device plugin but the policy has no rule for it",
       [](Bundle& b) {
         YAML::Node vals =
             Obj(b, "ValidatingAdmissionPolicy", "fracgpu-pod-annotations")["spec"]["validations"];
         YAML::Node kept(YAML::NodeType::Sequence);
         for (auto v : vals) {
           if (v["expression"].as<std::string>().find("variables.devicePlugin") ==
               std::string::npos)
             kept.push_back(v);
         }
         Obj(b, "ValidatingAdmissionPolicy", "fracgpu-pod-annotations")["spec"]["validations"] =
             kept;
       },
       "the webhook skips the device plugin's UPDATEs but the policy has no rule"},
      {"borrower PriorityClass missing",
       [](Bundle& b) { RemoveObject(b, "PriorityClass", "fracgpu-borrower"); },
       "PriorityClass/fracgpu-borrower: does not exist"},
      {"missing ConfigMap",
       [](Bundle& b) { RemoveObject(b, "ConfigMap", "fracgpu-device-config"); },
       "ConfigMap fracgpu-device-config does not exist"},
      {"ConfigMap key renamed",
       [](Bundle& b) {
         YAML::Node cm = Obj(b, "ConfigMap", "fracgpu-node-config");
         cm["data"]["nodes.json"] = cm["data"]["config.json"].as<std::string>();
         cm["data"].remove("config.json");
       },
       "--node-config=/etc/fracgpu/node-config/config.json is not provided by a mount: ConfigMap "
       "fracgpu-node-config has no key config.json"},
      {"wrong scheduler port",
       [](Bundle& b) {
         Container(Obj(b, "Deployment", "fracgpu-scheduler"),
                   "scheduler")["ports"][0]["containerPort"] = 8444;
       },
       "--listen listens on port \"8443\", which is not a declared containerPort"},
      {"scheduler without a client CA (issue 33)",
       [](Bundle& b) {
         auto c = Container(Obj(b, "Deployment", "fracgpu-scheduler"), "scheduler");
         YAML::Node args(YAML::NodeType::Sequence);
         for (auto a : c["args"]) {
           if (a.as<std::string>().rfind("--client-ca-file", 0) != 0) args.push_back(a);
         }
         c["args"] = args;
       },
       "no --client-ca-file: anyone reaching the port could bind pods"},
      {"Service targetPort unknown",
       [](Bundle& b) { Obj(b, "Service", "fracgpu-ui")["spec"]["ports"][0]["targetPort"] = "web"; },
       "Service/fracgpu-ui: targetPort web is not a port of Deployment/fracgpu-ui"},
      {"service account typo",
       [](Bundle& b) {
         Obj(b, "Deployment", "fracgpu-ui")["spec"]["template"]["spec"]["serviceAccountName"] =
             "fracgpu-iu";
       },
       "serviceAccountName \"fracgpu-iu\" is not a ServiceAccount"},
      {"unknown flag",
       [](Bundle& b) {
         SetArg(Container(Obj(b, "DaemonSet", "fracgpu-device-plugin"), "device-plugin"),
                "--verbose", "--verbose");
       },
       "args do not parse as `fracgpu` flags"},
      {"secret key missing",
       [](Bundle& b) {
         Obj(b, "Deployment", "fracgpu-scheduler")["spec"]["template"]["spec"]["volumes"][0]
                                                  ["secret"]["items"][0]["key"] = "tls.pem";
       },
       "Secret fracgpu-scheduler-tls has no key tls.pem"},
      {"signing key not mounted",
       [](Bundle& b) {
         SetArg(Container(Obj(b, "Deployment", "fracgpu-scheduler"), "scheduler"),
                "--signing-key-file", "--signing-key-file=/etc/fracgpu/key");
       },
       "--signing-key-file=/etc/fracgpu/key is not provided by a mount"},
      {"webhook path",
       [](Bundle& b) {
         Obj(b, "MutatingWebhookConfiguration",
             "fracgpu-webhook")["webhooks"][0]["clientConfig"]["service"]["path"] = "/mutate";
       },
       "clientConfig.service.path \"/mutate\" is not /webhook"},
      {"webhook port",
       [](Bundle& b) {
         Obj(b, "MutatingWebhookConfiguration",
             "fracgpu-webhook")["webhooks"][0]["clientConfig"]["service"]["port"] = 8443;
       },
       "port 8443 does not reach `fracgpu scheduler`'s listener"},
      {"webhook without UPDATE",
       [](Bundle& b) {
         Obj(b, "MutatingWebhookConfiguration",
             "fracgpu-webhook")["webhooks"][0]["rules"][0]["operations"] = YAML::Load("[CREATE]");
       },
       "rules must cover pods (group \"\", v1) on CREATE and UPDATE"},
      {"webhook opt-out selector",
       [](Bundle& b) {
         Obj(b, "MutatingWebhookConfiguration", "fracgpu-webhook")["webhooks"][0].remove(
             "objectSelector");
       },
       "objectSelector lacks hami.io/webhook NotIn [ignore]"},
      {"managed resource missing",
       [](Bundle& b) {
         EditSchedulerConfig(
             b, [](YAML::Node& c) { c["extenders"][0]["managedResources"].remove(4); });
       },
       "managedResources lacks nvidia.com/priority"},
      {"managed resource not ignored",
       [](Bundle& b) {
         EditSchedulerConfig(b, [](YAML::Node& c) {
           c["extenders"][0]["managedResources"][1]["ignoredByScheduler"] = false;
         });
       },
       "managedResources nvidia.com/gpumem needs ignoredByScheduler: true"},
      {"nodeCacheCapable off",
       [](Bundle& b) {
         EditSchedulerConfig(b,
                             [](YAML::Node& c) { c["extenders"][0]["nodeCacheCapable"] = false; });
       },
       "extender nodeCacheCapable is \"false\", want \"true\""},
      {"extender over plain HTTP",
       [](Bundle& b) {
         EditSchedulerConfig(b, [](YAML::Node& c) { c["extenders"][0]["enableHTTPS"] = false; });
       },
       "extender enableHTTPS is \"false\""},
      {"extender URL",
       [](Bundle& b) {
         EditSchedulerConfig(
             b, [](YAML::Node& c) { c["extenders"][0]["urlPrefix"] = "https://127.0.0.1:8443"; });
       },
       "extender urlPrefix \"https://127.0.0.1:8443\""},
      {"profile name",
       [](Bundle& b) {
         EditSchedulerConfig(
             b, [](YAML::Node& c) { c["profiles"][0]["schedulerName"] = "hami-scheduler"; });
       },
       "no profile named \"fracgpu-scheduler\""},
      {"scheduler names differ",
       [](Bundle& b) {
         SetArg(Container(Obj(b, "DaemonSet", "fracgpu-device-plugin"), "device-plugin"),
                "--scheduler-name", "--scheduler-name=other");
       },
       "--scheduler-name \"other\" differs from the scheduler's \"fracgpu-scheduler\""},
      {"scheduler reads another device config than the device plugin",
       [](Bundle& b) {
         Obj(b, "ConfigMap", "fracgpu-device-config")["data"]["other.yaml"] = "nvidia: {}\n";
         SetArg(Container(Obj(b, "Deployment", "fracgpu-scheduler"), "scheduler"),
                "--device-config-file",
                "--device-config-file=/etc/fracgpu/device-config/other.yaml");
       },
       "device config differs from the scheduler's --device-config-file"},
      {"scheduler without the device config",
       [](Bundle& b) {
         SetArg(Container(Obj(b, "Deployment", "fracgpu-scheduler"), "scheduler"),
                "--device-config-file", "--device-config-file=/etc/nowhere/device-config.yaml");
       },
       "--device-config-file=/etc/nowhere/device-config.yaml is not provided by a mount"},
      {"device config invalid",
       [](Bundle& b) {
         Obj(b, "ConfigMap", "fracgpu-device-config")["data"]["device-config.yaml"] =
             "nvidia:\n  deviceSplitCount: 0\n";
       },
       "device config does not parse"},
      {"hook path not the install dir",
       [](Bundle& b) {
         SetArg(Container(Obj(b, "DaemonSet", "fracgpu-device-plugin"), "device-plugin"),
                "--hook-path", "--hook-path=/opt");
       },
       "--hook-path needs host directory /opt/vgpu mounted"},
      {"device plugin not privileged",
       [](Bundle& b) {
         Container(Obj(b, "DaemonSet", "fracgpu-device-plugin"),
                   "device-plugin")["securityContext"]["privileged"] = false;
       },
       "must be privileged"},
      {"device-plugin user",
       [](Bundle& b) {
         Obj(b, "DaemonSet",
             "fracgpu-device-plugin")["spec"]["template"]["spec"]["serviceAccountName"] =
             "fracgpu-ui";
       },
       "--device-plugin-user \"system:serviceaccount:fracgpu-system:fracgpu-device-plugin\" is not "
       "the device plugin's account"},
      {"lease not granted",
       [](Bundle& b) {
         SetArg(Container(Obj(b, "Deployment", "fracgpu-scheduler"), "scheduler"),
                "--leader-elect-resource-name=", "--leader-elect-resource-name=other-lease");
       },
       "may not update Lease fracgpu-system/other-lease"},
      {"kustomization misses a file",
       [](Bundle& b) {
         YAML::Node kept = YAML::Load("[]");
         for (const auto& r : b.kustomization["resources"]) {
           if (r.as<std::string>() != "ui.yaml") kept.push_back(r.as<std::string>());
         }
         b.kustomization["resources"] = kept;
       },
       "resources does not list ui.yaml"},
      {"binding to a missing role",
       [](Bundle& b) {
         Obj(b, "ClusterRoleBinding", "fracgpu-ui")["roleRef"]["name"] = "fracgpu-viewer";
       },
       "roleRef ClusterRole/fracgpu-viewer is not defined"},
      {"pod not opted out of the webhook",
       [](Bundle& b) {
         Obj(b, "Deployment", "fracgpu-ui")["spec"]["template"]["metadata"]["labels"].remove(
             "hami.io/webhook");
       },
       "pod label hami.io/webhook: ignore is missing"},
      {"certs service is not the webhook's",
       [](Bundle& b) {
         SetArg(Container(Obj(b, "Job", "fracgpu-certs"), "certs"), "--service",
                "--service=fracgpu-ui");
       },
       "--service \"fracgpu-ui\" is not the webhook's Service"},
  };
  for (const auto& c : cases) {
    Bundle b = CloneBundle(*loaded);
    c.edit(b);
    auto problems = Check(b);
    bool found = std::any_of(problems.begin(), problems.end(), [&](const std::string& p) {
      return p.find(c.problem) != std::string::npos;
    });
    EXPECT_TRUE(found) << c.name << ": expected a problem containing\n  " << c.problem << "\ngot:\n"
                       << Join(problems);
  }
  // The edits above were made on copies: the loaded bundle is still clean.
  EXPECT_TRUE(Check(*loaded).empty());
}

}  // namespace
}  // namespace fracgpu::deploytest
