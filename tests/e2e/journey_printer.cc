#include "journey_printer.h"

#include <chrono>
#include <cstdio>

#include "base/strings.h"
#include "k8s/objects.h"

namespace fracgpu::e2e {
namespace {

using nlohmann::json;
constexpr auto kSyncWait = std::chrono::seconds(30);
// How long a Running pod's lines wait for its binding's lines (printed by the driver's thread,
// which may lag the pod watch by a moment).
constexpr auto kBindLineWait = std::chrono::seconds(5);
constexpr int64_t kMiB = 1024 * 1024;

std::string Key(const std::string& ns, const std::string& name) { return ns + "/" + name; }

// "12m" (HAMi's MiB suffix) or a plain number → MiB; -1 when neither.
int64_t LimitMiB(const std::string& v) {
  if (v.empty()) return -1;
  std::string digits = v.back() == 'm' ? v.substr(0, v.size() - 1) : v;
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(digits);
}

}  // namespace

JourneyPrinter::JourneyPrinter(Cluster* cluster,
                               std::vector<std::pair<std::string, std::vector<GpuSpec>>> nodes,
                               std::function<void(const std::string&)> say)
    : cluster_(cluster), nodes_(std::move(nodes)), say_(std::move(say)) {}

JourneyPrinter::~JourneyPrinter() { Stop(); }

bool JourneyPrinter::Start(const std::string& token, std::string* error) {
  cluster_->driver().SetAttemptObserver([this](const std::string& ns, const std::string& name,
                                               const Attempt& a) { OnAttempt(ns, name, a); });
  k8s::Config config;
  config.server = cluster_->api().url();
  config.token = token;
  auto client = k8s::Client::Create(config);
  if (!client.ok()) {
    *error = client.status().ToString();
    return false;
  }
  client_ = std::move(*client);
  k8s::InformerOptions options;
  options.path = "/api/v1/pods";
  k8s::InformerHandlers handlers;
  handlers.on_upsert = [this](const json& pod) { OnPod(pod); };
  handlers.on_delete = [this](const json& pod) { OnDeleted(pod); };
  pods_ = std::make_unique<k8s::Informer>(client_.get(), options, handlers);
  pods_->Start();
  if (!pods_->WaitForSync(kSyncWait)) {
    *error = "the narrator's pod watch did not sync within 30 s";
    return false;
  }
  k8s::InformerOptions node_options;
  node_options.path = "/api/v1/nodes";
  k8s::InformerHandlers node_handlers;
  node_handlers.on_upsert = [this](const json& node) { OnNode(node); };
  nodes_watch_ = std::make_unique<k8s::Informer>(client_.get(), node_options, node_handlers);
  k8s::InformerOptions event_options;
  event_options.path = "/api/v1/events";
  k8s::InformerHandlers event_handlers;
  event_handlers.on_upsert = [this](const json& event) { OnEvent(event); };
  events_ = std::make_unique<k8s::Informer>(client_.get(), event_options, event_handlers);
  nodes_watch_->Start();
  events_->Start();
  if (!nodes_watch_->WaitForSync(kSyncWait) || !events_->WaitForSync(kSyncWait)) {
    *error = "the narrator's node or event watch did not sync within 30 s";
    return false;
  }
  return true;
}

void JourneyPrinter::Stop() {
  if (events_) events_->Stop();
  if (nodes_watch_) nodes_watch_->Stop();
  if (pods_) pods_->Stop();
  if (client_) cluster_->driver().SetAttemptObserver(nullptr);
}

void JourneyPrinter::SetQuiet(bool quiet) {
  std::lock_guard<std::mutex> lock(mu_);
  quiet_ = quiet;
}

std::string JourneyPrinter::DescribeGpu(const std::string& uuid) const {
  for (const auto& [node, gpus] : nodes_) {
    for (size_t i = 0; i < gpus.size(); ++i) {
      if (gpus[i].uuid == uuid) {
        return node + " GPU " + std::to_string(i) + " " + uuid + " (" +
               std::to_string(gpus[i].mib) + " MiB)";
      }
    }
  }
  return uuid;
}

// "GPU 0 GPU-… (40960 MiB): 10240 MiB, 25 % of the SMs" for each GPU of the stored decision.
std::string JourneyPrinter::Placement(const json& pod) const {
  std::string out;
  for (const auto& part : ParseAllocation(AnnotationOf(pod, "hami.io/vgpu-devices-allocated"))) {
    for (const auto& g : part) {
      out += (out.empty() ? "" : "; ") + DescribeGpu(g.uuid) + ": " + std::to_string(g.mib) +
             " MiB, " + std::to_string(g.cores) + " % of the SMs";
    }
  }
  return out.empty() ? "no GPU" : out;
}

void JourneyPrinter::OnAttempt(const std::string& ns, const std::string& name, const Attempt& a) {
  const std::string key = Key(ns, name);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (quiet_) {
      if (a.stage == "bound") bound_.insert(key);
      cv_.notify_all();
      return;
    }
  }
  std::string failed;
  for (const auto& [node, reason] : a.failed_nodes) failed += "; " + node + ": " + reason;
  if (a.stage != "bound") {
    std::string answer = a.stage == "filter" ? "no node fits" + failed : "/" + a.stage + " failed";
    if (!a.error.empty()) answer += " (" + a.error + ")";
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (unschedulable_[key] == answer) return;  // retries with the same answer
      unschedulable_[key] = answer;
    }
    say_("scheduler: pod " + key + " unschedulable: " + answer +
         " (retried when a pod or node changes)");
    return;
  }
  const std::string fits = base::Join(a.feasible, ", ");
  std::string scores;
  for (const auto& [node, score] : a.scores)
    scores += (scores.empty() ? "" : ", ") + node + " " + std::to_string(score);
  say_("scheduler: pod " + key + " /filter: answers " + fits + failed);
  // One feasible node is taken without /prioritize, as kube-scheduler does.
  say_("scheduler: pod " + key + " /prioritize: " +
       (!a.prioritized   ? std::string("not called (one node answered)")
        : scores.empty() ? std::string("no scores")
                         : scores) +
       " → /bind " + a.node);
  auto pod = cluster_->Pod(ns, name);
  say_("scheduler: pod " + key + " bound to " + a.node + ": " +
       (pod ? Placement(*pod) : "(pod gone)"));
  std::lock_guard<std::mutex> lock(mu_);
  unschedulable_.erase(key);
  bound_.insert(key);
  cv_.notify_all();
}

