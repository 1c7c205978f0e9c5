#!/usr/bin/env python3
"""Memory of `fracgpu scheduler` at cluster scale, and the cost of its /metrics page (issue 37).

One process tree, no kubelets and no real control plane: the fake API server
(tests/fakes/apiserver, a standalone process) is seeded with N nodes × G GPUs shaped as
bench/cluster/scale.py's (clusterlib.bench_node with fracgpu's registration annotation) and P
running pods holding one slice each (20,480 MiB, 25 % of the SMs, `hami.io/vgpu-devices-allocated`
on the node's GPUs in turn); then `fracgpu scheduler` starts against it (plain HTTP on 127.0.0.1)
and lists, watches and writes its handshake on every node as it does in a cluster. Figures, from
the scheduler's /proc/<pid>/status (VmHWM is reset through /proc/<pid>/clear_refs before each
phase, so each phase's peak is its own):

  sync    start → /readyz 200 and the handshake's MODIFIED events applied (RSS steady): VmHWM, VmRSS
  scrape  each of --scrapes GET /metrics: wall time, bytes, series, VmHWM during it, VmRSS after
  idle    VmRSS --idle-s seconds after the last scrape

Usage: python3 bench/scheduler_memory.py [--build build/release] [--nodes 5000] [--gpus 8]
                                         [--pods 10000] [--scrapes 3] [--label before|after]
Prints a Markdown table row per phase (stdout); progress on stderr.
"""
import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "cluster"))
from clusterlib import bench_node  # noqa: E402  (the node shape the scale bench creates)

GPU_MIB = 81920
GPU_TYPE = "NVIDIA A100-SXM4-80GB"


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def gpu_uuid(n, g):
    return f"GPU-{n:08x}-{g:04x}-4000-8000-{n:012x}"


def register_annotation(n, gpus):
    return json.dumps([{"id": gpu_uuid(n, g), "index": g, "count": 10, "devmem": GPU_MIB,
                        "devcore": 100, "type": GPU_TYPE, "numa": 0 if g < gpus // 2 else 1,
                        "health": True, "mode": "hami-core"} for g in range(gpus)],
                      separators=(",", ":"))


def seed(nodes, gpus, pods):
    res = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus),
           "ephemeral-storage": "1Ti"}
    out = {"nodes": [bench_node(f"scale-{n:05d}", "memory", register_annotation(n, gpus), res)
                     for n in range(nodes)], "pods": []}
    for i in range(pods):
        n, g = i % nodes, (i // nodes) % gpus
        node = f"scale-{n:05d}"
        out["pods"].append({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"slice-{i:05d}", "namespace": "bench", "uid": f"uid-{i:05d}",
                         "labels": {"bench": "slice"},
                         "annotations": {
                             "hami.io/vgpu-node": node,
                             "hami.io/bind-phase": "success",
                             "hami.io/vgpu-devices-to-allocate": ";",
                             "hami.io/vgpu-devices-allocated":
                                 f"{gpu_uuid(n, g)},NVIDIA,20480,25:;"}},
            "spec": {"nodeName": node, "schedulerName": "fracgpu-scheduler",
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"limits": {"nvidia.com/gpu": "1",
                                                              "nvidia.com/gpumem": "20480",
                                                              "nvidia.com/gpucores": "25"}}}]},
            "status": {"phase": "Running"}})
    return out


