"""A Kubeflow notebook from fracgpu's UI on the real cluster (docs/e2e.md "The real cluster"):
`fracgpu ui` (a host process of scripts/cluster.sh, with a token of fracgpu-ui and deploy/'s RBAC)
takes a create request with the kubeflow-userid header Kubeflow's gateway sets, asks the real API
server's SubjectAccessReview whether that user may create notebooks there, and creates the
Notebook under Kubeflow's CRD (tests/realcluster/kubeflow); Kubeflow's notebook controller turns
it into a StatefulSet, the real StatefulSet controller makes the pod, fracgpu's webhook routes it,
the real kube-scheduler + extender place it, the real kubelet starts it, and the container config
the CRI runtime received carries the slice.

THE NOTEBOOK CONTROLLER HERE IS A STAND-IN: Kubeflow's controller cannot be built on this machine
(the Go module proxy refuses github.com/kubeflow/kubeflow/components/notebook-controller and
github.com/kubeflow/notebooks/components/notebook-controller, 403). `NotebookControllerStandIn`
does what its Reconcile does (kubeflow/notebooks components/notebook-controller/controllers/
notebook_controller.go: generateStatefulSet, generateService, createNotebookStatus) for one
Notebook, with a TokenRequest token of the controller's ServiceAccount holding the RBAC Kubeflow's
manifests give it, so the real API server checks it. Everything after the StatefulSet is the real
components'."""

import base64
import copy
import json
import urllib.error
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

KUBEFLOW = Path(__file__).resolve().parent / "kubeflow"
NS = "team-nb"
ALICE = "alice@example.com"  # may create and list notebooks in NS (a RoleBinding below)
BOB = "bob@example.com"      # may do nothing there
CONTROLLER_SA = ("kubeflow", "notebook-controller-service-account")


def env_of(record):
    """The container's environment (CRI KeyValue.value is bytes: base64 in the JSON record)."""
    return {e["key"]: base64.b64decode(e.get("value", "")).decode()
            for e in record["config"].get("envs", [])}


def token_kubeconfig(cluster, path, namespace, sa):
    """A kubeconfig for the cluster with a TokenRequest token of namespace/sa."""
    token = cluster.kubectl("-n", namespace, "create", "token", sa, "--duration", "2h").stdout.strip()
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    cfg = {"apiVersion": "v1", "kind": "Config", "clusters": admin["clusters"],
           "users": [{"name": sa, "user": {"token": token}}],
           "contexts": [{"name": "local", "context": {"cluster": admin["clusters"][0]["name"], "user": sa}}],
           "current-context": "local"}
    path.write_text(yaml.safe_dump(cfg))
    return path


class Ui:
    """fracgpu ui as scripts/cluster.sh runs it; `user` is sent as Kubeflow's gateway sends it."""

    def __init__(self, url):
        self.url = url

    def call(self, method, path, user=None, body=None):
        headers = {"Content-Type": "application/json"}
        if user:
            headers["kubeflow-userid"] = user
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")


