#!/usr/bin/env bash
# Builds helm (the CLI of the chart deploy/helm/fracgpu, docs/install.md "Helm") from its own Go
# module, pinned in scripts/helm/go.mod (helm.sh/helm/v4 and, through go.sum, everything it
# builds from). The binary goes to a cache outside the clone, keyed by the helm version, with a
# stamp of scripts/helm (go.mod, go.sum) and the Go toolchain beside it, so a second run costs
# a fraction of a second. Its tests: tests/deploy/helm_chart_test.py (helm lint, helm template)
# and tests/realcluster/test_helm_install.py (helm install on the local real cluster).
#
#   scripts/helm-build.sh           builds when missing or stale; prints the binary's path (last line)
#   scripts/helm-build.sh --cached  prints the path only when a current build is there, else exit 3
#
# Environment: FRACGPU_HELM_CACHE (default ~/.cache/fracgpu/helm).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
moddir="$repo/scripts/helm"
version=v4.3.2
cached_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --cached) cached_only=1; shift ;;
    *) echo "helm-build: unknown argument '$1' (expected --cached)" >&2; exit 2 ;;
  esac
done
grep -q "^require helm.sh/helm/v4 $version\$" "$moddir/go.mod" || {
  echo "helm-build: $moddir/go.mod does not require helm.sh/helm/v4 $version" >&2; exit 1; }
cache_root=${FRACGPU_HELM_CACHE:-$HOME/.cache/fracgpu/helm}
out="$cache_root/$version"
have_go=0
command -v go >/dev/null 2>&1 && have_go=1
# The stamp: what the binary was built from. Without a toolchain a build of the pinned module
# files is taken as current (the binary does not change with the machine's Go).
stamp() { (cd "$moddir" && cat go.mod go.sum tools.go; [ $have_go = 1 ] && go version) | sha256sum | cut -c1-16; }
if [ -x "$out/helm" ] && [ -f "$out/stamp" ]; then
  if [ $have_go = 0 ] || [ "$(cat "$out/stamp")" = "$(stamp)" ]; then
    echo "$out/helm"
    exit 0
  fi
fi
if [ $cached_only = 1 ]; then
  echo "helm-build: no current build of helm $version in $out (scripts/helm-build.sh builds it)" >&2
  exit 3
fi
[ $have_go = 1 ] ||
  { echo "helm-build: no go toolchain on PATH (Go 1.26+ builds helm $version from its module)" >&2; exit 1; }
mkdir -p "$out"
start=$(date +%s)
echo "helm-build: go build helm.sh/helm/v4/cmd/helm $version" >&2
# The version stamp helm's own Makefile sets (internal/version), so that `helm version` says
# v4.3.2; -s -w and -trimpath keep the binary small and the build reproducible.
cd "$moddir"
CGO_ENABLED=0 go build -mod=readonly -trimpath -buildvcs=false \
  -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$version -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
  -o "$out/helm.partial" helm.sh/helm/v4/cmd/helm
# Written under another name and renamed: a build cut short leaves no binary that looks whole.
mv "$out/helm.partial" "$out/helm"
stamp > "$out/stamp"
echo "helm-build: helm $version built in $(( $(date +%s) - start )) s into $out" >&2
echo "$out/helm"