def status_kib(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS"):
                out[k] = int(v.split()[0])
    return out


def reset_hwm(pid):
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")  # proc(5): "5" resets the peak resident set size (VmHWM) to VmRSS


def get(port, path, timeout=600):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--scrapes", type=int, default=3)
    ap.add_argument("--idle-s", type=float, default=5.0)
    ap.add_argument("--label", default="", help="first column of the table rows")
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="fracgpu-schedmem-")
    seed_path = os.path.join(tmp, "seed.json")
    t = time.time()
    with open(seed_path, "w") as f:
        json.dump(seed(a.nodes, a.gpus, a.pods), f)
    log(f"seed: {a.nodes} nodes × {a.gpus} GPUs, {a.pods} pods, "
        f"{os.path.getsize(seed_path) / 2**20:.1f} MiB ({time.time() - t:.1f} s)")
    api_port, port, health = free_port(), free_port(), free_port()
    api = subprocess.Popen([f"{a.build}/tests/fakes/apiserver/fake-apiserver", str(api_port),
                            seed_path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL)
    sched = None
    try:
        line = api.stdout.readline().decode()
        if "listening" not in line:
            raise RuntimeError(f"fake-apiserver did not start: {line!r}")
        cfg = os.path.join(tmp, "kubeconfig")
        with open(cfg, "w") as f:
            f.write(f"""apiVersion: v1
kind: Config
clusters: [{{name: fake, cluster: {{server: "http://127.0.0.1:{api_port}"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: c, context: {{cluster: fake, user: u}}}}]
current-context: c
""")
        sched = subprocess.Popen([f"{a.build}/fracgpu", "scheduler", "--listen",
                                  f"127.0.0.1:{port}", "--health-port", str(health),
                                  "--kubeconfig", cfg], stdout=subprocess.DEVNULL,
                                 stderr=open(os.path.join(tmp, "scheduler.log"), "w"))
        pid = sched.pid
        t0 = time.time()
        while True:
            try:
                if get(health, "/readyz", 2)[0] == 200:
                    break
            except OSError:
                pass
            if sched.poll() is not None:
                raise RuntimeError(f"scheduler exited {sched.returncode}; see {tmp}")
            time.sleep(0.1)
        ready_s = time.time() - t0
        # The handshake: one PATCH per node and its MODIFIED event; wait until RSS is steady.
        last, steady = -1, 0
        while steady < 3 and time.time() - t0 < 600:
            time.sleep(1)
            rss = status_kib(pid)["VmRSS"]
            steady = steady + 1 if last >= 0 and abs(rss - last) < 1024 else 0
            last = rss
        s = status_kib(pid)
        rows = [("sync", f"{ready_s:.1f} s to ready", s["VmHWM"], s["VmRSS"])]
        log(f"sync: ready after {ready_s:.1f} s, VmHWM {s['VmHWM'] // 1024} MiB, "
            f"VmRSS {s['VmRSS'] // 1024} MiB")
        for i in range(a.scrapes):
            reset_hwm(pid)
            t1 = time.time()
            st, body = get(port, "/metrics")
            dt = time.time() - t1
            if st != 200:
                raise RuntimeError(f"/metrics: {st} {body[:200]!r}")
            series = sum(1 for ln in body.split(b"\n") if ln and not ln.startswith(b"#"))
            s = status_kib(pid)
            rows.append((f"scrape {i + 1}", f"{dt:.2f} s, {len(body) / 2**20:.1f} MiB, "
                         f"{series:,} series", s["VmHWM"], s["VmRSS"]))
            log(f"scrape {i + 1}: {dt:.2f} s, {len(body)} bytes, {series} series, VmHWM "
                f"{s['VmHWM'] // 1024} MiB, VmRSS {s['VmRSS'] // 1024} MiB")
        time.sleep(a.idle_s)
        s = status_kib(pid)
        rows.append((f"idle {a.idle_s:g} s", "", None, s["VmRSS"]))
        label = a.label or f"{a.nodes:,} × {a.gpus}"
        print("| run | phase | figure | VmHWM MiB | VmRSS MiB |")
        print("|---|---|---|---:|---:|")
        for phase, fig, hwm, rss in rows:
            print(f"| {label} | {phase} | {fig} | {'' if hwm is None else f'{hwm / 1024:,.0f}'} "
                  f"| {rss / 1024:,.0f} |")
    finally:
        if sched is not None:
            sched.terminate()
            try:
                sched.wait(30)
            except subprocess.TimeoutExpired:
                sched.kill()
        api.stdin.close()
        try:
            api.wait(30)
        except subprocess.TimeoutExpired:
            api.kill()


if __name__ == "__main__":
    main()
