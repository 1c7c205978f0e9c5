#include "ui/access.h"

#include <algorithm>

namespace fracgpu::ui {

AccessCache::AccessCache(std::chrono::milliseconds ttl, std::chrono::milliseconds failed_ttl,
                         size_t max_entries, Clock clock)
    : ttl_(ttl),
      failed_ttl_(failed_ttl),
      max_entries_(std::max<size_t>(1, max_entries)),
      clock_(std::move(clock)) {}

std::chrono::steady_clock::time_point AccessCache::Now() const {
  return clock_ ? clock_() : std::chrono::steady_clock::now();
}

std::string AccessCache::Key(const std::string& user, std::vector<std::string> groups,
                             const std::string& ns) {
  std::sort(groups.begin(), groups.end());
  groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
  // NUL separates the parts: HTTP header values (user, groups) cannot hold one.
  std::string key = user;
  key.push_back('\0');
  for (const auto& g : groups) {
    key += g;
    key.push_back(',');
  }
  key.push_back('\0');
  key += ns;
  return key;
}

std::optional<AccessDecision> AccessCache::Find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  if (Now() >= it->second->expires) {
    lru_.erase(it->second);
    index_.erase(it);
    return std::nullopt;
  }
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->decision;
}

void AccessCache::Put(const std::string& key, AccessDecision decision) {
  const std::chrono::milliseconds ttl = decision == AccessDecision::kFailed ? failed_ttl_ : ttl_;
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.erase(it->second);
    index_.erase(it);
  }
  if (ttl.count() <= 0) return;
  while (lru_.size() >= max_entries_) {
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }
  lru_.push_front({key, decision, Now() + ttl});
  index_[key] = lru_.begin();
}

size_t AccessCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

}  // namespace fracgpu::ui
