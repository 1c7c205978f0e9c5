#!/usr/bin/env bash
# fracgpu without a GPU and without a cluster (`make sandbox`, README "Try it without a GPU").
#
#   scripts/sandbox.sh [--build DIR] [--for SECONDS] [--cluster auto|real|fake]
#
# 1. `fracgpu run` over the fake CUDA driver and NVML (tests/fakes): a 1000 MiB slice of a
#    16 GiB fake GPU; a program allocates 600 MiB (granted) and 600 MiB more (refused at the
#    limit: CUDA_ERROR_OUT_OF_MEMORY = 2); then `fracgpu inspect` prints the slice's region.
# 2. The real cluster (--cluster real; auto picks it when run as root and scripts/k8s-build.sh
#    gives the real Kubernetes binaries): `scripts/cluster.sh up` on 127.0.0.1 (etcd,
#    kube-apiserver, controller manager, kube-scheduler, real kubelets over a fake CRI runtime,
#    deploy/ applied, fracgpu's scheduler, device plugins over fake GPUs and `fracgpu ui`; its
#    ports 29000-29499 + FRACGPU_SANDBOX_PORT_OFFSET, default 3000 (below 32768, where the
#    kernel's ephemeral ports start); its state under this run's
#    folder), then tests/realcluster/sandbox.py: Kubeflow's Notebook CRD, namespace team-a where
#    alice may create notebooks (RBAC), 3 running slices seeded through the webhook, the
#    notebook-controller stand-in (tests/realcluster/notebook_controller.py) and each new pod's
#    journey as the cluster reports it (admission, fracgpu's decision, the components' Events,
#    the container's limits the kubelet gave the fake CRI runtime, Running).
#    Otherwise (--cluster fake, or auto without root or the binaries: it says which in one line)
#    the fake cluster (fake-cluster, tests/e2e/fake_cluster_main.cc): the fake API server with
#    Kubeflow's Notebook CRD, `fracgpu scheduler` as its pod webhook and extender, a
#    kube-scheduler stand-in, a device plugin + fake kubelet per GPU node (5 nodes, 7 fake GPUs,
#    4 running slices; node-e's agent parks: a notebook parked, a borrower on its memory and the
#    wake are shown before it is ready) and a notebook-controller stand-in, and `fracgpu ui` on it.
#    Either way `fracgpu ui` is behind a stand-in of Kubeflow's auth gateway (signed in as
#    alice). Open the printed URL, fill in the notebook form and create it: the cluster prints
#    each step of its pod's journey.
# 3. With --for: creates one notebook itself through the UI's HTTP API (the request the form
#    sends: ¼ of a GPU, memory and cores), waits until the UI lists it Ready, then keeps
#    running SECONDS more. Without --for it runs until Ctrl-C.
# Then it stops every process it started (the real cluster: scripts/cluster.sh down) and removes
# its files. Needs the build targets fracgpu vgpu fake_cuda fake_nvml vgpu_app vgpu_testpath
# fake-cluster (make sandbox builds them) and curl. Nothing listens on anything but 127.0.0.1.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build/release"
FOR=""
MODE=auto
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD="$(cd "$2" && pwd)"; shift 2 ;;
    --for) FOR="$2"; shift 2 ;;
    --cluster) MODE="$2"; shift 2 ;;
    -h|--help) sed -n '2,34p' "$0"; exit 0 ;;
    *) echo "sandbox: unknown argument \"$1\" (want --build DIR, --for SECONDS, --cluster auto|real|fake)" >&2; exit 2 ;;
  esac
done
if [ -n "$FOR" ] && ! [[ "$FOR" =~ ^[0-9]+$ ]]; then
  echo "sandbox: --for takes whole seconds, got \"$FOR\"" >&2; exit 2
fi
case "$MODE" in auto|real|fake) ;; *) echo "sandbox: --cluster takes auto, real or fake, got \"$MODE\"" >&2; exit 2 ;; esac
OFFSET="${FRACGPU_SANDBOX_PORT_OFFSET:-3000}"
case "$OFFSET" in ''|*[!0-9]*) echo "sandbox: FRACGPU_SANDBOX_PORT_OFFSET '$OFFSET' is not a number" >&2; exit 2 ;; esac

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
REAL_UP=""
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
  if [ -n "$REAL_UP" ]; then
    FRACGPU_CLUSTER_DIR="$TMP/c" bash "$ROOT/scripts/cluster.sh" down >/dev/null 2>&1 || true
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

