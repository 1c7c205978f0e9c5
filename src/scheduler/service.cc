#include "scheduler/service.h"

#include <spdlog/spdlog.h>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "k8s/objects.h"

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
  mallopt(M_MMAP_THRESHOLD, 16 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}

SchedulerService::SchedulerService(SchedulerOptions options, k8s::Client* client, k8s::Clock* clock)
    : options_(std::move(options)),
      client_(client),
      clock_(clock != nullptr ? clock : k8s::RealClock::Get()),
      state_(options_.webhook.names.gpu),
      events_(std::make_unique<EventRecorder>(client)),
      server_(options_.http) {
  options_.extender.names = options_.webhook.names;
  state_.SetSigningKey(options_.extender.signing_key);  // accounting only from verified signatures
  extender_ = std::make_unique<Extender>(options_.extender, &state_, client_, events_.get(), &metrics_, clock_);
  metrics_.Describe("fracgpu_http_requests_total", metrics::Type::kCounter, "HTTP requests by endpoint and status code.");
  metrics_.Describe("fracgpu_http_request_duration_seconds", metrics::Type::kHistogram,
                    "HTTP request latency by endpoint, seconds.", metrics::DefaultLatencyBuckets());
  metrics_.Describe("fracgpu_admission_total", metrics::Type::kCounter, "Admission reviews by operation and result.");
  metrics_.Describe("fracgpu_gpu_memory_limit_bytes", metrics::Type::kGauge, "Device memory a GPU offers, bytes.");
  metrics_.Describe("fracgpu_gpu_memory_allocated_bytes", metrics::Type::kGauge, "Device memory promised on a GPU, bytes.");
  metrics_.Describe("fracgpu_gpu_core_limit_ratio", metrics::Type::kGauge, "SM share a GPU offers (1 = the card).");
  metrics_.Describe("fracgpu_gpu_core_allocated_ratio", metrics::Type::kGauge, "SM share promised on a GPU (1 = the card).");
  metrics_.Describe("fracgpu_gpu_shared_count", metrics::Type::kGauge, "Slices placed on a GPU.");
  metrics_.Describe("fracgpu_pod_gpu_memory_allocated_bytes", metrics::Type::kGauge,
                    "Device memory granted to a container on a GPU, bytes.");
  metrics_.Describe("fracgpu_pod_gpu_core_allocated_ratio", metrics::Type::kGauge,
                    "SM share granted to a container on a GPU (1 = the card).");
  metrics_.Describe("fracgpu_orphaned_allocations", metrics::Type::kGauge,
                    "Pod allocations naming GPUs their node no longer registers.");
  metrics_.AddCollector([this](metrics::Registry::Scrape& s) { Collect(s); });

  auto endpoint = [this](const std::string& name, std::function<http::Response(const http::Request&)> fn) {
    return [this, name, fn](const http::Request& req) { return Timed(name, req, fn); };
  };
  // Body limits per endpoint (read no further, 413 past them): an AdmissionReview carries the
  // object and oldObject, each at most etcd's 1.5 MiB request limit; ExtenderArgs hold a Pod
  // and the candidate node names (~80 KB at 5,000 nodes); ExtenderBindingArgs four names.
  server_.Route("POST", "/webhook", endpoint("/webhook", [this](const http::Request& req) {
    auto r = HandleAdmissionReview(req.body, options_.webhook);
    if (!r.ok()) {
      metrics_.Add("fracgpu_admission_total", {{"operation", "unknown"}, {"result", "bad_request"}});
      return http::Response::Error(400, r.status().message());
    }
    const json& resp = (*r)["response"];
    std::string result = resp.value("allowed", false) ? (resp.contains("patch") ? "patched" : "allowed") : "denied";
    auto decoded = DecodeAdmissionReview(req.body);
    metrics_.Add("fracgpu_admission_total", {{"operation", decoded.ok() ? decoded->operation : ""}, {"result", result}});
    return http::Response::Json(200, *r);
  }), kWebhookBodyLimit);
  server_.Route("POST", "/filter", endpoint("/filter", [this](const http::Request& r) { return HandleFilter(r); }),
                kExtenderBodyLimit);
  server_.Route("POST", "/prioritize",
                endpoint("/prioritize", [this](const http::Request& r) { return HandlePrioritize(r); }),
                kExtenderBodyLimit);
  server_.Route("POST", "/bind", endpoint("/bind", [this](const http::Request& r) { return HandleBind(r); }),
                kBindBodyLimit);
  // Also on the health listener (--health-port), which answers while the workers are busy.
  server_.RouteHealth("/healthz", [](const http::Request&) { return http::Response::Text(200, "ok\n"); });
  server_.RouteHealth("/readyz", [this](const http::Request&) {
    // Serving(): a follower under leader election is not ready, so the Service sends the
    // extender's and the webhook's calls to the leader only.
    return Serving() ? http::Response::Text(200, "ok\n")
                     : http::Response::Text(503, "not ready: cache not synced or not the leader\n");
  });
  server_.Route("GET", "/metrics", [this](const http::Request&) {
    return http::Response::Text(200, metrics_.Render(), "text/plain; version=0.0.4; charset=utf-8");
  });
}

SchedulerService::~SchedulerService() { Stop(); }

