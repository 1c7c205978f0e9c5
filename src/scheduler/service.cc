#include "scheduler/service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "base/clock.h"
#include "base/heap.h"
#include "base/strings.h"
#include "core/lent.h"
#include "k8s/objects.h"
#include "metrics/hami.h"

namespace fracgpu::scheduler {
namespace {

using nlohmann::json;

constexpr size_t kWebhookBodyLimit = 3u << 20;   // bytes: object + oldObject, 1.5 MiB each
constexpr size_t kExtenderBodyLimit = 1u << 20;  // bytes: ExtenderArgs (kube-scheduler's own cap)
constexpr size_t kBindBodyLimit = 16u << 10;     // bytes: ExtenderBindingArgs

std::string HandshakeValue(std::chrono::system_clock::time_point now) {
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "Requesting_%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

}  // namespace

void TuneMallocForRequests() {
#ifdef __GLIBC__
  if (!base::HeapIsGlibc()) return;
  mallopt(M_MMAP_THRESHOLD, 16 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}

SchedulerService::SchedulerService(SchedulerOptions options, k8s::Client* client,
                                   base::Clock* clock)
    : options_(std::move(options)),
      client_(client),
      clock_(clock != nullptr ? clock : base::RealClock::Get()),
      state_(options_.webhook.names.gpu),
      quotas_(options_.webhook.names),
      events_(std::make_unique<EventRecorder>(client)),
      server_(options_.http) {
  options_.extender.names = options_.webhook.names;
  // One scheduler name: the one the webhook writes into pods is the one /bind accepts.
  options_.extender.scheduler_name = options_.webhook.scheduler_name;
  // Every write of /bind checks leadership against the last successful renew (a replica that
  // froze past its lease refuses), not only the entry gate.
  options_.extender.write_guard = [this]() -> Status {
    if (!options_.leader_elect) return Status::Ok();
    if (!elector_) return Unavailable("leader election has not started");
    return elector_->CheckLeader();
  };
  state_.SetSigningKey(options_.extender.signing_key);  // accounting only from verified signatures
  if (!options_.adopt_hami_created_before.empty()) {
    state_.SetAdoptUnsigned(true, options_.adopt_hami_created_before);  // HAMi's pods, verified
  }
  // Namespace GPU quotas (scheduler/quota.h): /filter and /bind through the extender, admission
  // through the webhook (what the spec alone determines).
  options_.extender.quotas = &quotas_;
  options_.webhook.quota_check = [this](const std::string& ns,
                                        const core::PodRequest& request) -> Status {
    if (!quotas_.Limited(ns)) return Status::Ok();
    bool card_dependent = false;
    std::string why =
        quotas_.Check(ns, UsedIn(state_, ns), AmountOfRequest(request, &card_dependent));
    if (!why.empty()) return ResourceExhausted("namespace " + ns + ": " + why);
    return Status::Ok();
  };
  options_.webhook.gpu_quota_in = [this](const std::string& ns) {
    return quotas_.LimitingQuota(ns);
  };
  // Borrowers on lent memory only while the API server keeps their flag fixed
  // (scheduler/borrower_guard.h; the two admissionregistration informers in Start()).
  options_.extender.lending_enforced = [this] { return borrower_guard_.Enforced(); };
  extender_ = std::make_unique<Extender>(options_.extender, &state_, client_, events_.get(),
                                         &metrics_, clock_);
  metrics_.Describe("fracgpu_http_requests_total", metrics::Type::kCounter,
                    "HTTP requests by endpoint and status code.");
  metrics_.Describe("fracgpu_http_request_duration_seconds", metrics::Type::kHistogram,
                    "HTTP request latency by endpoint, seconds.", metrics::DefaultLatencyBuckets());
  metrics_.Describe(
      "fracgpu_http_request_cpu_seconds", metrics::Type::kHistogram,
      "CPU time of the thread that handled an HTTP request, by endpoint, seconds "
      "(the latency less the time spent waiting for a CPU, a lock or the API server).",
      metrics::DefaultLatencyBuckets());
  metrics_.Describe(
      "fracgpu_http_request_cpu_wait_seconds", metrics::Type::kHistogram,
      "Time the thread that handled an HTTP request was ready to run but waited for a CPU, by "
      "endpoint, seconds (Linux schedstat run-queue wait).",
      metrics::DefaultLatencyBuckets());
  metrics_.Describe(
      "fracgpu_http_request_sleep_seconds", metrics::Type::kHistogram,
      "Time the thread that handled an HTTP request slept, by endpoint, seconds: the latency "
      "less its CPU and its wait for a CPU (locks, and for /bind and /webhook the API server).",
      metrics::DefaultLatencyBuckets());
  metrics_.Describe("fracgpu_admission_total", metrics::Type::kCounter,
                    "Admission reviews by operation and result.");
  metrics_.Describe("fracgpu_gpu_memory_limit_bytes", metrics::Type::kGauge,
                    "Device memory a GPU offers, bytes.");
  metrics_.Describe("fracgpu_gpu_memory_allocated_bytes", metrics::Type::kGauge,
                    "Device memory promised on a GPU, bytes.");
  metrics_.Describe("fracgpu_gpu_core_limit_ratio", metrics::Type::kGauge,
                    "SM share a GPU offers (1 = the card).");
  metrics_.Describe("fracgpu_gpu_core_allocated_ratio", metrics::Type::kGauge,
                    "SM share promised on a GPU (1 = the card).");
  metrics_.Describe("fracgpu_gpu_shared_count", metrics::Type::kGauge, "Slices placed on a GPU.");
  metrics_.Describe("fracgpu_gpu_memory_lent_bytes", metrics::Type::kGauge,
                    "Device memory a GPU lends to borrower pods (fracgpu.io/lent-memory, while "
                    "fresh), bytes.");
  metrics_.Describe("fracgpu_gpu_memory_borrowed_bytes", metrics::Type::kGauge,
                    "Device memory borrower pods (fracgpu.io/borrower) hold on a GPU, bytes.");
  metrics_.Describe(
      "fracgpu_lending_enforced", metrics::Type::kGauge,
      "1 while the API server keeps the borrower flag fixed (ValidatingAdmissionPolicy "
      "fracgpu-pod-annotations and a Deny binding, as shipped): only then are "
      "borrowers placed on lent memory; 0 = lending off (the scheduler's log says why).");
  metrics_.Describe("fracgpu_pod_gpu_memory_allocated_bytes", metrics::Type::kGauge,
                    "Device memory granted to a container on a GPU, bytes.");
  metrics_.Describe("fracgpu_pod_gpu_core_allocated_ratio", metrics::Type::kGauge,
                    "SM share granted to a container on a GPU (1 = the card).");
  metrics_.Describe("fracgpu_orphaned_allocations", metrics::Type::kGauge,
                    "Pod allocations naming GPUs their node no longer registers.");
  metrics_.Describe("fracgpu_state_lock_acquisitions_total", metrics::Type::kCounter,
                    "Times the cluster state's lock was taken, by mode (shared: a reader, "
                    "exclusive: a writer).");
  metrics_.Describe("fracgpu_state_lock_waits_total", metrics::Type::kCounter,
                    "Times the cluster state's lock was held when asked for, so that the caller "
                    "waited, by mode.");
  if (options_.hami_metrics) {
    // HAMi v2.10 cmd/scheduler/metrics.go: names, help texts and labels as HAMi's collector
    // writes them (plus its constant zone="vGPU"); values in HAMi's units (core ratios 0–100).
    metrics_.Describe("hami_gpu_memory_limit_bytes", metrics::Type::kGauge,
                      "HAMi-compatible: the GPU's schedulable memory, bytes.");
    metrics_.Describe("hami_gpu_core_limit_ratio", metrics::Type::kGauge,
                      "HAMi-compatible: the GPU's schedulable cores, percent (100).");
    metrics_.Describe("hami_gpu_memory_allocated_bytes", metrics::Type::kGauge,
                      "HAMi-compatible: memory granted on the GPU, bytes.");
    metrics_.Describe("hami_gpu_shared_count", metrics::Type::kGauge,
                      "HAMi-compatible: containers holding a slice of the GPU.");
    metrics_.Describe("hami_gpu_core_allocated_ratio", metrics::Type::kGauge,
                      "HAMi-compatible: cores granted on the GPU, percent of it.");
    metrics_.Describe(
        "hami_node_gpu_overview", metrics::Type::kGauge,
        "HAMi-compatible: one series per GPU of a node, with its usage in the labels.");
    metrics_.Describe("hami_node_gpu_memory_allocated_ratio", metrics::Type::kGauge,
                      "HAMi-compatible: memory granted on the GPU, fraction of it.");
    metrics_.Describe("hami_vgpu_memory_allocated_bytes", metrics::Type::kGauge,
                      "HAMi-compatible: memory granted to a container on a GPU, bytes.");
    metrics_.Describe("hami_vgpu_core_allocated_ratio", metrics::Type::kGauge,
                      "HAMi-compatible: cores granted to a container on a GPU, percent.");
    metrics_.Describe("hami_resource_quota_used", metrics::Type::kGauge,
                      "HAMi-compatible: what a namespace's GPU pods hold against a ResourceQuota "
                      "(MiB for memory, percent for cores); label limit = the quota's value.");
    metrics::DescribeHamiBuildInfo(metrics_);
  }
  if (options_.hami_metrics && options_.legacy_metrics) {
    // HAMi's pre-v2.10 names (cmd/scheduler/metrics.go, --legacy-metrics): raw core counts.
    const std::pair<const char*, const char*> legacy[] = {
        {"GPUDeviceMemoryLimit", "HAMi legacy name: the GPU's schedulable memory, bytes."},
        {"GPUDeviceCoreLimit", "HAMi legacy name: the GPU's schedulable cores (its count)."},
        {"GPUDeviceMemoryAllocated", "HAMi legacy name: memory granted on the GPU, bytes."},
        {"GPUDeviceSharedNum", "HAMi legacy name: containers holding a slice of the GPU."},
        {"GPUDeviceCoreAllocated", "HAMi legacy name: cores granted on the GPU (a count)."},
        {"nodeGPUOverview",
         "HAMi legacy name: one series per GPU of a node, with its usage in the labels."},
        {"nodeGPUMemoryPercentage", "HAMi legacy name: memory granted on the GPU, fraction of it."},
        {"vGPUMemoryAllocated", "HAMi legacy name: memory granted to a container on a GPU, bytes."},
        {"vGPUCoreAllocated", "HAMi legacy name: cores granted to a container on a GPU (a count)."},
        {"QuotaUsed", "HAMi legacy name: what a namespace's GPU pods hold against a quota."}};
    for (const auto& [name, help] : legacy) metrics_.Describe(name, metrics::Type::kGauge, help);
  }
  metrics_.AddCollector([this](metrics::Registry::Scrape& s) { Collect(s); });

  auto endpoint = [this](const std::string& name,
                         std::function<http::Response(const http::Request&)> fn) {
    const bool webhook = name == "/webhook";
    return [this, name, fn, webhook](const http::Request& req) {
      return Timed(name, req, [this, fn, webhook](const http::Request& r) {
        if (auto refused = Authorize(r, webhook)) return *refused;
        return fn(r);
      });
    };
  };
  // Body limits per endpoint (read no further, 413 past them): an AdmissionReview carries the
  // object and oldObject, each at most etcd's 1.5 MiB request limit; ExtenderArgs hold a Pod
  // and the candidate node names (~80 KB at 5,000 nodes); ExtenderBindingArgs four names.
  server_.Route(
      "POST", "/webhook",
      endpoint("/webhook",
               [this](const http::Request& req) {
                 auto r = HandleAdmissionReview(req.body, options_.webhook);
                 if (!r.ok()) {
                   metrics_.Add("fracgpu_admission_total",
                                {{"operation", "unknown"}, {"result", "bad_request"}});
                   return http::Response::Error(400, r.status().message());
                 }
                 const json& resp = (*r)["response"];
                 std::string result = resp.value("allowed", false)
                                          ? (resp.contains("patch") ? "patched" : "allowed")
                                          : "denied";
                 auto decoded = DecodeAdmissionReview(req.body);
                 metrics_.Add(
                     "fracgpu_admission_total",
                     {{"operation", decoded.ok() ? decoded->operation : ""}, {"result", result}});
                 return http::Response::Json(200, *r);
               }),
      kWebhookBodyLimit);
  server_.Route("POST", "/filter",
                endpoint("/filter", [this](const http::Request& r) { return HandleFilter(r); }),
                kExtenderBodyLimit);
  server_.Route(
      "POST", "/prioritize",
      endpoint("/prioritize", [this](const http::Request& r) { return HandlePrioritize(r); }),
      kExtenderBodyLimit);
  server_.Route("POST", "/bind",
                endpoint("/bind", [this](const http::Request& r) { return HandleBind(r); }),
                kBindBodyLimit);
  // Also on the health listener (--health-port), which answers while the workers are busy.
  server_.RouteHealth("/healthz",
                      [](const http::Request&) { return http::Response::Text(200, "ok\n"); });
  server_.RouteHealth("/readyz", [this](const http::Request&) {
    // Serving(): a follower under leader election is not ready, so the Service sends the
    // extender's and the webhook's calls to the leader only.
    return Serving() ? http::Response::Text(200, "ok\n")
                     : http::Response::Text(503, "not ready: cache not synced or not the leader\n");
  });
  auto render = [this](const http::Request&) {
    std::string page = metrics_.Render();
    // The sample text was in kernel pages (metrics::PageText), already unmapped; what the
    // collector freed on this worker's malloc arena (labels, the UUID → cores map) goes back
    // too, not kept by each worker that ever served a scrape.
    base::ReleaseFreeHeap();
    return http::Response::Text(200, std::move(page), "text/plain; version=0.0.4; charset=utf-8");
  };
  if (options_.metrics_port >= 0) {
    // Its own plain listener: /metrics names every pod holding a slice, which is what an
    // attacker on the extender's port would need; a NetworkPolicy admits only the scrapers.
    http::ServerOptions mo;
    mo.host = options_.http.host;
    mo.port = options_.metrics_port;
    mo.threads = 2;
    mo.max_connections = 16;
    mo.max_connections_per_client = 4;
    metrics_server_ = std::make_unique<http::Server>(mo);
    metrics_server_->Route("GET", "/metrics", render);
  } else {
    server_.Route("GET", "/metrics", [this, render](const http::Request& req) {
      if (auto refused = Authorize(req, false)) return *refused;
      return render(req);
    });
  }
}

std::optional<http::Response> SchedulerService::Authorize(const http::Request& req,
                                                          bool webhook) const {
  if (!options_.require_client_cert || (webhook && options_.anonymous_webhook)) {
    return std::nullopt;
  }
  if (req.client_names.empty()) {
    return http::Response::Error(
        401, req.path +
                 " needs a client certificate signed by the scheduler's client CA "
                 "(--client-ca-file): only the API server and kube-scheduler may call it");
  }
  if (options_.allowed_clients.empty()) return std::nullopt;
  for (const auto& name : req.client_names) {
    for (const auto& allowed : options_.allowed_clients) {
      if (name == allowed) return std::nullopt;
    }
  }
  const std::string allowed = base::Join(options_.allowed_clients, ", ");
  return http::Response::Error(403, "client certificate \"" + req.client_names.front() +
                                        "\" may not call " + req.path +
                                        " (--allowed-client-names: " + allowed + ")");
}

SchedulerService::~SchedulerService() { Stop(); }

http::Response SchedulerService::Timed(
    const std::string& endpoint, const http::Request& req,
    const std::function<http::Response(const http::Request&)>& fn) {
  // The handler runs on this thread from start to end, so the thread's CPU clock is its CPU and
  // its run-queue wait the time it was ready but had no CPU; the rest of the latency it slept.
  // Read inside the wall-clock window, so the parts never exceed the latency.
  auto start = std::chrono::steady_clock::now();
  const auto cpu_start = base::ThreadCpuTime();
  const auto wait_start = base::ThreadRunDelay();
  http::Response res = fn(req);
  const auto wait_end = base::ThreadRunDelay();
  const auto cpu_end = base::ThreadCpuTime();
  const auto wall = std::chrono::steady_clock::now() - start;
  const double secs = std::chrono::duration<double>(wall).count();
  metrics_.Add("fracgpu_http_requests_total",
               {{"endpoint", endpoint}, {"code", std::to_string(res.status)}});
  metrics_.Observe("fracgpu_http_request_duration_seconds", {{"endpoint", endpoint}}, secs);
  // A clock that could not be read (zero, or negative for the wait) records nothing rather
  // than a wrong figure.
  const bool cpu_ok = cpu_start.count() > 0 && cpu_end >= cpu_start;
  if (cpu_ok) {
    metrics_.Observe("fracgpu_http_request_cpu_seconds", {{"endpoint", endpoint}},
                     std::chrono::duration<double>(cpu_end - cpu_start).count());
  }
  if (cpu_ok && wait_start.count() >= 0 && wait_end >= wait_start) {
    const auto wait = wait_end - wait_start;
    metrics_.Observe("fracgpu_http_request_cpu_wait_seconds", {{"endpoint", endpoint}},
                     std::chrono::duration<double>(wait).count());
    const auto slept = wall - (cpu_end - cpu_start) - wait;
    metrics_.Observe("fracgpu_http_request_sleep_seconds", {{"endpoint", endpoint}},
                     std::max(0.0, std::chrono::duration<double>(slept).count()));
  }
  return res;
}

bool SchedulerService::Serving() const {
  if (options_.leader_elect && (!elector_ || !elector_->is_leader())) return false;
  return ready();
}

bool SchedulerService::ready() const {
  return nodes_ && pods_ && nodes_->HasSynced() && pods_->HasSynced();
}

http::Response SchedulerService::HandleFilter(const http::Request& req) {
  auto args = DecodeExtenderArgs(req.body);
  if (!args.ok()) return http::Response::Error(400, args.status().message());
  if (!Serving()) {
    return http::Response::Json(
        200, {{"Nodes", nullptr},
              {"NodeNames", nullptr},
              {"FailedNodes", json::object()},
              {"FailedAndUnresolvableNodes", json::object()},
              {"Error", "fracgpu scheduler is not ready (cache not synced or not the leader)"}});
  }
  return http::Response::Text(200, extender_->Filter(*args), "application/json");
}

http::Response SchedulerService::HandlePrioritize(const http::Request& req) {
  auto args = DecodeExtenderArgs(req.body);
  if (!args.ok()) return http::Response::Error(400, args.status().message());
  // Scores from a cache not yet synced (or a follower's) would rank on a partial cluster and
  // reserve on it. A HostPriorityList has no error member: kube-scheduler reads a non-200
  // reply as an error and schedules on the other scores alone (schedule_one.go
  // prioritizeNodes: "No score given by this extender").
  if (!Serving()) {
    return http::Response::Error(
        503, "fracgpu scheduler is not ready (cache not synced or not the leader)");
  }
  return http::Response::Json(200, extender_->Prioritize(*args));
}

http::Response SchedulerService::HandleBind(const http::Request& req) {
  auto args = DecodeExtenderBindingArgs(req.body);
  if (!args.ok()) return http::Response::Error(400, args.status().message());
  if (!Serving()) {
    return http::Response::Json(
        200, {{"Error", "fracgpu scheduler is not ready (cache not synced or not the leader)"}});
  }
  return http::Response::Json(200, extender_->Bind(*args));
}

void SchedulerService::OnNode(const json& node) {
  Status st = state_.UpsertNode(node);
  if (!st.ok()) spdlog::warn("{}", st.ToString());
  if (!options_.write_handshake || client_ == nullptr ||
      !k8s::Annotation(node, core::kAnnotationNodeRegister))
    return;
  if (options_.leader_elect && (!elector_ || !elector_->is_leader())) return;
  auto hs = k8s::Annotation(node, core::kAnnotationNodeHandshake);
  if (hs && hs->find("Requesting") != std::string::npos) return;
  auto r = client_->MergePatch(
      k8s::NodePath(k8s::Name(node)),
      {{"metadata",
        {{"annotations", {{core::kAnnotationNodeHandshake, HandshakeValue(clock_->Now())}}}}}});
  if (!r.ok())
    spdlog::warn("node {}: handshake not written: {}", k8s::Name(node), r.status().ToString());
}

namespace {

// HAMi's core figures (normalizeCoreMetrics in cmd/scheduler/metrics.go): the limit is 100
// and the allocation ceil(allocated / total × 100), both 0 for a GPU offering no cores.
double HamiCoreAllocated(int64_t total, int64_t allocated) {
  return total <= 0
             ? 0.0
             : std::ceil(static_cast<double>(allocated) / static_cast<double>(total) * 100.0);
}

}  // namespace

void SchedulerService::Collect(metrics::Registry::Scrape& s) const {
  const bool hami = options_.hami_metrics;
  const char* zone = metrics::kHamiZone;
  std::map<std::string, int64_t>
      cores_of;  // GPU UUID → devcore, for hami_vgpu_core_allocated_ratio
  // Lending (docs/reclaim.md "Lending"): what each GPU lends while its node's record is fresh,
  // and what borrowers hold there.
  const std::map<std::string, int64_t> borrowed =
      state_.Locked([](const ClusterState::View& v) { return v.model().BorrowedMib(); });
  s.Set("fracgpu_lending_enforced", {}, borrower_guard_.Enforced() ? 1.0 : 0.0);
  const int64_t now_unix = std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  for (const auto& node : state_.Nodes()) {
    const bool lending = core::LentFresh(node.lent_at_unix, now_unix);
    for (size_t gi = 0; gi < node.gpus.size(); ++gi) {
      const core::GpuState& g = node.gpus[gi];
      metrics::Labels l = {{"node", node.name},
                           {"device_uuid", g.info.uuid},
                           {"device_index", std::to_string(g.info.index)},
                           {"device_type", g.info.type}};
      s.Set("fracgpu_gpu_memory_limit_bytes", l,
            static_cast<double>(g.info.devmem_mib) * 1048576.0);
      s.Set("fracgpu_gpu_memory_allocated_bytes", l,
            static_cast<double>(g.used_mem_mib) * 1048576.0);
      s.Set("fracgpu_gpu_core_limit_ratio", l, g.info.devcore / 100.0);
      s.Set("fracgpu_gpu_core_allocated_ratio", l, g.used_cores / 100.0);
      s.Set("fracgpu_gpu_shared_count", l, g.used);
      s.Set("fracgpu_gpu_memory_lent_bytes", l,
            lending ? static_cast<double>(node.LentMib(gi)) * 1048576.0 : 0.0);
      auto b = borrowed.find(g.info.uuid);
      s.Set("fracgpu_gpu_memory_borrowed_bytes", l,
            b != borrowed.end() ? static_cast<double>(b->second) * 1048576.0 : 0.0);
      if (!hami) continue;
      cores_of.emplace(g.info.uuid, g.info.devcore);
      const std::string idx = std::to_string(g.info.index), cores = std::to_string(g.info.devcore);
      const double used_bytes = static_cast<double>(g.used_mem_mib) * 1048576.0;
      metrics::Labels h = {{"node", node.name},
                           {"device_uuid", g.info.uuid},
                           {"device_index", idx},
                           {"device_type", g.info.type},
                           {"zone", zone}};
      s.Set("hami_gpu_memory_limit_bytes", h, static_cast<double>(g.info.devmem_mib) * 1048576.0);
      s.Set("hami_gpu_core_limit_ratio", h, g.info.devcore > 0 ? 100.0 : 0.0);
      s.Set("hami_gpu_shared_count", h, g.used);
      s.Set("hami_gpu_core_allocated_ratio", h, HamiCoreAllocated(g.info.devcore, g.used_cores));
      s.Set("hami_gpu_memory_allocated_bytes",
            {{"node", node.name},
             {"device_uuid", g.info.uuid},
             {"device_index", idx},
             {"device_cores", cores},
             {"device_type", g.info.type},
             {"zone", zone}},
            used_bytes);
      s.Set("hami_node_gpu_overview",
            {{"node", node.name},
             {"device_uuid", g.info.uuid},
             {"device_index", idx},
             {"device_cores", cores},
             {"device_memory_limit", std::to_string(g.info.devmem_mib)},
             {"device_type", g.info.type},
             {"zone", zone}},
            used_bytes);
      if (g.info.devmem_mib > 0) {
        s.Set("hami_node_gpu_memory_allocated_ratio",
              {{"node", node.name},
               {"device_uuid", g.info.uuid},
               {"device_index", idx},
               {"zone", zone}},
              static_cast<double>(g.used_mem_mib) / static_cast<double>(g.info.devmem_mib));
      }
      if (!options_.legacy_metrics) continue;
      metrics::Labels o = {{"nodeid", node.name},
                           {"deviceuuid", g.info.uuid},
                           {"deviceidx", idx},
                           {"devicetype", g.info.type},
                           {"zone", zone}};
      s.Set("GPUDeviceMemoryLimit", o, static_cast<double>(g.info.devmem_mib) * 1048576.0);
      s.Set("GPUDeviceCoreLimit", o, g.info.devcore);
      s.Set("GPUDeviceSharedNum", o, g.used);
      s.Set("GPUDeviceCoreAllocated", o, g.used_cores);
      s.Set("GPUDeviceMemoryAllocated",
            {{"nodeid", node.name},
             {"deviceuuid", g.info.uuid},
             {"deviceidx", idx},
             {"devicecores", cores},
             {"devicetype", g.info.type},
             {"zone", zone}},
            used_bytes);
      s.Set("nodeGPUOverview",
            {{"nodeid", node.name},
             {"deviceuuid", g.info.uuid},
             {"deviceidx", idx},
             {"devicecores", cores},
             {"devicememorylimit", std::to_string(g.info.devmem_mib)},
             {"devicetype", g.info.type},
             {"zone", zone}},
            used_bytes);
      if (g.info.devmem_mib > 0) {
        s.Set("nodeGPUMemoryPercentage",
              {{"nodeid", node.name},
               {"deviceuuid", g.info.uuid},
               {"deviceidx", idx},
               {"zone", zone}},
              static_cast<double>(g.used_mem_mib) / static_cast<double>(g.info.devmem_mib));
      }
    }
  }
  for (const auto& a : state_.Allocations()) {
    auto slash = a.key.find('/');
    for (size_t c = 0; c < a.grants.size(); ++c) {
      for (const auto& g : a.grants[c]) {
        metrics::Labels l = {{"namespace", a.key.substr(0, slash)},
                             {"pod", a.key.substr(slash + 1)},
                             {"node", a.node},
                             {"container_index", std::to_string(c)},
                             {"device_uuid", g.uuid}};
        s.Set("fracgpu_pod_gpu_memory_allocated_bytes", l,
              static_cast<double>(g.mem_mib) * 1048576.0);
        s.Set("fracgpu_pod_gpu_core_allocated_ratio", l, g.cores_percent / 100.0);
        if (!hami || g.uuid.empty()) continue;  // HAMi skips a device without UUID
        metrics::Labels h = {{"namespace", a.key.substr(0, slash)},
                             {"node", a.node},
                             {"pod", a.key.substr(slash + 1)},
                             {"container_index", std::to_string(c)},
                             {"device_uuid", g.uuid},
                             {"zone", zone}};
        auto total = cores_of.find(g.uuid);
        s.Set("hami_vgpu_memory_allocated_bytes", h, static_cast<double>(g.mem_mib) * 1048576.0);
        s.Set("hami_vgpu_core_allocated_ratio", h,
              HamiCoreAllocated(total == cores_of.end() ? 0 : total->second, g.cores_percent));
        if (!options_.legacy_metrics) continue;
        metrics::Labels o = {{"podnamespace", a.key.substr(0, slash)},
                             {"nodename", a.node},
                             {"podname", a.key.substr(slash + 1)},
                             {"containeridx", std::to_string(c)},
                             {"deviceuuid", g.uuid},
                             {"zone", zone}};
        s.Set("vGPUMemoryAllocated", o, static_cast<double>(g.mem_mib) * 1048576.0);
        s.Set("vGPUCoreAllocated", o, g.cores_percent);
      }
    }
  }
  s.Set("fracgpu_orphaned_allocations", {}, static_cast<double>(state_.orphaned_allocations()));
  const ClusterState::LockCounts locks = state_.lock_counts();
  s.Set("fracgpu_state_lock_acquisitions_total", {{"mode", "shared"}},
        static_cast<double>(locks.shared));
  s.Set("fracgpu_state_lock_acquisitions_total", {{"mode", "exclusive"}},
        static_cast<double>(locks.exclusive));
  s.Set("fracgpu_state_lock_waits_total", {{"mode", "shared"}},
        static_cast<double>(locks.shared_waited));
  s.Set("fracgpu_state_lock_waits_total", {{"mode", "exclusive"}},
        static_cast<double>(locks.exclusive_waited));
  // HAMi v2.10 collectQuotaMetrics: per namespace and quota resource, what is used (MiB of
  // memory, percent of cores), the quota's value as written in the label `limit`.
  for (const auto& q : hami ? quotas_.Limits() : std::vector<QuotaTracker::Limit>{}) {
    const QuotaAmount used = UsedIn(state_, q.ns);
    const double value =
        static_cast<double>(q.resource == quotas_.names().gpumem ? used.mem_mib : used.cores);
    s.Set("hami_resource_quota_used",
          {{"namespace", q.ns},
           {"quota_name", q.resource},
           {"limit", std::to_string(q.limit)},
           {"zone", zone}},
          value);
    if (options_.legacy_metrics) {
      s.Set("QuotaUsed",
            {{"quotanamespace", q.ns},
             {"quotaName", q.resource},
             {"limit", std::to_string(q.limit)},
             {"zone", zone}},
            value);
    }
  }
  if (hami) metrics::SetHamiBuildInfo(s, options_.version);
}

Status SchedulerService::Start() {
  if (client_ != nullptr) {
    if (options_.leader_elect) {
      elector_ = std::make_unique<LeaderElector>(client_, clock_, options_.leader);
      elector_->Start();
    }
    k8s::InformerOptions no;
    // The state keeps what it reads from each object (state.h); the informers keep only
    // identities (InformerOptions::keep_objects), not a second copy of every Node and Pod.
    no.path = "/api/v1/nodes";
    no.label_selector = options_.node_label_selector;
    no.keep_objects = false;
    nodes_ = std::make_unique<k8s::Informer>(
        client_, no,
        k8s::InformerHandlers{[this](const json& n) { OnNode(n); },
                              [this](const json& n) { state_.RemoveNode(k8s::Name(n)); }, nullptr});
    k8s::InformerOptions po;
    po.path = "/api/v1/pods";
    po.keep_objects = false;
    pods_ = std::make_unique<k8s::Informer>(
        client_, po,
        k8s::InformerHandlers{
            [this](const json& p) {
              Status st = state_.UpsertPod(p);
              if (!st.ok()) spdlog::warn("{}", st.ToString());
              if (st.code() == StatusCode::kPermissionDenied && events_ != nullptr) {
                events_->Record(p, "Warning", "UnverifiedAllocation", st.message());
              }
            },
            [this](const json& p) { state_.RemovePod(p); }, nullptr});
    k8s::InformerOptions qo;
    qo.path = "/api/v1/resourcequotas";
    qo.keep_objects = false;
    resource_quotas_ = std::make_unique<k8s::Informer>(
        client_, qo,
        k8s::InformerHandlers{[this](const json& q) { quotas_.Upsert(q); },
                              [this](const json& q) { quotas_.Remove(q); }, nullptr});
    // The policy that fixes the borrower flag and its bindings (any name: a binding names its
    // policy in spec.policyName). Not part of readiness: until they are seen, lending is off.
    k8s::InformerOptions ao;
    ao.path = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
    ao.field_selector = std::string("metadata.name=") + kAnnotationPolicyName;
    ao.keep_objects = false;
    admission_policies_ = std::make_unique<k8s::Informer>(
        client_, ao,
        k8s::InformerHandlers{[this](const json& p) { borrower_guard_.UpsertPolicy(p); },
                              [this](const json& p) { borrower_guard_.RemovePolicy(p); }, nullptr});
    k8s::InformerOptions bo;
    bo.path = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";
    bo.keep_objects = false;
    admission_policy_bindings_ = std::make_unique<k8s::Informer>(
        client_, bo,
        k8s::InformerHandlers{[this](const json& b) { borrower_guard_.UpsertBinding(b); },
                              [this](const json& b) { borrower_guard_.RemoveBinding(b); },
                              nullptr});
    nodes_->Start();
    pods_->Start();
    resource_quotas_->Start();
    admission_policies_->Start();
    admission_policy_bindings_->Start();
  }
  if (metrics_server_) FRACGPU_RETURN_IF_ERROR(metrics_server_->Start());
  return server_.Start();
}

void SchedulerService::Stop() {
  server_.Stop();
  if (metrics_server_) metrics_server_->Stop();
  if (admission_policy_bindings_) admission_policy_bindings_->Stop();
  if (admission_policies_) admission_policies_->Stop();
  if (resource_quotas_) resource_quotas_->Stop();
  if (pods_) pods_->Stop();
  if (nodes_) nodes_->Stop();
  if (elector_) elector_->Stop();
}

bool SchedulerService::WaitForSync(std::chrono::milliseconds timeout) {
  if (!nodes_ || !pods_) return false;
  return nodes_->WaitForSync(timeout) && pods_->WaitForSync(timeout) &&
         (!resource_quotas_ || resource_quotas_->WaitForSync(timeout));
}

}  // namespace fracgpu::scheduler
