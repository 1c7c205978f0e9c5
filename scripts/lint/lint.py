#!/usr/bin/env python3
"""fracgpu's house rules that a compiler does not check (docs/design/STYLE.md, docs/design/ARCHITECTURE.md).

  lint.py [--root DIR]       check the tree under DIR (default: the repository of this script)

Checks, each failure printed as `path:line: rule: what`:
  layering   a file of src/<component>/ includes only "<dep>/..." headers of the components the
             LAYERS table below allows (dependencies point downward only; the table itself is
             checked too: a component may only allow components listed below it)
  banned     calls a component must not make (BANNED below): clocks, threads, environment or
             files in core/ (pure domain logic), exceptions thrown outside command front ends
  format     every C++ file under src/, tests/ and bench/ is as clang-format 14 writes it with the
             root's .clang-format (one line per file: the first line that differs). Another
             clang-format version formats differently, so any other major version, or none, is a
             violation; --no-format skips this rule (on a machine without clang-format 14).
Exit status: 0 clean, 1 violations found, 2 bad usage.

Why hand-written: no Debian-packaged tool checks include direction between our own folders or a
per-folder call list (clang-tidy checks single files; include-what-you-use checks which header,
not which layer). The C++ lexing here is only what these rules need: comments, string and
character literals are blanked before matching, so a rule never fires on prose.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

# Which components a component's files may include ("<dep>/header.h"). Its own folder is always
# allowed. Order: layers top to bottom (docs/design/ARCHITECTURE.md "Layers" lists the same
# folders in the same order; tests/repo/lint_test.py checks it), and a component may only allow
# components listed below it (table_violations), so nothing includes upward.
LAYERS = {
    # front ends
    "cli": {"base", "core"},
    # services and tools
    # scheduler reads node/config.h only (the one device config every component parses; its own
    # library, fracgpu_device_config, without NVML or the host-file side)
    "scheduler": {"base", "core", "node", "k8s", "http", "metrics"},
    # the two node plugins: siblings over node/; neither includes the other (no dra → deviceplugin)
    "deviceplugin": {"api", "base", "core", "k8s", "kubelet", "node", "nvml"},
    "dra": {"base", "core", "k8s", "node", "nvml"},
    "monitor": {"base", "api", "core", "enforce", "k8s", "http", "metrics", "node", "nvml", "vgpu"},
    # ui reads the cluster through core/cluster_state.h and previews with core/bind_choice.h,
    # the scheduler's own model and bind-time GPU choice: no edge to scheduler/.
    "ui": {"base", "core", "k8s", "http"},
    "sim": {"base", "core"},
    "certs": {"base", "core", "k8s"},
    # `fracgpu run` / `inspect`: a program under a slice on one machine, beside libvgpu.so (the
    # region it reads) and the enforcement core (the driver's account it watches)
    "run": {"base", "api", "core", "enforce", "vgpu"},
    # what both node plugins share: the device config, inventory, health, device state and the
    # grant -> container environment, mounts and host files builder
    "node": {"api", "base", "core", "nvml"},
    # adapters to the outside world
    "enforce": {"base", "api", "core", "nvml", "vgpu"},
    "k8s": {"base", "core"},
    "kubelet": {"base", "core"},
    "nvml": {"base", "api", "core"},
    "http": {"base", "core"},
    "metrics": set(),
    # pure domain logic
    "core": {"base"},
    # what every component shares: Status/Result, FRACGPU_CHECK, string and file helpers,
    # Clock/StopSignal/Backoff and SignalWatcher
    "base": set(),
    # libvgpu.so: standalone, includes only the cross-process contracts of api/ (nothing above it)
    "vgpu": {"api"},
    # the cross-process contracts (NVML declarations, shared-memory layouts, the limits keys and
    # paths of api/limits.h): header-only, no deps
    "api": set(),
}


def table_violations():
    """('scripts/lint/lint.py', 0, 'layering', why) for each LAYERS entry allowing a component
    that is not listed below it (an upward or sideways edge), or that is not in the table."""
    order = list(LAYERS)
    found = []
    for i, comp in enumerate(order):
        for dep in sorted(LAYERS[comp]):
            if dep not in LAYERS:
                found.append(("scripts/lint/lint.py", 0, "layering", f"LAYERS['{comp}'] allows unknown '{dep}'"))
            elif order.index(dep) <= i:
                found.append(("scripts/lint/lint.py", 0, "layering",
                              f"LAYERS['{comp}'] allows '{dep}', which is not below it"))
    return found


# Per component: (rule name, regex on comment-free code, files of that component exempt).
BANNED = {
    "core": [
        ("no clock in core", r"\b(steady_clock|system_clock|high_resolution_clock)\b|\bclock_gettime\s*\(|\btime\s*\(\s*(nullptr|NULL|0)?\s*\)", set()),
        ("no threads in core", r"\bstd::(thread|jthread|mutex|async)\b|\bpthread_", set()),
        ("no environment in core", r"\b(std::)?(secure_)?getenv\s*\(", set()),
        ("no files in core", r"\bstd::(i|o)?fstream\b|\bfopen\s*\(|\bopen\s*\(", set()),
    ],
    "vgpu": [
        ("libvgpu.so throws nothing", r"\bthrow\b", set()),
        ("libvgpu.so never exits its host", r"\b(std::)?(exit|abort|_exit|quick_exit)\s*\(", set()),
    ],
    "*": [
        # CLI11 reports --help and parse errors by exception: only command front ends throw.
        ("exceptions only in command front ends", r"\bthrow\b",
         {"command.cc", "kube_scheduler_manifest.cc", "simulate_command.cc", "run_inspect.cc"}),
    ],
}

INCLUDE = re.compile(r'^\s*#\s*include\s*"([a-z0-9_]+)/')


def component_of(rel):
    """'src/core/fit.cc' -> 'core' (a file in a subfolder belongs to its top folder); else
    None."""
    parts = rel.split("/")
    if len(parts) < 3 or parts[0] != "src":
        return None
    return parts[1]


def blank_comments_and_literals(text):
    """The text with comments, string and char literals replaced by spaces (lines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]{0,16})\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = ")" + m.group(1) + '"'
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator 1'000
                out.append(c)
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else text[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def lint(root):
    """All violations under root/src as (rel path, line, rule, detail), sorted."""
    found = table_violations()
    src = os.path.join(root, "src")
    for dirpath, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith((".cc", ".h", ".def")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            comp = component_of(rel)
            if comp is None:
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                raw = f.read()
            for no, line in enumerate(raw.splitlines(), 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                dep = m.group(1)
                if dep == comp:
                    continue
                if comp not in LAYERS:
                    found.append((rel, no, "layering", f"component '{comp}' is not in the LAYERS table"))
                elif dep not in LAYERS[comp]:
                    allowed = ", ".join(sorted(LAYERS[comp])) or "nothing"
                    found.append((rel, no, "layering",
                                  f"'{comp}' includes \"{dep}/...\"; it may include {allowed}"))
            code = blank_comments_and_literals(raw)
            lines = code.splitlines()
            rules = BANNED.get(comp, []) + BANNED["*"]
            for rule, pattern, exempt in rules:
                if name in exempt:
                    continue
                rx = re.compile(pattern)
                for no, line in enumerate(lines, 1):
                    m = rx.search(line)
                    if m:
                        found.append((rel, no, "banned", f"{rule}: '{m.group(0).strip()}'"))
    return sorted(set(found))


# The clang-format major version the tree is formatted with (Debian 12's clang-format package).
CLANG_FORMAT_MAJOR = 14
FORMAT_DIRS = ("src", "tests", "bench")
FORMAT_SKIP = {"node_modules", "corpus", "build"}
FORMAT_DIAG = re.compile(r"^(.+?):(\d+):\d+: (?:error|warning): code should be clang-formatted")


def clang_format_binary():
    """(path, None) of a clang-format of CLANG_FORMAT_MAJOR, or (None, why not)."""
    why = f"clang-format {CLANG_FORMAT_MAJOR} not found"
    for name in (f"clang-format-{CLANG_FORMAT_MAJOR}", "clang-format"):
        path = shutil.which(name)
        if not path:
            continue
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
        m = re.search(r"version (\d+)\.", out)
        if m and int(m.group(1)) == CLANG_FORMAT_MAJOR:
            return path, None
        seen = out.strip() or "no version"
        why = f"{path} is '{seen}', not clang-format {CLANG_FORMAT_MAJOR}"
    return None, why


def format_violations(root):
    """(rel path, line, 'format', detail) for each C++ file clang-format would change."""
    files = []
    for top in FORMAT_DIRS:
        for dirpath, dirs, names in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs if d not in FORMAT_SKIP)
            files += [os.path.join(dirpath, n) for n in sorted(names) if n.endswith((".cc", ".h"))]
    if not files:
        return []
    style = os.path.join(root, ".clang-format")
    if not os.path.isfile(style):
        return [(".clang-format", 0, "format", "the root has no .clang-format")]
    binary, why = clang_format_binary()
    if binary is None:
        return [(".clang-format", 0, "format", f"{why}; install it (scripts/deps) or pass --no-format")]
    found = {}
    for i in range(0, len(files), 200):
        p = subprocess.run([binary, "--dry-run", "-Werror", f"--style=file:{style}"] + files[i:i + 200],
                           capture_output=True, text=True, timeout=300)
        for line in p.stderr.splitlines():
            m = FORMAT_DIAG.match(line)
            if m:
                rel = os.path.relpath(m.group(1), root).replace(os.sep, "/")
                found.setdefault(rel, int(m.group(2)))
    return [(rel, no, "format", f"differs from .clang-format (first at this line); run clang-format -i {rel}")
            for rel, no in found.items()]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..")))
    ap.add_argument("--no-format", action="store_true", help="skip the clang-format check")
    args = ap.parse_args(argv)
    if not os.path.isdir(os.path.join(args.root, "src")):
        print(f"lint: --root {args.root!r} has no src/ folder", file=sys.stderr)
        return 2
    found = lint(args.root)
    if not args.no_format:
        found = sorted(set(found) | set(format_violations(args.root)))
    for rel, no, rule, detail in found:
        print(f"{rel}:{no}: {rule}: {detail}")
    if found:
        print(f"lint: {len(found)} violation(s)", file=sys.stderr)
        return 1
    print("lint: clean (layering, banned calls" + (")" if args.no_format else ", format)"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
