#!/usr/bin/env python3
"""The Helm chart deploy/helm/fracgpu (docs/install.md "Helm", issue 34 item 8), through the helm
that scripts/helm-build.sh builds from its Go module:

* `helm lint --strict` passes with the default values and with a HAMi user's values file
  (tests/deploy/helm-hami-values.yaml);
* with the default values `helm template` renders exactly the objects of deploy/ as kustomize
  renders them (every field: args, containers, volumes, RBAC, the configs inside ConfigMaps),
  apart from the chart's own metadata labels; with prometheus.enabled and
  devicePlugin.createRuntimeClass those of deploy/ with its prometheus and runtime-class
  Components. deploy/ is rendered here by a reader of exactly the kustomize features it uses
  (resources, images, components, JSON patches), checked against `kubectl kustomize` where the
  local cluster's kubectl is built;
* each HAMi value of the HAMi values file sets what docs/hami-migration.md says, checked against
  the value itself; values fracgpu cannot honour fail the render with a message.

Exit 77 (ctest: skipped) only when helm is not built (`scripts/helm-build.sh`, make test does)."""

import copy
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
CHART = os.path.join(ROOT, "deploy", "helm", "fracgpu")
DEPLOY = os.path.join(ROOT, "deploy")
HAMI_VALUES = os.path.join(HERE, "helm-hami-values.yaml")
# Labels the chart adds to every object's metadata (Helm's conventions); deploy/ has none of them.
CHART_LABELS = ("helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by",
                "app.kubernetes.io/version")


def helm_binary():
    p = subprocess.run(["bash", os.path.join(ROOT, "scripts", "helm-build.sh"), "--cached"],
                       capture_output=True, text=True, timeout=60)
    return p.stdout.strip().splitlines()[-1] if p.returncode == 0 else None


HELM = helm_binary()


def helm(*args, check=True):
    p = subprocess.run([HELM, *args], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "HELM_CACHE_HOME": TMP.name, "HELM_CONFIG_HOME": TMP.name,
                            "HELM_DATA_HOME": TMP.name})
    if check and p.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)}: exit {p.returncode}\n{p.stderr}")
    return p


def template(*args, check=True):
    """helm template of the chart (release fracgpu); [objects] or the failed CompletedProcess."""
    p = helm("template", "fracgpu", CHART, *args, check=check)
    if p.returncode != 0:
        return p
    return [o for o in yaml.safe_load_all(p.stdout) if o]


# ---- deploy/ as kustomize renders it: the features its kustomization files use, no others.

def _kustomize(path):
    kfile = os.path.join(path, "kustomization.yaml")
    with open(kfile) as f:
        k = yaml.safe_load(f)
    known = {"apiVersion", "kind", "resources", "images", "components", "patches"}
    unknown = set(k) - known
    assert not unknown, f"{kfile}: kustomize fields this reader does not render: {sorted(unknown)}"
    objs = []
    for r in k.get("resources", []):
        p = os.path.normpath(os.path.join(path, r))
        if os.path.isdir(p):
            objs += _kustomize(p)
        else:
            with open(p) as f:
                objs += [o for o in yaml.safe_load_all(f) if o]
    for c in k.get("components", []):
        objs = _component(os.path.normpath(os.path.join(path, c)), objs)
    for patch in k.get("patches", []):
        _patch(objs, patch)
    for img in k.get("images", []):
        for o in objs:
            for c in _containers(o):
                name, _, tag = c["image"].partition(":")
                if name == img["name"]:
                    c["image"] = f"{img.get('newName', name)}:{img.get('newTag', tag)}"
    return objs


def _component(path, objs):
    with open(os.path.join(path, "kustomization.yaml")) as f:
        k = yaml.safe_load(f)
    assert k["kind"] == "Component", path
    unknown = set(k) - {"apiVersion", "kind", "resources", "patches"}
    assert not unknown, f"{path}: kustomize fields this reader does not render: {sorted(unknown)}"
    for r in k.get("resources", []):
        with open(os.path.join(path, r)) as f:
            objs += [o for o in yaml.safe_load_all(f) if o]
    for patch in k.get("patches", []):
        _patch(objs, patch)
    return objs


