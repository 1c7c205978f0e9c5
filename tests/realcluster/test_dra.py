"""fracgpu's DRA mode on the real cluster (docs/dra.md; scripts/cluster.sh up --dra): `fracgpu
dra-driver` on every node publishes its GPUs as ResourceSlices and is registered by the real kubelet
through its plugin registration; the real kube-scheduler allocates ResourceClaims from those slices
(consumable capacity, KEP-5075) and the real kubelet prepares them through the driver. Each claim
is checked three ways: its allocation against the slice it asked for, the CDI device IDs in the
container config the fake CRI runtime recorded, and the CDI spec file the driver wrote (the limits
libvgpu.so enforces)."""

import json
import os
import time

import pytest
import yaml

from conftest import DRA_SLICE_INTERVAL

DRIVER = "gpu.fracgpu.io"
MI = 1 << 20

def node_names(cluster):
    return sorted(n["metadata"]["name"] for n in cluster.get("nodes")["items"])


def quantity(q):
    """A Kubernetes quantity string as a number (the suffixes fracgpu and the API server use)."""
    q = str(q)
    for suffix, mult in (("Ki", 1 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30), ("Ti", 1 << 40)):
        if q.endswith(suffix):
            return int(q[:-2]) * mult
    return int(q)


def slice_of(cluster, node):
    items = cluster.get("resourceslices", "--field-selector",
                        f"spec.nodeName={node},spec.driver={DRIVER}")["items"]
    return items[0] if len(items) == 1 else None


def device_of(cluster, node, name):
    s = slice_of(cluster, node)
    return next(d for d in s["spec"]["devices"] if d["name"] == name)


def cdi_spec(cluster, node, claim_uid):
    f = cluster.dir / "nodes" / node / "cdi" / f"fracgpu.io-gpu-claim-{claim_uid}.json"
    return json.loads(f.read_text()) if f.exists() else None


TOOLKIT_DIR = "/var/run/nvidia-container-devices/"
LIMITS_DIR = "/etc/fracgpu/limits.d/"


def inject(spec, ids):
    """What a container naming the CDI IDs `ids` gets, as the CDI library applies them
    (container-device-interface pkg/cdi/cache.go InjectDevices): the spec's own containerEdits
    once, then each named device's edits. Returns (env dict, {container path: host path});
    asserts that no env key and no mount path is given twice (docs/dra.md "Per-request devices")."""
    env, mounts = {}, {}
    by_id = {f"{spec['kind']}={d['name']}": d for d in spec["devices"]}
    edits = [spec["containerEdits"]] + [by_id[i]["containerEdits"] for i in ids]
    for e in edits:
        for kv in e.get("env", []):
            k, v = kv.split("=", 1)
            assert k not in env, f"env {k} given twice: {env[k]!r}, {v!r}"
            env[k] = v
        for m in e.get("mounts", []):
            assert m["containerPath"] not in mounts, f"mount {m['containerPath']} given twice"
            mounts[m["containerPath"]] = m["hostPath"]
    return env, mounts


