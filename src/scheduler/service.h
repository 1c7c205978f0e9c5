#pragma once
// The `fracgpu scheduler` service: informers on nodes and pods feeding the ClusterState, the
// HTTP(S) server with /webhook, /filter, /prioritize, /bind, /healthz, /readyz, /metrics,
// metrics, the node handshake and (optionally) leader election. The webhook answers on every
// replica; the extender only on the leader (a follower answers {"Error": "not the leader"}).

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "http/server.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "metrics/registry.h"
#include "scheduler/borrower_guard.h"
#include "scheduler/events.h"
#include "scheduler/extender.h"
#include "scheduler/leader.h"
#include "scheduler/quota.h"
#include "scheduler/state.h"
#include "scheduler/webhook.h"

namespace fracgpu::scheduler {

struct SchedulerOptions {
  http::ServerOptions http;
  /// Require a verified client certificate (http.client_ca_file) on /filter, /prioritize,
  /// /bind, /webhook and, on the main port, /metrics: 401 without one, 403 when its name is not
  /// in `allowed_clients`. The health routes stay open (issue 33 item 3).
  bool require_client_cert = false;
  /// Names (certificate CN or DNS SAN) allowed on those routes; empty = any certificate the
  /// client CA signed.
  std::vector<std::string> allowed_clients;
  /// /webhook without a client certificate (for API servers that cannot present one, e.g.
  /// managed control planes); the extender routes still require one.
  bool anonymous_webhook = false;
  /// Port of a plain-HTTP listener serving only /metrics (-1: /metrics on the main port,
  /// behind the client-certificate check when it is required; 0: any free port).
  int metrics_port = -1;
  WebhookConfig webhook;
  ExtenderConfig extender;
  bool leader_elect = false;
  LeaderElectionConfig leader;
  std::string node_label_selector;  ///< limits the nodes watched (e.g. "gpu=on")
  bool write_handshake = true;      ///< write `hami.io/node-handshake` on GPU nodes
  /// Also expose HAMi v2.10 scheduler's metric names and labels (hami_gpu_*, hami_node_gpu_*,
  /// hami_vgpu_*_allocated_*, hami_build_info; docs/hami-migration.md "Metrics").
  bool hami_metrics = true;
  /// Also expose the names HAMi used before v2.10 (GPUDeviceMemoryLimit, vGPUCoreAllocated, …),
  /// which HAMi v2.10 emits only with `--legacy-metrics=true`; off by default, as in HAMi.
  bool legacy_metrics = false;
  std::string version = "0.0.0";  ///< fracgpu's version, for hami_build_info
  /// Migration from HAMi without a drain: the unsigned allocations of pods created before
  /// this moment (RFC 3339 UTC, "2026-12-04T10:00:00Z"; "" = none) are verified against their
  /// node once and then counted as written (ClusterState::SetAdoptUnsigned,
  /// docs/hami-migration.md step 4). Only with a signing key.
  std::string adopt_hami_created_before;
};

/// Process-wide malloc settings for the scheduler's request pattern; call once from main
/// before threads start. /filter at 5,000 nodes allocates a few buffers of 60–250 KiB per
/// request (body, node names, reply). With glibc's defaults (mmap threshold 128 KiB, trim
/// threshold 128 KiB, both adjusted dynamically) each of them was mmap'ed, page-faulted and
/// handed back to the kernel per request, on a different worker thread's arena each time:
/// ~0.8 ms of CPU per request (bench_filter srv_decode ~900 µs → ~130 µs with this). Sets
/// M_MMAP_THRESHOLD = 16 MiB and M_TRIM_THRESHOLD = 64 MiB (glibc mallopt(3)); memory freed
/// by a request stays in its arena for the next one. No-op where glibc's allocator is not the
/// one in use (base::HeapIsGlibc): the release `fracgpu` links jemalloc, whose size classes and
/// per-thread caches serve these requests without the setting (docs/performance.md "Run 9").
void TuneMallocForRequests();

/// Thread-safe after Start().
class SchedulerService {
 public:
  /// `client` (may be null: webhook-only, for tests) and `clock` (null = real) must outlive it.
  SchedulerService(SchedulerOptions options, k8s::Client* client, base::Clock* clock = nullptr);
  ~SchedulerService();
  /// Starts the informers, the elector and the server. Errors: the server's.
  Status Start();
  void Stop();
  /// Blocks until both informers listed once (or timeout); returns whether they did.
  bool WaitForSync(std::chrono::milliseconds timeout);
  int port() const { return server_.port(); }
  /// The /metrics listener's port (metrics_port ≥ 0, after Start()), or -1.
  int metrics_port() const { return metrics_server_ ? metrics_server_->port() : -1; }
  std::string BaseUrl() const { return server_.BaseUrl(); }
  ClusterState& state() { return state_; }
  metrics::Registry& metrics() { return metrics_; }
  EventRecorder& events() { return *events_; }
  bool ready() const;

 private:
  /// Null when `req` may use a protected route (require_client_cert), else its 401/403.
  std::optional<http::Response> Authorize(const http::Request& req, bool webhook) const;
  http::Response Timed(const std::string& endpoint, const http::Request& req,
                       const std::function<http::Response(const http::Request&)>& fn);
  http::Response HandleFilter(const http::Request& req);
  http::Response HandlePrioritize(const http::Request& req);
  http::Response HandleBind(const http::Request& req);
  void OnNode(const nlohmann::json& node);
  void Collect(metrics::Registry::Scrape& s) const;
  bool Serving() const;

  SchedulerOptions options_;
  k8s::Client* client_;
  base::Clock* clock_;
  ClusterState state_;
  QuotaTracker quotas_;           // namespace GPU quotas, from the ResourceQuota informer
  BorrowerGuard borrower_guard_;  // lending on only while the API server fixes the flag
  metrics::Registry metrics_;
  std::unique_ptr<EventRecorder> events_;
  std::unique_ptr<Extender> extender_;
  std::unique_ptr<LeaderElector> elector_;
  std::unique_ptr<k8s::Informer> nodes_, pods_;
  std::unique_ptr<k8s::Informer> resource_quotas_;
  std::unique_ptr<k8s::Informer> admission_policies_, admission_policy_bindings_;
  http::Server server_;
  std::unique_ptr<http::Server> metrics_server_;
};

}  // namespace fracgpu::scheduler
