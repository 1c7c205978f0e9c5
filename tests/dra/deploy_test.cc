// deploy/dra/: the DeviceClasses name fracgpu's driver and the classes the HAMi conversion
// uses; the DaemonSet's args are real flags of `fracgpu dra-driver` and its sockets are where
// kubelet looks; and, when kubectl is on the machine, `kubectl kustomize` builds the base with
// the component (the device plugin's DaemonSet replaced by the driver's).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "dra/api.h"
#include "dra/convert.h"
#include "test_util.h"

namespace fracgpu::cli {
void RegisterDraDriverCommand(CLI::App& app);
}

namespace fracgpu::dra {
namespace {

const std::string kDir = std::string(FRACGPU_DEPLOY_DIR) + "/dra";

TEST(DraDeployTest, DeviceClassesSelectTheDriverAndHealthyDevices) {
  auto docs = YAML::LoadAllFromFile(kDir + "/deviceclasses.yaml");
  std::set<std::string> names;
  for (const auto& d : docs) {
    EXPECT_EQ(d["apiVersion"].as<std::string>(), "resource.k8s.io/v1");
    EXPECT_EQ(d["kind"].as<std::string>(), "DeviceClass");
    names.insert(d["metadata"]["name"].as<std::string>());
    std::string cel = d["spec"]["selectors"][0]["cel"]["expression"].as<std::string>();
    EXPECT_NE(cel.find(std::string("device.driver == \"") + kDriverName + "\""), std::string::npos)
        << cel;
    EXPECT_NE(cel.find("healthy == true"), std::string::npos) << cel;
  }
  EXPECT_EQ(names, (std::set<std::string>{kFractionalClass, kWholeClass}));
}

TEST(DraDeployTest, DaemonSetArgsAreRealFlagsAndSocketsAreKubelets) {
  auto docs = YAML::LoadAllFromFile(kDir + "/dra-driver.yaml");
  YAML::Node ds;
  for (const auto& d : docs) {
    if (d["kind"].as<std::string>() == "DaemonSet") ds = d;
  }
  ASSERT_TRUE(ds.IsDefined());
  YAML::Node c = ds["spec"]["template"]["spec"]["containers"][0];
  CLI::App app;
  cli::RegisterDraDriverCommand(app);
  CLI::App* sub = app.get_subcommand("dra-driver");
  std::map<std::string, std::string> flags;
  ASSERT_EQ(c["args"][0].as<std::string>(), "dra-driver");
  for (size_t i = 1; i < c["args"].size(); ++i) {
    std::string a = c["args"][i].as<std::string>();
    std::string name = a.substr(0, a.find('='));
    EXPECT_NE(sub->get_option_no_throw(name), nullptr)
        << name << " is not a flag of fracgpu dra-driver";
    flags[name] = a.substr(a.find('=') + 1);
  }
  EXPECT_EQ(flags["--registry-dir"], kPluginsRegistryDir);
  EXPECT_EQ(flags["--plugin-dir"], std::string(kPluginsDir) + "/" + kDriverName);
  EXPECT_EQ(flags["--cdi-dir"], kCdiDir);
  std::set<std::string> mounted;
  for (const auto& m : c["volumeMounts"]) mounted.insert(m["mountPath"].as<std::string>());
  for (const auto& [flag, path] : flags) {
    if (flag == "--registry-dir" || flag == "--plugin-dir" || flag == "--cdi-dir") {
      EXPECT_TRUE(mounted.count(path)) << path;
    }
  }
}

// The UI's DRA mode: the component adds --dra-mode to the UI's Deployment and lets its service
// account list ResourceSlices and ResourceClaims (what ui::ClusterSource reads in DRA mode).
TEST(DraDeployTest, TheUiReadsSlicesAndClaimsInDraMode) {
  YAML::Node k = YAML::LoadFile(kDir + "/kustomization.yaml");
  bool listed = false, patched = false;
  for (const auto& r : k["resources"]) listed |= r.as<std::string>() == "ui-dra-mode.yaml";
  for (const auto& p : k["patches"]) {
    if (p["target"]["kind"].as<std::string>() != "Deployment" ||
        p["target"]["name"].as<std::string>() != "fracgpu-ui") {
      continue;
    }
    for (const auto& op : YAML::Load(p["patch"].as<std::string>())) {
      patched |= op["op"].as<std::string>() == "add" &&
                 op["path"].as<std::string>() == "/spec/template/spec/containers/0/args/-" &&
                 op["value"].as<std::string>() == "--dra-mode";
    }
  }
  EXPECT_TRUE(listed);
  EXPECT_TRUE(patched);
  std::set<std::string> can_list;
  std::string bound_to;
  for (const auto& d : YAML::LoadAllFromFile(kDir + "/ui-dra-mode.yaml")) {
    if (d["kind"].as<std::string>() == "ClusterRole") {
      for (const auto& rule : d["rules"]) {
        if (rule["apiGroups"][0].as<std::string>() != "resource.k8s.io") continue;
        bool list = false;
        for (const auto& v : rule["verbs"]) list |= v.as<std::string>() == "list";
        for (const auto& r : rule["resources"]) {
          if (list) can_list.insert(r.as<std::string>());
        }
      }
    }
    if (d["kind"].as<std::string>() == "ClusterRoleBinding") {
      bound_to = d["subjects"][0]["namespace"].as<std::string>() + "/" +
                 d["subjects"][0]["name"].as<std::string>();
    }
  }
  EXPECT_EQ(can_list, (std::set<std::string>{"resourceclaims", "resourceslices"}));
  EXPECT_EQ(bound_to, "fracgpu-system/fracgpu-ui");
}

TEST(DraDeployTest, KustomizeBuildsBaseWithComponentWhenKubectlIsPresent) {
  if (std::system("kubectl version --client >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "kubectl not on this machine";
  testing::TempDir tmp;
  // kustomize wants relative paths below the kustomization's root.
  std::string root = std::string(FRACGPU_DEPLOY_DIR) + "/../.dra-kustomize-test";
  std::filesystem::create_directories(root);
  std::ofstream(root + "/kustomization.yaml")
      << "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
         "resources: [../deploy]\ncomponents: [../deploy/dra]\n";
  std::string out = tmp.path() + "/out.yaml";
  int rc = std::system(("kubectl kustomize " + root + " > " + out + " 2>&1").c_str());
  std::filesystem::remove_all(root);
  ASSERT_EQ(rc, 0) << testing::ReadFile(out);
  int daemonsets = 0, classes = 0;
  bool dra_mode = false, ui_dra_mode = false, dry_run_safe = false, may_create_templates = false;
  for (const auto& d : YAML::LoadAllFromFile(out)) {
    std::string kind = d["kind"].as<std::string>();
    std::string name = d["metadata"]["name"].as<std::string>();
    if (kind == "DaemonSet") {
      ++daemonsets;
      EXPECT_EQ(name, "fracgpu-dra-driver");
    }
    classes += kind == "DeviceClass";
    // The webhook's DRA mode: the flag, dry-run without side effects, RBAC for the templates.
    if (kind == "Deployment" && name == "fracgpu-scheduler") {
      for (const auto& a : d["spec"]["template"]["spec"]["containers"][0]["args"])
        dra_mode |= a.as<std::string>() == "--dra-mode";
    }
    if (kind == "Deployment" && name == "fracgpu-ui") {
      for (const auto& a : d["spec"]["template"]["spec"]["containers"][0]["args"])
        ui_dra_mode |= a.as<std::string>() == "--dra-mode";
    }
    if (kind == "MutatingWebhookConfiguration") {
      dry_run_safe = d["webhooks"][0]["sideEffects"].as<std::string>() == "NoneOnDryRun";
    }
    if (kind == "ClusterRole" && name == "fracgpu-scheduler-dra-mode") {
      const auto& rule = d["rules"][0];
      may_create_templates = rule["apiGroups"][0].as<std::string>() == "resource.k8s.io" &&
                             rule["resources"][0].as<std::string>() == "resourceclaimtemplates";
    }
  }
  EXPECT_EQ(daemonsets, 1);
  EXPECT_EQ(classes, 2);
  EXPECT_TRUE(dra_mode);
  EXPECT_TRUE(ui_dra_mode);
  EXPECT_TRUE(dry_run_safe);
  EXPECT_TRUE(may_create_templates);
}

}  // namespace
}  // namespace fracgpu::dra