def container_gpus(spec, ids):
    """The GPUs a container naming `ids` gets: {uuid: (MiB, cores)} from the GPU files of its
    limits directory (what libvgpu.so merges), after checking that the runtime's device mounts
    name the same GPUs, the claim-wide edits give no GPU list and no limit file, and every GPU
    file names one GPU."""
    env, mounts = inject(spec, ids)
    assert env["NVIDIA_VISIBLE_DEVICES"] == "void", env
    assert not any(k.startswith("CUDA_DEVICE_MEMORY_LIMIT") for k in env), env
    assert "/etc/fracgpu/limits.env" not in mounts
    gpus = {}
    for path, host in mounts.items():
        if not (path.startswith(LIMITS_DIR) and os.path.basename(path).startswith("gpu-")):
            continue
        with open(host) as f:
            kv = dict(line.split("=", 1) for line in f.read().splitlines())
        assert set(kv) == {"NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_MEMORY_LIMIT_0",
                           "CUDA_DEVICE_SM_LIMIT_0"}, kv
        uuid = kv["NVIDIA_VISIBLE_DEVICES"]
        assert path == f"{LIMITS_DIR}gpu-{uuid}.env"
        assert uuid not in gpus
        assert kv["CUDA_DEVICE_MEMORY_LIMIT_0"].endswith("m")
        gpus[uuid] = (int(kv["CUDA_DEVICE_MEMORY_LIMIT_0"][:-1]), int(kv["CUDA_DEVICE_SM_LIMIT_0"]))
    toolkit = sorted(p[len(TOOLKIT_DIR):] for p in mounts if p.startswith(TOOLKIT_DIR))
    assert toolkit == sorted(gpus), (toolkit, gpus)
    common = [p for p in mounts if p.startswith(LIMITS_DIR) and p not in
              {f"{LIMITS_DIR}gpu-{u}.env" for u in gpus}]
    assert len(common) == 1, common  # the claim's own common file
    return gpus


def cdi_devices_of(record):
    """The CDI device names of a CreateContainerRequest (CRI v1 ContainerConfig.CDI_devices)."""
    return [d["name"] for d in record["config"].get("CDIDevices", [])]


def kubelet_dra_devices(cluster, node, claim_uid):
    """The devices the kubelet recorded for a prepared claim of our driver, from its own DRA
    checkpoint (<root-dir>/dra_manager_state; pkg/kubelet/cm/dra/state: {Data: JSON of
    {ClaimInfoStateList: [{ClaimUID, DriverState: {driver: {Devices: [...]}}}]}, Checksum})."""
    f = cluster.dir / "nodes" / node / "root" / "dra_manager_state"
    data = json.loads(json.loads(f.read_text())["Data"])
    for c in data.get("ClaimInfoStateList") or []:
        if c["ClaimUID"] == claim_uid:
            return c["DriverState"][DRIVER]["Devices"]
    return None


def server_minor(cluster):
    v = json.loads(cluster.kubectl("version", "-o", "json").stdout)["serverVersion"]
    return int(v["minor"].rstrip("+"))


def unschedulable(cluster, ns, name):
    p = cluster.get("-n", ns, "pod", name)
    for c in p["status"].get("conditions", []):
        if c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable":
            return p
    return None


def claim_pod(name, claims, requests=None):
    """A pod of one container using `claims` (pod claim name → ResourceClaim name); `requests`
    names the request per claim (resources.claims[].request)."""
    requests = requests or {}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "resourceClaims": [{"name": k, "resourceClaimName": v} for k, v in claims.items()],
            "containers": [{
                "name": "c", "image": "busybox",
                "resources": {"claims": [{"name": k, **({"request": requests[k]} if k in requests else {})}
                                         for k in claims]},
            }],
        },
    }


def claim(name, requests, constraints=None):
    devices = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"devices": devices}}


def hami_pod(name, limits):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                                     "resources": {"limits": limits}}]}}


def apply_all(cluster, *objs):
    cluster.apply("\n---\n".join(yaml.safe_dump(o) for o in objs))


def delete(cluster, *kinds_names):
    for kind, name in kinds_names:
        cluster.kubectl("delete", "-n", "default", kind, name, "--ignore-not-found", "--wait=true",
                        "--grace-period=0", "--force", timeout=90, check=False)


def pod_claims(cluster, pod):
    """The ResourceClaims of a pod (named or generated from templates), allocated."""
    out = []
    for st in pod["status"].get("resourceClaimStatuses", []):
        out.append(cluster.get("-n", "default", "resourceclaim", st["resourceClaimName"]))
    for rc in pod["spec"].get("resourceClaims", []):
        if rc.get("resourceClaimName"):
            out.append(cluster.get("-n", "default", "resourceclaim", rc["resourceClaimName"]))
    return out