void JourneyPrinter::OnPod(const json& pod) {
  const std::string phase = k8s::PodPhase(pod);
  if (phase != "Running" && phase != "Failed") return;
  const std::string ns = k8s::Namespace(pod), name = k8s::Name(pod), key = Key(ns, name);
  const std::string node = k8s::PodNodeName(pod);
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!done_.insert(k8s::Uid(pod) + "/" + phase).second) return;
    if (quiet_ && phase == "Running") {
      // Printed under the lock: a second caller for this pod returns only once it is out.
      auto stored = cluster_->Pod(ns, name);
      say_("  " + key + ": " + (stored ? Placement(*stored) : "(pod gone)") + ", running");
      return;
    }
    if (!quiet_) cv_.wait_for(lock, kBindLineWait, [&] { return bound_.count(key) != 0; });
  }
  if (phase == "Failed") {
    std::string reason = pod.contains("status") ? pod["status"].value("reason", "") : "";
    std::string message = pod.contains("status") ? pod["status"].value("message", "") : "";
    say_("kubelet: pod " + key + " Failed on " + node + ": " + reason +
         (message.empty() ? "" : ": " + message));
    return;
  }
  for (const auto& c : pod["spec"].value("containers", json::array())) {
    const std::string cname = c.value("name", "");
    auto view = cluster_->node(node).Container(ns, name, cname);
    if (!view) continue;
    std::string env;
    if (auto it = view->allocate_env.find("NVIDIA_VISIBLE_DEVICES");
        it != view->allocate_env.end()) {
      env = it->first + "=" + it->second;
    }
    for (const auto& [k, v] : view->allocate_env) {
      if (k.rfind("CUDA_DEVICE_MEMORY_LIMIT", 0) == 0) {
        int64_t mib = LimitMiB(v);
        env += (env.empty() ? "" : ", ") + k + "=" + v +
               (mib >= 0 ? " (" + std::to_string(mib) + " MiB)" : "");
      } else if (k.rfind("CUDA_DEVICE_SM_LIMIT", 0) == 0) {
        env += (env.empty() ? "" : ", ") + k + "=" + v + " (%)";
      }
    }
    if (!view->allocate_env.empty()) {
      say_("kubelet: " + node + " Allocate for " + key + " container " + cname + ": " + env);
    }
    for (const auto& line : view->lines) {
      // vgpu_app's "info <CUresult> <free bytes> <total bytes>" (cuMemGetInfo).
      if (line.rfind("info 0 ", 0) != 0) continue;
      long long free_b = 0, total_b = 0;
      if (std::sscanf(line.c_str(), "info 0 %lld %lld", &free_b, &total_b) == 2) {
        say_("container: " + key + "/" + cname + " under libvgpu.so: cuMemGetInfo " +
             std::to_string(total_b / kMiB) + " MiB total, " + std::to_string(free_b / kMiB) +
             " MiB free");
      }
    }
  }
  say_("pod " + key + ": Running on " + node);
}