class NotebookControllerStandIn:
    """STAND-IN for Kubeflow's notebook controller (see the module docstring): one Reconcile of one
    Notebook, as kubeflow/notebooks' controllers/notebook_controller.go does it, with the
    controller's own ServiceAccount token."""

    def __init__(self, cluster, kubeconfig):
        self.cluster = cluster
        self.kubeconfig = kubeconfig

    def kubectl(self, *args, **kw):
        return self.cluster.kubectl(*args, kubeconfig=self.kubeconfig, **kw)

    @staticmethod
    def owner(nb):
        # ctrl.SetControllerReference with the controller's scheme type, v1beta1.Notebook.
        return {"apiVersion": "kubeflow.org/v1beta1", "kind": "Notebook", "name": nb["metadata"]["name"],
                "uid": nb["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}

    @staticmethod
    def statefulset(nb):
        """generateStatefulSet."""
        md, name, ns = nb["metadata"], nb["metadata"]["name"], nb["metadata"]["namespace"]
        annotations = md.get("annotations", {})
        labels = {"statefulset": name, "notebook-name": name, **md.get("labels", {})}
        spec = copy.deepcopy(nb["spec"]["template"]["spec"])
        c = spec["containers"][0]
        c.setdefault("workingDir", "/home/jovyan")
        if c.get("ports") is None:
            c["ports"] = [{"containerPort": 8888, "name": "notebook-port", "protocol": "TCP"}]
        prefix = "/notebook/" + ns + "/" + name
        if not any(e["name"] == "NB_PREFIX" for e in c.get("env", [])):
            c.setdefault("env", []).append({"name": "NB_PREFIX", "value": prefix})
        spec.setdefault("securityContext", {"fsGroup": 100})  # ADD_FSGROUP unset: true
        return {
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": ns, "ownerReferences": [NotebookControllerStandIn.owner(nb)]},
            "spec": {
                "replicas": 0 if "kubeflow-resource-stopped" in annotations else 1,
                "selector": {"matchLabels": {"statefulset": name}},
                "template": {
                    "metadata": {"labels": labels,
                                 "annotations": {k: v for k, v in annotations.items()
                                                 if "kubectl" not in k and "notebook" not in k}},
                    "spec": spec},
            },
        }

    @staticmethod
    def service(nb):
        """generateService."""
        name, ns = nb["metadata"]["name"], nb["metadata"]["namespace"]
        ports = nb["spec"]["template"]["spec"]["containers"][0].get("ports")
        port = ports[0]["containerPort"] if ports else 8888
        return {"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": name, "namespace": ns, "ownerReferences": [NotebookControllerStandIn.owner(nb)]},
                "spec": {"type": "ClusterIP", "selector": {"statefulset": name},
                         "ports": [{"name": "http-" + name, "port": 80, "targetPort": port, "protocol": "TCP"}]}}

    @staticmethod
    def status(nb, sts, pod):
        """createNotebookStatus: readyReplicas from the StatefulSet, containerState from the pod's
        container named as the Notebook, conditions mirrored from the pod's."""
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        status = {"conditions": [], "readyReplicas": sts.get("status", {}).get("readyReplicas", 0),
                  "containerState": {}}
        ps = (pod or {}).get("status") or {}
        if not ps:
            return status
        for cs in ps.get("containerStatuses", []):
            if cs["name"] == nb["metadata"]["name"]:
                status["containerState"] = cs.get("state", {})
                break
        for c in ps.get("conditions", []):
            cond = {k: c[k] for k in ("type", "status", "message", "reason") if c.get(k)}
            cond["lastProbeTime"] = c.get("lastProbeTime") or now
            cond["lastTransitionTime"] = c.get("lastTransitionTime") or now
            status["conditions"].append(cond)
        return status

    def reconcile(self, ns, name):
        nb = json.loads(self.kubectl("get", "-n", ns, "notebook.v1beta1.kubeflow.org", name, "-o", "json").stdout)
        if nb["metadata"].get("deletionTimestamp"):
            return
        for obj in (self.statefulset(nb), self.service(nb)):
            got = self.kubectl("get", "-n", ns, obj["kind"].lower(), name, check=False)
            if got.returncode != 0:
                self.kubectl("create", "-f", "-", input=json.dumps(obj))
        sts = json.loads(self.kubectl("get", "-n", ns, "statefulset", name, "-o", "json").stdout)
        got = self.kubectl("get", "-n", ns, "pod", name + "-0", "-o", "json", check=False)
        pod = json.loads(got.stdout) if got.returncode == 0 else None
        nb["status"] = self.status(nb, sts, pod)
        # r.Status().Update(nb): the whole object, with its resourceVersion, to the status subresource.
        self.kubectl("replace", "--subresource=status", "-f", "-", input=json.dumps(nb))


@pytest.fixture
def kubeflow(cluster, tmp_path):
    """Kubeflow's CRD and the controller's RBAC applied; NS with alice's RoleBinding; the UI; the
    stand-in controller. (Function-scoped, as conftest's `cluster` may be brought up anew between
    tests; each test's notebooks are deleted after it.)"""
    cluster.kubectl("apply", "-k", str(KUBEFLOW), "--server-side", "--field-manager", "test-notebook")
    cluster.wait("notebooks.kubeflow.org Established", lambda: any(
        c["type"] == "Established" and c["status"] == "True"
        for c in (cluster.get("crd", "notebooks.kubeflow.org").get("status") or {}).get("conditions") or []), 30)
    cluster.wait("kubeflow.org/v1 notebooks served", lambda: "notebooks" in cluster.kubectl(
        "get", "--raw", "/apis/kubeflow.org/v1").stdout, 30)
    cluster.apply(json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}))
    # What a Kubeflow Profile gives its owner, reduced to notebooks: create and list them in NS.
    cluster.apply("\n---\n".join(json.dumps(o) for o in [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "notebook-editor", "namespace": NS},
         "rules": [{"apiGroups": ["kubeflow.org"], "resources": ["notebooks"],
                    "verbs": ["create", "list", "get"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "alice-notebooks", "namespace": NS},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "notebook-editor"},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": ALICE}]},
    ]))
    kc = token_kubeconfig(cluster, tmp_path / "controller.kubeconfig", *CONTROLLER_SA)
    ui = Ui((cluster.dir / "ui-url").read_text().strip())
    yield ui, NotebookControllerStandIn(cluster, kc)
    cluster.kubectl("delete", "-n", NS, "notebooks.kubeflow.org,statefulsets,services", "--all", "--wait=false")


