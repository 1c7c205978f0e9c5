#!/usr/bin/env bash
# A local cluster of the real Kubernetes components on 127.0.0.1 (docs/e2e.md "The real cluster"):
# etcd, kube-apiserver (RBAC, the default admission chain, resource.k8s.io with the DRA gates),
# kube-controller-manager, the default kube-scheduler, and per node a real kubelet over a fake CRI
# runtime (upstream's fake remote runtime, recording each container's config). deploy/ is applied
# with kubectl through the overlay tests/realcluster/overlay; fracgpu's components run as host processes
# beside the cluster, each with a TokenRequest token of its own ServiceAccount, so the API server
# enforces the RBAC deploy/ ships: `fracgpu certs`, `fracgpu scheduler` (webhook and extender),
# fracgpu's kube-scheduler (the real one, with the extender config deploy/ ships), and on every node
# `fracgpu device-plugin` over the project's fake NVML and GPUs, and `fracgpu ui` on 127.0.0.1
# (its URL in <state>/ui-url).
# With --dra (docs/dra.md): deploy/ with the Component deploy/dra through tests/realcluster/overlay-dra,
# `fracgpu scheduler --dra-mode`, and on every node `fracgpu dra-driver` (registered by the kubelet
# through <root>/plugins_registry) in place of the device plugin.
# With --helm (docs/install.md "Helm"): the chart deploy/helm/fracgpu installed by `helm install`
# (scripts/helm-build.sh) in place of deploy/, with --helm-values FILE given to it as -f; the rest
# is the same (tests/realcluster/test_helm_install.py).
#
#   scripts/cluster.sh up [--nodes N] [--build DIR] [--dra [--slice-interval S] | --helm [--helm-values F]]
#                                                     start; prints KUBECONFIG=... last
#   scripts/cluster.sh down                           stop everything, remove the state folder
#   scripts/cluster.sh status                         what runs, and the nodes
#   scripts/cluster.sh stop COMPONENT                 SIGKILL one and leave it down until restart
#   scripts/cluster.sh restart COMPONENT [--slice-interval S]
#                                                     SIGKILL one and start it again (apiserver,
#       fracgpu-scheduler, fracgpu-kube-scheduler, fracgpu-ui, device-plugin-<node> or
#       dra-driver-<node>, kubelet-<node>)
#
# Environment: FRACGPU_CLUSTER_DIR (state, default /tmp/fracgpu-cluster), FRACGPU_K8S_VERSION
# (default v1.37.2), FRACGPU_K8S_CACHE (scripts/k8s-build.sh), FRACGPU_CLUSTER_PROFILING (true:
# kube-apiserver serves /debug/pprof, for profiles of bench/cluster runs; default false).
# Needs root (each kubelet runs in a mount namespace of its own: the kubelet's device-plugin socket path is fixed,
# /var/lib/kubelet/device-plugins/kubelet.sock, k8s.io/kubelet pkg/apis/deviceplugin/v1beta1).
set -euo pipefail
# The state folder holds private keys and ServiceAccount tokens: readable by root only.
umask 077
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${FRACGPU_CLUSTER_DIR:-/tmp/fracgpu-cluster}
version=${FRACGPU_K8S_VERSION:-v1.37.2}
build="$repo/build/release"
nodes=2
dra=0             # --dra: DRA mode (state file "mode" says which mode a cluster runs)
slice_interval="" # --slice-interval: the DRA driver's, when not its default
helm=0            # --helm: install the chart deploy/helm/fracgpu instead of applying deploy/
helm_values=""    # --helm-values: a values file for it
# Loopback ports: 29000-29499 + FRACGPU_CLUSTER_PORT_OFFSET (a multiple of 1000 for a second
# cluster on the same machine). The webhook URL of tests/realcluster/overlay names 29443; with an
# offset, up writes a one-patch overlay over it in the state folder with the moved port.
off=${FRACGPU_CLUSTER_PORT_OFFSET:-0}
case "$off" in ''|*[!0-9]*) echo "cluster: FRACGPU_CLUSTER_PORT_OFFSET '$off' is not a number" >&2; exit 2 ;; esac
port_etcd=$((29379 + off)) port_etcd_peer=$((29380 + off)) port_api=$((29444 + off))
port_kcm=$((29257 + off)) port_ksched=$((29259 + off)) port_fsched=$((29443 + off))
port_fsched_health=$((29081 + off)) port_fksched=$((29260 + off))
port_ui=$((29080 + off))  # fracgpu ui (http, 127.0.0.1)
fracgpu_scheduler_port=$port_fsched

log() { echo "cluster: $*" >&2; }
die() { echo "cluster: $*" >&2; exit 1; }

# GPUs per node, by index: name count MiB (fake NVML FAKE_GPU_DEVICES). Node i gets entry i mod 3.
gpu_spec() {
  case $(( $1 % 3 )) in
    0) echo "2 16384" ;;
    1) echo "1 24576" ;;
    2) echo "4 40960" ;;
  esac
}
node_name() { printf 'node-%s' "$(printf "\\x$(printf %x $((97 + $1)))")"; }

bins() { bin=$(bash "$repo/scripts/k8s-build.sh" --version "$version" | tail -1); }

kc() { "$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig" "$@"; }

