"""Issue 34 on the real cluster: the GPU link scores the device plugin reads from NVML
(hami.io/node-nvidia-score, docs/device-plugin.md) reach the Node object through the real API
server, and the topology-aware policy (HAMi's pod annotation hami.io/gpu-scheduler-policy:
topology-aware) puts a 2-GPU pod on the linked pair through the real kube-scheduler, the
extender's /bind, the kubelet's Allocate and the CRI runtime; the same pod under binpack lands on
another pair (so the placement is the links' doing)."""

import json

from records import container_env
from test_hostile import call, extender_url

NODE = "node-a"  # scripts/cluster.sh: 2 GPUs of 16384 MiB; this test gives it 4 for a while
SCORE = "hami.io/node-nvidia-score"
REGISTER = "hami.io/node-nvidia-register"
# The fake NVML's box (tests/fakes/nvml/fake_nvml.cc): GPUs 1 and 3 joined by 4 NVLinks, the rest
# on PCIe, one CPU socket. Neither the first two GPUs (0 + 1) nor any neighbours are the pair.
TOPOLOGY = "links:1-3x4"
LINKED = {1, 3}


def expected_score(a, b):
    """HAMi's pair score (pkg/device/nvidia/calculate_score.go, docs/device-plugin.md): the PCIe
    path's common ancestor (NODE, one socket: 20) plus 100 per NVLink."""
    return 20 + (4 * 100 if {a, b} == LINKED else 0)


def _restart_plugin(cluster, gpus, topology):
    """Gives NODE's fake NVML the GPU list `gpus` and FAKE_GPU_TOPOLOGY `topology` (the files
    scripts/cluster.sh reads at each start of the device plugin) and restarts the plugin."""
    nd = cluster.dir / "nodes" / NODE
    (nd / "gpus").write_text(gpus + "\n")
    (nd / "topology").write_text(topology + "\n" if topology else "")
    cluster.restart(f"device-plugin-{NODE}")


def _scheduler_sees(cluster, uuids):
    """True when fracgpu's scheduler (its /metrics, read with kube-scheduler's certificate) holds
    exactly the GPUs `uuids` on NODE: the state /filter and /bind decide from."""
    ks = (str(cluster.dir / "pki" / "fracgpu-kube-scheduler-client.crt"),
          str(cluster.dir / "pki" / "fracgpu-kube-scheduler-client.key"))
    status, body = call(f"{extender_url(cluster)}/metrics", cert=ks)
    if status != 200:
        return False
    seen = {line.split('device_uuid="')[1].split('"')[0] for line in body.splitlines()
            if line.startswith("hami_node_gpu_memory_allocated_ratio{") and f'node="{NODE}"' in line}
    return seen == set(uuids)


def _pod(name, policy):
    return json.dumps({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"test": "topology"},
                     "annotations": {"hami.io/gpu-scheduler-policy": policy}},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": NODE},
                 "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"],
                                 "resources": {"limits": {"nvidia.com/gpu": 2,
                                                          "nvidia.com/gpumem": 1000}}}]}})


def _placed(cluster, name, uuids):
    """The GPU indices (into `uuids`) the pod got: the signed decision's and the container's
    NVIDIA_VISIBLE_DEVICES (the CRI record), which must agree."""
    p = cluster.wait(f"{name} Running", lambda: cluster.running("default", name), 120)
    assert p["spec"]["nodeName"] == NODE
    ann = p["metadata"]["annotations"]
    decided = {uuids.index(u) for u in uuids if u in ann["hami.io/vgpu-devices-allocated"]}
    assert ann.get("fracgpu.io/allocation-signature"), ann
    rec = cluster.wait("the CRI record", lambda: cluster.record(NODE, "default", name, "c"), 30)
    visible = {uuids.index(u) for u in container_env(rec)["NVIDIA_VISIBLE_DEVICES"].split(",")}
    assert visible == decided, (visible, decided)
    return decided


def test_topology_aware_pod_gets_the_linked_pair(cluster):
    nd = cluster.dir / "nodes" / NODE
    original = (nd / "gpus").read_text().strip()
    first, mib = original.split(",")[0].rsplit(":", 1)
    # Four GPUs: the node's own two and two more of the same kind (UUIDs in the script's scheme).
    uuids = [u for u, _ in (d.rsplit(":", 1) for d in original.split(","))]
    uuids += [f"{first[:4]}{int(first[4:12], 16) + g:08x}{first[12:]}" for g in (2, 3)]
    assert len(set(uuids)) == 4
    gpus = ",".join(f"{u}:{mib}" for u in uuids)
    # No GPU pod of an earlier test is left (binpack's order below reads the GPUs all free).
    cluster.wait("no GPU pod left", lambda: not [
        p for p in cluster.get("pods", "-A")["items"]
        if "hami.io/vgpu-devices-allocated" in p["metadata"].get("annotations", {})
        and p["status"].get("phase") not in ("Succeeded", "Failed")], 120)
    try:
        _restart_plugin(cluster, gpus, TOPOLOGY)
        # The Node carries the device plugin's scores: every GPU names the 3 others, the linked
        # pair 420 (4 NVLinks), every other pair 20.
        def scores_of_four():
            ann = cluster.get("node", NODE)["metadata"]["annotations"]
            return ann[SCORE] if uuids[3] in ann[REGISTER] and SCORE in ann else None
        scores = json.loads(cluster.wait(f"{SCORE} of the 4 GPUs on {NODE}", scores_of_four, 60))
        got = {(e["uuid"], b): s for e in scores for b, s in e["score"].items()}
        want = {(uuids[a], uuids[b]): expected_score(a, b) for a in range(4) for b in range(4) if a != b}
        assert got == want, got
        cluster.wait("fracgpu's scheduler holding the 4 GPUs", lambda: _scheduler_sees(cluster, uuids), 60)

        # The control: binpack (GPUs in index order when all are free) takes an unlinked pair.
        cluster.apply(_pod("topo-binpack", "binpack"))
        assert _placed(cluster, "topo-binpack", uuids) != LINKED
        cluster.kubectl("delete", "-n", "default", "pod", "topo-binpack", "--wait=true")
        cluster.wait("the binpack pod's GPUs free again", lambda: _scheduler_free(cluster, uuids), 60)

        cluster.apply(_pod("topo-aware", "topology-aware"))
        assert _placed(cluster, "topo-aware", uuids) == LINKED
    finally:
        cluster.kubectl("delete", "-n", "default", "pod", "-l", "test=topology", "--wait=true",
                        timeout=120)
        _restart_plugin(cluster, original, "")
        cluster.kubectl("annotate", "node", NODE, f"{SCORE}-")
        cluster.wait("fracgpu's scheduler back to the node's 2 GPUs",
                     lambda: _scheduler_sees(cluster, uuids[:2]), 60)


def _scheduler_free(cluster, uuids):
    """True when fracgpu's scheduler counts nothing allocated on NODE's GPUs."""
    ks = (str(cluster.dir / "pki" / "fracgpu-kube-scheduler-client.crt"),
          str(cluster.dir / "pki" / "fracgpu-kube-scheduler-client.key"))
    status, body = call(f"{extender_url(cluster)}/metrics", cert=ks)
    if status != 200:
        return False
    ratios = [float(line.rsplit(" ", 1)[1]) for line in body.splitlines()
              if line.startswith("hami_node_gpu_memory_allocated_ratio{") and f'node="{NODE}"' in line]
    return len(ratios) == len(uuids) and all(r == 0 for r in ratios)
