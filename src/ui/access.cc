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

AccessCache::Entry& AccessCache::Touch(const std::string& key) {
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return lru_.front();
  }
  while (lru_.size() >= max_entries_) {
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }
  const auto now = Now();
  lru_.push_front({key, std::nullopt, now, now, false});
  index_[key] = lru_.begin();
  return lru_.front();
}

std::optional<AccessDecision> AccessCache::Fresh(const Entry& e) const {
  if (!e.decision || Now() >= e.expires) return std::nullopt;
  return e.decision;
}

AccessCache::Lookup AccessCache::Look(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  const Entry& e = Touch(key);
  Lookup out;
  out.decision = Fresh(e);
  out.in_flight = !out.decision && e.in_flight;
  out.decided = e.decision.has_value();
  out.since = e.since;
  return out;
}

AccessCache::ClaimResult AccessCache::Claim(const std::string& key, AccessDecision* decided) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = Touch(key);
  if (auto d = Fresh(e)) {
    if (decided) *decided = *d;
    return ClaimResult::kDecided;
  }
  if (e.in_flight) return ClaimResult::kInFlight;
  e.in_flight = true;
  return ClaimResult::kClaimed;
}

void AccessCache::Abandon(const std::string& key) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) it->second->in_flight = false;
  }
  landed_.notify_all();
}

std::optional<AccessDecision> AccessCache::Wait(const std::string& key,
                                                std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  auto entry = [&]() -> const Entry* {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &*it->second;
  };
  landed_.wait_until(lock, deadline, [&] {
    const Entry* e = entry();
    return e == nullptr || !e->in_flight;
  });
  const Entry* e = entry();
  if (e == nullptr || e->in_flight) return std::nullopt;  // dropped, or still in flight: closed
  return Fresh(*e);
}

std::optional<AccessDecision> AccessCache::Find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  return Fresh(*it->second);
}

void AccessCache::Put(const std::string& key, AccessDecision decision) {
  const std::chrono::milliseconds ttl = decision == AccessDecision::kFailed ? failed_ttl_ : ttl_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ttl.count() <= 0) {
      // Not cached: the entry goes (its claim with it).
      if (auto it = index_.find(key); it != index_.end()) {
        lru_.erase(it->second);
        index_.erase(it);
      }
    } else {
      Entry& e = Touch(key);
      const auto now = Now();
      e.decision = decision;
      e.since = now;
      e.expires = now + ttl;
      e.in_flight = false;
    }
  }
  landed_.notify_all();
}

size_t AccessCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

ReviewRateLimit::ReviewRateLimit(double per_second, double burst, AccessCache::Clock clock)
    : per_second_(std::max(0.0, per_second)),
      burst_(std::max(0.0, burst)),
      clock_(std::move(clock)),
      tokens_(burst_) {}

bool ReviewRateLimit::TryTake() {
  const auto now = clock_ ? clock_() : std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  if (last_ && now > *last_) {
    const double elapsed_s = std::chrono::duration<double>(now - *last_).count();
    tokens_ = std::min(burst_, tokens_ + elapsed_s * per_second_);
  }
  if (!last_ || now > *last_) last_ = now;
  if (per_second_ <= 0 || tokens_ < 1.0) return false;
  tokens_ -= 1.0;
  return true;
}

}  // namespace fracgpu::ui
