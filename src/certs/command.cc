// `fracgpu certs`: the webhook's CA and serving certificate, its caBundle and the signing key
// (reconcile.h). Thin main (docs/design/STYLE.md): flags → CertsOptions → Reconcile.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <ctime>
#include <memory>

#include "certs/reconcile.h"
#include "k8s/client.h"
#include "k8s/config.h"

namespace fracgpu::cli {
namespace {

struct Flags {
  std::string kubeconfig;
  certs::CertsOptions options;
  int validity_days = 365;
  int ca_validity_days = 3650;
  int renew_before_days = 30;
  bool skip_webhook = false;
};

// The flags are checked before the cluster is read (usage errors: CLI::ValidationError, exit 2 as
// `fracgpu certs: <message>`, src/cli/usage.h); a failure after that exits 1.
int Run(Flags f) {
  f.options.cert_validity_s = int64_t{f.validity_days} * 86400;
  f.options.ca_validity_s = int64_t{f.ca_validity_days} * 86400;
  f.options.renew_before_s = int64_t{f.renew_before_days} * 86400;
  if (f.skip_webhook) f.options.webhook_configs.clear();
  if (Status st = certs::ValidateOptions(f.options); !st.ok()) {
    throw CLI::ValidationError(st.message());
  }
  auto client = k8s::Connect(f.kubeconfig);
  if (!client.ok()) {
    std::fprintf(stderr, "fracgpu certs: %s\n", client.status().ToString().c_str());
    return 1;
  }
  auto out = certs::Reconcile(**client, f.options, std::time(nullptr));
  if (!out.ok()) {
    std::fprintf(stderr, "fracgpu certs: %s\n", out.status().ToString().c_str());
    return 1;
  }
  for (const auto& note : out->notes) spdlog::info("{}", note);
  if (out->notes.empty()) {
    spdlog::info("Secret {}/{}: certificate kept (valid, SANs present, caBundle current)",
                 f.options.namespace_name, f.options.secret_name);
  }
  return 0;
}

}  // namespace

void RegisterCertsCommand(CLI::App& app) {
  auto f = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("certs",
                                 "Create or renew the webhook's CA and serving certificate Secret, "
                                 "patch the caBundle, ensure the signing key");
  auto& o = f->options;
  cmd->add_option("--kubeconfig", f->kubeconfig,
                  "kubeconfig (default: in-cluster, $KUBECONFIG, ~/.kube/config)");
  cmd->add_option("--namespace", o.namespace_name, "namespace of the Service and the Secrets")
      ->capture_default_str();
  cmd->add_option("--service", o.service,
                  "Service in front of the webhook (its DNS names become SANs)")
      ->capture_default_str();
  cmd->add_option("--cluster-domain", o.cluster_domain, "cluster DNS domain")
      ->capture_default_str();
  cmd->add_option("--extra-san", o.extra_sans,
                  "another DNS name or IP address for the certificate (repeatable)");
  cmd->add_option("--secret-name", o.secret_name, "kubernetes.io/tls Secret to write")
      ->capture_default_str();
  cmd->add_option("--webhook-config", o.webhook_configs,
                  "MutatingWebhookConfiguration whose caBundle to set (repeatable)")
      ->capture_default_str();
  cmd->add_flag("--skip-webhook", f->skip_webhook, "do not patch any webhook configuration");
  cmd->add_option(
         "--signing-key-secret", o.signing_key_secret,
         "Secret holding the allocation-signing key, created when absent (\"\" = leave alone)")
      ->capture_default_str();
  cmd->add_option("--validity-days", f->validity_days,
                  "lifetime of a new serving certificate, days")
      ->check(CLI::Range(1, 36500))
      ->capture_default_str();
  cmd->add_option("--ca-validity-days", f->ca_validity_days, "lifetime of a new CA, days")
      ->check(CLI::Range(1, 36500))
      ->capture_default_str();
  cmd->add_option("--renew-before-days", f->renew_before_days,
                  "renew a certificate that expires within this many days")
      ->check(CLI::Range(0, 36500))
      ->capture_default_str();
  cmd->callback([f] {
    int rc = Run(*f);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace fracgpu::cli
