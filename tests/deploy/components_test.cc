// deploy/'s optional kustomize Components of issue 34 (items 2 and 8): deploy/runtime-class
// (HAMi's devicePlugin.createRuntimeClass) and deploy/prometheus (ServiceMonitors), each checked
// against the base it patches or scrapes.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "manifest_check.h"

namespace fracgpu::deploytest {
namespace {

const std::string kSource = FRACGPU_SOURCE_DIR;

std::vector<YAML::Node> Documents(const std::string& path) {
  std::vector<YAML::Node> out;
  for (const auto& d : YAML::LoadAllFromFile(path)) {
    if (d.IsMap()) out.push_back(d);
  }
  return out;
}

TEST(DeployComponents, RuntimeClassComponentNamesTheClassItCreates) {
  auto k = YAML::LoadFile(kSource + "/deploy/runtime-class/kustomization.yaml");
  EXPECT_EQ(k["kind"].as<std::string>(), "Component");
  ASSERT_EQ(k["resources"].size(), 1u);
  auto docs = Documents(kSource + "/deploy/runtime-class/" + k["resources"][0].as<std::string>());
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0]["apiVersion"].as<std::string>(), "node.k8s.io/v1");
  EXPECT_EQ(docs[0]["kind"].as<std::string>(), "RuntimeClass");
  const std::string name = docs[0]["metadata"]["name"].as<std::string>();
  // The DaemonSet patch names the same class, and targets the base's DaemonSet.
  auto patch = k["patches"][0];
  EXPECT_NE(patch["patch"].as<std::string>().find("value: " + name), std::string::npos);
  auto b = LoadDeploy(kSource + "/deploy");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(FindObject(*b, patch["target"]["kind"].as<std::string>(),
                         patch["target"]["name"].as<std::string>())
                  .IsMap());
}

TEST(DeployComponents, EveryServiceMonitorSelectsAServiceWithItsPort) {
  auto k = YAML::LoadFile(kSource + "/deploy/prometheus/kustomization.yaml");
  EXPECT_EQ(k["kind"].as<std::string>(), "Component");
  auto b = LoadDeploy(kSource + "/deploy");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  auto services = ObjectsOfKind(*b, "Service");
  int monitors = 0;
  for (const auto& file : k["resources"]) {
    for (const auto& sm : Documents(kSource + "/deploy/prometheus/" + file.as<std::string>())) {
      ASSERT_EQ(sm["kind"].as<std::string>(), "ServiceMonitor");
      ++monitors;
      const std::string who = sm["metadata"]["name"].as<std::string>();
      std::string ns = sm["spec"]["namespaceSelector"]["matchNames"][0].as<std::string>();
      for (const auto& ep : sm["spec"]["endpoints"]) {
        EXPECT_EQ(ep["scheme"].as<std::string>(), "http") << who;
        const std::string port = ep["port"].as<std::string>();
        int matched = 0;
        for (const auto& svc : services) {
          if (svc["metadata"]["namespace"].as<std::string>() != ns) continue;
          bool selected = true;
          for (const auto& kv : sm["spec"]["selector"]["matchLabels"]) {
            auto have = svc["metadata"]["labels"][kv.first.as<std::string>()];
            selected = selected && have && have.as<std::string>() == kv.second.as<std::string>();
          }
          if (!selected) continue;
          for (const auto& p : svc["spec"]["ports"]) {
            matched += p["name"] && p["name"].as<std::string>() == port;
          }
        }
        EXPECT_EQ(matched, 1) << who << ": port " << port << " of exactly one selected Service in "
                              << ns;
      }
    }
  }
  EXPECT_EQ(monitors, 2);
}

}  // namespace
}  // namespace fracgpu::deploytest
