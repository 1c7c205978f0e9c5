#!/usr/bin/env python3
"""Generates src/vgpu/cuda_variants.def and data/cuda/libcuda_exports.txt from CUDA 13.0.

Inputs (CUDA 13.0: by default the 13.0 wheels of scripts/deps/cuda-wheels.sh, found by
cuda_home.py; --cuda DIR takes a toolkit or another CUDA home):
  include/cudaTypedefs.h    one PFN_<base>_v<version>[_ptds|_ptsz] typedef per driver entry
                            point variant (legacy ones under __CUDA_API_VERSION_INTERNAL too)
  include/cuda.h            '#define <base> <elf>' / __CUDA_API_PTDS(<elf>) for the newest ELF
                            name of each base name (cross-check)
  lib64/stubs/libcuda.so    every ELF name the driver exports (nm -D --defined-only), or --stub.
                            NVIDIA's wheels ship no stub: without one the committed export list
                            (data/cuda/libcuda_exports.txt, from the 13.0 toolkit's stub) stands,
                            and only the variant table is regenerated and checked against it.

Each variant's ELF name: the non-per-thread variants of a base name, ordered by version, are
<base>, <base>_v2, <base>_v3, ... (the exported names of that base ordered the same way);
a per-thread variant at version V is the ELF name of the non-per-thread variant of version V
(or the newest one before V) plus _ptds/_ptsz. Every derived name must be an export of the
stub and the newest must equal cuda.h's macro, or the script fails naming the base.

Usage: gen_variants.py [--release 13.0|newest | --cuda DIR] [--stub LIBCUDA] [--check]
  --check: compare with the committed files, exit 1 on any difference; exit 77 when the
  headers are absent (the wheels not installed and no --cuda).
  --release newest --check: the newest 13.x wheels against the 13.0 table (check_newer below):
  fails only where the 13.0 table is wrong for that release too; prints what is newer.
"""
import argparse
import os
import re
import subprocess
import sys

import cuda_home

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEF_PATH = os.path.join(ROOT, "src", "vgpu", "cuda_variants.def")
EXPORTS_PATH = os.path.join(ROOT, "data", "cuda", "libcuda_exports.txt")

# "CUresult(CUDAAPI" without a space too: the green-context and coredump typedefs are spelt so.
PFN = re.compile(r"typedef\s+CUresult\s*\(CUDAAPI\s+\*PFN_(\w+?)_v(\d+)(?:_(ptds|ptsz))?\)\((.*)\);")
MACRO = re.compile(r"^#define\s+(cu\w+)\s+(?:__CUDA_API_(PTDS|PTSZ)\((cu\w+)\)|(cu\w+))\s*$")
SUFFIX = re.compile(r"^(.*?)(?:_v(\d+))?$")


def find_stub(cuda):
    for sub in ("lib64", "lib"):
        p = os.path.join(cuda, sub, "stubs", "libcuda.so")
        if os.path.exists(p):
            return p
    return None


def committed_exports():
    with open(EXPORTS_PATH) as f:
        return {l.strip() for l in f if l.strip() and not l.startswith("#")}


def stub_exports(stub):
    out = subprocess.run(["nm", "-D", "--defined-only", stub],
                         check=True, capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] in ("T", "W", "i"):
            names.add(parts[2].split("@")[0])
    return names


def read_typedefs(cuda):
    """base -> list of (version, flavour, params) of cudaTypedefs.h."""
    with open(os.path.join(cuda, "include", "cudaTypedefs.h")) as f:
        typedefs = f.read()
    variants = {}
    for m in PFN.finditer(typedefs):
        base, ver, fl, params = m.group(1), int(m.group(2)), m.group(3) or "", m.group(4)
        variants.setdefault(base, []).append((ver, fl, " ".join(params.split())))
    return variants


def read_macros(cuda):
    """base -> (ELF name, "" | "ptds" | "ptsz") of cuda.h's renaming macros."""
    macros = {}
    with open(os.path.join(cuda, "include", "cuda.h")) as f:
        for line in f:
            m = MACRO.match(line.strip())
            if m:
                macros[m.group(1)] = (m.group(3) or m.group(4), (m.group(2) or "").lower())
    return macros


def generate(cuda, exports):
    macros = read_macros(cuda)
    variants = read_typedefs(cuda)
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


TABLE_VERSION = 13000  # CUDA_VERSION of the release the table is generated from
HOOKS_PATH = os.path.join(ROOT, "src", "vgpu", "hooks.def")
FLAVOUR = {"0": "", "1": "ptsz", "2": "ptds"}


def committed_rows():
    """(base, version, flavour) -> ELF name of the committed table."""
    rows = {}
    with open(DEF_PATH) as f:
        for m in re.finditer(r"X\((\w+), (\d+), ([012]), (\w+)\)", f.read()):
            rows[(m.group(1), int(m.group(2)), FLAVOUR[m.group(3)])] = m.group(4)
    return rows


def hooked():
    """ELF names and base names of src/vgpu/hooks.def's CUDA hooks."""
    with open(HOOKS_PATH) as f:
        text = f.read()
    body = text[text.index("#define FRACGPU_CUDA_HOOKS(X)"):]
    body = body[:body.index("\n\n")]
    pairs = re.findall(r"X\((\w+), (\w+), \d+, [01]\)", body)
    return {e for e, _ in pairs}, {b for _, b in pairs}


