"""docs/hami-migration.md "Switching a cluster over, node by node, without a drain", rehearsed on
the real cluster (issue 34 item 3): steps 2 to 5 in order, each step's commands run as the guide
writes them, from a cluster in the state HAMi leaves it.

The HAMi state, and what stands in for what (the local cluster has no HAMi, no container runtime
and no pod network; docs/e2e.md "The real cluster"):

* HAMi's control plane is `hami_place` below: it writes HAMi v2.10's annotations in HAMi's
  encodings (docs/design/hami-behaviour.md §3.5-3.7: hami.io/vgpu-node and its label,
  hami.io/vgpu-time, hami.io/vgpu-devices-to-allocate / -allocated, the node lock
  hami.io/mutex.lock `<RFC 3339>,<ns>,<pod>`, hami.io/bind-phase=allocating, hami.io/bind-time)
  on a pod naming `hami-scheduler`, then creates the Binding, as HAMi's /filter and /bind do.
  Uninstalling HAMi's scheduler and webhook (step 4) is calling it no more.
* HAMi's device plugin on the nodes labelled gpu=on is fracgpu's in its HAMi mode
  (`--allow-unsigned --scheduler-name=hami-scheduler`, no signing key): the kubelet's real
  Allocate, served through HAMi's node lock, writes the limits into the container config the
  fake CRI runtime records.
* fracgpu's components run as host processes (scripts/cluster.sh); `PodStandIn` starts, stops
  and restarts them from the objects the guide's commands applied, as the DaemonSet and
  Deployment controllers and the kubelet would: a node plugin on each node the applied
  DaemonSet selects, with the args the DaemonSet gives beyond deploy/'s (scripts/cluster.sh
  passes deploy/'s own with host paths), a missing key file while Secret fracgpu-signing-key
  does not exist (the optional volume is empty), restarted when the pod template changes
  (args, `kubectl rollout restart`); the scheduler with the Deployment's extra args.
* `fracgpu certs` (the certs Job of deploy/) is run as scripts/cluster.sh runs it, and the
  Secrets it writes are copied to the files the pods would mount.
* `kubectl rollout status` of the DaemonSet cannot finish here: fake-cri never ends an init
  container, so the DaemonSet's pods stay Init:0/1. The step-3 block runs verbatim except that
  this one line gets `--watch=false`; the test then waits for the DaemonSet's pod on the node and
  for the plugin's registration with the node's kubelet in its place.
* Step 4's `sh` block is run as written; step 2's "apply only ..." is `kubectl kustomize` of the
  overlay with those objects picked out and `kubectl apply -f -`.

Before the test, fracgpu's objects beyond step 2's (and the DaemonSet) are deleted, its
scheduler and kube-scheduler stopped, Secret fracgpu-signing-key deleted; the cluster is taken
down afterwards (the next test that needs one gets a fresh one).
"""

import base64
import json
import os
import re
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import yaml

from records import container_env

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "hami-migration.md"
NS = "hami-migration"
LOCK = "hami.io/mutex.lock"
STEP2_KINDS = {"Namespace", "ServiceAccount", "Role", "ClusterRole", "RoleBinding",
               "ClusterRoleBinding"}
STEP2_CONFIGMAPS = {"fracgpu-device-config", "fracgpu-node-config"}
# HAMi's device plugin, stood in for by fracgpu's in its HAMi mode (no key: none exists).
HAMI_PLUGIN_ARGS = ["--allow-unsigned", "--scheduler-name=hami-scheduler"]


def guide_block(step):
    """The ```sh block of the guide's step `step` (3 or 4), as lines."""
    text = GUIDE.read_text()
    sec = text[text.index("## Switching a cluster over"):]
    starts = {3: "3. **For each GPU node**", 4: "4. **When every GPU node", 5: "5. **Drop the migration flags"}
    part = sec[sec.index(starts[step]):sec.index(starts[step + 1])]
    m = re.search(r"```sh\n(.*?)```", part, re.S)
    assert m, f"no ```sh block in step {step} of docs/hami-migration.md"
    return [ln.strip() for ln in m.group(1).splitlines() if ln.strip()]


def run_line(line, env):
    p = subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, (line, p.stdout, p.stderr)


def render(cluster, path):
    out = cluster.kubectl("kustomize", str(path)).stdout
    return [o for o in yaml.safe_load_all(out) if o]


