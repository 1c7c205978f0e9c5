"""bench/cluster/scale.py --smoke (issue 37 item 1) works end to end: a control plane without
kubelets (scripts/cluster.sh up --nodes 0) in its own folder and port offset (3100: apart from the
suite's cluster, a `make sandbox` at 3000, test_sandbox.py at 2000 and the bench's own 3200), 50
nodes as API objects, 200 HAMi-slice pods through the webhook and fracgpu's kube-scheduler with
the extender, 200 whole-GPU pods through the default kube-scheduler, the table written; once
with each `--node-lock` (the bench playing the device plugin's Node write, or its pod write), and
once `--extender-only`.

Not a timed test: speed is measured by the bench itself (docs/performance.md); this checks only
that every pod of both phases was bound and that the table carries the figures it promises."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "cluster"))
import clusterlib  # noqa: E402
OFFSET = 3100
STATE = "/tmp/fracgpu-cluster-scale-smoke"


def listening(port):
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def run_smoke(tmp_path, *args):
    """scale.py --smoke with `args` in the smoke test's folder and port offset: (table, result)."""
    if os.geteuid() != 0:
        pytest.skip("scripts/cluster.sh needs root")
    busy = [p for p in (29444, 29443, 29259, 29260, 29379) if listening(p + OFFSET)]
    assert not busy, f"ports {[p + OFFSET for p in busy]} in use: another cluster at offset {OFFSET}?"
    out = tmp_path / "table.md"
    p = subprocess.run(
        [sys.executable, str(REPO / "bench" / "cluster" / "scale.py"), "--smoke",
         "--dir", STATE, "--port-offset", str(OFFSET), "--log-dir", str(tmp_path),
         "--out", str(out),
         # Reaches fracgpu scheduler's command line (the bench checks its argv and fails
         # otherwise: `up` once wiped the file that carried it).
         "--scheduler-arg=--binpack-avoid-busy-nodes", *args],
        capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stderr[-4000:]}"
    assert not Path(STATE).exists(), "the bench left its cluster up"
    return out.read_text(), json.loads((tmp_path / "result.json").read_text())


@pytest.mark.parametrize("node_lock", ["annotation", "bind-phase"])
def test_scale_bench_smoke(tmp_path, node_lock):
    table, result = run_smoke(tmp_path, "--node-lock", node_lock)
    assert "**pods per second**" in table and "Ratio extender / plain throughput" in table, table
    assert "CPU weights: every component in its own autogroup, weight 1024" in table, table
    for ph in result["phases"]:
        assert ph["bound"] == 200 and ph["bound_api"] == 200, (ph["name"], ph["bound"], ph["bound_api"])
        assert ph["create_errors"] == 0, ph["first_error"]
    ext = result["phases"][0]
    # The slice pods went through the extender (one /bind each at least) and were mutated by
    # the webhook; the whole-GPU pods did not call it.
    assert ext["binds"].get("ok") == 200, ext["binds"]
    assert ext["ext"]["/filter"][2] >= 200 and ext["ext"]["/webhook"][2] >= 200, ext["ext"]
    assert result["phases"][1]["binds"] == {}, result["phases"][1]["binds"]
    # The device plugin's part, played by the bench for the mode: every hold ended (the Node
    # lock released, or the pod's bind-phase set to success as the device plugin's account,
    # through the webhook and the admission policy), none retried past its deadline.
    assert ext["locks_released"] == 200 and ext["lock_retries"][1] == 0, \
        (ext["locks_released"], ext["lock_retries"])
    assert f"--node-lock={node_lock}" in table, table


