#include "k8s/config.h"

#include <openssl/evp.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <optional>

#include "base/file.h"
#include "base/strings.h"

namespace fracgpu::k8s {
namespace {

// Standard base64 (kubeconfig *-data fields) through OpenSSL's decoder.
Result<std::string> Base64Decode(const std::string& field, const std::string& in) {
  std::string clean;
  for (char c : in) {
    if (c != '\n' && c != '\r' && c != ' ') clean.push_back(c);
  }
  if (clean.size() % 4 != 0) return InvalidArgument(field + " is not base64");
  std::string out(clean.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(clean.data()),
                          static_cast<int>(clean.size()));
  if (n < 0) return InvalidArgument(field + " is not base64");
  size_t pad = 0;
  if (!clean.empty() && clean.back() == '=') ++pad;
  if (clean.size() > 1 && clean[clean.size() - 2] == '=') ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

std::string Resolve(const std::string& base_dir, const std::string& p) {
  if (p.empty() || p.front() == '/' || base_dir.empty()) return p;
  return (std::filesystem::path(base_dir) / p).string();
}

// The entry of a kubeconfig list (clusters, users, contexts) whose `name` is `name`.
std::optional<YAML::Node> FindNamed(const YAML::Node& list, const std::string& name) {
  if (!list.IsDefined() || !list.IsSequence()) return std::nullopt;
  for (const auto& item : list) {
    if (item.IsMap() && item["name"] && item["name"].IsScalar() &&
        item["name"].as<std::string>() == name) {
      return item;
    }
  }
  return std::nullopt;
}

std::string Str(const YAML::Node& n, const char* key) {
  if (!n.IsDefined() || !n.IsMap() || !n[key] || !n[key].IsScalar()) return "";
  return n[key].as<std::string>();
}

}  // namespace

Result<Config> InClusterConfig(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || port == nullptr || *host == '\0' || *port == '\0') {
    return NotFound(
        "KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT are not set (not in a cluster)");
  }
  Config config;
  std::string h = host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";
  config.server = "https://" + h + ":" + port;
  config.token_file = sa_dir + "/token";
  auto token = base::ReadFile(config.token_file, kMaxConfigFileBytes);
  if (!token.ok()) return token.status();
  config.token = std::string(base::TrimEnd(*token, kLineEnd));
  config.ca_file = sa_dir + "/ca.crt";
  auto ns = base::ReadFile(sa_dir + "/namespace", kMaxConfigFileBytes);
  if (ns.ok() && !base::TrimEnd(*ns, kLineEnd).empty())
    config.default_namespace = std::string(base::TrimEnd(*ns, kLineEnd));
  return config;
}

Result<Config> ParseKubeconfig(const std::string& text, const std::string& base_dir,
                               const std::string& context) {
  YAML::Node loaded;
  try {
    loaded = YAML::Load(text);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("kubeconfig is not valid YAML: ") + e.what());
  }
  const YAML::Node& root = loaded;  // const: operator[] must not insert keys
  if (!root.IsMap()) return InvalidArgument("kubeconfig: top level is not a map");
  try {
    std::string ctx_name = context.empty() ? Str(root, "current-context") : context;
    if (ctx_name.empty())
      return InvalidArgument("kubeconfig: no current-context and no context given");
    auto ctx = FindNamed(root["contexts"], ctx_name);
    if (!ctx) return InvalidArgument("kubeconfig: context \"" + ctx_name + "\" not found");
    const YAML::Node c = (*ctx)["context"];
    std::string cluster_name = Str(c, "cluster");
    std::string user_name = Str(c, "user");
    auto cluster = FindNamed(root["clusters"], cluster_name);
    if (!cluster) return InvalidArgument("kubeconfig: cluster \"" + cluster_name + "\" not found");
    const YAML::Node cl = (*cluster)["cluster"];
    Config config;
    config.server = Str(cl, "server");
    if (config.server.empty()) {
      return InvalidArgument("kubeconfig: cluster \"" + cluster_name + "\" has no server");
    }
    while (!config.server.empty() && config.server.back() == '/') config.server.pop_back();
    config.ca_file = Resolve(base_dir, Str(cl, "certificate-authority"));
    if (auto d = Str(cl, "certificate-authority-data"); !d.empty()) {
      auto pem = Base64Decode("certificate-authority-data", d);
      if (!pem.ok()) return pem.status();
      config.ca_data = *pem;
    }
    config.insecure_skip_tls_verify = Str(cl, "insecure-skip-tls-verify") == "true";
    if (!user_name.empty()) {
      auto user = FindNamed(root["users"], user_name);
      if (!user) return InvalidArgument("kubeconfig: user \"" + user_name + "\" not found");
      const YAML::Node u = (*user)["user"];
      config.token = Str(u, "token");
      config.token_file = Resolve(base_dir, Str(u, "tokenFile"));
      config.client_cert_file = Resolve(base_dir, Str(u, "client-certificate"));
      config.client_key_file = Resolve(base_dir, Str(u, "client-key"));
      if (auto d = Str(u, "client-certificate-data"); !d.empty()) {
        auto pem = Base64Decode("client-certificate-data", d);
        if (!pem.ok()) return pem.status();
        config.client_cert_data = *pem;
      }
      if (auto d = Str(u, "client-key-data"); !d.empty()) {
        auto pem = Base64Decode("client-key-data", d);
        if (!pem.ok()) return pem.status();
        config.client_key_data = *pem;
      }
    }
    if (auto ns = Str(c, "namespace"); !ns.empty()) config.default_namespace = ns;
    return config;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("kubeconfig: ") + e.what());
  }
}

Result<Config> KubeconfigConfig(const std::string& path, const std::string& context) {
  auto text = base::ReadFile(path, kMaxConfigFileBytes);
  if (!text.ok()) return text.status();
  return ParseKubeconfig(*text, std::filesystem::path(path).parent_path().string(), context);
}

Result<Config> LoadConfig(const std::string& kubeconfig) {
  if (!kubeconfig.empty()) return KubeconfigConfig(kubeconfig);
  if (const char* h = std::getenv("KUBERNETES_SERVICE_HOST"); h != nullptr && *h != '\0') {
    return InClusterConfig();
  }
  if (const char* k = std::getenv("KUBECONFIG"); k != nullptr && *k != '\0') {
    std::string first = k;
    first = first.substr(0, first.find(':'));
    return KubeconfigConfig(first);
  }
  if (const char* home = std::getenv("HOME"); home != nullptr) {
    return KubeconfigConfig(std::string(home) + "/.kube/config");
  }
  return NotFound("no kubeconfig given, not in a cluster, and $HOME is not set");
}

}  // namespace fracgpu::k8s
