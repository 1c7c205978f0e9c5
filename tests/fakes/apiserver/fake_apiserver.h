#pragma once
// A fake kube-apiserver over real HTTP on 127.0.0.1 (docs/design/ARCHITECTURE.md "Testing without a
// GPU or a cluster"). It serves nodes, pods, leases and events with the real REST shapes
// (docs/design/wire-apis.md §6): get, list (labelSelector; fieldSelector on spec.nodeName,
// metadata.name, metadata.namespace, status.phase), watch (resourceVersion, bookmarks,
// timeoutSeconds), POST (create), PUT (409 on a stale metadata.resourceVersion), PATCH (merge RFC
// 7386 and strategic-merge treated alike, JSON patch RFC 6902; 409 when a merge patch carries a
// stale metadata.resourceVersion), DELETE, pods/<name>/binding (409 when already bound, being
// deleted or gated, or the UID or resourceVersion differs; the Binding's annotations and labels
// merged into the pod's, as the real one does) and pods/<name>/status.
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
//   api.SetTokens({{"tok-a", "system:serviceaccount:ns:a"}});  // bearer tokens → users (401
//   otherwise) api.SetPodAdmission(fn);                         // a mutating webhook on pod
//   CREATE/UPDATE api.AuditLog();                                  // who did what, in RBAC terms
//
// What it serves is a table of ResourceType rows (BuiltinResources()): core/v1 "nodes"
// (cluster-scoped), "pods", "events" (namespaced); coordination.k8s.io/v1 "leases";
// resource.k8s.io/v1 (DRA) "deviceclasses", "resourceslices" (cluster-scoped),
// "resourceclaims" (namespaced, with the status subresource), "resourceclaimtemplates"
// (namespaced); field selectors spec.driver and spec.pool.name as well as spec.nodeName
// (k8s.io/api/resource/v1 ResourceSliceSelector*). AddResource() adds a row, as installing a
// CRD does (e.g. Kubeflow's kubeflow.org/v1 notebooks); SetAccessReviewer() serves
// authorization.k8s.io/v1 SubjectAccessReviews. GET /api/v1 and /apis/<group>/<version> answer
// the group's APIResourceList (discovery) from the table.
// Thread-safe.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace httplib {
class Server;
}

namespace fracgpu::fakes {

/// Waits (at most 10 s) until `server`'s accept loop runs after listen_after_bind() was started
/// on another thread. cpp-httplib 0.11 drops a stop() that comes before is_running() turns true,
/// so without this wait a server stopped right after its start leaves its thread in accept()
/// and the join in the owner's destructor hangs. Every test front built on httplib calls it.
void WaitUntilRunning(httplib::Server& server);

/// One request the fake received (for assertions).
struct RecordedRequest {
  std::string method;
  std::string path;   ///< without the query
  std::string query;  ///< raw "a=b&c=d"
  std::string body;
  std::string content_type;
  int remote_port = 0;  ///< the client's TCP port: one per connection, so reuse can be seen
};

/// One request in Kubernetes authorization terms (what RBAC would be asked to allow), as the
/// API server's authorizer sees it (kubernetes.io/docs/reference/access-authn-authz/authorization/
/// "Determine the request verb"): GET on an object = get, on a collection = list, with
/// watch=true = watch; POST = create; PUT = update; PATCH = patch; DELETE = delete.
struct AuditRecord {
  std::string user;         ///< from the bearer token; "system:anonymous" without one
  std::string verb;         ///< get | list | watch | create | update | patch | delete
  std::string api_group;    ///< "" for the core group, "coordination.k8s.io" for leases
  std::string resource;     ///< nodes | pods | leases | events (or the unknown path segment)
  std::string subresource;  ///< binding | status | ""
  std::string ns;           ///< namespace ("" for cluster-scoped or all-namespace requests)
  std::string name;         ///< object name ("" for collections and creates)
  int code = 0;             ///< HTTP status answered
};

/// What the API server sends a mutating admission webhook for a pod (docs/design/wire-apis.md
/// §5.1).
struct AdmissionCall {
  std::string operation;      ///< "CREATE" | "UPDATE"
  std::string user;           ///< userInfo.username (the caller's identity)
  std::string ns;             ///< request.namespace
  std::string name;           ///< request.name ("" on CREATE with generateName)
  nlohmann::json object;      ///< the incoming object
  nlohmann::json old_object;  ///< the stored object on UPDATE; null on CREATE
};

/// The webhook's answer (docs/design/wire-apis.md §5.2).
struct AdmissionVerdict {
  bool allowed = true;
  int code = 403;        ///< status.code when denied
  std::string message;   ///< status.message when denied
  nlohmann::json patch;  ///< RFC 6902 array to apply when allowed; null = none
};

/// One kind of object the fake serves, in the API server's discovery terms (an APIResource of
/// the group/version's APIResourceList). The store is keyed by `resource`, so a plural names
/// one row.
struct ResourceType {
  std::string group;     ///< API group; "" = the core group (/api/v1)
  std::string version;   ///< "v1"
  std::string resource;  ///< plural, lower case: the path segment ("notebooks")
  std::string kind;      ///< "Notebook"; lists are "<kind>List"
  bool namespaced = true;
  /// false: a review (create-only, answered and not stored), as SubjectAccessReview is.
  bool stored = true;