def in_step2(o):
    return (o["kind"] in STEP2_KINDS or (o["kind"] == "ConfigMap" and o["metadata"]["name"] in STEP2_CONFIGMAPS)
            or (o["kind"] == "DaemonSet" and o["metadata"]["name"] == "fracgpu-device-plugin"))


def find(objs, kind, name):
    hit = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(hit) == 1, (kind, name)
    return hit[0]


def container_args(obj, container):
    return [c for c in obj["spec"]["template"]["spec"]["containers"] if c["name"] == container][0]["args"]


class Overlay:
    """The guide's kustomize overlay of deploy/ (here of the cluster's own overlay of it, which
    changes only the webhook's URL)."""

    def __init__(self, cluster):
        self.c = cluster
        self.dir = cluster.dir / "migration-overlay"
        self.dir.mkdir(exist_ok=True)
        self.base = Path((cluster.dir / "overlay-path").read_text().strip())
        self.plugin_flags = []
        self.scheduler_flags = []
        self.write()

    def write(self):
        ds = [{"op": "replace", "path": "/spec/template/spec/nodeSelector", "value": {"fracgpu.io/node": "on"}}]
        ds += [{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": a}
               for a in self.plugin_flags]
        patches = [{"target": {"group": "apps", "kind": "DaemonSet", "name": "fracgpu-device-plugin"},
                    "patch": yaml.safe_dump(ds)}]
        if self.scheduler_flags:
            patches.append({"target": {"group": "apps", "kind": "Deployment", "name": "fracgpu-scheduler"},
                            "patch": yaml.safe_dump([{"op": "add", "path": "/spec/template/spec/containers/0/args/-",
                                                      "value": a} for a in self.scheduler_flags])})
        (self.dir / "kustomization.yaml").write_text(yaml.safe_dump({
            "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
            "resources": [os.path.relpath(self.base, self.dir)], "patches": patches}))


class PodStandIn:
    """Host processes in place of the pods of fracgpu's DaemonSet and scheduler Deployment (and
    of HAMi's device plugin), kept in step with the objects as applied (see the module's
    docstring)."""

    def __init__(self, cluster, shipped):
        self.c = cluster
        self.shipped_plugin = container_args(find(shipped, "DaemonSet", "fracgpu-device-plugin"), "device-plugin")
        self.shipped_scheduler = container_args(find(shipped, "Deployment", "fracgpu-scheduler"), "scheduler")
        self.plugins = {}  # node -> what its running plugin was started as
        self.nodes = sorted(p.name for p in (cluster.dir / "nodes").iterdir() if p.is_dir())

    def set_extra_args(self, component, args):
        d = self.c.dir / "extra-args"
        d.mkdir(exist_ok=True)
        (d / component).write_text("".join(a + "\n" for a in args))

    def plugin_wanted(self, node_labels):
        ds = (self.c.get("-n", "fracgpu-system", "daemonset", "fracgpu-device-plugin")
              if self._has("daemonset", "fracgpu-device-plugin") else None)
        if ds:
            sel = ds["spec"]["template"]["spec"].get("nodeSelector", {})
            if all(node_labels.get(k) == v for k, v in sel.items()):
                args = container_args(ds, "device-plugin")
                # The names it serves as given (cluster.sh passes none: the default would be lost
                # by a repeated flag), and whatever else it adds to deploy/'s args.
                extra = [a for a in args if a.startswith("--scheduler-name")]
                extra += [a for a in args if a not in self.shipped_plugin and a not in extra]
                restarted = ds["spec"]["template"]["metadata"].get("annotations", {})
                return ("fracgpu", tuple(extra), json.dumps(restarted, sort_keys=True))
        if node_labels.get("gpu") == "on":
            return ("hami", tuple(HAMI_PLUGIN_ARGS), "")
        return None

    def _has(self, kind, name, ns="fracgpu-system"):
        p = self.c.kubectl("-n", ns, "get", kind, name, "--ignore-not-found", "-o", "name", check=False)
        return bool(p.stdout.strip())

    def sync_plugins(self):
        for n in self.c.get("nodes")["items"]:
            node = n["metadata"]["name"]
            want = self.plugin_wanted(n["metadata"].get("labels", {}))
            if self.plugins.get(node) == want:
                continue
            if want is None:
                self.c.stop(f"device-plugin-{node}")
            else:
                args = list(want[1])
                if not self._has("secret", "fracgpu-signing-key"):  # the optional volume is empty
                    args.append(f"--signing-key-file={self.c.dir}/fracgpu/no-signing-key/key")
                self.set_extra_args(f"device-plugin-{node}", args)
                self.c.restart(f"device-plugin-{node}")
            self.plugins[node] = want

    def start_scheduler(self):
        dep = self.c.get("-n", "fracgpu-system", "deployment", "fracgpu-scheduler")
        extra = [a for a in container_args(dep, "scheduler") if a not in self.shipped_scheduler]
        self.set_extra_args("fracgpu-scheduler", extra)
        self.c.restart("fracgpu-scheduler")
        return extra


def hami_place(c, name, node, uuid, mem, cores):
    """HAMi's webhook, /filter and /bind for a one-container, one-GPU pod, as HAMi v2.10 writes
    them (docs/design/hami-behaviour.md §3.5-3.7); returns the encoded allocation."""
    c.apply(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"test": "hami-migration"}},
        "spec": {"schedulerName": "hami-scheduler", "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "1d"],
                                 "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(mem),
                                                          "nvidia.com/gpucores": str(cores)}}}]}}))
    enc = f"{uuid},NVIDIA,{mem},{cores}:;"
    now = int(time.time())
    # /filter: the decision (retried while the API server still enforces deploy/'s admission
    # policy, deleted a moment ago).
    c.wait(f"{name}'s decision written", lambda: c.kubectl(
        "-n", NS, "annotate", "pod", name, "--overwrite", f"hami.io/vgpu-node={node}", f"hami.io/vgpu-time={now}",
        f"hami.io/vgpu-devices-to-allocate={enc}", f"hami.io/vgpu-devices-allocated={enc}"), 30)
    c.kubectl("-n", NS, "label", "pod", name, f"hami.io/vgpu-node={node}")
    # /bind: the node lock (annotate without --overwrite fails while another pod holds it), the
    # bind phase, the Binding.
    c.wait(f"{node}'s node lock free", lambda: LOCK not in c.get("node", node)["metadata"].get("annotations", {}), 60)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    c.kubectl("annotate", "node", node, f"{LOCK}={stamp},{NS},{name}")
    c.kubectl("-n", NS, "annotate", "pod", name, "hami.io/bind-phase=allocating", f"hami.io/bind-time={now}")
    binding = c.dir / f"binding-{name}.json"
    binding.write_text(json.dumps({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": NS},
                                   "target": {"apiVersion": "v1", "kind": "Node", "name": node}}))
    c.kubectl("create", "--raw", f"/api/v1/namespaces/{NS}/pods/{name}/binding", "-f", str(binding))
    return enc