def check_prepared(cluster, pod, rc, container="c"):
    """The claim's allocation, the container's CDI devices and the CDI spec agree with the slices:
    returns [(device, uuid, MiB, cores)] per allocated result, in result order."""
    node = pod["spec"]["nodeName"]
    results = rc["status"]["allocation"]["devices"]["results"]
    uid = rc["metadata"]["uid"]
    rec = cluster.wait("the CRI record", lambda: cluster.record(node, "default", pod["metadata"]["name"],
                                                                container), 30)
    # The kubelet put one CDI device per allocated device of the claim in the container config,
    # each once.
    ids = cdi_devices_of(rec)
    assert sorted(ids) == sorted(f"fracgpu.io/gpu=claim-{uid}-{r['device']}" for r in results), ids
    assert len(set(ids)) == len(ids), ids
    spec = cdi_spec(cluster, node, uid)
    assert spec is not None, f"no CDI spec for claim {uid} on {node}"
    assert spec["kind"] == "fracgpu.io/gpu"
    assert spec["cdiVersion"] == "0.4.0"  # the lowest its features need (mount types)
    gpus = container_gpus(spec, ids)
    out = []
    for r in results:
        assert r["driver"] == DRIVER and r["pool"] == node
        dev = device_of(cluster, node, r["device"])
        dev_uuid = dev["attributes"]["uuid"]["string"]
        total = quantity(dev["capacity"]["memory"]["value"])
        consumed = r.get("consumedCapacity", {})
        mib = quantity(consumed["memory"]) // MI if "memory" in consumed else total // MI
        cores = int(consumed["cores"]) if "cores" in consumed else 100
        assert gpus[dev_uuid] == (mib, cores), (dev_uuid, gpus)
        out.append((r["device"], dev_uuid, mib, cores))
    assert sorted(gpus) == sorted(u for _, u, _, _ in out)
    return out


def test_slices_published_and_driver_registered(dra_cluster):
    c = dra_cluster
    for node in node_names(c):
        gpus = c.node_gpus(node)
        s = slice_of(c, node)
        assert s is not None, f"{node}: no ResourceSlice of {DRIVER}"
        assert s["spec"]["pool"]["name"] == node
        # Owned by its Node (the garbage collector removes it with the Node), as upstream's
        # kubeletplugin helper publishes slices.
        node_uid = c.get("node", node)["metadata"]["uid"]
        assert s["metadata"].get("ownerReferences") == [
            {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": True}], s["metadata"]
        devs = {d["attributes"]["uuid"]["string"]: d for d in s["spec"]["devices"]}
        assert sorted(devs) == sorted(u for u, _ in gpus)
        for u, mib in gpus:
            assert quantity(devs[u]["capacity"]["memory"]["value"]) == mib * MI
            assert devs[u]["allowMultipleAllocations"] is True
        # The kubelet's plugin registration found the driver's socket and the driver was told so
        # (NotifyRegistrationStatus).
        reg = str(c.dir / "nodes" / node / "root" / "plugins_registry" / "gpu.fracgpu.io-reg.sock")
        c.wait(f"{node}: kubelet registers the driver", lambda: reg in (
            c.dir / "logs" / f"kubelet-{node}.log").read_text(errors="replace"), 30)
        c.wait(f"{node}: driver told it is registered", lambda: "kubelet registered DRA driver" in (
            c.dir / "logs" / f"dra-driver-{node}.log").read_text(errors="replace"), 30)


def test_a_one_fractional_share(dra_cluster):
    c = dra_cluster
    mem_mib, cores = 3000, 30
    rc = claim("dra-a", [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.fracgpu.io",
        "capacity": {"requests": {"memory": f"{mem_mib}Mi", "cores": str(cores)}}}}])
    apply_all(c, rc, claim_pod("dra-a", {"g": "dra-a"}))
    try:
        pod = c.wait("dra-a Running", lambda: c.running("default", "dra-a"), 90)
        got = c.get("-n", "default", "resourceclaim", "dra-a")
        [r] = got["status"]["allocation"]["devices"]["results"]
        assert r.get("shareID"), "a share of a multi-allocatable device has a shareID"
        assert quantity(r["consumedCapacity"]["memory"]) == mem_mib * MI
        assert int(r["consumedCapacity"]["cores"]) == cores
        [(dev, dev_uuid, mib, got_cores)] = check_prepared(c, pod, got)
        assert (mib, got_cores) == (mem_mib, cores)
        assert dev_uuid in [u for u, _ in c.node_gpus(pod["spec"]["nodeName"])]
        # The driver answered NodePrepareResources with the share's ID (dra/v1 Device.share_id,
        # field 5), which the kubelet keeps in its checkpoint from 1.37 on (1.34's proto has no
        # such field: it keeps none).
        [kd] = kubelet_dra_devices(c, pod["spec"]["nodeName"], got["metadata"]["uid"])
        assert kd["DeviceName"] == r["device"]
        minor = server_minor(c)
        if minor >= 37:
            assert kd.get("ShareID") == r["shareID"], kd
        elif minor <= 34:
            assert kd.get("ShareID") is None, kd
    finally:
        delete(c, ("pod", "dra-a"), ("resourceclaim", "dra-a"))


