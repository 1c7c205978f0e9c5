// The RBAC checker of the e2e audit (rbac.h), table-driven: which requests a small policy
// allows (decided by hand from the RBAC rules), what it grants unused, and malformed input.
#include "rbac.h"

#include <gtest/gtest.h>

namespace fracgpu::e2e {
namespace {

constexpr const char* kSa = "system:serviceaccount:fracgpu-system:fracgpu-scheduler";
constexpr const char* kOther = "system:serviceaccount:fracgpu-system:fracgpu-device-plugin";

constexpr const char* kPolicy = R"(
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: sched}
rules:
- apiGroups: [""]
  resources: ["pods", "nodes"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["pods/binding"]
  verbs: ["create"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: sched}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: sched}
subjects:
- {kind: ServiceAccount, name: fracgpu-scheduler, namespace: fracgpu-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: lease, namespace: fracgpu-system}
rules:
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "update"]
  resourceNames: ["fracgpu-scheduler"]
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["create"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: lease, namespace: fracgpu-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: lease}
subjects:
- {kind: ServiceAccount, name: fracgpu-scheduler}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: fracgpu-scheduler, namespace: fracgpu-system}
)";

fakes::AuditRecord Rec(std::string user, std::string verb, std::string group, std::string resource,
                       std::string sub = "", std::string ns = "", std::string name = "") {
  return {std::move(user), std::move(verb), std::move(group), std::move(resource),
          std::move(sub),  std::move(ns),   std::move(name),  200};
}

TEST(Rbac, DecidesLikeTheRbacAuthorizer) {
  RbacPolicy policy;
  ParseRbacYaml(kPolicy, "policy", &policy);
  ASSERT_TRUE(policy.errors.empty()) << policy.errors[0];
  ASSERT_EQ(policy.roles.size(), 2u);
  ASSERT_EQ(policy.bindings.size(), 2u);
  // The RoleBinding's ServiceAccount subject takes the binding's namespace.
  EXPECT_EQ(policy.bindings[1].users, std::vector<std::string>{kSa});
  struct Case {
    fakes::AuditRecord record;
    bool allowed;
  } cases[] = {
      {Rec(kSa, "get", "", "pods", "", "ml", "p"), true},
      {Rec(kSa, "watch", "", "nodes"), true},
      {Rec(kSa, "patch", "", "pods", "", "ml", "p"), false},  // verb not granted
      {Rec(kSa, "create", "", "pods", "binding", "ml", "p"), true},
      {Rec(kSa, "create", "", "pods", "status", "ml", "p"), false},  // other subresource
      {Rec(kSa, "get", "", "pods", "status", "ml", "p"),
       false},                                                  // "pods" does not cover pods/status
      {Rec(kSa, "get", "apps", "pods", "", "ml", "p"), false},  // other API group
      {Rec(kOther, "get", "", "pods", "", "ml", "p"), false},   // other service account
      {Rec(kSa, "get", "coordination.k8s.io", "leases", "", "fracgpu-system", "fracgpu-scheduler"),
       true},
      {Rec(kSa, "get", "coordination.k8s.io", "leases", "", "fracgpu-system", "other"),
       false},  // resourceNames
      {Rec(kSa, "create", "coordination.k8s.io", "leases", "", "fracgpu-system"), true},
      {Rec(kSa, "create", "coordination.k8s.io", "leases", "", "ml"),
       false},  // RoleBinding's namespace only
      {Rec(kSa, "update", "coordination.k8s.io", "leases", "", "", "fracgpu-scheduler"),
       false},  // cluster-wide
  };
  for (const auto& c : cases) {
    EXPECT_EQ(Allows(policy, c.record), c.allowed)
        << Describe(c.record) << " name=" << c.record.name;
  }
}

