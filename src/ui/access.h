#pragma once
// The UI's cache of SubjectAccessReview decisions (docs/ui.md "What a viewer sees of other
// namespaces"): whether a user (with groups) may list notebooks in a namespace, the decision
// that names a pod of that namespace on the dashboard. The dashboard refreshes every 5 s; the
// cache keeps it from asking the API server again for every refresh.

#include <chrono>
#include <cstddef>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace fracgpu::ui {

/// A decision on (user, groups, namespace): allowed, denied, or the review failed (an API
/// server error: treated as denied, fail closed, kept for a shorter time).
enum class AccessDecision { kAllowed, kDenied, kFailed };

/// Bounded, thread-safe cache of AccessDecisions with a time to live per outcome. At most
/// `max_entries` entries; when full, the least recently used one goes. Expired entries are
/// never answered (and are dropped when met).
class AccessCache {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  /// `ttl` for kAllowed and kDenied, `failed_ttl` for kFailed (0 = not cached);
  /// `max_entries` at least 1 (0 is taken as 1); `clock` null = std::chrono::steady_clock.
  AccessCache(std::chrono::milliseconds ttl, std::chrono::milliseconds failed_ttl,
              size_t max_entries, Clock clock = nullptr);

  /// The cache key of (user, groups, namespace): the groups in sorted order, so the same set
  /// in another order hits the same entry.
  static std::string Key(const std::string& user, std::vector<std::string> groups,
                         const std::string& ns);

  /// The decision cached under `key` while it is younger than its TTL; nullopt otherwise.
  std::optional<AccessDecision> Find(const std::string& key);
  /// Records `decision` under `key` now (replacing any entry).
  void Put(const std::string& key, AccessDecision decision);
  /// Entries held (expired ones not yet dropped included).
  size_t size() const;

 private:
  struct Entry {
    std::string key;
    AccessDecision decision;
    std::chrono::steady_clock::time_point expires;
  };
  std::chrono::steady_clock::time_point Now() const;

  const std::chrono::milliseconds ttl_;
  const std::chrono::milliseconds failed_ttl_;
  const size_t max_entries_;
  const Clock clock_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  ///< most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace fracgpu::ui