# start NAME CMD... : a daemon in its own session, output to $dir/logs/NAME.log, pid in $dir/pids.
start() {
  local name=$1; shift
  mkdir -p "$dir/logs" "$dir/pids"
  setsid "$@" >>"$dir/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$dir/pids/$name"
}

# alive PID: the process runs (a zombie, killed but not yet reaped, does not).
alive() { [ -e "/proc/$1/stat" ] && ! awk '{exit $3 != "Z"}' "/proc/$1/stat" 2>/dev/null; }

# ours PID: the process is one this cluster started (every daemon names the state folder in its
# arguments), not another one that got a recycled pid after a crash or reboot.
ours() { tr '\0' ' ' < "/proc/$1/cmdline" 2>/dev/null | grep -qF -- "$dir/"; }

stop() {
  local f=$dir/pids/$1
  [ -f "$f" ] || return 0
  local pid; pid=$(cat "$f")
  if ours "$pid"; then
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    for _ in $(seq 50); do alive "$pid" || break; sleep 0.1; done
  fi
  rm -f "$f"
}

# wait_for WHAT SECONDS CMD... : polls CMD every 0.25 s until it succeeds.
wait_for() {
  local what=$1 secs=$2; shift 2
  local end=$(( $(date +%s) + secs ))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$end" ] || { log "timed out after ${secs}s waiting for $what"; return 1; }
    sleep 0.25
  done
}

# ---- certificates (openssl): one CA for serving and client certificates, a service-account key.
# An RSA 2048 key (kubeadm's default), or a P-256 key where cert_key=ec (fracgpu's own client CA:
# docs/install.md makes these P-256, as `fracgpu certs` makes the serving certificate).
cert() { # NAME CN [O] [SANs]   (signed by pki/ca, or by pki/$cert_ca when that is set)
  local name=$1 cn=$2 o=${3:-} san=${4:-} ca=${cert_ca:-ca}
  local subj="/CN=$cn"; [ -n "$o" ] && subj="/O=$o$subj"
  local key=(-newkey rsa:2048) usage=digitalSignature,keyEncipherment
  [ "${cert_key:-rsa}" = ec ] && key=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1) usage=digitalSignature
  openssl req -new "${key[@]}" -nodes -keyout "$dir/pki/$name.key" -subj "$subj" \
    -out "$dir/pki/$name.csr" 2>/dev/null
  local ext="$dir/pki/$name.ext"
  { echo "basicConstraints=CA:FALSE"; echo "keyUsage=critical,$usage"
    echo "extendedKeyUsage=serverAuth,clientAuth"; [ -n "$san" ] && echo "subjectAltName=$san"; } > "$ext"
  openssl x509 -req -in "$dir/pki/$name.csr" -CA "$dir/pki/$ca.crt" -CAkey "$dir/pki/$ca.key" \
    -CAcreateserial -days 2 -extfile "$ext" -out "$dir/pki/$name.crt" 2>/dev/null
}

kubeconfig() { # FILE USER (client cert NAME | token TOKEN) VALUE
  local file=$1 user=$2 kind=$3 value=$4
  {
    echo "apiVersion: v1"; echo "kind: Config"; echo "clusters:"
    echo "- name: local"; echo "  cluster:"
    echo "    server: https://127.0.0.1:$port_api"
    echo "    certificate-authority: $dir/pki/ca.crt"
    echo "users:"; echo "- name: $user"; echo "  user:"
    if [ "$kind" = cert ]; then
      echo "    client-certificate: $dir/pki/$value.crt"; echo "    client-key: $dir/pki/$value.key"
    else
      echo "    token: $value"
    fi
    echo "contexts:"; echo "- name: local"; echo "  context: {cluster: local, user: $user}"
    echo "current-context: local"
  } > "$file"
}

make_pki() {
  mkdir -p "$dir/pki"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$dir/pki/ca.key" -out "$dir/pki/ca.crt" \
    -days 2 -subj "/CN=fracgpu-local-ca" 2>/dev/null
  cert apiserver kube-apiserver "" \
    "IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.96.0.1"
  cert admin admin system:masters
  cert kcm system:kube-controller-manager
  cert ksched system:kube-scheduler
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
  openssl genrsa -out "$dir/pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$dir/pki/sa.key" -pubout -out "$dir/pki/sa.pub" 2>/dev/null
  kubeconfig "$dir/admin.kubeconfig" admin cert admin
  kubeconfig "$dir/kcm.kubeconfig" kcm cert kcm
  kubeconfig "$dir/ksched.kubeconfig" ksched cert ksched
  # fracgpu's own client CA (deploy/: Secret fracgpu-client-ca), apart from the cluster's, whose
  # certificates every kubelet holds: it signs the certificates that kube-scheduler (extender
  # tlsConfig) and the API server (webhook kubeConfigFile) present to `fracgpu scheduler`, which
  # refuses /filter, /prioritize, /bind and /webhook without one (docs/scheduler.md
  # "Authentication"). P-256 keys, as docs/install.md makes them: kube-scheduler signs with its
  # key at every new connection to the extender (its Go client keeps 2 idle connections, so
  # binds in flight open new ones), and an RSA 2048 signature cost it ~1 ms each (issue 37).
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$dir/pki/fracgpu-client-ca.key" \
    -out "$dir/pki/fracgpu-client-ca.crt" -days 2 -subj "/CN=fracgpu-client-ca" 2>/dev/null
  cert_key=ec cert_ca=fracgpu-client-ca cert fracgpu-kube-scheduler-client fracgpu-kube-scheduler
  cert_key=ec cert_ca=fracgpu-client-ca cert apiserver-webhook-client kube-apiserver
  # The API server presents it to every webhook ("*": any host; apiserver.config.k8s.io/v1
  # WebhookAdmissionConfiguration, --admission-control-config-file).
  cat > "$dir/pki/webhook-client.kubeconfig" <<EOF
apiVersion: v1
kind: Config
users:
- name: "*"
  user:
    client-certificate: $dir/pki/apiserver-webhook-client.crt
    client-key: $dir/pki/apiserver-webhook-client.key
EOF
  cat > "$dir/pki/admission.yaml" <<EOF
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: MutatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: $dir/pki/webhook-client.kubeconfig
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: $dir/pki/webhook-client.kubeconfig
EOF
}

