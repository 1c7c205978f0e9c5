"""A Kubeflow notebook from fracgpu's UI on the real cluster (docs/e2e.md "The real cluster"):
`fracgpu ui` (a host process of scripts/cluster.sh, with a token of fracgpu-ui and deploy/'s RBAC)
takes a create request with the kubeflow-userid header Kubeflow's gateway sets, asks the real API
server's SubjectAccessReview whether that user may create notebooks there, and creates the
Notebook under Kubeflow's CRD (tests/realcluster/kubeflow); Kubeflow's notebook controller turns
it into a StatefulSet, the real StatefulSet controller makes the pod, fracgpu's webhook routes it,
the real kube-scheduler + extender place it, the real kubelet starts it, and the container config
the CRI runtime received carries the slice.

THE NOTEBOOK CONTROLLER HERE IS A STAND-IN (tests/realcluster/notebook_controller.py, which says
why): Kubeflow's controller cannot be built on this machine. `NotebookControllerStandIn` does what
its Reconcile does for one Notebook, with a TokenRequest token of the controller's ServiceAccount
holding the RBAC Kubeflow's manifests give it, so the real API server checks it. Everything after
the StatefulSet is the real components'."""

import functools
import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from notebook_controller import CONTROLLER_SA, NotebookControllerStandIn, token_kubeconfig
from records import container_env

KUBEFLOW = Path(__file__).resolve().parent / "kubeflow"
NS = "team-nb"
ALICE = "alice@example.com"  # may create and list notebooks in NS (a RoleBinding below)
BOB = "bob@example.com"      # may do nothing there


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
    kc = token_kubeconfig(cluster.kubectl, cluster.kubeconfig, tmp_path / "controller.kubeconfig", *CONTROLLER_SA)
    ui = Ui((cluster.dir / "ui-url").read_text().strip())
    yield ui, NotebookControllerStandIn(functools.partial(cluster.kubectl, kubeconfig=kc))
    cluster.kubectl("delete", "-n", NS, "notebooks.kubeflow.org,statefulsets,services", "--all", "--wait=false")


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
    pod = cluster.wait(f"{NS}/{name}-0 Running", lambda: cluster.running(NS, name + "-0"), 120)
    assert pod["spec"]["schedulerName"] == "fracgpu-scheduler"
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "StatefulSet"
    assert pod["metadata"]["labels"]["notebook-name"] == name
    assert pod["metadata"]["labels"]["app"] == name  # the Notebook's labels are copied
    ann = pod["metadata"]["annotations"]
    node = pod["spec"]["nodeName"]
    assert ann.get("hami.io/vgpu-node") == node and ann.get("hami.io/bind-phase") == "success"
    rec = cluster.wait("the CRI record", lambda: cluster.record(node, NS, name + "-0", name), 30)
    env = container_env(rec)
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
