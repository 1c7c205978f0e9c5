// Reconcile of `fracgpu certs` (reconcile.h).
#include "certs/reconcile.h"

#include <algorithm>

#include "certs/pki.h"

namespace fracgpu::certs {
namespace {

using nlohmann::json;

constexpr char kManagedBy[] = "fracgpu-certs";
constexpr char kCaCommonName[] = "fracgpu-webhook-ca";

// DNS-1123 label (Kubernetes names of namespaces and services): 1-63 of [a-z0-9-], starting
// and ending alphanumeric.
bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

// DNS-1123 subdomain (names of Secrets and webhook configurations): dot-separated labels, ≤ 253.
bool IsDnsSubdomain(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    if (!IsDnsLabel(s.substr(start, dot == std::string::npos ? std::string::npos : dot - start)))
      return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

json Labels() {
  return {{"app.kubernetes.io/name", "fracgpu"}, {"app.kubernetes.io/managed-by", kManagedBy}};
}

// data[key] decoded, or "" when absent or not base64.
std::string DataField(const json& secret, const std::string& key) {
  auto data = secret.find("data");
  if (data == secret.end() || !data->is_object()) return "";
  auto v = data->find(key);
  if (v == data->end() || !v->is_string()) return "";
  auto decoded = Base64Decode(v->get<std::string>());
  return decoded.ok() ? *decoded : "";
}

// Why the stored CA cannot be kept ("" = it can).
std::string CaProblem(const KeyPair& ca, const CertsOptions& o, std::time_t now) {
  if (ca.cert_pem.empty() || ca.key_pem.empty()) return "no CA stored";
  auto info = InspectCert(ca.cert_pem);
  if (!info.ok()) return "stored ca.crt: " + info.status().message();
  if (!info->is_ca) return "stored ca.crt is not a CA";
  if (Status st = KeyMatchesCert(ca.cert_pem, ca.key_pem); !st.ok())
    return "stored ca.key: " + st.message();
  if (info->not_after - now < o.renew_before_s) {
    return "CA expires in " + std::to_string((info->not_after - now) / 86400) + " days";
  }
  return "";
}

// Why the stored serving pair cannot be kept ("" = it can).
std::string ServingProblem(const KeyPair& srv, const std::string& ca_pem,
                           const std::vector<std::string>& sans, const CertsOptions& o,
                           std::time_t now) {
  if (srv.cert_pem.empty() || srv.key_pem.empty()) return "no serving certificate stored";
  auto info = InspectCert(srv.cert_pem);
  if (!info.ok()) return "stored tls.crt: " + info.status().message();
  if (Status st = VerifyIssuedBy(srv.cert_pem, ca_pem, now); !st.ok())
    return "stored tls.crt: " + st.message();
  if (Status st = KeyMatchesCert(srv.cert_pem, srv.key_pem); !st.ok())
    return "stored tls.key: " + st.message();
  for (const auto& san : sans) {
    bool has =
        std::find(info->dns_names.begin(), info->dns_names.end(), san) != info->dns_names.end() ||
        std::find(info->ip_addresses.begin(), info->ip_addresses.end(), san) !=
            info->ip_addresses.end();
    if (!has) return "stored tls.crt lacks SAN " + san;
  }
  if (info->not_after - now < o.renew_before_s) {
    return "serving certificate expires in " + std::to_string((info->not_after - now) / 86400) +
           " days";
  }
  return "";
}

Result<json> GetOptional(k8s::Client& client, const std::string& path, bool* found) {
  auto got = client.Get(path);
  if (got.ok()) {
    *found = true;
    return *got;
  }
  *found = false;
  if (got.status().code() == StatusCode::kNotFound) return json::object();
  return got.status();
}

Status EnsureSigningKey(k8s::Client& client, const CertsOptions& o, Outcome* out) {
  const std::string where = "Secret " + o.namespace_name + "/" + o.signing_key_secret;
  bool found = false;
  auto got = GetOptional(client, SecretPath(o.namespace_name, o.signing_key_secret), &found);
  if (!got.ok()) return got.status().WithPrefix(where);
  if (found) {
    if (DataField(*got, "key").empty()) {
      return InvalidArgument(where +
                             " exists without a usable data.key; delete it to have a new key made");
    }
    return Status::Ok();
  }
  auto random = RandomBytes(32);
  if (!random.ok()) return random.status();
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : *random) {
    hex.push_back(kHex[c >> 4]);
    hex.push_back(kHex[c & 15]);
  }
  json secret = {
      {"apiVersion", "v1"},
      {"kind", "Secret"},
      {"metadata",
       {{"name", o.signing_key_secret}, {"namespace", o.namespace_name}, {"labels", Labels()}}},
      {"type", "Opaque"},
      {"data", {{"key", Base64Encode(hex)}}}};
  auto created = client.Create(SecretPath(o.namespace_name), secret);
  if (!created.ok()) {
    // Another run created it between our GET and POST: theirs is as good as ours.
    if (created.status().code() == StatusCode::kConflict) return Status::Ok();
    return created.status().WithPrefix(where);
  }
  out->signing_key_created = true;
  out->notes.push_back(where + ": created a new signing key");
  return Status::Ok();
}

Status PatchWebhook(k8s::Client& client, const std::string& name, const std::string& bundle_b64,
                    Outcome* out) {
  bool changed = false;
  auto r =
      client.PatchWithRetry(MutatingWebhookPath(name), [&](const json& current) -> Result<json> {
        changed = false;
        auto hooks = current.find("webhooks");
        if (hooks == current.end() || !hooks->is_array() || hooks->empty()) {
          return InvalidArgument("MutatingWebhookConfiguration " + name + " has no webhooks");
        }
        json updated = *hooks;
        for (auto& hook : updated) {
          json& cc = hook["clientConfig"];
          if (cc.value("caBundle", "") != bundle_b64) {
            cc["caBundle"] = bundle_b64;
            changed = true;
          }
        }
        // A merge patch replaces the whole list (RFC 7386); the resourceVersion PatchWithRetry adds
        // makes a concurrent edit a 409 and a re-read instead of a lost update.
        return changed ? json{{"webhooks", updated}} : json();
      });
  if (!r.ok()) return r.status().WithPrefix("MutatingWebhookConfiguration " + name);
  if (changed) {
    ++out->webhooks_patched;
    out->notes.push_back("MutatingWebhookConfiguration " + name + ": caBundle set");
  }
  return Status::Ok();
}

}  // namespace

std::string SecretPath(const std::string& ns, const std::string& name) {
  return "/api/v1/namespaces/" + ns + "/secrets" + (name.empty() ? "" : "/" + name);
}

std::string MutatingWebhookPath(const std::string& name) {
  return "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/" + name;
}

Status ValidateOptions(const CertsOptions& o) {
  auto bad = [](const std::string& flag, const std::string& value, const std::string& why) {
    return InvalidArgument(flag + " \"" + value + "\" " + why);
  };
  if (!IsDnsLabel(o.namespace_name))
    return bad("--namespace", o.namespace_name, "is not a DNS-1123 label");
  if (!IsDnsLabel(o.service)) return bad("--service", o.service, "is not a DNS-1123 label");
  if (!IsDnsSubdomain(o.secret_name))
    return bad("--secret-name", o.secret_name, "is not a DNS-1123 subdomain");
  if (!o.signing_key_secret.empty() && !IsDnsSubdomain(o.signing_key_secret)) {
    return bad("--signing-key-secret", o.signing_key_secret, "is not a DNS-1123 subdomain");
  }
  if (o.signing_key_secret == o.secret_name) {
    return bad("--signing-key-secret", o.signing_key_secret, "must differ from --secret-name");
  }
  for (const auto& w : o.webhook_configs) {
    if (!IsDnsSubdomain(w)) return bad("--webhook-config", w, "is not a DNS-1123 subdomain");
  }
  if (Status st = ValidateSan(o.cluster_domain); !st.ok())
    return bad("--cluster-domain", o.cluster_domain, "is invalid: " + st.message());
  for (const auto& s : o.extra_sans) {
    if (Status st = ValidateSan(s); !st.ok())
      return InvalidArgument("--extra-san: " + st.message());
  }
  auto days = [](int64_t s) { return std::to_string(s / 86400); };
  if (o.cert_validity_s <= 0) return bad("--validity-days", days(o.cert_validity_s), "must be > 0");
  if (o.ca_validity_s <= 0) return bad("--ca-validity-days", days(o.ca_validity_s), "must be > 0");
  if (o.renew_before_s < 0)
    return bad("--renew-before-days", days(o.renew_before_s), "must be >= 0");
  if (o.renew_before_s >= o.cert_validity_s) {
    return bad("--renew-before-days", days(o.renew_before_s),
               "must be less than --validity-days (" + days(o.cert_validity_s) +
                   "), or every run would renew");
  }
  if (o.renew_before_s >= o.ca_validity_s) {
    return bad("--renew-before-days", days(o.renew_before_s),
               "must be less than --ca-validity-days (" + days(o.ca_validity_s) + ")");
  }
  return Status::Ok();
}

std::vector<std::string> ServingSans(const CertsOptions& o) {
  std::vector<std::string> sans = {o.service, o.service + "." + o.namespace_name,
                                   o.service + "." + o.namespace_name + ".svc",
                                   o.service + "." + o.namespace_name + ".svc." + o.cluster_domain};
  for (const auto& s : o.extra_sans) {
    if (std::find(sans.begin(), sans.end(), s) == sans.end()) sans.push_back(s);
  }
  return sans;
}

Result<Outcome> Reconcile(k8s::Client& client, const CertsOptions& o, std::time_t now) {
  FRACGPU_RETURN_IF_ERROR(ValidateOptions(o));
  Outcome out;
  const std::string where = "Secret " + o.namespace_name + "/" + o.secret_name;
  const auto sans = ServingSans(o);

  bool found = false;
  auto existing = GetOptional(client, SecretPath(o.namespace_name, o.secret_name), &found);
  if (!existing.ok()) return existing.status().WithPrefix(where);
  if (found && existing->value("type", "") != "kubernetes.io/tls") {
    return InvalidArgument(
        where + " has type \"" + existing->value("type", "") +
        "\", not kubernetes.io/tls (the type cannot change; delete it or pick --secret-name)");
  }
  KeyPair ca{DataField(*existing, "ca.crt"), DataField(*existing, "ca.key")};
  KeyPair srv{DataField(*existing, "tls.crt"), DataField(*existing, "tls.key")};

  std::string previous_ca;  // kept in the caBundle right after a rotation, while still valid
  if (std::string why = CaProblem(ca, o, now); !why.empty()) {
    if (auto info = InspectCert(ca.cert_pem); info.ok() && info->is_ca && info->not_after > now) {
      previous_ca = ca.cert_pem;
    }
    auto made = GenerateCa(kCaCommonName, o.ca_validity_s, now);
    if (!made.ok()) return made.status();
    ca = *made;
    out.ca_generated = true;
    out.notes.push_back(where + ": new CA (" + why + ")");
  }
  if (std::string why = ServingProblem(srv, ca.cert_pem, sans, o, now); !why.empty()) {
    auto made = IssueServingCert(ca, sans, o.cert_validity_s, now);
    if (!made.ok()) return made.status();
    srv = *made;
    out.cert_issued = true;
    out.notes.push_back(where + ": new serving certificate (" + why + ")");
  }

  if (out.ca_generated || out.cert_issued) {
    json secret = found ? *existing : json{{"apiVersion", "v1"}, {"kind", "Secret"}};
    secret["metadata"]["name"] = o.secret_name;
    secret["metadata"]["namespace"] = o.namespace_name;
    const json labels = Labels();
    for (const auto& [k, v] : labels.items()) secret["metadata"]["labels"][k] = v;
    secret["type"] = "kubernetes.io/tls";
    secret["data"] = {{"tls.crt", Base64Encode(srv.cert_pem)},
                      {"tls.key", Base64Encode(srv.key_pem)},
                      {"ca.crt", Base64Encode(ca.cert_pem)},
                      {"ca.key", Base64Encode(ca.key_pem)}};
    secret.erase("stringData");
    // Update carries the resourceVersion read: a concurrent writer makes this a 409.
    auto written = found ? client.Update(SecretPath(o.namespace_name, o.secret_name), secret)
                         : client.Create(SecretPath(o.namespace_name), secret);
    if (!written.ok()) return written.status().WithPrefix(where);
    out.secret_written = true;
  }

  const std::string bundle = Base64Encode(ca.cert_pem + previous_ca);
  for (const auto& name : o.webhook_configs)
    FRACGPU_RETURN_IF_ERROR(PatchWebhook(client, name, bundle, &out));
  if (!o.signing_key_secret.empty()) FRACGPU_RETURN_IF_ERROR(EnsureSigningKey(client, o, &out));
  return out;
}

}  // namespace fracgpu::certs