def check_newer(newer, ref):
    """A newer 13.x (newer: its CUDA home) against the committed 13.0 table and, where installed,
    the 13.0 headers (ref). The table is 13.0's on purpose: libvgpu answers a request above 13000
    for a hooked base only when the driver's answer is the 13.0 variant, and refuses a newer one
    (docs/vgpu.md, rule 3), so variants a newer release adds are reported, not errors. Errors
    are what would make the table wrong for the newer release too:
      * a variant of the table whose PFN typedef the newer headers dropped, or whose parameters
        they changed (the same ELF name with another ABI);
      * a typedef at or below 13000 that the table lacks (a 13.0 variant it missed);
      * a hooked base whose cuda.h macro names an ELF name hooks.def lacks: a program built with
        the newer headers and -lcuda would call it, past every hook.
    Returns (errors, report lines)."""
    new_td = read_typedefs(newer)
    new_keys = {(b, v, fl): params for b, vs in new_td.items() for v, fl, params in vs}
    ref_keys = None
    if ref:
        ref_keys = {(b, v, fl): params for b, vs in read_typedefs(ref).items() for v, fl, params in vs}
    rows = committed_rows()
    hooked_elf, hooked_base = hooked()
    errors, report = [], []
    for key in sorted(rows):
        if key not in new_keys:
            errors.append("%s_v%d%s (%s): the table's variant has no PFN typedef in %s" %
                          (key[0], key[1], "_" + key[2] if key[2] else "", rows[key], newer))
        elif ref_keys is not None and key in ref_keys and ref_keys[key] != new_keys[key]:
            errors.append("%s_v%d%s (%s): parameters changed: 13.0 (%s), newer (%s)" %
                          (key[0], key[1], "_" + key[2] if key[2] else "", rows[key], ref_keys[key],
                           new_keys[key]))
    added = sorted(k for k in new_keys if k not in rows)
    for k in added:
        if k[1] <= TABLE_VERSION:
            errors.append("PFN_%s_v%d%s: a variant at or below %d the table lacks" %
                          (k[0], k[1], "_" + k[2] if k[2] else "", TABLE_VERSION))
    newer_only = [k for k in added if k[1] > TABLE_VERSION]
    new_bases = sorted({k[0] for k in newer_only if k[0] not in {r[0] for r in rows}})
    of_known = ["%s_v%d%s" % (k[0], k[1], "_" + k[2] if k[2] else "") for k in newer_only
                if k[0] not in new_bases]
    of_hooked = [n for n, k in zip(of_known, [k for k in newer_only if k[0] not in new_bases])
                 if k[0] in hooked_base]
    report.append("%d PFN typedefs newer than %d: %d new base names, %d new variants of the "
                  "table's bases (%d of hooked bases: libvgpu refuses these through "
                  "cuGetProcAddress)" % (len(newer_only), TABLE_VERSION, len(new_bases),
                                         len(of_known), len(of_hooked)))
    if of_known:
        report.append("  new variants of the table's bases: " + " ".join(of_known))
    if of_hooked:
        report.append("  of hooked bases: " + " ".join(of_hooked))
    if new_bases:
        report.append("  new base names: " + " ".join(new_bases))
    new_macros = read_macros(newer)
    ref_macros = read_macros(ref) if ref else {}
    for base in sorted(new_macros):
        target, _ = new_macros[base]
        if ref and ref_macros.get(base) == new_macros[base]:
            continue
        if base in hooked_base and target not in hooked_elf and target != base:
            errors.append("cuda.h maps the hooked %s to %s, which hooks.def does not hook" % (base, target))
        elif ref and base in ref_macros:
            report.append("  cuda.h now maps %s to %s (13.0: %s)" % (base, target, ref_macros[base][0]))
    return errors, report


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--release", choices=cuda_home.RELEASES, default="13.0",
                    help="which set of scripts/deps/cuda-wheels.sh (default 13.0)")
    ap.add_argument("--cuda", help="a CUDA home instead of the wheels (a toolkit: /usr/local/cuda)")
    ap.add_argument("--stub", help="the stub libcuda.so (default: the CUDA home's lib64/stubs or lib/stubs)")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    cuda = a.cuda or cuda_home.home_path(a.release)
    if not os.path.exists(os.path.join(cuda, "include", "cudaTypedefs.h")):
        print("no CUDA %s headers at %s (install the wheels: bash scripts/deps/cuda-wheels.sh): "
              "nothing to compare" % (a.release, cuda))
        return 77
    if a.release != "13.0" and not a.cuda:
        if not a.check:
            print("the committed tables are 13.0's: generate them from --release 13.0", file=sys.stderr)
            return 2
        errors, report = check_newer(cuda, cuda_home.home("13.0"))
        if not cuda_home.print_check(report, errors):
            return 1
        print("the 13.0 table holds for %s (every variant kept with its parameters, none missing "
              "at or below %d, no hooked base renamed)" % (cuda, TABLE_VERSION))
        return 0
    stub = a.stub or find_stub(cuda)
    exports = stub_exports(stub) if stub else committed_exports()
    origin = stub if stub else "the committed %s (no stub libcuda.so at %s)" % (EXPORTS_PATH, cuda)
    def_text, exp_text, errors = generate(cuda, exports)
    for e in errors:
        print("error: " + e, file=sys.stderr)
    if errors:
        return 1
    outputs = [(DEF_PATH, def_text)] + ([(EXPORTS_PATH, exp_text)] if stub else [])
    if a.check:
        bad = 0
        for path, text in outputs:
            with open(path) as f:
                if f.read() != text:
                    print("differs from %s: %s (rerun scripts/cuda-tables/gen_variants.py)" % (cuda, path))
                    bad = 1
        if not bad:
            print("committed tables match %s; exports: %s" % (cuda, origin))
        return bad
    os.makedirs(os.path.dirname(EXPORTS_PATH), exist_ok=True)
    for path, text in outputs:
        with open(path, "w") as f:
            f.write(text)
    print("wrote %s; exports: %s" % (" and ".join(p for p, _ in outputs), origin))
    return 0


if __name__ == "__main__":
    sys.exit(main())