# Which cluster part 2 runs, said in one line. The real one needs root (a mount namespace per
# kubelet, scripts/cluster.sh) and the real Kubernetes binaries: scripts/k8s-build.sh prints their
# folder, from its cache or built from the Go module cache (minutes the first time).
why_not_real() {
  if [ "$(id -u)" != 0 ]; then echo "not root (scripts/cluster.sh needs a mount namespace per kubelet)"; return; fi
  if ! command -v go >/dev/null; then echo "no Go toolchain to build the real Kubernetes binaries (scripts/k8s-build.sh)"; return; fi
  if ! command -v python3 >/dev/null || ! python3 -c 'import yaml' 2>/dev/null; then echo "no python3 with PyYAML"; return; fi
  if ! bash "$ROOT/scripts/k8s-build.sh" >"$TMP/k8s-build.out" 2>"$TMP/k8s-build.log"; then
    echo "scripts/k8s-build.sh failed: $(tail -1 "$TMP/k8s-build.log")"; return
  fi
}
REAL=""
if [ "$MODE" != fake ]; then
  NOT_REAL="$(why_not_real)"
  if [ -z "$NOT_REAL" ]; then
    REAL=1
    echo "sandbox: part 2 runs a cluster of the real Kubernetes components (scripts/cluster.sh, binaries in $(tail -1 "$TMP/k8s-build.out")) on 127.0.0.1 ports $((29000 + OFFSET))-$((29499 + OFFSET))"
  elif [ "$MODE" = real ]; then
    echo "sandbox: --cluster real, but $NOT_REAL" >&2; exit 2
  else
    echo "sandbox: part 2 falls back to the fake cluster (fake-cluster, tests/e2e/fake_cluster_main.cc): $NOT_REAL"
  fi
else
  echo "sandbox: part 2 runs the fake cluster (fake-cluster, tests/e2e/fake_cluster_main.cc): --cluster fake"
fi