def fracgpu_pod(c, name, node, mem, scheduler=None):
    spec = {"nodeSelector": {"kubernetes.io/hostname": node}, "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "1d"],
                            "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(mem)}}}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    c.apply(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod",
                            "metadata": {"name": name, "namespace": NS, "labels": {"test": "hami-migration"}},
                            "spec": spec}))


class Running:
    """The pods that must keep running, each with the container the kubelet started first and the
    limits its CRI record holds."""

    def __init__(self, c):
        self.c = c
        self.pods = {}  # name -> (node, containerID, record)

    def add(self, name, mem, cores=None, uuid=None, timeout=90):
        c = self.c
        pod = c.wait(f"{NS}/{name} Running", lambda: c.running(NS, name), timeout)
        node = pod["spec"]["nodeName"]
        rec = c.wait(f"the CRI record of {name}", lambda: c.record(node, NS, name, "main"), 30)
        env = container_env(rec)
        assert env["CUDA_DEVICE_MEMORY_LIMIT_0"] == f"{mem}m", (name, env)
        if cores is not None:
            assert env["CUDA_DEVICE_SM_LIMIT"] == str(cores), (name, env)
        if uuid is not None:
            assert env["NVIDIA_VISIBLE_DEVICES"] == uuid, (name, env)
        assert pod["metadata"]["annotations"].get("hami.io/bind-phase") == "success", name
        self.pods[name] = (node, pod["status"]["containerStatuses"][0]["containerID"], rec)
        return pod

    def check(self, when):
        """Every pod still runs its first container, started with the same config."""
        for name, (node, cid, rec) in self.pods.items():
            pod = self.c.get("-n", NS, "pod", name)
            st = pod["status"]["containerStatuses"][0]
            assert pod["status"]["phase"] == "Running" and "running" in st["state"], (when, name, pod["status"])
            assert st["containerID"] == cid and st["restartCount"] == 0, (when, name, st)
            assert self.c.record(node, NS, name, "main") == rec, (when, name)


