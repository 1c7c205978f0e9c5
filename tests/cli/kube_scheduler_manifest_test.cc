// `fracgpu kube-scheduler-manifest`: the image follows the cluster's version for every minor
// version 1.28 through 1.35, the rest of deploy/kube-scheduler.yaml is unchanged, and the
// kustomization's `images:` entry (the kubectl-only way) names the same image. With kubectl
// on the machine, `kubectl kustomize deploy/` is checked to render that entry too.

#include "cli/kube_scheduler_manifest.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "../support/files.h"

namespace fracgpu::cli {
namespace {

const std::string kDeploy = std::string(FRACGPU_SOURCE_DIR) + "/deploy/";

// The manifest's lines except the image line, to compare the rest verbatim.
std::string WithoutImage(const std::string& m) {
  std::istringstream in(m);
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.find("image: registry.k8s.io/kube-scheduler:") == std::string::npos)
      out += line + "\n";
  }
  return out;
}

TEST(KubeSchedulerManifest, BuiltInIsTheCommittedFile) {
  EXPECT_EQ(BuiltInKubeSchedulerManifest(),
            test_support::ReadWholeFile(kDeploy + "kube-scheduler.yaml"));
}

TEST(KubeSchedulerManifest, EveryTestedMinorGetsItsOwnImage) {
  const std::string base = BuiltInKubeSchedulerManifest();
  for (int minor = kOldestTestedMinor; minor <= kNewestTestedMinor; ++minor) {
    const std::string given = "v1." + std::to_string(minor) + ".3";
    SCOPED_TRACE(given);
    Result<KubeVersion> v = ParseServerVersion(given);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(*v, (KubeVersion{1, minor, 3}));
    Result<std::string> m = KubeSchedulerManifest(base, *v);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const std::string want = "        image: registry.k8s.io/kube-scheduler:" + given + "\n";
    EXPECT_NE(m->find(want), std::string::npos);
    EXPECT_EQ(WithoutImage(*m), WithoutImage(base));
    // The config API every one of these versions serves.
    EXPECT_NE(m->find("apiVersion: kubescheduler.config.k8s.io/v1\n"), std::string::npos);
  }
  EXPECT_EQ(kNewestTestedMinor - kOldestTestedMinor + 1, 8);  // 1.28 … 1.35
}

TEST(KubeSchedulerManifest, VersionForms) {
  struct Case {
    std::string in;
    KubeVersion want;
  };
  for (
      const Case& c : {
          Case{"1.31", {1, 31, -1}},
          Case{"v1.30.4-eks-a737599", {1, 30, 4}},
          Case{"v1.29.3+k3s1", {1, 29, 3}},
          Case{" v1.33.0\n", {1, 33, 0}},
          // `kubectl get --raw /version`
          Case{R"({"major":"1","minor":"32","gitVersion":"v1.32.2","platform":"linux/amd64"})",
               {1, 32, 2}},
          // `kubectl version -o json`
          Case{
              R"({"clientVersion":{"gitVersion":"v1.35.0"},"serverVersion":{"gitVersion":"v1.28.15-gke.100"}})",
              {1, 28, 15}},
      }) {
    SCOPED_TRACE(c.in);
    Result<KubeVersion> v = ParseServerVersion(c.in);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(*v, c.want);
  }
  EXPECT_EQ(KubeSchedulerImage({1, 31, -1}), "registry.k8s.io/kube-scheduler:v1.31.0");
}

TEST(KubeSchedulerManifest, BadVersionsSayWhy) {
  for (const char* bad :
       {"", "latest", "v1", "v1.x", "1.30.4.5", "v1.30 beta", "{\"major\":\"1\"}", "{"}) {
    SCOPED_TRACE(bad);
    Result<KubeVersion> v = ParseServerVersion(bad);
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(ParseServerVersion("latest").status().message(),
            "server version \"latest\" is not a Kubernetes version (want v1.31.2, 1.31, a vendor "
            "build like "
            "v1.30.4-eks-…, or the JSON of `kubectl get --raw /version`)");
  Result<std::string> old = KubeSchedulerManifest(BuiltInKubeSchedulerManifest(), {1, 24, 0});
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.status().message(),
            "Kubernetes 1.24 is not supported: the kube-scheduler config is "
            "kubescheduler.config.k8s.io/v1, which "
            "needs 1.25 or newer");
  EXPECT_FALSE(KubeSchedulerManifest("kind: Deployment\n", {1, 30, 0}).ok());
  EXPECT_FALSE(ParseServerVersion(std::string(70000, '1')).ok());
}

// The kubectl-only way: deploy/kustomization.yaml's images: entry sets the kube-scheduler tag.
TEST(KubeSchedulerManifest, KustomizationHasAnImagesEntryForKubeScheduler) {
  const std::string k = test_support::ReadWholeFile(kDeploy + "kustomization.yaml");
  const size_t at = k.find("- name: registry.k8s.io/kube-scheduler\n");
  ASSERT_NE(at, std::string::npos) << k;
  const size_t tag = k.find("  newTag: v1.", at);
  ASSERT_NE(tag, std::string::npos);
  const std::string value = k.substr(tag + 10, k.find('\n', tag) - tag - 10);
  Result<KubeVersion> v = ParseServerVersion(value);
  ASSERT_TRUE(v.ok()) << value;
  EXPECT_GE(v->minor, kOldestTestedMinor);
  EXPECT_LE(v->minor, kNewestTestedMinor);

  // With kubectl here (not on CI), its built-in kustomize must render that tag.
  if (std::system("kubectl version --client >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "kubectl not installed";
  std::string cmd = "kubectl kustomize " + kDeploy + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ASSERT_EQ(pclose(p), 0) << out;
  EXPECT_NE(out.find("image: " + KubeSchedulerImage(*v) + "\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace fracgpu::cli
