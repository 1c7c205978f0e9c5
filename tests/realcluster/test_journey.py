"""The pod's journey on the real cluster (docs/e2e.md "The real cluster"): the real API server
calls fracgpu's webhook over TLS, the real kube-scheduler calls the extender, the pod is bound,
the real kubelet calls the device plugin's Allocate, and the container config the CRI runtime
received is checked against the slice the pod asked for. Also: the ValidatingAdmissionPolicy of
deploy/, evaluated by the real API server; 20 pods at once for one GPU; restarts mid-flow."""

import json
import time
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from records import container_env

REPO = Path(__file__).resolve().parents[2]
SPLIT = "hami.io/node-nvidia-register"


def device_split_count(cluster):
    """deviceSplitCount of the fracgpu-device-config ConfigMap, as applied from deploy/."""
    cm = cluster.get("-n", "fracgpu-system", "configmap", "fracgpu-device-config")
    return int(yaml.safe_load(cm["data"]["device-config.yaml"])["nvidia"]["deviceSplitCount"])


def mounts_of(record):
    return {m["containerPath"]: m for m in record["config"].get("mounts", [])}


def test_nodes_advertise_their_fake_gpus(cluster):
    split = device_split_count(cluster)
    nodes = cluster.get("nodes")["items"]
    assert len(nodes) >= 2
    for n in nodes:
        name = n["metadata"]["name"]
        gpus = cluster.node_gpus(name)
        ready = [c for c in n["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True", name
        # The device plugin advertises deviceSplitCount shares of each GPU (docs/device-plugin.md).
        assert n["status"]["allocatable"]["nvidia.com/gpu"] == str(len(gpus) * split), name
        reg = n["metadata"].get("annotations", {}).get(SPLIT, "")
        for uuid, _ in gpus:
            assert uuid in reg, f"{name}: {uuid} not in {SPLIT}: {reg!r}"


EXAMPLES = sorted((REPO / "deploy" / "examples").glob("*.yaml"))


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_hami_example_pod_runs_with_its_slice(cluster, example):
    manifest = example.read_text()
    spec = yaml.safe_load(manifest)
    assert spec["kind"] == "Pod", f"{example.name}: only Pod examples are known to this test"
    ns, name = spec["metadata"].get("namespace", "default"), spec["metadata"]["name"]
    gpu_ctrs = [c for c in spec["spec"]["containers"]
                if "nvidia.com/gpu" in c.get("resources", {}).get("limits", {})]
    assert gpu_ctrs, f"{example.name}: no container asks for nvidia.com/gpu"
    cluster.kubectl("delete", "-n", ns, "pod", name, "--ignore-not-found", "--wait=true")
    cluster.kubectl("apply", "-n", ns, "-f", str(example))
    try:
        pod = cluster.wait(f"{ns}/{name} Running", lambda: cluster.running(ns, name), 90)
        # The webhook (called by the real API server over TLS) routed it to fracgpu's scheduler.
        assert pod["spec"]["schedulerName"] == "fracgpu-scheduler"
        node = pod["spec"]["nodeName"]
        ann = pod["metadata"]["annotations"]
        assert ann.get("hami.io/vgpu-node") == node
        assert ann.get("hami.io/bind-phase") == "success"
        gpus = dict(cluster.node_gpus(node))
        hook = cluster.dir / "nodes" / node / "hook" / "vgpu"
        for ctr in gpu_ctrs:
            limits = ctr["resources"]["limits"]
            rec = cluster.wait("the CRI record", lambda: cluster.record(node, ns, name, ctr["name"]), 30)
            env = container_env(rec)
            visible = env["NVIDIA_VISIBLE_DEVICES"].split(",")
            assert len(visible) == int(limits["nvidia.com/gpu"])
            for i, uuid in enumerate(visible):
                assert uuid in gpus, f"{uuid} is not a GPU of {node}"
                # The slice the pod asked for, from its own spec.
                if "nvidia.com/gpumem" in limits:
                    want_mib = int(limits["nvidia.com/gpumem"])
                elif "nvidia.com/gpumem-percentage" in limits:
                    want_mib = gpus[uuid] * int(limits["nvidia.com/gpumem-percentage"]) // 100
                else:
                    want_mib = gpus[uuid]
                assert env[f"CUDA_DEVICE_MEMORY_LIMIT_{i}"] == f"{want_mib}m"
                if "nvidia.com/gpucores" in limits:
                    assert env[f"CUDA_DEVICE_SM_LIMIT_{i}"] == str(int(limits["nvidia.com/gpucores"]))
                # The decision the extender wrote names the same GPU and slice.
                assert uuid in ann["hami.io/vgpu-devices-allocated"]
                assert f",{want_mib}," in ann["hami.io/vgpu-devices-allocated"]
            if "nvidia.com/gpucores" in limits:
                assert env["CUDA_DEVICE_SM_LIMIT"] == str(int(limits["nvidia.com/gpucores"]))
            m = mounts_of(rec)
            # The shared region: the container's own folder, writable, where the environment
            # points libvgpu.
            region = m[str(hook)]
            assert region.get("readonly") is not True
            assert region["hostPath"] != str(hook) and Path(region["hostPath"]).is_dir()
            assert env["CUDA_DEVICE_MEMORY_SHARED_CACHE"].startswith(str(hook) + "/")
            assert m["/etc/ld.so.preload"]["hostPath"] == str(hook / "ld.so.preload")
            assert m["/etc/ld.so.preload"].get("readonly") is True
            assert (hook / "ld.so.preload").read_text().strip() == str(hook / "libvgpu.so")
            assert m[str(hook / "libvgpu.so")]["hostPath"] == str(hook / "libvgpu.so")
            assert m["/etc/fracgpu/limits.env"].get("readonly") is True
            limits_file = Path(m["/etc/fracgpu/limits.env"]["hostPath"]).read_text().splitlines()
            assert f"CUDA_DEVICE_MEMORY_LIMIT_0={env['CUDA_DEVICE_MEMORY_LIMIT_0']}" in limits_file
    finally:
        cluster.kubectl("delete", "-n", ns, "pod", name, "--ignore-not-found", "--wait=false")


def test_validating_admission_policy_denies_a_forged_decision(cluster):
    # The webhook is skipped (opt-out label), so only the policy of deploy/admission-policy.yaml
    # stands between the user and a hand-written decision annotation.
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "forged", "namespace": "default",
                     "labels": {"hami.io/webhook": "ignore"},
                     "annotations": {"hami.io/vgpu-node": "node-a"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    p = cluster.kubectl("create", "-f", "-", input=json.dumps(pod), check=False)
    assert p.returncode != 0
    assert "ValidatingAdmissionPolicy 'fracgpu-pod-annotations'" in p.stderr, p.stderr
    assert "written by fracgpu's service accounts only" in p.stderr, p.stderr
    # Without the annotation the same pod is admitted: the policy, not the label, refused it.
    del pod["metadata"]["annotations"]
    cluster.kubectl("create", "-f", "-", input=json.dumps(pod))
    cluster.kubectl("delete", "-n", "default", "pod", "forged", "--wait=false")


def test_twenty_pods_at_once_never_overcommit_one_gpu(cluster):
    node = "node-a"
    uuid, mib = cluster.node_gpus(node)[0]
    per_pod = 2000
    fits = mib // per_pod  # 16384 // 2000 = 8
    docs = []
    for i in range(20):
        docs.append({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"burst-{i}", "namespace": "default",
                         "labels": {"test": "burst"},
                         "annotations": {"nvidia.com/use-gpuuuid": uuid}},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "c", "image": "busybox",
                "resources": {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": per_pod}}}]},
        })
    cluster.kubectl("delete", "-n", "default", "pod", "-l", "test=burst", "--wait=true")
    cluster.kubectl("create", "-f", "-", input="\n---\n".join(json.dumps(d) for d in docs))
    try:
        def settled():
            pods = cluster.get("-n", "default", "pods", "-l", "test=burst")["items"]
            running = [p for p in pods if p["status"].get("phase") == "Running"]
            pending = [p for p in pods if any(
                c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable"
                for c in p["status"].get("conditions", []))]
            return pods if len(running) == fits and len(running) + len(pending) == 20 else None

        pods = cluster.wait(f"{fits} of 20 burst pods Running, the rest Unschedulable", settled, 120)
        bound = [p for p in pods if p["spec"].get("nodeName")]
        assert len(bound) == fits
        # What the extender granted, read from each pod's decision (HAMi's encoding: a container's
        # part ends with ';', a GPU is '<UUID>,<type>,<MiB>,<cores>:'), summed per GPU.
        used = {}
        for p in bound:
            for ctr in p["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"].split(";"):
                for dev in filter(None, ctr.split(":")):
                    dev_uuid, _, dev_mib, _ = dev.split(",")
                    used[dev_uuid] = used.get(dev_uuid, 0) + int(dev_mib)
        assert set(used) == {uuid}
        assert used[uuid] == fits * per_pod <= mib
        # And the containers the kubelet started got exactly that GPU and slice.
        for p in bound:
            rec = cluster.record(node, "default", p["metadata"]["name"], "c")
            assert rec is not None, p["metadata"]["name"]
            env = container_env(rec)
            assert env["NVIDIA_VISIBLE_DEVICES"] == uuid
            assert env["CUDA_DEVICE_MEMORY_LIMIT_0"] == f"{per_pod}m"
    finally:
        cluster.kubectl("delete", "-n", "default", "pod", "-l", "test=burst", "--wait=false")


def test_objects_fracgpu_ships_are_strict_and_stable(cluster):
    overlay = (cluster.dir / "overlay-path").read_text().strip()
    p = cluster.kubectl("apply", "-k", overlay, "--server-side", "--field-manager", "fracgpu-cluster",
                        "--dry-run=server", "--validate=strict")
    assert "Warning" not in p.stderr, p.stderr
    # Applying again changes nothing the API server stores (no canonicalisation rewrite): the
    # generation, or for objects without one the resourceVersion, stays.
    def versions():
        items = json.loads(cluster.kubectl("get", "-k", overlay, "-o", "json").stdout)["items"]
        return {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]):
                o["metadata"].get("generation", o["metadata"]["resourceVersion"]) for o in items}

    before = versions()
    cluster.kubectl("apply", "-k", overlay, "--server-side", "--field-manager", "fracgpu-cluster")
    after = versions()
    changed = sorted(k for k in before if before[k] != after.get(k))
    # (generation where the object has one: its status moves on its own.)
    assert changed == [], f"re-applying deploy/ rewrote {changed}"


def gpu_pod(name, mib, **annotations):
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "c", "image": "busybox",
            "resources": {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": mib}}}]},
    }


def test_restarts_mid_flow_lose_nothing(cluster):
    names = []
    try:
        # fracgpu's scheduler is killed after the webhook admitted the pod and before the
        # extender placed it (fracgpu's kube-scheduler is held down meanwhile, so that the pod is
        # certainly unbound at the kill): the new one places it.
        names.append("restart-1")
        cluster.stop("fracgpu-kube-scheduler")
        cluster.kubectl("create", "-f", "-", input=json.dumps(gpu_pod("restart-1", 1000)))
        assert not cluster.get("-n", "default", "pod", "restart-1")["spec"].get("nodeName")
        cluster.restart("fracgpu-scheduler")
        cluster.restart("fracgpu-kube-scheduler")
        p1 = cluster.wait("pod Running after a scheduler restart",
                          lambda: cluster.running("default", "restart-1"), 90)
        assert p1["spec"]["schedulerName"] == "fracgpu-scheduler"
        node = p1["spec"]["nodeName"]
        alloc1 = p1["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"]

        # The API server, the node's kubelet and its device plugin, one after the other: the pod
        # keeps running with the same allocation, the node comes back with its GPUs, and a new
        # pod is placed and started there.
        for component in ("apiserver", "kubelet-" + node, "device-plugin-" + node):
            since = time.time()
            cluster.restart(component)

            def back():
                # The kubelet renewed its node Lease after the restart (the stored Ready status
                # from before would stand for another 40 s), and the node is Ready with its GPUs.
                lease = cluster.get("-n", "kube-node-lease", "lease", node)
                renewed = datetime.fromisoformat(lease["spec"]["renewTime"].replace("Z", "+00:00"))
                n = cluster.get("node", node)
                ok = [c for c in n["status"]["conditions"] if c["type"] == "Ready" and c["status"] == "True"]
                gpus = n["status"]["allocatable"].get("nvidia.com/gpu", "0")
                # Not back yet: say what is missing (the wait reports the last one on time-out).
                assert renewed.timestamp() >= since and ok and gpus != "0", \
                    f"lease renewed {renewed.isoformat()} (restart at {datetime.fromtimestamp(since).isoformat()}), " \
                    f"Ready {bool(ok)}, nvidia.com/gpu {gpus}"
                return True

            cluster.wait(f"{node} Ready with GPUs after restarting {component}", back, 120)
            p = cluster.running("default", "restart-1")
            assert p, f"restart-1 not Running after restarting {component}"
            assert p["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] == alloc1
            name = f"after-{component}"
            names.append(name)
            cluster.kubectl("create", "-f", "-", input=json.dumps(
                gpu_pod(name, 1000, **{"nvidia.com/use-gpuuuid": cluster.node_gpus(node)[0][0]})))
            cluster.wait(f"{name} Running", lambda: cluster.running("default", name), 120)
            rec = cluster.wait(f"{name}'s CRI record", lambda: cluster.record(node, "default", name, "c"), 30)
            assert container_env(rec)["CUDA_DEVICE_MEMORY_LIMIT_0"] == "1000m"
    finally:
        for n in names:
            cluster.kubectl("delete", "-n", "default", "pod", n, "--ignore-not-found", "--wait=false")


def test_pods_get_loopback_addresses_only(cluster):
    # No pod network here: fake-cri gives every sandbox 127.0.0.2, so that the kubelet's probes
    # of deploy/'s pods stay on this machine (upstream's fake would say 192.168.192.168).
    pods = cluster.get("pods", "-A")["items"]
    addressed = 0
    for p in pods:
        if p["spec"].get("hostNetwork"):
            continue
        ips = {a["ip"] for a in p["status"].get("podIPs", [])} | {p["status"].get("podIP")} - {None}
        assert ips <= {"127.0.0.2"}, f"{p['metadata']['namespace']}/{p['metadata']['name']}: {ips}"
        addressed += bool(ips)
    assert addressed > 0, "no pod has an address: the check saw nothing"


def audit_events(cluster):
    return cluster.audit_events()


def test_the_schedulers_decision_rides_on_the_binding_and_skips_the_webhook(cluster):
    """Issue 37 item 1: the scheduler writes a pod once at bind, the Binding (pods/binding
    create), whose metadata.annotations the API server copies onto the pod
    (BindingREST.setPodNodeAndMetadata): no pod UPDATE or PATCH of its own, so no call to
    fracgpu's webhook for it (which matches pods, not pods/binding). The device plugin's UPDATE
    at Allocate skips the webhook too (deploy/webhook.yaml's matchConditions; the admission
    policy holds it to its two annotations, test_the_device_plugins_account_changes_only_its_share).
    The bound pod carries the whole decision. Read from the API
    server's audit log, which records each mutating webhook it called on a request (annotation
    mutation.webhook.admission.k8s.io/round_<r>_index_<i>, Metadata level)."""
    name = "webhook-skip"
    cluster.kubectl("delete", "-n", "default", "pod", name, "--ignore-not-found", "--wait=true")
    cluster.apply(yaml.safe_dump(gpu_pod(name, 1000)))
    try:
        cluster.wait(f"{name} Running", lambda: cluster.running("default", name), 90)

        def writes(suffix, subresource=""):
            return [e for e in audit_events(cluster)
                    if e.get("stage") == "ResponseComplete"
                    and e.get("verb") in ("create", "update", "patch")
                    and e.get("objectRef", {}).get("resource") == "pods"
                    and e["objectRef"].get("name") == name
                    and e["objectRef"].get("subresource", "") == subresource
                    and e["user"]["username"].endswith(suffix)]

        def called(e):
            return any(k.startswith("mutation.webhook.admission.k8s.io/") and "pods.fracgpu.io" in v
                       for k, v in e.get("annotations", {}).items())

        sched = ":fracgpu-system:fracgpu-scheduler"
        binding = cluster.wait("the scheduler's Binding in the audit log",
                               lambda: writes(sched, "binding"), 30)
        plugin = cluster.wait("the device plugin's update in the audit log",
                              lambda: writes(":fracgpu-system:fracgpu-device-plugin"), 30)
        assert [e["responseStatus"]["code"] for e in binding] == [201], binding
        assert writes(sched) == [], "the scheduler updated the pod itself"
        assert not any(called(e) for e in binding), [e.get("annotations") for e in binding]
        assert all(e["responseStatus"]["code"] == 200 for e in plugin)
        assert not any(called(e) for e in plugin), [e.get("annotations") for e in plugin]
        # The webhook is still called for pods: this one's CREATE (the tenant's, which the audit
        # policy does not record) went through it, which alone names fracgpu's scheduler.
        assert cluster.get("-n", "default", "pod", name)["spec"]["schedulerName"] == "fracgpu-scheduler"
        ann = cluster.get("-n", "default", "pod", name)["metadata"]["annotations"]
        for key in ("hami.io/vgpu-node", "hami.io/vgpu-time", "hami.io/vgpu-devices-allocated",
                    "hami.io/bind-time", "fracgpu.io/allocation-signature"):
            assert ann.get(key), (key, ann)
    finally:
        cluster.kubectl("delete", "-n", "default", "pod", name, "--ignore-not-found", "--wait=false")


def test_the_device_plugins_account_changes_only_its_share(cluster):
    """deploy/admission-policy.yaml rule 4: the device plugin's UPDATEs no longer reach the
    webhook, so the API server itself must refuse the device plugin's account anything beyond
    hami.io/bind-phase and hami.io/vgpu-devices-to-allocate (a node's stolen token raising its
    pods' allocations), and allow those two. kubectl --as impersonates the account."""
    name = "plugin-share"
    cluster.kubectl("delete", "-n", "default", "pod", name, "--ignore-not-found", "--wait=true")
    cluster.apply(yaml.safe_dump(gpu_pod(name, 1000)))
    plugin = "--as=system:serviceaccount:fracgpu-system:fracgpu-device-plugin"
    try:
        cluster.wait(f"{name} Running", lambda: cluster.running("default", name), 90)
        ann = cluster.get("-n", "default", "pod", name)["metadata"]["annotations"]
        raised = ann["hami.io/vgpu-devices-allocated"].replace(",1000,", ",9000,")
        assert raised != ann["hami.io/vgpu-devices-allocated"], ann
        # Each a real change: a fixed node name would be no change at all on the pod that the
        # scheduler happened to place there (the API server then has nothing to refuse).
        moved = ann["hami.io/vgpu-node"] + "-moved"
        for key, value in (("hami.io/vgpu-devices-allocated", raised),
                           ("fracgpu.io/allocation-signature", "Zm9yZ2Vk"),
                           ("hami.io/vgpu-node", moved)):
            p = cluster.kubectl("annotate", "--overwrite", "-n", "default", "pod", name,
                                f"{key}={value}", plugin, check=False)
            assert p.returncode != 0, (key, p.stdout)
            assert "ValidatingAdmissionPolicy 'fracgpu-pod-annotations'" in p.stderr, p.stderr
            assert "the device plugin may change only" in p.stderr, p.stderr
        # Its own share is allowed, a real change (the served entry put back, as before its
        # Allocate), and the decision is left as the scheduler wrote it.
        assert ann["hami.io/vgpu-devices-to-allocate"] != ann["hami.io/vgpu-devices-allocated"], ann
        cluster.kubectl("annotate", "--overwrite", "-n", "default", "pod", name,
                        f"hami.io/vgpu-devices-to-allocate={ann['hami.io/vgpu-devices-allocated']}", plugin)
        after = cluster.get("-n", "default", "pod", name)["metadata"]["annotations"]
        assert after["hami.io/vgpu-devices-to-allocate"] == ann["hami.io/vgpu-devices-allocated"], after
        for key in ("hami.io/vgpu-devices-allocated", "fracgpu.io/allocation-signature",
                    "hami.io/vgpu-node"):
            assert after[key] == ann[key], (key, after[key], ann[key])
    finally:
        cluster.kubectl("delete", "-n", "default", "pod", name, "--ignore-not-found", "--wait=false")


WRITES = ("create", "update", "patch", "delete", "deletecollection")


def test_zz_rbac_as_shipped_suffices_and_idle_fracgpu_writes_nothing(cluster):
    # Runs last (file order): every request fracgpu's accounts made during the suite was allowed
    # by the RBAC deploy/ ships and accepted as valid.
    events = audit_events(cluster)
    assert any(e["user"]["username"].endswith(":fracgpu-device-plugin") for e in events)
    bad = cluster.refused_requests()
    assert bad == [], f"refused requests of fracgpu's accounts: {bad}"
    # Idle, nothing of fracgpu is rewritten: over a window longer than the device plugin's
    # registration period (30 s, --register-interval) the only writes are lease renewals.
    cluster.wait("the suite's pods gone",
                 lambda: not cluster.get("-n", "default", "pods")["items"], 120)
    start = len(audit_events(cluster))
    time.sleep(35)
    window = audit_events(cluster)[start:]
    writes = [(e["user"]["username"].split(":")[-1], e["verb"], e["requestURI"])
              for e in window if e["verb"] in WRITES and e.get("objectRef", {}).get("resource") != "leases"]
    assert writes == [], f"fracgpu wrote while idle: {writes}"
    assert any(e["verb"] == "update" and e.get("objectRef", {}).get("resource") == "leases" for e in window), \
        "no lease renewal in the window: is the audit log being written?"
