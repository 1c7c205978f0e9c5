#!/usr/bin/env python3
"""Time from going over the limit to the kill, over N runs (issue 14 "Must show").

Each run: `fracgpu run --gpumem 1000 --poll-ms P -- enforce_bypass_app bypass:1100 hold:15000`
on the fake driver and NVML. The bypass program prints "over <CLOCK_MONOTONIC ns>" right after
its allocation returned (it went around libvgpu.so); the time of `run`'s exit (it exits at once
when the killed child is reaped) is taken on the same clock. Prints the distribution in ms.

  bench/enforce_kill_latency.py build/release [runs] [poll_ms]
"""
import os, subprocess, sys, tempfile, time, statistics

build = sys.argv[1] if len(sys.argv) > 1 else "build/release"
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 100
poll = sys.argv[3] if len(sys.argv) > 3 else "100"
fakes = os.path.join(build, "fakes/lib")
lat = []
for i in range(runs):
    with tempfile.TemporaryDirectory(prefix="fracgpu-kill-") as d:
        env = {"LD_LIBRARY_PATH": fakes, "FAKE_GPU_DEVICES": "GPU-11111111-1111-1111-1111-111111111111:4096",
               "FAKE_GPU_STATE_DIR": d, "LIBCUDA_LOG_LEVEL": "0", "PATH": "/usr/bin:/bin"}
        p = subprocess.Popen([os.path.join(build, "fracgpu"), "run", "--lib", os.path.join(build, "lib/libvgpu.so"),
                              "--nvml-library", os.path.join(fakes, "libnvidia-ml.so.1"), "--poll-ms", poll,
                              "--gpumem", "1000", "--", os.path.join(build, "tests/enforce/enforce_bypass_app"),
                              "bypass:1100", "hold:15000"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = p.communicate()
        t_exit = time.monotonic_ns()
        line = [l for l in out.decode().splitlines() if l.startswith("over ")]
        if p.returncode != 3 or not line:
            print(f"run {i}: rc {p.returncode}, no kill: {err.decode().strip()}", file=sys.stderr)
            continue
        lat.append((t_exit - int(line[0].split()[1])) / 1e6)
lat.sort()
q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))]
print(f"poll {poll} ms, confirm 2 polls, {len(lat)}/{runs} runs killed: "
      f"min {lat[0]:.0f} p50 {q(0.5):.0f} p90 {q(0.9):.0f} p99 {q(0.99):.0f} max {lat[-1]:.0f} "
      f"mean {statistics.mean(lat):.0f} ms")
