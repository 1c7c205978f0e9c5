#!/usr/bin/env python3
"""One command-line convention across every `fracgpu` subcommand (issue 38 item 5;
docs/development.md "The command line").

  cli_conventions_test.py BUILD/fracgpu

The subcommands are read from `fracgpu` run alone (its list of subcommands), so a new one is
covered at once. For each:
  - an unknown flag exits 2 with one line `fracgpu <command>: <message>` on stderr;
  - a bad value of a validated flag (BAD_VALUES: every subcommand with flags needs an entry)
    exits 2 with the same prefix;
  - the commands that read the cluster refuse bad flags with exit 2 before they read it: their
    kubeconfig names a file that does not exist, or a server that accepts connections and never
    answers (a command that talked to it first would hang past the time limit);
  - the old spellings (--http-bind, --signature-key-file, the monitor's --listen HOST --port PORT)
    still work, with one deprecation line.
Exit status 0 when every check passes; each failure is printed.
"""

import atexit
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

FRACGPU = sys.argv[1] if len(sys.argv) > 1 else "build/release/fracgpu"
LIMIT_S = 15  # a command that waits on a connection runs past this
failures = []


def run(args, env=None, timeout=LIMIT_S):
    """(rc, stdout, stderr, seconds) of `fracgpu <args>`; rc None when it ran past `timeout`."""
    start = time.monotonic()
    try:
        p = subprocess.run([FRACGPU] + args, capture_output=True, text=True, timeout=timeout,
                           env=env, stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout, p.stderr, time.monotonic() - start
    except subprocess.TimeoutExpired as e:
        return None, e.stdout or "", e.stderr or "", time.monotonic() - start


def check(what, cond, detail=""):
    if not cond:
        failures.append(f"{what}: {detail}")
        print(f"FAIL {what}: {detail}")
    else:
        print(f"ok   {what}")


def expect_usage_error(command, args, env, contains=None, before=None):
    """`fracgpu <command> <args>` exits 2; stderr's lines after the `before` lines (deprecation
    lines) are exactly one, `fracgpu <command>: ...` (containing `contains`)."""
    rc, out, err, took = run([command] + args, env)
    what = f"fracgpu {' '.join([command] + args)}"
    lines = err.splitlines()
    deprecations = [l for l in lines if l.endswith("is deprecated; use " + (before or "\0"))]
    rest = [l for l in lines if l not in deprecations]
    prefix = f"fracgpu {command}: "
    check(what, rc == 2 and len(rest) == 1 and rest[0].startswith(prefix) and
          (contains is None or contains in rest[0]) and (before is None or len(deprecations) == 1),
          f"rc {rc} after {took:.1f} s, want 2 and one line starting {prefix!r}"
          f"{' containing ' + repr(contains) if contains else ''}"
          f"{' after one deprecation line' if before else ''}; stderr:\n{err}")


# Bad values of validated flags: (args, a part of the message). Flags a command checks before its
# first connection come with --kubeconfig of the environment (see below).
BAD_VALUES = {
    "scheduler": [(["--listen", "0.0.0.0:99999"], "0.0.0.0:99999"),
                  (["--listen", "nohostport"], "nohostport"),
                  (["--allow-unauthenticated", "--gpu-scheduler-policy", "nope"],
                   "--gpu-scheduler-policy"),
                  (["--health-port", "70000"], "--health-port"),
                  (["--allow-unauthenticated", "--signing-key-file", "/nonexistent/key"],
                   "--signing-key-file")],
    "device-plugin": [(["--node-name", "n", "--allow-unsigned", "--device-list-strategy", "nope"],
                       "nope"),
                      (["--node-name", "n", "--signing-key-file", "/nonexistent/key"],
                       "--signing-key-file"),
                      (["--register-interval", "0"], "--register-interval")],
    "dra-driver": [(["--node-name", "n", "--consumable-capacity", "maybe"], "maybe"),
                   (["--node-name", "n", "--slice-interval", "0"], "--slice-interval"),
                   (["--node-name", "n", "--config-file", "@CONFIG@"], "--config-file")],
    "monitor": [(["--node-name", "n", "--listen", "0.0.0.0:70000"], "0.0.0.0:70000"),
                (["--node-name", "n", "--enforce-memory", "nope"], "--enforce-memory"),
                (["--node-name", "n", "--interval", "0"], "--interval")],
    "ui": [(["--listen", "0.0.0.0:http"], "0.0.0.0:http"),
           (["--listen", "127.0.0.1:0", "--gateway-secret-file", "/nonexistent/secret"],
            "--gateway-secret-file"),
           (["--gpu-scheduler-policy", "nope"], "--gpu-scheduler-policy"),
           (["--listen", "127.0.0.1:0", "--cluster-cache-ms", "-1"], "--cluster-cache-ms")],
    "certs": [(["--namespace", "Bad_NS"], "Bad_NS"), (["--validity-days", "0"], "--validity-days")],
    "simulate": [(["--tune", "0"], "--tune"), (["--node-order", "nope"], "--node-order")],
    "run": [(["--gpumem", "abc", "--", "true"], "--gpumem"),
            (["--gpumem", "100", "--gpucores", "200", "--", "true"], "--gpucores")],
    "inspect": [(["/nonexistent/region.cache"], "/nonexistent/region.cache")],
    "kube-scheduler-manifest": [(["--server-version", "banana"], "banana")],
}
NO_FLAGS = {"version"}
# What a command needs before CLI11 looks at the rest of its arguments.
REQUIRED = {"run": ["--gpumem", "100"], "inspect": ["region.cache"],
            "kube-scheduler-manifest": ["--server-version", "1.31"]}
# The commands that read the cluster (or open a device) once their flags are accepted.
CONNECTING = {"scheduler", "device-plugin", "dra-driver", "monitor", "ui", "certs"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, proc, seconds=LIMIT_S):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def main():
    tmp = tempfile.mkdtemp(prefix="fracgpu-cli-conventions-")
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)  # each run left its folder behind
    # A server that accepts connections and never answers: talking to it first would hang.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    kubeconfig = os.path.join(tmp, "kubeconfig")
    with open(kubeconfig, "w") as f:
        f.write("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
                f"    server: https://127.0.0.1:{silent.getsockname()[1]}\n"
                "    insecure-skip-tls-verify: true\n"
                "users:\n- name: u\n  user:\n    token: t\n"
                "contexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n")
    bad_config = os.path.join(tmp, "device-config.yaml")
    with open(bad_config, "w") as f:
        f.write("nvidia: [this is not a map\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("NODE_NAME", "HOOK_PATH", "CONFIG_FILE", "KUBELET_SOCKET_DIR")}
    env["KUBECONFIG"] = kubeconfig
    env["HOME"] = tmp
    env["TMPDIR"] = tmp

    # The subcommands, as `fracgpu` alone lists them.
    rc, out, err, _ = run([], env)
    check("fracgpu alone exits 2 and lists the subcommands",
          rc == 2 and err.startswith("fracgpu: a subcommand is required."), f"rc {rc}: {err}")
    commands = re.findall(r"^  (\S+) ", err.split("Subcommands:\n", 1)[-1], re.M)
    check("the list names the known subcommands",
          {"scheduler", "device-plugin", "monitor", "ui", "certs", "version"} <= set(commands),
          f"{commands}")
    rc, out, err, _ = run(["no-such-command"], env)
    check("an unknown subcommand exits 2 with `fracgpu: `", rc == 2 and err.startswith("fracgpu: "),
          f"rc {rc}: {err}")

    for command in commands:
        # An unknown flag (CLI11 names a missing required flag first, where there is one).
        expect_usage_error(command, REQUIRED.get(command, []) + ["--no-such-flag-xyz"] +
                           (["--", "true"] if command == "run" else []), env, "--no-such-flag-xyz")
        # --help still exits 0 on stdout.
        rc, out, err, _ = run([command, "--help"], env)
        check(f"fracgpu {command} --help exits 0", rc == 0 and out and not err, f"rc {rc}: {err}")
        if command in NO_FLAGS:
            continue
        cases = BAD_VALUES.get(command)
        check(f"{command} has bad-value cases (add them to BAD_VALUES)", cases is not None)
        for args, contains in cases or []:
            args = [bad_config if a == "@CONFIG@" else a for a in args]
            expect_usage_error(command, args, env, contains)
            if command in CONNECTING:
                # Before any connection: also with a kubeconfig that cannot even be loaded (a
                # command that connected first would exit 1 for it instead).
                expect_usage_error(command, args + ["--kubeconfig", "/nonexistent/kubeconfig"],
                                   env, contains)

    # The old spellings work, each with one deprecation line.
    expect_usage_error("scheduler", ["--http-bind", "0.0.0.0:99999"], env, "0.0.0.0:99999",
                       before="--listen")
    expect_usage_error("ui", ["--http-bind", "0.0.0.0:99999"], env, "0.0.0.0:99999",
                       before="--listen")
    expect_usage_error("device-plugin", ["--node-name", "n", "--signature-key-file",
                                         "/nonexistent/old-key"], env, "/nonexistent/old-key",
                       before="--signing-key-file")
    expect_usage_error("scheduler", ["--http-bind", "0.0.0.0:1", "--listen", "0.0.0.0:2"], env,
                       "--http-bind")
    # The monitor's --listen HOST --port PORT serves on that port, saying it is deprecated.
    for args, why in (
            (["--listen", "127.0.0.1", "--port", "{port}"], "--listen host:port"),
            (["--port", "{port}"], "--listen host:port"),  # the old default host, 0.0.0.0
            (["--listen", "127.0.0.1:{port}"], None)):
        port = free_port()
        hook = os.path.join(tmp, "hook")
        os.makedirs(os.path.join(hook, "vgpu", "containers"), exist_ok=True)
        argv = [FRACGPU, "monitor", "--no-apiserver", "--no-enforce", "--hook-path", hook,
                "--nvml-library", "/nonexistent/libnvidia-ml.so.1"] + \
               [a.format(port=port) for a in args]
        errlog = os.path.join(tmp, f"monitor-{port}.err")
        with open(errlog, "w") as e:
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=e, env=env)
        try:
            up = wait_for_port(port, proc)
            body = ""
            if up:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5).read()
        finally:
            proc.terminate()
            proc.wait(timeout=LIMIT_S)
        err = open(errlog).read()
        deprecated = [l for l in err.splitlines() if "deprecated" in l]
        want = ([f"fracgpu monitor: --port is deprecated; use {why}"] if why else [])
        check(f"fracgpu monitor {' '.join(args)} serves /healthz on the port",
              up and body == b"ok\n" and deprecated == want,
              f"up {up}, body {body!r}, deprecation lines {deprecated}, want {want}; stderr:\n{err}")

    silent.close()
    if failures:
        print(f"\n{len(failures)} failure(s)")
        return 1
    print("\nall passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
