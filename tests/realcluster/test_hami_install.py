"""HAMi's install options on the real cluster (issue 34 items 2 and 3): the runtime class HAMi's
`runtimeClassName` sets on GPU pods, and CDI device injection as NVIDIA's device plugin offers it
(--device-list-strategy cdi-cri and cdi-annotations), each checked where the kubelet acts on it:
the pod runs with the RuntimeClass of deploy/runtime-class (the kubelet resolves it to its handler
before it asks the runtime for a sandbox, and refuses a pod whose class does not exist), and the
CreateContainerRequest the node's CRI runtime received carries the GPU's CDI device, in the CRI
field and as the cdi.k8s.io/ annotation; and a pod naming hami-scheduler is placed by fracgpu."""

import os
from pathlib import Path

import yaml

from records import container_env

REPO = Path(__file__).resolve().parents[2]


def _set_extra_args(cluster, component, args):
    """scripts/cluster.sh extra_args: the arguments `component` gets at its next (re)start."""
    d = cluster.dir / "extra-args"
    d.mkdir(exist_ok=True)
    f = d / component
    if args:
        f.write_text("".join(a + "\n" for a in args))
    elif f.exists():
        f.unlink()


def _node_names(cluster):
    return sorted(p.name for p in (cluster.dir / "nodes").iterdir() if p.is_dir())


def _rendered_with_component(cluster):
    """deploy/ with the deploy/runtime-class Component, as `kubectl kustomize` renders it."""
    d = cluster.dir / "runtime-class-overlay"
    d.mkdir(exist_ok=True)

    def rel(p):
        return os.path.relpath(p, d)

    (d / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [rel(REPO / "deploy")], "components": [rel(REPO / "deploy" / "runtime-class")]}))
    out = cluster.kubectl("kustomize", str(d)).stdout
    return [o for o in yaml.safe_load_all(out) if o]


def test_runtime_class_and_cdi_devices_reach_the_kubelet(cluster):
    objs = _rendered_with_component(cluster)
    rcs = [o for o in objs if o["kind"] == "RuntimeClass"]
    assert [(o["metadata"]["name"], o["handler"]) for o in rcs] == [("nvidia", "nvidia")]
    ds = [o for o in objs if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "fracgpu-device-plugin"]
    assert ds and ds[0]["spec"]["template"]["spec"]["runtimeClassName"] == "nvidia"
    cluster.apply(yaml.safe_dump(rcs[0]))

    # HAMi's device config key runtimeClassName, read by the scheduler's webhook.
    cm = cluster.get("-n", "fracgpu-system", "configmap", "fracgpu-device-config")
    dc = yaml.safe_load(cm["data"]["device-config.yaml"])
    dc["nvidia"]["runtimeClassName"] = "nvidia"
    dc_file = cluster.dir / "fracgpu" / "device-config-runtime-class.yaml"
    dc_file.write_text(yaml.safe_dump(dc))
    nodes = _node_names(cluster)
    ns, name = "default", "hami-cdi"
    try:
        _set_extra_args(cluster, "fracgpu-scheduler", [f"--device-config-file={dc_file}"])
        cluster.restart("fracgpu-scheduler")
        for n in nodes:
            _set_extra_args(cluster, f"device-plugin-{n}",
                            ["--device-list-strategy=envvar,cdi-cri,cdi-annotations"])
            cluster.restart(f"device-plugin-{n}")
        cluster.kubectl("delete", "-n", ns, "pod", name, "--ignore-not-found", "--wait=true")
        cluster.apply(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "1d"],
                                     "resources": {"limits": {"nvidia.com/gpu": "1",
                                                              "nvidia.com/gpumem": "1000"}}}]}}))
        pod = cluster.wait(f"{ns}/{name} Running", lambda: cluster.running(ns, name), 120)
        # The webhook set the class; the kubelet resolved it (a missing RuntimeClass fails the
        # sandbox) and the pod runs.
        assert pod["spec"]["runtimeClassName"] == "nvidia"
        node, uid = pod["spec"]["nodeName"], pod["metadata"]["uid"]
        rec = cluster.wait("the CRI record", lambda: cluster.record(node, ns, name, "main"), 30)
        env = container_env(rec)
        uuid = env["NVIDIA_VISIBLE_DEVICES"]  # envvar kept beside CDI
        assert uuid in dict(cluster.node_gpus(node))
        want = f"nvidia.com/gpu={uuid}"
        cfg = rec["config"]
        cdi = cfg.get("CDIDevices", cfg.get("cdiDevices"))
        assert cdi == [{"name": want}], cfg
        assert cfg.get("annotations", {}).get(f"cdi.k8s.io/fracgpu-device-plugin_{uid}-0") == want, cfg
    finally:
        cluster.kubectl("delete", "-n", ns, "pod", name, "--ignore-not-found", "--wait=true", check=False)
        _set_extra_args(cluster, "fracgpu-scheduler", [])
        cluster.restart("fracgpu-scheduler")
        for n in nodes:
            _set_extra_args(cluster, f"device-plugin-{n}", [])
            cluster.restart(f"device-plugin-{n}")
        cluster.kubectl("delete", "runtimeclass", "nvidia", "--ignore-not-found", check=False)


def test_pod_naming_hami_scheduler_is_placed_by_fracgpu(cluster):
    """A workload written for HAMi (schedulerName: hami-scheduler, issue 34 item 3) is admitted by
    the real API server's call to fracgpu's webhook, renamed to fracgpu-scheduler, placed and run."""
    ns, name = "default", "hami-named"
    cluster.kubectl("delete", "-n", ns, "pod", name, "--ignore-not-found", "--wait=true")
    cluster.apply(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
        "spec": {"schedulerName": "hami-scheduler",
                 "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "1d"],
                                 "resources": {"limits": {"nvidia.com/gpu": "1",
                                                          "nvidia.com/gpumem": "1000"}}}]}}))
    try:
        pod = cluster.wait(f"{ns}/{name} Running", lambda: cluster.running(ns, name), 90)
        assert pod["spec"]["schedulerName"] == "fracgpu-scheduler"
        assert pod["metadata"]["annotations"].get("hami.io/bind-phase") == "success"
        rec = cluster.wait("the CRI record", lambda: cluster.record(pod["spec"]["nodeName"], ns, name, "main"), 30)
        assert container_env(rec)["CUDA_DEVICE_MEMORY_LIMIT_0"] == "1000m"
    finally:
        cluster.kubectl("delete", "-n", ns, "pod", name, "--ignore-not-found", "--wait=true", check=False)
