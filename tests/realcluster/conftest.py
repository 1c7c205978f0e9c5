"""The local real cluster (scripts/cluster.sh) for the tests of tests/realcluster (make test-k8s).

One cluster at a time (device-plugin mode for test_journey.py, DRA mode for test_dra.py, helm mode
for test_helm_install.py: deploy/helm/fracgpu installed by `helm install` in place of deploy/),
brought up before the first test that needs it, taken down after the last.
With FRACGPU_CLUSTER_KEEP=1 it is left up afterwards (for debugging; `scripts/cluster.sh down`).
"""

import json
import os
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest

from records import read_record

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "scripts" / "cluster.sh"


class Cluster:
    """kubectl against the cluster, and the state folder of scripts/cluster.sh."""

    def __init__(self, state_dir: Path):
        self.dir = state_dir
        self.bin = Path((state_dir / "bin").read_text().strip())
        self.kubeconfig = state_dir / "admin.kubeconfig"
        self.restarts = []

    def kubectl(self, *args, kubeconfig=None, input=None, check=True, timeout=60):
        """Runs kubectl; returns CompletedProcess (text). Raises on a non-zero exit if check."""
        cmd = [str(self.bin / "kubectl"), "--kubeconfig", str(kubeconfig or self.kubeconfig), *args]
        p = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} exit {p.returncode}: {p.stderr.strip()}")
        return p

    def get(self, *args, **kw):
        """kubectl get ... -o json, parsed."""
        return json.loads(self.kubectl("get", *args, "-o", "json", **kw).stdout)

    def apply(self, manifest: str, *extra):
        return self.kubectl("apply", "-f", "-", *extra, input=manifest)

    def wait(self, what, fn, timeout=60.0, interval=0.25):
        """Polls fn() until it returns a truthy value; returns it. Fails with `what` on timeout."""
        end = time.monotonic() + timeout
        last = None
        while time.monotonic() < end:
            try:
                last = fn()
            # kubectl failing or slow, or an object without the field yet, while it settles
            except (AssertionError, KeyError, subprocess.TimeoutExpired) as e:
                last = e
            if last and not isinstance(last, Exception):
                return last
            time.sleep(interval)
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last})")

    def node_gpus(self, node):
        """The node's fake GPUs as scripts/cluster.sh gave them: [(uuid, MiB)]."""
        spec = (self.dir / "nodes" / node / "gpus").read_text().strip()
        return [(u, int(m)) for u, m in (d.rsplit(":", 1) for d in spec.split(","))]

    def running(self, namespace, name):
        """The pod when its phase is Running, else None (kubectl failing raises, which wait()
        takes as not yet)."""
        p = self.get("-n", namespace, "pod", name)
        return p if p["status"].get("phase") == "Running" else None

    def record(self, node, namespace, pod, container):
        """The CreateContainerRequest the node's fake CRI runtime received, parsed (records.py)."""
        return read_record(self.dir, node, namespace, pod, container)

    def audit_events(self):
        """The API server's audit log (tests/realcluster/audit-policy.yaml: fracgpu's accounts)."""
        with open(self.dir / "logs" / "audit.log") as f:
            return [json.loads(line) for line in f if line.strip()]

    def refused_requests(self):
        """Requests of fracgpu's accounts the API server refused: 403 (RBAC as deploy/ ships it
        lacks something), 400 or 422 (fracgpu wrote what the API refuses, fieldValidation=Strict
        included). A restarted API server serves before its RBAC authorizer's caches hold the
        bindings, and the watches fracgpu's components resume at once get 403 for a moment (and
        are retried): 403s within 10 s of an API server restart of this run are the server's. A
        5xx is the server's own trouble (a 504 under a loaded 2-core machine was seen), which
        fracgpu's client retries."""
        windows = [(t0, t1 + 10) for c, t0, t1 in self.restarts if c == "apiserver"]

        def when(e):
            return datetime.fromisoformat(e["stageTimestamp"].replace("Z", "+00:00")).timestamp()

        return [(e["stageTimestamp"], e["user"]["username"], e["verb"], e["requestURI"],
                 e["responseStatus"]["code"], e["responseStatus"].get("message", ""))
                for e in self.audit_events()
                if (e["responseStatus"]["code"] == 403 and not any(a <= when(e) <= b for a, b in windows))
                or e["responseStatus"]["code"] in (400, 422)]

    def stop(self, component):
        """SIGKILLs one component (scripts/cluster.sh stop); restart() starts it again."""
        subprocess.run(["bash", str(CLUSTER), "stop", component], check=True, timeout=60,
                       env={**os.environ, "FRACGPU_CLUSTER_DIR": str(self.dir)})

    def restart(self, component, *extra):
        """scripts/cluster.sh restart; remembers (component, start, end) in self.restarts
        (Unix seconds) for tests that judge the API server's audit log around restarts."""
        t0 = time.time()
        subprocess.run(["bash", str(CLUSTER), "restart", component, *extra], check=True, timeout=180,
                       env={**os.environ, "FRACGPU_CLUSTER_DIR": str(self.dir)})
        self.restarts.append((component, t0, time.time()))


# The values the helm-mode cluster installs the chart with (HAMi's value names).
HELM_VALUES = Path(__file__).resolve().parent / "helm-values.yaml"

# The DRA driver's --slice-interval in the DRA cluster: short, so that "the slice is not rewritten
# over a couple of sync periods" (test_dra.py) costs seconds.
DRA_SLICE_INTERVAL = 3


