#!/usr/bin/env python3
"""Extracts field numbers, labels, types and methods from the kubelet's own protos.

Reads staging/src/k8s.io/kubelet/pkg/apis/{pluginregistration/v1,dra/v1,dra/v1beta1}/api.proto
as the Go module k8s.io/kubelet at the version tests/realcluster/go.mod pins (the module cache
holds it after `make deps`), and prints the table tests/dra/testdata/upstream_proto_fields.txt
commits. With --check FILE it compares instead and exits 1 on a difference, 77 (skip) when the
module is not in the cache.

Hand-written because the three files use a small, regular subset of proto3 (messages, scalar,
message and map fields, `repeated`/`optional`, one service each); protoc's descriptor output would
need protoc and the gogo imports they carry.
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FILES = ["pluginregistration/v1/api.proto", "dra/v1/api.proto", "dra/v1beta1/api.proto"]
SCALARS = {"string": "string", "bool": "bool"}


def kubelet_version():
    with open(os.path.join(ROOT, "tests/realcluster/go.mod")) as f:
        for line in f:
            m = re.search(r"k8s\.io/kubelet\s*=>\s*k8s\.io/kubelet\s+(v\S+)", line) or \
                re.search(r"^\s*k8s\.io/kubelet\s+(v\S+)", line)
            if m:
                return m.group(1)
    raise SystemExit("tests/realcluster/go.mod names no k8s.io/kubelet version")


def module_dir(version):
    try:
        cache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        cache = os.path.expanduser("~/go/pkg/mod")
    return os.path.join(cache, "k8s.io", f"kubelet@{version}", "pkg", "apis")


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def rows_of(text):
    text = strip_comments(text)
    pkg = re.search(r"^\s*package\s+([\w.]+)\s*;", text, re.M).group(1)
    out = []
    for m in re.finditer(r"\bmessage\s+(\w+)\s*\{([^{}]*)\}", text):
        name, body = m.group(1), m.group(2)
        for f in re.finditer(r"(repeated\s+|optional\s+)?(map\s*<[^>]*>|[\w.]+)\s+(\w+)\s*=\s*(\d+)",
                             body):
            label, ftype, fname, num = f.groups()
            repeated = (label or "").strip() == "repeated" or ftype.startswith("map")
            word = SCALARS.get(ftype, "other" if ftype in ("int32", "int64", "bytes") else "message")
            out.append(f"{pkg}.{name} {fname} {num} {'repeated' if repeated else 'optional'} {word}")
    for s in re.finditer(r"\bservice\s+(\w+)\s*\{(.*?)\n\}", text, re.S):
        for r in re.finditer(r"rpc\s+(\w+)\s*\(\s*([\w.]+)\s*\)\s*returns\s*\(\s*([\w.]+)\s*\)",
                             s.group(2)):
            meth, inp, outp = r.groups()
            out.append(f"service {pkg}.{s.group(1)} {meth} {pkg}.{inp} {pkg}.{outp}")
    return out


HEADER = """# Field numbers of the upstream kubelet protos, extracted by scripts/proto-facts/kubelet_proto_fields.py
# from the Go module k8s.io/kubelet@{version} (kubernetes staging/src/k8s.io/kubelet/pkg/apis/
# pluginregistration/v1, dra/v1 and dra/v1beta1 api.proto).
# Format: <fully qualified message> <field name> <field number> <label> <type>
# and:    service <fully qualified service> <method> <input> <output>
"""


def table():
    version = kubelet_version()
    base = module_dir(version)
    if not os.path.isdir(base):
        return version, None
    rows = []
    for rel in FILES:
        with open(os.path.join(base, rel)) as f:
            rows += rows_of(f.read())
    return version, HEADER.format(version=version) + "\n".join(rows) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", metavar="FILE", help="compare with FILE instead of printing")
    args = ap.parse_args()
    version, text = table()
    if text is None:
        print(f"k8s.io/kubelet@{version} is not in the Go module cache (make deps); not checked",
              file=sys.stderr)
        return 77
    if not args.check:
        sys.stdout.write(text)
        return 0
    with open(args.check) as f:
        committed = f.read()
    if committed != text:
        print(f"{args.check} differs from k8s.io/kubelet@{version}'s protos; regenerate with\n"
              f"  python3 scripts/proto-facts/kubelet_proto_fields.py > {args.check}", file=sys.stderr)
        import difflib
        sys.stderr.writelines(difflib.unified_diff(committed.splitlines(True), text.splitlines(True),
                                                   "committed", "upstream"))
        return 1
    print(f"{args.check}: matches k8s.io/kubelet@{version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