def _patch(objs, patch):
    """A JSON 6902 patch (add, remove, replace; "-" appends to a list) on the object its target
    names, or a strategic merge patch that deletes it ($patch: delete)."""
    t = patch["target"]
    ops = yaml.safe_load(patch["patch"])
    hits = [o for o in objs if o["kind"] == t["kind"] and o["metadata"]["name"] == t["name"]]
    assert len(hits) == 1, patch
    if isinstance(ops, dict):
        assert ops.get("$patch") == "delete", f"strategic merge patch not rendered here: {patch}"
        objs.remove(hits[0])
        return
    for op in ops:
        keys = [k.replace("~1", "/").replace("~0", "~") for k in op["path"].split("/")[1:]]
        node = hits[0]
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        last = (len(node) if keys[-1] == "-" else int(keys[-1])) if isinstance(node, list) else keys[-1]
        if op["op"] == "add" and isinstance(node, list):
            node.insert(last, op["value"])
        elif op["op"] in ("add", "replace"):
            node[last] = op["value"]
        elif op["op"] == "remove":
            del node[last]
        else:
            raise AssertionError(f"patch op {op['op']} not rendered here")


def _containers(o):
    spec = o.get("spec", {})
    if o["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    pod = spec.get("template", {}).get("spec", {})
    return pod.get("initContainers", []) + pod.get("containers", [])


def deploy_rendered(components=()):
    """deploy/, with Components as a kustomization outside it adds them (docs/install.md,
    docs/dra.md: `resources: [deploy]`, `components: [deploy/<c>]`): after deploy/'s own images:."""
    objs = _kustomize(DEPLOY)
    for c in components:
        objs = _component(os.path.join(DEPLOY, c), objs)
    return objs


def kustomize_images():
    with open(os.path.join(DEPLOY, "kustomization.yaml")) as f:
        return {i["name"]: i for i in yaml.safe_load(f)["images"]}


# ---- comparison

# ConfigMap data that is YAML or JSON: compared parsed (the text's layout is free).
PARSED_DATA = {"config.yaml": yaml.safe_load, "device-config.yaml": yaml.safe_load, "config.json": json.loads}


def normalise(o):
    o = copy.deepcopy(o)
    md = o["metadata"]
    labels = {k: v for k, v in md.get("labels", {}).items() if k not in CHART_LABELS}
    if labels:
        md["labels"] = labels
    else:
        md.pop("labels", None)
    if o["kind"] == "ConfigMap":
        o["data"] = {k: PARSED_DATA.get(k, lambda s: s)(v) for k, v in o.get("data", {}).items()}
    return o


def key(o):
    return (o["apiVersion"], o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])


def by_key(objs):
    out = {}
    for o in objs:
        assert key(o) not in out, f"two objects {key(o)}"
        out[key(o)] = normalise(o)
    return out


