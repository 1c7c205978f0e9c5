// X.509 helpers (pki.h) over OpenSSL 3. No library covers "make a CA and a serving cert" at
// a higher level than these calls, so this is the thin layer over EVP/X509 the task needs.
#include "certs/pki.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <memory>

namespace fracgpu::certs {
namespace {

template <auto fn>
struct Deleter {
  template <typename T>
  void operator()(T* p) const {
    fn(p);
  }
};
using BioPtr = std::unique_ptr<BIO, Deleter<BIO_free_all>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509_free>>;
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using ExtPtr = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION_free>>;
using StorePtr = std::unique_ptr<X509_STORE, Deleter<X509_STORE_free>>;
using StoreCtxPtr = std::unique_ptr<X509_STORE_CTX, Deleter<X509_STORE_CTX_free>>;
using BnPtr = std::unique_ptr<BIGNUM, Deleter<BN_free>>;
using NamesPtr = std::unique_ptr<GENERAL_NAMES, Deleter<GENERAL_NAMES_free>>;
using BasicPtr = std::unique_ptr<BASIC_CONSTRAINTS, Deleter<BASIC_CONSTRAINTS_free>>;

// The OpenSSL error queue as text (and cleared), for kInternal messages.
std::string OpenSslError(const std::string& what) {
  std::string out = what;
  unsigned long e;
  while ((e = ERR_get_error()) != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += ": ";
    out += buf;
  }
  return out;
}

X509Ptr ParseCert(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return nullptr;
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  return cert;
}

KeyPtr ParseKey(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return nullptr;
  KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  return key;
}

Result<std::string> ToPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1)
    return Internal(OpenSslError("writing certificate PEM"));
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(len));
}

Result<std::string> ToPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return Internal(OpenSslError("writing key PEM"));
  }
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(len));
}

Result<KeyPtr> NewKey() {
  KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return Internal(OpenSslError("generating a P-256 key"));
  return key;
}

bool IsIp(const std::string& s) {
  unsigned char buf[16];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

// Adds one v3 extension in OpenSSL's config syntax (e.g. "critical,CA:TRUE").
Status AddExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  ExtPtr ext(X509V3_EXT_nconf_nid(nullptr, &ctx, nid, value.c_str()));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1) {
    return Internal(OpenSslError(std::string("adding extension ") + OBJ_nid2sn(nid) + "=" + value));
  }
  return Status::Ok();
}

// A new certificate with a random 127-bit serial, the subject CN, the validity window and the
// public key set; the caller adds extensions and signs.
Result<X509Ptr> NewCert(const std::string& cn, EVP_PKEY* key, std::time_t not_before,
                        std::time_t not_after) {
  X509Ptr cert(X509_new());
  if (!cert) return Internal(OpenSslError("X509_new"));
  BnPtr serial(BN_new());
  // RFC 5280 §4.1.2.2: positive, at most 20 octets; 127 random bits keep it positive.
  if (!serial || BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr) {
    return Internal(OpenSslError("serial number"));
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (X509_set_version(cert.get(), 2) != 1 ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                 0) != 1 ||
      ASN1_TIME_set(X509_getm_notBefore(cert.get()), not_before) == nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(cert.get()), not_after) == nullptr ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return Internal(OpenSslError("filling the certificate"));
  }
  return cert;
}

std::time_t AsnTimeToUnix(const ASN1_TIME* t) {
  std::tm tm{};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return 0;
  return timegm(&tm);
}

}  // namespace