http::Response SchedulerService::Timed(const std::string& endpoint, const http::Request& req,
                                       const std::function<http::Response(const http::Request&)>& fn) {
  auto start = std::chrono::steady_clock::now();
  http::Response res = fn(req);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  metrics_.Add("fracgpu_http_requests_total", {{"endpoint", endpoint}, {"code", std::to_string(res.status)}});
  metrics_.Observe("fracgpu_http_request_duration_seconds", {{"endpoint", endpoint}}, secs);
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
    return http::Response::Json(200, {{"NodeNames", nullptr}, {"FailedNodes", json::object()},
                                      {"Error", "fracgpu scheduler is not ready (cache not synced or not the leader)"}});
  }
  return http::Response::Text(200, extender_->Filter(*args), "application/json");
}

http::Response SchedulerService::HandlePrioritize(const http::Request& req) {
  auto args = DecodeExtenderArgs(req.body);
  if (!args.ok()) return http::Response::Error(400, args.status().message());
  return http::Response::Json(200, extender_->Prioritize(*args));
}

http::Response SchedulerService::HandleBind(const http::Request& req) {
  auto args = DecodeExtenderBindingArgs(req.body);
  if (!args.ok()) return http::Response::Error(400, args.status().message());
  if (!Serving()) {
    return http::Response::Json(200, {{"Error", "fracgpu scheduler is not ready (cache not synced or not the leader)"}});
  }
  return http::Response::Json(200, extender_->Bind(*args));
}

void SchedulerService::OnNode(const json& node) {
  Status st = state_.UpsertNode(node);
  if (!st.ok()) spdlog::warn("{}", st.ToString());
  if (!options_.write_handshake || client_ == nullptr || !k8s::Annotation(node, core::kAnnotationNodeRegister)) return;
  if (options_.leader_elect && (!elector_ || !elector_->is_leader())) return;
  auto hs = k8s::Annotation(node, core::kAnnotationNodeHandshake);
  if (hs && hs->find("Requesting") != std::string::npos) return;
  auto r = client_->MergePatch(k8s::NodePath(k8s::Name(node)),
                               {{"metadata", {{"annotations", {{core::kAnnotationNodeHandshake, HandshakeValue(clock_->Now())}}}}}});
  if (!r.ok()) spdlog::warn("node {}: handshake not written: {}", k8s::Name(node), r.status().ToString());
}

void SchedulerService::Collect(metrics::Registry::Scrape& s) const {
  for (const auto& node : state_.Nodes()) {
    for (const auto& g : node.gpus) {
      metrics::Labels l = {{"node", node.name},
                           {"device_uuid", g.info.uuid},
                           {"device_index", std::to_string(g.info.index)},
                           {"device_type", g.info.type}};
      s.Set("fracgpu_gpu_memory_limit_bytes", l, static_cast<double>(g.info.devmem_mib) * 1048576.0);
      s.Set("fracgpu_gpu_memory_allocated_bytes", l, static_cast<double>(g.used_mem_mib) * 1048576.0);
      s.Set("fracgpu_gpu_core_limit_ratio", l, g.info.devcore / 100.0);
      s.Set("fracgpu_gpu_core_allocated_ratio", l, g.used_cores / 100.0);
      s.Set("fracgpu_gpu_shared_count", l, g.used);
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
        s.Set("fracgpu_pod_gpu_memory_allocated_bytes", l, static_cast<double>(g.mem_mib) * 1048576.0);
        s.Set("fracgpu_pod_gpu_core_allocated_ratio", l, g.cores_percent / 100.0);
      }
    }
  }
  s.Set("fracgpu_orphaned_allocations", {}, static_cast<double>(state_.orphaned_allocations()));
}

Status SchedulerService::Start() {
  if (client_ != nullptr) {
    if (options_.leader_elect) {
      elector_ = std::make_unique<LeaderElector>(client_, clock_, options_.leader);
      elector_->Start();
    }
    k8s::InformerOptions no;
    no.path = "/api/v1/nodes";
    no.label_selector = options_.node_label_selector;
    nodes_ = std::make_unique<k8s::Informer>(
        client_, no,
        k8s::InformerHandlers{[this](const json& n) { OnNode(n); },
                              [this](const json& n) { state_.RemoveNode(k8s::Name(n)); }, nullptr});
    k8s::InformerOptions po;
    po.path = "/api/v1/pods";
    pods_ = std::make_unique<k8s::Informer>(
        client_, po,
        k8s::InformerHandlers{[this](const json& p) {
                                Status st = state_.UpsertPod(p);
                                if (!st.ok()) spdlog::warn("{}", st.ToString());
                                if (st.code() == StatusCode::kPermissionDenied && events_ != nullptr) {
                                  events_->Record(p, "Warning", "UnverifiedAllocation", st.message());
                                }
                              },
                              [this](const json& p) { state_.RemovePod(p); }, nullptr});
    nodes_->Start();
    pods_->Start();
  }
  return server_.Start();
}

void SchedulerService::Stop() {
  server_.Stop();
  if (pods_) pods_->Stop();
  if (nodes_) nodes_->Stop();
  if (elector_) elector_->Stop();
}

bool SchedulerService::WaitForSync(std::chrono::milliseconds timeout) {
  if (!nodes_ || !pods_) return false;
  return nodes_->WaitForSync(timeout) && pods_->WaitForSync(timeout);
}

}  // namespace fracgpu::scheduler