# Waits (at most $3 tenths of a second, default 600: 60 s, while process $2 lives) until file $1
# exists.
wait_for_file() {
  for _ in $(seq 1 "${3:-600}"); do
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
mkfifo "$TMP/gateway.in"
if [ -n "$REAL" ]; then
  echo "== 2. the real cluster on 127.0.0.1 (scripts/cluster.sh), and fracgpu ui on it =="
  echo "\$ FRACGPU_CLUSTER_DIR=$TMP/c FRACGPU_CLUSTER_PORT_OFFSET=$OFFSET scripts/cluster.sh up --build $BUILD"
  mkfifo "$TMP/cluster.in"
  REAL_UP=1
  if ! FRACGPU_CLUSTER_DIR="$TMP/c" FRACGPU_CLUSTER_PORT_OFFSET="$OFFSET" \
      timeout 600 bash "$ROOT/scripts/cluster.sh" up --build "$BUILD" >"$TMP/cluster-up.out" 2>"$TMP/cluster-up.log"; then
    echo "sandbox: scripts/cluster.sh up failed:" >&2; tail -20 "$TMP/cluster-up.log" >&2; exit 1
  fi
  grep '^cluster: up in' "$TMP/cluster-up.log" || true
  API_URL="$(sed -n 's/^ *server: //p' "$TMP/c/admin.kubeconfig" | head -1)"
  UI_URL="$(cat "$TMP/c/ui-url")"
  echo "fracgpu ui (scripts/cluster.sh's, the args deploy/ui.yaml ships, as ServiceAccount fracgpu-ui): $UI_URL"
  echo "\$ python3 tests/realcluster/sandbox.py --state $TMP/c --user alice --namespace team-a"
  # Its stdout is ours: the journey lines appear as they happen. It stops when its stdin closes.
  python3 "$ROOT/tests/realcluster/sandbox.py" --state "$TMP/c" --user alice --namespace team-a \
    --ready-file "$TMP/cluster.ready" <"$TMP/cluster.in" 2>"$TMP/cluster.err" &
  CLUSTER_PID=$!
  exec 3>"$TMP/cluster.in"
  if ! wait_for_file "$TMP/cluster.ready" "$CLUSTER_PID" 1800; then
    echo "sandbox: tests/realcluster/sandbox.py did not get ready: $(cat "$TMP/cluster.err")" >&2; exit 1
  fi
else
  echo "== 2. a fake cluster on 127.0.0.1, and fracgpu ui on it =="
  echo "\$ fake-cluster --ready-file $TMP/cluster.ready   (tests/e2e/fake_cluster_main.cc)"
  mkfifo "$TMP/cluster.in"
  # Its stdout is ours: the journey lines appear as they happen. Short folder: Unix sockets.
  "$CLUSTER" --ready-file "$TMP/cluster.ready" --dir "$TMP/c" --user alice <"$TMP/cluster.in" 2>"$TMP/cluster.err" &
  CLUSTER_PID=$!
  exec 3>"$TMP/cluster.in"
  # 120 s: the parking demo runs before it is ready.
  if ! wait_for_file "$TMP/cluster.ready" "$CLUSTER_PID" 1200; then
    echo "sandbox: the fake cluster did not start: $(cat "$TMP/cluster.err")" >&2; exit 1
  fi
  API_URL="$(sed -n 's/^api=//p' "$TMP/cluster.ready")"
  UI_KUBECONFIG="$(sed -n 's/^ui_kubeconfig=//p' "$TMP/cluster.ready")"

  echo "\$ fracgpu ui --listen 127.0.0.1:0 --kubeconfig <the UI's, token of system:serviceaccount:kubeflow:fracgpu-ui> --gpu-scheduler-policy spread"
  : >"$TMP/ui.log"
  "$FRACGPU" ui --listen 127.0.0.1:0 --kubeconfig "$UI_KUBECONFIG" --web-dir "$ROOT/web" \
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
fi

echo "\$ fake-cluster gateway --to $UI_URL --user alice   (Kubeflow's auth gateway stand-in: adds kubeflow-userid: alice)"
"$CLUSTER" gateway --to "$UI_URL" --user alice --ready-file "$TMP/gateway.ready" <"$TMP/gateway.in" >/dev/null 2>"$TMP/gateway.err" &
GW_PID=$!
exec 4>"$TMP/gateway.in"
if ! wait_for_file "$TMP/gateway.ready" "$GW_PID"; then
  echo "sandbox: the gateway did not start: $(cat "$TMP/gateway.err")" >&2; exit 1
fi
GW_URL="$(sed -n 's/^url=//p' "$TMP/gateway.ready")"

if [ -n "$REAL" ]; then
  echo "API server:      $API_URL  (kube-apiserver; KUBECONFIG=$TMP/c/admin.kubeconfig)"
else
  echo "fake API server: $API_URL"
fi
echo "fracgpu ui:      $GW_URL/  (through the gateway stand-in: signed in as alice)"
echo "dashboard:       $GW_URL/dashboard.html"
echo "cluster JSON:    $GW_URL/api/cluster"
# The GPU types the dashboard's type filter offers: one per model (the fake NVML names a device
# by its model, tests/fakes/cuda/fake_gpu.h), as on a real fleet.
if command -v python3 >/dev/null && curl -sS "$GW_URL/api/cluster" >"$TMP/cluster.json" 2>/dev/null; then
  echo "GPU types:       $(python3 -c '
import collections, json, sys
nodes = json.load(open(sys.argv[1])).get("nodes", [])
n = collections.Counter(g.get("type", "?") for node in nodes for g in node.get("gpus", []))
print(", ".join("%s (%d GPU%s)" % (t, c, "s" if c > 1 else "") for t, c in sorted(n.items())))
' "$TMP/cluster.json" 2>/dev/null || echo "(unreadable: $TMP/cluster.json)")"
fi
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
  # The real cluster's pod takes its steps through real controllers (the stand-in reconciles each
  # second): up to 120 s there, 60 s on the fake one.
  if [ -n "$REAL" ]; then TRIES=240 PAUSE=0.5 WITHIN=120; else TRIES=600 PAUSE=0.1 WITHIN=60; fi
  for _ in $(seq 1 "$TRIES"); do
    curl -sS "$GW_URL/api/notebooks?namespace=team-a" >"$TMP/list.json" || true
    STATE="$(sed -n 's/.*"name":"demo","namespace":"team-a","state":"\([^"]*\)".*/\1/p' "$TMP/list.json")"
    [ "$STATE" = Ready ] && break
    kill -0 "$CLUSTER_PID" 2>/dev/null || break
    sleep "$PAUSE"
  done
  echo "\$ curl $GW_URL/api/notebooks?namespace=team-a"
  echo "notebook team-a/demo: ${STATE:-not listed}"
  if [ "$STATE" != Ready ]; then
    echo "sandbox: the notebook did not become Ready within $WITHIN s: $(cat "$TMP/list.json"); cluster: $(cat "$TMP/cluster.err")" >&2
    exit 1
  fi
  sleep "$FOR"
  echo "sandbox: stopping after $FOR s"
else
  echo "Ctrl-C stops the sandbox."
  # The UI: ours on the fake cluster, scripts/cluster.sh's on the real one.
  UI_ALIVE="$UI_PID"
  [ -n "$REAL" ] && UI_ALIVE="$(cat "$TMP/c/pids/fracgpu-ui")"
  while kill -0 "$UI_ALIVE" 2>/dev/null && kill -0 "$CLUSTER_PID" 2>/dev/null; do sleep 1; done
fi
