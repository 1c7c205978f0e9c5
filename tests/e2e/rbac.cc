#include "rbac.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

namespace fracgpu::e2e {
namespace {

namespace fs = std::filesystem;

bool Contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

std::vector<std::string> StringList(const YAML::Node& node, const std::string& field,
                                    const std::string& where, RbacPolicy* policy) {
  std::vector<std::string> out;
  if (!node[field]) return out;
  if (!node[field].IsSequence()) {
    policy->errors.push_back(where + ": " + field + " is not a list");
    return out;
  }
  for (const auto& item : node[field]) {
    if (!item.IsScalar()) {
      policy->errors.push_back(where + ": " + field + " has a non-string entry");
      continue;
    }
    out.push_back(item.as<std::string>());
  }
  return out;
}

std::string Scalar(const YAML::Node& node, const std::string& field) {
  return node && node.IsMap() && node[field] && node[field].IsScalar()
             ? node[field].as<std::string>()
             : "";
}

// "pods" or "pods/binding" for a record.
std::string ResourceOf(const fakes::AuditRecord& r) {
  return r.subresource.empty() ? r.resource : r.resource + "/" + r.subresource;
}

bool RuleAllows(const PolicyRule& rule, const fakes::AuditRecord& r) {
  if (!Contains(rule.api_groups, "*") && !Contains(rule.api_groups, r.api_group)) return false;
  if (!Contains(rule.verbs, "*") && !Contains(rule.verbs, r.verb)) return false;
  std::string res = ResourceOf(r);
  bool resource_ok = Contains(rule.resources, "*") || Contains(rule.resources, res) ||
                     (!r.subresource.empty() && Contains(rule.resources, r.resource + "/*")) ||
                     (!r.subresource.empty() && Contains(rule.resources, "*/" + r.subresource));
  if (!resource_ok) return false;
  // resourceNames cannot restrict list, watch or create of a collection (no name in the request).
  if (!rule.resource_names.empty() && (r.name.empty() || !Contains(rule.resource_names, r.name)))
    return false;
  return true;
}

const RbacRole* FindRole(const RbacPolicy& policy, const RbacBinding& b) {
  for (const auto& role : policy.roles) {
    if (role.kind != b.role_kind || role.name != b.role_name) continue;
    if (role.kind == "Role" && role.ns != b.ns) continue;
    return &role;
  }
  return nullptr;
}

// Whether a binding's grants reach a request in namespace `ns` ("" = cluster-scoped or all).
bool InScope(const RbacBinding& b, const std::string& ns) {
  return b.kind == "ClusterRoleBinding" || (!ns.empty() && ns == b.ns);
}

}  // namespace

bool Grant3::operator<(const Grant3& o) const {
  return std::tie(user, binding, role, resource, verb) <
         std::tie(o.user, o.binding, o.role, o.resource, o.verb);
}

std::string Describe(const fakes::AuditRecord& r) {
  std::string s = r.verb + " " + (r.api_group.empty() ? "core" : r.api_group) + "/" + ResourceOf(r);
  if (!r.ns.empty()) s += " ns=" + r.ns;
  return s;
}

void ParseRbacYaml(const std::string& text, const std::string& source, RbacPolicy* policy) {
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    policy->errors.push_back(source + ": not YAML: " + e.what());
    return;
  }
  int index = 0;
  for (const auto& doc : docs) {
    ++index;
    if (!doc || doc.IsNull()) continue;
    ++policy->documents;
    if (!doc.IsMap()) continue;
    std::string kind = Scalar(doc, "kind");
    std::string where = source + " document " + std::to_string(index) + " (" + kind + ")";
    if (kind != "Role" && kind != "ClusterRole" && kind != "RoleBinding" &&
        kind != "ClusterRoleBinding")
      continue;
    if (Scalar(doc, "apiVersion") != "rbac.authorization.k8s.io/v1") {
      policy->errors.push_back(where + ": apiVersion is \"" + Scalar(doc, "apiVersion") +
                               "\", want rbac.authorization.k8s.io/v1");
      continue;
    }
    YAML::Node md = doc["metadata"];
    std::string name = Scalar(md, "name"), ns = Scalar(md, "namespace");
    if (name.empty()) {
      policy->errors.push_back(where + ": metadata.name is missing");
      continue;
    }
    if ((kind == "Role" || kind == "RoleBinding") && ns.empty()) {
      // kustomize's `namespace:` fills it; without kustomize the object lands in "default".
      ns = "default";
    }
    if (kind == "Role" || kind == "ClusterRole") {
      RbacRole role{kind, name, kind == "Role" ? ns : "", {}, source};
      if (doc["aggregationRule"])
        policy->errors.push_back(where + ": aggregationRule is not audited");
      if (doc["rules"] && doc["rules"].IsSequence()) {
        for (const auto& r : doc["rules"]) {
          PolicyRule rule{
              StringList(r, "apiGroups", where, policy), StringList(r, "resources", where, policy),
              StringList(r, "verbs", where, policy), StringList(r, "resourceNames", where, policy)};
          if (r["nonResourceURLs"]) continue;  // not API objects
          if (rule.verbs.empty() || rule.resources.empty()) {
            policy->errors.push_back(where + ": a rule without verbs or resources");
          }
          role.rules.push_back(rule);
        }
      }
      policy->roles.push_back(role);
      continue;
    }
    RbacBinding b{kind, name, kind == "RoleBinding" ? ns : "", "", "", {}, source};
    YAML::Node ref = doc["roleRef"];
    b.role_kind = Scalar(ref, "kind");
    b.role_name = Scalar(ref, "name");
    if (b.role_name.empty() || (b.role_kind != "Role" && b.role_kind != "ClusterRole")) {
      policy->errors.push_back(where + ": roleRef must name a Role or ClusterRole");
      continue;
    }
    if (kind == "ClusterRoleBinding" && b.role_kind == "Role") {
      policy->errors.push_back(where + ": a ClusterRoleBinding cannot reference a Role");
      continue;
    }
    if (doc["subjects"] && doc["subjects"].IsSequence()) {
      for (const auto& s : doc["subjects"]) {
        std::string sk = Scalar(s, "kind"), sn = Scalar(s, "name"), sns = Scalar(s, "namespace");
        if (sk == "ServiceAccount") {
          if (sns.empty()) sns = kind == "RoleBinding" ? b.ns : "";
          if (sns.empty()) {
            policy->errors.push_back(where + ": ServiceAccount subject " + sn +
                                     " without namespace");
            continue;
          }
          b.users.push_back("system:serviceaccount:" + sns + ":" + sn);
        } else if (sk == "User") {
          b.users.push_back(sn);
        } else if (sk == "Group") {
          b.users.push_back("group:" + sn);
        }
      }
    }
    policy->bindings.push_back(b);
  }
}

