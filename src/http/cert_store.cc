#include "http/cert_store.h"

#include <openssl/err.h>
#include <openssl/pem.h>

namespace fracgpu::http {
namespace {

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return buf;
}

}  // namespace

Server::CertStore::CertStore(std::string cert_file, std::string key_file)
    : cert_file_(std::move(cert_file)), key_file_(std::move(key_file)) {}

Server::CertStore::~CertStore() {
  X509_free(cert_);
  if (chain_ != nullptr) sk_X509_pop_free(chain_, X509_free);
  EVP_PKEY_free(key_);
}

Server::CertStore::Stamp Server::CertStore::StampOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
          static_cast<int64_t>(st.st_size), static_cast<int64_t>(st.st_ino)};
}

Status Server::CertStore::Load() {
  Stamp cs = StampOf(cert_file_), ks = StampOf(key_file_);
  BIO* cb = BIO_new_file(cert_file_.c_str(), "r");
  if (cb == nullptr) return InvalidArgument("cannot read certificate file \"" + cert_file_ + "\"");
  X509* cert = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
  STACK_OF(X509)* chain = sk_X509_new_null();
  if (cert != nullptr) {
    while (X509* extra = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr))
      sk_X509_push(chain, extra);
  }
  BIO_free(cb);
  ERR_clear_error();
  if (cert == nullptr) {
    sk_X509_pop_free(chain, X509_free);
    return InvalidArgument("certificate file \"" + cert_file_ + "\" holds no PEM certificate");
  }
  BIO* kb = BIO_new_file(key_file_.c_str(), "r");
  if (kb == nullptr) {
    X509_free(cert);
    sk_X509_pop_free(chain, X509_free);
    return InvalidArgument("cannot read key file \"" + key_file_ + "\"");
  }
  EVP_PKEY* key = PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
  BIO_free(kb);
  if (key == nullptr || X509_check_private_key(cert, key) != 1) {
    std::string why =
        key == nullptr ? "holds no PEM private key" : "does not match the certificate";
    ERR_clear_error();
    X509_free(cert);
    sk_X509_pop_free(chain, X509_free);
    EVP_PKEY_free(key);
    return InvalidArgument("key file \"" + key_file_ + "\" " + why);
  }
  std::lock_guard<std::mutex> lock(mu_);
  X509_free(cert_);
  if (chain_ != nullptr) sk_X509_pop_free(chain_, X509_free);
  EVP_PKEY_free(key_);
  cert_ = cert;
  chain_ = chain;
  key_ = key;
  cert_stamp_ = cs;
  key_stamp_ = ks;
  ++loads_;
  return Status::Ok();
}

bool Server::CertStore::MaybeReload() {
  Stamp cs = StampOf(cert_file_), ks = StampOf(key_file_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cs == cert_stamp_ && ks == key_stamp_) return false;
  }
  // A failed reload (e.g. the key written before the certificate) keeps the old pair; the
  // next handshake tries again.
  return Load().ok();
}

bool Server::CertStore::Apply(SSL* ssl) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cert_ == nullptr || key_ == nullptr) return false;
  if (SSL_use_certificate(ssl, cert_) != 1 || SSL_use_PrivateKey(ssl, key_) != 1) {
    (void)OpenSslError();
    return false;
  }
  if (sk_X509_num(chain_) > 0) SSL_set1_chain(ssl, chain_);
  return true;
}

int64_t Server::CertStore::loads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loads_;
}

}  // namespace fracgpu::http
