"""STAND-IN for Kubeflow's notebook controller, on the local real cluster (scripts/cluster.sh):
used by test_notebook.py (one Reconcile at a time) and by `make sandbox` (scripts/sandbox.sh, through
tests/realcluster/sandbox.py: `run` reconciles every Notebook until stopped).

Kubeflow's controller cannot be built on this machine (the Go module proxy refuses
github.com/kubeflow/kubeflow/components/notebook-controller and
github.com/kubeflow/notebooks/components/notebook-controller, 403). `NotebookControllerStandIn`
does what its Reconcile does (kubeflow/notebooks components/notebook-controller/controllers/
notebook_controller.go: generateStatefulSet, generateService, createNotebookStatus) with a
TokenRequest token of the controller's ServiceAccount holding the RBAC Kubeflow's manifests give it
(tests/realcluster/kubeflow), so the real API server checks it. Everything after the StatefulSet
(the StatefulSet controller, fracgpu's webhook, the schedulers, the kubelet) is the real
components'."""

import copy
import json
import subprocess
import threading
from datetime import datetime, timezone

import yaml

# The controller's ServiceAccount in Kubeflow's manifests (tests/realcluster/kubeflow binds its RBAC).
CONTROLLER_SA = ("kubeflow", "notebook-controller-service-account")


def kubectl_runner(kubectl_bin, kubeconfig):
    """kubectl(*args, input=None, check=True, timeout=60) with `kubeconfig`: CompletedProcess (text);
    raises AssertionError on a non-zero exit if check (as conftest's Cluster.kubectl)."""
    def kubectl(*args, input=None, check=True, timeout=60):
        p = subprocess.run([str(kubectl_bin), "--kubeconfig", str(kubeconfig), *args], input=input,
                           capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} exit {p.returncode}: {p.stderr.strip()}")
        return p
    return kubectl


def token_kubeconfig(kubectl, admin_kubeconfig, path, namespace, sa):
    """A kubeconfig at `path` for the cluster of `admin_kubeconfig` with a TokenRequest token of
    namespace/sa (asked with `kubectl`, the admin's)."""
    token = kubectl("-n", namespace, "create", "token", sa, "--duration", "2h").stdout.strip()
    admin = yaml.safe_load(open(admin_kubeconfig).read())
    cfg = {"apiVersion": "v1", "kind": "Config", "clusters": admin["clusters"],
           "users": [{"name": sa, "user": {"token": token}}],
           "contexts": [{"name": "local", "context": {"cluster": admin["clusters"][0]["name"], "user": sa}}],
           "current-context": "local"}
    path.write_text(yaml.safe_dump(cfg))
    return path


class NotebookControllerStandIn:
    """STAND-IN for Kubeflow's notebook controller (see the module docstring): Reconcile of one
    Notebook as kubeflow/notebooks' controllers/notebook_controller.go does it; `kubectl` runs as
    the controller's own ServiceAccount (kubectl_runner with its token's kubeconfig)."""

    def __init__(self, kubectl):
        self.kubectl = kubectl

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

    def reconcile(self, ns, name, log=None):
        """One Reconcile of Notebook ns/name. Creates the StatefulSet and Service when missing and
        writes the status when it differs from the stored one (always when the Notebook has none).
        `log(line)`, when given, is told what was created and each new status."""
        nb = json.loads(self.kubectl("get", "-n", ns, "notebook.v1beta1.kubeflow.org", name, "-o", "json").stdout)
        if nb["metadata"].get("deletionTimestamp"):
            return
        for obj in (self.statefulset(nb), self.service(nb)):
            got = self.kubectl("get", "-n", ns, obj["kind"].lower(), name, check=False)
            if got.returncode != 0:
                self.kubectl("create", "-f", "-", input=json.dumps(obj))
                if log:
                    log(f"notebook controller (stand-in): Notebook {ns}/{name} → {obj['kind']} {ns}/{name}")
        sts = json.loads(self.kubectl("get", "-n", ns, "statefulset", name, "-o", "json").stdout)
        got = self.kubectl("get", "-n", ns, "pod", name + "-0", "-o", "json", check=False)
        pod = json.loads(got.stdout) if got.returncode == 0 else None
        status = self.status(nb, sts, pod)
        if "status" in nb and self.summary(nb["status"]) == self.summary(status):
            return
        nb["status"] = status
        # r.Status().Update(nb): the whole object, with its resourceVersion, to the status subresource.
        self.kubectl("replace", "--subresource=status", "-f", "-", input=json.dumps(nb))
        if log:
            log(f"notebook controller (stand-in): Notebook {ns}/{name} status: {self.summary(status)}")

    @staticmethod
    def summary(status):
        """What a status says, without its timestamps: readyReplicas, the container's state, the
        mirrored conditions."""
        state = ",".join(sorted((status.get("containerState") or {}).keys())) or "none"
        conds = " ".join(f"{c['type']}={c['status']}" for c in status.get("conditions") or [])
        return f"readyReplicas {status.get('readyReplicas', 0)}, container {state}, conditions [{conds}]"

    def run(self, stop: threading.Event, interval=1.0, log=None):
        """Reconciles every Notebook of the cluster each `interval` seconds until `stop` is set.
        A failed Reconcile (a conflict with a concurrent write, say) is logged and tried again on
        the next pass, as a controller's requeue does."""
        while not stop.is_set():
            got = self.kubectl("get", "notebooks.v1beta1.kubeflow.org", "-A", "-o", "json", check=False)
            items = json.loads(got.stdout)["items"] if got.returncode == 0 else []
            for nb in items:
                md = nb["metadata"]
                try:
                    self.reconcile(md["namespace"], md["name"], log)
                except (AssertionError, subprocess.TimeoutExpired) as e:
                    if log:
                        log(f"notebook controller (stand-in): Notebook {md['namespace']}/{md['name']}: {e} (retried)")
            stop.wait(interval)
