#!/usr/bin/env bash
# fracgpu without a GPU and without a cluster (`make sandbox`, README "Try it without a GPU").
#
#   scripts/sandbox.sh [--build DIR] [--for SECONDS]
#
# 1. `fracgpu run` over the fake CUDA driver and NVML (tests/fakes): a 1000 MiB slice of a
#    16 GiB fake GPU; a program allocates 600 MiB (granted) and 600 MiB more (refused at the
#    limit: CUDA_ERROR_OUT_OF_MEMORY = 2); then `fracgpu inspect` prints the slice's region.
# 2. A small fake cluster on 127.0.0.1 only: the fake API server (tests/fakes/apiserver) seeded
#    with tests/browser/seed.json (4 nodes, 6 GPUs, 4 placed pods) and `fracgpu ui` on it. Open
#    the printed URL: the notebook form previews where a slice fits and what it takes on each
#    GPU; /dashboard.html shows every GPU and slice.
# Runs until Ctrl-C, or SECONDS with --for; then stops both processes and removes its files.
# Needs the build targets fracgpu vgpu fake_cuda fake_nvml vgpu_app fake-apiserver (make sandbox
# builds them). Nothing listens on anything but 127.0.0.1.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build/release"
FOR=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD="$2"; shift 2 ;;
    --for) FOR="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "sandbox: unknown argument \"$1\" (want --build DIR, --for SECONDS)" >&2; exit 2 ;;
  esac
done
if [ -n "$FOR" ] && ! [[ "$FOR" =~ ^[0-9]+$ ]]; then
  echo "sandbox: --for takes whole seconds, got \"$FOR\"" >&2; exit 2
fi

FRACGPU="$BUILD/fracgpu"
FAKES="$BUILD/fakes/lib"
for f in "$FRACGPU" "$BUILD/lib/libvgpu.so" "$FAKES/libcuda.so.1" "$FAKES/libnvidia-ml.so.1" \
         "$BUILD/tests/vgpu/vgpu_app" "$BUILD/tests/fakes/apiserver/fake-apiserver"; do
  if [ ! -e "$f" ]; then
    echo "sandbox: $f is missing; build it first: make sandbox (or cmake --build $BUILD --target fracgpu vgpu fake_cuda fake_nvml vgpu_app fake-apiserver)" >&2
    exit 2
  fi
done

TMP="$(mktemp -d /tmp/fracgpu-sandbox-XXXXXX)"
echo "sandbox: files in $TMP"
API_PID=""
UI_PID=""
cleanup() {
  if [ -n "$UI_PID" ] && kill -0 "$UI_PID" 2>/dev/null; then
    kill -TERM "$UI_PID" 2>/dev/null || true
    wait "$UI_PID" 2>/dev/null || true
  fi
  if [ -n "$API_PID" ]; then
    exec 3>&- 2>/dev/null || true   # the fake API server stops when its stdin closes
    wait "$API_PID" 2>/dev/null || true
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

GPU=GPU-5a3b6e4f-0c1d-4e2f-8a9b-1c2d3e4f5a6b
echo "== 1. fracgpu run: a 1000 MiB slice of a 16384 MiB fake GPU =="
echo "\$ fracgpu run --keep-region --gpumem 1000 -- vgpu_app init ctx:0 alloc:600MiB alloc:600MiB"
RUN_ERR="$TMP/run.err"
LD_LIBRARY_PATH="$FAKES" FAKE_GPU_DEVICES="$GPU:16384" \
  timeout 60 "$FRACGPU" run --keep-region --gpumem 1000 --lib "$BUILD/lib/libvgpu.so" \
    --nvml-library "$FAKES/libnvidia-ml.so.1" -- \
    "$BUILD/tests/vgpu/vgpu_app" init ctx:0 alloc:629145600 alloc:629145600 2>"$RUN_ERR" |
  while read -r op rc rest; do
    case "$op $rc" in
      "alloc 0") echo "alloc 600 MiB: CUDA_SUCCESS (granted)" ;;
      "alloc 2") echo "alloc 600 MiB: CUDA_ERROR_OUT_OF_MEMORY (refused: 1200 MiB > the 1000 MiB limit)" ;;
      *) echo "$op: CUresult $rc $rest" ;;
    esac
  done
cat "$RUN_ERR" >&2
REGION="$(sed -n 's/^fracgpu run: region \([^ ]*\) .*/\1/p' "$RUN_ERR" | head -1)"
if [ -n "$REGION" ] && [ -f "$REGION" ]; then
  echo "\$ fracgpu inspect $REGION"
  "$FRACGPU" inspect "$REGION"
fi
# --keep-region left the directory for the inspect above.
case "$REGION" in */fracgpu-run-*/region.cache) rm -rf "$(dirname "$REGION")" ;; esac

echo
echo "== 2. a fake cluster on 127.0.0.1: fake API server + fracgpu ui =="
mkfifo "$TMP/api.in"
# The logs exist before the background processes open them: the loops below read them at once
# (under set -e -o pipefail a sed of a missing file would end the script).
: >"$TMP/api.log"
: >"$TMP/ui.log"
"$BUILD/tests/fakes/apiserver/fake-apiserver" 0 "$ROOT/tests/browser/seed.json" <"$TMP/api.in" >"$TMP/api.log" 2>&1 &
API_PID=$!
exec 3>"$TMP/api.in"
API_URL=""
for _ in $(seq 1 100); do
  API_URL="$(sed -n 's/^listening on \(http:\/\/127\.0\.0\.1:[0-9]*\)$/\1/p' "$TMP/api.log")"
  [ -n "$API_URL" ] && break
  sleep 0.1
done
if [ -z "$API_URL" ]; then echo "sandbox: the fake API server did not start: $(cat "$TMP/api.log")" >&2; exit 1; fi
echo "fake API server: $API_URL (seeded from tests/browser/seed.json)"
cat >"$TMP/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: sandbox
  cluster:
    server: $API_URL
users:
- name: sandbox
  user: {}
contexts:
- name: sandbox
  context: {cluster: sandbox, user: sandbox}
current-context: sandbox
EOF
"$FRACGPU" ui --http-bind 127.0.0.1:0 --kubeconfig "$TMP/kubeconfig" --web-dir "$ROOT/web" \
  --cluster-cache-ms 0 >"$TMP/ui.log" 2>&1 &
UI_PID=$!
UI_URL=""
for _ in $(seq 1 100); do
  UI_URL="$(sed -n 's/.*fracgpu ui on \(http:\/\/127\.0\.0\.1:[0-9]*\).*/\1/p' "$TMP/ui.log" | head -1)"
  [ -n "$UI_URL" ] && break
  kill -0 "$UI_PID" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$UI_URL" ]; then echo "sandbox: fracgpu ui did not start: $(cat "$TMP/ui.log")" >&2; exit 1; fi
echo "fracgpu ui:      $UI_URL/  (the notebook form: pick a fraction, see where it fits and the MiB it takes per GPU)"
echo "dashboard:       $UI_URL/dashboard.html"
echo "cluster JSON:    $UI_URL/api/cluster"
echo "(Create is refused here: the fake API server has no Kubeflow Notebook CRD or SubjectAccessReviews.)"
if [ -n "$FOR" ]; then
  sleep "$FOR"
  echo "sandbox: stopping after $FOR s"
else
  echo "Ctrl-C stops the sandbox."
  while kill -0 "$UI_PID" 2>/dev/null; do sleep 1; done
fi