@pytest.mark.parametrize("count", [2, 3])
def test_b_n_shares_land_on_n_distinct_gpus(dra_cluster, count):
    """A HAMi-style pod asking for `count` GPUs, converted by the webhook (DRA mode) into a
    ResourceClaimTemplate: the real allocator must give it `count` different GPUs."""
    c = dra_cluster
    if count >= 3 and os.environ.get("FRACGPU_K8S_VERSION", "v1.37.2").startswith("v1.34."):
        pytest.skip(
            "kube-scheduler v1.34.4's allocator (structured/internal/experimental, used with "
            "DRAConsumableCapacity) cannot place one request for 3+ shares: its distinctAttribute "
            "constraint keeps one attribute per request name (constraint.go add), so a third device "
            "may repeat the first, and allocateDevice checks capacity with the request's device "
            "index as the slice's device index (allocator_experimental.go:1295), which panics and "
            "kills kube-scheduler (index out of range [2] with length 2); fixed upstream by 1.37")
    name = f"dra-b{count}"
    mem_mib, cores = 1000, 10
    fits = [n for n in node_names(c) if len(c.node_gpus(n)) >= count]
    assert fits, f"no node has {count} GPUs"
    c.apply(yaml.safe_dump(hami_pod(name, {"nvidia.com/gpu": count, "nvidia.com/gpumem": mem_mib,
                                           "nvidia.com/gpucores": cores})))
    try:
        pod = c.wait(f"{name} Running", lambda: c.running("default", name), 90)
        assert pod["spec"]["nodeName"] in fits
        [rc] = pod_claims(c, pod)
        devices = rc["spec"]["devices"]
        assert devices["constraints"] == [{"requests": ["gpu"], "distinctAttribute": f"{DRIVER}/uuid"}]
        got = check_prepared(c, pod, rc)
        assert len(got) == count
        assert len({d for d, _, _, _ in got}) == count, f"devices not distinct: {got}"
        assert len({u for _, u, _, _ in got}) == count
        assert all((mib, cr) == (mem_mib, cores) for _, _, mib, cr in got)
    finally:
        delete(c, ("pod", name))