void JourneyPrinter::OnDeleted(const json& pod) {
  const std::string key = Key(k8s::Namespace(pod), k8s::Name(pod));
  bool quiet = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    quiet = quiet_;
    bound_.erase(key);
    unschedulable_.erase(key);
  }
  if (!quiet) {
    std::string node = k8s::PodNodeName(pod);
    say_("pod " + key + ": deleted" +
         (node.empty() ? "" : "; its slice on " + node + " is free again"));
  }
}

}  // namespace fracgpu::e2e

namespace fracgpu::e2e {

// The node's lent-memory record ("<unix s>;<uuid>:<MiB>,…", docs/reclaim.md "Lending"), read
// here only to narrate: the GPUs part, printed when it changes (the agent rewrites the time
// every 30 s). The scheduler's codec (core/lent.h) is what decides; this one trusts the agent.
void JourneyPrinter::OnNode(const json& node) {
  const std::string name = k8s::Name(node);
  const std::string record = AnnotationOf(node, "fracgpu.io/lent-memory");
  const size_t semi = record.find(';');
  const std::string gpus = semi == std::string::npos ? "" : record.substr(semi + 1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = lent_.find(name);
    if (it == lent_.end() ? gpus.empty() : it->second == gpus) return;
    lent_[name] = gpus;
    if (quiet_) return;
  }
  if (gpus.empty()) {
    say_("agent: " + name + " lends nothing (its parked memory is back with its owner)");
    return;
  }
  std::string what;
  size_t at = 0;
  while (at <= gpus.size()) {
    size_t comma = gpus.find(',', at);
    if (comma == std::string::npos) comma = gpus.size();
    const std::string entry = gpus.substr(at, comma - at);
    const size_t colon = entry.rfind(':');
    if (colon != std::string::npos) {
      what += (what.empty() ? "" : "; ") + DescribeGpu(entry.substr(0, colon)) + ": " +
              entry.substr(colon + 1) + " MiB";
    }
    at = comma + 1;
  }
  say_("agent: " + name + " parked idle memory; lends " + what + " to borrowers");
}

void JourneyPrinter::OnEvent(const json& event) {
  if (event.value("reason", "") != "GPUMemoryReclaimed") return;
  const std::string uid = k8s::Uid(event);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!events_seen_.insert(uid).second || quiet_) return;
  }
  const json object = event.value("involvedObject", json::object());
  say_("agent: Event GPUMemoryReclaimed on pod " +
       Key(object.value("namespace", ""), object.value("name", "")) + ": " +
       event.value("message", ""));
}

}  // namespace fracgpu::e2e
