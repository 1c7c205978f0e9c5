#!/usr/bin/env python3
"""Connection-level attacks on `fracgpu scheduler` (issue 33 items 6 and 9), on loopback only.

Starts the fake API server and the scheduler (plain HTTP on 127.0.0.1, a health listener), then:
  1. 64 connections that each send one 64 MiB header line (in 64 KiB pieces, until the server
     answers or closes): the scheduler's peak (VmHWM) and kept RSS, and what the clients got;
  2. 240 slow clients (30 from each of 127.0.0.2 … 127.0.0.9) that send one header line every
     2 s and never finish, while /filter is called 300 times from 127.0.0.1 on one kept-alive
     connection and 100 times on a new connection each: p50, p99 and max latency of /filter,
     and the same with no attack for comparison.
Usage: bench/hostile_conns.py BUILD_DIR   (e.g. build/release). Prints the figures.
"""
import http.client, json, os, socket, subprocess, sys, tempfile, threading, time

build = sys.argv[1] if len(sys.argv) > 1 else "build/release"


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


api_port, port, health = free_port(), free_port(), free_port()
api = subprocess.Popen([f"{build}/tests/fakes/apiserver/fake-apiserver", str(api_port)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(0.5)
cfg = tempfile.NamedTemporaryFile("w", suffix=".kubeconfig", delete=False)
cfg.write(f"""apiVersion: v1
kind: Config
clusters: [{{name: fake, cluster: {{server: "http://127.0.0.1:{api_port}"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: c, context: {{cluster: fake, user: u}}}}]
current-context: c
""")
cfg.close()
sched = subprocess.Popen([f"{build}/fracgpu", "scheduler", "--listen", f"127.0.0.1:{port}",
                          "--health-port", str(health), "--kubeconfig", cfg.name],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def status_kb(field):
    with open(f"/proc/{sched.pid}/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return -1


def ready():
    try:
        c = http.client.HTTPConnection("127.0.0.1", health, timeout=2)
        c.request("GET", "/readyz")
        return c.getresponse().status == 200
    except OSError:
        return False


for _ in range(200):
    if ready():
        break
    time.sleep(0.1)
print(f"scheduler pid {sched.pid}, RSS at start {status_kb('VmRSS:') // 1024} MiB")

# 1. 64 connections, one 64 MiB header line each.
answers, sent_total = [], []
lock = threading.Lock()


def huge_line():
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\nX-Huge: ")
    piece, sent, answer = b"a" * 65536, 0, b""
    try:
        while sent < (64 << 20):
            s.sendall(piece)
            sent += len(piece)
            s.setblocking(False)
            try:
                answer = s.recv(200)
            except BlockingIOError:
                pass
            s.setblocking(True)
            if answer:
                break
        if not answer:
            answer = s.recv(200)
    except OSError as e:
        answer = answer or f"closed ({type(e).__name__})".encode()
    with lock:
        answers.append(answer.split(b"\r\n")[0].decode(errors="replace"))
        sent_total.append(sent)
    s.close()


ts = [threading.Thread(target=huge_line) for _ in range(64)]
[t.start() for t in ts]
peak = 0
while any(t.is_alive() for t in ts):
    peak = max(peak, status_kb("VmRSS:"))
    time.sleep(0.005)
[t.join() for t in ts]
time.sleep(2.0)
print(f"64 x one 64 MiB header line: peak RSS sampled {peak // 1024} MiB, VmHWM "
      f"{status_kb('VmHWM:') // 1024} MiB, kept RSS {status_kb('VmRSS:') // 1024} MiB; "
      f"bytes each client got in before the answer: max {max(sent_total) >> 20} MiB; "
      f"answers: {sorted(set(answers))}")

# 2. /filter latency with and without 240 slow clients.
pod = {"metadata": {"name": "p", "namespace": "default", "uid": "u1"},
       "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
body = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": [f"node-{i}" for i in range(100)]})


def filter_latencies(n_kept, n_new):
    kept, new = [], []
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for _ in range(n_kept):
        t0 = time.monotonic()
        c.request("POST", "/filter", body, {"Content-Type": "application/json"})
        r = c.getresponse(); r.read()
        assert r.status == 200, r.status
        kept.append(time.monotonic() - t0)
    c.close()
    for _ in range(n_new):
        t0 = time.monotonic()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("POST", "/filter", body, {"Content-Type": "application/json"})
        r = c.getresponse(); r.read()
        assert r.status == 200, r.status
        new.append(time.monotonic() - t0)
        c.close()
    return kept, new


def summary(xs):
    xs = sorted(x * 1000 for x in xs)
    return (f"p50 {xs[len(xs) // 2]:.2f} ms, p99 {xs[min(len(xs) - 1, int(len(xs) * 0.99))]:.2f} ms, "
            f"max {xs[-1]:.2f} ms")


kept, new = filter_latencies(300, 100)
print(f"no attack: /filter kept-alive {summary(kept)}; new connection {summary(new)}")

stop = threading.Event()
slow, refused = [], 0


def trickle(s):
    i = 0
    while not stop.is_set():
        try:
            s.sendall(f"X-Slow-{i}: 1\r\n".encode())
        except OSError:
            return
        i += 1
        stop.wait(2)


for k in range(240):
    src = f"127.0.0.{2 + k // 30}"
    try:
        s = socket.create_connection(("127.0.0.1", port), source_address=(src, 0))
        s.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\n")
        slow.append(s)
        threading.Thread(target=trickle, args=(s,), daemon=True).start()
    except OSError:
        refused += 1
time.sleep(1.0)
kept, new = filter_latencies(300, 100)
print(f"240 slow clients ({len(slow)} connected, {refused} refused): /filter kept-alive "
      f"{summary(kept)}; new connection {summary(new)}; scheduler threads "
      f"{len(os.listdir(f'/proc/{sched.pid}/task'))}, RSS {status_kb('VmRSS:') // 1024} MiB")
stop.set()
for s in slow:
    s.close()
print(f"scheduler alive: {sched.poll() is None}")
sched.terminate(); api.terminate()
sched.wait(); api.wait()
os.unlink(cfg.name)
