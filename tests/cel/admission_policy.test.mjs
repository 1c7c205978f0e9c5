// deploy/admission-policy.yaml's CEL, evaluated by @bufbuild/cel (a cel-spec evaluator) over
// a table of admission requests, as the API server evaluates a ValidatingAdmissionPolicy
// (admissionregistration.k8s.io/v1): `variables` in order (each may use the earlier ones),
// then every validation; the request is admitted when all are true. Bindings: object,
// oldObject (null on CREATE), request.userInfo.username. The policy uses only cel-spec
// standard functions and macros (in, has, all, filter, size, ==, !=, ||, &&, ?:), none of the
// Kubernetes CEL libraries, so nothing is left unevaluated here.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import { run, isCelError } from "@bufbuild/cel";

const here = fileURLToPath(new URL(".", import.meta.url));
const docs = parseAllDocuments(readFileSync(`${here}/../../deploy/admission-policy.yaml`, "utf8")).map((d) => d.toJS());
const policy = docs.find((d) => d.kind === "ValidatingAdmissionPolicy");
const binding = docs.find((d) => d.kind === "ValidatingAdmissionPolicyBinding");

const SCHED = "system:serviceaccount:fracgpu-system:fracgpu-scheduler";
const PLUGIN = "system:serviceaccount:fracgpu-system:fracgpu-device-plugin";
const TENANT = "alice";
const ALLOC = { "hami.io/vgpu-node": "node-a", "hami.io/vgpu-devices-allocated": "GPU-a0,NVIDIA,20000,0:;",
                "fracgpu.io/allocation-signature": "c2ln" };
const pod = (annotations, labels) => ({ metadata: { name: "p", namespace: "ml",
  ...(annotations ? { annotations } : {}), ...(labels ? { labels } : {}) } });
const OPT_OUT = { "hami.io/webhook": "ignore" };
const BORROWER = "fracgpu.io/borrower";

// [name, user, oldObject (null = CREATE), object, admitted?, failing validation index]
const cases = [
  ["tenant edits the allocation down (opted-out pod)", TENANT, pod(ALLOC, OPT_OUT),
   pod({ ...ALLOC, "hami.io/vgpu-devices-allocated": "GPU-a0,NVIDIA,1000,0:;" }, OPT_OUT), false, 0],
  ["tenant removes the signature", TENANT, pod(ALLOC), pod({ ...ALLOC, "fracgpu.io/allocation-signature": undefined }), false, 0],
  ["tenant removes every annotation", TENANT, pod(ALLOC), pod(null), false, 0],
  ["tenant creates a pod with a forged allocation", TENANT, null, pod(ALLOC, OPT_OUT), false, 0],
  ["tenant adds hami.io/bind-phase", TENANT, pod({}), pod({ "hami.io/bind-phase": "success" }), false, 0],
  ["tenant adds the opt-out label to an allocated pod", TENANT, pod(ALLOC), pod(ALLOC, OPT_OUT), false, 1],
  ["scheduler writes the decision", SCHED, pod({}), pod(ALLOC), true],
  ["device plugin writes bind-phase", PLUGIN, pod(ALLOC), pod({ ...ALLOC, "hami.io/bind-phase": "success" }), true],
  ["scheduler may label an allocated pod", SCHED, pod(ALLOC), pod(ALLOC, OPT_OUT), true],
  ["tenant changes an unrelated annotation", TENANT, pod(ALLOC), pod({ ...ALLOC, note: "x" }), true],
  ["tenant adds the opt-out label to a pod without allocation", TENANT, pod({ note: "x" }), pod({ note: "x" }, OPT_OUT), true],
  ["an opted-out allocated pod keeps its label", TENANT, pod(ALLOC, OPT_OUT), pod({ ...ALLOC, note: "y" }, OPT_OUT), true],
  ["tenant removes the borrower flag (opted-out pod)", TENANT, pod({ [BORROWER]: "true" }, OPT_OUT), pod({}, OPT_OUT), false, 2],
  ["tenant adds the borrower flag", TENANT, pod({ note: "x" }), pod({ note: "x", [BORROWER]: "true" }), false, 2],
  ["tenant changes the borrower flag", TENANT, pod({ [BORROWER]: "true" }), pod({ [BORROWER]: "false" }), false, 2],
  ["scheduler may not remove the borrower flag", SCHED, pod({ [BORROWER]: "true" }), pod({}), false, 2],
  ["tenant creates a borrower", TENANT, null, pod({ [BORROWER]: "true" }), true],
  ["a borrower keeps its flag through an update", TENANT, pod({ [BORROWER]: "true" }), pod({ [BORROWER]: "true", note: "y" }), true],
  // Rule 4: the device plugin's UPDATEs skip the webhook (deploy/webhook.yaml), so the policy alone
  // holds it to hami.io/vgpu-devices-to-allocate and hami.io/bind-phase.
  ["device plugin ends the allocation (bind-phase, to-allocate blanked)", PLUGIN,
   pod({ ...ALLOC, "hami.io/bind-phase": "allocating", "hami.io/vgpu-devices-to-allocate": "GPU-a0,NVIDIA,20000,0:;" }),
   pod({ ...ALLOC, "hami.io/bind-phase": "success", "hami.io/vgpu-devices-to-allocate": ";" }), true],
  ["device plugin removes bind-phase", PLUGIN, pod({ ...ALLOC, "hami.io/bind-phase": "failed" }), pod(ALLOC), true],
  ["device plugin raises the allocation", PLUGIN, pod(ALLOC),
   pod({ ...ALLOC, "hami.io/vgpu-devices-allocated": "GPU-a0,NVIDIA,80000,0:;" }), false, 3],
  ["device plugin removes the signature", PLUGIN, pod(ALLOC), pod({ ...ALLOC, "fracgpu.io/allocation-signature": undefined }), false, 3],
  ["device plugin moves the pod's node beside bind-phase", PLUGIN, pod(ALLOC),
   pod({ ...ALLOC, "hami.io/bind-phase": "success", "hami.io/vgpu-node": "node-b" }), false, 3],
  ["device plugin adds bind-time", PLUGIN, pod(ALLOC), pod({ ...ALLOC, "hami.io/bind-time": "1" }), false, 3],
  ["device plugin removes the borrower flag", PLUGIN, pod({ ...ALLOC, [BORROWER]: "true" }), pod(ALLOC), false, 2],
  ["device plugin creates a pod with a decision", PLUGIN, null, pod(ALLOC), false, 3],
  ["device plugin changes an unrelated annotation", PLUGIN, pod(ALLOC), pod({ ...ALLOC, note: "x" }), true],
  ["scheduler is not held to the device plugin's share", SCHED, pod({}), pod({ ...ALLOC, "hami.io/bind-time": "1" }), true],
  ["tenant creates a plain pod", TENANT, null, pod(null), true],
  ["tenant updates a pod without annotations or labels", TENANT, pod(null), pod(null, { app: "x" }), true],
];