def running(cluster, ns, pod):
    p = cluster.kubectl("get", "-n", ns, "pod", pod, "-o", "json", check=False)
    obj = json.loads(p.stdout) if p.returncode == 0 else None
    return obj if obj and obj["status"].get("phase") == "Running" else None


def form(name, **slice_):
    return {"name": name, "namespace": NS, "image": "jupyter:v1", "cpu": "1", "memory": "1Gi",
            "gpus": 1, "slice": slice_}


def test_notebook_from_the_ui_runs_with_its_slice(cluster, kubeflow):
    ui, controller = kubeflow
    name = "nb-slice"
    code, body = ui.call("POST", "/api/notebooks", ALICE, form(name, mode="memory", memory_value=3,
                                                                 memory_unit="GiB", cores_percent=30))
    assert code == 201, body
    nb = cluster.get("-n", NS, "notebook", name)
    limits = nb["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpumem"] == "3072" and limits["nvidia.com/gpucores"] == "30", limits

    controller.reconcile(NS, name)
    sts = cluster.get("-n", NS, "statefulset", name)
    assert sts["metadata"]["ownerReferences"][0]["uid"] == nb["metadata"]["uid"]
    # The real StatefulSet controller makes <name>-0; the real API server calls fracgpu's webhook.
    pod = cluster.wait(f"{NS}/{name}-0 Running", lambda: running(cluster, NS, name + "-0"), 120)
    assert pod["spec"]["schedulerName"] == "fracgpu-scheduler"
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "StatefulSet"
    assert pod["metadata"]["labels"]["notebook-name"] == name
    assert pod["metadata"]["labels"]["app"] == name  # the Notebook's labels are copied
    ann = pod["metadata"]["annotations"]
    node = pod["spec"]["nodeName"]
    assert ann.get("hami.io/vgpu-node") == node and ann.get("hami.io/bind-phase") == "success"
    rec = cluster.wait("the CRI record", lambda: cluster.record(node, NS, name + "-0", name), 30)
    env = env_of(rec)
    assert env["CUDA_DEVICE_MEMORY_LIMIT_0"] == "3072m"
    assert env["CUDA_DEVICE_SM_LIMIT"] == "30"
    assert env["NB_PREFIX"] == f"/notebook/{NS}/{name}"  # the controller's, through the real kubelet
    uuids = [d.rsplit(":", 1)[0] for d in (cluster.dir / "nodes" / node / "gpus").read_text().strip().split(",")]
    assert env["NVIDIA_VISIBLE_DEVICES"] in uuids
    assert env["NVIDIA_VISIBLE_DEVICES"] in ann["hami.io/vgpu-devices-allocated"]

    # Status as the controller writes it, read back by the UI.
    cluster.wait("StatefulSet readyReplicas 1", lambda: cluster.get("-n", NS, "statefulset", name)
                 .get("status", {}).get("readyReplicas") == 1, 60)
    controller.reconcile(NS, name)
    code, body = ui.call("GET", f"/api/notebooks?namespace={NS}", ALICE)
    assert code == 200, body
    mine = [n for n in body["notebooks"] if n["name"] == name]
    assert mine and mine[0]["state"] == "Ready", body
    assert mine[0]["limits"]["nvidia.com/gpumem"] == "3072"


