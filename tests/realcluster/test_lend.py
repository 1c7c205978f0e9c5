"""Lending on the real cluster (issue 36 item 2, docs/reclaim.md "Lending"): a node's fresh
`fracgpu.io/lent-memory` record is room for borrower pods only. The real kube-scheduler calls the
extender; a borrower is placed on a GPU an ordinary pod fills, on the memory the node lends, while
an ordinary pod of the same size stays Pending; a stale record lends nothing.

The record is written with `kubectl annotate` as the node agent would, with the agent's own
credentials (the device plugin's ServiceAccount, under which `fracgpu monitor` runs:
scripts/cluster.sh writes its kubeconfig), so the test also shows that account may write it."""

import json
import time

import pytest

LENT = "fracgpu.io/lent-memory"
BORROWER = "fracgpu.io/borrower"
NODE = "node-a"


def pod(name, mib, uuid, borrower=False):
    annotations = {"nvidia.com/use-gpuuuid": uuid}
    if borrower:
        annotations[BORROWER] = "true"
    return json.dumps({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"test": "lend"},
                     "annotations": annotations},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": NODE},
                 "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"],
                                 "resources": {"limits": {"nvidia.com/gpu": 1,
                                                          "nvidia.com/gpumem": mib}}}]}})


def bound(cluster, name):
    return cluster.get("-n", "default", "pod", name)["spec"].get("nodeName")


@pytest.fixture
def agent(cluster):
    """Writes the node's lent-memory record as the node agent does (its credentials); removes
    it afterwards."""
    kubeconfig = cluster.dir / "fracgpu-device-plugin.kubeconfig"

    def lend(at, entries):
        value = f"{int(at)};" + ",".join(f"{u}:{m}" for u, m in entries)
        cluster.kubectl("annotate", "node", NODE, "--overwrite", f"{LENT}={value}",
                        kubeconfig=kubeconfig)

    yield lend
    cluster.kubectl("annotate", "node", NODE, f"{LENT}-", kubeconfig=kubeconfig, check=False)


def test_a_borrower_is_placed_on_lent_memory_and_an_ordinary_pod_is_not(cluster, agent):
    c = cluster
    uuid, mib = c.node_gpus(NODE)[0]
    half = mib // 2
    c.kubectl("delete", "-n", "default", "pod", "-l", "test=lend", "--wait=true")
    try:
        # The owner fills the GPU: nothing is left for anyone without lending.
        c.apply(pod("lend-owner", mib, uuid))
        c.wait("lend-owner Running", lambda: c.running("default", "lend-owner"), 120)
        # The agent lends half of it (as if lend-owner were parked), republishing as it does
        # every 30 s while the pods below are scheduled.
        agent(time.time(), [(uuid, half)])
        c.apply(pod("lend-ordinary", half, uuid))
        c.apply(pod("lend-borrower", half, uuid, borrower=True))

        def borrower_running():
            agent(time.time(), [(uuid, half)])
            return c.running("default", "lend-borrower")

        running = c.wait("lend-borrower Running on the lent memory", borrower_running, 120,
                         interval=3)
        assert running["spec"]["nodeName"] == NODE
        # A borrower never preempts: naming no class, the webhook gave it fracgpu-borrower
        # (deploy/priority-class.yaml) with that class's value and policy, which the Priority
        # admission plugin, re-run after the webhook, accepted; an ordinary pod keeps what the
        # API server gave it.
        cls = c.get("priorityclass", "fracgpu-borrower")
        assert cls["preemptionPolicy"] == "Never", cls
        assert running["spec"].get("priorityClassName") == "fracgpu-borrower", running["spec"]
        assert running["spec"].get("priority") == cls["value"] < 0, running["spec"]
        assert running["spec"].get("preemptionPolicy") == "Never", running["spec"]
        ordinary = c.get("-n", "default", "pod", "lend-ordinary")
        assert ordinary["spec"].get("preemptionPolicy") != "Never", ordinary["spec"]
        grant = running["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"]
        assert grant.startswith(f"{uuid},NVIDIA,{half},"), grant
        time.sleep(8)  # several scheduling attempts of lend-ordinary by kube-scheduler
        assert not bound(c, "lend-ordinary"), "an ordinary pod placed on lent memory"
        # The borrower holds all that is lent: a second borrower does not fit either.
        c.kubectl("delete", "-n", "default", "pod", "lend-ordinary", "--wait=true")
        agent(time.time(), [(uuid, half)])
        c.apply(pod("lend-borrower-2", 1, uuid, borrower=True))
        time.sleep(8)
        assert not bound(c, "lend-borrower-2"), "a borrower placed beyond what is lent"
        c.kubectl("delete", "-n", "default", "pod", "lend-borrower", "lend-borrower-2",
                  "--wait=true")

        # A stale record (the agent stopped republishing 10 minutes ago) lends nothing.
        agent(time.time() - 600, [(uuid, half)])
        c.apply(pod("lend-borrower-3", half, uuid, borrower=True))
        time.sleep(8)
        assert not bound(c, "lend-borrower-3"), "a borrower placed on a stale record"
    finally:
        c.kubectl("delete", "-n", "default", "pod", "-l", "test=lend", "--wait=false")


