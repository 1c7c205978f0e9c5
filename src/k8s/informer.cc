#include "k8s/informer.h"

#include <spdlog/spdlog.h>

#include <random>

#include "k8s/objects.h"

namespace fracgpu::k8s {

Informer::Informer(Client* client, InformerOptions options, InformerHandlers handlers)
    : client_(client), options_(std::move(options)), handlers_(std::move(handlers)) {}

Informer::~Informer() { Stop(); }

void Informer::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void Informer::Stop() {
  stop_.Stop();
  if (thread_.joinable()) thread_.join();
}

bool Informer::HasSynced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return synced_;
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return synced_; });
}

std::map<std::string, nlohmann::json> Informer::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return store_;
}

int64_t Informer::list_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lists_;
}

std::string Informer::last_resource_version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rv_;
}

Status Informer::Relist() {
  ListOptions lo;
  lo.label_selector = options_.label_selector;
  lo.field_selector = options_.field_selector;
  auto list = client_->List(options_.path, lo);
  if (!list.ok()) return list.status();
  std::map<std::string, nlohmann::json> fresh;
  for (auto& item : (*list)["items"]) fresh[Key(item)] = item;
  std::map<std::string, nlohmann::json> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    old = store_;
  }
  // Report the differences between the old store and the fresh list, so a consumer that
  // missed events during a 410 gap ends in the same state as the API server.
  for (auto& [key, obj] : old) {
    if (!fresh.count(key) && handlers_.on_delete) handlers_.on_delete(obj);
  }
  for (auto& [key, obj] : fresh) {
    auto it = old.find(key);
    bool changed = it == old.end() || ResourceVersion(it->second) != ResourceVersion(obj);
    if (changed && handlers_.on_upsert) handlers_.on_upsert(obj);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    store_ = std::move(fresh);
    rv_ = ResourceVersion(*list);
    synced_ = true;
    ++lists_;
  }
  cv_.notify_all();
  if (handlers_.on_synced) handlers_.on_synced();
  return Status::Ok();
}

void Informer::Apply(const WatchEvent& ev) {
  std::string rv = ResourceVersion(ev.object);
  if (ev.type == "BOOKMARK") {
    std::lock_guard<std::mutex> lock(mu_);
    if (!rv.empty()) rv_ = rv;
    return;
  }
  std::string key = Key(ev.object);
  if (ev.type == "ADDED" || ev.type == "MODIFIED") {
    {
      std::lock_guard<std::mutex> lock(mu_);
      store_[key] = ev.object;
      if (!rv.empty()) rv_ = rv;
    }
    if (handlers_.on_upsert) handlers_.on_upsert(ev.object);
  } else if (ev.type == "DELETED") {
    {
      std::lock_guard<std::mutex> lock(mu_);
      store_.erase(key);
      if (!rv.empty()) rv_ = rv;
    }
    if (handlers_.on_delete) handlers_.on_delete(ev.object);
  }
}

void Informer::Run() {
  base::Backoff backoff(options_.backoff,
                        options_.seed != 0 ? options_.seed : std::random_device{}());
  bool need_list = true;
  while (!stop_.stopped()) {
    if (need_list) {
      Status st = Relist();
      if (!st.ok()) {
        spdlog::warn("informer {}: list failed: {}", options_.path, st.ToString());
        if (!client_->clock()->Sleep(backoff.Next(), &stop_)) break;
        continue;
      }
      need_list = false;
      backoff.Reset();
    }
    WatchOptions wo;
    wo.label_selector = options_.label_selector;
    wo.field_selector = options_.field_selector;
    wo.resource_version = last_resource_version();
    wo.timeout_s = options_.watch_timeout_s;
    bool got_event = false;
    auto end = client_->Watch(
        options_.path, wo,
        [&](const WatchEvent& ev) {
          got_event = true;
          Apply(ev);
          return true;
        },
        &stop_);
    if (stop_.stopped()) break;
    if (!end.ok()) {
      spdlog::warn("informer {}: watch failed: {}", options_.path, end.status().ToString());
      if (!client_->clock()->Sleep(backoff.Next(), &stop_)) break;
      continue;
    }
    if (got_event) backoff.Reset();
    switch (*end) {
      case WatchEnd::kExpired:
        spdlog::info("informer {}: resource version expired (410), relisting", options_.path);
        need_list = true;
        break;
      case WatchEnd::kClosed:
        // A normal server timeout after events: reconnect at once. A stream that closes
        // without any event may be a flapping server: back off.
        if (!got_event && !client_->clock()->Sleep(backoff.Next(), &stop_)) return;
        break;
      case WatchEnd::kStopped:
        return;
    }
  }
}

}  // namespace fracgpu::k8s
