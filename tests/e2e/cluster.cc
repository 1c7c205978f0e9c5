#include "cluster.h"

#include <httplib.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "k8s/objects.h"
#include "manifest.h"
#include "webhook_caller.h"

namespace fracgpu::e2e {
namespace {

using nlohmann::json;
constexpr const char* kSchedulerToken = "token-fracgpu-scheduler";
constexpr const char* kDevicePluginToken = "token-fracgpu-device-plugin";
constexpr const char* kKubeSchedulerToken = "token-kube-scheduler";
constexpr const char* kSigningKey = "e2e-signing-key-0123456789abcdef";

std::string KubeletToken(const std::string& node) { return "token-kubelet-" + node; }

}  // namespace

Artifacts BuiltArtifacts() {
  return {FRACGPU_BINARY,           FRACGPU_FAKE_NVML, FRACGPU_FAKES_LIB,
          FRACGPU_LIBVGPU_TESTPATH, FRACGPU_VGPU_APP,  FRACGPU_BYPASS_APP};
}

Cluster::Cluster(ClusterOptions options) : options_(std::move(options)) {
  if (!options_.dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options_.dir, ec);
    dir_ = ec ? "" : options_.dir;
  } else {
    char tmpl[] = "/tmp/fge2e-XXXXXX";  // short: Unix socket paths live under it
    const char* made = mkdtemp(tmpl);
    dir_ = made != nullptr ? made : "";
  }
  api_ = std::make_unique<fakes::FakeApiServer>();
}