Status ValidateSan(const std::string& san) {
  if (IsIp(san)) return Status::Ok();
  auto bad = [&](const std::string& why) { return InvalidArgument("SAN \"" + san + "\" " + why); };
  if (san.empty()) return bad("is empty");
  if (san.size() > 253) return bad("is longer than 253 characters");
  std::string rest = san;
  if (rest.rfind("*.", 0) == 0) rest = rest.substr(2);
  size_t start = 0;
  while (true) {
    size_t dot = rest.find('.', start);
    std::string label =
        rest.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (label.empty()) return bad("has an empty label");
    if (label.size() > 63) return bad("has a label longer than 63 characters");
    if (label.front() == '-' || label.back() == '-')
      return bad("has a label starting or ending with '-'");
    for (char c : label) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
      if (!ok)
        return bad("is not an IP address or a lower-case DNS name (RFC 1123): bad character '" +
                   std::string(1, c) + "'");
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return Status::Ok();
}

Result<KeyPair> GenerateCa(const std::string& common_name, int64_t validity_s, std::time_t now) {
  if (common_name.empty()) return InvalidArgument("CA common name is empty");
  if (validity_s <= 0)
    return InvalidArgument("CA validity must be > 0 seconds, got " + std::to_string(validity_s));
  auto key = NewKey();
  if (!key.ok()) return key.status();
  auto cert = NewCert(common_name, key->get(), now - kBackdateSeconds, now + validity_s);
  if (!cert.ok()) return cert.status();
  X509* c = cert->get();
  if (X509_set_issuer_name(c, X509_get_subject_name(c)) != 1)
    return Internal(OpenSslError("issuer name"));
  FRACGPU_RETURN_IF_ERROR(AddExt(c, c, NID_basic_constraints, "critical,CA:TRUE"));
  FRACGPU_RETURN_IF_ERROR(AddExt(c, c, NID_key_usage, "critical,keyCertSign,cRLSign"));
  FRACGPU_RETURN_IF_ERROR(AddExt(c, c, NID_subject_key_identifier, "hash"));
  if (X509_sign(c, key->get(), EVP_sha256()) == 0) return Internal(OpenSslError("signing the CA"));
  auto cert_pem = ToPem(c);
  if (!cert_pem.ok()) return cert_pem.status();
  auto key_pem = ToPem(key->get());
  if (!key_pem.ok()) return key_pem.status();
  return KeyPair{*cert_pem, *key_pem};
}

Result<KeyPair> IssueServingCert(const KeyPair& ca, const std::vector<std::string>& sans,
                                 int64_t validity_s, std::time_t now) {
  if (sans.empty()) return InvalidArgument("a serving certificate needs at least one SAN");
  if (validity_s <= 0) {
    return InvalidArgument("certificate validity must be > 0 seconds, got " +
                           std::to_string(validity_s));
  }
  std::string san_value;
  for (const auto& s : sans) {
    FRACGPU_RETURN_IF_ERROR(ValidateSan(s));
    if (!san_value.empty()) san_value += ",";
    san_value += (IsIp(s) ? "IP:" : "DNS:") + s;
  }
  X509Ptr ca_cert = ParseCert(ca.cert_pem);
  KeyPtr ca_key = ParseKey(ca.key_pem);
  if (!ca_cert || !ca_key)
    return InvalidArgument("the CA certificate or key does not parse as PEM");
  auto key = NewKey();
  if (!key.ok()) return key.status();
  std::time_t not_after =
      std::min<std::time_t>(now + validity_s, AsnTimeToUnix(X509_get0_notAfter(ca_cert.get())));
  auto cert = NewCert(sans.front(), key->get(), now - kBackdateSeconds, not_after);
  if (!cert.ok()) return cert.status();
  X509* c = cert->get();
  if (X509_set_issuer_name(c, X509_get_subject_name(ca_cert.get())) != 1) {
    return Internal(OpenSslError("issuer name"));
  }
  FRACGPU_RETURN_IF_ERROR(AddExt(c, ca_cert.get(), NID_basic_constraints, "critical,CA:FALSE"));
  FRACGPU_RETURN_IF_ERROR(
      AddExt(c, ca_cert.get(), NID_key_usage, "critical,digitalSignature,keyEncipherment"));
  FRACGPU_RETURN_IF_ERROR(AddExt(c, ca_cert.get(), NID_ext_key_usage, "serverAuth"));
  FRACGPU_RETURN_IF_ERROR(AddExt(c, ca_cert.get(), NID_subject_alt_name, san_value));
  FRACGPU_RETURN_IF_ERROR(AddExt(c, ca_cert.get(), NID_authority_key_identifier, "keyid:always"));
  if (X509_sign(c, ca_key.get(), EVP_sha256()) == 0)
    return Internal(OpenSslError("signing the certificate"));
  auto cert_pem = ToPem(c);
  if (!cert_pem.ok()) return cert_pem.status();
  auto key_pem = ToPem(key->get());
  if (!key_pem.ok()) return key_pem.status();
  return KeyPair{*cert_pem, *key_pem};
}

Result<CertInfo> InspectCert(const std::string& cert_pem) {
  X509Ptr cert = ParseCert(cert_pem);
  if (!cert) return InvalidArgument("not a PEM certificate");
  CertInfo info;
  X509_NAME* subject = X509_get_subject_name(cert.get());
  int idx = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (idx >= 0) {
    ASN1_STRING* s = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, idx));
    info.common_name.assign(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                            static_cast<size_t>(ASN1_STRING_length(s)));
  }
  info.not_before = AsnTimeToUnix(X509_get0_notBefore(cert.get()));
  info.not_after = AsnTimeToUnix(X509_get0_notAfter(cert.get()));
  BasicPtr bc(static_cast<BASIC_CONSTRAINTS*>(
      X509_get_ext_d2i(cert.get(), NID_basic_constraints, nullptr, nullptr)));
  info.is_ca = bc && bc->ca != 0;
  NamesPtr names(static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr)));
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names.get(), i);
    if (n->type == GEN_DNS) {
      info.dns_names.emplace_back(
          reinterpret_cast<const char*>(ASN1_STRING_get0_data(n->d.dNSName)),
          static_cast<size_t>(ASN1_STRING_length(n->d.dNSName)));
    } else if (n->type == GEN_IPADD) {
      int len = ASN1_STRING_length(n->d.iPAddress);
      char text[INET6_ADDRSTRLEN] = {0};
      const unsigned char* bytes = ASN1_STRING_get0_data(n->d.iPAddress);
      if ((len == 4 && inet_ntop(AF_INET, bytes, text, sizeof text)) ||
          (len == 16 && inet_ntop(AF_INET6, bytes, text, sizeof text))) {
        info.ip_addresses.emplace_back(text);
      }
    }
  }
  ERR_clear_error();
  return info;
}

