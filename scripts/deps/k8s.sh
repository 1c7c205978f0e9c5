#!/usr/bin/env bash
# The local real cluster's non-Debian pieces (make test-k8s): the Go modules of tests/realcluster (the
# pinned Kubernetes release; scripts/k8s-build.sh builds from them) and of scripts/helm (helm, which
# scripts/helm-build.sh builds for the chart's tests), and the Python packages of its test driver
# (pytest, PyYAML), pinned. Quick and offline when already present.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
if ! python3 -c 'import pytest, yaml' 2>/dev/null; then
  echo "deps/k8s: installing pytest and PyYAML"
  python3 -m pip install -q pytest==9.2.0 PyYAML==6.0.3
fi
if ! command -v go >/dev/null 2>&1; then
  # The rest of the build needs no Go; make test-k8s (scripts/k8s-build.sh) fails saying so.
  echo "deps/k8s: no go toolchain on PATH: make test-k8s cannot build Kubernetes (Go 1.26+ needed)" >&2
  exit 0
fi
cd "$repo/tests/realcluster"
go mod download || { echo "deps/k8s: go mod download (tests/realcluster/go.mod) failed" >&2; exit 1; }
go mod download -modfile=go.v1.34.mod ||
  { echo "deps/k8s: go mod download (tests/realcluster/go.v1.34.mod) failed" >&2; exit 1; }
cd "$repo/scripts/helm"
go mod download || { echo "deps/k8s: go mod download (scripts/helm/go.mod) failed" >&2; exit 1; }
