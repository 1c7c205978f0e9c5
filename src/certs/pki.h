#pragma once
// X.509 helpers of `fracgpu certs` over OpenSSL 3's EVP/X509 APIs: a self-signed CA, a serving
// certificate signed by it with subjectAltNames, and read-back checks (SANs, validity window,
// chain verification, key match). Keys are ECDSA P-256 (RFC 5480; accepted by Go's TLS stack in
// kube-apiserver and kube-scheduler, and by cpp-httplib/OpenSSL in `fracgpu scheduler`).
//
// Certificates are X.509 v3 (RFC 5280): the CA has basicConstraints CA:TRUE and keyUsage
// keyCertSign+cRLSign; the serving certificate has CA:FALSE, keyUsage digitalSignature+
// keyEncipherment, extendedKeyUsage serverAuth and the SANs (Kubernetes webhooks and Go ≥ 1.15
// ignore the subject CN: the SANs must name the host the API server dials).
//
// Time is a parameter (unix seconds) so tests can place certificates anywhere in their life.
// All functions are thread-safe (no shared state).

#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

#include "base/status.h"

namespace fracgpu::certs {

/// A certificate and its private key, both PEM ("CERTIFICATE" and "PRIVATE KEY" blocks).
struct KeyPair {
  std::string cert_pem;
  std::string key_pem;
};

/// What InspectCert reads back from a certificate.
struct CertInfo {
  std::string common_name;                ///< subject CN ("" when absent)
  std::time_t not_before = 0;             ///< unix seconds
  std::time_t not_after = 0;              ///< unix seconds
  bool is_ca = false;                     ///< basicConstraints CA:TRUE
  std::vector<std::string> dns_names;     ///< subjectAltName dNSName entries, in order
  std::vector<std::string> ip_addresses;  ///< subjectAltName iPAddress entries, text form
};

/// How far before `now` a new certificate's notBefore is set (tolerates clock skew between
/// this host and the API server), seconds.
inline constexpr int64_t kBackdateSeconds = 300;

/// Generates a self-signed CA: a new P-256 key, subject CN `common_name`, valid from
/// `now - kBackdateSeconds` for `validity_s` seconds after `now`.
/// Errors: kInvalidArgument for an empty name or validity_s <= 0; kInternal when OpenSSL fails
/// (message carries OpenSSL's error string).
Result<KeyPair> GenerateCa(const std::string& common_name, int64_t validity_s, std::time_t now);

/// Issues a serving certificate signed by `ca`: a new P-256 key, subject CN = the first SAN,
/// subjectAltName = `sans` (an entry that parses as an IPv4/IPv6 address becomes an iPAddress,
/// anything else a dNSName), valid from `now - kBackdateSeconds` for `validity_s` seconds after
/// `now` (never past the CA's notAfter: it is clamped to it).
/// Errors: kInvalidArgument for no SANs, a SAN that is neither an IP nor a DNS name
/// (ValidateSan), validity_s <= 0, or a CA that does not parse; kInternal on OpenSSL failure.
Result<KeyPair> IssueServingCert(const KeyPair& ca, const std::vector<std::string>& sans,
                                 int64_t validity_s, std::time_t now);

/// Checks one SAN: an IPv4/IPv6 literal, or a DNS name of RFC 1123 labels (letters, digits,
/// '-', not starting or ending with '-', 1–63 characters each, 253 in all, lower case),
/// optionally with a leading "*." wildcard label. Errors: kInvalidArgument naming the value.
Status ValidateSan(const std::string& san);

/// Parses the first certificate of `cert_pem` and returns its facts.
/// Errors: kInvalidArgument when it is not a PEM certificate.
Result<CertInfo> InspectCert(const std::string& cert_pem);

/// Checks that `cert_pem` chains to `ca_pem` (the only trust anchor), is valid at `now`, and is
/// fit for TLS server use (X509_verify_cert, purpose sslserver).
/// Errors: kInvalidArgument when either does not parse; kPermissionDenied with OpenSSL's
/// verification error (e.g. "certificate has expired", "unable to get local issuer
/// certificate") when it does not verify.
Status VerifyIssuedBy(const std::string& cert_pem, const std::string& ca_pem, std::time_t now);

/// Checks that `key_pem` is the private key of `cert_pem`.
/// Errors: kInvalidArgument when either does not parse or they do not match.
Status KeyMatchesCert(const std::string& cert_pem, const std::string& key_pem);

/// Standard padded base64 (RFC 4648 §4) of `bytes`, no line breaks (Kubernetes Secret `data`
/// and webhook `caBundle` encoding).
std::string Base64Encode(const std::string& bytes);

/// Decodes standard padded base64. Errors: kInvalidArgument when `text` is not valid base64.
Result<std::string> Base64Decode(const std::string& text);

/// `n` bytes from OpenSSL's CSPRNG (RAND_bytes). Errors: kInternal when the RNG fails.
Result<std::string> RandomBytes(size_t n);

}  // namespace fracgpu::certs
