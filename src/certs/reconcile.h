#pragma once
// The work of `fracgpu certs`: make sure the scheduler's serving certificate, its CA, the
// webhook's caBundle and the allocation-signing key exist and are consistent, changing only
// what is missing, invalid or close to expiry (so it can run at every install and on a
// schedule).
//
// Objects (Kubernetes core/v1 and admissionregistration.k8s.io/v1):
// - Secret `<secret_name>` in `<namespace>`, type kubernetes.io/tls: `tls.crt`, `tls.key` (the
//   serving pair, what `fracgpu scheduler --cert-file/--key-file` mount), `ca.crt`, `ca.key`
//   (the CA, kept so the serving certificate can be renewed under the same CA and the caBundle
//   does not change at every renewal).
// - MutatingWebhookConfiguration(s) `<webhook_configs>`: every webhook's
//   `clientConfig.caBundle` = base64 of the CA PEM (plus the previous CA while it is still valid,
//   right after a CA rotation, so the API server trusts the old serving certificate until the
//   scheduler reloads the new one).
// - Secret `<signing_key_secret>` (Opaque, key `key`): the HMAC key of
//   `fracgpu.io/allocation-signature` (docs/design/CONTRACT.md §2), 32 random bytes hex-encoded;
//   created when absent, never changed (changing it would void every signed allocation in flight).

#include <ctime>
#include <string>
#include <vector>

#include "base/status.h"
#include "k8s/client.h"

namespace fracgpu::certs {

/// What to reconcile. Durations are seconds.
struct CertsOptions {
  std::string namespace_name = "fracgpu-system";
  std::string service = "fracgpu-scheduler";  ///< Service in front of the webhook
  std::string cluster_domain = "cluster.local";
  std::vector<std::string> extra_sans;  ///< more DNS names or IP addresses
  std::string secret_name = "fracgpu-scheduler-tls";
  std::vector<std::string> webhook_configs = {"fracgpu-webhook"};  ///< empty = patch none
  std::string signing_key_secret = "fracgpu-signing-key";          ///< "" = do not manage
  int64_t ca_validity_s = 10LL * 365 * 86400;
  int64_t cert_validity_s = 365LL * 86400;
  int64_t renew_before_s = 30LL * 86400;  ///< renew what expires within this window
};

/// What Reconcile did.
struct Outcome {
  bool ca_generated = false;         ///< a new CA was made (none, invalid or expiring)
  bool cert_issued = false;          ///< a new serving certificate was issued
  bool secret_written = false;       ///< the TLS Secret was created or updated
  int webhooks_patched = 0;          ///< webhook configurations whose caBundle changed
  bool signing_key_created = false;  ///< the signing-key Secret was created
  std::vector<std::string> notes;    ///< why each thing was (re)made, for the log
};

/// Checks the options: names are DNS-1123 (namespace, service, secrets, webhook configs),
/// durations > 0, renew_before_s < cert_validity_s and < ca_validity_s, every extra SAN
/// valid. Errors: kInvalidArgument naming the flag and the value.
Status ValidateOptions(const CertsOptions& options);

/// The SANs of the serving certificate: `<svc>`, `<svc>.<ns>`, `<svc>.<ns>.svc`,
/// `<svc>.<ns>.svc.<cluster_domain>`, then `extra_sans` (duplicates dropped, order kept).
std::vector<std::string> ServingSans(const CertsOptions& options);

/// Brings the objects above to the desired state at time `now` (unix seconds) through
/// `client`. Idempotent: a second call with nothing expiring changes nothing.
/// Errors: ValidateOptions' errors; the client's errors (kPermissionDenied without RBAC,
/// kNotFound when a webhook configuration does not exist, kConflict when a Secret changed
/// under us) prefixed with the object; kInvalidArgument when an existing Secret has the wrong
/// type or a signing-key Secret without a usable `key`. Objects already written stay written
/// (each write is whole; a rerun finishes the job).
Result<Outcome> Reconcile(k8s::Client& client, const CertsOptions& options, std::time_t now);

/// "/api/v1/namespaces/<ns>/secrets[/<name>]".
std::string SecretPath(const std::string& ns, const std::string& name = "");
/// "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/<name>".
std::string MutatingWebhookPath(const std::string& name);

}  // namespace fracgpu::certs
