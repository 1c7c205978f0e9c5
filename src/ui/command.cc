// `fracgpu ui`: the notebook form and the GPU dashboard (docs/ui.md).

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "base/file.h"
#include "base/host_port.h"
#include "base/signals.h"
#include "base/strings.h"
#include "core/request.h"
#include "http/server.h"
#include "k8s/client.h"
#include "k8s/config.h"
#include "ui/cluster.h"
#include "ui/service.h"

#ifndef FRACGPU_WEB_SOURCE_DIR
#define FRACGPU_WEB_SOURCE_DIR ""
#endif

namespace fracgpu::cli {
namespace {

struct Flags {
  std::string listen = "0.0.0.0:8080";
  std::string cert_file, key_file, kubeconfig;
  std::string web_dir;
  std::string user_header = "kubeflow-userid";
  std::string groups_header;
  std::string user_prefix;
  std::string gateway_secret_file;
  std::string gateway_secret_header = "x-fracgpu-gateway-secret";
  std::vector<std::string> gateway_client_names;
  std::string client_ca_file;
  bool trust_user_header = false;
  std::vector<std::string> images = {"kubeflownotebookswg/jupyter-scipy:v1.8.0",
                                     "kubeflownotebookswg/jupyter-pytorch-cuda-full:v1.8.0",
                                     "kubeflownotebookswg/jupyter-tensorflow-cuda-full:v1.8.0"};
  std::string gpu_policy = "spread";
  int cache_ms = 2000;
  bool dashboard_only = false;
  bool dra_mode = false;
};

// The web folder when --web-dir is not given: next to an installed binary
// (<prefix>/share/fracgpu/web), or the source tree's web/ for a build-tree binary.
std::string DefaultWebDir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  std::vector<std::filesystem::path> candidates;
  if (!ec) {
    auto dir = exe.parent_path();
    candidates = {dir / "../share/fracgpu/web", dir / "web"};
  }
  candidates.emplace_back(FRACGPU_WEB_SOURCE_DIR);
  for (const auto& c : candidates) {
    if (!c.empty() && std::filesystem::exists(c / "index.html", ec))
      return std::filesystem::weakly_canonical(c, ec).string();
  }
  return "";
}

// Every flag is checked first, before the cluster is read (usage errors: CLI::ValidationError,
// exit 2 as `fracgpu ui: <message>`, src/cli/usage.h).
int Run(const Flags& f) {
  auto listen = base::ParseHostPort(f.listen);
  if (!listen.ok()) throw CLI::ValidationError("--listen " + listen.status().message());
  auto policy = core::ParseGpuPolicy(f.gpu_policy);
  if (!policy.ok()) {
    throw CLI::ValidationError("--gpu-scheduler-policy: " + policy.status().message());
  }
  ui::UiOptions options;
  options.user_header = f.user_header;
  options.groups_header = f.groups_header;
  options.user_prefix = f.user_prefix;
  // Whom the user header is trusted from (docs/ui.md "Identity"): the gateway's shared secret,
  // its client certificate, or (loopback or --trust-user-header only) anyone.
  if (!f.gateway_secret_file.empty()) {
    auto secret = base::ReadFile(f.gateway_secret_file, size_t{4} << 10);
    if (!secret.ok()) {
      throw CLI::ValidationError("--gateway-secret-file: " + secret.status().message());
    }
    options.gateway_secret = std::string(base::Trim(*secret));
    if (options.gateway_secret.size() < 16) {
      throw CLI::ValidationError(
          "--gateway-secret-file " + f.gateway_secret_file + ": the secret is " +
          std::to_string(options.gateway_secret.size()) + " bytes; at least 16 are needed");
    }
  }
  options.gateway_secret_header = f.gateway_secret_header;
  options.gateway_client_names = f.gateway_client_names;
  const std::string& host = listen->host;
  const bool loopback = host == "127.0.0.1" || host == "::1" || host == "localhost";
  options.trust_user_header = f.trust_user_header || loopback;
  if (!f.dashboard_only && options.gateway_secret.empty() && options.gateway_client_names.empty() &&
      !options.trust_user_header) {
    throw CLI::ValidationError(
        "--listen " + f.listen + ": the " + f.user_header +
        " header would be trusted from anyone who reaches the port; give --gateway-secret-file "
        "(the secret the gateway sets in " +
        f.gateway_secret_header +
        "), --gateway-client-names with --client-ca-file, or --trust-user-header");
  }
  if (!f.gateway_client_names.empty() && f.client_ca_file.empty()) {
    throw CLI::ValidationError("--gateway-client-names needs --client-ca-file (and HTTPS)");
  }
  if (f.cache_ms < 0) {
    throw CLI::ValidationError("--cluster-cache-ms: " + std::to_string(f.cache_ms) +
                               " is not a number of milliseconds >= 0");
  }

  base::StopSignal stop;
  base::SignalWatcher signals(&stop);  // before any other thread
  auto client = k8s::Connect(f.kubeconfig);
  if (!client.ok()) {
    std::fprintf(stderr, "fracgpu ui: %s\n", client.status().ToString().c_str());
    return 1;
  }
  ui::ClusterSource cluster(client->get(), std::chrono::milliseconds(f.cache_ms), "nvidia.com/gpu",
                            f.dra_mode);
  options.images = f.images;
  options.web_dir = f.web_dir.empty() ? DefaultWebDir() : f.web_dir;
  options.fit.default_gpu_policy = *policy;
  options.dashboard_only = f.dashboard_only;
  options.dra_mode = f.dra_mode;
  if (!f.dashboard_only) {
    if (Status crd = ui::CheckNotebookCrd(*client->get()); !crd.ok())
      spdlog::warn("{}", crd.message());
  }
  if (options.web_dir.empty())
    spdlog::warn("no web folder found; serving the JSON API only (use --web-dir)");
  ui::UiService service(client->get(), &cluster, options);
  http::ServerOptions server_options;
  server_options.host = listen->host;
  server_options.port = listen->port;
  server_options.cert_file = f.cert_file;
  server_options.key_file = f.key_file;
  server_options.client_ca_file = f.client_ca_file;
  http::Server server(server_options);
  service.Register(server);
  if (Status st = server.Start(); !st.ok()) {
    std::fprintf(stderr, "fracgpu ui: %s\n", st.message().c_str());
    return 1;
  }
  spdlog::info("fracgpu ui on {} (web folder {})", server.BaseUrl(), options.web_dir);
  while (!stop.WaitFor(std::chrono::hours(1))) {
  }
  server.Stop();
  return 0;
}

}  // namespace

