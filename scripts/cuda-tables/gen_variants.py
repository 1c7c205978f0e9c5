#!/usr/bin/env python3
"""Generates src/vgpu/cuda_variants.def and data/cuda/libcuda_exports.txt from the CUDA toolkit.

Inputs (CUDA 13.0 toolkit, default /usr/local/cuda):
  include/cudaTypedefs.h    one PFN_<base>_v<version>[_ptds|_ptsz] typedef per driver entry
                            point variant (legacy ones under __CUDA_API_VERSION_INTERNAL too)
  include/cuda.h            '#define <base> <elf>' / __CUDA_API_PTDS(<elf>) for the newest ELF
                            name of each base name (cross-check)
  lib64/stubs/libcuda.so    every ELF name the driver exports (nm -D --defined-only)

Each variant's ELF name: the non-per-thread variants of a base name, ordered by version, are
<base>, <base>_v2, <base>_v3, ... (the exported names of that base ordered the same way);
a per-thread variant at version V is the ELF name of the non-per-thread variant of version V
(or the newest one before V) plus _ptds/_ptsz. Every derived name must be an export of the
stub and the newest must equal cuda.h's macro, or the script fails naming the base.

Usage: gen_variants.py [--cuda DIR] [--check]   (--check: compare with the committed files,
exit 1 on any difference; exit 77 when the toolkit is absent).
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEF_PATH = os.path.join(ROOT, "src", "vgpu", "cuda_variants.def")
EXPORTS_PATH = os.path.join(ROOT, "data", "cuda", "libcuda_exports.txt")

# "CUresult(CUDAAPI" without a space too: the green-context and coredump typedefs are spelt so.
PFN = re.compile(r"typedef\s+CUresult\s*\(CUDAAPI\s+\*PFN_(\w+?)_v(\d+)(?:_(ptds|ptsz))?\)\((.*)\);")
MACRO = re.compile(r"^#define\s+(cu\w+)\s+(?:__CUDA_API_(PTDS|PTSZ)\((cu\w+)\)|(cu\w+))\s*$")
SUFFIX = re.compile(r"^(.*?)(?:_v(\d+))?$")


def stub_exports(cuda):
    out = subprocess.run(["nm", "-D", "--defined-only", os.path.join(cuda, "lib64", "stubs", "libcuda.so")],
                         check=True, capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] in ("T", "W", "i"):
            names.add(parts[2].split("@")[0])
    return names


def generate(cuda):
    with open(os.path.join(cuda, "include", "cudaTypedefs.h")) as f:
        typedefs = f.read()
    with open(os.path.join(cuda, "include", "cuda.h")) as f:
        macros = {}
        for line in f:
            m = MACRO.match(line.strip())
            if m:
                macros[m.group(1)] = (m.group(3) or m.group(4), (m.group(2) or "").lower())
    exports = stub_exports(cuda)
    variants = {}  # base -> list of (version, flavour, params)
    for m in PFN.finditer(typedefs):
        base, ver, fl, params = m.group(1), int(m.group(2)), m.group(3) or "", m.group(4)
        variants.setdefault(base, []).append((ver, fl, " ".join(params.split())))
    rows, errors = [], []
    for base in sorted(variants):
        vs = sorted(set(variants[base]))
        plain = [v for v in vs if not v[1]]
        # Exported non-per-thread names of this base, ordered <base>, <base>_v2, ...
        elf_plain = sorted((n for n in exports if n == base or re.fullmatch(re.escape(base) + r"_v\d+", n)),
                           key=lambda n: 1 if n == base else int(n.rsplit("_v", 1)[1]))
        if len(elf_plain) != len(plain):
            errors.append("%s: %d plain variants, %d exported names %s" % (base, len(plain), len(elf_plain), elf_plain))
            continue
        elf_of = {}
        for (ver, _, params), elf in zip(plain, elf_plain):
            elf_of[ver] = elf
            rows.append((base, ver, "", elf, params))
        for ver, fl, params in vs:
            if not fl:
                continue
            before = [p for p in plain if p[0] <= ver]
            if not before:
                errors.append("%s_v%d_%s: no plain variant at or before it" % (base, ver, fl))
                continue
            same = [p for p in plain if p[0] == ver]
            elf = elf_of[(same or before)[-1][0]] + "_" + fl
            if elf not in exports:
                errors.append("%s_v%d_%s: derived ELF name %s is not exported" % (base, ver, fl, elf))
                continue
            rows.append((base, ver, fl, elf, params))
        # cuda.h's macro of a base name is checked when it names a versioned ELF name of that
        # base (cuMemAlloc -> cuMemAlloc_v2): it must be the newest plain variant, and its
        # per-thread form one of the table's. Macros to another base (cuGraphInstantiate ->
        # cuGraphInstantiateWithFlags) and identity macros (cuStreamGetCtx, whose _v2 keeps a
        # public name of its own) say nothing about variants.
        if base in macros:
            target, fl = macros[base]
            if re.fullmatch(re.escape(base) + r"_v\d+", target):
                newest = [r for r in rows if r[0] == base and not r[2]][-1][3]
                if target != newest:
                    errors.append("%s: cuda.h names %s, the table %s" % (base, target, newest))
            if fl and target.startswith(base):
                pt = {r[3] for r in rows if r[0] == base and r[2] == fl}
                if target + "_" + fl not in pt:
                    errors.append("%s: cuda.h per-thread %s_%s not in the table %s" % (base, target, fl, sorted(pt)))
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    typed = {r[3] for r in rows}
    untyped = sorted(exports - typed)
    lines = [
        "// GENERATED by scripts/cuda-tables/gen_variants.py from the CUDA 13.0 toolkit",
        "// (include/cudaTypedefs.h, include/cuda.h, lib64/stubs/libcuda.so). Do not edit.",
        "// X(base_name, cuda_version_introduced, flavour 0 plain | 1 _ptsz | 2 _ptds, elf_name)",
        "// %d variants of %d base names; %d exported names have no PFN typedef (listed at the end)." %
        (len(rows), len(variants), len(untyped)),
        "#define FRACGPU_CUDA_VARIANTS(X) \\",
    ]
    for base, ver, fl, elf, _ in rows:
        lines.append("  X(%s, %d, %d, %s) \\" % (base, ver, {"": 0, "ptsz": 1, "ptds": 2}[fl], elf))
    lines.append("")
    lines.append("// Exported by the driver, no PFN typedef (internal or undocumented entry points):")
    lines.append("#define FRACGPU_CUDA_UNTYPED_EXPORTS(X) \\")
    for n in untyped:
        lines.append("  X(%s) \\" % n)
    lines.append("")
    def_text = "\n".join(lines) + "\n"
    exp_text = "# GENERATED by scripts/cuda-tables/gen_variants.py: nm -D --defined-only of the CUDA 13.0\n" \
               "# toolkit's lib64/stubs/libcuda.so, one ELF name a line (%d names).\n" % len(exports) + \
               "\n".join(sorted(exports)) + "\n"
    return def_text, exp_text, errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuda", default="/usr/local/cuda")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    if not os.path.exists(os.path.join(a.cuda, "include", "cudaTypedefs.h")):
        print("no CUDA toolkit at %s: nothing to compare" % a.cuda)
        return 77
    def_text, exp_text, errors = generate(a.cuda)
    for e in errors:
        print("error: " + e, file=sys.stderr)
    if errors:
        return 1
    if a.check:
        bad = 0
        for path, text in ((DEF_PATH, def_text), (EXPORTS_PATH, exp_text)):
            with open(path) as f:
                if f.read() != text:
                    print("differs from the toolkit: %s (rerun scripts/cuda-tables/gen_variants.py)" % path)
                    bad = 1
        if not bad:
            print("committed tables match %s" % a.cuda)
        return bad
    os.makedirs(os.path.dirname(EXPORTS_PATH), exist_ok=True)
    with open(DEF_PATH, "w") as f:
        f.write(def_text)
    with open(EXPORTS_PATH, "w") as f:
        f.write(exp_text)
    print("wrote %s and %s" % (DEF_PATH, EXPORTS_PATH))
    return 0


if __name__ == "__main__":
    sys.exit(main())
