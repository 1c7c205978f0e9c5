#!/usr/bin/env bash
# fracgpu without a GPU and without a cluster (`make sandbox`, README "Try it without a GPU").
#
#   scripts/sandbox.sh [--build DIR] [--for SECONDS]
#
# 1. `fracgpu run` over the fake CUDA driver and NVML (tests/fakes): a 1000 MiB slice of a
#    16 GiB fake GPU; a program allocates 600 MiB (granted) and 600 MiB more (refused at the
#    limit: CUDA_ERROR_OUT_OF_MEMORY = 2); then `fracgpu inspect` prints the slice's region.
# 2. A fake cluster on 127.0.0.1 only (fake-cluster, tests/e2e/fake_cluster_main.cc): the fake
#    API server with Kubeflow's Notebook CRD, `fracgpu scheduler` as its pod webhook and
#    extender, a kube-scheduler stand-in, a device plugin + fake kubelet per GPU node (4 nodes,
#    6 fake GPUs, 4 running slices) and a notebook-controller stand-in; `fracgpu ui` on it
#    behind a stand-in of Kubeflow's auth gateway (signed in as alice). Open the printed URL,
#    fill in the notebook form and create it: the cluster prints each step of its pod's journey
#    (webhook, /filter, /bind, Allocate and the limits the container gets, in MiB).
# 3. With --for: creates one notebook itself through the UI's HTTP API (the request the form
#    sends: ¼ of a GPU, memory and cores), waits until the UI lists it Ready, then keeps
#    running SECONDS more. Without --for it runs until Ctrl-C.
# Then it stops every process it started and removes its files. Needs the build targets
# fracgpu vgpu fake_cuda fake_nvml vgpu_app vgpu_testpath fake-cluster (make sandbox builds
# them) and curl. Nothing listens on anything but 127.0.0.1.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build/release"
FOR=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD="$2"; shift 2 ;;
    --for) FOR="$2"; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "sandbox: unknown argument \"$1\" (want --build DIR, --for SECONDS)" >&2; exit 2 ;;
  esac
done
if [ -n "$FOR" ] && ! [[ "$FOR" =~ ^[0-9]+$ ]]; then
  echo "sandbox: --for takes whole seconds, got \"$FOR\"" >&2; exit 2
fi

FRACGPU="$BUILD/fracgpu"
FAKES="$BUILD/fakes/lib"
CLUSTER="$BUILD/tests/e2e/fake-cluster"
for f in "$FRACGPU" "$BUILD/lib/libvgpu.so" "$FAKES/libcuda.so.1" "$FAKES/libnvidia-ml.so.1" \
         "$BUILD/tests/vgpu/vgpu_app" "$CLUSTER"; do
  if [ ! -e "$f" ]; then
    echo "sandbox: $f is missing; build it first: make sandbox (or cmake --build $BUILD --target fracgpu vgpu fake_cuda fake_nvml vgpu_app vgpu_testpath fake-cluster)" >&2
    exit 2
  fi
done
if ! command -v curl >/dev/null; then
  echo "sandbox: curl is missing (apt-get install curl)" >&2
  exit 2
fi

