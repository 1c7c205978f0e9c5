"""`make sandbox` on the real cluster: `scripts/sandbox.sh --for 1 --cluster real` (what it picks by
itself as root with the real Kubernetes binaries; tests/cli/sandbox_test.cc runs the fake-cluster
fallback). Its own cluster (scripts/cluster.sh up in the sandbox's folder) on ports offset by 2000,
apart from a `make sandbox` at the default offset 3000; the suite's cluster is taken down first
(two clusters on two cores slow both).

The expected MiB are computed here from the request (¼ of a GPU's memory) and the GPU sizes
scripts/cluster.sh documents (node-a 2 × 16384 MiB, node-b 1 × 24576 MiB), not read from the
code under test."""

import os
import re
import signal
import socket
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OFFSET = 2000
# cluster.sh's GPUs of a 2-node cluster: UUID -> MiB (GPU-<(node index << 8) + gpu, %08x>-…-<node index>).
GPUS = {"GPU-00000000-0000-4000-8000-000000000000": 16384, "GPU-00000001-0000-4000-8000-000000000000": 16384,
        "GPU-00000100-0000-4000-8000-000000000001": 24576}


def listening(port):
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def processes_naming(needle):
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            env = (d / "environ").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if needle in cmd or needle in env:
            out.append(f"{d.name} {cmd}")
    return out


def test_sandbox_walks_a_notebook_through_the_real_cluster_then_stops_cleanly(_clusters):
    _clusters.down()
    build = os.environ.get("FRACGPU_BUILD", str(REPO / "build" / "release"))
    # Its own session, so that on a time-out SIGTERM reaches the whole script (whose trap takes
    # its cluster down) rather than bash alone.
    proc = subprocess.Popen(["bash", str(REPO / "scripts" / "sandbox.sh"), "--build", build, "--for", "1",
                             "--cluster", "real"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "FRACGPU_SANDBOX_PORT_OFFSET": str(OFFSET)},
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=420)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
        raise AssertionError(f"sandbox.sh ran past 420 s:\n{stdout}{stderr}")
    p = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert (f"sandbox: part 2 runs a cluster of the real Kubernetes components (scripts/cluster.sh, "
            f"binaries in ") in out and f"on 127.0.0.1 ports {29000 + OFFSET}-{29499 + OFFSET}\n== 1." in out, out
    # Part 1 as before.
    assert "alloc 600 MiB: CUDA_ERROR_OUT_OF_MEMORY (refused: 1200 MiB > the 1000 MiB limit)\n" in out, out
    # The real cluster, alice's RBAC, the seeded slices placed where they were pinned.
    assert re.search(r"^cluster: up in \d+ s: 2 nodes \(device-plugin mode\)$", out, re.M), out
    assert f"API server:      https://127.0.0.1:{29444 + OFFSET}  (kube-apiserver;" in out, out
    assert "RoleBinding team-a/alice-notebooks: alice may create, list and get notebooks in team-a" in out, out
    assert ("  team-b/train: node-a GPU 1 GPU-00000001-0000-4000-8000-000000000000 (16384 MiB): 12288 MiB, "
            "0 % of the SMs, running (CUDA_DEVICE_MEMORY_LIMIT_0=12288m)\n") in out, out
    assert ("  team-a/infer: node-b GPU 0 GPU-00000100-0000-4000-8000-000000000001 (24576 MiB): 10000 MiB, "
            "50 % of the SMs, running (CUDA_DEVICE_MEMORY_LIMIT_0=10000m)\n") in out, out
    # The walk-through: preview, created through the gateway, the pod's journey, Ready.
    # One type per model in the dashboard's type filter (the fake NVML's product names by size,
    # tests/fakes/cuda/fake_gpu.h), not one per GPU.
    assert ("GPU types:       NVIDIA A10 (1 GPU), NVIDIA-Tesla V100-SXM2-16GB (2 GPUs)\n") in out, out
    assert "preview: fits now: takes 1 GPU on one node" in out, out
    assert "HTTP 201: Notebook team-a/demo created (kubeflow.org/v1)\n" in out, out
    assert "notebook controller (stand-in): Notebook team-a/demo → StatefulSet team-a/demo\n" in out, out
    # (The StatefulSet controller says "create Pod" up to 1.34 and "Create Pod" in 1.37.)
    assert re.search(r"^event: StatefulSet team-a/demo: SuccessfulCreate \(statefulset-controller\): "
                     r"[Cc]reate Pod demo-0 in StatefulSet demo successful$", out, re.M), out
    assert ("webhook: pod team-a/demo-0 admitted: spec.schedulerName=fracgpu-scheduler (nvidia.com/gpu=1, "
            "nvidia.com/gpucores=25, nvidia.com/gpumem-percentage=25)\n") in out, out
    m = re.search(r"^scheduler: pod team-a/demo-0 bound to (node-[ab]): \1 GPU (\d) (GPU-[0-9a-f-]+) "
                  r"\((\d+) MiB\): (\d+) MiB, 25 % of the SMs \(hami.io/vgpu-node=\1, ", out, re.M)
    assert m, out
    node, uuid, total, mib = m.group(1), m.group(3), int(m.group(4)), int(m.group(5))
    assert GPUS[uuid] == total and mib == total * 25 // 100, m.group(0)
    assert f"event: Pod team-a/demo-0: Scheduled (fracgpu-scheduler): Successfully assigned team-a/demo-0 to {node}\n" in out, out
    assert f"device plugin: {node} Allocate for team-a/demo-0: hami.io/bind-phase=success\n" in out, out
    assert (f"kubelet: {node} started team-a/demo-0 container demo; its config in the fake CRI runtime: "
            f"NVIDIA_VISIBLE_DEVICES={uuid}, CUDA_DEVICE_MEMORY_LIMIT_0={mib}m ({mib} MiB), "
            f"CUDA_DEVICE_SM_LIMIT=25 (%)\n") in out, out
    assert f"pod team-a/demo-0: Running on {node}\n" in out, out
    assert "notebook team-a/demo: Ready\n" in out and "sandbox: stopping after 1 s\n" in out, out

    # Stopped: the cluster's API server and UI, and the gateway, no longer listen; the folder is
    # gone and no process names it.
    gateway = int(re.search(r"^fracgpu ui: +http://127\.0\.0\.1:(\d+)/", out, re.M).group(1))
    for port in (29444 + OFFSET, 29080 + OFFSET, gateway):
        assert not listening(port), port
    tmp = re.search(r"^sandbox: files in (/tmp/fracgpu-sandbox-\S+)$", out, re.M).group(1)
    assert not Path(tmp).exists(), tmp
    assert processes_naming(tmp) == []
