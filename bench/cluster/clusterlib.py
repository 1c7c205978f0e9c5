"""What the cluster benchmarks of bench/cluster share (issue 37): HTTPS clients of the API server,
kube-scheduler and fracgpu's scheduler, Prometheus text parsing and histogram quantiles, process
CPU and memory, and `ControlPlane`, a control plane without kubelets started by
`scripts/cluster.sh up --nodes 0` in its own state folder and port offset, with nodes created as
API objects (the node lifecycle controller stopped, the not-ready taint lifted by the bench).

Used by scale.py (throughput and latency) and trace.py (the Alibaba trace through
kube-scheduler + extender)."""

import http.client
import json
import os
import queue
import re
import ssl
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLUSTER = os.path.join(REPO, "scripts", "cluster.sh")
REGISTER = "hami.io/node-nvidia-register"
HANDSHAKE = "hami.io/node-handshake"
LOCK = "hami.io/mutex.lock"
# The highest port scripts/cluster.sh uses, before the offset (the API server's).
API_PORT = 29444

def add_cluster_args(ap, state_dir, port_offset, offset_apart, log_dir):
    """The options every bench of this folder takes for its own cluster: --dir (default
    `state_dir`), --port-offset (default `port_offset`; `offset_apart` says which other clusters'
    offsets it keeps clear of), --out, --log-dir (default `log_dir`), --build, --cluster-script
    and --keep."""
    ap.add_argument("--dir", default=state_dir, help="cluster state folder")
    ap.add_argument("--port-offset", type=int, default=port_offset,
                    help="FRACGPU_CLUSTER_PORT_OFFSET: the cluster uses ports 29010-29444 + it, "
                         f"below 32768; {port_offset} is apart from {offset_apart}")
    ap.add_argument("--out", default=None, help="markdown table (default <log-dir>/table.md)")
    ap.add_argument("--log-dir", default=None, help=f"default {log_dir}")
    ap.add_argument("--build", default=os.path.join(REPO, "build", "release"),
                    help="the build folder whose fracgpu runs (scripts/cluster.sh --build)")
    ap.add_argument("--cluster-script", default=CLUSTER,
                    help="scripts/cluster.sh of another checkout (e.g. `git archive` of a commit)")
    ap.add_argument("--keep", action="store_true", help="leave the cluster up afterwards")
    ap.add_argument("--scheduler-arg", action="append", default=[], metavar="ARG",
                    help="one more argument of `fracgpu scheduler` (repeatable), e.g. "
                         "--scheduler-arg=--binpack-avoid-busy-nodes (docs/performance.md runs 3 "
                         "and 4 ran with it)")


