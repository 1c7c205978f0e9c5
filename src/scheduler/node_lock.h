#pragma once
// The node lock `hami.io/mutex.lock` (docs/design/CONTRACT.md §2; docs/design/hami-behaviour.md
// §3.7): value
// `<RFC3339 time>,<namespace>,<pod name>` on the Node, set by the scheduler at bind and
// released by the device plugin after Allocate, by the scheduler when a bind fails or the
// locking pod no longer exists, and by anyone once older than the expiry (5 min). Set and
// release use a merge patch carrying the node's resourceVersion (409 → re-read and retry). The
// value is encoded and decoded by core/node_lock_codec.h.

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/status.h"
#include "k8s/client.h"

namespace fracgpu::scheduler {

/// Takes and releases node locks through the API server.
class NodeLocker {
 public:
  /// `client` must outlive the locker; `clock` decides expiry.
  NodeLocker(k8s::Client* client, base::Clock* clock,
             std::chrono::seconds expiry = std::chrono::minutes(5));
  /// Locks `node` for pod ns/name. Succeeds when the node is unlocked, already locked by this
  /// pod, locked longer than the expiry, or locked by a pod that no longer exists.
  /// Errors: kConflict ("node X is locked by ns/pod since T"), or the API error. `current`:
  /// the Node as the caller just read it (the first attempt patches against its
  /// resourceVersion without reading the node again; on 409 the node is read afresh).
  /// `lock_value` (optional): the lock's value as written on success, or as met on
  /// kConflict (empty otherwise).
  Status Lock(const std::string& node, const std::string& ns, const std::string& name,
              const nlohmann::json* current = nullptr, std::string* lock_value = nullptr);
  /// Releases the lock if it is held by ns/name (or `force`). Errors: the API error.
  Status Unlock(const std::string& node, const std::string& ns, const std::string& name,
                bool force = false);

 private:
  k8s::Client* client_;
  base::Clock* clock_;
  std::chrono::seconds expiry_;
};

}  // namespace fracgpu::scheduler