feature_gates() {
  # FRACGPU_CLUSTER_FEATURE_GATES replaces the gates of every component (a test of a cluster
  # that does not serve consumable capacity sets DRAConsumableCapacity=false).
  if [ -n "${FRACGPU_CLUSTER_FEATURE_GATES:-}" ]; then echo "$FRACGPU_CLUSTER_FEATURE_GATES"; return; fi
  case "$version" in
    v1.34.*|v1.35.*) echo "DRAConsumableCapacity=true" ;;
    *) echo "DRAConsumableCapacity=true" ;;
  esac
}

start_etcd() {
  start etcd "$bin/etcd" --name local --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$port_etcd" --advertise-client-urls "http://127.0.0.1:$port_etcd" \
    --listen-peer-urls "http://127.0.0.1:$port_etcd_peer" \
    --initial-advertise-peer-urls "http://127.0.0.1:$port_etcd_peer" \
    --initial-cluster "local=http://127.0.0.1:$port_etcd_peer" --log-level warn
}

start_apiserver() {
  start apiserver "$bin/kube-apiserver" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$port_api" \
    --etcd-servers "http://127.0.0.1:$port_etcd" \
    --tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
    --client-ca-file "$dir/pki/ca.crt" \
    --kubelet-client-certificate "$dir/pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$dir/pki/apiserver-kubelet-client.key" \
    --service-account-issuer "https://kubernetes.default.svc" \
    --service-account-key-file "$dir/pki/sa.pub" --service-account-signing-key-file "$dir/pki/sa.key" \
    --service-cluster-ip-range 10.96.0.0/16 --endpoint-reconciler-type none \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --admission-control-config-file "$dir/pki/admission.yaml" \
    --runtime-config "resource.k8s.io/v1=true" --feature-gates "$(feature_gates)" \
    --allow-privileged=true --profiling="${FRACGPU_CLUSTER_PROFILING:-false}" \
    --audit-policy-file "$repo/tests/realcluster/audit-policy.yaml" \
    --audit-log-path "$dir/logs/audit.log" --audit-log-format json --v=1
}

start_kcm() {
  start kcm "$bin/kube-controller-manager" --kubeconfig "$dir/kcm.kubeconfig" \
    --authentication-kubeconfig "$dir/kcm.kubeconfig" --authorization-kubeconfig "$dir/kcm.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$port_kcm" \
    --service-account-private-key-file "$dir/pki/sa.key" --root-ca-file "$dir/pki/ca.crt" \
    --use-service-account-credentials --leader-elect=false \
    --feature-gates "$(feature_gates)" --v=1
}

start_default_scheduler() {
  start kube-scheduler-default "$bin/kube-scheduler" --kubeconfig "$dir/ksched.kubeconfig" \
    --authentication-kubeconfig "$dir/ksched.kubeconfig" --authorization-kubeconfig "$dir/ksched.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$port_ksched" --leader-elect=false \
    --feature-gates "$(feature_gates)" --v=1
}

# A token of a fracgpu ServiceAccount (TokenRequest) and a kubeconfig that uses it.
sa_kubeconfig() { # SA
  local token
  token=$(kc -n fracgpu-system create token "$1" --duration 48h)
  kubeconfig "$dir/$1.kubeconfig" "$1" token "$token"
}

# Extra arguments a test gives one component (e.g. the device plugin's --device-list-strategy):
# the lines of <state>/extra-args/<component>, one argument a line, read at each (re)start.
extra_args() { # COMPONENT
  [ -f "$dir/extra-args/$1" ] || return 0
  local line; while IFS= read -r line; do [ -n "$line" ] && printf '%s\0' "$line"; done < "$dir/extra-args/$1"
}

start_fracgpu_scheduler() {
  local extra=()
  [ "$dra" = 1 ] && extra=(--dra-mode)  # deploy/dra's patch of the Deployment's args
  local a; while IFS= read -r -d '' a; do extra+=("$a"); done < <(extra_args fracgpu-scheduler)
  start fracgpu-scheduler "$build/fracgpu" scheduler "${extra[@]}" \
    --listen "127.0.0.1:$port_fsched" --health-port "$port_fsched_health" \
    --cert-file "$dir/fracgpu/tls.crt" --key-file "$dir/fracgpu/tls.key" \
    --client-ca-file "$dir/pki/fracgpu-client-ca.crt" \
    --allowed-client-names fracgpu-kube-scheduler --allowed-client-names kube-apiserver \
    --signing-key-file "$dir/fracgpu/signing.key" --kubeconfig "$dir/fracgpu-scheduler.kubeconfig" \
    --scheduler-name fracgpu-scheduler --node-scheduler-policy binpack --gpu-scheduler-policy spread \
    --leader-elect --leader-elect-resource-namespace fracgpu-system \
    --leader-elect-resource-name fracgpu-scheduler
}