def bench_node(name, bench, register, resources):
    """A Ready GPU Node object without a kubelet: `name`, the label fracgpu.io/bench=`bench`,
    fracgpu's registration annotation `register` (hami.io/node-nvidia-register) and `resources`
    as both capacity and allocatable (a dict of quantities)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name,
                     "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                "kubernetes.io/arch": "amd64", "gpu": "on",
                                "fracgpu.io/bench": bench},
                     "annotations": {REGISTER: register}},
        "spec": {},
        "status": {"capacity": resources, "allocatable": resources,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                   "message": "bench node (no kubelet)",
                                   "lastHeartbeatTime": now, "lastTransitionTime": now}],
                   "nodeInfo": {"kubeletVersion": "v1.37.2", "operatingSystem": "linux",
                                "architecture": "amd64"}},
    }


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# HTTPS clients (one connection per thread, kept alive)

class Client:
    def __init__(self, host, port, ca, cert, key):
        self.host, self.port = host, port
        self.ctx = ssl.create_default_context(cafile=ca)
        self.ctx.check_hostname = False
        self.ctx.load_cert_chain(cert, key)
        self.local = threading.local()

    def _conn(self):
        c = getattr(self.local, "conn", None)
        if c is None:
            c = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=120)
            self.local.conn = c
        return c

    def request(self, method, path, body=None, headers=None, retries=3):
        hdrs = {"Accept": "application/json"}
        if body is not None:
            hdrs["Content-Type"] = "application/json"
            if not isinstance(body, (bytes, str)):
                body = json.dumps(body)
        hdrs.update(headers or {})
        for attempt in range(retries):
            c = self._conn()
            try:
                c.request(method, path, body=body, headers=hdrs)
                r = c.getresponse()
                data = r.read()
                return r.status, data
            except (OSError, http.client.HTTPException):
                c.close()
                self.local.conn = None
                if attempt == retries - 1:
                    raise
                time.sleep(0.2)


def kubeconfig_paths(state):
    pki = os.path.join(state, "pki")
    return {"ca": f"{pki}/ca.crt", "cert": f"{pki}/admin.crt", "key": f"{pki}/admin.key"}


# ---------------------------------------------------------------------------------------------
# Prometheus text

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text, names):
    """{(name, frozenset(labels)): value} for the families whose name starts with one of names."""
    out = {}
    for line in text.splitlines():
        if not line or line[0] == "#" or not line.startswith(names):
            continue
        m = SAMPLE.match(line)
        if not m:
            continue
        labels = frozenset(LABEL.findall(m.group(3) or ""))
        try:
            out[(m.group(1), labels)] = float(m.group(4))
        except ValueError:
            pass
    return out


def select(samples, name, **want):
    """Samples of name whose labels include want: list of (labels dict, value)."""
    res = []
    for (n, labels), v in samples.items():
        if n != name:
            continue
        d = dict(labels)
        if all(d.get(k) == val for k, val in want.items()):
            res.append((d, v))
    return res


def histogram(samples, base, **want):
    """(buckets [(le, cumulative count)], sum, count) summed over the series matching want."""
    buckets = {}
    for d, v in select(samples, base + "_bucket", **want):
        le = float("inf") if d["le"] == "+Inf" else float(d["le"])
        buckets[le] = buckets.get(le, 0.0) + v
    s = sum(v for _, v in select(samples, base + "_sum", **want))
    c = sum(v for _, v in select(samples, base + "_count", **want))
    return sorted(buckets.items()), s, c


def hist_delta(after, before):
    b = dict(before[0])
    return ([(le, n - b.get(le, 0.0)) for le, n in after[0]], after[1] - before[1], after[2] - before[2])


def quantile(q, hist):
    """Prometheus histogram_quantile: linear interpolation inside the bucket."""
    buckets, _, count = hist
    if count <= 0 or not buckets:
        return float("nan")
    rank = q * buckets[-1][1]
    prev_le, prev_n = 0.0, 0.0
    for le, n in buckets:
        if n >= rank:
            if le == float("inf"):
                return prev_le
            if n == prev_n:
                return le
            return prev_le + (le - prev_le) * (rank - prev_n) / (n - prev_n)
        prev_le, prev_n = le, n
    return buckets[-1][0]


# ---------------------------------------------------------------------------------------------
# Processes

def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_mem(pid):
    rss = hwm = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) * 1024
    return rss, hwm


def component_pid(state, name):
    """The daemon's pid (setsid execs the command; if it forked, its one child)."""
    pid = int(open(os.path.join(state, "pids", name)).read())
    exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    if exe == "setsid":
        kids = open(f"/proc/{pid}/task/{pid}/children").read().split()
        pid = int(kids[0])
    return pid


COMPONENTS = [("kube-apiserver", "apiserver"), ("etcd", "etcd"),
              ("kube-scheduler (fracgpu profile)", "fracgpu-kube-scheduler"),
              ("kube-scheduler (default)", "kube-scheduler-default"),
              ("fracgpu scheduler", "fracgpu-scheduler")]


def parse_cpu_shares(items):
    """--cpu-shares' COMPONENT=SHARES items as {component: shares}. ValueError naming the item:
    an unknown or repeated component, or shares that are not plain digits within cgroup v1's
    2..262144 (Linux MIN_SHARES and MAX_SHARES, kernel/sched/sched.h)."""
    names = [n for _, n in COMPONENTS]
    out = {}
    for it in items:
        name, sep, value = it.partition("=")
        if not sep or name not in names:
            raise ValueError(f"--cpu-shares {it!r}: expected COMPONENT=SHARES, COMPONENT one of "
                             f"{', '.join(names)}")
        if name in out:
            raise ValueError(f"--cpu-shares {it!r}: {name} is given twice")
        shares = int(value) if re.fullmatch(r"[0-9]{1,6}", value) else 0
        if not 2 <= shares <= 262144:
            raise ValueError(f"--cpu-shares {it!r}: SHARES must be an integer from 2 to 262144")
        out[name] = shares
    return out


