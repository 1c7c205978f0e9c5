#!/usr/bin/env bash
# Builds the real Kubernetes components of the local cluster (scripts/cluster.sh, make test-k8s)
# from Kubernetes' own Go modules, pinned in tests/realcluster/go.mod: kube-apiserver, kube-controller-
# manager, kube-scheduler, kubelet and kubectl (k8s.io/kubernetes' own main packages), etcd
# (go.etcd.io/etcd/server/v3's etcdmain) and fake-cri (upstream's fake CRI runtime, recording each
# container's config). The binaries go to a cache outside the clone, keyed by the Kubernetes
# version and a hash of tests/realcluster (go.mod, go.sum, sources), so a second run costs seconds.
#
#   scripts/k8s-build.sh [--version V]   prints the folder holding the binaries (last line); V:
#       v1.37.2 (default, or $FRACGPU_K8S_VERSION as scripts/cluster.sh reads it) or v1.34.4
#
# Environment: FRACGPU_K8S_CACHE (default ~/.cache/fracgpu/k8s).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
version=${FRACGPU_K8S_VERSION:-v1.37.2}
while [ $# -gt 0 ]; do
  case "$1" in
    --version) version="${2:?--version needs a value}"; shift 2 ;;
    *) echo "k8s-build: unknown argument '$1' (expected --version vX.Y.Z)" >&2; exit 2 ;;
  esac
done
command -v go >/dev/null 2>&1 ||
  { echo "k8s-build: no go toolchain on PATH (Go 1.26+ builds Kubernetes $version from its modules)" >&2; exit 1; }
moddir="$repo/tests/realcluster"
# The newest pinned release is go.mod; the oldest supported minor is go.v1.34.mod (same sources).
case "$version" in
  v1.37.2) modfile=go.mod; sumfile=go.sum ;;
  v1.34.4) modfile=go.v1.34.mod; sumfile=go.v1.34.sum ;;
  *) echo "k8s-build: --version '$version' is not pinned (tests/realcluster pins v1.37.2 and v1.34.4)" >&2; exit 2 ;;
esac
grep -q "k8s.io/kubernetes $version\$" "$moddir/$modfile" || {
  echo "k8s-build: $moddir/$modfile does not require k8s.io/kubernetes $version" >&2; exit 1; }
cache_root=${FRACGPU_K8S_CACHE:-$HOME/.cache/fracgpu/k8s}
key=$( (cd "$moddir" && cat "$modfile" "$sumfile" && find cmd -name '*.go' | sort | xargs cat; go version) | sha256sum | cut -c1-16)
out="$cache_root/$version-$key"
bins=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl etcd fake-cri)
have=1
for b in "${bins[@]}"; do [ -x "$out/$b" ] || have=0; done
if [ $have = 1 ]; then
  echo "k8s-build: $version cached" >&2
  echo "$out"
  exit 0
fi
mkdir -p "$out.tmp"
# The version stamp kube's own build (hack/lib/version.sh) sets, so that the components and
# kubectl report v1.37.2 rather than v0.0.0-master.
major=${version#v}; major=${major%%.*}
minor=${version#v*.}; minor=${minor%%.*}
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=$major -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"
cd "$moddir"
start=$(date +%s)
for b in "${bins[@]}"; do
  case "$b" in
    etcd|fake-cri) pkg="./cmd/$b" ;;
    *) pkg="k8s.io/kubernetes/cmd/$b" ;;
  esac
  [ -x "$out.tmp/$b" ] && continue
  echo "k8s-build: go build $pkg ($(( $(date +%s) - start )) s)" >&2
  # Written under another name and renamed: a build cut short leaves no binary that looks whole.
  CGO_ENABLED=0 go build -modfile="$modfile" -mod=readonly -trimpath -ldflags "$ldflags" \
    -o "$out.tmp/$b.partial" "$pkg"
  mv "$out.tmp/$b.partial" "$out.tmp/$b"
done
rm -rf "$out"
mv "$out.tmp" "$out"
# Builds of the same version from other module files are dead weight (~500 MB each) once a day
# old (a younger one may still serve a cluster of another checkout).
find "$cache_root" -maxdepth 1 -name "$version-*" ! -path "$out" -mtime +0 -exec rm -rf {} +
echo "k8s-build: $version built in $(( $(date +%s) - start )) s into $out" >&2
echo "$out"
