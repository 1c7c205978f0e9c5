#include "cli/kube_scheduler_manifest.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string_view>

namespace fracgpu::cli {
namespace {

constexpr size_t kMaxInput = 64 * 1024;
constexpr std::string_view kImagePrefix = "image: registry.k8s.io/kube-scheduler:";

const char kForms[] =
    " (want v1.31.2, 1.31, a vendor build like v1.30.4-eks-…, or the JSON of "
    "`kubectl get --raw /version`)";

std::string Shown(std::string_view s) {
  std::string out(s.substr(0, 64));
  for (char& c : out) {
    if (c < 0x20 || c == 0x7f) c = '?';
  }
  return "\"" + out + (s.size() > 64 ? "…\"" : "\"");
}

// Reads a decimal number of 1..4 digits at `s[*i]`.
bool ReadNumber(std::string_view s, size_t* i, int32_t* out) {
  size_t start = *i;
  int32_t v = 0;
  while (*i < s.size() && s[*i] >= '0' && s[*i] <= '9' && *i - start < 4) {
    v = v * 10 + (s[*i] - '0');
    ++*i;
  }
  if (*i == start || (*i < s.size() && s[*i] >= '0' && s[*i] <= '9')) return false;
  *out = v;
  return true;
}

Result<KubeVersion> ParsePlain(std::string_view s, const std::string& shown) {
  while (!s.empty() &&
         (s.front() == ' ' || s.front() == '\n' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\n' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  if (!s.empty() && s.front() == 'v') s.remove_prefix(1);
  KubeVersion v;
  size_t i = 0;
  if (!ReadNumber(s, &i, &v.major) || i >= s.size() || s[i] != '.') {
    return InvalidArgument("server version " + shown + " is not a Kubernetes version" + kForms);
  }
  ++i;
  if (!ReadNumber(s, &i, &v.minor)) {
    return InvalidArgument("server version " + shown + " is not a Kubernetes version" + kForms);
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!ReadNumber(s, &i, &v.patch)) {
      return InvalidArgument("server version " + shown + " is not a Kubernetes version" + kForms);
    }
  }
  // A vendor or pre-release suffix: "-eks-…", "+k3s1", "-gke.100".
  if (i < s.size() && s[i] != '-' && s[i] != '+') {
    return InvalidArgument("server version " + shown + " is not a Kubernetes version" + kForms);
  }
  return v;
}

}  // namespace

Result<KubeVersion> ParseServerVersion(const std::string& text) {
  if (text.size() > kMaxInput) return InvalidArgument("server version input is over 64 KiB");
  const std::string shown = Shown(text);
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object())
      return InvalidArgument("server version " + shown + " is not valid JSON" + kForms);
    const nlohmann::json* src = &j;
    if (auto sv = j.find("serverVersion"); sv != j.end() && sv->is_object()) src = &*sv;
    auto git = src->find("gitVersion");
    if (git == src->end() || !git->is_string()) {
      return InvalidArgument(
          "server version JSON has no gitVersion (nor serverVersion.gitVersion)" +
          std::string(kForms));
    }
    const std::string& g = git->get_ref<const std::string&>();
    return ParsePlain(g, Shown(g));
  }
  return ParsePlain(text, shown);
}

std::string KubeSchedulerImage(const KubeVersion& v) {
  return "registry.k8s.io/kube-scheduler:v" + std::to_string(v.major) + "." +
         std::to_string(v.minor) + "." + std::to_string(v.patch < 0 ? 0 : v.patch);
}

Result<std::string> KubeSchedulerManifest(const std::string& manifest, const KubeVersion& v) {
  if (v.major != 1 || v.minor < kOldestSupportedMinor) {
    return InvalidArgument(
        "Kubernetes " + std::to_string(v.major) + "." + std::to_string(v.minor) +
        " is not supported: the kube-scheduler config is kubescheduler.config.k8s.io/v1, "
        "which needs 1." +
        std::to_string(kOldestSupportedMinor) + " or newer");
  }
  size_t at = std::string::npos;
  size_t count = 0;
  for (size_t pos = manifest.find(kImagePrefix); pos != std::string::npos;
       pos = manifest.find(kImagePrefix, pos + 1)) {
    at = pos;
    ++count;
  }
  if (count != 1) {
    return Internal("the kube-scheduler manifest must have exactly one '" +
                    std::string(kImagePrefix) + "' line, found " + std::to_string(count));
  }
  size_t end = manifest.find('\n', at);
  if (end == std::string::npos) end = manifest.size();
  std::string out = manifest;
  out.replace(at, end - at, "image: " + KubeSchedulerImage(v));
  return out;
}

const std::string& BuiltInKubeSchedulerManifest() {
  static const std::string text =
#include "kube_scheduler_yaml.inc"
      ;
  return text;
}

/// Registers `fracgpu kube-scheduler-manifest` (called from main.cc).
void RegisterKubeSchedulerManifestCommand(CLI::App& app) {
  auto version = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand(
      "kube-scheduler-manifest",
      "Print deploy/kube-scheduler.yaml with the kube-scheduler image of your cluster's version");
  cmd->add_option("--server-version", *version,
                  "the API server's version: v1.31.2, 1.31, or '-' to read the JSON of "
                  "`kubectl get --raw /version` from stdin")
      ->required();
  cmd->footer(
      "Example:\n  kubectl get --raw /version | fracgpu kube-scheduler-manifest --server-version - "
      "| kubectl apply -f -");
  cmd->callback([version] {
    std::string text = *version;
    if (text == "-") {
      text.clear();
      char buf[4096];
      size_t n = 0;
      while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0 && text.size() <= kMaxInput)
        text.append(buf, n);
    }
    Result<KubeVersion> v = ParseServerVersion(text);
    if (!v.ok()) {
      std::fprintf(stderr, "fracgpu kube-scheduler-manifest: %s\n", v.status().message().c_str());
      throw CLI::RuntimeError(2);
    }
    Result<std::string> m = KubeSchedulerManifest(BuiltInKubeSchedulerManifest(), *v);
    if (!m.ok()) {
      std::fprintf(stderr, "fracgpu kube-scheduler-manifest: %s\n", m.status().message().c_str());
      throw CLI::RuntimeError(2);
    }
    if (v->minor < kOldestTestedMinor || v->minor > kNewestTestedMinor) {
      std::fprintf(
          stderr,
          "fracgpu kube-scheduler-manifest: warning: tested with Kubernetes 1.%d through 1.%d; "
          "1.%d is untested\n",
          kOldestTestedMinor, kNewestTestedMinor, v->minor);
    }
    std::fwrite(m->data(), 1, m->size(), stdout);
  });
}

}  // namespace fracgpu::cli
