#!/usr/bin/env python3
"""The Alibaba openb trace through the real kube-scheduler + fracgpu's extender (issue 37 item 2).

    python3 bench/cluster/trace.py                 # default trace, seed 42, 1,213 nodes, ~10,700 pods
    python3 bench/cluster/trace.py --smoke         # 40 nodes, the trace's first 250 pods (~1 min)

One command, as root (like scripts/cluster.sh), with build/release/fracgpu and the Kubernetes
binaries of scripts/k8s-build.sh:

1. `fracgpu simulate --policies FGD+CpuRoute+Crumb --seeds SEED --replay-out F` runs the simulator's
   experiment for one seed and writes what a replay needs: the nodes in the run's tie-break order
   (the seeded permutation FGD's ties go to), the trace's target workload M, every arrival in
   order (its pod spec, sim::TracePodSpec, and where the simulator put it) and the run's
   allocation % per arrived-% bucket.
2. A control plane without kubelets (clusterlib.ControlPlane: `scripts/cluster.sh up --nodes 0`),
   with `fracgpu scheduler` restarted as `--gpu-scheduler-policy fragmentation-aware
   --fragmentation-workload M` (the extender's FGD+CpuRoute+Crumb reads the trace's M, as the simulator
   does, not the running pods' shapes), and fracgpu's kube-scheduler restarted with
   `percentageOfNodesToScore: 100` (kube-scheduler otherwise stops filtering after ~40 % of 1,213
   feasible nodes, from a rotating start, so the extender would never see the others) and its own
   score plugins off in the fracgpu-scheduler profile (`--kube-scores off`, the default: with
   them on, NodeResourcesFit's LeastAllocated and BalancedAllocation, up to 100 points each, add
   to the extender's 0-10 x weight 1 x 10 and outvote FGD's choice; `--kube-scores on` measures
   that).
3. The trace's GPU nodes as API objects named `r<rank>-<trace name>`, rank = place in the
   simulator's tie-break order: the extender gives 10 to the first node by name among FGD's best,
   so its ties go where the simulator's go. Allocatable: the trace's CPU and memory, 100 slices
   per GPU, 100,000 pods (the simulator has no pod count limit); the GPUs in
   `hami.io/node-nvidia-register` as the simulator builds them.
4. The arrivals, one at a time in the simulator's order: each pod is created (GPU pods through
   fracgpu's webhook; every pod names schedulerName fracgpu-scheduler, CPU-only ones too, as the
   simulator places them with the same policy), and the next is created only when this one is
   bound or kube-scheduler has reported it Unschedulable (PodScheduled=False). An unschedulable
   pod is deleted at once: the simulator drops a pod that fits nowhere (counted as arrived, never
   placed, never retried), and pods never leave, so it could not fit later either; left pending,
   it would be retried by kube-scheduler on every later bind. After each GPU pod's bind the bench
   removes the node lock /bind took (the device plugin's part after the kubelet's Allocate).
5. Figures, as the simulator defines them (src/sim/metrics.cc, ported below and checked against
   the simulator's own figure): after every arrival a sample (arrived GPU milli, failed pods
   included; placed GPU milli); bucket b = round(arrived / capacity x 100); the allocation ratio
   at b % = mean over the bucket's samples of round(placed / capacity x 100, 2). Printed for the
   cluster beside the simulator's for 100 % and 130 % arrived, with how many arrivals landed on
   the simulator's node, and the first that did not.

The table goes to stdout and <log-dir>/table.md, everything to <log-dir>/result.json.
"""

import argparse
import copy
import csv
import http.client
import json
import os
import shutil
import subprocess
import sys
import threading
import math
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clusterlib import (LOCK, REPO, ControlPlane, add_cluster_args, bench_node, log)  # noqa: E402

NS = "trace"
LABEL = "fracgpu.io/bench"
ALLOCATED = "hami.io/vgpu-devices-allocated"
DATA = os.path.join(REPO, "data", "alibaba-gpu-v2023", "csv")


# ---------------------------------------------------------------------------------------------
# The simulator's figures (src/sim/metrics.cc Bucketize, allocation only)

