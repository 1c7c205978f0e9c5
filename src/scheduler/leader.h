#pragma once
// Leader election through a coordination.k8s.io/v1 Lease, with client-go's semantics: the
// holder renews spec.renewTime every retry period; a candidate takes over when the record it
// observed has not changed for leaseDurationSeconds of *its own* clock (no cross-node clock
// comparison). Updates carry the Lease's resourceVersion, so two candidates cannot both win.

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "base/status.h"
#include "k8s/client.h"

namespace fracgpu::scheduler {

struct LeaderElectionConfig {
  std::string lease_namespace = "fracgpu-system";
  std::string lease_name = "fracgpu-scheduler";
  std::string identity;  ///< this replica (pod name); must be unique
  std::chrono::seconds lease_duration{15};
  std::chrono::seconds retry_period{2};
};

/// Thread-safe.
class LeaderElector {
 public:
  /// `client` and `clock` must outlive the elector. `on_change(true/false)` runs on the
  /// elector's thread (or the caller of TryAcquireOrRenew) when leadership changes.
  LeaderElector(k8s::Client* client, base::Clock* clock, LeaderElectionConfig config,
                std::function<void(bool)> on_change = nullptr);
  ~LeaderElector();
  /// One round: create, renew or take over the Lease. Returns is_leader() after the round.
  bool TryAcquireOrRenew();
  /// Whether this replica may act as leader now: CheckLeader().ok().
  bool is_leader() const { return CheckLeader().ok(); }
  /// Ok while this replica holds the Lease and its last successful renew (the clock's time
  /// when that round began, before the write) is younger than lease_duration on its own
  /// clock: past that a candidate may have taken over (client-go's rule), so a replica that
  /// was frozen or cut off refuses to write even before its next round notices. Errors:
  /// kUnavailable naming why (not the holder; the age of the last renew and the duration).
  /// Check it right before every write made as leader.
  Status CheckLeader() const;
  /// Runs rounds every retry period on a thread until Stop().
  void Start();
  /// Stops the rounds; if this replica holds the Lease, releases it (holderIdentity "",
  /// leaseDurationSeconds 1, guarded by resourceVersion) so a successor takes over at its next
  /// round instead of after leaseDurationSeconds. Errors of the release are logged.
  void Stop();

 private:
  void SetLeader(bool leader);
  bool Round();  // TryAcquireOrRenew without the exception guard
  void NoteRenewed(std::chrono::system_clock::time_point at);
  void Release();

  k8s::Client* client_;
  base::Clock* clock_;
  LeaderElectionConfig config_;
  std::function<void(bool)> on_change_;
  std::atomic<bool> leader_{false};
  /// Clock time (ns since the epoch) at the start of the last round that created or renewed
  /// the Lease.
  std::atomic<int64_t> renewed_ns_{0};
  std::string observed_record_;
  std::chrono::system_clock::time_point observed_time_{};
  base::StopSignal stop_;
  std::thread thread_;
};

}  // namespace fracgpu::scheduler