# fracgpu's kube-scheduler: the config of the fracgpu-kube-scheduler-config ConfigMap as applied,
# with the host paths of what its pod would mount (tests/realcluster/overlay says why).
start_fracgpu_kube_scheduler() {
  kc -n fracgpu-system get configmap fracgpu-kube-scheduler-config -o jsonpath='{.data.config\.yaml}' \
    > "$dir/fracgpu/kube-scheduler-config.shipped.yaml"
  python3 - "$dir" "$fracgpu_scheduler_port" <<'EOF'
import sys, yaml
d, port = sys.argv[1], sys.argv[2]
c = yaml.safe_load(open(f"{d}/fracgpu/kube-scheduler-config.shipped.yaml"))
for e in c.get("extenders", []):
    e["urlPrefix"] = f"https://127.0.0.1:{port}"
    e.setdefault("tlsConfig", {})["caFile"] = f"{d}/fracgpu/ca.crt"
    e["tlsConfig"]["certFile"] = f"{d}/pki/fracgpu-kube-scheduler-client.crt"
    e["tlsConfig"]["keyFile"] = f"{d}/pki/fracgpu-kube-scheduler-client.key"
c["clientConnection"] = {"kubeconfig": f"{d}/fracgpu-kube-scheduler.kubeconfig"}
yaml.safe_dump(c, open(f"{d}/fracgpu/kube-scheduler-config.yaml", "w"), sort_keys=False)
EOF
  start fracgpu-kube-scheduler "$bin/kube-scheduler" --config "$dir/fracgpu/kube-scheduler-config.yaml" \
    --authentication-kubeconfig "$dir/fracgpu-kube-scheduler.kubeconfig" \
    --authorization-kubeconfig "$dir/fracgpu-kube-scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$port_fksched" --feature-gates "$(feature_gates)" --v=2
}

# `fracgpu ui` with the args deploy/ui.yaml ships (deploy/dra adds --dra-mode), on 127.0.0.1 (no
# pod network; it trusts the kubeflow-userid header, so nothing off this machine may reach it),
# as fracgpu-ui. There is no gateway in front: a caller sets kubeflow-userid itself.
start_fracgpu_ui() {
  local extra=()
  [ "$dra" = 1 ] && extra=(--dra-mode)
  start fracgpu-ui "$build/fracgpu" ui "${extra[@]}" --listen "127.0.0.1:$port_ui" \
    --user-header=kubeflow-userid --gpu-scheduler-policy=spread \
    --web-dir "$repo/web" --kubeconfig "$dir/fracgpu-ui.kubeconfig"
}

node_dir() { echo "$dir/nodes/$1"; }

# The overlay applied: tests/realcluster/overlay (overlay-dra in DRA mode), or with a port offset
# one patch over it.
overlay() {
  local base="$repo/tests/realcluster/overlay"
  [ "$dra" = 1 ] && base="$repo/tests/realcluster/overlay-dra"
  if [ "$off" = 0 ]; then echo "$base"; return; fi
  mkdir -p "$dir/overlay"
  cat > "$dir/overlay/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- $(realpath --relative-to="$dir/overlay" "$base")
patches:
- target: {group: admissionregistration.k8s.io, kind: MutatingWebhookConfiguration, name: fracgpu-webhook}
  patch: |-
    - op: replace
      path: /webhooks/0/clientConfig/url
      value: https://127.0.0.1:$port_fsched/webhook
EOF
  echo "$dir/overlay"
}

# --helm: `helm install` of deploy/helm/fracgpu with its default values (and --helm-values),
# changing only what tests/realcluster/overlay changes for the missing pod network: the webhook
# at https://127.0.0.1:<port>/webhook (the chart's scheduler.admissionWebhook.customURL). Release
# fracgpu, recorded in namespace default; the objects go to fracgpu-system as the chart says.
helm_install() {
  local h; h=$(bash "$repo/scripts/helm-build.sh" | tail -1)
  echo "$h" > "$dir/helm-bin"
  local values=()
  [ -n "$helm_values" ] && values=(-f "$helm_values")
  mkdir -p "$dir/helm"
  HELM_CACHE_HOME="$dir/helm" HELM_CONFIG_HOME="$dir/helm" HELM_DATA_HOME="$dir/helm" \
    "$h" install fracgpu "$repo/deploy/helm/fracgpu" --kubeconfig "$dir/admin.kubeconfig" \
    --namespace default "${values[@]}" \
    --set scheduler.admissionWebhook.customURL.enabled=true \
    --set scheduler.admissionWebhook.customURL.host=127.0.0.1 \
    --set "scheduler.admissionWebhook.customURL.port=$port_fsched" > "$dir/logs/apply.log" 2>&1 ||
    { cat "$dir/logs/apply.log" >&2; die "helm install failed"; }
}

