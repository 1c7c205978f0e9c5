#include "k8s/informer.h"

#include <spdlog/spdlog.h>

#include <random>
#include <vector>

#include "base/heap.h"
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

bool Informer::HasSynced() const { return synced_.load(std::memory_order_acquire); }

bool Informer::WaitForSync(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return synced_.load(); });
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

nlohmann::json IdentityOf(const nlohmann::json& obj) {
  nlohmann::json md = {{"name", Name(obj)}};
  if (std::string ns = Namespace(obj); !ns.empty()) md["namespace"] = std::move(ns);
  md["uid"] = Uid(obj);
  md["resourceVersion"] = ResourceVersion(obj);
  return {{"metadata", std::move(md)}};
}

nlohmann::json Informer::Stored(const nlohmann::json& obj) const {
  return options_.keep_objects ? obj : IdentityOf(obj);
}

Status Informer::Relist() {
  ListOptions lo;
  lo.label_selector = options_.label_selector;
  lo.field_selector = options_.field_selector;
  // The store as it was (the informer thread is its only writer): what the fresh list is
  // compared with. Only the key and resourceVersion of each entry are needed.
  std::map<std::string, std::string> old_rv;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, obj] : store_)
      old_rv.emplace_hint(old_rv.end(), key, ResourceVersion(obj));
  }
  // Page by page: each item is reported as its page arrives (an upsert when it is new or its
  // resourceVersion changed), so the list is never held whole as one document.
  std::map<std::string, nlohmann::json> fresh;
  auto rv = client_->ListEach(options_.path, lo, [&](nlohmann::json& item) {
    std::string key = Key(item);
    auto it = old_rv.find(key);
    bool changed = it == old_rv.end() || it->second != ResourceVersion(item);
    if (changed && handlers_.on_upsert) handlers_.on_upsert(item);
    fresh[std::move(key)] = options_.keep_objects ? std::move(item) : IdentityOf(item);
  });
  if (!rv.ok()) return rv.status();
  // Report what the list no longer holds, so a consumer that missed events during a 410 gap
  // ends in the same state as the API server.
  std::vector<nlohmann::json> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, obj] : store_) {
      if (!fresh.count(key)) gone.push_back(std::move(obj));
    }
    store_.swap(fresh);  // the old store is freed below, outside the lock
    rv_ = *rv;
  }
  fresh.clear();
  if (handlers_.on_delete) {
    for (const auto& obj : gone) handlers_.on_delete(obj);
  }
  gone.clear();
  base::ReleaseFreeHeap();  // the pages' documents, freed on this thread's arena
  {
    std::lock_guard<std::mutex> lock(mu_);
    synced_.store(true, std::memory_order_release);  // after every handler of this list ran
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
    // The copy is made, and the replaced object freed, outside the lock that readers of the
    // store take.
    nlohmann::json stored = Stored(ev.object);
    {
      std::lock_guard<std::mutex> lock(mu_);
      store_[key].swap(stored);
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