def round_half_even(x, decimals):
    scale = 10.0 ** decimals
    return round(x * scale) / scale  # round() of a float: to nearest, ties to even (nearbyint)


def bucketize(samples, capacity_milli, max_bucket):
    """{bucket: allocation %} from [(arrived_milli, used_milli)], as sim::Bucketize: bucket =
    round(arrived / capacity x 100); value = mean of round(used / capacity x 100, 2), rounded to
    2 decimals; an empty bucket takes the samples of its neighbours."""
    n = max_bucket + 1
    total, count = [0.0] * n, [0] * n
    cap = float(capacity_milli)
    for arrived, used in samples:
        b = round(arrived / cap * 100.0)
        if b < 0 or b > max_bucket:
            continue
        total[b] += round_half_even(used / cap * 100.0, 2)
        count[b] += 1
    out = {}
    for i in range(n):
        a, c = total[i], count[i]
        if c == 0:
            for j in (i - 1, i + 1):
                if 0 <= j < n:
                    a += total[j]
                    c += count[j]
        if c > 0:
            out[i] = round_half_even(a / c, 2)
    return out


def samples_of(arrivals, placed):
    """The simulator's samples: one after every arrival."""
    out, arrived, used = [], 0, 0
    for a, ok in zip(arrivals, placed):
        milli = a["num_gpus"] * a["gpu_milli"]
        arrived += milli
        if ok:
            used += milli
        out.append((arrived, used))
    return out


# ---------------------------------------------------------------------------------------------

def granted_gpus(pod):
    """The GPU UUIDs of the pod's hami.io/vgpu-devices-allocated (core::EncodePodGrants:
    containers end with ';', devices with ':', a device is uuid,type,MiB,cores), sorted."""
    value = pod.get("metadata", {}).get("annotations", {}).get(ALLOCATED, "")
    return sorted(d.split(",")[0] for c in value.split(";") for d in c.split(":") if d)


# The taint of the replay's nodes, which only the replay's pods tolerate.
TRACE_TAINT = {"key": "fracgpu.io/bench", "value": "trace", "effect": "NoSchedule"}


def node_name(rank, trace_name):
    return f"r{rank:04d}-{trace_name}"


def node_object(rank, n):
    res = {"cpu": f"{n['cpu_milli']}m", "memory": f"{n['mem_mib']}Mi", "pods": "100000",
           "nvidia.com/gpu": str(n["slices"]), "ephemeral-storage": "1Ti"}
    node = bench_node(node_name(rank, n["name"]), "trace", n["register"], res)
    # Only the replay's pods may land here (TRACE_TAINT, tolerated by pod_object): the default
    # kube-scheduler otherwise binds deploy/'s own pods (the certs Job, the schedulers' and the
    # UI's Deployments, which no kubelet runs here) to a node of its choosing, and their CPU
    # requests, which the simulator does not have, moved a tie of the fragmentation-aware
    # choice between two empty nodes to the second (the smoke test's arrival 7 on
    # openb-node-0034, not 0029, in about one run in three under load).
    node["spec"]["taints"] = [TRACE_TAINT]
    return node


def pod_object(i, arrival, cpu_pods):
    """The arrival as a pod. A CPU-only pod (cpu_pods "extender") names fracgpu-scheduler and
    limits nvidia.com/gpu: "0": kube-scheduler calls an extender with managedResources only for
    pods that name one of them (HTTPExtender.IsInterested, pkg/scheduler/extender.go of
    v1.37.2), so without it fracgpu's /prioritize and /bind never see the pod; 0 GPUs is no GPU
    request to fracgpu (core::PodRequest::UsesGpu). With "kube-scheduler" it is left to the
    default kube-scheduler and its own scores, as a cluster's CPU pods usually are."""
    pod = copy.deepcopy(arrival["spec"])
    pod["metadata"]["name"] = f"a{i:05d}-{arrival['pod'].rsplit('-', 1)[-1]}"
    pod["metadata"]["namespace"] = NS
    pod["metadata"]["labels"] = {"bench": "trace"}
    pod["spec"]["terminationGracePeriodSeconds"] = 0
    pod["spec"]["tolerations"] = [dict(TRACE_TAINT, operator="Equal")]
    if arrival["num_gpus"] > 0 or cpu_pods == "extender":
        pod["spec"]["schedulerName"] = "fracgpu-scheduler"
    for c in pod["spec"]["containers"]:
        c["image"] = "busybox"
        if arrival["num_gpus"] == 0 and cpu_pods == "extender":
            c["resources"]["limits"]["nvidia.com/gpu"] = "0"
    return pod