void RegisterUiCommand(CLI::App& app) {
  auto f = std::make_shared<Flags>();
  auto* cmd =
      app.add_subcommand("ui", "Notebook form with fractional GPUs and the cluster GPU dashboard");
  CLI::Option* listen =
      cmd->add_option("--listen", f->listen, "host:port to listen on")->capture_default_str();
  // The old spelling: accepted, with a deprecation line (docs/development.md "The command line").
  CLI::Option* http_bind = cmd->add_option("--http-bind", f->listen)->group("");
  cmd->add_option("--cert-file", f->cert_file, "PEM serving certificate (HTTPS when given)");
  cmd->add_option("--key-file", f->key_file, "PEM serving key");
  cmd->add_option("--kubeconfig", f->kubeconfig,
                  "kubeconfig (default: in-cluster, $KUBECONFIG, ~/.kube/config)");
  cmd->add_option(
      "--web-dir", f->web_dir,
      "folder with index.html (default: found next to the binary or in the source tree)");
  cmd->add_option("--user-header", f->user_header, "header with the caller's user name")
      ->capture_default_str();
  cmd->add_option("--groups-header", f->groups_header,
                  "header with the caller's groups, comma-separated");
  cmd->add_option("--gateway-secret-file", f->gateway_secret_file,
                  "file with the shared secret the gateway sets on every request it forwards; "
                  "the user header is trusted only with it (401 otherwise)");
  cmd->add_option("--gateway-secret-header", f->gateway_secret_header,
                  "header carrying the gateway's shared secret")
      ->capture_default_str();
  cmd->add_option("--gateway-client-names", f->gateway_client_names,
                  "client certificate names of the gateway (mTLS, with --client-ca-file)");
  cmd->add_option("--client-ca-file", f->client_ca_file,
                  "PEM CA of the gateway's client certificate (HTTPS)");
  cmd->add_flag("--trust-user-header", f->trust_user_header,
                "trust the user header from anyone (implied on a loopback --listen)");
  cmd->add_option("--user-prefix", f->user_prefix,
                  "prefix added to the user name in SubjectAccessReviews");
  cmd->add_option("--images", f->images, "images the form offers")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--gpu-scheduler-policy", f->gpu_policy, "default GPU policy for the fit preview")
      ->capture_default_str();
  cmd->add_flag(
      "--dashboard-only", f->dashboard_only,
      "serve the GPU dashboard only (no Kubeflow: no Notebook CRD, no auth gateway needed)");
  cmd->add_flag("--dra-mode", f->dra_mode,
                "the cluster runs fracgpu dra-driver and the webhook's --dra-mode: dashboard and "
                "fit preview from "
                "ResourceSlices and ResourceClaims (resource.k8s.io/v1), placed by "
                "kube-scheduler's first fit "
                "(docs/ui.md)");
  cmd->add_option("--cluster-cache-ms", f->cache_ms,
                  "reuse a cluster listing for this long, milliseconds")
      ->capture_default_str();
  cmd->callback([f, listen, http_bind] {
    if (http_bind->count() > 0) {
      if (listen->count() > 0)
        throw CLI::ValidationError("--http-bind is --listen's old name: give one");
      std::fputs("fracgpu ui: --http-bind is deprecated; use --listen\n", stderr);
    }
    int rc = Run(*f);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace fracgpu::cli