def used_mib(c, uuid):
    """MiB that the pods not yet ended (any namespace, earlier tests' too) hold on a GPU, by
    their hami.io/vgpu-devices-allocated."""
    total = 0
    for p in c.get("pods", "-A")["items"]:
        if p["status"].get("phase") in ("Succeeded", "Failed"):
            continue
        enc = p["metadata"].get("annotations", {}).get("hami.io/vgpu-devices-allocated", "")
        for dev in re.split("[:;]", enc):
            f = dev.split(",")
            if len(f) >= 4 and f[0] == uuid:
                total += int(f[2])
    return total


def scheduler_log(c):
    return (c.dir / "logs" / "fracgpu-scheduler.log").read_text(errors="replace")


def plugin_registrations(c, node):
    return (c.dir / "logs" / f"device-plugin-{node}.log").read_text(errors="replace").count(
        "registered nvidia.com/gpu with kubelet")


def test_migration_guide_steps_2_to_5(cluster, _clusters):
    c = cluster
    t0 = time.monotonic()
    try:
        _rehearse(c)
    finally:
        print(f"\nmigration rehearsal: {time.monotonic() - t0:.1f} s")
        if os.environ.get("FRACGPU_CLUSTER_KEEP") != "1":
            _clusters.down()  # the cluster is in no state for another test


