#pragma once
// The UI's JSON API and static files (docs/ui.md):
//   POST /api/preview         form → Notebook (JSON + YAML), webhook validation, fit preview
//   GET  /api/cluster         nodes, GPUs, usage and slices (the dashboard)
//   GET  /api/options         images, GPU types and UUIDs, policies, the caller's identity
//   POST /api/notebooks       create the Notebook, after a SubjectAccessReview for the caller
//   GET  /api/notebooks?namespace=  the caller's notebooks there and their state (also checked)
//   GET  /…                   web/ files (index.html for "/")
// The caller is the user named by a header (default `kubeflow-userid`, which Kubeflow's
// gateway sets after authentication), trusted only on a request that proves it came through the
// gateway (UiOptions::gateway_secret or gateway_client_names; 401 otherwise, issue 33). The
// server's own credentials never create or list notebooks for a caller the API server has not
// authorised (SubjectAccessReview, authorization.k8s.io/v1).

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/fit.h"
#include "http/server.h"
#include "k8s/client.h"
#include "ui/access.h"
#include "ui/cluster.h"
#include "ui/form.h"

namespace fracgpu::ui {

/// Settings of the UI service.
struct UiOptions {
  std::string user_header = "kubeflow-userid";  ///< header carrying the caller's user name
  std::string groups_header;                    ///< optional header with comma-separated groups
  std::string user_prefix;  ///< prepended to the user name for the SAR (e.g. "oidc:")
  /// Shared secret the gateway sets in `gateway_secret_header` on every request it forwards
  /// (as Kubeflow's gateway sets kubeflow-userid): when set, the user and groups headers are
  /// trusted only on requests that carry it (compared in constant time; 401 otherwise).
  std::string gateway_secret;
  std::string gateway_secret_header = "x-fracgpu-gateway-secret";  ///< header carrying it
  /// Client-certificate names of the gateway (mTLS: http::ServerOptions::client_ca_file): a
  /// request whose verified certificate has one of them is trusted as the gateway's.
  std::vector<std::string> gateway_client_names;
  /// When neither of the two above is set: whether the headers are trusted as they come
  /// (`fracgpu ui` allows it only on a loopback listener or with --trust-user-header).
  bool trust_user_header = true;
  std::vector<std::string> images;  ///< images the form offers
  std::string web_dir;              ///< folder of index.html, *.js, *.css ("" = no static files)
  NotebookOptions notebook;         ///< resource names
  core::FitOptions fit;             ///< default GPU policy for the fit preview
  /// Dashboard-only mode (`--dashboard-only`): for clusters without Kubeflow. "/" is the
  /// dashboard; the notebook endpoints answer 404 saying they need Kubeflow's Notebook CRD and
  /// its auth gateway; the cluster view, options and preview work without a user header.
  bool dashboard_only = false;
  /// DRA mode (`--dra-mode`, for clusters running `fracgpu dra-driver` and the webhook's
  /// `--dra-mode`): the notebook's pod is converted as the webhook converts it
  /// (core::ConvertHamiPod; what DRA cannot express is an error of the preview and a 400 of the
  /// create) and the preview places its claims on the ResourceSlices (DraFitPreviewJson). The
  /// ClusterSource should be in DRA mode too (either one turns the conversion on).
  bool dra_mode = false;
  /// How long a decision on "may this user see the pods of that namespace" (a
  /// SubjectAccessReview, allowed or denied) is reused for the dashboard (AccessCache).
  std::chrono::milliseconds access_cache_ttl{30000};
  /// The same for a review that failed (API server error; the namespace stays unnamed).
  std::chrono::milliseconds access_cache_failed_ttl{5000};
  /// Most (user, groups, namespace) entries held: decisions, expired ones (their age orders
  /// the reviews) and namespaces asked but not yet decided (least recently used dropped first).
  size_t access_cache_entries = 4096;
  /// How long a request waits for a review another request is making of the same (user,
  /// groups, namespace) (single-flight); past it the namespace stays unnamed in that answer.
  std::chrono::milliseconds access_review_wait{2000};
  /// SubjectAccessReviews the dashboard may send a second, all viewers together
  /// (ReviewRateLimit; a token bucket holding at most access_reviews_burst); beyond, undecided
  /// namespaces stay unnamed in that answer. 0 sends none.
  double access_reviews_per_second = 50;
  double access_reviews_burst = 50;  ///< see access_reviews_per_second
  /// The cache's clock (tests); null = std::chrono::steady_clock.
  std::function<std::chrono::steady_clock::time_point()> clock;
};

/// Most SubjectAccessReviews one GET /api/cluster sends to decide in which namespaces to name
/// pods (slices and idle holders; one per namespace not in the AccessCache, never-decided and
/// then oldest decisions first; the namespaces beyond stay unnamed in that answer).
inline constexpr size_t kMaxViewReviews = 16;

/// The message of the notebook endpoints in dashboard-only mode.
inline constexpr char kDashboardOnlyMessage[] =
    "fracgpu ui runs with --dashboard-only: creating and listing notebooks needs Kubeflow's "
    "Notebook CRD (notebooks.kubeflow.org/v1) and its auth gateway (which sets the user header)";

/// Whether the API server serves Kubeflow's Notebook resource (GET /apis/kubeflow.org/v1 lists
/// `notebooks`). OK when it does; kNotFound with a message saying what is missing and what to do
/// (install Kubeflow's notebook controller, or run --dashboard-only); the client's error when
/// the API server cannot be asked.
Status CheckNotebookCrd(k8s::Client& client);

/// The Kubernetes path of a namespace's notebooks:
/// "/apis/kubeflow.org/v1/namespaces/<ns>/notebooks".
std::string NotebooksPath(const std::string& ns);

/// Asks the API server whether `user` (with `groups`) may `verb` notebooks (group
/// kubeflow.org) in `ns` (POST /apis/authorization.k8s.io/v1/subjectaccessreviews).
/// Returns OK when status.allowed is true; kPermissionDenied naming the user, the verb and
/// the namespace (and the API server's reason, if any) when not; the client's error when
/// the review could not be made (then the caller must refuse too).
Status ReviewAccess(k8s::Client& client, const std::string& user,
                    const std::vector<std::string>& groups, const std::string& verb,
                    const std::string& ns);

/// A notebook's state for the list: "Ready", "Stopped", "Waiting: <reason>",
/// "Terminated: <reason>" or "Pending", from status.readyReplicas, status.containerState and
/// the `kubeflow-resource-stopped` annotation (Kubeflow notebook controller).
std::string NotebookState(const nlohmann::json& notebook);

/// The service: handlers over a client and a cluster source (not owned; must outlive it).
class UiService {
 public:
  UiService(k8s::Client* client, ClusterSource* cluster, UiOptions options);
  /// Adds every route to `server` (before server.Start()).
  void Register(http::Server& server) const;