def test_a_borrower_whose_class_may_preempt_is_refused(cluster):
    """A borrower naming a PriorityClass of its own that lets it preempt is refused by the webhook
    (the policy comes only from the class: the Priority admission plugin refuses a pod-set one)."""
    c = cluster
    uuid, _ = c.node_gpus(NODE)[0]
    c.apply(json.dumps({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                        "metadata": {"name": "lend-test-preempting"}, "value": -5}))
    try:
        manifest = json.loads(pod("lend-preempting", 100, uuid, borrower=True))
        manifest["spec"]["priorityClassName"] = "lend-test-preempting"
        p = c.kubectl("apply", "-f", "-", input=json.dumps(manifest), check=False)
        assert p.returncode != 0, "a borrower whose class may preempt was admitted"
        assert ('priorityClassName "lend-test-preempting" has preemptionPolicy '
                '"PreemptLowerPriority": a borrower may never preempt other pods') in p.stderr, \
            p.stderr
    finally:
        c.kubectl("delete", "-n", "default", "pod", "lend-preempting", "--wait=false",
                  check=False)
        c.kubectl("delete", "priorityclass", "lend-test-preempting", check=False)


def test_no_borrower_is_placed_on_lent_memory_without_the_policy_that_fixes_its_flag(cluster, agent):
    """Lending is on only while kube-apiserver keeps the borrower flag fixed (the
    ValidatingAdmissionPolicy fracgpu-pod-annotations and its Deny binding, as deploy/ ships
    them; scheduler/borrower_guard.h): with the binding deleted, a borrower that would fit only
    on lent memory stays Pending; with it applied again, the same borrower is placed there."""
    c = cluster
    uuid, mib = c.node_gpus(NODE)[0]
    half = mib // 2
    c.kubectl("delete", "-n", "default", "pod", "-l", "test=lend", "--wait=true")
    binding = c.get("validatingadmissionpolicybinding", "fracgpu-pod-annotations")
    try:
        c.apply(pod("lend-owner", mib, uuid))
        c.wait("lend-owner Running", lambda: c.running("default", "lend-owner"), 120)
        c.kubectl("delete", "validatingadmissionpolicybinding", "fracgpu-pod-annotations")
        agent(time.time(), [(uuid, half)])
        c.apply(pod("lend-unguarded", half, uuid, borrower=True))
        for _ in range(4):  # 12 s: several attempts by kube-scheduler, the record kept fresh
            time.sleep(3)
            agent(time.time(), [(uuid, half)])
        assert not bound(c, "lend-unguarded"), \
            "a borrower placed on lent memory while its flag could be removed"
        c.apply(json.dumps({"apiVersion": binding["apiVersion"], "kind": binding["kind"],
                            "metadata": {"name": binding["metadata"]["name"]},
                            "spec": binding["spec"]}))

        def placed():
            agent(time.time(), [(uuid, half)])
            return c.running("default", "lend-unguarded")

        running = c.wait("lend-unguarded Running once the binding is back", placed, 120,
                         interval=3)
        assert running["spec"]["nodeName"] == NODE
    finally:
        c.kubectl("delete", "-n", "default", "pod", "-l", "test=lend", "--wait=false")
        if c.kubectl("get", "validatingadmissionpolicybinding", "fracgpu-pod-annotations",
                     check=False).returncode != 0:
            c.apply(json.dumps({"apiVersion": binding["apiVersion"], "kind": binding["kind"],
                                "metadata": {"name": binding["metadata"]["name"]},
                                "spec": binding["spec"]}))


def test_the_borrower_flag_cannot_be_shed_through_the_status_subresource(cluster):
    """kube-apiserver keeps a pods/status request's metadata (its status strategy resets only the
    spec), so deploy/admission-policy.yaml covers pods/status too: removing the flag there is
    refused as on the pod itself, for every user (here the cluster admin), while a plain status
    update still passes. Found by the attack review of 2026-12-05: before, the status patch
    removed the flag."""
    c = cluster
    manifest = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "lend-status", "namespace": "default",
                             "labels": {"test": "lend", "hami.io/webhook": "ignore"},
                             "annotations": {BORROWER: "true"}},
                "spec": {"schedulerName": "nobody",
                         "containers": [{"name": "c", "image": "busybox"}]}}
    c.kubectl("delete", "-n", "default", "pod", "lend-status", "--ignore-not-found", "--wait=true")
    c.apply(json.dumps(manifest))
    try:
        for sub in ("status", None):
            args = ["patch", "-n", "default", "pod", "lend-status", "--type=json", "-p",
                    '[{"op":"remove","path":"/metadata/annotations/fracgpu.io~1borrower"}]']
            if sub:
                args.append(f"--subresource={sub}")
            p = c.kubectl(*args, check=False)
            assert p.returncode != 0, f"the flag was removed through {sub or 'the pod'}"
            assert "cannot be added, removed or changed afterwards" in p.stderr, p.stderr
        pod = c.get("-n", "default", "pod", "lend-status")
        assert pod["metadata"]["annotations"].get(BORROWER) == "true"
        c.kubectl("patch", "-n", "default", "pod", "lend-status", "--subresource=status",
                  "--type=merge", "-p",
                  '{"status":{"conditions":[{"type":"LendTest","status":"True"}]}}')
    finally:
        c.kubectl("delete", "-n", "default", "pod", "lend-status", "--wait=false", check=False)
