#!/usr/bin/env python3
"""Where NVIDIA's CUDA 13 wheels are, as installed by scripts/deps/cuda-wheels.sh.

Two pinned sets, each in its own prefix outside the clone (no toolkit at /usr/local/cuda):
  13.0    the release the committed tables come from (src/vgpu/cuda_variants.def,
          data/cuda/libcuda_exports.txt, data/cuda/cudart13_requests.txt)
  newest  the newest 13.x the wheels' pins name, a second reference
A set's CUDA home is <root>/<set>/nvidia/cu13, laid out like a toolkit's except that the
libraries are in lib/, not lib64/, and there is no lib64/stubs/libcuda.so:
  include/   cuda.h, cudaTypedefs.h, cuda_runtime.h, crt/, cublas*.h, cupti*.h
  lib/       libcudart.so.13, libcublas.so.13, libcupti.so.13
  bin/       nvcc, ptxas, cicc, ... (nvcc.profile finds the rest)
NCCL is beside it: <root>/<set>/nvidia/nccl/{include,lib}.
<root> is $FRACGPU_CUDA_WHEELS, default ~/.cache/fracgpu/cuda.

Usage: cuda_home.py [13.0|newest]   prints the set's CUDA home; exit 1 (and a line on stderr
naming the installer) when the set is not installed.
"""
import os
import sys

RELEASES = ("13.0", "newest")


def wheels_root():
    return os.environ.get("FRACGPU_CUDA_WHEELS") or os.path.join(os.path.expanduser("~"), ".cache",
                                                                   "fracgpu", "cuda")


def home_path(release):
    """The set's CUDA home, installed or not."""
    if release not in RELEASES:
        raise ValueError("unknown CUDA wheel set %r (expected one of %s)" % (release, ", ".join(RELEASES)))
    return os.path.join(wheels_root(), release, "nvidia", "cu13")


def home(release):
    """The set's CUDA home, or None when it is not installed."""
    path = home_path(release)
    return path if os.path.exists(os.path.join(path, "include", "cuda.h")) else None


def print_check(report, errors):
    """Prints a newer-release check's report lines (stdout) and errors (stderr, "error: ...");
    returns True when there were no errors."""
    for line in report:
        print(line)
    for e in errors:
        print("error: " + e, file=sys.stderr)
    return not errors


def main():
    release = sys.argv[1] if len(sys.argv) > 1 else "13.0"
    try:
        path = home(release)
    except ValueError as e:
        print("cuda_home: %s" % e, file=sys.stderr)
        return 2
    if not path:
        print("cuda_home: no CUDA %s wheels at %s (install: bash scripts/deps/cuda-wheels.sh)" %
              (release, home_path(release)), file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
