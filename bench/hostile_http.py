#!/usr/bin/env python3
"""Hostile-traffic figures for `fracgpu scheduler` (issue 15), on loopback only.

Starts the fake API server and the scheduler (plain HTTP, a health listener), then:
  1. 12 concurrent 50 MB POST /webhook bodies (Content-Length declared, then chunked):
     peak (VmHWM) and settled RSS of the scheduler, and what each client got back;
  2. 64 slow clients that each send one header line every 2 s on the main port: /healthz
     latency on the health port and on the main port while they hold on;
  3. a normal AdmissionReview answered afterwards.
Usage: bench/hostile_http.py BUILD_DIR   (e.g. build/release). Prints the figures.
"""
import json, os, socket, subprocess, sys, tempfile, threading, time

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

def http(p, method, path, body=b"", timeout=5):
    s = socket.create_connection(("127.0.0.1", p), timeout=timeout)
    t0 = time.monotonic()
    s.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    out = b""
    while True:
        try:
            d = s.recv(65536)
        except socket.timeout:
            break
        if not d:
            break
        out += d
    s.close()
    return out, time.monotonic() - t0

for _ in range(100):
    try:
        if http(health, "GET", "/healthz")[0].startswith(b"HTTP/1.1 200"):
            break
    except OSError:
        pass
    time.sleep(0.1)
print(f"scheduler pid {sched.pid}, RSS at start {status_kb('VmRSS:') // 1024} MB")

# 1. 12 concurrent 50 MB bodies.
chunk = b"x" * (1 << 20)
results = []
def big(chunked):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        if chunked:
            s.sendall(b"POST /webhook HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
            for _ in range(50):
                s.sendall(b"100000\r\n" + chunk + b"\r\n")
            s.sendall(b"0\r\n\r\n")
        else:
            s.sendall(b"POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Length: 52428800\r\n\r\n")
            for _ in range(50):
                s.sendall(chunk)
        answer = s.recv(200)
        results.append(answer.split(b"\r\n")[0].decode(errors="replace"))
    except OSError as e:
        results.append(f"client error: {type(e).__name__} (server closed after answering or cutting)")
for chunked in (False, True):
    results.clear()
    ts = [threading.Thread(target=big, args=(chunked,)) for _ in range(12)]
    [t.start() for t in ts]
    peak = 0
    while any(t.is_alive() for t in ts):
        peak = max(peak, status_kb("VmRSS:"))
        time.sleep(0.01)
    [t.join() for t in ts]
    time.sleep(1.0)
    kind = "chunked" if chunked else "Content-Length"
    print(f"12 x 50 MB ({kind}): peak RSS sampled {peak // 1024} MB, VmHWM {status_kb('VmHWM:') // 1024} MB, "
          f"settled RSS {status_kb('VmRSS:') // 1024} MB; answers: {sorted(set(results))}")

# 2. 64 slow clients.
slow = []
stop = threading.Event()
def trickle(s):
    i = 0
    while not stop.is_set():
        try:
            s.sendall(f"X-Slow-{i}: 1\r\n".encode())
        except OSError:
            return
        i += 1
        stop.wait(2)
for _ in range(64):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /webhook HTTP/1.1\r\nHost: x\r\n")
    slow.append(s)
    threading.Thread(target=trickle, args=(s,), daemon=True).start()
time.sleep(0.5)
lat_h, lat_m = [], []
for _ in range(20):
    out, dt = http(health, "GET", "/healthz")
    lat_h.append((dt, out.split(b"\r\n")[0]))
    out, dt = http(port, "GET", "/healthz", timeout=15)
    lat_m.append((dt, out.split(b"\r\n")[0]))
    time.sleep(0.25)
def summary(l):
    ts = sorted(x[0] * 1000 for x in l)
    return f"median {ts[len(ts) // 2]:.1f} ms, max {ts[-1]:.1f} ms, answers {sorted(set(x[1].decode() for x in l))}"
print(f"64 slow clients: /healthz on the health port: {summary(lat_h)}")
print(f"64 slow clients: /healthz on the main port:   {summary(lat_m)}")
stop.set()
for s in slow:
    s.close()

# 3. A normal request right after.
review = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                     "request": {"uid": "after", "operation": "CREATE", "object": {"metadata": {"name": "p"}}}}).encode()
out, dt = http(port, "POST", "/webhook", review)
first = out.split(b"\r\n")[0].decode()
allowed = b'"allowed":true' in out
print(f"normal AdmissionReview after: {first} in {dt * 1000:.1f} ms, allowed={allowed}; "
      f"scheduler alive: {sched.poll() is None}")
sched.terminate(); api.terminate()
sched.wait(); api.wait()
os.unlink(cfg.name)