def test_user_without_rbac_is_refused_with_the_reviews_answer(cluster, kubeflow):
    ui, _ = kubeflow
    name = "nb-bob"
    code, body = ui.call("POST", "/api/notebooks", BOB, form(name, mode="fraction", memory_percent=50))
    assert code == 403, body
    # The real API server's answer for bob, asked directly.
    sar = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
           "spec": {"user": BOB, "resourceAttributes": {"namespace": NS, "verb": "create",
                                                        "group": "kubeflow.org", "resource": "notebooks"}}}
    answer = json.loads(cluster.kubectl("create", "-o", "json", "-f", "-", input=json.dumps(sar)).stdout)["status"]
    assert answer["allowed"] is False
    want = f'user "{BOB}" may not create notebooks (kubeflow.org) in namespace "{NS}"'
    if answer.get("reason"):
        want += ": " + answer["reason"]
    assert body["error"] == want, body
    assert cluster.kubectl("get", "-n", NS, "notebook", name, check=False).returncode != 0
    assert cluster.kubectl("get", "-n", NS, "statefulset", name, check=False).returncode != 0
    # Listing too; and no header at all is no identity.
    assert ui.call("GET", f"/api/notebooks?namespace={NS}", BOB)[0] == 403
    assert ui.call("POST", "/api/notebooks", None, form(name, mode="fraction", memory_percent=50))[0] == 403
    # alice may create in NS only.
    code, body = ui.call("POST", "/api/notebooks", ALICE, {**form(name, mode="fraction", memory_percent=50),
                                                           "namespace": "default"})
    assert code == 403 and 'in namespace "default"' in body["error"], body


def test_fracgpu_ui_needs_exactly_the_rbac_deploy_ships(cluster, kubeflow):
    """Each API call the UI makes (docs/ui.md "Who may do what"), asked of the real authorizer for
    the ServiceAccount deploy/rbac.yaml binds; and nothing it does not need."""
    sa = "system:serviceaccount:fracgpu-system:fracgpu-ui"

    def can(*args):
        p = cluster.kubectl("auth", "can-i", *args, "--as", sa, check=False)
        return p.stdout.strip() == "yes"

    for args in [("create", "subjectaccessreviews.authorization.k8s.io"), ("list", "nodes"),
                 ("list", "pods", "-A"), ("create", "notebooks.kubeflow.org", "-n", NS),
                 ("list", "notebooks.kubeflow.org", "-n", NS)]:
        assert can(*args), f"fracgpu-ui may not {' '.join(args)}"
    for args in [("delete", "notebooks.kubeflow.org", "-n", NS), ("get", "secrets", "-n", "fracgpu-system"),
                 ("create", "pods", "-n", NS), ("update", "notebooks.kubeflow.org/status", "-n", NS)]:
        assert not can(*args), f"fracgpu-ui may {' '.join(args)}"
    # And the UI's own reads under that account work: the dashboard lists nodes and pods.
    code, body = kubeflow[0].call("GET", "/api/cluster")
    assert code == 200 and len(body["nodes"]) >= 2, body


def test_notebook_status_without_conditions_is_refused(cluster, kubeflow):
    """Kubeflow's CRD requires status.conditions, containerState and readyReplicas: a status
    without conditions (what tests/e2e's notebook controller wrote) is refused by the real API
    server."""
    ui, controller = kubeflow
    name = "nb-status"
    assert ui.call("POST", "/api/notebooks", ALICE, form(name, mode="memory", memory_value=1000,
                                                         memory_unit="MiB"))[0] == 201
    nb = cluster.get("-n", NS, "notebook", name)
    nb["status"] = {"readyReplicas": 0, "containerState": {"waiting": {"reason": "Unschedulable"}}}
    p = controller.kubectl("replace", "--subresource=status", "-f", "-", input=json.dumps(nb), check=False)
    assert p.returncode != 0 and "status.conditions: Required value" in p.stderr, p.stderr
    nb["status"]["conditions"] = []
    controller.kubectl("replace", "--subresource=status", "-f", "-", input=json.dumps(nb))
