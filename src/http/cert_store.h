#pragma once
// The serving certificate and key, reloaded when their files change (http/server.h).

#include <openssl/ssl.h>
#include <sys/stat.h>

#include <cstdint>
#include <mutex>
#include <string>

#include "base/status.h"
#include "http/server.h"

namespace fracgpu::http {

/// Holds the current X509 certificate chain head and private key loaded from PEM files.
/// MaybeReload() re-reads them when either file's mtime, size or inode changed; a failed
/// reload (half-written files during a rotation) keeps the previous pair. Thread-safe.
class Server::CertStore {
 public:
  CertStore(std::string cert_file, std::string key_file);
  ~CertStore();
  /// Loads both files; errors name the file (kInvalidArgument).
  Status Load();
  /// Reloads when the files changed; returns true when a new pair is in use.
  bool MaybeReload();
  /// Installs the current pair on a connection (called from the TLS certificate callback).
  bool Apply(SSL* ssl);
  int64_t loads() const;

 private:
  struct Stamp {
    int64_t mtime_ns = 0, size = 0, ino = 0;
    bool operator==(const Stamp&) const = default;
  };
  static Stamp StampOf(const std::string& path);

  std::string cert_file_, key_file_;
  mutable std::mutex mu_;
  X509* cert_ = nullptr;
  STACK_OF(X509) * chain_ = nullptr;
  EVP_PKEY* key_ = nullptr;
  Stamp cert_stamp_, key_stamp_;
  int64_t loads_ = 0;
};

}  // namespace fracgpu::http