TMP="$(mktemp -d /tmp/fracgpu-sandbox-XXXXXX)"
echo "sandbox: files in $TMP"
CLUSTER_PID=""
UI_PID=""
GW_PID=""
cleanup() {
  # The gateway and the fake cluster stop when their stdin closes; `fracgpu ui` on SIGTERM.
  if [ -n "$GW_PID" ]; then
    exec 4>&- 2>/dev/null || true
    wait "$GW_PID" 2>/dev/null || true
  fi
  if [ -n "$UI_PID" ] && kill -0 "$UI_PID" 2>/dev/null; then
    kill -TERM "$UI_PID" 2>/dev/null || true
    wait "$UI_PID" 2>/dev/null || true
  fi
  if [ -n "$CLUSTER_PID" ]; then
    exec 3>&- 2>/dev/null || true
    wait "$CLUSTER_PID" 2>/dev/null || true
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

# Waits (at most 60 s, while process $2 lives) until file $1 exists.
wait_for_file() {
  for _ in $(seq 1 600); do
    [ -f "$1" ] && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

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
      "init 0"|"ctx 0") ;;  # cuInit, cuCtxCreate: CUDA_SUCCESS
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
echo "== 2. a fake cluster on 127.0.0.1, and fracgpu ui on it =="
echo "\$ fake-cluster --ready-file $TMP/cluster.ready   (tests/e2e/fake_cluster_main.cc)"
mkfifo "$TMP/cluster.in" "$TMP/gateway.in"
# Its stdout is ours: the journey lines appear as they happen. Short folder: Unix sockets.
"$CLUSTER" --ready-file "$TMP/cluster.ready" --dir "$TMP/c" --user alice <"$TMP/cluster.in" 2>"$TMP/cluster.err" &
CLUSTER_PID=$!
exec 3>"$TMP/cluster.in"
if ! wait_for_file "$TMP/cluster.ready" "$CLUSTER_PID"; then
  echo "sandbox: the fake cluster did not start: $(cat "$TMP/cluster.err")" >&2; exit 1
fi
API_URL="$(sed -n 's/^api=//p' "$TMP/cluster.ready")"
UI_KUBECONFIG="$(sed -n 's/^ui_kubeconfig=//p' "$TMP/cluster.ready")"

echo "\$ fracgpu ui --http-bind 127.0.0.1:0 --kubeconfig <the UI's, token of system:serviceaccount:kubeflow:fracgpu-ui> --gpu-scheduler-policy spread"
: >"$TMP/ui.log"
"$FRACGPU" ui --http-bind 127.0.0.1:0 --kubeconfig "$UI_KUBECONFIG" --web-dir "$ROOT/web" \
  --gpu-scheduler-policy spread --cluster-cache-ms 0 >"$TMP/ui.log" 2>&1 &
UI_PID=$!
UI_URL=""
for _ in $(seq 1 600); do
  UI_URL="$(sed -n 's/.*fracgpu ui on \(http:\/\/127\.0\.0\.1:[0-9]*\).*/\1/p' "$TMP/ui.log" | head -1)"
  [ -n "$UI_URL" ] && break
  kill -0 "$UI_PID" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$UI_URL" ]; then echo "sandbox: fracgpu ui did not start: $(cat "$TMP/ui.log")" >&2; exit 1; fi

echo "\$ fake-cluster gateway --to $UI_URL --user alice   (Kubeflow's auth gateway stand-in: adds kubeflow-userid: alice)"
"$CLUSTER" gateway --to "$UI_URL" --user alice --ready-file "$TMP/gateway.ready" <"$TMP/gateway.in" >/dev/null 2>"$TMP/gateway.err" &
GW_PID=$!
exec 4>"$TMP/gateway.in"
if ! wait_for_file "$TMP/gateway.ready" "$GW_PID"; then
  echo "sandbox: the gateway did not start: $(cat "$TMP/gateway.err")" >&2; exit 1
fi
GW_URL="$(sed -n 's/^url=//p' "$TMP/gateway.ready")"

echo "fake API server: $API_URL"
echo "fracgpu ui:      $GW_URL/  (through the gateway stand-in: signed in as alice)"
echo "dashboard:       $GW_URL/dashboard.html"
echo "cluster JSON:    $GW_URL/api/cluster"
echo "Fill in the notebook form (namespace team-a, say) and create it: its pod's journey is printed here."

if [ -n "$FOR" ]; then
  echo
  echo "== 3. the notebook form's request, sent as the browser sends it (through the gateway) =="
  FORM='{"name":"demo","namespace":"team-a","image":"kubeflownotebookswg/jupyter-scipy:v1.8.0","cpu":"1","memory":"2Gi","gpus":1,"slice":{"mode":"fraction","memory_percent":25,"cores_percent":25},"node_policy":"","gpu_policy":"","use_types":[],"nouse_types":[],"use_uuids":[],"nouse_uuids":[]}'
  echo "\$ curl -d '$FORM' $GW_URL/api/preview"
  curl -sS -H 'Content-Type: application/json' --data "$FORM" "$GW_URL/api/preview" >"$TMP/preview.json"
  echo "preview: $(sed -n 's/.*"fit":{[^}]*"message":"\([^"]*\)".*/\1/p' "$TMP/preview.json")"
  echo "\$ curl -d '<the same>' $GW_URL/api/notebooks"
  CODE="$(curl -sS -o "$TMP/create.json" -w '%{http_code}' -H 'Content-Type: application/json' --data "$FORM" "$GW_URL/api/notebooks")"
  if [ "$CODE" != 201 ]; then
    echo "sandbox: creating the notebook answered HTTP $CODE: $(cat "$TMP/create.json")" >&2; exit 1
  fi
  echo "HTTP 201: Notebook team-a/demo created (kubeflow.org/v1)"
  STATE=""
  for _ in $(seq 1 600); do
    curl -sS "$GW_URL/api/notebooks?namespace=team-a" >"$TMP/list.json" || true
    STATE="$(sed -n 's/.*"name":"demo","namespace":"team-a","state":"\([^"]*\)".*/\1/p' "$TMP/list.json")"
    [ "$STATE" = Ready ] && break
    kill -0 "$CLUSTER_PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "\$ curl $GW_URL/api/notebooks?namespace=team-a"
  echo "notebook team-a/demo: ${STATE:-not listed}"
  if [ "$STATE" != Ready ]; then
    echo "sandbox: the notebook did not become Ready within 60 s: $(cat "$TMP/list.json"); cluster: $(cat "$TMP/cluster.err")" >&2
    exit 1
  fi
  sleep "$FOR"
  echo "sandbox: stopping after $FOR s"
else
  echo "Ctrl-C stops the sandbox."
  while kill -0 "$UI_PID" 2>/dev/null && kill -0 "$CLUSTER_PID" 2>/dev/null; do sleep 1; done
fi