class _Clusters:
    """At most one cluster up at a time, in FRACGPU_CLUSTER_DIR: device-plugin mode (fixture
    `cluster`, test_journey.py) or DRA mode (`dra_cluster`, test_dra.py, scripts/cluster.sh up
    --dra). A test asking for the other mode takes the running one down first."""

    def __init__(self):
        self.state = Path(os.environ.get("FRACGPU_CLUSTER_DIR", "/tmp/fracgpu-cluster-test"))
        self.env = {**os.environ, "FRACGPU_CLUSTER_DIR": str(self.state)}
        self.build = os.environ.get("FRACGPU_BUILD", str(REPO / "build" / "release"))
        self.mode = None
        self.current = None
        self.failed = ""

    def down(self):
        """Takes the cluster down; before that, fails if the API server refused any request of
        fracgpu's accounts during its life (Cluster.refused_requests), whatever the mode."""
        refused = []
        if self.current is not None and (self.current.dir / "logs" / "audit.log").exists():
            refused = self.current.refused_requests()
        subprocess.run(["bash", str(CLUSTER), "down"], env=self.env, check=False, capture_output=True)
        mode, self.mode, self.current = self.mode, None, None
        if refused:
            pytest.fail(f"the API server refused requests of fracgpu's accounts in the {mode}-mode "
                        f"cluster: {refused}", pytrace=False)

    def ensure(self, mode):
        if self.mode == mode:
            return self.current
        if os.geteuid() != 0:
            pytest.fail("make test-k8s needs root: scripts/cluster.sh gives each kubelet a mount "
                        "namespace of its own", pytrace=False)
        if self.failed:  # one failed start is enough: the next tests fail at once, saying why
            pytest.fail(f"the cluster did not come up earlier in this run:\n{self.failed}", pytrace=False)
        self.down()
        # DRA mode: three nodes, so that one has 4 GPUs (a claim for 3 distinct GPUs fits).
        extra = ["--dra", "--slice-interval", str(DRA_SLICE_INTERVAL), "--nodes", "3"] if mode == "dra" else []
        if mode == "helm":  # the chart in place of deploy/ (test_helm_install.py); one node is enough
            extra = ["--helm", "--helm-values", str(HELM_VALUES), "--nodes", "1"]
        env = self.env
        if mode == "dra-gate-off":  # DRA on every component, consumable capacity off on all
            extra = ["--dra", "--slice-interval", str(DRA_SLICE_INTERVAL)]
            env = {**self.env, "FRACGPU_CLUSTER_FEATURE_GATES": "DRAConsumableCapacity=false"}
        t0 = time.monotonic()
        try:
            up = subprocess.run(["bash", str(CLUSTER), "up", "--build", self.build, *extra], env=env,
                                capture_output=True, text=True, timeout=900)
        except subprocess.TimeoutExpired as e:
            up = subprocess.CompletedProcess(e.cmd, -1, "", f"timed out after 900 s\n{e.stderr or ''}")
        if up.returncode != 0:
            logs = self.state / "logs"
            tails = ""
            if logs.is_dir():
                for f in sorted(logs.iterdir()):
                    lines = f.read_text(errors="replace").splitlines()[-15:]
                    tails += f"\n--- {f.name}\n" + "\n".join(lines)
            self.down()
            self.failed = f"scripts/cluster.sh up {' '.join(extra)} failed ({up.returncode}):\n{up.stderr}{tails}"
            pytest.fail(self.failed)
        print(f"\ncluster ({mode} mode) up in {time.monotonic() - t0:.1f} s")
        self.mode, self.current = mode, Cluster(self.state)
        return self.current


@pytest.fixture(scope="session")
def _clusters():
    c = _Clusters()
    yield c
    if os.environ.get("FRACGPU_CLUSTER_KEEP") != "1":
        c.down()


@pytest.fixture
def cluster(_clusters):
    """The cluster in device-plugin mode."""
    return _clusters.ensure("device-plugin")


@pytest.fixture
def dra_cluster(_clusters):
    """The cluster in DRA mode (fracgpu dra-driver on every node, deploy/dra applied)."""
    return _clusters.ensure("dra")


@pytest.fixture
def dra_gate_off_cluster(_clusters):
    """The cluster in DRA mode with the DRAConsumableCapacity feature gate off everywhere (the
    default of 1.34–1.35)."""
    return _clusters.ensure("dra-gate-off")


@pytest.fixture
def helm_cluster(_clusters):
    """The cluster in device-plugin mode, installed by `helm install` of deploy/helm/fracgpu
    (scripts/cluster.sh up --helm) instead of deploy/."""
    return _clusters.ensure("helm")


def pytest_collection_modifyitems(items):
    """The helm-mode tests last: a cluster of its own costs one start then, not two (the
    device-plugin cluster of the tests after it would have to come up again). The HAMi
    migration rehearsal (test_hami_migration.py), which takes the device-plugin cluster down when
    it ends, right after the last other test of that cluster: it reuses it, and no test after it
    needs another start."""
    items.sort(key=lambda item: "helm_cluster" in getattr(item, "fixturenames", ()))
    rehearsal = [i for i in items if getattr(i.module, "__name__", "") == "test_hami_migration"]
    rest = [i for i in items if i not in rehearsal]
    users = [k for k, i in enumerate(rest) if "cluster" in getattr(i, "fixturenames", ())]
    at = users[-1] + 1 if users else len(rest)
    items[:] = rest[:at] + rehearsal + rest[at:]


def pytest_terminal_summary(terminalreporter):
    """The plain closing line the project's CI reads: 'N passed, N failed'."""
    passed = len(terminalreporter.stats.get("passed", []))
    failed = len(terminalreporter.stats.get("failed", [])) + len(terminalreporter.stats.get("error", []))
    terminalreporter.write_line(f"test-k8s: {passed} passed, {failed} failed")