def test_c_first_available_subrequest(dra_cluster):
    c = dra_cluster
    biggest = max(m for n in node_names(c) for _, m in c.node_gpus(n))
    small_mib, small_cores = 2000, 20
    rc = claim("dra-c", [{"name": "gpu", "firstAvailable": [
        # No GPU has this much: the allocator must fall through to the second subrequest.
        {"name": "huge", "deviceClassName": "gpu.fracgpu.io",
         "capacity": {"requests": {"memory": f"{biggest + 1}Mi"}}},
        {"name": "small", "deviceClassName": "gpu.fracgpu.io",
         "capacity": {"requests": {"memory": f"{small_mib}Mi", "cores": str(small_cores)}}}]}])
    apply_all(c, rc, claim_pod("dra-c", {"g": "dra-c"}, {"g": "gpu"}))
    try:
        pod = c.wait("dra-c Running", lambda: c.running("default", "dra-c"), 90)
        got = c.get("-n", "default", "resourceclaim", "dra-c")
        [r] = got["status"]["allocation"]["devices"]["results"]
        assert r["request"] == "gpu/small"
        [(_, _, mib, cores)] = check_prepared(c, pod, got)
        assert (mib, cores) == (small_mib, small_cores)
    finally:
        delete(c, ("pod", "dra-c"), ("resourceclaim", "dra-c"))


def registrations(c, node):
    """How many times the kubelet has told node's DRA driver it registered it (the driver's log
    line on the kubelet's NotifyRegistrationStatus, src/dra/plugin.cc)."""
    log = c.dir / "logs" / f"dra-driver-{node}.log"
    return log.read_text(errors="replace").count("kubelet registered DRA driver") if log.exists() else 0


def restart_driver(c, node, *extra):
    """Restarts node's DRA driver and waits until the kubelet has registered the new one. A
    ResourceSlice from before the restart stays up meanwhile, so a pod can be scheduled before
    that, and the kubelet then answers "DRA driver gpu.fracgpu.io is not registered" and backs
    the pod off for up to a minute and a half (seen in CI on a loaded machine)."""
    before = registrations(c, node)
    c.restart(f"dra-driver-{node}", *extra)
    c.wait(f"{node}'s kubelet registered the restarted driver", lambda: registrations(c, node) > before, 60)


def set_default_memory(c, mib):
    """Sets defaultMemory in the fracgpu-device-config ConfigMap and restarts every node's DRA
    driver (it reads the config at start)."""
    cm = c.get("-n", "fracgpu-system", "configmap", "fracgpu-device-config")
    conf = yaml.safe_load(cm["data"]["device-config.yaml"])
    if mib:
        conf["nvidia"]["defaultMemory"] = mib
    else:
        conf["nvidia"].pop("defaultMemory", None)
    cm["data"]["device-config.yaml"] = yaml.safe_dump(conf)
    c.kubectl("replace", "-f", "-", input=json.dumps(cm))
    for node in node_names(c):
        restart_driver(c, node)
    for node in node_names(c):
        c.wait(f"{node} slice", lambda: slice_of(c, node), 30)