write_kubelet_config() { # NODE INDEX
  local n=$1 i=$2 nd; nd=$(node_dir "$1")
  mkdir -p "$nd/root" "$nd/device-plugins" "$nd/records" "$nd/pki" "$nd/manifests"
  cert "kubelet-$n" "system:node:$n" system:nodes "IP:127.0.0.1,DNS:$n"
  kubeconfig "$nd/kubelet.kubeconfig" "system:node:$n" cert "kubelet-$n"
  local gates; gates=$(feature_gates)
  cat > "$nd/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $(( 29010 + off + 2 * i ))
healthzBindAddress: 127.0.0.1
healthzPort: $(( 29011 + off + 2 * i ))
readOnlyPort: 0
tlsCertFile: $dir/pki/kubelet-$n.crt
tlsPrivateKeyFile: $dir/pki/kubelet-$n.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$nd/cri.sock
imageServiceEndpoint: unix://$nd/cri.sock
staticPodPath: $nd/manifests
# The sandbox's cgroup v1 tmpfs hierarchy (docs/e2e.md "The real cluster"): no per-QoS cgroups,
# no node allocatable enforcement, cgroup v1 allowed, no swap check.
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failCgroupV1: false
failSwapOn: false
localStorageCapacityIsolation: false
evictionHard: {memory.available: "1Mi", nodefs.available: "0%", imagefs.available: "0%"}
resolvConf: ""
serializeImagePulls: false
featureGates: {${gates%%=*}: ${gates#*=}}
EOF
}

start_node() { # NODE INDEX
  local n=$1 i=$2 nd; nd=$(node_dir "$1")
  read -r count mib <<< "$(gpu_spec "$i")"
  local devices="" g
  for g in $(seq 0 $(( count - 1 ))); do
    devices+="${devices:+,}GPU-$(printf '%08x' $(( (i << 8) + g )))-0000-4000-8000-00000000000$i:$mib"
  done
  echo "$devices" > "$nd/gpus"
  # The node's link topology (the fake NVML's FAKE_GPU_TOPOLOGY: nvlink2x, nvlink8x, pcie or
  # links:A-BxN,...; empty: none, the topology entry points answer NOT_SUPPORTED). Like gpus, read
  # at each start of the node's device plugin or DRA driver: a test that rewrites either file
  # and restarts device-plugin-<node> gives the node another box.
  : > "$nd/topology"
  start "fake-cri-$n" "$bin/fake-cri" --listen "unix://$nd/cri.sock" --record-dir "$nd/records"
  wait_for "fake-cri of $n" 20 test -S "$nd/cri.sock"
  start_kubelet "$n"
}

start_kubelet() { # NODE
  local n=$1 nd; nd=$(node_dir "$1")
  # The node's address: this machine's first non-loopback one (--node-ip refuses loopback).
  # Without it the kubelet looks its node name up in DNS on every status update, a query that
  # leaves the machine, and fails where there is no default route.
  local ip node_ip=()
  ip=$(hostname -I 2>/dev/null | awk '{print $1}')
  [ -n "$ip" ] && node_ip=(--node-ip "$ip")
  # The kubelet's device-plugin folder is fixed; each kubelet gets its node's folder there in a
  # mount namespace of its own.
  start "kubelet-$n" unshare --mount --propagation private -- sh -c \
    'mkdir -p /var/lib/kubelet/device-plugins && mount --bind "$1" /var/lib/kubelet/device-plugins && shift && exec "$@"' \
    sh "$nd/device-plugins" "$bin/kubelet" --config "$nd/kubelet-config.yaml" \
    --kubeconfig "$nd/kubelet.kubeconfig" --root-dir "$nd/root" --cert-dir "$nd/pki" \
    --hostname-override "$n" "${node_ip[@]}" --v=1
}

# What either node plugin's pod has before it starts: libvgpu installed on the host by the image's
# installer (the DaemonSet's init container), and the device and node config from the ConfigMaps
# deploy/ ships, as the pod mounts them.
node_plugin_files() { # NODE
  local nd; nd=$(node_dir "$1")
  sh "$repo/deploy/image/install-vgpu.sh" "$build/lib/libvgpu.so" "$nd/hook/vgpu" >> "$dir/logs/install-vgpu.log"
  kc -n fracgpu-system get configmap fracgpu-device-config -o jsonpath='{.data.device-config\.yaml}' \
    > "$nd/device-config.yaml"
  kc -n fracgpu-system get configmap fracgpu-node-config -o jsonpath='{.data.config\.json}' \
    > "$nd/node-config.json"
}

start_device_plugin() { # NODE
  local n=$1 nd; nd=$(node_dir "$1")
  node_plugin_files "$n"
  local extra=() a; while IFS= read -r -d '' a; do extra+=("$a"); done < <(extra_args "device-plugin-$n")
  # The signing key the Secret's volume gives the pod, unless the extra arguments name another
  # (a migration test's plugin started while the Secret does not exist).
  local key=(--signing-key-file "$dir/fracgpu/signing.key")
  for a in "${extra[@]}"; do case "$a" in --signing-key-file=*) key=() ;; esac; done
  FAKE_GPU_DEVICES=$(cat "$nd/gpus") FAKE_GPU_TOPOLOGY=$(cat "$nd/topology" 2>/dev/null || true) \
    FAKE_GPU_STATE_DIR="$nd/gpu-state" NODE_NAME="$n" \
    start "device-plugin-$n" "$build/fracgpu" device-plugin --node-name "$n" \
    --hook-path "$nd/hook" --socket-dir "$nd/device-plugins" \
    --config-file "$nd/device-config.yaml" --node-config "$nd/node-config.json" \
    "${key[@]}" \
    --kubeconfig "$dir/fracgpu-device-plugin.kubeconfig" --nvml-library "$build/fakes/lib/libnvidia-ml.so.1" \
    "${extra[@]}"
}

# DRA mode: `fracgpu dra-driver` with the flags deploy/dra/dra-driver.yaml ships, on the node's own
# folders: the kubelet's root dir is $nd/root, so its plugin registry is $nd/root/plugins_registry
# (the kubelet registers the driver from there, its real plugin registration) and the driver's
# plugin dir $nd/root/plugins/gpu.fracgpu.io; the CDI spec dir is $nd/cdi (no runtime reads it).
start_dra_driver() { # NODE
  local n=$1 nd; nd=$(node_dir "$1")
  node_plugin_files "$n"
  mkdir -p "$nd/cdi"
  local extra=()
  [ -n "$slice_interval" ] && extra=(--slice-interval "$slice_interval")
  FAKE_GPU_DEVICES=$(cat "$nd/gpus") FAKE_GPU_TOPOLOGY=$(cat "$nd/topology" 2>/dev/null || true) \
    FAKE_GPU_STATE_DIR="$nd/gpu-state" NODE_NAME="$n" \
    start "dra-driver-$n" "$build/fracgpu" dra-driver --node-name "$n" \
    --hook-path "$nd/hook" --registry-dir "$nd/root/plugins_registry" \
    --plugin-dir "$nd/root/plugins/gpu.fracgpu.io" --cdi-dir "$nd/cdi" \
    --config-file "$nd/device-config.yaml" --node-config "$nd/node-config.json" \
    --consumable-capacity=auto "${extra[@]}" \
    --kubeconfig "$dir/fracgpu-dra-driver.kubeconfig" --nvml-library "$build/fakes/lib/libnvidia-ml.so.1"
}

# The node's ResourceSlice of fracgpu's driver has devices (DRA mode).
# True when NODE's allocatable nvidia.com/gpu equals the device count of the last ListAndWatch
# answer its device plugin logged after line SEEN of its log (all healthy in device-plugin mode).
allocatable_is_sent() { # NODE SEEN
  local sent
  sent=$(tail -n +$(( $2 + 1 )) "$dir/logs/device-plugin-$1.log" |
    sed -n 's/.*ListAndWatch: sent \([0-9]*\) devices.*/\1/p' | tail -n 1)
  [ -n "$sent" ] && [ "$(kc get node "$1" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" = "$sent" ]
}

node_slice_published() { # NODE
  kc get resourceslices --field-selector "spec.nodeName=$1,spec.driver=gpu.fracgpu.io" \
    -o jsonpath='{.items[*].spec.devices[*].name}' | grep -q gpu-
}

up() {
  [ "$(id -u)" = 0 ] || die "needs root (a mount namespace per kubelet)"
  [ "$dra" = 1 ] && [ "$helm" = 1 ] && die "--helm installs the device-plugin mode only (no --dra)"
  [ -x "$build/fracgpu" ] || die "no $build/fracgpu: build it first (cmake --build --preset release)"
  if [ -d "$dir/pids" ] && [ -n "$(ls -A "$dir/pids" 2>/dev/null)" ]; then
    die "a cluster is already up in $dir (scripts/cluster.sh down first)"
  fi
  local t0; t0=$(date +%s)
  local p busy=""
  for p in $port_etcd $port_etcd_peer $port_api $port_kcm $port_ksched $port_fsched \
           $port_fsched_health $port_fksched; do
    [ -z "$(ss -ltnH "sport = :$p" 2>/dev/null)" ] || busy+=" $p"
  done
  [ -z "$busy" ] || die "ports in use on this machine:$busy (another cluster? FRACGPU_CLUSTER_PORT_OFFSET moves them)"
  bins
  rm -rf "$dir"; mkdir -p -m 700 "$dir"; mkdir -p "$dir/fracgpu" "$dir/nodes"
  echo "$bin" > "$dir/bin"; echo "$build" > "$dir/build"; echo "$nodes" > "$dir/node-count"
  if [ "$dra" = 1 ]; then echo dra > "$dir/mode"; else echo device-plugin > "$dir/mode"; fi
  [ "$helm" = 1 ] && echo helm > "$dir/install"
  echo "$slice_interval" > "$dir/slice-interval"
  overlay > "$dir/overlay-path"
  make_pki
  start_etcd
  wait_for etcd 30 curl -sf "http://127.0.0.1:$port_etcd/health"
  start_apiserver
  wait_for kube-apiserver 90 kc get --raw /readyz
  start_kcm
  start_default_scheduler
  log "control plane ready ($(( $(date +%s) - t0 )) s)"
  local i n
  for i in $(seq 0 $(( nodes - 1 ))); do
    n=$(node_name "$i"); write_kubelet_config "$n" "$i"; start_node "$n" "$i"
  done
  # The GPU nodes carry gpu=on (docs/install.md), which the device-plugin DaemonSet selects.
  for i in $(seq 0 $(( nodes - 1 ))); do
    n=$(node_name "$i")
    wait_for "node $n registered" 90 kc get node "$n"
    kc label node "$n" gpu=on --overwrite >/dev/null
  done
  # deploy/ as shipped, through the local overlay (or the chart); then the host processes in its place.
  if [ "$helm" = 1 ]; then
    helm_install
  else
    kc apply -k "$(cat "$dir/overlay-path")" --server-side --field-manager fracgpu-cluster > "$dir/logs/apply.log"
  fi
  local sa sas=(fracgpu-scheduler fracgpu-kube-scheduler fracgpu-device-plugin fracgpu-ui fracgpu-certs)
  [ "$dra" = 1 ] && sas+=(fracgpu-dra-driver)
  for sa in "${sas[@]}"; do
    wait_for "ServiceAccount $sa" 30 kc -n fracgpu-system get serviceaccount "$sa"
    sa_kubeconfig "$sa"
  done
  "$build/fracgpu" certs --kubeconfig "$dir/fracgpu-certs.kubeconfig" --namespace fracgpu-system \
    --service fracgpu-scheduler --extra-san 127.0.0.1 --secret-name fracgpu-scheduler-tls \
    --webhook-config fracgpu-webhook --signing-key-secret fracgpu-signing-key \
    --validity-days 365 --renew-before-days 30 > "$dir/logs/certs.log" 2>&1 ||
    { cat "$dir/logs/certs.log" >&2; die "fracgpu certs failed"; }
  kc -n fracgpu-system get secret fracgpu-scheduler-tls -o jsonpath='{.data.tls\.crt}' | base64 -d > "$dir/fracgpu/tls.crt"
  kc -n fracgpu-system get secret fracgpu-scheduler-tls -o jsonpath='{.data.tls\.key}' | base64 -d > "$dir/fracgpu/tls.key"
  kc -n fracgpu-system get secret fracgpu-scheduler-tls -o jsonpath='{.data.ca\.crt}' | base64 -d > "$dir/fracgpu/ca.crt"
  kc -n fracgpu-system get secret fracgpu-signing-key -o jsonpath='{.data.key}' | base64 -d > "$dir/fracgpu/signing.key"
  # The client CA and kube-scheduler's client certificate as Secrets, the two steps of
  # docs/install.md "Authentication" (the host processes read the files of $dir/pki).
  kc -n fracgpu-system create secret generic fracgpu-client-ca \
    --from-file=ca.crt="$dir/pki/fracgpu-client-ca.crt" > /dev/null
  kc -n fracgpu-system create secret tls fracgpu-kube-scheduler-client \
    --cert "$dir/pki/fracgpu-kube-scheduler-client.crt" \
    --key "$dir/pki/fracgpu-kube-scheduler-client.key" > /dev/null
  chmod 600 "$dir/fracgpu/tls.key" "$dir/fracgpu/signing.key"
  start_fracgpu_scheduler
  start_fracgpu_kube_scheduler
  start_fracgpu_ui
  for i in $(seq 0 $(( nodes - 1 ))); do
    if [ "$dra" = 1 ]; then start_dra_driver "$(node_name "$i")"; else start_device_plugin "$(node_name "$i")"; fi
  done
  for i in $(seq 0 $(( nodes - 1 ))); do
    n=$(node_name "$i")
    wait_for "node $n Ready" 120 sh -c "'$bin/kubectl' --kubeconfig '$dir/admin.kubeconfig' get node '$n' -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
    if [ "$dra" = 1 ]; then
      wait_for "ResourceSlice of $n" 60 node_slice_published "$n"
    else
      wait_for "nvidia.com/gpu on $n" 60 sh -c "'$bin/kubectl' --kubeconfig '$dir/admin.kubeconfig' get node '$n' -o jsonpath='{.status.allocatable.nvidia\.com/gpu}' | grep -q '[1-9]'"
    fi
  done
  wait_for "fracgpu scheduler ready" 60 curl -sf "http://127.0.0.1:$port_fsched_health/readyz"
  wait_for "fracgpu ui" 30 curl -sf "http://127.0.0.1:$port_ui/api/options"
  echo "http://127.0.0.1:$port_ui" > "$dir/ui-url"
  # Pods in default are refused ("serviceaccount default not found") until the controller-
  # manager's ServiceAccount controller has made it.
  wait_for "ServiceAccount default/default" 60 kc -n default get serviceaccount default
  log "up in $(( $(date +%s) - t0 )) s: $nodes nodes ($(cat "$dir/mode") mode)"
  echo "KUBECONFIG=$dir/admin.kubeconfig"
}

down() {
  [ -d "$dir/pids" ] || { log "nothing up in $dir"; return 0; }
  local p
  for p in "$dir"/pids/*; do [ -e "$p" ] && stop "$(basename "$p")"; done
  # Anything else still holding the state folder in its arguments (every daemon here names it).
  pkill -KILL -f -- "$dir/" 2>/dev/null || true
  # kubelet mounts live in their own namespaces and end with them; only the state is left.
  rm -rf "$dir"
  log "down"
}

status() {
  [ -d "$dir/pids" ] || { echo "no cluster in $dir"; return 1; }
  bin=$(cat "$dir/bin")
  local p name
  for p in "$dir"/pids/*; do
    name=$(basename "$p")
    if kill -0 "$(cat "$p")" 2>/dev/null; then echo "running  $name"; else echo "STOPPED  $name"; fi
  done
  kc get nodes -o wide || true
}

# stop COMPONENT: SIGKILLs it and leaves it down until `restart COMPONENT`.
stop_component() {
  [ -d "$dir/pids" ] || die "no cluster in $dir"
  [ -f "$dir/pids/$1" ] || die "stop: no running component '$1' (scripts/cluster.sh status lists them)"
  stop "$1"
  mkdir -p "$dir/stopped"; : > "$dir/stopped/$1"
  log "stopped $1"
}

restart() { # COMPONENT: the name of its pid file (scripts/cluster.sh status lists them)
  [ -d "$dir/pids" ] || die "no cluster in $dir"
  [ -f "$dir/pids/$1" ] || [ -f "$dir/stopped/$1" ] ||
    die "restart: no component '$1' (scripts/cluster.sh status lists them)"
  bin=$(cat "$dir/bin"); build=$(cat "$dir/build")
  [ "$(cat "$dir/mode" 2>/dev/null)" = dra ] && dra=1
  # restart dra-driver-NODE --slice-interval S: that start only; otherwise up's.
  [ -n "$slice_interval" ] || slice_interval=$(cat "$dir/slice-interval" 2>/dev/null || true)
  local old; old=$(cat "$dir/pids/$1" 2>/dev/null || echo 0)
  # In device-plugin mode a restarted kubelet or device plugin is back when the plugin has
  # registered again (a new line in its log): until then the kubelet holds the node's GPUs
  # unhealthy and refuses pods that ask for them.
  local node="" seen=0
  case "$1" in kubelet-*|device-plugin-*) node=${1#*-}; node=${node#plugin-} ;; esac
  if [ -n "$node" ] && [ "$dra" = 0 ]; then seen=$(wc -l < "$dir/logs/device-plugin-$node.log"); fi
  stop "$1"
  ! alive "$old" || die "restart: $1 (pid $old) did not stop"
  rm -f "$dir/stopped/$1"
  case "$1" in
    apiserver) start_apiserver; wait_for kube-apiserver 90 kc get --raw /readyz ;;
    fracgpu-scheduler) start_fracgpu_scheduler
      wait_for "fracgpu scheduler ready" 60 curl -sf "http://127.0.0.1:$port_fsched_health/readyz" ;;
    fracgpu-kube-scheduler) start_fracgpu_kube_scheduler ;;
    fracgpu-ui) start_fracgpu_ui; wait_for "fracgpu ui" 30 curl -sf "http://127.0.0.1:$port_ui/api/options" ;;
    device-plugin-*) start_device_plugin "${1#device-plugin-}" ;;
    dra-driver-*) start_dra_driver "${1#dra-driver-}" ;;
    kubelet-*) start_kubelet "${1#kubelet-}" ;;
    *) die "restart: '$1' cannot be restarted (apiserver, fracgpu-scheduler, fracgpu-kube-scheduler, fracgpu-ui, device-plugin-NODE, dra-driver-NODE, kubelet-NODE)" ;;
  esac
  if [ -n "$node" ] && [ "$dra" = 0 ]; then
    if ! wait_for "device plugin of $node registered again" 90 sh -c \
      "tail -n +$((seen + 1)) '$dir/logs/device-plugin-$node.log' | grep -q 'registered nvidia.com/gpu with kubelet'"; then
      # What the plugin and the kubelet said meanwhile, for the test that called us (the
      # state folder is gone by the time anyone reads its logs).
      { echo "--- device-plugin-$node.log since the restart"
        tail -n +$((seen + 1)) "$dir/logs/device-plugin-$node.log" | tail -n 25
        echo "--- kubelet-$node.log (device plugin lines, last 25)"
        grep -i "plugin\|device_manager\|nvidia.com/gpu" "$dir/logs/kubelet-$node.log" | tail -n 25
      } >&2 || true
      return 1
    fi
    # The kubelet publishes the devices as allocatable at its next node status update (up to
    # nodeStatusUpdateFrequency, 10 s, later under load), not at registration: until then the
    # Node may still show the count from before the restart (0, or the old GPU list's).
    wait_for "nvidia.com/gpu on $node = the devices its plugin sent" 60 allocatable_is_sent "$node" "$seen"
  fi
  log "restarted $1 (pid $old -> $(cat "$dir/pids/$1"))"
}

cmd=${1:-}; [ $# -gt 0 ] && shift
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes="${2:?}"; shift 2 ;;
    --build) build=$(cd "${2:?}" && pwd); shift 2 ;;
    --dra) dra=1; shift ;;
    --slice-interval) slice_interval="${2:?}"; shift 2 ;;
    --helm) helm=1; shift ;;
    --helm-values) helm_values=$(realpath "${2:?}"); shift 2 ;;
    *) if { [ "$cmd" = restart ] || [ "$cmd" = stop ]; } && [ -z "${component:-}" ]; then component=$1; shift
       else die "unknown argument '$1'"; fi ;;
  esac
done
case "$cmd" in
  up) up ;;
  down) down ;;
  status) status ;;
  restart) restart "${component:?restart needs a component}" ;;
  stop) stop_component "${component:?stop needs a component}" ;;
  *) echo "usage: scripts/cluster.sh up [--nodes N] [--build DIR] [--dra [--slice-interval S] | --helm [--helm-values F]] | down | status | stop COMPONENT | restart COMPONENT" >&2; exit 2 ;;
esac