TEST(Rbac, ListsEveryGrantNoRequestUsed) {
  RbacPolicy policy;
  ParseRbacYaml(kPolicy, "policy", &policy);
  std::vector<fakes::AuditRecord> used = {
      Rec(kSa, "get", "", "pods", "", "ml", "p"), Rec(kSa, "list", "", "pods"),
      Rec(kSa, "watch", "", "pods"), Rec(kSa, "list", "", "nodes"), Rec(kSa, "watch", "", "nodes"),
      Rec(kSa, "create", "", "pods", "binding", "ml", "p"),
      Rec(kSa, "get", "coordination.k8s.io", "leases", "", "fracgpu-system", "fracgpu-scheduler"),
      // Outside the RoleBinding's namespace: does not count as using it.
      Rec(kSa, "create", "coordination.k8s.io", "leases", "", "ml"),
      Rec(kOther, "get", "", "nodes", "", "", "n"),  // another user's use does not count
  };
  auto unused = UnusedGrants(policy, used, {kSa});
  std::vector<std::string> got;
  for (const auto& g : unused) got.push_back(g.verb + " " + g.resource);
  // By hand: get nodes, update leases and create leases (in fracgpu-system) were never used.
  std::vector<std::string> want = {"create coordination.k8s.io/leases",
                                   "update coordination.k8s.io/leases", "get core/nodes"};
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
}

TEST(Rbac, WildcardsAndUndefinedRolesAreReported) {
  RbacPolicy policy;
  ParseRbacYaml(R"(
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: admin}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: fracgpu-scheduler, namespace: fracgpu-system}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: all}
rules: [{apiGroups: ["*"], resources: ["pods"], verbs: ["get"]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: all}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: all}
subjects: [{kind: ServiceAccount, name: fracgpu-scheduler, namespace: fracgpu-system}]
)",
                "p", &policy);
  ASSERT_TRUE(policy.errors.empty());
  EXPECT_TRUE(Allows(policy, Rec(kSa, "get", "anything.io", "pods", "", "ml", "x")));
  auto unused = UnusedGrants(policy, {Rec(kSa, "get", "", "pods", "", "ml", "x")}, {kSa});
  ASSERT_EQ(unused.size(), 2u);
  EXPECT_NE(unused[0].resource.find("cannot be audited"), std::string::npos);
  EXPECT_NE(unused[1].resource.find("wildcard"), std::string::npos);
}

TEST(Rbac, MalformedObjectsAreErrorsNamingTheDocument) {
  struct Case {
    const char* yaml;
    const char* error_part;
  } cases[] = {
      {"kind: ClusterRole\napiVersion: rbac.authorization.k8s.io/v1beta1\nmetadata: {name: x}\n",
       "apiVersion"},
      {"kind: ClusterRole\napiVersion: rbac.authorization.k8s.io/v1\nmetadata: {}\n",
       "metadata.name"},
      {"kind: ClusterRole\napiVersion: rbac.authorization.k8s.io/v1\nmetadata: {name: x}\nrules: "
       "[{apiGroups: "
       "[\"\"], resources: pods, verbs: [get]}]\n",
       "resources is not a list"},
      {"kind: ClusterRoleBinding\napiVersion: rbac.authorization.k8s.io/v1\nmetadata: {name: "
       "x}\nroleRef: {kind: "
       "Role, name: r}\n",
       "cannot reference a Role"},
      {"kind: ClusterRoleBinding\napiVersion: rbac.authorization.k8s.io/v1\nmetadata: {name: "
       "x}\nroleRef: {kind: "
       "ClusterRole, name: r}\nsubjects: [{kind: ServiceAccount, name: s}]\n",
       "without namespace"},
      {"kind: [unclosed\n", "not YAML"},
  };
  for (const auto& c : cases) {
    RbacPolicy policy;
    ParseRbacYaml(c.yaml, "file.yaml", &policy);
    ASSERT_FALSE(policy.errors.empty()) << c.yaml;
    EXPECT_NE(policy.errors[0].find(c.error_part), std::string::npos) << policy.errors[0];
    EXPECT_NE(policy.errors[0].find("file.yaml"), std::string::npos) << policy.errors[0];
  }
}

}  // namespace
}  // namespace fracgpu::e2e
