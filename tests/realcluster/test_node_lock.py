"""`fracgpu scheduler --node-lock=bind-phase` on the real cluster (docs/scheduler.md "Node lock"):
three GPU pods created in one apply for one node are bound by the real kube-scheduler through the
extender without the Node lock `hami.io/mutex.lock` ever appearing on the node (a watch of the
node from before the pods to after they run), each is served by the real kubelet's Allocate
through fracgpu's device plugin with its own allocation (the CRI record of each container carries
the memory limit its own signed decision names, and the three sizes differ, so a pod served
another's allocation fails the test), and each ends with `hami.io/bind-phase: success`. The
scheduler runs with the flag for this test only (scripts/cluster.sh reads
<state>/extra-args/fracgpu-scheduler at each start) and is restarted without it at the end."""

import json
import subprocess
import threading

from records import container_env

NODE = "node-a"
LOCK = "hami.io/mutex.lock"
SIZES = {"lock-a": 1000, "lock-b": 1100, "lock-c": 1200}  # MiB; distinct on purpose


def _pod(name, mib):
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"test": "node-lock"}},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": NODE},
                 "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"],
                                 "resources": {"limits": {"nvidia.com/gpu": 1,
                                                          "nvidia.com/gpumem": mib}}}]}}


class _NodeWatch:
    """Every version of NODE the API server sends from now until stop(): `kubectl get -w` with
    watch events, which prints each as it comes (`get --raw` of a watch prints nothing until
    the response ends)."""

    def __init__(self, cluster):
        self.text = []
        self.p = subprocess.Popen(
            [str(cluster.bin / "kubectl"), "--kubeconfig", str(cluster.kubeconfig), "get", "node",
             NODE, "--watch", "--output-watch-events", "-o", "json"],
            stdout=subprocess.PIPE, text=True)
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stdout:
            self.text.append(line)

    def events(self):
        """The watch events printed so far, parsed (one JSON object each, several lines)."""
        text, out, at = "".join(self.text), [], 0
        decoder = json.JSONDecoder()
        while True:
            while at < len(text) and text[at].isspace():
                at += 1
            if at >= len(text):
                return out
            try:
                ev, at = decoder.raw_decode(text, at)
            except ValueError:
                return out  # an object still being printed
            out.append(ev)

    def stop(self):
        self.p.terminate()
        self.p.wait(timeout=30)
        self.t.join(timeout=30)
        return self.events()


def test_bind_phase_lock_serves_each_pod_its_own_allocation_without_a_node_lock(cluster):
    extra = cluster.dir / "extra-args" / "fracgpu-scheduler"
    before = extra.read_text() if extra.exists() else None
    extra.parent.mkdir(exist_ok=True)
    extra.write_text((before or "") + "--node-lock=bind-phase\n")
    try:
        cluster.restart("fracgpu-scheduler")
        watch = _NodeWatch(cluster)
        cluster.wait("the node watch's first event", watch.events, 30)
        # One apply, in reverse name order: kube-scheduler binds lock-c first, while a device
        # plugin that chose among several pods being allocated in one bind-time second would
        # take lock-a first (oldest bind-time, then name) and serve lock-c's container lock-a's
        # 1000 MiB. With the hold only one pod of the node is ever being allocated.
        cluster.apply(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
            _pod(name, SIZES[name]) for name in sorted(SIZES, reverse=True)]}))
        pods = {name: cluster.wait(f"{name} Running", lambda n=name: cluster.running("default", n),
                                   150)
                for name in SIZES}
        events = watch.stop()
        for name, mib in SIZES.items():
            ann = pods[name]["metadata"]["annotations"]
            assert pods[name]["spec"]["nodeName"] == NODE
            assert ann.get("fracgpu.io/allocation-signature"), ann
            assert f",NVIDIA,{mib},0:" in ann["hami.io/vgpu-devices-allocated"], ann
            p = cluster.wait(f"{name} bind-phase success",
                             lambda n=name: (lambda q: q if q["metadata"]["annotations"].get(
                                 "hami.io/bind-phase") == "success" else None)(
                                 cluster.get("-n", "default", "pod", n)), 30)
            assert p["metadata"]["annotations"]["hami.io/vgpu-devices-to-allocate"].strip(";") == ""
            rec = cluster.wait("the CRI record",
                               lambda n=name: cluster.record(NODE, "default", n, "c"), 30)
            assert container_env(rec)["CUDA_DEVICE_MEMORY_LIMIT_0"] == f"{mib}m", (name, rec)
        assert events and events[0]["type"] == "ADDED", events[:1]
        locked = [e["object"]["metadata"]["annotations"][LOCK] for e in events
                  if LOCK in (e["object"]["metadata"].get("annotations") or {})]
        assert not locked, f"the Node lock appeared on {NODE}: {locked}"
    finally:
        cluster.kubectl("delete", "pod", "-n", "default", "-l", "test=node-lock", "--wait=false",
                        check=False)
        if before is None:
            extra.unlink()
        else:
            extra.write_text(before)
        cluster.restart("fracgpu-scheduler")