def _rehearse(c):
    base = Path((c.dir / "overlay-path").read_text().strip())
    shipped = render(c, base)
    stand_in = PodStandIn(c, shipped)
    node_a, node_b = "node-a", "node-b"
    gpus_a, gpus_b = c.node_gpus(node_a), c.node_gpus(node_b)
    assert [m for _, m in gpus_a] == [16384, 16384] and [m for _, m in gpus_b] == [24576]

    # ---- HAMi's cluster: no fracgpu control plane, webhook or admission policy, no DaemonSet,
    # no signing key; HAMi's device plugin on the gpu=on nodes; pods HAMi placed, running.
    # A HAMi cluster holds no pod fracgpu signed: the earlier tests' pods (signed with the key
    # this rehearsal deletes, so a fracgpu scheduler with the new key would count each as its
    # whole node) are deleted first.
    signed = json.loads(c.kubectl("get", "pods", "-A", "-o", "json").stdout)["items"]
    for p in signed:
        if "fracgpu.io/allocation-signature" in p["metadata"].get("annotations", {}):
            c.kubectl("-n", p["metadata"]["namespace"], "delete", "pod", p["metadata"]["name"],
                      "--ignore-not-found", "--wait=true", "--grace-period=0", "--force", timeout=120)
    c.stop("fracgpu-kube-scheduler")
    c.stop("fracgpu-scheduler")
    gone = [o for o in shipped if not in_step2(o) or o["kind"] == "DaemonSet"]
    c.kubectl("delete", "--ignore-not-found", "--wait=true", "-f", "-", input=yaml.safe_dump_all(gone), timeout=120)
    c.kubectl("-n", "fracgpu-system", "delete", "secret", "fracgpu-signing-key")
    stand_in.sync_plugins()
    for n in stand_in.nodes:
        assert c.get("node", n)["metadata"]["labels"].get("gpu") == "on"
    c.kubectl("create", "namespace", NS)
    c.wait(f"ServiceAccount {NS}/default", lambda: c.get("-n", NS, "serviceaccount", "default"), 60)
    keep = Running(c)
    # node-b's GPU is left with 4,576 MiB free beside HAMi's pod (20,000 MiB on an idle GPU).
    used_a = [used_mib(c, u) for u, _ in gpus_a]
    mem_b = 24576 - used_mib(c, gpus_b[0][0]) - 4576
    assert mem_b >= 10000 and used_a[0] <= 6384 and used_a[1] <= 4000, (mem_b, used_a)
    hami_place(c, "hami-a", node_a, gpus_a[0][0], 10000, 30)
    hami_place(c, "hami-b", node_b, gpus_b[0][0], mem_b, 50)
    keep.add("hami-a", 10000, 30, gpus_a[0][0])
    keep.add("hami-b", mem_b, 50, gpus_b[0][0])
    for n in (node_a, node_b):
        assert LOCK not in c.get("node", n)["metadata"].get("annotations", {}), "the plugin released the lock"

    # ---- Step 2: the overlay (DaemonSet selector and args); only namespace, RBAC, device
    # config ConfigMaps and DaemonSet applied. fracgpu's DaemonSet starts nowhere.
    overlay = Overlay(c)
    overlay.plugin_flags = ["--allow-unsigned", "--scheduler-name=hami-scheduler"]
    overlay.write()
    step2 = [o for o in render(c, overlay.dir) if in_step2(o)]
    assert {o["kind"] for o in step2} == STEP2_KINDS | {"ConfigMap", "DaemonSet"}
    c.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(step2))
    ds = c.get("-n", "fracgpu-system", "daemonset", "fracgpu-device-plugin")
    assert ds["spec"]["template"]["spec"]["nodeSelector"] == {"fracgpu.io/node": "on"}
    assert container_args(ds, "device-plugin")[-2:] == ["--allow-unsigned", "--scheduler-name=hami-scheduler"]
    c.wait("the DaemonSet's status", lambda: c.get("-n", "fracgpu-system", "daemonset", "fracgpu-device-plugin")
           ["status"].get("observedGeneration"), 30)
    assert c.get("-n", "fracgpu-system", "daemonset", "fracgpu-device-plugin")["status"]["desiredNumberScheduled"] == 0
    stand_in.sync_plugins()
    assert all(w[0] == "hami" for w in stand_in.plugins.values())
    keep.check("after step 2")

    # ---- Step 3, for each node: the guide's block, verbatim but for `rollout status`.
    env = {**os.environ, "KUBECONFIG": str(c.kubeconfig), "PATH": f"{c.bin}:{os.environ['PATH']}"}
    for i, node in enumerate((node_a, node_b)):
        seen = plugin_registrations(c, node)
        for line in guide_block(3):
            line = line.replace("gpu-node-1", node)
            if " rollout status " in line:
                line += " --watch=false"
            run_line(line, env)
            stand_in.sync_plugins()  # the DaemonSet controllers and the kubelet
            if "cordon" in line and "uncordon" not in line:
                assert c.get("node", node)["spec"].get("unschedulable") is True
            if " rollout status " in line:
                c.wait(f"the DaemonSet's pod on {node}", lambda: [
                    p for p in c.get("-n", "fracgpu-system", "pods", "-l", "app.kubernetes.io/name=fracgpu-device-plugin")["items"]
                    if p["spec"].get("nodeName") == node], 60)
                assert stand_in.plugins[node][0] == "fracgpu"
                assert plugin_registrations(c, node) > seen, f"fracgpu's plugin registered with {node}'s kubelet"
        labels = c.get("node", node)["metadata"]["labels"]
        assert "gpu" not in labels and labels.get("fracgpu.io/node") == "on", labels
        assert not c.get("node", node)["spec"].get("unschedulable")
        reg = c.get("node", node)["metadata"]["annotations"]["hami.io/node-nvidia-register"]
        assert all(u in reg for u, _ in c.node_gpus(node))
        assert (c.dir / "nodes" / node / "hook" / "vgpu" / "libvgpu.so").exists()
        keep.check(f"after step 3 on {node}")
        if i == 0:
            # HAMi's scheduler keeps placing pods on the node; fracgpu's plugin serves them.
            hami_place(c, "hami-a2", node_a, gpus_a[1][0], 4000, 20)
            keep.add("hami-a2", 4000, 20, gpus_a[1][0])
    assert c.get("-n", "fracgpu-system", "daemonset", "fracgpu-device-plugin")["status"]["desiredNumberScheduled"] == 2

    # ---- Step 4: the rest, with --adopt-hami-created-before=<now>; HAMi's scheduler and
    # webhook uninstalled (hami_place is called no more).
    adopt = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    time.sleep(1)  # pods created from here are after that time
    overlay.scheduler_flags = [f"--adopt-hami-created-before={adopt}"]
    overlay.write()
    c.kubectl("apply", "-k", str(overlay.dir), timeout=120)
    build = Path((c.dir / "build").read_text().strip())
    certs = subprocess.run([str(build / "fracgpu"), "certs", "--kubeconfig", str(c.dir / "fracgpu-certs.kubeconfig"),
                            "--namespace", "fracgpu-system", "--service", "fracgpu-scheduler", "--extra-san", "127.0.0.1",
                            "--secret-name", "fracgpu-scheduler-tls", "--webhook-config", "fracgpu-webhook",
                            "--signing-key-secret", "fracgpu-signing-key", "--validity-days", "365",
                            "--renew-before-days", "30"], capture_output=True, text=True, timeout=60)
    assert certs.returncode == 0, certs.stderr
    for secret, key, f in (("fracgpu-scheduler-tls", "tls.crt", "tls.crt"), ("fracgpu-scheduler-tls", "tls.key", "tls.key"),
                           ("fracgpu-scheduler-tls", "ca.crt", "ca.crt"), ("fracgpu-signing-key", "key", "signing.key")):
        data = c.get("-n", "fracgpu-system", "secret", secret)["data"][key]
        out = c.dir / "fracgpu" / f
        out.write_bytes(base64.b64decode(data))
        out.chmod(0o600)
    assert stand_in.start_scheduler() == [f"--adopt-hami-created-before={adopt}"]
    c.restart("fracgpu-kube-scheduler")
    # The guide's block: the signing key exists; the plugins, started without one, restarted.
    for line in guide_block(4):
        run_line(line, env)
        stand_in.sync_plugins()
    assert all(w[0] == "fracgpu" and w[2] != "{}" for w in stand_in.plugins.values()), stand_in.plugins
    keep.check("after step 4's install")
    def adopted():
        t = scheduler_log(c)
        return t if all(f"pod {NS}/{n}: unsigned (HAMi) allocation on node " in t for n in ("hami-a", "hami-a2", "hami-b")) else None
    try:
        log = c.wait("the adoption of HAMi's three pods", adopted, 60)
    except AssertionError as e:
        raise AssertionError(f"{e}; the scheduler's log says: "
                             f"{[ln for ln in scheduler_log(c).splitlines() if 'adopt' in ln or NS in ln]}") from None
    for n, node in (("hami-a", node_a), ("hami-a2", node_a), ("hami-b", node_b)):
        assert (f"pod {NS}/{n}: unsigned (HAMi) allocation on node {node} verified against the node and adopted: "
                "counted as written") in log, n
    refused = [ln for ln in log.splitlines() if "not adopted" in ln and "is not known (yet)" not in ln]
    assert not refused, refused
    # node-b: 4,576 MiB left beside the adopted pod. 5,000 MiB more does not fit; 4,000 fits only
    # if the adopted pod counts as written (as its whole node, nothing would).
    fracgpu_pod(c, "nofit-b", node_b, 5000)
    time.sleep(6)
    assert not c.get("-n", NS, "pod", "nofit-b")["spec"].get("nodeName"), "5,000 MiB placed where 4,576 were free"
    fracgpu_pod(c, "fit-b", node_b, 4000)
    keep.add("fit-b", 4000)
    assert not c.get("-n", NS, "pod", "nofit-b")["spec"].get("nodeName")
    # A pod written for HAMi is admitted, renamed and placed by fracgpu: one MiB more than GPU 0
    # of node-a has left beside adopted hami-a, so it fits on GPU 1 (beside hami-a2) only.
    named = 16384 - used_a[0] - 10000 + 1
    assert named <= 16384 - used_a[1] - 4000
    fracgpu_pod(c, "named-hami", node_a, named, scheduler="hami-scheduler")
    pod = keep.add("named-hami", named)
    assert pod["spec"]["schedulerName"] == "fracgpu-scheduler"
    assert container_env(keep.pods["named-hami"][2])["NVIDIA_VISIBLE_DEVICES"] == gpus_a[1][0]
    assert "fracgpu.io/allocation-signature" in pod["metadata"]["annotations"]
    keep.check("after step 4")

    # ---- Step 5: the migration flags dropped, the DaemonSet's first, then the scheduler's once
    # none of HAMi's pods is left.
    overlay.plugin_flags = []
    overlay.write()
    c.kubectl("apply", "-k", str(overlay.dir), timeout=120)
    assert "--allow-unsigned" not in container_args(
        c.get("-n", "fracgpu-system", "daemonset", "fracgpu-device-plugin"), "device-plugin")
    stand_in.sync_plugins()
    assert all(w == ("fracgpu", ("--scheduler-name=fracgpu-scheduler",), w[2]) for w in stand_in.plugins.values())
    keep.check("after step 5's DaemonSet change")
    fracgpu_pod(c, "after-5", node_b, 500)
    keep.add("after-5", 500)
    c.kubectl("-n", NS, "delete", "pod", "hami-a", "hami-a2", "hami-b", "--wait=true", timeout=120)
    for n in ("hami-a", "hami-a2", "hami-b"):
        del keep.pods[n]
    overlay.scheduler_flags = []
    overlay.write()
    c.kubectl("apply", "-k", str(overlay.dir), timeout=120)
    assert stand_in.start_scheduler() == []
    keep.check("after step 5")
    # nofit-b fits now that hami-b is gone (the restarted scheduler counts what runs).
    keep.add("nofit-b", 5000, timeout=150)
