#pragma once
// A small Kubernetes REST client over libcurl (docs/design/ARCHITECTURE.md "k8s/"). Objects are
// nlohmann::json; typed accessors for the few fields we read are in k8s/objects.h.
//
// Usage (the device plugin and the scheduler use it the same way):
//
//   auto config = k8s::LoadConfig(flag_kubeconfig);           // or Config{.server = fake.url()}
//   auto client = k8s::Client::Create(*config);                // Result<std::unique_ptr<Client>>
//   auto node = (*client)->Get(k8s::NodePath("node-a"));       // Result<json>
//   auto pods = (*client)->List("/api/v1/pods", {.field_selector = "spec.nodeName=node-a"});
//   // Merge patch (RFC 7386); `null` deletes a key:
//   (*client)->MergePatch(k8s::PodPath("ns", "p"),
//                         {{"metadata", {{"annotations", {{"hami.io/bind-phase", "success"}}}}}});
//   // Read-modify-write with optimistic concurrency: the patch carries the resourceVersion
//   // read, and a 409 re-reads and retries (up to options.conflict_retries times):
//   (*client)->PatchWithRetry(k8s::NodePath("node-a"), [](const json& node) -> Result<json> {
//     return json{{"metadata", {{"annotations", {{"hami.io/mutex.lock", nullptr}}}}}};
//   });
//   // Long-running list+watch with relist on 410 and backoff: see k8s/informer.h.
//
// Errors map HTTP statuses onto StatusCode: 400/422 → kInvalidArgument, 401/403 →
// kPermissionDenied, 404 → kNotFound, 409 → kConflict, 410/429/5xx/transport/timeout →
// kUnavailable; the message names the method, the path, the HTTP status and the API server's
// `Status.message`. GETs and merge patches (idempotent) are retried on kUnavailable up to
// options.retries times with backoff; POSTs are not retried.
// Thread-safe: one Client may be shared by any number of threads.

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "k8s/config.h"

namespace fracgpu::k8s {

using nlohmann::json;

/// Selectors and paging for List and Watch (Kubernetes API conventions).
struct ListOptions {
  std::string label_selector;    ///< e.g. "app=x,tier!=db"
  std::string field_selector;    ///< e.g. "spec.nodeName=node-a"
  int64_t limit = 500;           ///< page size; pages are followed with `continue`
  std::string resource_version;  ///< "" = consistent read; "0" = any (cached)
};

/// One event of a watch stream (docs/design/wire-apis.md §6.2).
struct WatchEvent {
  std::string type;  ///< ADDED | MODIFIED | DELETED | BOOKMARK | ERROR
  json object;       ///< the object (for ERROR, a metav1.Status)
};

/// Options of one watch request.
struct WatchOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;  ///< changes after this version only ("" = synthetic ADDED first)
  bool allow_bookmarks = true;
  int64_t timeout_s = 300;  ///< server-side timeoutSeconds; the client waits 30 s more
};

/// How a watch ended.
enum class WatchEnd {
  kClosed,   ///< the server closed the stream (timeout) — reconnect from the last version
  kExpired,  ///< 410 Gone (HTTP status or ERROR event) — relist
  kStopped,  ///< the StopSignal fired or the callback returned false
};

/// Client tuning.
struct ClientOptions {
  int retries = 3;           ///< extra attempts for idempotent calls on kUnavailable
  int conflict_retries = 5;  ///< re-read-and-retry rounds of PatchWithRetry on 409
  base::Backoff::Options backoff{std::chrono::milliseconds(100), 2.0, 0.5,
                                 std::chrono::milliseconds(2000)};
  std::string user_agent = "fracgpu";
  /// Idle connections to the API server kept for the next calls (each an idle curl handle
  /// with its open connection). A call made while this many are already idle closes its own
  /// afterwards, and a later call opens a new one: a TCP and TLS handshake on both sides
  /// (kube-apiserver's with its RSA key). 0 or less keeps none. Sized above the calls one
  /// process makes at once: with 16, the scheduler binding 80 pods/s opened about 21 API
  /// connections a second, with 64 about 2 (docs/performance.md run 13).
  int max_idle_connections = 64;
};