def diff(a, b, path=""):
    """The first few places where a and b differ, as readable lines."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            if k not in a:
                out.append(f"{path}/{k}: only in the chart: {b[k]!r}")
            elif k not in b:
                out.append(f"{path}/{k}: only in deploy/: {a[k]!r}")
            else:
                out += diff(a[k], b[k], f"{path}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += diff(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [f"{path}: deploy/ {a!r}, chart {b!r}"]


def find(objs, kind, name):
    hits = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(hits) == 1, f"{kind}/{name}: {len(hits)} rendered"
    return hits[0]


def container(objs, kind, name, cname):
    o = find(objs, kind, name)
    return next(c for c in _containers(o) if c["name"] == cname)


def pod_spec(objs, kind, name):
    o = find(objs, kind, name)
    spec = o["spec"]["jobTemplate"]["spec"] if kind == "CronJob" else o["spec"]
    return spec["template"]["spec"]


class HelmChart(unittest.TestCase):
    maxDiff = None

    def assert_same_objects(self, want_objs, got_objs):
        want, got = by_key(want_objs), by_key(got_objs)
        self.assertEqual(sorted(want), sorted(got), "the chart and deploy/ render different objects")
        problems = []
        for k in sorted(want):
            problems += [f"{k[1]}/{k[3]}{d}" for d in diff(want[k], got[k])]
        self.assertFalse(problems, "the chart drifted from deploy/:\n" + "\n".join(problems[:40]))

    def kube_scheduler_tag(self):
        return kustomize_images()["registry.k8s.io/kube-scheduler"]["newTag"]

    def test_lint_strict_with_default_and_hami_values(self):
        helm("lint", "--strict", CHART)
        helm("lint", "--strict", CHART, "-f", HAMI_VALUES)

    def test_default_values_render_the_objects_of_deploy(self):
        got = template("--set", f"scheduler.kubeScheduler.image.tag={self.kube_scheduler_tag()}")
        self.assert_same_objects(deploy_rendered(), got)
        # The chart's own default images are those of deploy/kustomization.yaml's images:.
        img = kustomize_images()["fracgpu"]
        for c in container(got, "DaemonSet", "fracgpu-device-plugin", "device-plugin"), \
                container(got, "Deployment", "fracgpu-scheduler", "scheduler"):
            self.assertEqual(c["image"], f"{img['newName']}:{img['newTag']}")

    def test_kube_scheduler_tag_defaults_to_the_cluster_version(self):
        got = template("--kube-version", "v1.33.7")
        c = container(got, "Deployment", "fracgpu-kube-scheduler", "kube-scheduler")
        self.assertEqual(c["image"], "registry.k8s.io/kube-scheduler:v1.33.7")

    def test_prometheus_and_runtime_class_render_the_components_of_deploy(self):
        got = template("--set", f"scheduler.kubeScheduler.image.tag={self.kube_scheduler_tag()}",
                       "--set", "prometheus.enabled=true", "--set", "devicePlugin.createRuntimeClass=true",
                       "--set", "devicePlugin.runtimeClassName=nvidia")
        want = deploy_rendered(components=["prometheus", "runtime-class"])
        # What the runtime-class Component leaves to the operator (docs/install.md "Runtime class
        # and CDI") the chart does too: GPU pods get the class from the webhook's device config.
        cm = find(want, "ConfigMap", "fracgpu-device-config")
        dc = yaml.safe_load(cm["data"]["device-config.yaml"])
        dc["nvidia"]["runtimeClassName"] = "nvidia"
        cm["data"]["device-config.yaml"] = yaml.safe_dump(dc)
        self.assert_same_objects(want, got)

    def test_dra_enabled_renders_the_dra_component_of_deploy(self):
        got = template("--set", f"scheduler.kubeScheduler.image.tag={self.kube_scheduler_tag()}",
                       "--set", "dra.enabled=true")
        want = deploy_rendered(components=["dra"])
        # kustomize maps deploy/'s images only in deploy/'s own objects: the DRA driver's
        # DaemonSet, which the Component adds outside, keeps the bare name `fracgpu` (unless the
        # outer kustomization maps it too). The chart gives it fracgpu's image, as every other.
        img = kustomize_images()["fracgpu"]
        for c in _containers(find(want, "DaemonSet", "fracgpu-dra-driver")):
            self.assertEqual(c["image"], "fracgpu")
            c["image"] = f"{img['newName']}:{img['newTag']}"
        self.assert_same_objects(want, got)
        p = template("--set", "dra.enabled=true", "--kube-version", "v1.33.4", check=False)
        self.assertIn("serves no resource.k8s.io/v1", p.stderr)

    def test_deploy_reader_matches_kubectl_kustomize(self):
        cache = os.environ.get("FRACGPU_K8S_CACHE", os.path.expanduser("~/.cache/fracgpu/k8s"))
        kubectls = sorted(glob.glob(os.path.join(cache, "*", "kubectl")))
        if not kubectls:
            self.skipTest("no kubectl built (scripts/k8s-build.sh): the deploy/ reader is not cross-checked")
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as d:
            with open(os.path.join(d, "kustomization.yaml"), "w") as f:
                yaml.safe_dump({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                                "resources": [os.path.relpath(DEPLOY, d)],
                                "components": [os.path.relpath(os.path.join(DEPLOY, c), d)
                                               for c in ("prometheus", "runtime-class", "dra", "parking")]}, f)
            for path, comps in ((DEPLOY, ()), (d, ("prometheus", "runtime-class", "dra", "parking"))):
                out = subprocess.run([kubectls[-1], "kustomize", path], capture_output=True, text=True,
                                     check=True, timeout=120).stdout
                self.assert_same_objects([o for o in yaml.safe_load_all(out) if o], deploy_rendered(comps))

    def test_hami_values_set_what_they_say(self):
        with open(HAMI_VALUES) as f:
            v = yaml.safe_load(f)
        got = template("-f", HAMI_VALUES)
        g, s, d = v["global"], v["scheduler"], v["devicePlugin"]
        reg, tag = g["imageRegistry"], g["imageTag"]

        # Images: global.imageRegistry before every registry, global.imageTag, per-component repository.
        sched = container(got, "Deployment", "fracgpu-scheduler", "scheduler")
        self.assertEqual(sched["image"], f"{reg}/fracgpu/fracgpu:{tag}")
        self.assertEqual(sched["imagePullPolicy"], "Always")
        mon = container(got, "DaemonSet", "fracgpu-device-plugin", "monitor")
        self.assertEqual(mon["image"], f"{reg}/{d['monitor']['image']['repository']}:{tag}")
        ks = container(got, "Deployment", "fracgpu-kube-scheduler", "kube-scheduler")
        self.assertEqual(ks["image"], f"{reg}/kube-scheduler:{s['kubeScheduler']['image']['tag']}")
        self.assertEqual(ks["imagePullPolicy"], "IfNotPresent")
        for kind, name in (("Deployment", "fracgpu-scheduler"), ("DaemonSet", "fracgpu-device-plugin"),
                           ("Deployment", "fracgpu-ui"), ("Job", "fracgpu-certs"),
                           ("CronJob", "fracgpu-certs-renew"), ("Deployment", "fracgpu-kube-scheduler")):
            self.assertEqual(pod_spec(got, kind, name).get("imagePullSecrets"),
                             [{"name": n} for n in g["imagePullSecrets"]], name)
        for o in got:
            self.assertEqual(o["metadata"]["labels"].get("team"), g["labels"]["team"], key(o))

        # The scheduler's flags.
        args = sched["args"]
        port = s["metricsBindAddress"].rsplit(":", 1)[1]
        for want in (f"--scheduler-name={v['schedulerName']}",
                     f"--node-scheduler-policy={s['defaultSchedulerPolicy']['nodeSchedulerPolicy']}",
                     f"--gpu-scheduler-policy={s['defaultSchedulerPolicy']['gpuSchedulerPolicy']}",
                     f"--metrics-port={port}", "--leader-elect", "--node-lock-timeout=120",
                     "--node-label-selector=gpu=on", "--legacy-metrics"):
            self.assertIn(want, args)
        self.assertEqual(find(got, "Deployment", "fracgpu-scheduler")["spec"]["replicas"], s["replicas"])
        self.assertIn({"name": "metrics", "containerPort": int(port), "protocol": "TCP"}, sched["ports"])
        self.assertEqual(find(got, "Deployment", "fracgpu-scheduler")["spec"]["template"]["metadata"]
                         ["annotations"], s["podAnnotations"])
        svc = find(got, "Service", "fracgpu-scheduler")["spec"]
        self.assertEqual(svc["type"], "NodePort")
        self.assertEqual({p["name"]: (p["port"], p["nodePort"]) for p in svc["ports"]},
                         {"https": (s["service"]["httpPort"], s["service"]["schedulerPort"]),
                          "metrics": (int(port), s["service"]["monitorPort"])})
        ui = container(got, "Deployment", "fracgpu-ui", "ui")
        self.assertIn(f"--gpu-scheduler-policy={s['defaultSchedulerPolicy']['gpuSchedulerPolicy']}", ui["args"])

        # kube-scheduler's config: the profile, the extender's timeout and managed resources.
        ksc = yaml.safe_load(find(got, "ConfigMap", "fracgpu-kube-scheduler-config")["data"]["config.yaml"])
        self.assertEqual(ksc["profiles"], [{"schedulerName": v["schedulerName"]}])
        ext = ksc["extenders"][0]
        self.assertEqual(ext["httpTimeout"], f"{s['extenderHTTPTimeout']}s")
        self.assertEqual([r["name"] for r in ext["managedResources"]],
                         [v[k] for k in ("resourceName", "resourceMem", "resourceMemPercentage",
                                         "resourceCores", "resourcePriority")])

        # The webhook.
        wh = find(got, "MutatingWebhookConfiguration", "fracgpu-webhook")["webhooks"][0]
        w = s["admissionWebhook"]
        self.assertEqual(wh["failurePolicy"], w["failurePolicy"])
        self.assertEqual(wh["reinvocationPolicy"], w["reinvocationPolicy"])
        self.assertEqual(wh["namespaceSelector"]["matchLabels"], w["namespaceSelector"]["matchLabels"])
        self.assertEqual(wh["namespaceSelector"]["matchExpressions"], [
            {"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]},
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": w["whitelistNamespaces"]}])
        self.assertEqual(wh["objectSelector"]["matchExpressions"],
                         [{"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]}]
                         + w["objectSelector"]["matchExpressions"])

        # The device config, each key from its HAMi value, and only keys fracgpu's parser knows
        # (docs/hami-migration.md "Device config keys", which deviceplugin_config_test checks
        # against the parser).
        dc = yaml.safe_load(find(got, "ConfigMap", "fracgpu-device-config")["data"]["device-config.yaml"])
        self.assertEqual(dc, {"nvidia": {
            "resourceCountName": v["resourceName"], "resourceMemoryName": v["resourceMem"],
            "resourceMemoryPercentageName": v["resourceMemPercentage"],
            "resourceCoreName": v["resourceCores"], "resourcePriorityName": v["resourcePriority"],
            "overwriteEnv": False, "deviceSplitCount": d["deviceSplitCount"],
            "deviceMemoryScaling": d["deviceMemoryScaling"], "deviceCoreScaling": d["deviceCoreScaling"],
            "preConfiguredDeviceMemory": d["preConfiguredDeviceMemory"],
            "libCudaLogLevel": v["devices"]["nvidia"]["libCudaLogLevel"],
            "gpuCorePolicy": v["devices"]["nvidia"]["gpuCorePolicy"],
            "disableCoreLimit": True, "enableNumaTopology": True, "runtimeClassName": d["runtimeClassName"]}})
        with open(os.path.join(ROOT, "docs", "hami-migration.md")) as f:
            section = f.read().split("### Device config keys", 1)[1].split("\n#", 1)[0]
        documented = set(re.findall(r"^\| `(\w+)` \|", section, re.M))
        self.assertIn("deviceSplitCount", documented)
        self.assertLessEqual(set(dc["nvidia"]), documented)
        nc = find(got, "ConfigMap", "fracgpu-node-config")["data"]["config.json"]
        self.assertEqual(json.loads(nc), json.loads(d["nodeConfiguration"]["config"]))

        # The DaemonSet: hook path, library folder, node selector, runtime class, strategy, flags.
        ds = pod_spec(got, "DaemonSet", "fracgpu-device-plugin")
        self.assertEqual(ds["runtimeClassName"], d["runtimeClassName"])
        self.assertEqual(ds["nodeSelector"], {k: x for k, x in d["nvidiaNodeSelector"].items() if x is not None})
        self.assertEqual(ds["tolerations"], d["tolerations"])
        self.assertEqual(find(got, "DaemonSet", "fracgpu-device-plugin")["spec"]["updateStrategy"],
                         d["updateStrategy"])
        dp = container(got, "DaemonSet", "fracgpu-device-plugin", "device-plugin")
        for want in (f"--hook-path={g['gpuHookPath']}", f"--socket-dir={d['pluginPath']}",
                     f"--scheduler-name={v['schedulerName']}", f"--device-list-strategy={d['deviceListStrategy']}"):
            self.assertIn(want, dp["args"])
        self.assertIn(f"--hook-path={g['gpuHookPath']}", mon["args"])
        self.assertIn(f"--node-dir={d['libPath']}/node", mon["args"])
        self.assertIn("--legacy-metrics", mon["args"])
        init = container(got, "DaemonSet", "fracgpu-device-plugin", "install-libvgpu")
        self.assertEqual(init["command"][-1], d["libPath"])
        vols = {x["name"]: x for x in ds["volumes"]}
        self.assertEqual(vols["vgpu"]["hostPath"]["path"], d["libPath"])
        self.assertEqual(vols["device-plugins"]["hostPath"]["path"], d["pluginPath"])
        rc = find(got, "RuntimeClass", d["runtimeClassName"])
        self.assertEqual(rc["handler"], "nvidia")

        # prometheus.enabled: both ServiceMonitors, on the ports the Services name.
        for name in ("fracgpu-scheduler", "fracgpu-device-plugin-monitor"):
            sm = find(got, "ServiceMonitor", name)
            self.assertEqual(sm["spec"]["endpoints"][0]["port"], "metrics")

    def test_namespace_override_moves_every_reference(self):
        ns = "gpu-system"
        got = template("--set", f"namespaceOverride={ns}")
        for o in got:
            if "namespace" in o["metadata"] and o["metadata"]["name"] != "fracgpu-kube-scheduler-auth-reader":
                self.assertEqual(o["metadata"]["namespace"], ns, key(o))
        self.assertEqual(find(got, "Namespace", ns)["metadata"]["labels"]["hami.io/webhook"], "ignore")
        args = container(got, "Deployment", "fracgpu-scheduler", "scheduler")["args"]
        for want in (f"--leader-elect-resource-namespace={ns}",
                     f"--scheduler-user=system:serviceaccount:{ns}:fracgpu-scheduler",
                     f"--device-plugin-user=system:serviceaccount:{ns}:fracgpu-device-plugin"):
            self.assertIn(want, args)
        self.assertIn(f"--namespace={ns}", container(got, "Job", "fracgpu-certs", "certs")["args"])
        ksc = yaml.safe_load(find(got, "ConfigMap", "fracgpu-kube-scheduler-config")["data"]["config.yaml"])
        self.assertEqual(ksc["extenders"][0]["urlPrefix"], f"https://fracgpu-scheduler.{ns}.svc:443")
        self.assertEqual(ksc["leaderElection"]["resourceNamespace"], ns)
        self.assertEqual(find(got, "MutatingWebhookConfiguration", "fracgpu-webhook")["webhooks"][0]
                         ["clientConfig"]["service"]["namespace"], ns)
        vap = find(got, "ValidatingAdmissionPolicy", "fracgpu-pod-annotations")
        expr = next(x["expression"] for x in vap["spec"]["variables"] if x["name"] == "fracgpu")
        self.assertIn(f"system:serviceaccount:{ns}:fracgpu-scheduler", expr)
        plugin = next(x["expression"] for x in vap["spec"]["variables"] if x["name"] == "devicePlugin")
        self.assertIn(f"system:serviceaccount:{ns}:fracgpu-device-plugin", plugin)
        # No account name left at the default namespace: the policy would exempt one account
        # and hold another, and the webhook skip a third.
        cond = find(got, "MutatingWebhookConfiguration", "fracgpu-webhook")["webhooks"][0]["matchConditions"]
        self.assertIn(f"system:serviceaccount:{ns}:fracgpu-device-plugin", cond[0]["expression"])
        for e in [x["expression"] for x in vap["spec"]["variables"] + vap["spec"]["validations"]] + \
                [c["expression"] for c in cond]:
            self.assertNotIn("fracgpu-system", e)
        for o in got:
            for sub in o.get("subjects", []):
                self.assertEqual(sub["namespace"], ns, key(o))

    def test_custom_url_and_switches(self):
        got = template("--set", "scheduler.admissionWebhook.customURL.enabled=true",
                       "--set", "scheduler.admissionWebhook.customURL.port=29443",
                       "--set", "ui.enabled=false", "--set", "scheduler.networkPolicy.enabled=false",
                       "--set", "admissionPolicy.enabled=false", "--set", "devicePlugin.enabled=false",
                       "--set", "scheduler.kubeScheduler.enabled=false", "--set", "namespace.create=false",
                       "--set", "devicePlugin.nodeConfiguration.externalConfigName=hami-device-plugin")
        wh = find(got, "MutatingWebhookConfiguration", "fracgpu-webhook")["webhooks"][0]
        self.assertEqual(wh["clientConfig"], {"url": "https://127.0.0.1:29443/webhook"})
        kinds = {(o["kind"], o["metadata"]["name"]) for o in got}
        for gone in (("Deployment", "fracgpu-ui"), ("NetworkPolicy", "fracgpu-scheduler"),
                     ("ValidatingAdmissionPolicy", "fracgpu-pod-annotations"),
                     ("DaemonSet", "fracgpu-device-plugin"), ("Deployment", "fracgpu-kube-scheduler"),
                     ("Namespace", "fracgpu-system"), ("ConfigMap", "fracgpu-node-config")):
            self.assertNotIn(gone, kinds)
        self.assertIn(("ConfigMap", "fracgpu-kube-scheduler-config"), kinds)
        got = template("--set", "devicePlugin.nodeConfiguration.externalConfigName=hami-device-plugin")
        vols = {x["name"]: x for x in pod_spec(got, "DaemonSet", "fracgpu-device-plugin")["volumes"]}
        self.assertEqual(vols["node-config"]["configMap"]["name"], "hami-device-plugin")
        # HAMi's extraNewArgs carries its own --config: dropped, the chart's stays the only one.
        got = template("--set", "scheduler.kubeScheduler.extraNewArgs={--config=/config/config.yaml,-v=4}")
        self.assertEqual(container(got, "Deployment", "fracgpu-kube-scheduler", "kube-scheduler")["command"],
                         ["kube-scheduler", "--config=/etc/kubernetes/fracgpu/config.yaml", "-v=4"])
        content = "nvidia:\n  resourceCountName: nvidia.com/gpu\n  memoryFactor: 1024\n"
        got = template("--set-string", f"device-config.content={content}")
        self.assertEqual(find(got, "ConfigMap", "fracgpu-device-config")["data"]["device-config.yaml"], content)

    def test_monitor_parking_is_off_by_default_and_renders_what_it_needs(self):
        # Off: the monitor's args, env and mounts are those of deploy/ (the render test above).
        mon = container(template(), "DaemonSet", "fracgpu-device-plugin", "monitor")
        self.assertFalse([a for a in mon["args"] if a.startswith("--park")])
        got = template("--set", "devicePlugin.monitor.parking.enabled=true",
                       "--set", "devicePlugin.monitor.parking.drivers={580.,575.57.08}",
                       "--set", "devicePlugin.monitor.parking.namespaces={notebooks,team-a}",
                       "--set", "devicePlugin.monitor.parking.idleSeconds=600")
        mon = container(got, "DaemonSet", "fracgpu-device-plugin", "monitor")
        for arg in ("--park", "--park-drivers=580.,575.57.08", "--park-namespaces=notebooks,team-a",
                    "--park-idle=600", "--cgroup-root=/host/sys/fs/cgroup"):
            self.assertIn(arg, mon["args"])
        env = {e["name"]: e.get("value") for e in mon["env"]}
        self.assertEqual(env["NVIDIA_DRIVER_CAPABILITIES"], "compute,utility")  # libcuda.so.1
        self.assertIn({"name": "host-cgroup", "mountPath": "/host/sys/fs/cgroup", "readOnly": True},
                      mon["volumeMounts"])
        # The eviction of borrowers on a wake: the RBAC of deploy/parking/, only when enabled.
        want = deploy_rendered(components=["parking"])
        for kind in ("ClusterRole", "ClusterRoleBinding"):
            self.assertFalse(diff(normalise(find(want, kind, "fracgpu-device-plugin-parking")),
                                  normalise(find(got, kind, "fracgpu-device-plugin-parking"))))
            self.assertFalse([o for o in template() + deploy_rendered()
                              if o["metadata"]["name"] == "fracgpu-device-plugin-parking"])
        spec = pod_spec(got, "DaemonSet", "fracgpu-device-plugin")
        self.assertTrue(spec["hostPID"])
        vols = {x["name"]: x for x in spec["volumes"]}
        self.assertEqual(vols["host-cgroup"]["hostPath"], {"path": "/sys/fs/cgroup", "type": "Directory"})
        # Enabled without an allow-list: the render fails (the monitor would refuse the flags).
        p = template("--set", "devicePlugin.monitor.parking.enabled=true", check=False)
        self.assertIsInstance(p, subprocess.CompletedProcess)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("devicePlugin.monitor.parking.drivers", p.stderr)

    def test_values_fracgpu_cannot_honour_fail_the_render(self):
        for args, says in (
                (["--set", "devicePlugin.migStrategy=mixed"], "fracgpu runs no GPU in MIG mode"),
                (["--set", "devicePlugin.libPath=/usr/lib/vgpu"], "must be <global.gpuHookPath>/vgpu"),
                (["--set", "scheduler.nodeLockExpire=5 minutes"], "scheduler.nodeLockExpire"),
                (["--set", "scheduler.metricsBindAddress=metrics"], "scheduler.metricsBindAddress"),
                (["--kube-version", "v1.29.3"], "set admissionPolicy.enabled=false"),
                (["--set", "scheduler.extender.extraArgs={--debug}"], "scheduler.extender.extraArgs: \"--debug\" is a flag of HAMi's"),
                (["--set", "devicePlugin.extraArgs={-v=4}"], "devicePlugin.extraArgs: \"-v=4\" is a flag of HAMi's")):
            p = template(*args, check=False)
            self.assertIsInstance(p, subprocess.CompletedProcess, args)
            self.assertNotEqual(p.returncode, 0, args)
            self.assertIn(says, p.stderr, args)
        got = template("--kube-version", "v1.29.3", "--set", "admissionPolicy.enabled=false")
        self.assertNotIn("ValidatingAdmissionPolicy", {o["kind"] for o in got})
        # Without the policy the device plugin's UPDATEs go to the webhook again (it alone holds
        # the device plugin to its two annotations then); the scheduler's still do not.
        cond = find(got, "MutatingWebhookConfiguration", "fracgpu-webhook")["webhooks"][0]["matchConditions"]
        self.assertEqual([c["name"] for c in cond], ["not-an-update-by-fracgpu"])
        self.assertNotIn("fracgpu-device-plugin", cond[0]["expression"])
        self.assertIn("system:serviceaccount:fracgpu-system:fracgpu-scheduler", cond[0]["expression"])
        on = find(template(), "MutatingWebhookConfiguration", "fracgpu-webhook")["webhooks"][0]["matchConditions"]
        self.assertIn("system:serviceaccount:fracgpu-system:fracgpu-device-plugin", on[0]["expression"])


if __name__ == "__main__":
    if HELM is None:
        print("helm_chart_test: SKIPPED: helm is not built (scripts/helm-build.sh builds it into "
              "~/.cache/fracgpu/helm; make test runs it)", file=sys.stderr)
        sys.exit(77)
    TMP = tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR"))
    unittest.main(verbosity=2)
