#pragma once
// RBAC audit of the end-to-end run: reads the rbac.authorization.k8s.io/v1 objects (Role,
// ClusterRole, RoleBinding, ClusterRoleBinding) of every YAML document in a folder (yaml-cpp),
// decides whether each recorded API request is allowed the way the RBAC authorizer does
// (kubernetes.io/docs/reference/access-authn-authz/rbac/: apiGroups, resources including
// "<resource>/<subresource>", verbs, resourceNames, "*" wildcards; a RoleBinding grants only in
// its own namespace), and lists what a binding grants that no request used.
#include <set>
#include <string>
#include <vector>

#include "fake_apiserver.h"

namespace fracgpu::e2e {

/// One rule of a Role or ClusterRole.
struct PolicyRule {
  std::vector<std::string> api_groups, resources, verbs, resource_names;
};

/// A Role (namespaced) or ClusterRole.
struct RbacRole {
  std::string kind;  ///< "Role" | "ClusterRole"
  std::string name, ns;
  std::vector<PolicyRule> rules;
  std::string source;  ///< file it came from
};

/// A RoleBinding or ClusterRoleBinding.
struct RbacBinding {
  std::string kind;  ///< "RoleBinding" | "ClusterRoleBinding"
  std::string name, ns;
  std::string role_kind, role_name;
  std::vector<std::string> users;  ///< subjects as user names (service accounts expanded)
  std::string source;
};

/// Every RBAC object found, and the problems met while reading.
struct RbacPolicy {
  std::vector<RbacRole> roles;
  std::vector<RbacBinding> bindings;
  std::vector<std::string> errors;  ///< unreadable YAML, malformed objects (file and reason)
  int files = 0, documents = 0;
};

/// The YAML files (.yaml, .yml) under `dir`, sorted, leaving out Helm charts (a folder with a
/// Chart.yaml holds Go templates, not YAML); none when `dir` cannot be read.
std::vector<std::string> ManifestFiles(const std::string& dir);

/// Reads every file ManifestFiles(dir) names, every document of each.
RbacPolicy LoadRbac(const std::string& dir);
/// Parses YAML text (one or more documents) into `policy`; `source` names it in errors.
void ParseRbacYaml(const std::string& text, const std::string& source, RbacPolicy* policy);

/// Whether `policy` allows `record` for its user; when not, `why` says what was missing.
bool Allows(const RbacPolicy& policy, const fakes::AuditRecord& record, std::string* why = nullptr);

/// One grant: a verb on "<group>/<resource>[/<sub>]" (group "" = core) through a binding.
struct Grant3 {
  std::string user, binding, role, verb, resource;
  bool operator<(const Grant3& o) const;
};

/// Every verb × resource that the bindings of `users` grant and that no record of that user
/// (in the binding's scope) used; wildcard entries ("*") are reported as such.
std::vector<Grant3> UnusedGrants(const RbacPolicy& policy,
                                 const std::vector<fakes::AuditRecord>& records,
                                 const std::set<std::string>& users);

/// "verb group/resource[/sub] [ns=...]" for messages.
std::string Describe(const fakes::AuditRecord& record);

}  // namespace fracgpu::e2e