@pytest.mark.parametrize("default_memory", [0, 2000])
def test_d_whole_gpu_is_whole(dra_cluster, default_memory):
    c = dra_cluster
    name = f"dra-d{default_memory}"
    if default_memory:
        set_default_memory(c, default_memory)
    try:
        c.apply(yaml.safe_dump(hami_pod(name, {"nvidia.com/gpu": 1, "nvidia.com/gpucores": 100})))
        pod = c.wait(f"{name} Running", lambda: c.running("default", name), 90)
        [rc] = pod_claims(c, pod)
        assert rc["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "whole-gpu.fracgpu.io"
        [(dev, dev_uuid, mib, cores)] = check_prepared(c, pod, rc)
        node = pod["spec"]["nodeName"]
        card_mib = dict(c.node_gpus(node))[dev_uuid]
        assert (mib, cores) == (card_mib, 100), f"whole GPU {dev} got {mib} MiB / {cores} %"
        # Nothing else fits on that GPU: a 1 MiB share pinned to it stays unschedulable.
        pin = claim(f"{name}-pin", [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.fracgpu.io",
            "selectors": [{"cel": {"expression": f'device.attributes["{DRIVER}"].uuid == "{dev_uuid}"'}}],
            "capacity": {"requests": {"memory": "1Mi", "cores": "0"}}}}])
        apply_all(c, pin, claim_pod(f"{name}-pin", {"g": f"{name}-pin"}))
        c.wait(f"{name}-pin Unschedulable", lambda: unschedulable(c, "default", f"{name}-pin"), 60)
        assert "allocation" not in c.get("-n", "default", "resourceclaim", f"{name}-pin").get("status", {})
        # The control: the same share runs on that GPU once the whole-GPU pod is gone (so it was
        # the whole GPU that kept it out, not a selector that matches nothing).
        c.kubectl("delete", "-n", "default", "pod", name, "--wait=true", timeout=120)
        pin_pod = c.wait(f"{name}-pin Running", lambda: c.running("default", f"{name}-pin"), 120)
        [pin_rc] = pod_claims(c, pin_pod)
        [(_, pin_uuid, _, _)] = check_prepared(c, pin_pod, pin_rc)
        assert pin_uuid == dev_uuid
    finally:
        delete(c, ("pod", f"{name}-pin"), ("resourceclaim", f"{name}-pin"), ("pod", name))
        if default_memory:
            set_default_memory(c, 0)


def slice_versions(c):
    out = {}
    for node in node_names(c):
        s = slice_of(c, node)
        out[node] = (s["metadata"]["uid"], s["metadata"]["resourceVersion"], s["spec"]["pool"]["generation"])
    return out


def test_e_slices_are_not_rewritten(dra_cluster):
    """The API server stores quantities canonicalised (16384Mi reads back as 16Gi); a publisher
    comparing strings rewrites its slice every sync period."""
    c = dra_cluster
    before = slice_versions(c)
    time.sleep(DRA_SLICE_INTERVAL * 2.5)
    assert slice_versions(c) == before
    # A restarted driver's first sync compares too.
    node = node_names(c)[0]
    restart_driver(c, node)
    time.sleep(DRA_SLICE_INTERVAL * 1.5)
    assert slice_versions(c) == before


def test_f_slices_back_after_kubelet_restart(dra_cluster):
    """The kubelet deletes its node's ResourceSlices when it starts; the driver must publish
    again at once, not at its next periodic sync (here 300 s away)."""
    c = dra_cluster
    node = node_names(c)[-1]
    restart_driver(c, node, "--slice-interval", "300")
    try:
        c.wait(f"{node} slice", lambda: slice_of(c, node), 30)
        old_uid = slice_of(c, node)["metadata"]["uid"]
        t0 = time.monotonic()
        c.restart(f"kubelet-{node}")

        def recreated():
            s = slice_of(c, node)
            return s if s and s["metadata"]["uid"] != old_uid else None

        s = c.wait(f"{node} slice recreated after the kubelet's wipe", recreated, 15)
        print(f"slice of {node} back {time.monotonic() - t0:.1f} s after the kubelet restart")
        assert sorted(d["attributes"]["uuid"]["string"] for d in s["spec"]["devices"]) == \
            sorted(u for u, _ in c.node_gpus(node))
        c.wait(f"{node} Ready", lambda: any(
            x["type"] == "Ready" and x["status"] == "True"
            for x in c.get("node", node)["status"]["conditions"]), 60)
    finally:
        restart_driver(c, node)


