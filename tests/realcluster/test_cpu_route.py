"""Issue 34 item 7 on the real cluster: the extender reads node CPU from the API server (each
node's status.allocatable cpu less the requests of the pods bound there, GPU pods or not) and
places a fragmentation-aware GPU pod by FGD+CpuRoute, the simulator's policy, through the real
kube-scheduler. A CPU-only pod taking most of one node's CPU moves a CPU-heavy GPU pod off the
node FGD alone prefers; with node CPU unknown to the extender (or the pod's CPU 0) it would stay.

The setup, worked by hand (core/frag.h, core/fgd_policies.h; docs/simulate.md "Beyond FGD"):
a light pod L (1 GPU, gpucores 70 = 700 milli-GPU, no CPU) holds one GPU of node-a (2 GPUs), so
node-a's GPUs have 300 and 1000 milli-GPU left and node-b's one GPU 1000. The pod P asks 1 GPU at
gpucores 30 (300 milli) and CPU_MILLI. The target workload M is the cluster's GPU shapes plus
P's: {L, P}, each popularity 1/2.
  * FGD alone: on node-a P fills the 300 hole: F_n(M) goes from ½·300 (the hole L cannot use) to
    0, ΔF = −150; on node-b the GPU keeps 700, usable by both shapes, ΔF = 0. FGD picks node-a.
  * CpuRoute: M's CPU per milli-GPU r = (½·0 + ½·c) / (½·700 + ½·300) = c / 1000; P is CPU-heavy
    (c > r · 300); a node keeps its route when (cpu_left − c) − r · (GPU left − 300) ≥ 0: node-a
    needs cpu_left ≥ 2c, node-b cpu_left ≥ 1.7c. Routed nodes score 71 above any FGD score.
With both nodes routed P goes where FGD says (node-a); with a CPU-only pod taking HOG_MILLI of
node-a's CPU, node-a loses the route (and by the CPU cliff P's shape no longer fits beside P
there) and P goes to node-b."""

import json

from test_hostile import call, extender_url

CPU_MILLI = 600  # P's CPU request
HOG_MILLI = 1000  # the CPU-only pod's, on node-a
NODES = ("node-a", "node-b")


def _cores_milli(q):
    """A CPU quantity ("2", "250m") in millicores."""
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


def _pod_cpu(pod):
    """The pod's effective CPU request, millicores: the app containers' sum, or the largest init
    container's when larger (kube-scheduler's NodeResourcesFit; no sidecars here)."""
    def req(c):
        r = c.get("resources", {})
        q = r.get("requests", {}).get("cpu") or r.get("limits", {}).get("cpu")
        return _cores_milli(q) if q else 0
    apps = sum(req(c) for c in pod["spec"]["containers"])
    return max([apps] + [req(c) for c in pod["spec"].get("initContainers", [])])


def cpu_left(cluster):
    """Per node: status.allocatable cpu less the requests of the pods bound there that have not
    ended, millicores (read from the API server here, independently of the extender)."""
    left = {}
    for n in cluster.get("nodes")["items"]:
        left[n["metadata"]["name"]] = _cores_milli(n["status"]["allocatable"]["cpu"])
    for p in cluster.get("pods", "-A")["items"]:
        node = p["spec"].get("nodeName")
        if node in left and p["status"].get("phase") not in ("Succeeded", "Failed") \
                and not p["metadata"].get("deletionTimestamp"):
            left[node] -= _pod_cpu(p)
    return left


def routes(node, left, c=CPU_MILLI):
    """CpuRouteFirst for P on `node` (the module docstring's thresholds)."""
    return left[node] - c >= (c / 1000) * ((1300 if node == "node-a" else 1000) - 300)


def _pod(name, cores, node=None, cpu=None, policy=None):
    ctr = {"name": "c", "image": "busybox", "command": ["sleep", "3600"],
           "resources": {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000,
                                    "nvidia.com/gpucores": cores}}}
    if cpu:
        ctr["resources"]["requests"] = {"cpu": f"{cpu}m"}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "default", "labels": {"test": "cpu-route"}},
           "spec": {"containers": [ctr]}}
    if node:
        pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    if policy:
        pod["metadata"]["annotations"] = {"hami.io/gpu-scheduler-policy": policy}
    return pod


def _prioritize(cluster, pod):
    """The extender's /prioritize scores for `pod` over both nodes, called as kube-scheduler
    calls it (its client certificate): {node: score}."""
    ks = (str(cluster.dir / "pki" / "fracgpu-kube-scheduler-client.crt"),
          str(cluster.dir / "pki" / "fracgpu-kube-scheduler-client.key"))
    status, body = call(f"{extender_url(cluster)}/prioritize",
                        {"Pod": pod, "Nodes": None, "NodeNames": list(NODES)}, cert=ks)
    assert status == 200, (status, body)
    return {e["Host"]: e["Score"] for e in json.loads(body)}


def _run(cluster, pod):
    cluster.apply(json.dumps(pod))
    name = pod["metadata"]["name"]
    return cluster.wait(f"{name} Running", lambda: cluster.running("default", name), 120)


def test_a_cpu_hog_moves_a_cpu_heavy_gpu_pod_off_the_node_fgd_prefers(cluster):
    p_pod = _pod("route-p", 30, cpu=CPU_MILLI, policy="fragmentation-aware")
    try:
        light = _run(cluster, _pod("route-light", 70, node="node-a"))
        assert light["spec"]["nodeName"] == "node-a"
        # The cluster holds no other GPU pod (M is {L, P}): those of earlier tests are gone.
        cluster.wait("no GPU pod but route-light", lambda: [
            p["metadata"]["name"] for p in cluster.get("pods", "-A")["items"]
            if "hami.io/vgpu-devices-allocated" in p["metadata"].get("annotations", {})
            and p["status"].get("phase") not in ("Succeeded", "Failed")] == ["route-light"], 120)

        # Without the hog both nodes keep the route: FGD decides, node-a.
        left = cpu_left(cluster)
        assert routes("node-a", left) and routes("node-b", left), left
        assert _prioritize(cluster, p_pod) == {"node-a": 10, "node-b": 0}
        placed = _run(cluster, p_pod)
        assert placed["spec"]["nodeName"] == "node-a"
        cluster.kubectl("delete", "-n", "default", "pod", "route-p", "--wait=true", timeout=120)

        # The hog (no GPU: kube's default scheduler binds it) takes node-a's route away.
        hog = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "route-hog", "namespace": "default", "labels": {"test": "cpu-route"}},
               "spec": {"nodeSelector": {"kubernetes.io/hostname": "node-a"},
                        "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"],
                                        "resources": {"requests": {"cpu": f"{HOG_MILLI}m"}}}]}}
        _run(cluster, hog)
        left = cpu_left(cluster)
        assert not routes("node-a", left) and routes("node-b", left), left
        assert left["node-a"] >= CPU_MILLI, left  # P still fits node-a's CPU: no filter decides
        scores = cluster.wait("the extender scoring node-b first",
                              lambda: (s := _prioritize(cluster, p_pod))["node-b"] == 10 and s, 30)
        assert scores == {"node-a": 0, "node-b": 10}, scores
        # The same pod without its CPU request is not CPU-heavy: no route, FGD's node-a.
        no_cpu = _pod("route-p", 30, policy="fragmentation-aware")
        assert _prioritize(cluster, no_cpu) == {"node-a": 10, "node-b": 0}
        placed = _run(cluster, p_pod)
        assert placed["spec"]["nodeName"] == "node-b"
    finally:
        cluster.kubectl("delete", "-n", "default", "pod", "-l", "test=cpu-route", "--wait=true",
                        timeout=120)