  /// "v1" for the core group, else "<group>/<version>".
  std::string api_version() const { return group.empty() ? version : group + "/" + version; }
};

/// The rows every FakeApiServer serves from its construction.
const std::vector<ResourceType>& BuiltinResources();

/// Kubeflow's Notebook CRD (kubeflow.org/v1 notebooks, namespaced): AddResource(kNotebookResource).
extern const ResourceType kNotebookResource;

/// The answer to one SubjectAccessReview (authorization.k8s.io/v1 SubjectAccessReviewStatus).
struct AccessDecision {
  bool allowed = false;
  std::string reason;  ///< status.reason ("" = none)
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

  // ---- what is served ----

  /// Serves `type` like the built-in rows (get, list, watch, create, update, patch, delete and
  /// discovery), as installing a CRD makes the API server do. False (nothing changed) when
  /// `type.resource` is already served, or `type` has an empty group, version, resource or kind.
  bool AddResource(const ResourceType& type);

  /// Serves POST /apis/authorization.k8s.io/v1/subjectaccessreviews (what a component asks
  /// before acting for a user, e.g. `fracgpu ui`): a body without a `spec` object gets 400;
  /// otherwise `reviewer(spec)` decides and the answer (201) is the review with status
  /// {allowed, reason}. Reviews are not stored. An empty function stops serving them (404).
  void SetAccessReviewer(std::function<AccessDecision(const nlohmann::json& spec)> reviewer);

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
  void FailNext(const std::string& method, const std::string& path_prefix, int status,
                int count = 1, const std::string& message = "injected failure");
  /// Calls `hook(method, path)` (path without the query) before serving each request that
  /// authentication and FailNext let through, outside the store lock, on the request's own
  /// thread: a test may block in it to hold one request in flight (e.g. a Binding) while it
  /// sends others. Empty function = none.
  void SetRequestHook(std::function<void(const std::string& method, const std::string& path)> hook);
  /// Drops every failure FailNext queued that has not happened yet.
  void ClearFailures();
  /// Forgets the event history: a watch from any version before now gets 410 Gone (as an
  /// ERROR event on an open stream, as the real API server does).
  void ExpireHistory();
  /// Makes the next `count` watch requests fail with HTTP 410 before streaming.
  void RejectNextWatches(int count);
  /// Closes every open watch abruptly (no terminating chunk), like a dropped connection.
  void DropWatches();
  /// While held, a new watch request waits (before it is answered) until the hold is
  /// released: a test can then make several changes that no watch can see one by one.
  void HoldWatches(bool hold);
  /// Sends a BOOKMARK with the current resourceVersion to every watch that allowed them.
  void SendBookmarks();

  // ---- authentication and admission ----

  /// Maps bearer tokens to user names. When non-empty, a request without a known token gets
  /// 401 Unauthorized (and is audited as "system:anonymous"); when empty (the default), every
  /// request is served as "system:anonymous".
  void SetTokens(std::map<std::string, std::string> token_to_user);
  /// Installs a mutating admission webhook for pods, called (outside the store lock) on HTTP
  /// POST to pods, PUT and PATCH of a pod (not the status or binding subresources), with the
  /// object as it would be stored. A denial answers the caller with `code` and a Status
  /// "admission webhook denied the request: <message>"; a patch is applied before storing
  /// (a patch that does not apply gives 500). Direct store access (Put, Patch) bypasses it.
  /// Empty function = none.
  void SetPodAdmission(std::function<AdmissionVerdict(const AdmissionCall&)> webhook);

  /// Whether a Binding's metadata.labels are copied onto the pod, as the API server does where
  /// the feature gate PodTopologyLabelsAdmission is on (beta and on by default from Kubernetes
  /// 1.35; alpha and off in 1.34). Default true (the newest pinned release). A Binding's
  /// metadata.annotations are always merged into the pod's (every supported release).
  void SetBindingCopiesLabels(bool copy);

  // ---- observation ----

  /// Every request served so far in authorization terms, in order of arrival.
  std::vector<AuditRecord> AuditLog() const;

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

  nlohmann::json StoreLocked(const std::string& resource, nlohmann::json obj,
                             const std::string& type);
  void RemoveLocked(const std::string& resource, const std::string& key);
  std::string KeyOf(const std::string& resource, const std::string& ns,
                    const std::string& name) const;
  /// The served row of `resource`, or nullopt.
  std::optional<ResourceType> TypeOf(const std::string& resource) const;
  /// Every served row.
  std::vector<ResourceType> Types() const;

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  std::map<std::string, std::map<std::string, nlohmann::json>> store_;  // resource → key → obj
  std::deque<Event> history_;
  int64_t rv_ = 100;
  int64_t expired_before_ = 0;   // watches from rv < this get 410
  int64_t drop_generation_ = 0;  // bumping it cuts open watches
  int64_t bookmark_generation_ = 0;
  int reject_watches_ = 0;
  bool hold_watches_ = false;
  int open_watches_ = 0;
  int64_t next_uid_ = 1;
  bool stopping_ = false;
  bool binding_copies_labels_ = true;
  std::vector<Failure> failures_;
  std::vector<RecordedRequest> requests_;
  std::vector<AuditRecord> audit_;
  std::map<std::string, std::string> tokens_;
  std::function<AdmissionVerdict(const AdmissionCall&)> admission_;
  std::function<void(const std::string&, const std::string&)> request_hook_;
  std::function<AccessDecision(const nlohmann::json&)> reviewer_;

  // The served rows: their own lock (taken after mu_ when both are held), read on every request.
  mutable std::mutex types_mu_;
  std::vector<ResourceType> types_;
};

}  // namespace fracgpu::fakes