def cpu_cgroup_root():
    """The cgroup v1 hierarchy that has the `cpu` controller, from /proc/self/mountinfo, as
    (mount point, the hierarchy's path at that mount point: "/" unless the mount shows a
    sub-tree, as in a container), or None."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            # proc(5): ID parent major:minor root mount-point options [optional...] - type
            # source super-options
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if (len(fields) >= 5 and len(tail) >= 3 and tail[0] == "cgroup"
                    and "cpu" in tail[2].split(",")):
                return fields[4], fields[3]
    return None


def cpu_weight(pid):
    """What weighs process `pid`'s CPU against the others: {"cgroup": its cgroup v1 cpu path
    (from /proc/<pid>/cgroup), "shares": that group's cpu.shares (None in the root group),
    "autogroup" and "autogroup_nice": its autogroup's name and nice value (None outside the
    root group or without autogroups)}. The kernel uses the autogroup only for a task in the root group."""
    path = None
    for ln in open(f"/proc/{pid}/cgroup").read().splitlines():
        parts = ln.split(":", 2)  # cgroups(7): hierarchy-ID:controller-list:cgroup-path
        if len(parts) == 3 and "cpu" in parts[1].split(","):
            path = parts[2]
    out = {"cgroup": path, "shares": None, "autogroup": None, "autogroup_nice": None}
    root = cpu_cgroup_root()
    if path and path != "/" and root:
        mnt, at = root
        rel = os.path.relpath(path, at) if path.startswith(at) else None
        if rel is not None:
            with open(os.path.join(mnt, rel, "cpu.shares")) as f:
                out["shares"] = int(f.read())
    elif path == "/":
        try:
            enabled = open("/proc/sys/kernel/sched_autogroup_enabled").read().strip() == "1"
            text = open(f"/proc/{pid}/autogroup").read()  # "/autogroup-N nice K"
            if enabled:
                out["autogroup"], out["autogroup_nice"] = text.split()[0], int(text.split()[-1])
        except OSError:
            pass
    return out


def describe_cpu_weights(weights):
    """The table's phrase for {component: cpu_weight(...)}."""
    groups = [w["autogroup"] for w in weights.values()]
    if (all(w["autogroup_nice"] == 0 for w in weights.values())
            and len(set(groups)) == len(groups)):
        return "every component in its own autogroup, weight 1024"
    parts = []
    for name, w in weights.items():
        if w["shares"] is not None:
            parts.append(f"{name} cgroup v1 cpu.shares {w['shares']}")
        elif w["autogroup_nice"] is not None:
            parts.append(f"{name} autogroup nice {w['autogroup_nice']}")
        else:
            parts.append(f"{name} cgroup {w['cgroup']}")
    return ", ".join(parts)


def run_parallel(items, fn, threads):
    q = queue.Queue()
    for it in items:
        q.put(it)
    errors = []

    def worker():
        while True:
            try:
                it = q.get_nowait()
            except queue.Empty:
                return
            try:
                fn(it)
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(repr(e))

    ts = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise RuntimeError(f"{len(errors)} errors, first: {errors[0]}")




