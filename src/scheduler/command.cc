// `fracgpu scheduler`: the admission webhook and scheduler extender (docs/design/ARCHITECTURE.md).
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "base/file.h"
#include "base/host_port.h"
#include "base/signals.h"
#include "core/dra.h"
#include "core/node_lock_codec.h"
#include "core/workload_json.h"
#include "k8s/config.h"
#include "metrics/hami.h"
#include "scheduler/service.h"

namespace fracgpu::cli {
namespace {

struct Flags {
  std::string listen = "0.0.0.0:8443";
  std::string cert_file, key_file, kubeconfig, signing_key_file;
  std::string scheduler_name = "fracgpu-scheduler";
  std::string node_policy = "binpack", gpu_policy = "spread";
  std::vector<std::string> allowed_schedulers;
  std::string scheduler_user = "system:serviceaccount:fracgpu-system:fracgpu-scheduler";
  std::string device_plugin_user = "system:serviceaccount:fracgpu-system:fracgpu-device-plugin";
  bool leader_elect = false;
  std::string lease_namespace = "fracgpu-system", lease_name = "fracgpu-scheduler";
  std::string node_label_selector;
  int lock_expiry_s = 300;
  std::string node_lock = "annotation";
  bool binpack_avoid_busy_nodes = false;
  bool filter_returns_every_fitting_node = false;
  int health_port = -1;
  int metrics_port = -1;
  std::string client_ca_file;
  std::vector<std::string> allowed_client_names;
  bool allow_unauthenticated = false;
  bool anonymous_webhook = false;
  bool dra_mode = false;
  bool hami_metrics = true;
  bool legacy_metrics = false;
  std::string device_config_file;
  std::string adopt_hami_created_before;
  std::string fragmentation_workload_file;
};

// Whether `t` is a UTC time in the form metadata.creationTimestamp takes
// ("YYYY-MM-DDTHH:MM:SSZ", whole seconds), so that the adoption compares like with like. The
// RFC 3339 reading (calendar, ranges) is core's node-lock time parser; its canonical encoding
// must give `t` back unchanged.
bool IsUtcTimestamp(const std::string& t) {
  if (t.find(',') != std::string::npos) return false;  // a bare time, not a lock value
  auto lock = core::DecodeNodeLock(t);
  if (!lock.ok()) return false;
  std::string canonical = core::EncodeNodeLock(*lock);
  return canonical.substr(0, canonical.find(',')) == t;
}

// Every flag is checked here, before anything connects (usage errors: CLI::ValidationError,
// exit 2 as `fracgpu scheduler: <message>`, src/cli/usage.h).
int Run(const Flags& f) {
  scheduler::SchedulerOptions o;
  if (!f.adopt_hami_created_before.empty()) {
    if (!IsUtcTimestamp(f.adopt_hami_created_before)) {
      throw CLI::ValidationError("--adopt-hami-created-before \"" + f.adopt_hami_created_before +
                                 "\" is not a UTC time like 2026-12-04T10:00:00Z");
    }
    o.adopt_hami_created_before = f.adopt_hami_created_before;
  }
  auto listen = base::ParseHostPort(f.listen);
  if (!listen.ok()) throw CLI::ValidationError("--listen " + listen.status().message());
  o.http.host = listen->host;
  o.http.port = listen->port;
  o.http.cert_file = f.cert_file;
  o.http.key_file = f.key_file;
  o.http.health_port = f.health_port;
  // Its callers are kube-scheduler and kube-apiserver, Go clients that never resume a TLS
  // session, on the cluster network: no tickets, no compression (http::ServerOptions).
  o.http.compress_responses = false;
  o.http.tls_session_resumption = false;
  // A verified caller's idle connection is kept longer than it keeps its own (Go's
  // IdleConnTimeout, 90 s in client-go's and kube-scheduler's transports), so the client
  // closes it first. At 5 s the server closed idle connections the API server was just
  // reusing: a webhook POST written into one ("broken pipe") is not retried, and
  // failurePolicy Ignore let the pod in unmutated (docs/performance.md run 7: 1 pod in
  // 10,000). Connections without a verified certificate keep the 5 s default.
  o.http.verified_client_keep_alive_timeout_s = 120;
  o.metrics_port = f.metrics_port;
  // Authentication of /filter, /prioritize, /bind and /webhook (docs/scheduler.md
  // "Authentication"): client certificates; refused to run unauthenticated where other hosts
  // can reach the port unless asked to.
  const bool loopback =
      o.http.host == "127.0.0.1" || o.http.host == "::1" || o.http.host == "localhost";
  if (f.client_ca_file.empty() && !f.allow_unauthenticated && (!f.cert_file.empty() || !loopback)) {
    throw CLI::ValidationError(
        "--listen " + f.listen +
        " without --client-ca-file would let anyone who reaches the port bind pods: give "
        "--client-ca-file (the CA of kube-scheduler's and the API server's client certificates) "
        "or --allow-unauthenticated");
  }
  if (!f.client_ca_file.empty()) {
    if (auto ca = base::ReadFile(f.client_ca_file, size_t{16} << 20); !ca.ok())
      throw CLI::ValidationError("cannot read --client-ca-file: " + ca.status().message());
  }
  if (!f.client_ca_file.empty()) {
    o.http.client_ca_file = f.client_ca_file;
    o.require_client_cert = true;
    o.allowed_clients = f.allowed_client_names;
    o.anonymous_webhook = f.anonymous_webhook;
  } else {
    spdlog::warn("no --client-ca-file: /filter, /prioritize, /bind and /webhook accept anyone");
  }
  o.webhook.scheduler_name = f.scheduler_name;
  o.webhook.allowed_schedulers = f.allowed_schedulers;
  o.webhook.scheduler_user = f.scheduler_user;
  o.webhook.device_plugin_user = f.device_plugin_user;
  o.webhook.dra_mode = f.dra_mode;
  // The cluster device config the device plugin and the DRA driver read (HAMi's
  // `hami-scheduler-device` ConfigMap): resource names and request defaults for the webhook and
  // the extender alike (SchedulerService copies webhook.names to the extender).
  if (!f.device_config_file.empty()) {
    auto text = base::ReadFile(f.device_config_file, size_t{16} << 20);
    if (!text.ok()) {
      throw CLI::ValidationError("cannot read --device-config-file: " + text.status().message());
    }
    auto config = node::ParseDeviceConfigYaml(*text);
    if (!config.ok()) {
      throw CLI::ValidationError("--device-config-file " + f.device_config_file + ": " +
                                 config.status().message());
    }
    for (const auto& note : config->notes) spdlog::warn("{}: {}", f.device_config_file, note);
    scheduler::ApplyDeviceConfig(*config, &o.webhook);
  }
  auto np = core::ParseNodePolicy(f.node_policy);
  auto gp = core::ParseGpuPolicy(f.gpu_policy);
  if (!np.ok()) throw CLI::ValidationError("--node-scheduler-policy: " + np.status().message());
  if (!gp.ok()) throw CLI::ValidationError("--gpu-scheduler-policy: " + gp.status().message());
  o.extender.default_node_policy = *np;
  o.extender.default_gpu_policy = *gp;
  o.extender.lock_expiry = std::chrono::seconds(f.lock_expiry_s);
  o.extender.node_lock = f.node_lock == "bind-phase" ? scheduler::NodeLockMode::kBindPhase
                                                     : scheduler::NodeLockMode::kAnnotation;
  // Without a key the device plugin serves a pod only under a Node lock naming it (none is
  // written then), and the state could not tell a pod's own forged annotations from ours.
  if (o.extender.node_lock == scheduler::NodeLockMode::kBindPhase && f.signing_key_file.empty()) {
    throw CLI::ValidationError(
        "--node-lock=bind-phase needs --signing-key-file: without signed allocations the device "
        "plugin serves a pod only under a Node lock naming it, and a pod's own annotations could "
        "hold a node");
  }
  o.extender.binpack_avoids_busy_nodes = f.binpack_avoid_busy_nodes;
  o.extender.filter_returns_every_fitting_node = f.filter_returns_every_fitting_node;
  // A fixed target workload M for fragmentation-aware pods (default: the running pods' shapes).
  if (!f.fragmentation_workload_file.empty()) {
    const std::string what = "--fragmentation-workload " + f.fragmentation_workload_file + ": ";
    auto text = base::ReadFile(f.fragmentation_workload_file, size_t{16} << 20);
    if (!text.ok()) throw CLI::ValidationError(what + text.status().message());
    auto workload = core::ParseTargetWorkload(*text);
    if (!workload.ok()) throw CLI::ValidationError(what + workload.status().message());
    o.extender.fragmentation_workload = std::move(*workload);
  }
  if (!f.signing_key_file.empty()) {
    auto key = base::ReadFile(f.signing_key_file, size_t{1} << 20);
    if (!key.ok()) {
      throw CLI::ValidationError("cannot read --signing-key-file: " + key.status().message());
    }
    o.extender.signing_key = std::move(*key);
  } else {
    spdlog::warn(
        "no --signing-key-file: allocations are not signed; device plugins that verify will refuse "
        "them");
  }
  o.leader_elect = f.leader_elect;
  o.leader.lease_namespace = f.lease_namespace;
  o.leader.lease_name = f.lease_name;
  const char* pod = std::getenv("POD_NAME");
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  o.leader.identity = pod != nullptr ? pod : host;
  o.node_label_selector = f.node_label_selector;
  o.hami_metrics = f.hami_metrics;
  o.legacy_metrics = f.legacy_metrics;
  if (std::string bad = metrics::CheckHamiMetricFlags(o.hami_metrics, o.legacy_metrics);
      !bad.empty()) {
    throw CLI::ValidationError(bad);
  }
  o.version = FRACGPU_SCHEDULER_VERSION;

  base::StopSignal stop;
  base::SignalWatcher signals(&stop);  // before any other thread

  auto client = k8s::Connect(f.kubeconfig);
  if (!client.ok()) {
    std::fprintf(stderr, "fracgpu scheduler: %s\n", client.status().ToString().c_str());
    return 1;
  }
  if (f.dra_mode) {
    o.webhook.create_claim_template = scheduler::ClaimTemplateCreator(client->get());
    spdlog::info("DRA mode: GPU requests become ResourceClaimTemplates (class {} / {})",
                 core::kDraFractionalClass, core::kDraWholeClass);
  }
  scheduler::TuneMallocForRequests();  // before the server's threads start
  scheduler::SchedulerService service(o, client->get());
  if (Status st = service.Start(); !st.ok()) {
    std::fprintf(stderr, "fracgpu scheduler: %s\n", st.ToString().c_str());
    return 1;
  }
  spdlog::info("fracgpu scheduler \"{}\" serving on {}", f.scheduler_name, service.BaseUrl());
  while (!stop.WaitFor(std::chrono::hours(1))) {
  }
  spdlog::info("stopping");
  service.Stop();
  return 0;
}

}  // namespace

void RegisterSchedulerCommand(CLI::App& app) {
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("scheduler", "Admission webhook and kube-scheduler extender");
  CLI::Option* listen =
      cmd->add_option("--listen", flags->listen, "host:port of the HTTPS (or HTTP) listener")
          ->capture_default_str();
  // The old spelling: accepted, with a deprecation line (docs/development.md "The command line").
  CLI::Option* http_bind = cmd->add_option("--http-bind", flags->listen)->group("");
  cmd->add_option(
         "--health-port", flags->health_port,
         "plain-HTTP port serving only /healthz and /readyz, apart from the workers (-1: none)")
      ->check(CLI::Range(-1, 65535))
      ->capture_default_str();
  cmd->add_option("--client-ca-file", flags->client_ca_file,
                  "PEM CA of the client certificates kube-scheduler and the API server present; "
                  "with it /filter, /prioritize, /bind, /webhook and /metrics need one (401/403)");
  cmd->add_option("--allowed-client-names", flags->allowed_client_names,
                  "client certificate names (CN or DNS SAN) allowed; empty: any the CA signed");
  cmd->add_flag("--allow-anonymous-webhook", flags->anonymous_webhook,
                "/webhook without a client certificate (API servers that cannot present one)");
  cmd->add_flag("--allow-unauthenticated", flags->allow_unauthenticated,
                "serve without --client-ca-file on a non-loopback or HTTPS listener");
  cmd->add_option("--metrics-port", flags->metrics_port,
                  "plain-HTTP port serving only /metrics (-1: /metrics on the main port, behind "
                  "the client-certificate check)")
      ->check(CLI::Range(-1, 65535))
      ->capture_default_str();
  cmd->add_option("--cert-file", flags->cert_file,
                  "PEM serving certificate (reloaded when it changes)");
  cmd->add_option("--key-file", flags->key_file, "PEM serving key");
  cmd->add_option("--kubeconfig", flags->kubeconfig,
                  "kubeconfig (default: in-cluster, $KUBECONFIG, ~/.kube/config)");
  cmd->add_option("--scheduler-name", flags->scheduler_name, "schedulerName set on GPU pods")
      ->capture_default_str();
  cmd->add_option("--node-scheduler-policy", flags->node_policy, "binpack | spread")
      ->capture_default_str();
  cmd->add_option("--gpu-scheduler-policy", flags->gpu_policy,
                  "binpack | spread | topology-aware | fragmentation-aware")
      ->capture_default_str();
  cmd->add_option("--fragmentation-workload", flags->fragmentation_workload_file,
                  "JSON array of task shapes {cpu_milli, gpu_milli, num_gpus, gpu_spec, "
                  "popularity}: the target workload M of fragmentation-aware pods (default: the "
                  "running pods' shapes); `fracgpu simulate --replay-out` writes a trace's");
  cmd->add_option("--allowed-schedulers", flags->allowed_schedulers,
                  "other schedulers that speak this contract");
  cmd->add_option("--scheduler-user", flags->scheduler_user, "the scheduler's service account user")
      ->capture_default_str();
  cmd->add_option("--device-plugin-user", flags->device_plugin_user,
                  "the device plugin's service account user")
      ->capture_default_str();
  cmd->add_option("--signing-key-file", flags->signing_key_file,
                  "HMAC key of the allocation signature");
  cmd->add_flag("--leader-elect", flags->leader_elect,
                "elect a leader through a Lease (for several replicas)");
  cmd->add_option("--leader-elect-resource-namespace", flags->lease_namespace)
      ->capture_default_str();
  cmd->add_option("--leader-elect-resource-name", flags->lease_name)->capture_default_str();
  cmd->add_option("--node-label-selector", flags->node_label_selector,
                  "watch only these nodes (k=v,...)");
  cmd->add_flag("--hami-metrics", flags->hami_metrics,
                "also expose HAMi v2.10's metric names on /metrics (hami_gpu_*, hami_vgpu_*; "
                "--hami-metrics=false: "
                "fracgpu_* only)")
      ->capture_default_str();
  cmd->add_flag("--legacy-metrics", flags->legacy_metrics,
                "also expose HAMi's pre-v2.10 names (GPUDeviceMemoryLimit, vGPUCoreAllocated, "
                "...), as HAMi's "
                "--legacy-metrics does")
      ->capture_default_str();
  cmd->add_flag("--dra-mode", flags->dra_mode,
                "webhook turns nvidia.com/gpu + gpumem/gpucores into ResourceClaimTemplates for "
                "the DRA driver "
                "(docs/dra.md); kube-scheduler then places the claims");
  cmd->add_option("--node-lock-timeout", flags->lock_expiry_s, "node lock expiry, seconds")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  cmd->add_option("--node-lock", flags->node_lock,
                  "where a bound GPU pod holds its node until the device plugin's Allocate: "
                  "annotation (HAMi's hami.io/mutex.lock on the Node, two Node writes a pod) or "
                  "bind-phase (the pod's own hami.io/bind-phase: allocating, no Node write; "
                  "docs/scheduler.md \"Node lock\")")
      ->check(CLI::IsMember({"annotation", "bind-phase"}))
      ->capture_default_str();
  cmd->add_flag("--binpack-avoid-busy-nodes", flags->binpack_avoid_busy_nodes,
                "under binpack, score nodes with a bind in flight or a held lock 0 (more pods "
                "per second in a burst, which is then spread over nodes; docs/scheduler.md)");
  cmd->add_flag("--filter-returns-every-fitting-node", flags->filter_returns_every_fitting_node,
                "/filter answers every node where a GPU pod fits, for /prioritize and "
                "kube-scheduler's own scores to choose among (default: only the node /prioritize "
                "would score highest, reserved at once; docs/scheduler.md)");
  cmd->add_option("--adopt-hami-created-before", flags->adopt_hami_created_before,
                  "pods HAMi placed before this UTC time (2026-12-04T10:00:00Z) are verified "
                  "once against their node and counted as written (docs/hami-migration.md step "
                  "4; needs the signing key)");
  cmd->add_option("--device-config-file", flags->device_config_file,
                  "the cluster device config YAML the device plugin reads (HAMi's "
                  "device-config.yaml, nvidia: section): resource names, defaultMemory, "
                  "defaultCores, defaultGPUNum, memoryFactor, overwriteEnv (\"\": built-in "
                  "defaults)");
  cmd->callback([flags, listen, http_bind] {
    if (http_bind->count() > 0) {
      if (listen->count() > 0)
        throw CLI::ValidationError("--http-bind is --listen's old name: give one");
      std::fputs("fracgpu scheduler: --http-bind is deprecated; use --listen\n", stderr);
    }
    int rc = Run(*flags);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace fracgpu::cli