def test_scale_bench_extender_only(tmp_path):
    """--extender-only: the extender phase alone (the latency at a rate below saturation), the
    plain column "not run", no ratio, and the latency's three parts in the table."""
    table, result = run_smoke(tmp_path, "--extender-only", "--node-lock", "bind-phase")
    assert "Extender phase only" in table and "Ratio extender / plain" not in table, table
    assert "| **pods per second** |" in table and "| not run |" in table, table
    assert "its wait for a CPU" in table and "its sleep" in table, table
    ext, plain = result["phases"]
    assert plain is None, plain
    assert ext["bound"] == 200 and ext["bound_api"] == 200, (ext["bound"], ext["bound_api"])
    assert ext["binds"].get("ok") == 200, ext["binds"]
    # Every /filter call's latency split into its parts: one sample each.
    assert ext["ext_cpu"]["/filter"][2] == ext["ext"]["/filter"][2], ext["ext_cpu"]["/filter"]
    assert ext["ext_sleep"]["/filter"][2] == ext["ext"]["/filter"][2], ext["ext_sleep"]["/filter"]
    # The state's lock, counted: each /filter reads it once and each reservation or bind writes
    # it, so both modes were taken at least once a pod; waits never exceed acquisitions.
    locks = ext["locks"]
    for mode in ("shared", "exclusive"):
        taken, waited = locks[mode]
        assert taken >= ext["bound"] and 0 <= waited <= taken, (mode, locks)
    assert "| fracgpu state lock: taken a pod" in table, table


def test_scale_bench_cpu_shares(tmp_path):
    """--cpu-shares fracgpu-scheduler=4096: fracgpu scheduler's process ran, from before the
    phase to its end, in a cgroup v1 cpu group of its own with cpu.shares 4096 (read back by
    the bench from /proc/<pid>/cgroup and the group), every other component in the root group;
    the table names the weight, and the group is gone after the bench."""
    root = clusterlib.cpu_cgroup_root()
    if root is None:
        pytest.skip("no cgroup v1 hierarchy with the cpu controller")
    table, result = run_smoke(tmp_path, "--extender-only", "--node-lock", "bind-phase",
                              "--cpu-shares", "fracgpu-scheduler=4096")
    assert result["phases"][0]["bound"] == 200, result["phases"][0]["bound"]
    group = f"fracgpu-bench-{OFFSET}-fracgpu-scheduler"
    for when in ("start", "end"):
        weights = result["cpu_weights"][when]
        ours = weights["fracgpu-scheduler"]
        assert ours["shares"] == 4096 and ours["cgroup"].endswith("/" + group), (when, ours)
        for name, w in weights.items():
            if name != "fracgpu-scheduler":
                assert w["shares"] is None and w["cgroup"] == root[1], (when, name, w)
    assert "fracgpu-scheduler cgroup v1 cpu.shares 4096" in table, table
    assert not os.path.exists(os.path.join(root[0], group)), "group left behind"


@pytest.mark.parametrize("items,message", [
    (["fracgpu-scheduler"], "expected COMPONENT=SHARES"),
    (["kube-controller-manager=1024"], "COMPONENT one of apiserver, etcd"),
    (["fracgpu-scheduler=1"], "from 2 to 262144"),
    (["fracgpu-scheduler=262145"], "from 2 to 262144"),
    (["fracgpu-scheduler=1.5"], "must be an integer"),
    (["fracgpu-scheduler="], "must be an integer"),
    (["=1024"], "expected COMPONENT=SHARES"),
    (["fracgpu-scheduler=1_024"], "must be an integer"),
    (["fracgpu-scheduler=+5"], "must be an integer"),
    (["fracgpu-scheduler= 12"], "must be an integer"),
    (["fracgpu-scheduler=1024", "fracgpu-scheduler=2048"], "given twice"),
])
def test_cpu_shares_bad_cases(items, message):
    """--cpu-shares refuses each bad item before any cluster starts, naming the item."""
    with pytest.raises(ValueError, match=message) as e:
        clusterlib.parse_cpu_shares(items)
    assert repr(items[-1]) in str(e.value), str(e.value)


def test_cpu_shares_parsed():
    assert clusterlib.parse_cpu_shares(["fracgpu-scheduler=10240", "apiserver=256",
                                        "etcd=2", "kube-scheduler-default=262144"]) == {
        "fracgpu-scheduler": 10240, "apiserver": 256, "etcd": 2, "kube-scheduler-default": 262144}
    assert clusterlib.parse_cpu_shares([]) == {}
