// The borrower flag's guard (borrower_guard.h). Field names: k8s.io/api admissionregistration/v1
// types.go (ValidatingAdmissionPolicySpec, MatchResources, NamedRuleWithOperations,
// ValidatingAdmissionPolicyBindingSpec).
#include "scheduler/borrower_guard.h"

#include <spdlog/spdlog.h>

#include <cctype>
#include <string_view>

namespace fracgpu::scheduler {
namespace {

using nlohmann::json;

const json* Field(const json& obj, const char* name) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(name);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

// The value as the error shows it: JSON text, cut at 200 bytes.
std::string Shown(const json& v) {
  std::string s = v.dump();
  return s.size() > 200 ? s.substr(0, 200) + "…" : s;
}

Status Bad(const std::string& field, const std::string& why) {
  return InvalidArgument(field + ": " + why);
}

// A label selector that selects everything: absent, or no matchLabels and no matchExpressions.
bool SelectsAll(const json* selector) {
  if (selector == nullptr) return true;
  if (!selector->is_object()) return false;
  const json* labels = Field(*selector, "matchLabels");
  const json* exprs = Field(*selector, "matchExpressions");
  return (labels == nullptr || (labels->is_object() && labels->empty())) &&
         (exprs == nullptr || (exprs->is_array() && exprs->empty()));
}

bool EmptyList(const json* v) { return v == nullptr || (v->is_array() && v->empty()); }

// Whether a rule's resources cover `resource` ("pods" or "pods/status"), as kube-apiserver
// matches them (NamedRuleWithOperations.resources): "*" is every resource but no subresource,
// "*/*" every resource and subresource, "pods/*" every subresource of pods, "*/status" the
// status subresource of every resource.
bool CoversResource(const json* list, std::string_view resource) {
  if (list == nullptr || !list->is_array()) return false;
  const size_t slash = resource.find('/');
  const std::string_view main = resource.substr(0, slash);
  const std::string_view sub = slash == std::string_view::npos ? "" : resource.substr(slash + 1);
  for (const auto& e : *list) {
    if (!e.is_string()) continue;
    const std::string& v = e.get_ref<const std::string&>();
    if (v == resource || v == "*/*") return true;
    if (sub.empty() && v == "*") return true;
    if (!sub.empty() && (v == std::string(main) + "/*" || v == "*/" + std::string(sub)))
      return true;
  }
  return false;
}

bool ListHas(const json* list, const char* value) {
  if (list == nullptr || !list->is_array()) return false;
  for (const auto& e : *list) {
    if (e.is_string() && (e == value || e == "*")) return true;
  }
  return false;
}

// MatchResources' narrowing fields (namespaceSelector, objectSelector, excludeResourceRules):
// none may narrow; `prefix` is the path for errors.
Status CheckNotNarrowed(const json& match, const std::string& prefix) {
  if (!SelectsAll(Field(match, "namespaceSelector")))
    return Bad(prefix + ".namespaceSelector",
               "selects " + Shown(match["namespaceSelector"]) + ", not every namespace");
  if (!SelectsAll(Field(match, "objectSelector")))
    return Bad(prefix + ".objectSelector",
               "selects " + Shown(match["objectSelector"]) + ", not every pod");
  if (!EmptyList(Field(match, "excludeResourceRules")))
    return Bad(prefix + ".excludeResourceRules",
               "excludes " + Shown(match["excludeResourceRules"]));
  return Status::Ok();
}

}  // namespace

std::string NormalizeCel(const std::string& expr) {
  std::string out;
  out.reserve(expr.size());
  bool space = false;
  for (char c : expr) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

Status CheckAnnotationPolicy(const json& policy) {
  const json* md = Field(policy, "metadata");
  const json* name = md ? Field(*md, "name") : nullptr;
  if (name == nullptr || *name != kAnnotationPolicyName)
    return Bad("metadata.name", name ? Shown(*name) : std::string("absent"));
  const json* spec = Field(policy, "spec");
  if (spec == nullptr || !spec->is_object()) return Bad("spec", "absent");
  if (const json* fp = Field(*spec, "failurePolicy"); fp != nullptr && *fp != "Fail")
    return Bad("spec.failurePolicy", Shown(*fp) + ", not \"Fail\"");
  if (Field(*spec, "paramKind") != nullptr)
    return Bad("spec.paramKind", Shown((*spec)["paramKind"]) + ": the rule must need no params");
  if (!EmptyList(Field(*spec, "matchConditions")))
    return Bad("spec.matchConditions",
               Shown((*spec)["matchConditions"]) + ": the rule must apply to every request");
  const json* match = Field(*spec, "matchConstraints");
  if (match == nullptr || !match->is_object()) return Bad("spec.matchConstraints", "absent");
  FRACGPU_RETURN_IF_ERROR(CheckNotNarrowed(*match, "spec.matchConstraints"));
  // Both pods and pods/status: the status subresource's strategy keeps the request's metadata
  // (kube-apiserver v1.37.2: a status patch removed the borrower flag on the local cluster),
  // so a rule on pods alone leaves the flag changeable through it.
  for (const char* resource : {"pods", "pods/status"}) {
    bool covers = false;
    if (const json* rules = Field(*match, "resourceRules"); rules && rules->is_array()) {
      for (const auto& r : *rules) {
        if (ListHas(Field(r, "apiGroups"), "") && ListHas(Field(r, "apiVersions"), "v1") &&
            ListHas(Field(r, "operations"), "UPDATE") &&
            CoversResource(Field(r, "resources"), resource) &&
            EmptyList(Field(r, "resourceNames")) &&
            // Pods are namespaced; kube-apiserver stores an absent scope as "*".
            (Field(r, "scope") == nullptr || (*Field(r, "scope") == "*") ||
             (*Field(r, "scope") == "Namespaced"))) {
          covers = true;
        }
      }
    }
    if (!covers)
      return Bad("spec.matchConstraints.resourceRules",
                 std::string("no rule covers UPDATE of core/v1 ") + resource +
                     " (every name, every scope)");
  }
  std::map<std::string, std::string> variables;
  if (const json* vars = Field(*spec, "variables"); vars && vars->is_array()) {
    for (const auto& v : *vars) {
      const json* n = Field(v, "name");
      const json* e = Field(v, "expression");
      if (n && n->is_string() && e && e->is_string())
        variables[n->get<std::string>()] = NormalizeCel(e->get<std::string>());
    }
  }
  for (const auto& [var, want] : {std::pair{"newAnnotations", kNewAnnotationsExpression},
                                  std::pair{"oldAnnotations", kOldAnnotationsExpression}}) {
    auto it = variables.find(var);
    if (it == variables.end()) return Bad(std::string("spec.variables.") + var, "absent");
    if (it->second != want)
      return Bad(std::string("spec.variables.") + var,
                 Shown(it->second) + ", not the shipped " + Shown(want));
  }
  if (const json* vals = Field(*spec, "validations"); vals && vals->is_array()) {
    for (const auto& v : *vals) {
      const json* e = Field(v, "expression");
      if (e && e->is_string() && NormalizeCel(e->get<std::string>()) == kBorrowerRuleExpression)
        return Status::Ok();
    }
  }
  return Bad("spec.validations",
             "no validation is the borrower rule (fracgpu.io/borrower fixed at creation) as "
             "shipped in deploy/admission-policy.yaml");
}

Status CheckAnnotationPolicyBinding(const json& binding) {
  const json* spec = Field(binding, "spec");
  if (spec == nullptr || !spec->is_object()) return Bad("spec", "absent");
  const json* policy = Field(*spec, "policyName");
  if (policy == nullptr || *policy != kAnnotationPolicyName)
    return Bad("spec.policyName", policy ? Shown(*policy) : std::string("absent"));
  const json* actions = Field(*spec, "validationActions");
  bool deny = false;
  if (actions != nullptr && actions->is_array()) {
    for (const auto& a : *actions) deny = deny || a == "Deny";  // no "*" among actions
  }
  if (!deny)
    return Bad("spec.validationActions",
               (actions ? Shown(*actions) : std::string("absent")) +
                   ": without Deny a violation is only warned or audited");
  if (Field(*spec, "paramRef") != nullptr)
    return Bad("spec.paramRef", Shown((*spec)["paramRef"]) + ": the rule takes no params");
  if (const json* match = Field(*spec, "matchResources")) {
    if (!match->is_object()) return Bad("spec.matchResources", Shown(*match));
    FRACGPU_RETURN_IF_ERROR(CheckNotNarrowed(*match, "spec.matchResources"));
    if (!EmptyList(Field(*match, "resourceRules")))
      return Bad("spec.matchResources.resourceRules",
                 Shown((*match)["resourceRules"]) + ": narrows the policy's own rules");
  }
  return Status::Ok();
}

void BorrowerGuard::UpsertPolicy(const json& policy) {
  std::lock_guard<std::mutex> lock(mu_);
  policy_ = CheckAnnotationPolicy(policy);
  if (!policy_.ok())
    policy_ = policy_.WithPrefix(std::string("ValidatingAdmissionPolicy ") + kAnnotationPolicyName);
  Update();
}

void BorrowerGuard::RemovePolicy(const json&) {
  std::lock_guard<std::mutex> lock(mu_);
  policy_ =
      NotFound(std::string("ValidatingAdmissionPolicy ") + kAnnotationPolicyName + " deleted");
  Update();
}

void BorrowerGuard::UpsertBinding(const json& binding) {
  const json* md = binding.is_object() ? &binding["metadata"] : nullptr;
  const std::string name = md && md->is_object() ? md->value("name", "") : "";
  std::lock_guard<std::mutex> lock(mu_);
  Status st = CheckAnnotationPolicyBinding(binding);
  if (!st.ok()) st = st.WithPrefix("ValidatingAdmissionPolicyBinding " + name);
  bindings_[name] = st;
  Update();
}

void BorrowerGuard::RemoveBinding(const json& binding) {
  const json* md = binding.is_object() ? &binding["metadata"] : nullptr;
  const std::string name = md && md->is_object() ? md->value("name", "") : "";
  std::lock_guard<std::mutex> lock(mu_);
  bindings_.erase(name);
  Update();
}

std::string BorrowerGuard::WhyNot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return why_not_;
}

void BorrowerGuard::Update() {
  std::string why;
  if (!policy_.ok()) {
    why = policy_.message();
  } else {
    bool bound = false;
    for (const auto& [name, st] : bindings_) {
      if (st.ok()) bound = true;
    }
    if (!bound) {
      why = std::string("no ValidatingAdmissionPolicyBinding of ") + kAnnotationPolicyName +
            " in Deny mode";
      for (const auto& [name, st] : bindings_) {
        if (!st.ok() && st.message().find(std::string("spec.policyName")) == std::string::npos)
          why += "; " + st.message();
      }
    }
  }
  const bool enforced = why.empty();
  if (enforced != enforced_.load(std::memory_order_relaxed) || why != why_not_) {
    if (enforced) {
      spdlog::info("lending on: the API server keeps fracgpu.io/borrower fixed ({} bound, Deny)",
                   kAnnotationPolicyName);
    } else {
      spdlog::warn("lending off: borrowers are placed as ordinary pods, never on lent memory: {}",
                   why);
    }
  }
  why_not_ = why;
  enforced_.store(enforced, std::memory_order_relaxed);
}

}  // namespace fracgpu::scheduler
