#pragma once
// Informer: keeps a local copy of a collection up to date with list + watch, the way
// client-go's reflector does (docs/design/wire-apis.md §6.2): list, then watch from the list's
// resourceVersion with bookmarks; on a closed stream reconnect from the last version seen; on
// 410 Gone relist (and report the differences as add/update/delete); on errors back off with
// jitter. Handlers run on the informer's thread, in event order.
//
//   k8s::Informer pods(client, {.path = "/api/v1/pods"}, {
//       .on_upsert = [&](const json& pod) { ... },
//       .on_delete = [&](const json& pod) { ... }});
//   pods.Start();
//   pods.WaitForSync(std::chrono::seconds(10));
//   ...
//   pods.Stop();  // interrupts the watch at once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "k8s/client.h"

namespace fracgpu::k8s {

/// What an Informer watches.
struct InformerOptions {
  std::string path;  ///< collection, e.g. "/api/v1/pods" or "/api/v1/nodes"
  std::string label_selector;
  std::string field_selector;
  int64_t watch_timeout_s = 300;
  base::Backoff::Options backoff{std::chrono::milliseconds(200), 2.0, 0.5,
                                 std::chrono::milliseconds(30000)};
  uint64_t seed = 0;  ///< backoff jitter seed (0 = random)
  /// Keep whole objects in the store (Snapshot() returns them). False: keep only each object's
  /// identity, {"metadata": {name, namespace, uid, resourceVersion}} (IdentityOf), which is
  /// all a relist needs to tell what changed; for a consumer that keeps its own state from the
  /// handlers (the scheduler: a Node with its annotations and managedFields is several KiB of
  /// json objects, ×15,000). The delete a relist reports then carries that identity only.
  bool keep_objects = true;
};

/// An object's identity as the informer stores it without keep_objects: {"metadata": {"name",
/// "namespace" (when set), "uid", "resourceVersion"}}.
nlohmann::json IdentityOf(const nlohmann::json& obj);

/// Callbacks; any may be empty. Run on the informer thread; must not call Stop().
struct InformerHandlers {
  std::function<void(const nlohmann::json& obj)> on_upsert;  ///< added or modified
  /// Last known state (the watch's DELETED object; after a relist, the stored object, or its
  /// identity without keep_objects).
  std::function<void(const nlohmann::json& obj)> on_delete;
  std::function<void()> on_synced;  ///< after each (re)list is applied
};

/// List+watch loop on its own thread. Thread-safe.
class Informer {
 public:
  /// `client` must outlive the informer.
  Informer(Client* client, InformerOptions options, InformerHandlers handlers);
  ~Informer();
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  void Start();
  /// Stops the loop and joins the thread; an in-flight watch is interrupted.
  void Stop();
  /// True once the first list has been applied.
  bool HasSynced() const;
  /// Blocks until HasSynced() or `timeout`; returns HasSynced().
  bool WaitForSync(std::chrono::milliseconds timeout) const;
  /// A copy of the store (key "<ns>/<name>" → object, or its identity without keep_objects).
  std::map<std::string, nlohmann::json> Snapshot() const;
  /// Number of lists performed (1 + relists); for tests and metrics.
  int64_t list_count() const;
  /// Last resourceVersion seen (list, event or bookmark).
  std::string last_resource_version() const;

 private:
  void Run();
  Status Relist();
  void Apply(const WatchEvent& ev);
  nlohmann::json Stored(const nlohmann::json& obj) const;

  Client* client_;
  InformerOptions options_;
  InformerHandlers handlers_;
  base::StopSignal stop_;
  std::thread thread_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::map<std::string, nlohmann::json> store_;
  std::string rv_;
  // Set under mu_ (for cv_); read without it by HasSynced, which every extender call asks,
  // so that a call never waits on the informer thread's store update.
  std::atomic<bool> synced_{false};
  int64_t lists_ = 0;
};

}  // namespace fracgpu::k8s