/// A Kubernetes REST client. See the file comment for usage and error mapping.
class Client {
 public:
  /// Creates a client. `clock` (not owned, must outlive the client) drives retry sleeps;
  /// null = RealClock. Errors: kInvalidArgument when config.server is empty.
  static Result<std::unique_ptr<Client>> Create(Config config, ClientOptions options = {},
                                                base::Clock* clock = nullptr);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  /// GET `path` (e.g. "/api/v1/nodes/a"); returns the object.
  Result<json> Get(const std::string& path);
  /// Lists a collection, following `continue` pages; returns the list object whose `items`
  /// holds every page and whose metadata.resourceVersion is the last page's.
  Result<json> List(const std::string& path, const ListOptions& options = {});
  /// Lists a collection page by page (`options.limit` items a page, following `continue`),
  /// calling `on_item` with each item of a page before the next page is fetched, so only one
  /// page is held at a time (a LIST of 15,000 nodes as one document held all of them at
  /// once); `on_item` may move from the item. Returns the last page's resourceVersion.
  /// Errors: as List (a page that fails ends the list; items already passed stay passed).
  Result<std::string> ListEach(const std::string& path, const ListOptions& options,
                               const std::function<void(json& item)>& on_item);
  /// POST `body` to `path` (create); returns the created object. Not retried. Create, Update
  /// and MergePatch (and so BindPod, CreateEvent, PatchWithRetry) send fieldValidation=Strict:
  /// an unknown or duplicate field is kInvalidArgument (HTTP 400) naming it.
  Result<json> Create(const std::string& path, const json& body);
  /// PUT `body` to `path` (replace; 409 when body's metadata.resourceVersion is stale).
  Result<json> Update(const std::string& path, const json& body);
  /// DELETE `path`.
  Status Delete(const std::string& path);
  /// PATCH with `application/merge-patch+json` (RFC 7386); returns the patched object.
  Result<json> MergePatch(const std::string& path, const json& patch);
  /// Read-modify-write: GET `path`, call `make_patch(current)`, add the current
  /// metadata.resourceVersion to the returned merge patch, PATCH; on 409 start over (up to
  /// options.conflict_retries times, with backoff). `make_patch` may return an error to abort
  /// (returned as is) or a null json to mean "nothing to change" (returns the current object).
  Result<json> PatchWithRetry(const std::string& path,
                              const std::function<Result<json>(const json& current)>& make_patch);
  /// Creates a Binding of pod `ns/name` to `node` (docs/design/wire-apis.md §6.5); `uid` (optional)
  /// guards against a recreated pod. A pod that is already bound gives kConflict.
  Status BindPod(const std::string& ns, const std::string& name, const std::string& uid,
                 const std::string& node);
  /// What a Binding carries in its metadata besides its name. The API server's BindingREST
  /// (pkg/registry/core/pod/storage/storage.go, setPodNodeAndMetadata, v1.34.4 and v1.37.2)
  /// takes uid and resourceVersion as preconditions of its one update of the pod, merges the
  /// annotations into the pod's (overwriting equal keys) and, where the feature gate
  /// PodTopologyLabelsAdmission is on (beta and on by default from 1.35, alpha and off in 1.34),
  /// the labels into its labels; without the gate the labels are dropped. All in the same write
  /// that sets spec.nodeName: either the pod is bound and carries them, or nothing changed.
  struct BindingMeta {
    std::string uid;               ///< metadata.uid precondition; "" = none
    std::string resource_version;  ///< metadata.resourceVersion precondition; "" = none
    std::map<std::string, std::string> annotations;  ///< merged into the pod's annotations
    std::map<std::string, std::string> labels;       ///< merged into its labels (gate above)
  };
  /// As BindPod above, the Binding carrying `meta`. Errors: a precondition that fails, or a
  /// pod already bound, is kConflict; a missing pod kNotFound; others as Create.
  Status BindPod(const std::string& ns, const std::string& name, const std::string& node,
                 const BindingMeta& meta);
  /// Records a core/v1 Event about `involved` (a pod or node object): `type` Normal|Warning,
  /// `reason` e.g. "BindingFailed", `message` free text, `component` e.g. "fracgpu-scheduler".
  Status CreateEvent(const json& involved, const std::string& type, const std::string& reason,
                     const std::string& message, const std::string& component);
  /// Watches a collection; calls `on_event` for each event in order until the stream ends,
  /// `on_event` returns false, or `stop` fires (interrupts a blocked read at once).
  /// ERROR events with code 410 end the watch with kExpired (not passed to on_event).
  /// Errors: the HTTP/transport error of the request (kUnavailable, kPermissionDenied, …).
  Result<WatchEnd> Watch(const std::string& path, const WatchOptions& options,
                         const std::function<bool(const WatchEvent&)>& on_event,
                         base::StopSignal* stop = nullptr);

  const Config& config() const { return config_; }
  base::Clock* clock() const { return clock_; }

 private:
  struct Handle;
  struct Reply {
    long status = 0;
    std::string body;
  };
  Client(Config config, ClientOptions options, base::Clock* clock);
  Result<Reply> Perform(const std::string& method, const std::string& path_and_query,
                        const std::string& content_type, const std::string& body);
  /// One request; `strict` adds fieldValidation=Strict to the URL (writes), which error
  /// messages leave out: they name the path as the caller gave it.
  Result<json> Call(const std::string& method, const std::string& path_and_query,
                    const std::string& content_type, const std::string& body, bool retry,
                    bool strict = false);
  Status ErrorFor(const std::string& method, const std::string& path, const Reply& reply) const;
  std::string BearerToken();
  void* AcquireHandle();
  void ReleaseHandle(void* handle);
  void ApplyCommon(void* curl, const std::string& url, std::vector<std::string>* headers_out);

  Config config_;
  ClientOptions options_;
  base::Clock* clock_;
  std::mutex mu_;
  std::vector<void*> idle_handles_;  // CURL* kept for connection reuse
  std::string token_;
  std::chrono::steady_clock::time_point token_read_{};
};

/// URL-encodes a query value (RFC 3986 unreserved characters kept).
std::string UrlEncode(const std::string& value);
/// "/api/v1/nodes/<name>".
std::string NodePath(const std::string& name);
/// "/api/v1/namespaces/<ns>/pods/<name>" ("/api/v1/namespaces/<ns>/pods" when name is empty).
std::string PodPath(const std::string& ns, const std::string& name = "");
/// "/apis/coordination.k8s.io/v1/namespaces/<ns>/leases/<name>".
std::string LeasePath(const std::string& ns, const std::string& name = "");

/// For the subcommands' main functions: loads the configuration with LoadConfig(`kubeconfig`)
/// (the file when non-empty, else in-cluster, else $KUBECONFIG, else ~/.kube/config) and creates
/// a client with default options. Errors: LoadConfig's, prefixed "Kubernetes configuration", or
/// Create's, prefixed "Kubernetes client".
Result<std::unique_ptr<Client>> Connect(const std::string& kubeconfig);

}  // namespace fracgpu::k8s
