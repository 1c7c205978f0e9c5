"""The real-cluster half of `make sandbox` (scripts/sandbox.sh, README "Try it without a GPU or a
cluster"), on a cluster scripts/cluster.sh brought up:

  python3 tests/realcluster/sandbox.py --state DIR [--user alice] [--namespace team-a] [--ready-file F]

1. Applies Kubeflow's Notebook CRD and the notebook controller's RBAC (tests/realcluster/kubeflow),
   creates the user's namespace with a RoleBinding that lets the user create, list and get
   notebooks there (what a Kubeflow Profile gives its owner, reduced to notebooks), as
   test_notebook.py does.
2. Seeds a few running slices: pods created with the admin's kubeconfig through fracgpu's real
   webhook, each pinned to one GPU with nvidia.com/use-gpuuuid; waits until they run and prints
   where each landed (from the pod's annotations and the container config the node's fake CRI
   runtime recorded).
3. Writes `ready` to the ready file, then until stdin closes (or SIGTERM/SIGINT): runs the
   notebook-controller stand-in (notebook_controller.py) over every Notebook, and prints each new
   pod's journey as the real cluster reports it: the pod as the webhook admitted it
   (spec.schedulerName), fracgpu's decision once bound (hami.io/vgpu-node and
   hami.io/vgpu-devices-allocated), the Events of the real components (StatefulSet controller,
   kube-scheduler, fracgpu's extender, kubelet), the limits the kubelet gave the container (the
   fake CRI record: NVIDIA_VISIBLE_DEVICES, CUDA_DEVICE_MEMORY_LIMIT_0, CUDA_DEVICE_SM_LIMIT) and
   Running. Every line goes to stdout as it happens.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from notebook_controller import CONTROLLER_SA, NotebookControllerStandIn, kubectl_runner, token_kubeconfig
from records import container_env, read_record

KUBEFLOW = Path(__file__).resolve().parent / "kubeflow"
SYSTEM_NAMESPACES = {"kube-system", "kube-public", "kube-node-lease", "fracgpu-system", "kubeflow"}
SEED_LABEL = "fracgpu.io/sandbox-seed"
# (namespace, name, node index, GPU index on the node, MiB, % of the SMs): the running slices seeded.
SEEDS = [("team-b", "train", 0, 1, 12288, 0), ("team-a", "infer", 1, 0, 10000, 50),
         ("team-c", "etl", 0, 0, 4096, 20)]

_print_lock = threading.Lock()


def say(line):
    with _print_lock:
        print(line, flush=True)


class Sandbox:
    def __init__(self, state: Path, user: str, namespace: str):
        self.state = state
        self.user = user
        self.namespace = namespace
        self.kubectl_bin = Path((state / "bin").read_text().strip()) / "kubectl"
        self.admin = state / "admin.kubeconfig"
        self.kubectl = kubectl_runner(self.kubectl_bin, self.admin)
        # node -> [(uuid, MiB)] in the order the node's fake NVML lists them (GPU index).
        self.gpus = {}
        for d in sorted((state / "nodes").iterdir()):
            self.gpus[d.name] = [(u, int(m)) for u, m in (g.rsplit(":", 1) for g in
                                                          (d / "gpus").read_text().strip().split(","))]
        self.stop = threading.Event()
        self.procs = []

    def gpu_of(self, uuid):
        """(node, index, MiB) of a GPU UUID."""
        for node, gpus in self.gpus.items():
            for i, (u, mib) in enumerate(gpus):
                if u == uuid:
                    return node, i, mib
        return None, None, None

    def apply(self, objs):
        self.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in objs))

    def wait(self, what, fn, timeout=60.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                got = fn()
            except (AssertionError, json.JSONDecodeError):
                got = None
            if got:
                return got
            time.sleep(0.25)
        raise SystemExit(f"sandbox: timed out after {timeout:.0f} s waiting for {what}")

    def get(self, *args):
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def setup_kubeflow(self):
        self.kubectl("apply", "-k", str(KUBEFLOW), "--server-side", "--field-manager", "fracgpu-sandbox")
        self.wait("notebooks.kubeflow.org Established", lambda: any(
            c["type"] == "Established" and c["status"] == "True"
            for c in (self.get("crd", "notebooks.kubeflow.org").get("status") or {}).get("conditions") or []))
        self.wait("kubeflow.org/v1 notebooks served",
                  lambda: "notebooks" in self.kubectl("get", "--raw", "/apis/kubeflow.org/v1").stdout)
        namespaces = sorted({self.namespace} | {s[0] for s in SEEDS})
        self.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in namespaces])
        self.apply([
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": "notebook-editor", "namespace": self.namespace},
             "rules": [{"apiGroups": ["kubeflow.org"], "resources": ["notebooks"],
                        "verbs": ["create", "list", "get"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": f"{self.user}-notebooks", "namespace": self.namespace},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "notebook-editor"},
             "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": self.user}]},
        ])
        say(f"sandbox: Kubeflow's Notebook CRD applied (tests/realcluster/kubeflow); namespaces "
            f"{', '.join(namespaces)}; RoleBinding {self.namespace}/{self.user}-notebooks: {self.user} may "
            f"create, list and get notebooks in {self.namespace} (the real API server's SubjectAccessReview "
            f"answers the UI from it)")

    def describe_nodes(self):
        total = sum(len(g) for g in self.gpus.values())
        say(f"real cluster: {len(self.gpus)} nodes, {total} fake GPUs (fracgpu device-plugin over the fake NVML):")
        for node, gpus in self.gpus.items():
            for i, (uuid, mib) in enumerate(gpus):
                say(f"  {node} GPU {i} {uuid} ({mib} MiB)")

    def record_env(self, node, ns, pod, container):
        rec = read_record(self.state, node, ns, pod, container)
        return container_env(rec) if rec is not None else None

    def seed(self):
        nodes = list(self.gpus)
        say(f"sandbox: seeding {len(SEEDS)} running slices (pods created by the cluster admin through "
            "fracgpu's webhook, pinned with nvidia.com/use-gpuuuid):")
        pods = []
        for ns, name, ni, gi, mib, cores in SEEDS:
            uuid = self.gpus[nodes[ni % len(nodes)]][gi][0]
            limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": mib}
            if cores:
                limits["nvidia.com/gpucores"] = cores
            pods.append({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": name, "namespace": ns, "labels": {SEED_LABEL: "true"},
                                      "annotations": {"nvidia.com/use-gpuuuid": uuid}},
                         "spec": {"containers": [{"name": "main", "image": "pytorch/pytorch:2.4.0",
                                                  "resources": {"limits": limits}}]}})
        self.apply(pods)
        for ns, name, *_ in SEEDS:
            pod = self.wait(f"{ns}/{name} Running", lambda: (lambda p: p if p["status"].get("phase") == "Running"
                                                            else None)(self.get("-n", ns, "pod", name)), 120)
            node = pod["spec"]["nodeName"]
            env = self.wait(f"the CRI record of {ns}/{name}", lambda: self.record_env(node, ns, name, "main"))
            say(f"  {ns}/{name}: {self.placement(pod)}, running "
                f"(CUDA_DEVICE_MEMORY_LIMIT_0={env.get('CUDA_DEVICE_MEMORY_LIMIT_0')})")

    def placement(self, pod):
        """"node-a GPU 1 GPU-… (16384 MiB): 12288 MiB, 0 % of the SMs" from the pod's annotations."""
        ann = pod["metadata"].get("annotations") or {}
        out = []
        for container in ann.get("hami.io/vgpu-devices-allocated", "").split(";"):
            for dev in filter(None, container.split(":")):
                uuid, _, mib, cores = dev.split(",")
                node, i, total = self.gpu_of(uuid)
                out.append(f"{node} GPU {i} {uuid} ({total} MiB): {mib} MiB, {cores} % of the SMs")
        return "; ".join(out) or "no GPU"

    # ---- the journey of each new pod, as the real cluster reports it.

    def watch(self, kind, on_event):
        """Streams `kubectl get KIND -A --output-watch-events -o json` into on_event(type, obj),
        less the objects that were there before (their ADDED events of the initial list). Returns
        the pump thread once the first object has arrived: kubectl lists, then watches from the
        list's resourceVersion, so from then on no new object is missed (no --watch-only, whose
        watch starts at some unknown moment after the call)."""
        initial = {o["metadata"]["uid"] for o in self.get(kind, "-A")["items"]}
        started = threading.Event()
        p = subprocess.Popen([str(self.kubectl_bin), "--kubeconfig", str(self.admin), "get", kind, "-A",
                              "--watch", "--output-watch-events", "-o", "json"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.procs.append(p)

        def pump():
            dec = json.JSONDecoder()
            buf = ""
            for chunk in iter(lambda: p.stdout.readline(), ""):
                buf += chunk
                while True:
                    s = buf.lstrip()
                    try:
                        ev, end = dec.raw_decode(s)
                    except json.JSONDecodeError:
                        break
                    buf = s[end:]
                    started.set()
                    obj = ev.get("object") or {}
                    if ev.get("type") == "ADDED" and obj.get("metadata", {}).get("uid") in initial:
                        continue
                    try:
                        on_event(ev.get("type"), obj)
                    except Exception as e:  # one odd object must not end the narration
                        say(f"sandbox: journey: {kind}: {e}")
        t = threading.Thread(target=pump, daemon=True)
        t.start()
        if not initial:  # an empty list prints nothing: the watch is up once kubectl has listed
            return t
        if not started.wait(60):
            raise SystemExit(f"sandbox: the watch of {kind} did not start within 60 s")
        return t

    def journey(self):
        seen = {}  # "ns/name" -> the steps printed
        seeded = {("Pod", ns, name) for ns, name, *_ in SEEDS}

        def mine(md):
            return md.get("namespace") not in SYSTEM_NAMESPACES

        def on_pod(kind, pod):
            md, spec, st = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
            if not mine(md) or (md.get("labels") or {}).get(SEED_LABEL):
                return
            key = f"{md['namespace']}/{md['name']}"
            steps = seen.setdefault(key, set())
            if kind == "DELETED":
                say(f"pod {key}: deleted")
                seen.pop(key, None)
                return
            if "admitted" not in steps:
                steps.add("admitted")
                limits = {k: v for c in spec.get("containers", [])
                          for k, v in ((c.get("resources") or {}).get("limits") or {}).items()
                          if k.startswith("nvidia.com/")}
                ask = ", ".join(f"{k}={v}" for k, v in sorted(limits.items()))
                say(f"webhook: pod {key} admitted: spec.schedulerName={spec.get('schedulerName')}"
                    + (f" ({ask})" if ask else ""))
            ann = md.get("annotations") or {}
            if "bound" not in steps and spec.get("nodeName") and ann.get("hami.io/vgpu-devices-allocated"):
                steps.add("bound")
                say(f"scheduler: pod {key} bound to {spec['nodeName']}: {self.placement(pod)} "
                    f"(hami.io/vgpu-node={ann.get('hami.io/vgpu-node')}, "
                    f"hami.io/bind-phase={ann.get('hami.io/bind-phase')})")
            if "allocated" not in steps and "bound" in steps and ann.get("hami.io/bind-phase") == "success":
                steps.add("allocated")
                say(f"device plugin: {spec['nodeName']} Allocate for {key}: hami.io/bind-phase=success")
            for cs in st.get("containerStatuses") or []:
                if "running" not in (cs.get("state") or {}) or ("started", cs["name"]) in steps:
                    continue
                steps.add(("started", cs["name"]))
                node = spec["nodeName"]
                env = None
                for _ in range(40):  # the record is written before the container starts
                    env = self.record_env(node, md["namespace"], md["name"], cs["name"])
                    if env is not None:
                        break
                    time.sleep(0.25)
                env = env or {}
                lim = env.get("CUDA_DEVICE_MEMORY_LIMIT_0", "")
                mib = f" ({lim[:-1]} MiB)" if lim.endswith("m") else ""
                say(f"kubelet: {node} started {key} container {cs['name']}; its config in the fake CRI "
                    f"runtime: NVIDIA_VISIBLE_DEVICES={env.get('NVIDIA_VISIBLE_DEVICES', '-')}, "
                    f"CUDA_DEVICE_MEMORY_LIMIT_0={lim or '-'}{mib}, "
                    f"CUDA_DEVICE_SM_LIMIT={env.get('CUDA_DEVICE_SM_LIMIT', '-')} (%)")
            if st.get("phase") == "Running" and "running" not in steps:
                steps.add("running")
                say(f"pod {key}: Running on {spec.get('nodeName')}")

        def on_event(kind, ev):
            obj = ev.get("involvedObject") or ev.get("regarding") or {}
            if kind != "ADDED" or not mine(ev.get("metadata") or {}):
                return
            if (obj.get("kind"), obj.get("namespace"), obj.get("name")) in seeded:
                return
            # No cluster DNS and no pod network here (docs/e2e.md "The real cluster"): the kubelet's
            # DNS fallback and the endpoint controllers refusing fake-cri's 127.0.0.2 are not part of
            # the journey.
            if ev.get("reason") in ("MissingClusterDNS", "FailedToUpdateEndpoint", "FailedToUpdateEndpointSlices"):
                return
            who = ev.get("reportingComponent") or (ev.get("source") or {}).get("component") or "?"
            say(f"event: {obj.get('kind')} {obj.get('namespace')}/{obj.get('name')}: {ev.get('reason')} "
                f"({who}): {ev.get('message')}")

        return [self.watch("pods", on_pod), self.watch("events", on_event)]

    def controller(self):
        kc = token_kubeconfig(self.kubectl, self.admin, self.state / "notebook-controller.kubeconfig", *CONTROLLER_SA)
        c = NotebookControllerStandIn(kubectl_runner(self.kubectl_bin, kc))
        t = threading.Thread(target=c.run, args=(self.stop, 1.0, say), daemon=True)
        t.start()
        return t

    def close(self):
        self.stop.set()
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--state", required=True, type=Path, help="scripts/cluster.sh's FRACGPU_CLUSTER_DIR")
    ap.add_argument("--user", default="alice")
    ap.add_argument("--namespace", default="team-a")
    ap.add_argument("--ready-file", type=Path)
    args = ap.parse_args()
    sb = Sandbox(args.state, args.user, args.namespace)
    done = threading.Event()
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, lambda *_: done.set())
    try:
        sb.setup_kubeflow()
        sb.describe_nodes()
        sb.seed()
        sb.journey()
        sb.controller()
        if args.ready_file:
            args.ready_file.write_text("ready\n")
        say("real cluster: ready")

        def stdin_eof():
            try:
                while os.read(0, 4096):
                    pass
            except OSError:
                pass
            done.set()
        threading.Thread(target=stdin_eof, daemon=True).start()
        done.wait()
    finally:
        sb.close()


if __name__ == "__main__":
    sys.exit(main())
