"""`helm install` of the chart deploy/helm/fracgpu brings the whole system up on the real
cluster (issue 34 item 8): scripts/cluster.sh up --helm installs the chart (helm built by
scripts/helm-build.sh) in place of deploy/, with tests/realcluster/helm-values.yaml (HAMi's value
names); the cluster's fracgpu processes then run with what the release made (their
ServiceAccounts and RBAC, the certificates the webhook configuration's caBundle gets, the device
config and the kube-scheduler config as applied). A GPU pod is admitted by the real API server's
call to the webhook the chart configured, scheduled by kube-scheduler with the extender config
the chart rendered, bound by the extender, and the kubelet's container config has its limits.
Then `helm upgrade` with a changed value goes through and keeps what `fracgpu certs` wrote.
The API server's audit log must show no refused request of fracgpu's accounts (conftest.py)."""

import os
import subprocess
from pathlib import Path

import yaml

from conftest import HELM_VALUES
from records import container_env

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "fracgpu"


def _helm(cluster, *args):
    h = (cluster.dir / "helm-bin").read_text().strip()
    d = str(cluster.dir / "helm")
    p = subprocess.run([h, *args, "--kubeconfig", str(cluster.kubeconfig), "--namespace", "default"],
                       capture_output=True, text=True, timeout=60,
                       env={**os.environ, "HELM_CACHE_HOME": d, "HELM_CONFIG_HOME": d, "HELM_DATA_HOME": d})
    assert p.returncode == 0, f"helm {' '.join(args)}: {p.stderr}"
    return p.stdout


def test_helm_install_brings_the_system_up(helm_cluster):
    cluster = helm_cluster
    with open(HELM_VALUES) as f:
        values = yaml.safe_load(f)

    # The release is deployed, and every object of its manifest is in the cluster, labelled by Helm.
    status = yaml.safe_load(_helm(cluster, "status", "fracgpu", "-o", "yaml"))
    assert status["info"]["status"] == "deployed", status["info"]
    manifest = [o for o in yaml.safe_load_all(_helm(cluster, "get", "manifest", "fracgpu")) if o]
    kinds = {(o["kind"], o["metadata"]["name"]) for o in manifest}
    for want in (("DaemonSet", "fracgpu-device-plugin"), ("Deployment", "fracgpu-scheduler"),
                 ("Deployment", "fracgpu-kube-scheduler"), ("Deployment", "fracgpu-ui"),
                 ("MutatingWebhookConfiguration", "fracgpu-webhook"), ("Job", "fracgpu-certs"),
                 ("ValidatingAdmissionPolicy", "fracgpu-pod-annotations"), ("Namespace", "fracgpu-system")):
        assert want in kinds, want
    for o in manifest:
        ns = o["metadata"].get("namespace")
        group = o["apiVersion"].rpartition("/")[0]
        resource = o["kind"].lower() + (f".{group}" if group else "")
        live = cluster.get(*(["-n", ns] if ns else []), resource, o["metadata"]["name"])
        assert live["metadata"]["labels"].get("app.kubernetes.io/managed-by") == "Helm", o["metadata"]["name"]

    # kube-scheduler's image follows the API server's version (scheduler.kubeScheduler.image.tag unset).
    version = yaml.safe_load(cluster.kubectl("get", "--raw", "/version").stdout)["gitVersion"]
    ks = cluster.get("-n", "fracgpu-system", "deployment", "fracgpu-kube-scheduler")
    assert ks["spec"]["template"]["spec"]["containers"][0]["image"] == f"registry.k8s.io/kube-scheduler:{version}"

    # The values reached the running system: the kube-scheduler config as applied (which the
    # cluster's kube-scheduler runs) and the device config (which the device plugin reads).
    ksc = yaml.safe_load(cluster.get("-n", "fracgpu-system", "configmap",
                                     "fracgpu-kube-scheduler-config")["data"]["config.yaml"])
    assert ksc["extenders"][0]["httpTimeout"] == f"{values['scheduler']['extenderHTTPTimeout']}s"
    node = "node-a"
    split = values["devicePlugin"]["deviceSplitCount"]
    gpus = cluster.node_gpus(node)
    alloc = cluster.wait(f"{node} allocatable nvidia.com/gpu",
                         lambda: cluster.get("node", node)["status"]["allocatable"].get("nvidia.com/gpu"), 30)
    assert int(alloc) == split * len(gpus), (alloc, split, gpus)

    # A GPU pod: admitted by the webhook (schedulerName set), placed by kube-scheduler with the
    # extender, bound, and run with its limit.
    ns, name = "default", "helm-gpu"
    cluster.kubectl("delete", "-n", ns, "pod", name, "--ignore-not-found", "--wait=true")
    cluster.apply(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "1d"],
                                 "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000",
                                                          "nvidia.com/gpucores": "30"}}}]}}))
    try:
        pod = cluster.wait(f"{ns}/{name} Running", lambda: cluster.running(ns, name), 90)
        assert pod["spec"]["schedulerName"] == "fracgpu-scheduler"
        ann = pod["metadata"]["annotations"]
        assert ann.get("hami.io/bind-phase") == "success", ann
        assert ann.get("fracgpu.io/allocation-signature"), ann
        assert pod["spec"]["nodeName"] == node
        rec = cluster.wait("the CRI record", lambda: cluster.record(node, ns, name, "main"), 30)
        env = container_env(rec)
        assert env["CUDA_DEVICE_MEMORY_LIMIT_0"] == "3000m", env
        assert env["CUDA_DEVICE_SM_LIMIT"] == "30", env
        assert env["NVIDIA_VISIBLE_DEVICES"] in dict(gpus), env
    finally:
        cluster.kubectl("delete", "-n", ns, "pod", name, "--ignore-not-found", "--wait=true", check=False)

    # helm upgrade with a changed value: revision 2 and the ConfigMap follows; the certificates Job
    # (an immutable template, unchanged) does not block it, and the webhook keeps the caBundle
    # `fracgpu certs` wrote, which the chart leaves unset.
    ca = cluster.get("mutatingwebhookconfiguration", "fracgpu-webhook")["webhooks"][0]["clientConfig"]["caBundle"]
    _helm(cluster, "upgrade", "fracgpu", str(CHART), "--reuse-values", "--set", "devicePlugin.deviceSplitCount=4")
    assert yaml.safe_load(_helm(cluster, "status", "fracgpu", "-o", "yaml"))["version"] == 2
    dc = yaml.safe_load(cluster.get("-n", "fracgpu-system", "configmap", "fracgpu-device-config")
                        ["data"]["device-config.yaml"])
    assert dc["nvidia"]["deviceSplitCount"] == 4, dc
    wh = cluster.get("mutatingwebhookconfiguration", "fracgpu-webhook")["webhooks"][0]["clientConfig"]
    assert wh.get("caBundle") == ca and ca, wh