Cluster::~Cluster() {
  // Clients first (their idle keep-alive connections would hold the API server's workers
  // until the keep-alive timeout), then the server.
  driver_.reset();
  nodes_.clear();
  StopScheduler(SIGTERM);
  scheduler_.reset();
  api_->SetPodAdmission(nullptr);
  api_.reset();
  if (!dir_.empty() && std::getenv("FRACGPU_E2E_KEEP") == nullptr) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

std::string Cluster::WriteKubeconfig(const std::string& name, const std::string& token) const {
  std::string path = dir_ + "/kubeconfig-" + name;
  std::ofstream(path)
      << "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: "
      << api_->url() << "\nusers:\n- name: " << name << "\n  user:\n    token: " << token
      << "\ncontexts:\n- name: e2e\n  context:\n    cluster: e2e\n    user: " << name
      << "\n    namespace: fracgpu-system\ncurrent-context: e2e\n";
  return path;
}

bool Cluster::Start(std::string* error) {
  if (dir_.empty() || api_->port() <= 0) {
    const std::string folder = options_.dir.empty() ? "/tmp/fge2e-XXXXXX" : options_.dir;
    *error = dir_.empty() ? "cannot make the cluster's folder \"" + folder + "\""
                          : "the fake API server has no port";
    return false;
  }
  std::map<std::string, std::string> tokens = {{kSchedulerToken, kSchedulerUser},
                                               {kDevicePluginToken, kDevicePluginUser},
                                               {kKubeSchedulerToken, kKubeSchedulerUser},
                                               {kAliceToken, kUserAlice}};
  for (const auto& [name, gpus] : options_.nodes)
    tokens[KubeletToken(name)] = "system:node:" + name;
  for (const auto& [token, user] : options_.extra_tokens) tokens[token] = user;
  api_->SetTokens(tokens);
  api_->SetPodAdmission([this](const fakes::AdmissionCall& call) {
    return CallPodWebhook([this] { return scheduler_url(); }, call);
  });
  std::ofstream(dir_ + "/signing-key") << kSigningKey;
  // The nodes exist before their agents start (kubelet registered them).
  for (const auto& [name, gpus] : options_.nodes) {
    api_->Put("nodes",
              {{"metadata", {{"name", name}, {"labels", {{"gpu", "on"}}}}},
               {"status", {{"capacity", {{"cpu", "8"}}}, {"allocatable", {{"cpu", "8"}}}}}});
  }
  // deploy/'s ValidatingAdmissionPolicy and binding, as `kubectl apply -k deploy/` creates them:
  // the scheduler lends only while it sees them (scheduler/borrower_guard.h). Stored only: the
  // fake API server evaluates no CEL (tests/realcluster checks the rule on kube-apiserver).
  for (const json& obj :
       fakes::LoadManifest(std::string(FRACGPU_DEPLOY_DIR) + "/admission-policy.yaml")) {
    api_->Put(obj.value("kind", "") == "ValidatingAdmissionPolicy"
                  ? "validatingadmissionpolicies"
                  : "validatingadmissionpolicybindings",
              obj);
  }
  if (!StartScheduler(error)) return false;
  driver_ = std::make_unique<SchedulerDriver>(api_->url(), kKubeSchedulerToken, kSchedulerName,
                                              [this] { return scheduler_url(); });
  if (!driver_->Start()) {
    *error = "the kube-scheduler driver's watches did not sync";
    return false;
  }
  std::string plugin_kubeconfig = WriteKubeconfig("device-plugin", kDevicePluginToken);
  for (const auto& [name, gpus] : options_.nodes) {
    std::string node_dir = dir_ + "/" + name;
    std::filesystem::create_directories(node_dir);
    nodes_.push_back(std::make_unique<NodeAgent>(name, gpus, BuiltArtifacts(), node_dir));
    if (options_.enforce) nodes_.back()->EnableEnforcement();
    if (options_.park_idle_s > 0 &&
        (options_.park_nodes.empty() ||
         std::find(options_.park_nodes.begin(), options_.park_nodes.end(), name) !=
             options_.park_nodes.end()))
      nodes_.back()->EnableParking(options_.park_idle_s);
    nodes_.back()->SetDefaultArgs(options_.default_container_args);
    if (!nodes_.back()->Start(api_->url(), KubeletToken(name), plugin_kubeconfig,
                              dir_ + "/signing-key", error)) {
      return false;
    }
  }
  // Every node registered its GPUs and advertises them.
  for (const auto& [name, gpus] : options_.nodes) {
    bool ok = api_->WaitFor(
        [&] {
          auto n = api_->Get("nodes", "", name);
          return n && k8s::Annotation(*n, "hami.io/node-nvidia-register").has_value() &&
                 k8s::NodeAllocatable(*n, "nvidia.com/gpu") > 0;
        },
        kWait);
    if (!ok) {
      *error = "node " + name + " was not registered by its device plugin";
      return false;
    }
  }
  return true;
}

NodeAgent& Cluster::node(const std::string& name) {
  for (auto& n : nodes_) {
    if (n->name() == name) return *n;
  }
  return *nodes_.front();
}

std::string Cluster::scheduler_url() const {
  std::lock_guard<std::mutex> lock(url_mu_);
  return scheduler_url_;
}

std::string Cluster::SchedulerLog() const { return scheduler_ ? scheduler_->Log() : ""; }

void Cluster::StopScheduler(int sig) {
  {
    std::lock_guard<std::mutex> lock(url_mu_);
    scheduler_url_.clear();
  }
  if (scheduler_) scheduler_->Stop(sig);
}

bool Cluster::StartScheduler(std::string* error) {
  std::string kubeconfig = WriteKubeconfig("scheduler", kSchedulerToken);
  std::vector<std::string> argv = {BuiltArtifacts().fracgpu,
                                   "scheduler",
                                   "--listen=127.0.0.1:0",
                                   "--kubeconfig=" + kubeconfig,
                                   "--scheduler-name=" + std::string(kSchedulerName),
                                   "--node-scheduler-policy=" + options_.node_policy,
                                   "--gpu-scheduler-policy=" + options_.gpu_policy,
                                   "--signing-key-file=" + dir_ + "/signing-key"};
  if (options_.leader_elect) argv.push_back("--leader-elect");
  auto env = CurrentEnvironment();
  env["POD_NAME"] = "fracgpu-scheduler-" + std::to_string(scheduler_starts_);
  std::string log = dir_ + "/scheduler-" + std::to_string(scheduler_starts_++) + ".log";
  scheduler_ = std::make_unique<Daemon>(argv, env, log);
  constexpr std::string_view kServing = "serving on http://";
  if (!scheduler_->running() || !scheduler_->WaitForLog(std::string(kServing), kWait)) {
    *error = "the scheduler did not start; log:\n" + scheduler_->Log();
    return false;
  }
  std::string text = scheduler_->Log();
  size_t at = text.find(kServing) + kServing.size() - std::string_view("http://").size();
  size_t end = text.find_first_of(" \n\r", at);
  std::string url = text.substr(at, end - at);
  httplib::Client http(url);
  bool ready = PollUntil(
      [&] {
        auto res = http.Get("/readyz");
        return res && res->status == 200;
      },
      kWait);
  if (!ready) {
    *error = "the scheduler at " + url + " never became ready; log:\n" + scheduler_->Log();
    return false;
  }
  std::lock_guard<std::mutex> lock(url_mu_);
  scheduler_url_ = url;
  return true;
}

HttpResult Cluster::Request(const std::string& method, const std::string& path,
                            const std::string& body, const std::string& content_type,
                            const std::string& token) {
  httplib::Client http(api_->url());
  http.set_read_timeout(30, 0);
  httplib::Headers headers = {{"Authorization", "Bearer " + token}};
  auto answer = [](const httplib::Result& res) -> HttpResult {
    if (!res) return {};
    return {res->status, json::parse(res->body, nullptr, false)};
  };
  if (method == "POST") return answer(http.Post(path, headers, body, content_type));
  if (method == "PATCH") return answer(http.Patch(path, headers, body, content_type));
  return answer(http.Delete(path, headers));
}

HttpResult Cluster::CreatePod(const json& pod, const std::string& token) {
  std::string ns = pod["metadata"].value("namespace", "default");
  return Request("POST", "/api/v1/namespaces/" + ns + "/pods", pod.dump(), "application/json",
                 token);
}

HttpResult Cluster::PatchPod(const std::string& ns, const std::string& name,
                             const json& merge_patch, const std::string& token) {
  return Request("PATCH", k8s::PodPath(ns, name), merge_patch.dump(),
                 "application/merge-patch+json", token);
}

HttpResult Cluster::DeletePod(const std::string& ns, const std::string& name,
                              const std::string& token) {
  return Request("DELETE", k8s::PodPath(ns, name), "", "", token);
}

std::optional<json> Cluster::Pod(const std::string& ns, const std::string& name) const {
  return api_->Get("pods", ns, name);
}

bool Cluster::WaitForPod(const std::string& ns, const std::string& name,
                         const std::function<bool(const json&)>& pred,
                         std::chrono::milliseconds timeout) const {
  return api_->WaitFor(
      [&] {
        auto pod = api_->Get("pods", ns, name);
        return pod && pred(*pod);
      },
      timeout);
}

bool Cluster::WaitRunning(const std::string& ns, const std::string& name,
                          std::chrono::milliseconds timeout) const {
  return WaitForPod(
      ns, name, [](const json& p) { return k8s::PodPhase(p) == "Running"; }, timeout);
}

json UserPod(const std::string& name, const std::vector<ContainerDef>& containers) {
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", "ml"}}},
              {"spec", {{"containers", json::array()}}}};
  for (const auto& c : containers) {
    json spec = {{"name", c.name}, {"image", "nvcr.io/nvidia/cuda:12.4.1-base"}, {"args", c.args}};
    if (c.gpumem_mib > 0) {
      // Canonical quantities: 3000 → "3k"; other values stay plain.
      std::string mem = c.gpumem_mib % 1000 == 0 ? std::to_string(c.gpumem_mib / 1000) + "k"
                                                 : std::to_string(c.gpumem_mib);
      spec["resources"]["limits"] = {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", mem}};
    }
    pod["spec"][c.init ? "initContainers" : "containers"].push_back(spec);
  }
  return pod;
}

std::vector<std::string> SliceProbe(int64_t mib, bool keep_running) {
  constexpr int64_t kMiB = 1024 * 1024;
  std::vector<std::string> ops = {"init", "alloc:" + std::to_string(mib * kMiB),
                                  "alloc:" + std::to_string(kMiB), "info"};
  if (keep_running) ops.push_back("wait");
  return ops;
}

std::vector<std::string> ExpectedSliceLines(int64_t mib, bool keep_running) {
  constexpr int64_t kMiB = 1024 * 1024;
  std::vector<std::string> lines = {"init 0", "alloc 0", "alloc 2",
                                    "info 0 0 " + std::to_string(mib * kMiB)};
  if (keep_running) lines.push_back("ready");
  return lines;
}

std::vector<std::vector<Grant>> ParseAllocation(const std::string& value) {
  std::vector<std::vector<Grant>> parts;
  std::stringstream containers(value);
  for (std::string part; std::getline(containers, part, ';');) {
    std::vector<Grant> grants;
    std::stringstream gpus(part);
    for (std::string gpu; std::getline(gpus, gpu, ':');) {
      if (gpu.empty()) continue;
      std::stringstream fields(gpu);
      std::vector<std::string> f;
      for (std::string x; std::getline(fields, x, ',');) f.push_back(x);
      if (f.size() != 4) return {};
      grants.push_back({f[0], std::atoll(f[2].c_str()), std::atoi(f[3].c_str())});
    }
    parts.push_back(grants);
  }
  return parts;
}

std::string AnnotationOf(const json& pod, const std::string& key) {
  return k8s::Annotation(pod, key).value_or("");
}

}  // namespace fracgpu::e2e
