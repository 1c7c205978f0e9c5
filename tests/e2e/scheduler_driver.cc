#include "scheduler_driver.h"

#include <httplib.h>

#include <algorithm>

#include "k8s/objects.h"

namespace fracgpu::e2e {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
constexpr milliseconds kInitialBackoff(50);
constexpr milliseconds kMaxBackoff(1000);

}  // namespace

SchedulerDriver::SchedulerDriver(std::string api_url, std::string token, std::string scheduler_name,
                                 std::function<std::string()> extender_url)
    : scheduler_name_(std::move(scheduler_name)), extender_url_(std::move(extender_url)) {
  k8s::Config config;
  config.server = std::move(api_url);
  config.token = std::move(token);
  auto client = k8s::Client::Create(config);
  if (client.ok()) client_ = std::move(*client);
}

SchedulerDriver::~SchedulerDriver() { Stop(); }

bool SchedulerDriver::Start() {
  if (!client_) return false;
  k8s::InformerOptions pod_options, node_options;
  pod_options.path = "/api/v1/pods";
  node_options.path = "/api/v1/nodes";
  k8s::InformerHandlers pod_handlers, node_handlers;
  pod_handlers.on_upsert = [this](const json& pod) {
    std::string phase = k8s::PodPhase(pod);
    Wake(phase == "Succeeded" || phase == "Failed");
  };
  pod_handlers.on_delete = [this](const json&) { Wake(true); };
  node_handlers.on_upsert = [this](const json&) { Wake(true); };
  node_handlers.on_delete = [this](const json&) { Wake(true); };
  pods_ = std::make_unique<k8s::Informer>(client_.get(), pod_options, pod_handlers);
  nodes_ = std::make_unique<k8s::Informer>(client_.get(), node_options, node_handlers);
  pods_->Start();
  nodes_->Start();
  if (!pods_->WaitForSync(std::chrono::seconds(30)) ||
      !nodes_->WaitForSync(std::chrono::seconds(30)))
    return false;
  thread_ = std::thread([this] { Loop(); });
  return true;
}

void SchedulerDriver::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (pods_) pods_->Stop();
  if (nodes_) nodes_->Stop();
}

void SchedulerDriver::Wake(bool reset_backoff) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    dirty_ = true;
    if (reset_backoff) {
      auto now = std::chrono::steady_clock::now();
      for (auto& [uid, t] : next_try_) t = now;
      backoff_.clear();
    }
  }
  cv_.notify_all();
}

std::optional<Attempt> SchedulerDriver::LastAttempt(const std::string& ns,
                                                    const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = attempts_.find(ns + "/" + name);
  if (it == attempts_.end()) return std::nullopt;
  return it->second;
}

int SchedulerDriver::filter_calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return filter_calls_;
}

void SchedulerDriver::SetAttemptObserver(
    std::function<void(const std::string&, const std::string&, const Attempt&)> observer) {
  std::lock_guard<std::mutex> lock(mu_);
  observer_ = std::move(observer);
}

json SchedulerDriver::Post(const std::string& path, const json& body, std::string* error) {
  std::string url = extender_url_();
  if (url.empty()) {
    *error = "no extender";
    return nullptr;
  }
  httplib::Client http(url);
  http.set_connection_timeout(5, 0);
  http.set_read_timeout(30, 0);  // httpTimeout of the extender configuration
  auto res = http.Post(path, body.dump(), "application/json");
  if (!res) {
    *error = path + ": " + httplib::to_string(res.error());
    return nullptr;
  }
  if (res->status != 200) {
    *error = path + ": HTTP " + std::to_string(res->status) + " " + res->body;
    return nullptr;
  }
  json answer = json::parse(res->body, nullptr, false);
  if (answer.is_discarded()) *error = path + ": answer is not JSON: " + res->body;
  return answer;
}

void SchedulerDriver::Loop() {
  for (;;) {
    std::vector<json> pending;
    std::vector<std::string> nodes;
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto now = std::chrono::steady_clock::now();
      auto wake_at = now + kMaxBackoff;
      for (const auto& [uid, t] : next_try_) wake_at = std::min(wake_at, t);
      if (!dirty_ && wake_at > now) cv_.wait_until(lock, wake_at, [&] { return stop_ || dirty_; });
      if (stop_) return;
      dirty_ = false;
    }
    for (const auto& [key, node] : nodes_->Snapshot()) nodes.push_back(k8s::Name(node));
    std::sort(nodes.begin(), nodes.end());
    for (const auto& [key, pod] : pods_->Snapshot()) {
      if (k8s::PodSchedulerName(pod) != scheduler_name_ || !k8s::PodNodeName(pod).empty() ||
          k8s::IsTerminating(pod) ||
          (k8s::PodPhase(pod) != "Pending" && !k8s::PodPhase(pod).empty())) {
        continue;
      }
      pending.push_back(pod);
    }
    // Oldest first: the fake API server hands out UIDs in creation order, zero-padded.
    std::sort(pending.begin(), pending.end(),
              [](const json& a, const json& b) { return k8s::Uid(a) < k8s::Uid(b); });
    for (const auto& pod : pending) {
      std::string uid = k8s::Uid(pod);
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return;
        if (bound_.count(uid) != 0) continue;
        auto it = next_try_.find(uid);
        if (it != next_try_.end() && it->second > std::chrono::steady_clock::now()) continue;
      }
      ScheduleOne(pod, nodes);
    }
  }
}