class PodWatch:
    """A watch on the bench's pods: each pod's outcome, its node once bound or "" once
    kube-scheduler has marked it PodScheduled=False with reason Unschedulable."""

    def __init__(self, api):
        self.api = api
        self.outcome = {}
        self.cond = threading.Condition()
        self.stop = False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        rv = ""
        while not self.stop:
            try:
                conn = http.client.HTTPSConnection(self.api.host, self.api.port,
                                                   context=self.api.ctx, timeout=3600)
                path = (f"/api/v1/namespaces/{NS}/pods?watch=1&allowWatchBookmarks=true"
                        "&labelSelector=bench%3Dtrace")
                if rv:
                    path += f"&resourceVersion={rv}"
                conn.request("GET", path, headers={"Accept": "application/json"})
                r = conn.getresponse()
                while not self.stop:
                    line = r.readline()
                    if not line:
                        break
                    ev = json.loads(line)
                    if ev["type"] == "ERROR":
                        rv = ""
                        break
                    obj = ev["object"]
                    rv = obj["metadata"].get("resourceVersion", rv)
                    if ev["type"] not in ("ADDED", "MODIFIED"):
                        continue
                    name = obj["metadata"]["name"]
                    node = obj.get("spec", {}).get("nodeName")
                    unsched = any(c.get("type") == "PodScheduled" and c.get("status") == "False"
                                  and c.get("reason") == "Unschedulable"
                                  for c in obj.get("status", {}).get("conditions", []))
                    if node or unsched:
                        with self.cond:
                            self.outcome.setdefault(name, (node or "", obj))
                            self.cond.notify_all()
                conn.close()
            except (OSError, http.client.HTTPException, ValueError) as e:
                if not self.stop:
                    log(f"pod watch: {e!r}; again")
                    time.sleep(0.2)

    def wait(self, name, timeout_s):
        with self.cond:
            if not self.cond.wait_for(lambda: name in self.outcome, timeout=timeout_s):
                return None
            return self.outcome[name]


