// Kubeconfig / in-cluster configuration (the clock, stop signal and backoff:
// tests/base/clock_test.cc).
#include "k8s/config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace fracgpu::k8s {
namespace {

const char* kKubeconfig = R"(apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: c1
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority: ca.pem
- name: c2
  cluster:
    server: https://10.0.0.2:6443
    certificate-authority-data: aGVsbG8=
    insecure-skip-tls-verify: true
users:
- name: u1
  user:
    token: abc
- name: u2
  user:
    client-certificate-data: Y2VydA==
    client-key-data: a2V5
contexts:
- name: dev
  context: {cluster: c1, user: u1, namespace: ml}
- name: prod
  context: {cluster: c2, user: u2}
)";

TEST(KubeconfigTest, CurrentContext) {
  auto c = ParseKubeconfig(kKubeconfig, "/etc/kube");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://10.0.0.1:6443");
  EXPECT_EQ(c->ca_file, "/etc/kube/ca.pem");
  EXPECT_EQ(c->token, "abc");
  EXPECT_EQ(c->default_namespace, "ml");
  EXPECT_FALSE(c->insecure_skip_tls_verify);
}

TEST(KubeconfigTest, NamedContextWithInlineData) {
  auto c = ParseKubeconfig(kKubeconfig, "", "prod");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://10.0.0.2:6443");
  EXPECT_EQ(c->ca_data, "hello");
  EXPECT_EQ(c->client_cert_data, "cert");
  EXPECT_EQ(c->client_key_data, "key");
  EXPECT_TRUE(c->insecure_skip_tls_verify);
  EXPECT_EQ(c->default_namespace, "default");
}

TEST(KubeconfigTest, BadInputsNameTheProblem) {
  struct Case {
    std::string text, context, want;
  } cases[] = {
      {"a: [", "", "not valid YAML"},
      {"- 1\n- 2\n", "", "not a map"},
      {"clusters: []\n", "", "no current-context"},
      {kKubeconfig, "nope", "context \"nope\" not found"},
      {"current-context: x\ncontexts:\n- name: x\n  context: {cluster: missing}\n", "",
       "cluster \"missing\" not found"},
      {"current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n- name: c\n  "
       "cluster: {}\n",
       "", "has no server"},
      {"current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\nclusters:\n- "
       "name: c\n  cluster: {server: s}\n",
       "", "user \"u\" not found"},
      {"current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n- name: c\n  "
       "cluster: {server: s, certificate-authority-data: \"@@@\"}\n",
       "", "certificate-authority-data is not base64"},
  };
  for (const auto& c : cases) {
    auto r = ParseKubeconfig(c.text, "", c.context);
    ASSERT_FALSE(r.ok()) << c.want;
    SCOPED_TRACE(c.want);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.want;
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status().message();
  }
}

TEST(KubeconfigTest, MissingFileIsNotFound) {
  EXPECT_EQ(KubeconfigConfig("/nonexistent/kubeconfig").status().code(), StatusCode::kNotFound);
}

TEST(InClusterTest, ReadsServiceAccountFiles) {
  auto dir = std::filesystem::temp_directory_path() / ("fracgpu-sa-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "token") << "tok\n";
  std::ofstream(dir / "namespace") << "fracgpu-system";
  ::setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto c = InClusterConfig(dir.string());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://[fd00::1]:443");
  EXPECT_EQ(c->token, "tok");
  EXPECT_EQ(c->token_file, (dir / "token").string());
  EXPECT_EQ(c->ca_file, (dir / "ca.crt").string());
  EXPECT_EQ(c->default_namespace, "fracgpu-system");
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  EXPECT_EQ(InClusterConfig(dir.string()).status().code(), StatusCode::kNotFound);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fracgpu::k8s
