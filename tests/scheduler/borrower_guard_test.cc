// The borrower flag's guard (scheduler/borrower_guard.h): deploy/'s own ValidatingAdmissionPolicy
// and binding turn lending on; every way of weakening, narrowing or removing them turns it off,
// with an error naming the field.
#include "scheduler/borrower_guard.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "manifest.h"

namespace fracgpu::scheduler {
namespace {

using nlohmann::json;

// deploy/admission-policy.yaml as the API server stores it: {policy, binding}.
std::pair<json, json> Shipped() {
  json policy, binding;
  for (const json& obj :
       fakes::LoadManifest(std::string(FRACGPU_SOURCE_DIR) + "/deploy/admission-policy.yaml")) {
    if (obj.value("kind", "") == "ValidatingAdmissionPolicy") policy = obj;
    if (obj.value("kind", "") == "ValidatingAdmissionPolicyBinding") binding = obj;
  }
  return {policy, binding};
}

// The index in spec.validations of the borrower rule of the shipped policy.
size_t BorrowerRule(const json& policy) {
  const json& vals = policy["spec"]["validations"];
  for (size_t i = 0; i < vals.size(); ++i) {
    if (vals[i]["expression"].get<std::string>().find("fracgpu.io/borrower") != std::string::npos)
      return i;
  }
  ADD_FAILURE() << "no borrower rule in deploy/admission-policy.yaml";
  return 0;
}

TEST(BorrowerGuard, DeploysPolicyAndBindingAreAccepted) {
  auto [policy, binding] = Shipped();
  ASSERT_TRUE(policy.is_object());
  ASSERT_TRUE(binding.is_object());
  EXPECT_TRUE(CheckAnnotationPolicy(policy).ok()) << CheckAnnotationPolicy(policy).ToString();
  EXPECT_TRUE(CheckAnnotationPolicyBinding(binding).ok())
      << CheckAnnotationPolicyBinding(binding).ToString();
  // Wildcards that cover pods and pods/status (kube-apiserver's resource matching).
  for (const json& resources : {json{"*/*"}, json{"pods", "pods/*"}, json{"*", "*/status"},
                                json{"pods", "pods/status", "pods/log"}}) {
    json wide = policy;
    wide["spec"]["matchConstraints"]["resourceRules"][0]["resources"] = resources;
    EXPECT_TRUE(CheckAnnotationPolicy(wide).ok())
        << resources.dump() << ": " << CheckAnnotationPolicy(wide).ToString();
  }
  // The same rule written on one line, or as a literal block, is the same rule.
  size_t i = BorrowerRule(policy);
  std::string e = policy["spec"]["validations"][i]["expression"];
  std::string spread;
  for (char c : e) spread += (c == ' ' ? std::string("\n   ") : std::string(1, c));
  policy["spec"]["validations"][i]["expression"] = "  " + spread + "\n";
  EXPECT_TRUE(CheckAnnotationPolicy(policy).ok()) << CheckAnnotationPolicy(policy).ToString();
}

// deploy/'s objects as kube-apiserver v1.37.2 stored them (`kubectl get -o json` on the local
// cluster of scripts/cluster.sh, managedFields and server-set metadata left out): defaults filled
// in (failurePolicy Fail, matchPolicy Equivalent, empty selectors, scope "*"), the folded CEL
// text as YAML made it. The first version of the check refused scope "*", and lending stayed off
// on the real cluster (tests/realcluster/test_lend.py).
TEST(BorrowerGuard, KubeApiserversStoredFormIsAccepted) {
  std::ifstream in(std::string(FRACGPU_SOURCE_DIR) +
                   "/tests/scheduler/testdata/admission-policy-as-stored-v1.37.2.json");
  json stored = json::parse(in);
  ASSERT_EQ(stored.size(), 2u);
  ASSERT_EQ(stored[0]["spec"]["matchConstraints"]["resourceRules"][0]["scope"], "*");
  ASSERT_EQ(stored[0]["spec"]["matchConstraints"]["resourceRules"][0]["resources"],
            json::array({"pods", "pods/status"}));
  EXPECT_TRUE(CheckAnnotationPolicy(stored[0]).ok()) << CheckAnnotationPolicy(stored[0]).ToString();
  EXPECT_TRUE(CheckAnnotationPolicyBinding(stored[1]).ok())
      << CheckAnnotationPolicyBinding(stored[1]).ToString();
  BorrowerGuard g;
  g.UpsertPolicy(stored[0]);
  g.UpsertBinding(stored[1]);
  EXPECT_TRUE(g.Enforced()) << g.WhyNot();
  // Scope "Namespaced" covers pods too; "Cluster" does not.
  stored[0]["spec"]["matchConstraints"]["resourceRules"][0]["scope"] = "Namespaced";
  EXPECT_TRUE(CheckAnnotationPolicy(stored[0]).ok());
  stored[0]["spec"]["matchConstraints"]["resourceRules"][0]["scope"] = "Cluster";
  EXPECT_FALSE(CheckAnnotationPolicy(stored[0]).ok());
}

TEST(NormalizeCel, CollapsesAndTrimsWhitespace) {
  EXPECT_EQ(NormalizeCel("  a ==\n\t b  "), "a == b");
  EXPECT_EQ(NormalizeCel(""), "");
  EXPECT_EQ(NormalizeCel("x"), "x");
}

struct BadPolicy {
  std::string name;
  std::function<void(json&)> mutate;
  std::string field;  // the error names it
};

TEST(BorrowerGuard, EachWeakenedPolicyIsRefusedNamingTheField) {
  const std::vector<BadPolicy> cases = {
      {"another name", [](json& p) { p["metadata"]["name"] = "other"; }, "metadata.name"},
      {"fails open", [](json& p) { p["spec"]["failurePolicy"] = "Ignore"; }, "spec.failurePolicy"},
      {"needs params",
       [](json& p) {
         p["spec"]["paramKind"] = {{"apiVersion", "v1"}, {"kind", "ConfigMap"}};
       },
       "spec.paramKind"},
      {"a match condition",
       [](json& p) {
         p["spec"]["matchConditions"] = {{{"name", "x"}, {"expression", "false"}}};
       },
       "spec.matchConditions"},
      {"some namespaces",
       [](json& p) {
         p["spec"]["matchConstraints"]["namespaceSelector"] = {{"matchLabels", {{"a", "b"}}}};
       },
       "spec.matchConstraints.namespaceSelector"},
      {"some pods",
       [](json& p) {
         p["spec"]["matchConstraints"]["objectSelector"] = {
             {"matchExpressions", {{{"key", "a"}, {"operator", "Exists"}}}}};
       },
       "spec.matchConstraints.objectSelector"},
      {"pods excluded",
       [](json& p) {
         p["spec"]["matchConstraints"]["excludeResourceRules"] = {{{"apiGroups", {""}},
                                                                   {"apiVersions", {"v1"}},
                                                                   {"operations", {"UPDATE"}},
                                                                   {"resources", {"pods"}}}};
       },
       "spec.matchConstraints.excludeResourceRules"},
      {"CREATE only",
       [](json& p) {
         p["spec"]["matchConstraints"]["resourceRules"][0]["operations"] = {"CREATE"};
       },
       "spec.matchConstraints.resourceRules"},
      {"pods without pods/status",
       [](json& p) { p["spec"]["matchConstraints"]["resourceRules"][0]["resources"] = {"pods"}; },
       "spec.matchConstraints.resourceRules"},
      {"pods/status without pods",
       [](json& p) {
         p["spec"]["matchConstraints"]["resourceRules"][0]["resources"] = {"pods/status",
                                                                           "*/status"};
       },
       "spec.matchConstraints.resourceRules"},
      {"every resource but no subresource",
       [](json& p) { p["spec"]["matchConstraints"]["resourceRules"][0]["resources"] = {"*"}; },
       "spec.matchConstraints.resourceRules"},
      {"one pod name",
       [](json& p) { p["spec"]["matchConstraints"]["resourceRules"][0]["resourceNames"] = {"x"}; },
       "spec.matchConstraints.resourceRules"},
      {"newAnnotations redefined",
       [](json& p) {
         for (auto& v : p["spec"]["variables"])
           if (v["name"] == "newAnnotations") v["expression"] = "{}";
       },
       "spec.variables.newAnnotations"},
      {"oldAnnotations gone",
       [](json& p) {
         json kept = json::array();
         for (auto& v : p["spec"]["variables"])
           if (v["name"] != "oldAnnotations") kept.push_back(v);
         p["spec"]["variables"] = kept;
       },
       "spec.variables.oldAnnotations"},
      {"the rule removed", [](json& p) { p["spec"]["validations"].erase(BorrowerRule(p)); },
       "spec.validations"},
      {"the rule with an escape",
       [](json& p) {
         json& v = p["spec"]["validations"][BorrowerRule(p)];
         v["expression"] = "variables.fracgpu || " + v["expression"].get<std::string>();
       },
       "spec.validations"},
      {"no spec", [](json& p) { p.erase("spec"); }, "spec"},
  };
  for (const auto& c : cases) {
    json policy = Shipped().first;
    c.mutate(policy);
    Status st = CheckAnnotationPolicy(policy);
    EXPECT_FALSE(st.ok()) << c.name;
    EXPECT_EQ(st.message().rfind(c.field + ":", 0), 0u) << c.name << ": " << st.ToString();
  }
}

TEST(BorrowerGuard, EachWeakenedBindingIsRefusedNamingTheField) {
  const std::vector<BadPolicy> cases = {
      {"warn only",
       [](json& b) {
         b["spec"]["validationActions"] = {"Warn", "Audit"};
       },
       "spec.validationActions"},
      {"no actions", [](json& b) { b["spec"].erase("validationActions"); },
       "spec.validationActions"},
      {"another policy", [](json& b) { b["spec"]["policyName"] = "other"; }, "spec.policyName"},
      {"with params",
       [](json& b) {
         b["spec"]["paramRef"] = {{"name", "x"}};
       },
       "spec.paramRef"},
      {"some namespaces",
       [](json& b) {
         b["spec"]["matchResources"] = {{"namespaceSelector", {{"matchLabels", {{"a", "b"}}}}}};
       },
       "spec.matchResources.namespaceSelector"},
      {"narrower rules",
       [](json& b) {
         b["spec"]["matchResources"] = {{"resourceRules",
                                         {{{"apiGroups", {""}},
                                           {"apiVersions", {"v1"}},
                                           {"operations", {"CREATE"}},
                                           {"resources", {"pods"}}}}}};
       },
       "spec.matchResources.resourceRules"},
  };
  for (const auto& c : cases) {
    json binding = Shipped().second;
    c.mutate(binding);
    Status st = CheckAnnotationPolicyBinding(binding);
    EXPECT_FALSE(st.ok()) << c.name;
    EXPECT_EQ(st.message().rfind(c.field + ":", 0), 0u) << c.name << ": " << st.ToString();
  }
  // An empty matchResources narrows nothing.
  json binding = Shipped().second;
  binding["spec"]["matchResources"] = json::object();
  EXPECT_TRUE(CheckAnnotationPolicyBinding(binding).ok());
}

// Lending is on only while a valid policy and a valid binding of it are both seen.
TEST(BorrowerGuard, EnforcedOnlyWithBothAndOffAsSoonAsOneGoes) {
  auto [policy, binding] = Shipped();
  BorrowerGuard g;
  EXPECT_FALSE(g.Enforced());
  EXPECT_NE(g.WhyNot().find("not seen"), std::string::npos) << g.WhyNot();
  g.UpsertBinding(binding);
  EXPECT_FALSE(g.Enforced());
  g.UpsertPolicy(policy);
  EXPECT_TRUE(g.Enforced());
  EXPECT_EQ(g.WhyNot(), "");

  // The binding switched to Warn: off, and the reason says which field.
  json warn = binding;
  warn["spec"]["validationActions"] = {"Warn"};
  g.UpsertBinding(warn);
  EXPECT_FALSE(g.Enforced());
  EXPECT_NE(g.WhyNot().find("spec.validationActions"), std::string::npos) << g.WhyNot();
  // A second, valid binding of the policy under another name: on again.
  json second = binding;
  second["metadata"]["name"] = "second";
  g.UpsertBinding(second);
  EXPECT_TRUE(g.Enforced());
  g.RemoveBinding(second);
  EXPECT_FALSE(g.Enforced());
  g.UpsertBinding(binding);
  EXPECT_TRUE(g.Enforced());

  // The policy edited to fail open, then restored, then deleted.
  json open = policy;
  open["spec"]["failurePolicy"] = "Ignore";
  g.UpsertPolicy(open);
  EXPECT_FALSE(g.Enforced());
  EXPECT_NE(g.WhyNot().find("spec.failurePolicy"), std::string::npos) << g.WhyNot();
  g.UpsertPolicy(policy);
  EXPECT_TRUE(g.Enforced());
  g.RemovePolicy(policy);
  EXPECT_FALSE(g.Enforced());
  EXPECT_NE(g.WhyNot().find("deleted"), std::string::npos) << g.WhyNot();
}

}  // namespace
}  // namespace fracgpu::scheduler
