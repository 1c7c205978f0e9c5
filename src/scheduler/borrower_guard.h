#pragma once
// Whether the API server keeps a pod's borrower flag fixed after creation (docs/reclaim.md
// "Lending", the attack review's finding 1). A borrower (`fracgpu.io/borrower: "true"`) is
// placed on memory a parked owner lends and evicted when the owner wakes; the node agent finds
// the borrowers to evict by that live annotation. A tenant that could remove it after the bind
// would keep the owner's memory and leave the owner unable to wake. The rule that forbids it is
// the ValidatingAdmissionPolicy `fracgpu-pod-annotations` of deploy/admission-policy.yaml
// (admissionregistration.k8s.io/v1, GA since Kubernetes 1.30), evaluated by the API server for
// every user, with a binding in Deny mode. So the scheduler lends only while it sees that
// policy, with exactly the shipped borrower rule, and such a binding: without them a borrower
// is placed as an ordinary pod (never on lent memory). Fail closed: a missing, edited, narrowed
// or unreadable policy or binding turns lending off.

#include <atomic>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace fracgpu::scheduler {

/// metadata.name of the ValidatingAdmissionPolicy that fixes the borrower flag and of its
/// binding in deploy/admission-policy.yaml.
inline constexpr char kAnnotationPolicyName[] = "fracgpu-pod-annotations";

/// The borrower rule's CEL expression in deploy/admission-policy.yaml, its whitespace collapsed
/// (NormalizeCel): no one adds, removes or changes `fracgpu.io/borrower` on UPDATE.
inline constexpr char kBorrowerRuleExpression[] =
    "oldObject == null || (('fracgpu.io/borrower' in variables.newAnnotations) == "
    "('fracgpu.io/borrower' in variables.oldAnnotations) && (!('fracgpu.io/borrower' in "
    "variables.newAnnotations) || variables.newAnnotations['fracgpu.io/borrower'] == "
    "variables.oldAnnotations['fracgpu.io/borrower']))";
/// The policy's variables the rule reads, as in deploy/admission-policy.yaml (normalized).
inline constexpr char kNewAnnotationsExpression[] =
    "has(object.metadata.annotations) ? object.metadata.annotations : {}";
inline constexpr char kOldAnnotationsExpression[] =
    "oldObject != null && has(oldObject.metadata.annotations) ? oldObject.metadata.annotations "
    ": {}";

/// `expr` with every run of whitespace made one space and the ends trimmed (a YAML folded
/// scalar and a literal one then compare equal).
std::string NormalizeCel(const std::string& expr);

/// Ok when `policy` (a ValidatingAdmissionPolicy object as the API server returns it) is
/// kAnnotationPolicyName and enforces the borrower rule on every pod UPDATE: failurePolicy
/// absent or Fail; no paramKind, matchConditions, excludeResourceRules, namespaceSelector or
/// objectSelector that could narrow it; resource rules covering UPDATE of core/v1 pods and
/// pods/status (a status update keeps the request's metadata, so it could shed the flag); the
/// variables newAnnotations and oldAnnotations and a validation exactly as shipped.
/// Errors: kInvalidArgument naming the field and the value found.
Status CheckAnnotationPolicy(const nlohmann::json& policy);

/// Ok when `binding` (a ValidatingAdmissionPolicyBinding) binds kAnnotationPolicyName with
/// validationActions containing Deny and neither paramRef nor matchResources that narrow it.
/// Errors: kInvalidArgument naming the field and the value found.
Status CheckAnnotationPolicyBinding(const nlohmann::json& binding);

/// What the scheduler's informers saw of the policy and its bindings. Thread-safe: informer
/// threads call the Upsert/Remove methods, request threads Enforced().
class BorrowerGuard {
 public:
  void UpsertPolicy(const nlohmann::json& policy);
  void RemovePolicy(const nlohmann::json& policy);
  void UpsertBinding(const nlohmann::json& binding);
  void RemoveBinding(const nlohmann::json& binding);
  /// True while a valid policy and at least one valid binding of it are seen: only then may a
  /// borrower be placed on lent memory. One relaxed load.
  bool Enforced() const { return enforced_.load(std::memory_order_relaxed); }
  /// Why lending is off ("" while Enforced()): for the log and the scheduler's /metrics help.
  std::string WhyNot() const;

 private:
  void Update();  // with mu_ held

  mutable std::mutex mu_;
  Status policy_ =
      NotFound(std::string("ValidatingAdmissionPolicy ") + kAnnotationPolicyName + " not seen");
  std::map<std::string, Status> bindings_;  // by metadata.name
  std::atomic<bool> enforced_{false};
  std::string why_not_ =
      std::string("ValidatingAdmissionPolicy ") + kAnnotationPolicyName + " not seen";
};

}  // namespace fracgpu::scheduler
