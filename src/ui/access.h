#pragma once
// The UI's cache of SubjectAccessReview decisions (docs/ui.md "What a viewer sees of other
// namespaces"): whether a user (with groups) may list notebooks in a namespace, the decision
// that names a pod of that namespace on the dashboard. The dashboard refreshes every 5 s; the
// cache keeps it from asking the API server again for every refresh, orders the reviews a
// request may send (oldest decision first), lets concurrent requests share one review per key
// (single-flight), and ReviewRateLimit bounds the reviews of all requests together.

#include <chrono>
#include <condition_variable>
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
/// `max_entries` entries; when full, the least recently used one goes. An expired decision is
/// never answered, but its entry is kept (until the LRU drops it) to tell how old the key's
/// last decision is (Look), which orders the reviews. A key asked but never decided is recorded
/// with the time it was first asked. A key whose review is being made is "in flight" (Claim):
/// other requests wait for that review (Wait) instead of sending their own.
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

  /// What Look tells of a key.
  struct Lookup {
    std::optional<AccessDecision> decision;  ///< the decision while younger than its TTL
    bool in_flight = false;  ///< no fresh decision and another request is reviewing the key
    bool decided = false;    ///< decided at least once (the entry not dropped since)
    /// When last decided (`decided`), else when first asked: the older, the sooner reviewed.
    std::chrono::steady_clock::time_point since{};
  };
  /// The key's state; records a key not held as asked now (undecided, `since` = now).
  Lookup Look(const std::string& key);

  /// The outcome of Claim.
  enum class ClaimResult {
    kClaimed,   ///< the caller must review the key, then Put (or Abandon) it
    kInFlight,  ///< another request is reviewing it: Wait for its decision
    kDecided,   ///< a fresh decision is cached (in *decided)
  };
  /// Marks `key` in flight for the caller unless a fresh decision is cached or it already is.
  ClaimResult Claim(const std::string& key, AccessDecision* decided);
  /// Ends the caller's claim on `key` without a decision (the review was not made); waiters
  /// wake and find none (fail closed).
  void Abandon(const std::string& key);
  /// Waits until `key` is no longer in flight or until `deadline` (steady_clock, real time,
  /// not the cache's clock); the fresh decision then, nullopt on timeout or if none.
  std::optional<AccessDecision> Wait(const std::string& key,
                                     std::chrono::steady_clock::time_point deadline);

  /// The decision cached under `key` while it is younger than its TTL; nullopt otherwise.
  std::optional<AccessDecision> Find(const std::string& key);
  /// Records `decision` under `key` now (replacing any entry), ends a claim on it and wakes
  /// its waiters.
  void Put(const std::string& key, AccessDecision decision);
  /// Entries held (expired and undecided ones included).
  size_t size() const;

 private:
  struct Entry {
    std::string key;
    std::optional<AccessDecision> decision;         ///< nullopt: asked, never decided
    std::chrono::steady_clock::time_point since;    ///< decided, or first asked
    std::chrono::steady_clock::time_point expires;  ///< of the decision
    bool in_flight = false;
  };
  std::chrono::steady_clock::time_point Now() const;
  /// The entry of `key`, made most recently used; created (undecided, asked now) when absent.
  /// mu_ held.
  Entry& Touch(const std::string& key);
  /// The fresh decision of `e`, if any. mu_ held.
  std::optional<AccessDecision> Fresh(const Entry& e) const;

  const std::chrono::milliseconds ttl_;
  const std::chrono::milliseconds failed_ttl_;
  const size_t max_entries_;
  const Clock clock_;
  mutable std::mutex mu_;
  std::condition_variable landed_;  ///< a claim ended (Put or Abandon)
  std::list<Entry> lru_;            ///< most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

/// Token bucket bounding the SubjectAccessReviews the dashboard sends, all users together:
/// `per_second` tokens a second, at most `burst` held (starts full). Thread-safe. A rate or
/// burst of 0 allows no review at all (every undecided namespace stays unnamed: fail closed).
class ReviewRateLimit {
 public:
  /// `clock` null = std::chrono::steady_clock.
  ReviewRateLimit(double per_second, double burst, AccessCache::Clock clock = nullptr);
  /// Takes one token: true if one was there.
  bool TryTake();

 private:
  const double per_second_;
  const double burst_;
  const AccessCache::Clock clock_;
  std::mutex mu_;
  double tokens_;
  std::optional<std::chrono::steady_clock::time_point> last_;  ///< of the last refill
};

}  // namespace fracgpu::ui