Status VerifyIssuedBy(const std::string& cert_pem, const std::string& ca_pem, std::time_t now) {
  X509Ptr cert = ParseCert(cert_pem);
  X509Ptr ca = ParseCert(ca_pem);
  if (!cert) return InvalidArgument("the certificate is not PEM");
  if (!ca) return InvalidArgument("the CA certificate is not PEM");
  StorePtr store(X509_STORE_new());
  StoreCtxPtr ctx(X509_STORE_CTX_new());
  if (!store || !ctx || X509_STORE_add_cert(store.get(), ca.get()) != 1 ||
      X509_STORE_CTX_init(ctx.get(), store.get(), cert.get(), nullptr) != 1) {
    return Internal(OpenSslError("setting up verification"));
  }
  X509_STORE_CTX_set_time(ctx.get(), 0, now);
  X509_STORE_CTX_set_purpose(ctx.get(), X509_PURPOSE_SSL_SERVER);
  int ok = X509_verify_cert(ctx.get());
  ERR_clear_error();
  if (ok != 1) {
    return PermissionDenied(std::string("certificate does not verify against the CA: ") +
                            X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get())));
  }
  return Status::Ok();
}

Status KeyMatchesCert(const std::string& cert_pem, const std::string& key_pem) {
  X509Ptr cert = ParseCert(cert_pem);
  KeyPtr key = ParseKey(key_pem);
  if (!cert) return InvalidArgument("the certificate is not PEM");
  if (!key) return InvalidArgument("the private key is not PEM");
  int r = X509_check_private_key(cert.get(), key.get());
  ERR_clear_error();
  if (r != 1) return InvalidArgument("the private key does not belong to the certificate");
  return Status::Ok();
}

std::string Base64Encode(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

Result<std::string> Base64Decode(const std::string& text) {
  if (text.size() % 4 != 0)
    return InvalidArgument("base64 length " + std::to_string(text.size()) +
                           " is not a multiple of 4");
  for (char c : text) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '+' || c == '/' || c == '=';
    if (!ok) return InvalidArgument("base64 has a bad character '" + std::string(1, c) + "'");
  }
  std::string out(3 * (text.size() / 4) + 1, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  if (n < 0) return InvalidArgument("not valid base64");
  // EVP_DecodeBlock counts padding as zero bytes: drop one per '='.
  size_t pad = 0;
  if (!text.empty() && text.back() == '=') ++pad;
  if (text.size() > 1 && text[text.size() - 2] == '=') ++pad;
  if (text.find('=') != std::string::npos && text.find('=') < text.size() - pad) {
    return InvalidArgument("base64 padding in the middle");
  }
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

Result<std::string> RandomBytes(size_t n) {
  std::string out(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1) {
    return Internal(OpenSslError("RAND_bytes"));
  }
  return out;
}

}  // namespace fracgpu::certs