def test_g_unhealthy_gpu_is_tainted_and_its_pod_evicted(dra_cluster):
    """An Xid on a GPU a running pod's claim holds: the driver marks the device unhealthy and
    taints it NoExecute (resource/v1 Device.taints); from 1.36, where DRADeviceTaints is on,
    kube-controller-manager evicts the pod, so its controller can place it again elsewhere
    instead of the claim failing prepare forever. (The fake NVML delivers the Xid appended to
    the node's gpu-state/xid-events.)"""
    c = dra_cluster
    rc = claim("dra-g", [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.fracgpu.io",
        "capacity": {"requests": {"memory": "2000Mi", "cores": "20"}}}}])
    apply_all(c, rc, claim_pod("dra-g", {"g": "dra-g"}))
    node = None
    try:
        pod = c.wait("dra-g Running", lambda: c.running("default", "dra-g"), 90)
        node = pod["spec"]["nodeName"]
        got = c.get("-n", "default", "resourceclaim", "dra-g")
        [r] = got["status"]["allocation"]["devices"]["results"]
        index = int(device_of(c, node, r["device"])["attributes"]["index"]["int"])
        state = c.dir / "nodes" / node / "gpu-state"
        state.mkdir(exist_ok=True)
        with open(state / "xid-events", "a") as f:
            f.write(f"{index} 79\n")  # Xid 79: the GPU has fallen off the bus
        minor = server_minor(c)
        if minor < 36:
            # DRADeviceTaints is off by default before 1.36: the API server drops the taints, the
            # driver says so once in its log and marks the device by its attribute only
            # (docs/dra.md "Unhealthy GPUs").
            dev = c.wait(f"{node}/{r['device']} unhealthy", lambda: (
                lambda d: d if d["attributes"]["healthy"]["bool"] is False else None)(
                    device_of(c, node, r["device"])), 30)
            assert not dev.get("taints"), dev
            log = c.dir / "logs" / f"dra-driver-{node}.log"
            c.wait("the driver's line about the dropped taints", lambda: (
                "the API server dropped devices[].taints of ResourceSlice" in log.read_text(
                    errors="replace")), 30)
            return
        dev = c.wait(f"{node}/{r['device']} tainted", lambda: (
            lambda d: d if d.get("taints") else None)(device_of(c, node, r["device"])), 30)
        assert dev["attributes"]["healthy"]["bool"] is False
        assert [(t["key"], t["effect"]) for t in dev["taints"]] == [("gpu.fracgpu.io/unhealthy", "NoExecute")]
        if minor >= 36:
            def evicted():
                p = c.kubectl("get", "-n", "default", "pod", "dra-g", "-o", "json", check=False)
                if p.returncode != 0:
                    return "deleted"
                obj = json.loads(p.stdout)
                return "terminating" if obj["metadata"].get("deletionTimestamp") else None
            c.wait("dra-g evicted by the device taint", evicted, 60)
        # Other devices stay untainted.
        assert all(not d.get("taints") for d in slice_of(c, node)["spec"]["devices"]
                   if d["name"] != r["device"])
    finally:
        delete(c, ("pod", "dra-g"), ("resourceclaim", "dra-g"))
        if node:
            restart_driver(c, node)  # healthy again: a new driver, a new event set


def test_h_gpu_quota_is_refused_not_skipped(dra_cluster):
    """kube-scheduler's DRA plugin allocates DRA claims, not fracgpu's extender, so a HAMi GPU
    ResourceQuota (limits.nvidia.com/gpumem) cannot be enforced on them: the webhook refuses a
    GPU pod of that namespace, naming the quota, instead of letting it run outside the quota;
    without the quota the same pod is admitted. Server-side dry runs: nothing is created."""
    c = dra_cluster
    quota = {"apiVersion": "v1", "kind": "ResourceQuota",
             "metadata": {"name": "dra-h-gpu", "namespace": "default"},
             "spec": {"hard": {"limits.nvidia.com/gpumem": "20000"}}}
    pod = json.dumps(hami_pod("dra-h", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000",
                                        "nvidia.com/gpucores": "10"}))

    def dry_run(admitted):
        r = c.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=pod,
                      check=False)
        if admitted:
            return r if r.returncode == 0 else None
        return r if r.returncode != 0 and want in r.stderr else None

    want = ("namespace default has the GPU ResourceQuota default/dra-h-gpu "
            "limits.nvidia.com/gpumem")
    apply_all(c, quota)
    try:
        # The scheduler sees the quota through its informer, a moment after it is created.
        p = c.wait("the GPU pod refused under the quota", lambda: dry_run(False), 30)
        assert "DRA mode" in p.stderr and "denied the request" in p.stderr, p.stderr
    finally:
        delete(c, ("resourcequota", "dra-h-gpu"))
    ok = c.wait("the same pod admitted without the quota", lambda: dry_run(True), 30)
    admitted = json.loads(ok.stdout)
    assert admitted["spec"]["resourceClaims"], "admitted in DRA mode: its GPU became a claim"


