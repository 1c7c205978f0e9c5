#pragma once
// A fake kube-apiserver over real HTTP on 127.0.0.1 (ARCHITECTURE.md "Testing without a GPU or
// a cluster"). It serves nodes, pods, leases and events with the real REST shapes
// (wire-apis.md §6): get, list (labelSelector; fieldSelector on spec.nodeName, metadata.name,
// metadata.namespace, status.phase), watch (resourceVersion, bookmarks, timeoutSeconds),
// POST (create), PUT (409 on a stale metadata.resourceVersion), PATCH (merge RFC 7386 and
// strategic-merge treated alike, JSON patch RFC 6902; 409 when a merge patch carries a stale
// metadata.resourceVersion), DELETE, pods/<name>/binding (409 when already bound or the UID
// differs) and pods/<name>/status.
//
// Usage:
//
//   fracgpu::fakes::FakeApiServer api;               // listens on 127.0.0.1:<free port>
//   api.Put("nodes", node_json);                     // seed objects (create or replace)
//   api.Put("pods", pod_json);
//   auto client = fracgpu::k8s::Client::Create({.server = api.url()});
//   ...
//   auto pod = api.Get("pods", "ns", "name");        // std::optional<json>, inspect results
//   api.WaitFor([&] { return api.Get(...)->...; });  // condition wait, no sleeps
//   api.FailNext("PATCH", "/api/v1/nodes/", 500);    // fault injection (next matching call)
//   api.ExpireHistory();                             // watches from older versions get 410
//   api.DropWatches();                               // cut every open watch mid-stream
//   api.SendBookmarks();                             // BOOKMARK to watches that asked for them
//
// Resource names: "nodes" (cluster-scoped), "pods", "leases", "events" (namespaced).
// Thread-safe.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace httplib {
class Server;
}

namespace fracgpu::fakes {

/// One request the fake received (for assertions).
struct RecordedRequest {
  std::string method;
  std::string path;   ///< without the query
  std::string query;  ///< raw "a=b&c=d"
  std::string body;
  std::string content_type;
};

/// The fake API server. Starts listening in the constructor; stops in the destructor.
class FakeApiServer {
 public:
  /// Listens on 127.0.0.1 at `port` (0 = a free port).
  explicit FakeApiServer(int port = 0);
  ~FakeApiServer();
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  /// "http://127.0.0.1:<port>".
  std::string url() const;
  int port() const { return port_; }

  // ---- direct access to the store (no HTTP); every change is seen by watches ----

  /// Creates or replaces an object (metadata.namespace defaults to "default" for namespaced
  /// resources; uid and creationTimestamp are filled when absent). Returns the stored object
  /// with its new resourceVersion.
  nlohmann::json Put(const std::string& resource, nlohmann::json obj);
  /// The stored object, or nullopt. `ns` is ignored for nodes.
  std::optional<nlohmann::json> Get(const std::string& resource, const std::string& ns,
                                    const std::string& name) const;
  /// Every object of a resource, sorted by key.
  std::vector<nlohmann::json> List(const std::string& resource) const;
  /// Deletes an object (emits DELETED); returns false when absent.
  bool Remove(const std::string& resource, const std::string& ns, const std::string& name);
  /// Applies an RFC 7386 merge patch directly (emits MODIFIED); returns false when absent.
  bool Patch(const std::string& resource, const std::string& ns, const std::string& name,
             const nlohmann::json& merge_patch);

  /// Waits (condition variable, no polling sleeps) until `pred()` is true after some store
  /// change, or `timeout`; returns pred().
  bool WaitFor(const std::function<bool()>& pred,
               std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;

  // ---- fault injection ----

  /// The next `count` requests whose method equals `method` ("" = any) and whose path starts
  /// with `path_prefix` get HTTP `status` with a Status body carrying `message`.
  void FailNext(const std::string& method, const std::string& path_prefix, int status, int count = 1,
                const std::string& message = "injected failure");
  /// Forgets the event history: a watch from any version before now gets 410 Gone (as an
  /// ERROR event on an open stream, as the real API server does).
  void ExpireHistory();
  /// Makes the next `count` watch requests fail with HTTP 410 before streaming.
  void RejectNextWatches(int count);
  /// Closes every open watch abruptly (no terminating chunk), like a dropped connection.
  void DropWatches();
  /// Sends a BOOKMARK with the current resourceVersion to every watch that allowed them.
  void SendBookmarks();

  // ---- observation ----

  /// Every request received so far, in order.
  std::vector<RecordedRequest> Requests() const;
  /// Number of requests whose method matches (""=any) and whose path starts with `path_prefix`.
  int CountRequests(const std::string& method, const std::string& path_prefix) const;
  /// Number of watch streams currently open.
  int OpenWatches() const;
  /// The current (global) resourceVersion.
  int64_t resource_version() const;

 private:
  struct Event {
    int64_t rv;
    std::string type;
    std::string resource;
    nlohmann::json object;
  };
  struct Failure {
    std::string method, prefix;
    int status;
    int count;
    std::string message;
  };
  friend class FakeApiServerRoutes;

  nlohmann::json StoreLocked(const std::string& resource, nlohmann::json obj, const std::string& type);
  void RemoveLocked(const std::string& resource, const std::string& key);
  static std::string KeyOf(const std::string& resource, const std::string& ns, const std::string& name);

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  std::map<std::string, std::map<std::string, nlohmann::json>> store_;  // resource → key → obj
  std::deque<Event> history_;
  int64_t rv_ = 100;
  int64_t expired_before_ = 0;      // watches from rv < this get 410
  int64_t drop_generation_ = 0;     // bumping it cuts open watches
  int64_t bookmark_generation_ = 0;
  int reject_watches_ = 0;
  int open_watches_ = 0;
  int64_t next_uid_ = 1;
  bool stopping_ = false;
  std::vector<Failure> failures_;
  std::vector<RecordedRequest> requests_;
};

}  // namespace fracgpu::fakes
