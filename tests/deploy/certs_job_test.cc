// The install Job's exact `fracgpu certs` command line (deploy/certs.yaml), run against the fake
// API server holding deploy/webhook.yaml's configuration: the Secret, its SANs (the names the
// API server and kube-scheduler dial), the caBundle, and every API call it makes allowed by
// deploy/rbac.yaml for its service account, with no rule of that account left unused.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>

#include "certs/pki.h"
#include "fake_apiserver.h"
#include "manifest_check.h"
#include "webhook_front.h"

namespace fracgpu::cli {
void RegisterCertsCommand(CLI::App& app);
}

namespace fracgpu::deploytest {
namespace {

using nlohmann::json;

class CertsJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto b = LoadDeploy(std::string(FRACGPU_SOURCE_DIR) + "/deploy");
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    bundle_ = *b;
    YAML::Node job = FindObject(bundle_, "Job", "fracgpu-certs");
    ASSERT_TRUE(job.IsDefined());
    const YAML::Node spec = job["spec"]["template"]["spec"];
    sa_ = spec["serviceAccountName"].as<std::string>();
    ns_ = job["metadata"]["namespace"].as<std::string>();
    for (const auto& a : spec["containers"][0]["args"]) args_.push_back(a.as<std::string>());
    front_.PutConfig(
        fakes::YamlToJson(FindObject(bundle_, "MutatingWebhookConfiguration", "fracgpu-webhook")));
    kubeconfig_ = std::filesystem::temp_directory_path() /
                  ("deploy-certs-" + std::to_string(::getpid()) + ".yaml");
    std::ofstream(kubeconfig_)
        << "apiVersion: v1\nkind: Config\nclusters:\n- name: f\n  cluster:\n    server: "
        << front_.url()
        << "\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: c\n  context:\n"
           "    cluster: f\n    user: u\ncurrent-context: c\n";
  }
  void TearDown() override { std::filesystem::remove(kubeconfig_); }

  int RunJob() {
    CLI::App app{"fracgpu"};
    app.require_subcommand(1);
    cli::RegisterCertsCommand(app);
    std::vector<std::string> args = args_;
    args.push_back("--kubeconfig=" + kubeconfig_.string());
    std::reverse(args.begin(), args.end());
    try {
      app.parse(args);
    } catch (const CLI::Error& e) {
      return e.get_exit_code() == 0 ? -1 : e.get_exit_code();
    }
    return 0;
  }

  Bundle bundle_;
  std::string sa_, ns_;
  std::vector<std::string> args_;
  fakes::FakeApiServer fake_;
  certs::testing::WebhookFront front_{fake_};
  std::filesystem::path kubeconfig_;
};

TEST_F(CertsJobTest, JobCommandLineMakesWhatTheOtherManifestsMount) {
  ASSERT_EQ(RunJob(), 0);
  auto secret = front_.Secret(ns_, "fracgpu-scheduler-tls");
  ASSERT_TRUE(secret.has_value());
  std::string crt = *certs::Base64Decode((*secret)["data"]["tls.crt"]);
  std::string ca = *certs::Base64Decode((*secret)["data"]["ca.crt"]);
  EXPECT_TRUE(certs::VerifyIssuedBy(crt, ca, std::time(nullptr)).ok());
  auto info = certs::InspectCert(crt);
  ASSERT_TRUE(info.ok());
  // The API server dials <service>.<namespace>.svc (webhook clientConfig.service); kube-scheduler
  // dials the host of the extender's urlPrefix.
  YAML::Node hook =
      FindObject(bundle_, "MutatingWebhookConfiguration", "fracgpu-webhook")["webhooks"][0];
  std::string svc_host = hook["clientConfig"]["service"]["name"].as<std::string>() + "." +
                         hook["clientConfig"]["service"]["namespace"].as<std::string>() + ".svc";
  EXPECT_NE(std::find(info->dns_names.begin(), info->dns_names.end(), svc_host),
            info->dns_names.end())
      << svc_host;
  YAML::Node ksc = YAML::Load(
      FindObject(bundle_, "ConfigMap", "fracgpu-kube-scheduler-config")["data"]["config.yaml"]
          .as<std::string>());
  std::string url = ksc["extenders"][0]["urlPrefix"].as<std::string>();  // https://host:port
  std::string host = url.substr(8, url.rfind(':') - 8);
  EXPECT_NE(std::find(info->dns_names.begin(), info->dns_names.end(), host), info->dns_names.end())
      << host;
  // Every webhook of the configuration trusts the CA.
  const json config = front_.Config("fracgpu-webhook").value_or(json::object());
  for (const auto& w : config.value("webhooks", json::array())) {
    EXPECT_EQ(*certs::Base64Decode(w["clientConfig"]["caBundle"].get<std::string>()), ca);
  }
  auto key = front_.Secret(ns_, "fracgpu-signing-key");
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(certs::Base64Decode((*key)["data"]["key"])->size(), 64u);
}

TEST_F(CertsJobTest, EveryCallIsAllowedByRbacAndEveryRuleIsUsed) {
  ASSERT_EQ(RunJob(), 0);  // install: creates
  ASSERT_EQ(RunJob(), 0);  // rerun: reads only
  // A damaged Secret: the next run updates it.
  json damaged = *front_.Secret(ns_, "fracgpu-scheduler-tls");
  damaged["data"].erase("tls.crt");
  front_.PutSecret(damaged);
  ASSERT_EQ(RunJob(), 0);
  std::set<std::string> used;
  const std::string secrets_prefix = "/api/v1/namespaces/" + ns_ + "/secrets";
  const std::string hooks_prefix =
      "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/";
  for (const auto& [method, path] : front_.requests()) {
    Access a;
    if (path.rfind(secrets_prefix, 0) == 0) {
      a = {"", "", "secrets", ns_,
           path.size() > secrets_prefix.size() ? path.substr(secrets_prefix.size() + 1) : ""};
    } else if (path.rfind(hooks_prefix, 0) == 0) {
      a = {"", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "",
           path.substr(hooks_prefix.size())};
    } else {
      ADD_FAILURE() << "unexpected call " << method << " " << path;
      continue;
    }
    a.verb = method == "GET"     ? "get"
             : method == "POST"  ? "create"
             : method == "PUT"   ? "update"
             : method == "PATCH" ? "patch"
                                 : "?";
    EXPECT_TRUE(Allowed(bundle_, ns_, sa_, a, &used))
        << method << " " << path << " is not allowed for " << sa_;
  }
  EXPECT_EQ(used, RulesOf(bundle_, ns_, sa_)) << "a rule of " << sa_ << " was never needed";
}

}  // namespace
}  // namespace fracgpu::deploytest