class TraceBench(ControlPlane):
    def __init__(self, a):
        super().__init__(a.dir, a.port_offset, a.log_dir, a.cluster_script)
        self.a = a

    def configure(self, workload_file):
        """fracgpu scheduler: fragmentation-aware with the trace's M; fracgpu's kube-scheduler:
        every node scored, its own score plugins off unless --kube-scores on."""
        import yaml
        argv = self.component_argv("fracgpu-scheduler")
        argv[argv.index("--gpu-scheduler-policy") + 1] = "fragmentation-aware"
        argv += ["--fragmentation-workload", workload_file]
        self.respawn("fracgpu-scheduler", argv)
        argv = self.component_argv("fracgpu-kube-scheduler")
        cfg = argv[argv.index("--config") + 1]
        c = yaml.safe_load(open(cfg))
        c["percentageOfNodesToScore"] = 100
        if self.a.kube_scores == "off":
            for p in c["profiles"]:
                if p["schedulerName"] == "fracgpu-scheduler":
                    p.setdefault("plugins", {})["score"] = {"disabled": [{"name": "*"}]}
        yaml.safe_dump(c, open(cfg, "w"), sort_keys=False)
        self.respawn("fracgpu-kube-scheduler", argv)
        health = f"http://127.0.0.1:{29081 + self.off}/readyz"
        deadline = time.time() + 90
        while True:
            try:
                if subprocess.run(["curl", "-sf", health], capture_output=True).returncode == 0:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError(f"fracgpu scheduler not ready after its restart ({health})")
            time.sleep(0.5)
        log("fracgpu scheduler: fragmentation-aware with the trace's M; fracgpu's kube-scheduler: "
            f"percentageOfNodesToScore 100, score plugins {self.a.kube_scores}")

    def unlock(self, node):
        st, body = self.api.request(
            "PATCH", f"/api/v1/nodes/{node}", {"metadata": {"annotations": {LOCK: None}}},
            headers={"Content-Type": "application/merge-patch+json"})
        if st != 200:
            raise RuntimeError(f"PATCH node {node}: {st} {body[:300]!r}")

    def delete_pod(self, name):
        st, body = self.api.request(
            "DELETE", f"/api/v1/namespaces/{NS}/pods/{name}",
            {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
        if st not in (200, 202, 404):
            raise RuntimeError(f"DELETE pod {name}: {st} {body[:300]!r}")

    def replay(self, replay):
        arrivals = replay["arrivals"]
        rank_of = {n["name"]: r for r, n in enumerate(replay["nodes"])}
        watch = PodWatch(self.api)
        placed_nodes, t0 = [], time.time()
        agree, first_diff = 0, None
        limit = len(arrivals) if not self.a.max_pods else min(self.a.max_pods, len(arrivals))
        try:
            for i in range(limit):
                a = arrivals[i]
                pod = pod_object(i, a, self.a.cpu_pods)
                name = pod["metadata"]["name"]
                self.create(f"/api/v1/namespaces/{NS}/pods", pod)
                got = watch.wait(name, self.a.pod_timeout_s)
                if got is None:
                    raise RuntimeError(f"arrival {i} ({name}): neither bound nor unschedulable "
                                       f"after {self.a.pod_timeout_s:g} s")
                node, obj = got
                if node:
                    if a["num_gpus"] > 0:
                        self.unlock(node)
                    node = node.split("-", 1)[1]  # the trace's name
                else:
                    self.delete_pod(name)
                placed_nodes.append(node)
                gpus = granted_gpus(obj) if node else []
                if node == a["node"] and gpus == sorted(a["gpus"]):
                    agree += 1
                elif first_diff is None:
                    first_diff = {
                        "arrival": i, "pod": a["pod"], "cpu_milli": a["cpu_milli"],
                        "num_gpus": a["num_gpus"], "gpu_milli": a["gpu_milli"],
                        "cluster": node, "cluster_rank": rank_of.get(node),
                        "simulator": a["node"], "simulator_rank": rank_of.get(a["node"]),
                        "cluster_gpus": gpus, "simulator_gpus": sorted(a["gpus"]),
                        "conditions": obj.get("status", {}).get("conditions")}
                    log(f"first departure from the simulator: {first_diff}")
                if (i + 1) % self.a.progress_every == 0:
                    el = time.time() - t0
                    log(f"{i + 1}/{limit} arrivals in {el:.0f} s ({(i + 1) / el:.1f}/s); "
                        f"{agree} on the simulator's node and GPUs; "
                        f"{sum(1 for x in placed_nodes if not x)} unschedulable")
        finally:
            watch.stop = True
        return placed_nodes, time.time() - t0, agree, first_diff


def simulate(a, replay_file):
    cmd = [os.path.join(a.build, "fracgpu"), "simulate", "-q", "--no-bound",
           "--policies", a.policy, "--seeds", str(a.seed), "--trace", a.trace,
           "--nodes", a.nodes_csv, "--replay-out", replay_file,
           "--out", os.path.join(a.log_dir, "simulate")]
    log(" ".join(cmd))
    r = subprocess.run(cmd, capture_output=True, text=True)
    with open(os.path.join(a.log_dir, "simulate.txt"), "w") as f:
        f.write(r.stdout + r.stderr)
    if r.returncode != 0:
        raise RuntimeError(f"fracgpu simulate failed ({r.returncode}): {r.stderr[-2000:]}")
    return json.load(open(replay_file))


def smoke_inputs(a):
    """The smoke input: the first 40 GPU nodes and the trace's first 250 pods by name."""
    os.makedirs(a.log_dir, exist_ok=True)
    for src, dst, rows in ((os.path.join(DATA, "openb_node_list_gpu_node.csv"), "nodes.csv", 40),
                           (os.path.join(DATA, "openb_pod_list_default.csv"), "pods.csv", 250)):
        with open(src) as f:
            lines = list(csv.reader(f))
        with open(os.path.join(a.log_dir, dst), "w", newline="") as f:
            csv.writer(f).writerows(lines[:rows + 1])
    a.nodes_csv = os.path.join(a.log_dir, "nodes.csv")
    a.trace = os.path.join(a.log_dir, "pods.csv")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trace", default=os.path.join(DATA, "openb_pod_list_default.csv"))
    ap.add_argument("--nodes-csv", default=os.path.join(DATA, "openb_node_list_gpu_node.csv"))
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--policy", default="FGD+CpuRoute+Crumb",
                    help="the simulator's policy (the extender runs fragmentation-aware = "
                         "FGD+CpuRoute+Crumb; another name measures the distance to that policy)")
    ap.add_argument("--kube-scores", choices=("off", "on"), default="off",
                    help="kube-scheduler's own score plugins in the fracgpu-scheduler profile")
    ap.add_argument("--cpu-pods", choices=("extender", "kube-scheduler"), default="extender",
                    help="CPU-only pods: placed by fracgpu's extender (FGD+CpuRoute+Crumb, as the "
                         "simulator places them) or by the default kube-scheduler")
    ap.add_argument("--max-pods", type=int, default=0, help="stop after this many arrivals")
    ap.add_argument("--pod-timeout-s", type=float, default=120.0)
    ap.add_argument("--progress-every", type=int, default=500)
    add_cluster_args(ap, "/tmp/fracgpu-cluster-trace", 1000,
                     "the suite (0), test_sandbox.py (2000), `make sandbox` (3000), scale.py "
                     "(3100, 3200) and this bench's smoke test (1100)", "/tmp/fracgpu-trace-<seed>")
    ap.add_argument("--smoke", action="store_true",
                    help="the first 40 GPU nodes and the trace's first 250 pods")
    a = ap.parse_args()
    if a.port_offset + 29444 >= 32768:
        ap.error("--port-offset: the cluster's highest port, 29444 + offset, must stay below 32768")
    a.log_dir = a.log_dir or f"/tmp/fracgpu-trace-{a.seed}" + ("-smoke" if a.smoke else "")
    os.makedirs(a.log_dir, exist_ok=True)
    if a.smoke:
        smoke_inputs(a)
    a.out = a.out or os.path.join(a.log_dir, "table.md")
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    load0 = os.getloadavg()[0]

    replay_file = os.path.join(a.log_dir, "replay.json")
    replay = simulate(a, replay_file)
    arrivals, cap = replay["arrivals"], replay["capacity_milli"]
    max_bucket = max(130, math.ceil(replay["tune"] * 100))
    sim_buckets = bucketize(samples_of(arrivals, [bool(x["node"]) for x in arrivals]), cap,
                            max_bucket)
    for b in (100, 130):  # the port of Bucketize gives the simulator's own figures
        if sim_buckets.get(b) != replay["alloc_pct"].get(str(b)):
            raise RuntimeError(f"bucketize: {sim_buckets.get(b)} at {b} %, the simulator "
                               f"printed {replay['alloc_pct'].get(str(b))}")
    workload_file = os.path.join(a.log_dir, "workload.json")
    with open(workload_file, "w") as f:
        json.dump(replay["target_workload"], f)
    log(f"simulator: {len(replay['nodes'])} nodes, {len(arrivals)} arrivals, "
        f"{replay['failed']} fit nowhere; allocation {replay['alloc_pct']['100']} % at 100 %, "
        f"{replay['alloc_pct']['130']} % at 130 %")

    b = TraceBench(a)
    try:
        b.up(a.build, a.scheduler_arg)
        b.configure(workload_file)
        b.make_namespace(NS)
        t0 = time.time()
        for rank, n in enumerate(replay["nodes"]):
            b.create_node(node_object(rank, n))
        b.wait_nodes(len(replay["nodes"]), f"{LABEL.replace('/', '%2F')}%3Dtrace",
                     schedulers=("fracgpu",))
        log(f"{len(replay['nodes'])} nodes created and seen in {time.time() - t0:.0f} s")
        placed, elapsed, agree, first_diff = b.replay(replay)
    finally:
        if not a.keep:
            for name in ("fracgpu-scheduler", "fracgpu-kube-scheduler", "apiserver"):
                src = os.path.join(a.dir, "logs", f"{name}.log")
                if os.path.exists(src):
                    shutil.copy(src, os.path.join(a.log_dir, f"{name}.log"))
            b.down()

    n = len(placed)
    done = arrivals[:n]
    cl_samples = samples_of(done, [bool(x) for x in placed])
    cl_buckets = bucketize(cl_samples, cap, max_bucket)
    reached = round(cl_samples[-1][0] / cap * 100) if cl_samples else 0
    sim_part = bucketize(samples_of(done, [bool(x["node"]) for x in done]), cap, max_bucket)
    rows = []
    for pct in (100, 130):
        if pct > reached:
            continue
        c, s = cl_buckets.get(pct), sim_part.get(pct)
        rows.append((pct, c, s, c - s))
    sim_failed = sum(1 for x in done if not x["node"])
    cl_failed = sum(1 for x in placed if not x)
    out = []
    w = out.append
    cmd = ("python3 bench/cluster/trace.py" + (" --smoke" if a.smoke else "") + f" --seed {a.seed}"
           + (f" --max-pods {a.max_pods}" if a.max_pods else "")
           + (f" --kube-scores {a.kube_scores}" if a.kube_scores != "off" else "")
           + (f" --cpu-pods {a.cpu_pods}" if a.cpu_pods != "extender" else ""))
    w(f"Trace through kube-scheduler + extender, {started} UTC: `{cmd}`"
      + f"; trace {os.path.basename(a.trace)}, {len(replay['nodes']):,} nodes, "
      f"{n:,} of {len(arrivals):,} arrivals replayed in {elapsed:.0f} s "
      f"({n / elapsed if elapsed else 0:.1f} pods/s); simulator policy {replay['policy']}, "
      f"kube-scheduler score plugins {a.kube_scores}, CPU-only pods by {a.cpu_pods}; {os.cpu_count()} CPUs, load {load0:.1f} at start.")
    w("")
    w("| arrived | cluster (kube-scheduler + extender) | simulator | cluster − simulator |")
    w("|---|---|---|---|")
    for pct, c, s, d in rows:
        w(f"| {pct} % | {c:.2f} | {s:.2f} | {d:+.2f} |")
    w("")
    w(f"Arrivals on the simulator's node and GPUs: {agree:,} of {n:,}; unschedulable (deleted) on the "
      f"cluster {cl_failed:,}, fit nowhere in the simulator {sim_failed:,}."
      + ("" if first_diff is None else
         f" First departure: arrival {first_diff['arrival']} ({first_diff['pod']}, "
         f"{first_diff['cpu_milli']}m CPU, {first_diff['num_gpus']} x {first_diff['gpu_milli']} "
         f"milli-GPU): cluster {first_diff['cluster'] or 'unschedulable'} "
         f"{','.join(g.rsplit('-', 1)[-1] for g in first_diff['cluster_gpus'])}, simulator "
         f"{first_diff['simulator'] or 'nowhere'} "
         f"{','.join(g.rsplit('-', 1)[-1] for g in first_diff['simulator_gpus'])}."))
    text = "\n".join(out) + "\n"
    with open(a.out, "w") as f:
        f.write(text)
    with open(os.path.join(a.log_dir, "result.json"), "w") as f:
        json.dump({"args": vars(a), "seed": a.seed, "policy": replay["policy"], "nodes": len(replay["nodes"]),
                   "arrivals": len(arrivals), "replayed": n, "elapsed_s": elapsed,
                   "agree": agree, "first_difference": first_diff,
                   "cluster_failed": cl_failed, "sim_failed": sim_failed,
                   "cluster_alloc": {str(k): v for k, v in cl_buckets.items()},
                   "sim_alloc": {str(k): v for k, v in sim_part.items()},
                   "placements": placed, "sim_placements": [x["node"] for x in done]}, f)
    print(text)
    log(f"table in {a.out}")
    return 0 if n == len(arrivals) else 1


if __name__ == "__main__":
    sys.exit(main())
