"""Issue 33 on the real cluster: the scheduler's accounting is never lower than what pods hold,
and /bind refuses, even from kube-scheduler's own certificate, what kube-scheduler would never
ask (another scheduler's pod, a node failing the pod's predicates)."""

import json
import time

from test_hostile import call, extender_url

REGISTER = "hami.io/node-nvidia-register"


def gpu_pod(name, gpus, mem, node):
    return json.dumps({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"test": "accounting"}},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                 "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"],
                                 "resources": {"limits": {"nvidia.com/gpu": gpus,
                                                          "nvidia.com/gpumem": mem}}}]}})


def bound(cluster, name):
    return cluster.get("-n", "default", "pod", name)["spec"].get("nodeName")


def test_gpu_leaving_the_registration_keeps_its_pods_charges(cluster):
    """The issue's numbers: a 2 × 10,000 MiB pod on node-a's 2 × 16,384 MiB GPUs; GPU 1 leaves
    the register annotation (its device plugin stopped, the annotation edited); a 10,000 MiB pod
    pinned to node-a must not be placed on GPU 0, nor after GPU 1 returns; it runs once the first
    pod is gone."""
    c = cluster
    node = "node-a"
    assert [m for _, m in c.node_gpus(node)] == [16384, 16384]
    c.kubectl("delete", "-n", "default", "pod", "-l", "test=accounting", "--wait=true")
    stopped = False
    try:
        c.apply(gpu_pod("acct-two", 2, 10000, node))
        c.wait("acct-two Running", lambda: c.running("default", "acct-two"), 120)
        c.stop(f"device-plugin-{node}")
        stopped = True
        ann = c.get("node", node)["metadata"]["annotations"][REGISTER]
        gpus = json.loads(ann)
        assert len(gpus) == 2, ann
        kept = [g for g in gpus if g["id"] == c.node_gpus(node)[0][0]]
        c.kubectl("annotate", "node", node, "--overwrite", f"{REGISTER}={json.dumps(kept)}")
        c.apply(gpu_pod("acct-one", 1, 10000, node))
        time.sleep(8)  # several scheduling attempts by kube-scheduler with the extender
        assert not bound(c, "acct-one"), "placed on GPU 0 beside 10,000 MiB of 16,384"
        c.restart(f"device-plugin-{node}")  # GPU 1 registered again, with its charge
        stopped = False
        time.sleep(8)
        assert not bound(c, "acct-one"), "placed after GPU 1 returned"
        c.kubectl("delete", "-n", "default", "pod", "acct-two", "--wait=true", "--grace-period=0",
                  "--force")
        c.wait("acct-one Running once acct-two is gone", lambda: c.running("default", "acct-one"), 120)
    finally:
        if stopped:
            c.restart(f"device-plugin-{node}")
        c.kubectl("delete", "-n", "default", "pod", "-l", "test=accounting", "--wait=false")


def test_bind_from_kube_schedulers_certificate_still_checks_the_pod(cluster):
    """An authenticated caller (kube-scheduler's certificate) cannot bind a pod of another
    scheduler, nor a fracgpu pod to a node its nodeSelector excludes; both stay pending."""
    c = cluster
    url = extender_url(c)
    ks = (str(c.dir / "pki" / "fracgpu-kube-scheduler-client.crt"),
          str(c.dir / "pki" / "fracgpu-kube-scheduler-client.key"))
    c.kubectl("delete", "-n", "default", "pod", "-l", "test=accounting", "--wait=true")
    try:
        other = {"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": "acct-other", "namespace": "default", "labels": {"test": "accounting"}},
                 "spec": {"nodeSelector": {"no-such-label": "x"},
                          "containers": [{"name": "c", "image": "busybox"}]}}
        c.apply(json.dumps(other))
        # A fracgpu pod pinned to a node that does not exist: pending, and node-b fails it.
        c.apply(gpu_pod("acct-pinned", 1, 1000, "node-zz"))
        for name, node, want in (("acct-other", "node-a", "is not scheduled by fracgpu-scheduler"),
                                 ("acct-pinned", "node-b", "does not match spec.nodeSelector")):
            p = c.wait(f"{name} created", lambda: c.get("-n", "default", "pod", name))
            status, body = call(f"{url}/bind", {"PodName": name, "PodNamespace": "default",
                                                "PodUID": p["metadata"]["uid"], "Node": node}, cert=ks)
            assert status == 200, (status, body)
            assert want in json.loads(body).get("Error", ""), body
        time.sleep(2)
        for name in ("acct-other", "acct-pinned"):
            assert not bound(c, name), name
    finally:
        c.kubectl("delete", "-n", "default", "pod", "-l", "test=accounting", "--wait=false")
