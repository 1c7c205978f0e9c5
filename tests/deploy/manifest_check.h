#pragma once
// The checker of deploy/ (tests/deploy): loads every manifest and reports every inconsistency
// between the objects, the binaries' real flags (each `fracgpu` subcommand's CLI11 definition,
// registered exactly as src/cli does) and docs/design/CONTRACT.md §1/§5. A report is a list of
// problems, each naming the file, the object and the field, so a test can assert both "the real
// manifests have none" and "this broken manifest gives that problem".

#include <yaml-cpp/yaml.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "manifest.h"  // fakes::YamlToJson (tests/fakes/apiserver)

namespace fracgpu::deploytest {

/// One YAML document of a manifest file.
struct Manifest {
  std::string file;  ///< file name within deploy/
  YAML::Node node;
};

/// The contents of deploy/.
struct Bundle {
  YAML::Node kustomization;
  std::vector<std::string> yaml_files;  ///< *.yaml directly in deploy/, kustomization.yaml excluded
  std::vector<Manifest> objects;        ///< every document of every file the kustomization lists
};

/// Reads `dir`/kustomization.yaml and every file it lists. Errors: kNotFound for a missing
/// file, kInvalidArgument for YAML that does not parse (message names the file).
Result<Bundle> LoadDeploy(const std::string& dir);

/// A deep copy (for tests that break one field).
Bundle CloneBundle(const Bundle& b);

/// The values of a `fracgpu <sub>` command line after CLI11 parsed it with the subcommand's
/// real definition: option long name ("--http-bind") → value given, or its default when the
/// definition captures one. Flags given appear with value "true".
struct ParsedArgs {
  std::string sub;
  std::map<std::string, std::string> values;
  std::string Get(const std::string& name) const {
    auto it = values.find(name);
    return it == values.end() ? "" : it->second;
  }
};

/// Parses `args` (args[0] = the subcommand, as in a container's `args:`) without running it.
/// Errors: kInvalidArgument with CLI11's message (unknown flag, bad value, no subcommand).
Result<ParsedArgs> ParseFracgpuArgs(const std::vector<std::string>& args);

/// Every problem of the bundle (empty = consistent). See manifest_check.cc for the list.
std::vector<std::string> Check(const Bundle& b);

/// The objects of kind `kind` (any namespace).
std::vector<YAML::Node> ObjectsOfKind(const Bundle& b, const std::string& kind);
/// The object of `kind` named `name` (namespace ignored), or an undefined node.
YAML::Node FindObject(const Bundle& b, const std::string& kind, const std::string& name);

/// An RBAC request: verb on group/resource[/subresource] (name optional) in namespace `ns`
/// ("" = cluster-scoped).
struct Access {
  std::string verb, group, resource, ns, name;
};
/// Whether the bundle's Roles/ClusterRoles bound to service account `ns`/`sa` allow `a`
/// (RBAC semantics: a rule matches when its apiGroups, resources and verbs contain the
/// request's, and its resourceNames are empty or contain the name; a Role only in its
/// namespace). `used` (optional) collects "<role>#<rule index>" of every matching rule.
bool Allowed(const Bundle& b, const std::string& ns, const std::string& sa, const Access& a,
             std::set<std::string>* used = nullptr);
/// "<role kind>/<role name>#<rule index>" of every rule bound to the service account.
std::set<std::string> RulesOf(const Bundle& b, const std::string& ns, const std::string& sa);

}  // namespace fracgpu::deploytest