std::vector<std::string> ManifestFiles(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> files;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    // A Helm chart (deploy/helm/fracgpu) holds Go templates, not YAML; it renders deploy/'s
    // objects (HelmChart.RendersDeployAndHamiValues checks that), so deploy/ alone is read.
    if (it->is_directory() && fs::exists(it->path() / "Chart.yaml")) {
      it.disable_recursion_pending();
      continue;
    }
    std::string ext = it->path().extension().string();
    if (it->is_regular_file() && (ext == ".yaml" || ext == ".yml"))
      files.push_back(it->path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

RbacPolicy LoadRbac(const std::string& dir) {
  RbacPolicy policy;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    policy.errors.push_back(dir + " is not a directory");
    return policy;
  }
  for (const auto& f : ManifestFiles(dir)) {
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    ++policy.files;
    ParseRbacYaml(ss.str(), f, &policy);
  }
  return policy;
}

bool Allows(const RbacPolicy& policy, const fakes::AuditRecord& record, std::string* why) {
  for (const auto& b : policy.bindings) {
    if (!Contains(b.users, record.user) || !InScope(b, record.ns)) continue;
    const RbacRole* role = FindRole(policy, b);
    if (role == nullptr) continue;
    for (const auto& rule : role->rules) {
      if (RuleAllows(rule, record)) return true;
    }
  }
  if (why != nullptr) {
    *why = record.user + " may not " + Describe(record) +
           " (no binding of this user in scope has a rule for it)";
  }
  return false;
}

std::vector<Grant3> UnusedGrants(const RbacPolicy& policy,
                                 const std::vector<fakes::AuditRecord>& records,
                                 const std::set<std::string>& users) {
  std::set<Grant3> unused;
  for (const auto& b : policy.bindings) {
    const RbacRole* role = FindRole(policy, b);
    for (const auto& user : b.users) {
      if (users.count(user) == 0) continue;
      if (role == nullptr) {
        unused.insert({user, b.kind + "/" + b.name, b.role_kind + "/" + b.role_name, "?",
                       "(role not defined in the manifests: cannot be audited)"});
        continue;
      }
      for (const auto& rule : role->rules) {
        for (const auto& group : rule.api_groups) {
          for (const auto& resource : rule.resources) {
            for (const auto& verb : rule.verbs) {
              std::string label = (group.empty() ? "core" : group) + "/" + resource;
              if (group == "*" || resource == "*" || verb == "*") {
                unused.insert({user, b.kind + "/" + b.name, role->kind + "/" + role->name, verb,
                               label + " (wildcard)"});
                continue;
              }
              PolicyRule single{{group}, {resource}, {verb}, rule.resource_names};
              bool used = false;
              for (const auto& r : records) {
                if (r.user != user || !InScope(b, r.ns)) continue;
                if (RuleAllows(single, r)) {
                  used = true;
                  break;
                }
              }
              if (!used)
                unused.insert(
                    {user, b.kind + "/" + b.name, role->kind + "/" + role->name, verb, label});
            }
          }
        }
      }
    }
  }
  return {unused.begin(), unused.end()};
}

}  // namespace fracgpu::e2e