  http::Response Preview(const http::Request& req) const;
  http::Response Cluster(const http::Request& req) const;
  http::Response Options(const http::Request& req) const;
  http::Response CreateNotebook(const http::Request& req) const;
  http::Response ListNotebooks(const http::Request& req) const;
  http::Response Static(const http::Request& req) const;

 private:
  /// DRA mode: set in the options or the cluster source (either makes the preview convert the
  /// pod as the webhook's DRA mode does).
  bool DraMode() const { return options_.dra_mode || cluster_->dra_mode(); }
  /// Whether `req` came through the gateway (see UiOptions::gateway_secret).
  bool FromGateway(const http::Request& req) const;
  /// The 401 for a request that did not come through the gateway.
  http::Response NotFromGateway() const;
  /// Of `asked`, the namespaces whose pods (slices, idle holders) the caller of `req` may see
  /// named on the dashboard: those where the user (through the gateway, never in
  /// --dashboard-only) may list notebooks (ReviewAccess "list", the check of "Your notebooks"),
  /// decided from access_cache_ or by a review: at most kMaxViewReviews reviews a request, to
  /// the namespaces never decided and then to the oldest decisions first, each taking a token
  /// of review_limit_; a review another request is making is waited for (at most
  /// access_review_wait), not sent again. A review that fails, is not made or is not waited
  /// out hides the namespace. The one rule for naming pods.
  std::set<std::string> VisibleNamespaces(const http::Request& req,
                                          const std::vector<std::string>& asked) const;
  /// The caller's identity or a 403 response naming the header.
  Status Caller(const http::Request& req, std::string* user,
                std::vector<std::string>* groups) const;

  k8s::Client* client_;
  ClusterSource* cluster_;
  UiOptions options_;
  std::unique_ptr<AccessCache> access_cache_;      ///< VisibleNamespaces' decisions
  std::unique_ptr<ReviewRateLimit> review_limit_;  ///< their reviews, all requests together
};

}  // namespace fracgpu::ui