def test_i_each_request_gets_only_its_own_gpus(dra_cluster):
    """Per-request CDI devices (issue 35 item 7): a claim of two requests, one GPU each (distinct
    GPUs). Container `small` names one request and gets only its GPU and limit; `large` only the
    other; `both` names both requests and gets each GPU once with both limits. Checked from the
    CDI IDs the kubelet passed to the runtime (each once) and the container edits they compose
    to (spec edits once, each device's once: no env key or mount given twice)."""
    c = dra_cluster
    fits = [n for n in node_names(c) if len(c.node_gpus(n)) >= 2]
    assert fits, "no node has 2 GPUs"
    want = {"small": (1000, 10), "large": (3000, 40)}
    rc = claim("dra-i", [{"name": r, "exactly": {
        "deviceClassName": "gpu.fracgpu.io",
        "capacity": {"requests": {"memory": f"{mib}Mi", "cores": str(cores)}}}}
        for r, (mib, cores) in want.items()],
        constraints=[{"requests": list(want), "distinctAttribute": f"{DRIVER}/uuid"}])
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "dra-i", "namespace": "default"},
        "spec": {
            "resourceClaims": [{"name": "g", "resourceClaimName": "dra-i"}],
            "containers": [
                {"name": "small", "image": "busybox",
                 "resources": {"claims": [{"name": "g", "request": "small"}]}},
                {"name": "large", "image": "busybox",
                 "resources": {"claims": [{"name": "g", "request": "large"}]}},
                {"name": "both", "image": "busybox",
                 "resources": {"claims": [{"name": "g", "request": "small"},
                                          {"name": "g", "request": "large"}]}},
            ],
        },
    }
    apply_all(c, rc, pod)
    try:
        got_pod = c.wait("dra-i Running", lambda: c.running("default", "dra-i"), 90)
        node = got_pod["spec"]["nodeName"]
        assert node in fits
        got = c.get("-n", "default", "resourceclaim", "dra-i")
        uid = got["metadata"]["uid"]
        results = got["status"]["allocation"]["devices"]["results"]
        assert sorted(r["request"] for r in results) == ["large", "small"]
        uuid_of = {r["request"]: device_of(c, node, r["device"])["attributes"]["uuid"]["string"]
                   for r in results}
        assert uuid_of["small"] != uuid_of["large"]
        id_of = {r["request"]: f"fracgpu.io/gpu=claim-{uid}-{r['device']}" for r in results}
        spec = cdi_spec(c, node, uid)
        assert spec is not None, f"no CDI spec for claim {uid} on {node}"
        assert len(spec["devices"]) == 2
        for container, requests in (("small", ["small"]), ("large", ["large"]),
                                    ("both", ["small", "large"])):
            rec = c.wait(f"the CRI record of {container}",
                         lambda: c.record(node, "default", "dra-i", container), 30)
            ids = cdi_devices_of(rec)
            assert sorted(ids) == sorted(id_of[r] for r in requests), (container, ids)
            gpus = container_gpus(spec, ids)
            assert gpus == {uuid_of[r]: want[r] for r in requests}, (container, gpus)
    finally:
        delete(c, ("pod", "dra-i"), ("resourceclaim", "dra-i"))