function clean(o) {
  return o === null ? null : JSON.parse(JSON.stringify(o));  // drops undefined (= removed) keys
}

function evaluate(expr, bindings, what) {
  const r = run(expr, bindings);
  if (isCelError(r) || r instanceof Error) throw new Error(`${what}: ${expr}: ${r.message ?? String(r)}`);
  return r;
}

function admit(user, oldObject, object) {
  const bindings = { object: clean(object), oldObject: clean(oldObject), request: { userInfo: { username: user } } };
  const variables = {};
  for (const v of policy.spec.variables) {
    variables[v.name] = evaluate(v.expression, { ...bindings, variables }, `variable ${v.name}`);
  }
  return policy.spec.validations.map((v, i) => {
    const r = evaluate(v.expression, { ...bindings, variables }, `validation ${i}`);
    assert.equal(typeof r, "boolean", `validation ${i} must be boolean, got ${typeof r}`);
    return r;
  });
}

test("the policy is v1, fails closed, matches pod and pod status CREATE/UPDATE, and its binding denies", () => {
  assert.equal(policy.apiVersion, "admissionregistration.k8s.io/v1");
  assert.equal(policy.spec.failurePolicy, "Fail");
  const rule = policy.spec.matchConstraints.resourceRules[0];
  // pods/status too: a status update keeps the request's metadata (kube-apiserver v1.37.2).
  assert.deepEqual(rule.resources, ["pods", "pods/status"]);
  assert.deepEqual(rule.operations, ["CREATE", "UPDATE"]);
  assert.equal(policy.spec.matchConstraints.objectSelector, undefined, "no selector a tenant controls");
  assert.equal(binding.spec.policyName, policy.metadata.name);
  assert.deepEqual(binding.spec.validationActions, ["Deny"]);
});

for (const [name, user, oldObject, object, admitted, failing] of cases) {
  test(name, () => {
    const results = admit(user, oldObject, object);
    assert.equal(results.every(Boolean), admitted, `validations: ${JSON.stringify(results)}`);
    if (!admitted) assert.equal(results[failing], false, `validation ${failing} refuses it`);
  });
}

// deploy/webhook.yaml's matchConditions: the API server calls the webhook only when every one is
// true. fracgpu's own UPDATEs are not sent: the scheduler's (allowed by the webhook anyway) and
// the device plugin's (held by rules 1, 3 and 4 above); everyone's CREATE and a tenant's UPDATE are.
const webhook = parseAllDocuments(readFileSync(`${here}/../../deploy/webhook.yaml`, "utf8"))
  .map((d) => d.toJS()).find((d) => d.kind === "MutatingWebhookConfiguration").webhooks[0];
for (const [operation, user, sent] of [
  ["UPDATE", SCHED, false], ["UPDATE", PLUGIN, false], ["UPDATE", TENANT, true],
  ["UPDATE", "system:serviceaccount:fracgpu-system:fracgpu-ui", true],
  ["UPDATE", "system:serviceaccount:other:fracgpu-device-plugin", true],
  ["CREATE", PLUGIN, true], ["CREATE", SCHED, true], ["CREATE", TENANT, true]]) {
  test(`webhook: ${operation} by ${user} ${sent ? "is" : "is not"} sent`, () => {
    const results = webhook.matchConditions.map((m) =>
      evaluate(m.expression, { request: { operation, userInfo: { username: user } } }, `matchCondition ${m.name}`));
    assert.equal(results.every((r) => r === true), sent, JSON.stringify(results));
  });
}