class ControlPlane:
    """scripts/cluster.sh `up --nodes 0` in `state` with port offset `off`: etcd, kube-apiserver,
    both kube-schedulers, deploy/ applied, `fracgpu scheduler`; kube-controller-manager and
    `fracgpu ui` stopped once up (no kubelet renews a Lease, so the node lifecycle controller
    would taint every node unreachable; the UI is on no measured path)."""

    def __init__(self, state, off, log_dir, cluster_script=CLUSTER):
        self.state, self.off, self.log_dir = state, off, log_dir
        self.cluster_script = cluster_script
        self.env = dict(os.environ, FRACGPU_CLUSTER_DIR=state,
                        FRACGPU_CLUSTER_PORT_OFFSET=str(off))

    def cluster(self, *args, check=True):
        logf = os.path.join(self.log_dir, "cluster.log")
        with open(logf, "a") as f:
            r = subprocess.run(["bash", self.cluster_script, *args], env=self.env, stdout=f,
                               stderr=f)
        if check and r.returncode != 0:
            raise RuntimeError(f"scripts/cluster.sh {' '.join(args)} failed (see {logf})")

    def up(self, build, scheduler_args=()):
        """Brings the control plane up; `scheduler_args` are added to `fracgpu scheduler`'s
        command line (scripts/cluster.sh reads <state>/extra-args/fracgpu-scheduler)."""
        t0 = time.time()
        log(f"scripts/cluster.sh up --nodes 0 (state {self.state}, port offset {self.off})")
        self.cluster("up", "--nodes", "0", "--build", build)
        if scheduler_args:
            # `up` starts from an empty state folder (it removes the old one), so the extra
            # arguments are written after it and the scheduler restarted to read them.
            os.makedirs(os.path.join(self.state, "extra-args"), exist_ok=True)
            with open(os.path.join(self.state, "extra-args", "fracgpu-scheduler"), "w") as f:
                f.writelines(f"{x}\n" for x in scheduler_args)
            self.cluster("restart", "fracgpu-scheduler")
            argv = self.component_argv("fracgpu-scheduler")
            missing = [x for x in scheduler_args if x not in argv]
            if missing:
                raise RuntimeError(f"fracgpu scheduler runs without {missing}: {argv}")
            log(f"fracgpu scheduler restarted with {' '.join(scheduler_args)}")
        self.cluster("stop", "kcm")
        self.cluster("stop", "fracgpu-ui")
        p = kubeconfig_paths(self.state)
        self.api = Client("127.0.0.1", API_PORT + self.off, p["ca"], p["cert"], p["key"])
        self.ksched = {  # kube-scheduler's secure port: the API server's CA signs the admin cert
            "fracgpu": Client("127.0.0.1", 29260 + self.off, None, p["cert"], p["key"]),
            "default": Client("127.0.0.1", 29259 + self.off, None, p["cert"], p["key"])}
        for c in self.ksched.values():
            c.ctx.verify_mode = ssl.CERT_NONE  # self-signed serving certificates
        f = os.path.join(self.state, "fracgpu")
        self.ext = Client("127.0.0.1", 29443 + self.off, f"{f}/ca.crt",
                          f"{self.state}/pki/fracgpu-kube-scheduler-client.crt",
                          f"{self.state}/pki/fracgpu-kube-scheduler-client.key")
        self.up_s = time.time() - t0

    def component_argv(self, name):
        """The command line component `name` runs with now."""
        pid = component_pid(self.state, name)
        argv = open(f"/proc/{pid}/cmdline", "rb").read().rstrip(b"\0").split(b"\0")
        return [x.decode() for x in argv]

    def respawn(self, name, argv):
        """Stops component `name` (scripts/cluster.sh stop) and starts argv in its place, as
        cluster.sh's start() does (own session, log, pid file: `down` ends it)."""
        self.cluster("stop", name)
        os.remove(os.path.join(self.state, "stopped", name))
        with open(os.path.join(self.state, "logs", f"{name}.log"), "a") as logf:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                    start_new_session=True)
        with open(os.path.join(self.state, "pids", name), "w") as f:
            f.write(f"{proc.pid}\n")

    def place_cpu_shares(self, shares):
        """Moves each component of `shares` ({component: cpu.shares}, parse_cpu_shares), its
        whole process, into a cgroup v1 `cpu` group of its own, <cpu hierarchy>/
        fracgpu-bench-<offset>-<component>, with that cpu.shares: as the kubelet weights a pod
        by its CPU request (shares = request in millicores × 1024 / 1000). Each group sits
        beside the root's autogroups, so its weight counts against theirs. RuntimeError, naming
        the component and value, when the group cannot be made or the process is not in it
        with that weight afterwards. `down` removes the groups (not with --keep, and not after
        the bench is killed: `rmdir` them then)."""
        self.cgroups = []
        if not shares:
            return
        root = cpu_cgroup_root()
        if root is None:
            raise RuntimeError("--cpu-shares needs a cgroup v1 hierarchy with the cpu controller; "
                               "/proc/self/mountinfo has none")
        for name, n in shares.items():
            d = os.path.join(root[0], f"fracgpu-bench-{self.off}-{name}")
            pid = component_pid(self.state, name)
            try:
                os.makedirs(d, exist_ok=True)
                self.cgroups.append(d)
                with open(os.path.join(d, "cpu.shares"), "w") as f:
                    f.write(str(n))
                with open(os.path.join(d, "cgroup.procs"), "w") as f:
                    f.write(str(pid))
                got = cpu_weight(pid)
            except OSError as e:
                raise RuntimeError(f"--cpu-shares {name}={n}: cannot place it in {d}: {e}") from e
            if got["shares"] != n:
                raise RuntimeError(f"--cpu-shares {name}={n}: pid {pid} runs with {got}")
        log(f"cpu.shares set: {shares}")

    def cpu_weights(self):
        """{component: cpu_weight(pid)} for every component now."""
        return {name: cpu_weight(component_pid(self.state, name)) for _, name in COMPONENTS}

    def down(self):
        self.cluster("down", check=False)
        for d in getattr(self, "cgroups", []):  # emptied by `down`: its processes are gone
            if os.path.isdir(d):
                try:
                    os.rmdir(d)
                except OSError as e:  # logged, not raised: `down` runs in the bench's finally
                    log(f"ERROR: cannot remove {d}: {e}")

    def scrape_ksched(self, which):
        st, body = self.ksched[which].request("GET", "/metrics", headers={"Accept": "text/plain"})
        if st != 200:
            raise RuntimeError(f"kube-scheduler ({which}) /metrics: {st} {body[:200]!r}")
        return parse_metrics(body.decode(), ("scheduler_",))

    def scrape_ext(self):
        st, body = self.ext.request("GET", "/metrics", headers={"Accept": "text/plain"})
        if st != 200:
            raise RuntimeError(f"fracgpu scheduler /metrics: {st} {body[:200]!r}")
        return parse_metrics(body.decode(),
                             ("fracgpu_http_", "fracgpu_binds_total", "fracgpu_state_lock_"))

    def create(self, path, obj, ok=(201,)):
        st, body = self.api.request("POST", path, obj)
        if st not in ok:
            raise RuntimeError(f"POST {path}: {st} {body[:300]!r}")
        return body

    def make_namespace(self, ns):
        self.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": ns}}, ok=(201, 409))
        # kube-controller-manager is stopped: the ServiceAccount admission needs this one.
        self.create(f"/api/v1/namespaces/{ns}/serviceaccounts",
                    {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
                    ok=(201, 409))

    def create_node(self, obj):
        """Creates a Node and lifts the taint node.kubernetes.io/not-ready:NoSchedule that the
        admission plugin TaintNodesByCondition gives every new node (the node lifecycle
        controller's job once the node reports Ready; that controller is stopped): the node keeps
        exactly the taints `obj` names (spec.taints), none by default."""
        self.create("/api/v1/nodes", obj)
        st, body = self.api.request(
            "PATCH", f"/api/v1/nodes/{obj['metadata']['name']}",
            {"spec": {"taints": obj.get("spec", {}).get("taints") or None}},
            headers={"Content-Type": "application/merge-patch+json"})
        if st != 200:
            raise RuntimeError(f"PATCH node: {st} {body[:300]!r}")

    def wait_nodes(self, n, label_selector, schedulers=("fracgpu", "default"), timeout_s=None):
        """Waits until the kube-schedulers' caches hold n nodes and fracgpu's scheduler has
        written its handshake on the n nodes of label_selector ("key%3Dvalue")."""
        def seen():
            got = {}
            for w in schedulers:
                try:
                    got[w] = sum(v for _, v in select(self.scrape_ksched(w),
                                                      "scheduler_cache_size", type="nodes"))
                except RuntimeError:  # 403 while a restarted kube-scheduler loads its client CA
                    got[w] = 0
            return got

        def handshakes():
            st, body = self.api.request(
                "GET", f"/api/v1/nodes?labelSelector={label_selector}",
                headers={"Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"})
            items = json.loads(body)["items"]
            return sum(1 for it in items
                       if "Requesting" in it["metadata"].get("annotations", {}).get(HANDSHAKE, ""))

        deadline = time.time() + (timeout_s or max(120, n / 20))
        while True:
            s, h = seen(), handshakes()
            if all(v >= n for v in s.values()) and h >= n:
                return
            if time.time() > deadline:
                raise RuntimeError(f"nodes not seen: kube-schedulers {s}, handshakes {h} of {n}")
            time.sleep(1)