void SchedulerDriver::ScheduleOne(const json& pod, const std::vector<std::string>& nodes) {
  std::string uid = k8s::Uid(pod), ns = k8s::Namespace(pod), name = k8s::Name(pod);
  Attempt attempt;
  auto record = [&] {
    std::function<void(const std::string&, const std::string&, const Attempt&)> observer;
    {
      std::lock_guard<std::mutex> lock(mu_);
      attempts_[ns + "/" + name] = attempt;
      observer = observer_;
    }
    if (observer) observer(ns, name, attempt);
  };
  bool recorded = false;  // the unschedulable path records before its status write
  auto finish = [&](bool ok) {
    if (!recorded) record();
    std::lock_guard<std::mutex> lock(mu_);
    if (ok) {
      bound_.insert(uid);
      next_try_.erase(uid);
      backoff_.erase(uid);
      return;
    }
    auto& b = backoff_[uid];
    b = b.count() == 0 ? kInitialBackoff : std::min(b * 2, kMaxBackoff);
    next_try_[uid] = std::chrono::steady_clock::now() + b;
  };
  json args = {{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", nodes}};
  attempt.stage = "filter";
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++filter_calls_;
  }
  json filtered = Post("/filter", args, &attempt.error);
  if (!attempt.error.empty()) return finish(false);
  if (filtered.contains("Error") && filtered["Error"].is_string())
    attempt.error = filtered["Error"];
  // kube-scheduler's FitError counts both maps (the unresolvable ones take precedence).
  for (const char* key : {"FailedNodes", "FailedAndUnresolvableNodes"}) {
    if (!filtered.contains(key) || !filtered[key].is_object()) continue;
    for (const auto& [n, reason] : filtered[key].items()) {
      attempt.failed_nodes[n] = reason.is_string() ? reason.get<std::string>() : reason.dump();
    }
  }
  std::vector<std::string> feasible;
  if (filtered.contains("NodeNames") && filtered["NodeNames"].is_array()) {
    for (const auto& n : filtered["NodeNames"]) {
      // kube-scheduler rejects names that were not among the candidates.
      if (n.is_string() &&
          std::find(nodes.begin(), nodes.end(), n.get<std::string>()) != nodes.end()) {
        feasible.push_back(n);
      }
    }
  }
  if (!attempt.error.empty() || feasible.empty()) {
    // kube-scheduler's FitError message, written on the pod's PodScheduled condition.
    std::map<std::string, int> by_reason;
    for (const auto& [n, reason] : attempt.failed_nodes) ++by_reason[reason];
    std::string message = "0/" + std::to_string(nodes.size()) + " nodes are available: ";
    bool first = true;
    for (const auto& [reason, count] : by_reason) {
      message += (first ? "" : ", ") + std::to_string(count) + " " + reason;
      first = false;
    }
    if (!attempt.error.empty()) message += (first ? "" : ", ") + attempt.error;
    message += ".";
    record();  // before the status write, which observers may wait for
    recorded = true;
    bool write = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      write = condition_message_[uid] != message;
      condition_message_[uid] = message;
    }
    if (write) {
      auto r = client_->MergePatch(k8s::PodPath(ns, name) + "/status",
                                   {{"status",
                                     {{"conditions", json::array({{{"type", "PodScheduled"},
                                                                   {"status", "False"},
                                                                   {"reason", "Unschedulable"},
                                                                   {"message", message}}})}}}});
      (void)r;
    }
    return finish(false);
  }
  std::string best = feasible.front();
  int best_score = -1;
  json scores;
  // kube-scheduler takes a single feasible node as it is, without scoring or /prioritize
  // (schedulePod, pkg/scheduler/schedule_one.go of v1.37.2).
  attempt.feasible = feasible;
  if (feasible.size() > 1) {
    attempt.prioritized = true;
    attempt.stage = "prioritize";
    json args2 = {{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", feasible}};
    scores = Post("/prioritize", args2, &attempt.error);
  }
  // A prioritize error is ignored by kube-scheduler (every node scores 0).
  if (attempt.error.empty() && scores.is_array()) {
    for (const auto& s : scores) {
      if (!s.is_object() || !s.contains("Host") || !s.contains("Score")) continue;
      attempt.scores[s["Host"].get<std::string>()] = s["Score"].get<int>();
    }
  }
  attempt.error.clear();
  for (const auto& n : feasible) {
    int score = attempt.scores.count(n) ? attempt.scores[n] : 0;
    if (score > best_score) {
      best = n;
      best_score = score;
    }
  }
  attempt.stage = "bind";
  attempt.node = best;
  json bound =
      Post("/bind", {{"PodName", name}, {"PodNamespace", ns}, {"PodUID", uid}, {"Node", best}},
           &attempt.error);
  if (attempt.error.empty() && bound.contains("Error") && bound["Error"].is_string())
    attempt.error = bound["Error"];
  if (!attempt.error.empty()) return finish(false);
  attempt.stage = "bound";
  finish(true);
}

}  // namespace fracgpu::e2e
