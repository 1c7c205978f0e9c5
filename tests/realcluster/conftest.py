"""The local real cluster (scripts/cluster.sh) for the tests of tests/realcluster (make test-k8s).

One cluster for the whole session: brought up before the first test, taken down after the last.
With FRACGPU_CLUSTER_KEEP=1 it is left up afterwards (for debugging; `scripts/cluster.sh down`).
"""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "scripts" / "cluster.sh"


class Cluster:
    """kubectl against the cluster, and the state folder of scripts/cluster.sh."""

    def __init__(self, state_dir: Path):
        self.dir = state_dir
        self.bin = Path((state_dir / "bin").read_text().strip())
        self.kubeconfig = state_dir / "admin.kubeconfig"

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
            except AssertionError as e:  # kubectl failures while the object settles
                last = e
            if last and not isinstance(last, Exception):
                return last
            time.sleep(interval)
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last})")

    def record(self, node, namespace, pod, container):
        """The CreateContainerRequest the node's fake CRI runtime received, parsed."""
        f = self.dir / "nodes" / node / "records" / f"{namespace}_{pod}_{container}.json"
        return json.loads(f.read_text()) if f.exists() else None

    def restart(self, component):
        subprocess.run(["bash", str(CLUSTER), "restart", component], check=True, timeout=180,
                       env={**os.environ, "FRACGPU_CLUSTER_DIR": str(self.dir)})


@pytest.fixture(scope="session")
def cluster():
    state = Path(os.environ.get("FRACGPU_CLUSTER_DIR", "/tmp/fracgpu-cluster-test"))
    env = {**os.environ, "FRACGPU_CLUSTER_DIR": str(state)}
    build = os.environ.get("FRACGPU_BUILD", str(REPO / "build" / "release"))
    subprocess.run(["bash", str(CLUSTER), "down"], env=env, check=False, capture_output=True)
    t0 = time.monotonic()
    up = subprocess.run(["bash", str(CLUSTER), "up", "--build", build], env=env,
                        capture_output=True, text=True, timeout=900)
    if up.returncode != 0:
        logs = state / "logs"
        tails = ""
        if logs.is_dir():
            for f in sorted(logs.iterdir()):
                lines = f.read_text(errors="replace").splitlines()[-15:]
                tails += f"\n--- {f.name}\n" + "\n".join(lines)
        subprocess.run(["bash", str(CLUSTER), "down"], env=env, check=False, capture_output=True)
        pytest.fail(f"scripts/cluster.sh up failed ({up.returncode}):\n{up.stderr}{tails}")
    print(f"\ncluster up in {time.monotonic() - t0:.1f} s")
    c = Cluster(state)
    yield c
    if os.environ.get("FRACGPU_CLUSTER_KEEP") != "1":
        subprocess.run(["bash", str(CLUSTER), "down"], env=env, check=False, capture_output=True)


def pytest_terminal_summary(terminalreporter):
    """The plain closing line the project's CI reads: 'N passed, N failed'."""
    passed = len(terminalreporter.stats.get("passed", []))
    failed = len(terminalreporter.stats.get("failed", [])) + len(terminalreporter.stats.get("error", []))
    terminalreporter.write_line(f"test-k8s: {passed} passed, {failed} failed")
