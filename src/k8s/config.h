#pragma once
// Where the API server is and how to authenticate: in-cluster service-account credentials
// (docs/design/wire-apis.md §6.1) or a kubeconfig file (kubectl's format, `clusters` / `users` /
// `contexts` / `current-context`).

#include <cstddef>
#include <string>
#include <string_view>

#include "base/status.h"

namespace fracgpu::k8s {

/// Connection settings of a Client. Every PEM field is either a file path or inline PEM bytes.
struct Config {
  std::string server;      ///< "https://10.0.0.1:443" or "http://127.0.0.1:8080"
  std::string token;       ///< bearer token (static)
  std::string token_file;  ///< bearer token re-read from this file (projected tokens rotate)
  std::string ca_file;     ///< PEM CA bundle path
  std::string ca_data;     ///< PEM CA bundle bytes (kubeconfig certificate-authority-data, decoded)
  std::string client_cert_file;  ///< PEM client certificate path
  std::string client_cert_data;  ///< PEM client certificate bytes
  std::string client_key_file;   ///< PEM client key path
  std::string client_key_data;   ///< PEM client key bytes
  bool insecure_skip_tls_verify = false;
  std::string default_namespace = "default";  ///< the service account's or the context's namespace
  double timeout_s = 10.0;         ///< per-request timeout, seconds (watches use their own)
  double connect_timeout_s = 5.0;  ///< TCP + TLS connect timeout, seconds
};

/// The in-cluster configuration: `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`
/// (IPv6 host bracketed), token and CA under `sa_dir` (default
/// /var/run/secrets/kubernetes.io/serviceaccount). Errors: kNotFound when the environment
/// variables or the token file are missing.
Result<Config> InClusterConfig(
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

/// Reads a kubeconfig file and resolves `context` (empty = current-context). Supports
/// server, certificate-authority(-data), insecure-skip-tls-verify, token, tokenFile,
/// client-certificate(-data), client-key(-data) and the context's namespace; relative file
/// paths are resolved against the kubeconfig's folder. Errors: kNotFound (file), kInvalidArgument
/// naming the missing or malformed entry.
Result<Config> KubeconfigConfig(const std::string& path, const std::string& context = "");

/// Parses kubeconfig text (see KubeconfigConfig); `base_dir` resolves relative paths.
Result<Config> ParseKubeconfig(const std::string& text, const std::string& base_dir,
                               const std::string& context = "");

/// The configuration a daemon should use: `kubeconfig` when non-empty, else in-cluster when
/// KUBERNETES_SERVICE_HOST is set, else $KUBECONFIG, else ~/.kube/config.
Result<Config> LoadConfig(const std::string& kubeconfig = "");

/// The most bytes read from a kubeconfig, service-account token or namespace file (16 MiB: real
/// ones hold a few KiB; the bound keeps a wrong path such as /dev/zero from exhausting memory).
inline constexpr size_t kMaxConfigFileBytes = size_t{16} << 20;

/// What a token or namespace file's end may carry that is not part of the value: newlines,
/// carriage returns and spaces (trimmed with base::TrimEnd).
inline constexpr std::string_view kLineEnd = "\n\r ";

}  // namespace fracgpu::k8s
