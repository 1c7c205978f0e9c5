#include "ui/service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "base/file.h"
#include "base/strings.h"
#include "core/dra_convert.h"
#include "core/request.h"
#include "k8s/gpu_objects.h"
#include "k8s/objects.h"
#include "ui/dra_cluster.h"
#include "ui/yaml.h"

namespace fracgpu::ui {

using nlohmann::json;

namespace {

// The largest web asset served (64 MiB: the page, its script and styles are a few hundred KiB).
constexpr size_t kMaxStaticFileBytes = size_t{64} << 20;

int HttpStatusOf(const Status& st) {
  switch (st.code()) {
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kConflict:
      return 409;
    case StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

http::Response ErrorResponse(const Status& st) {
  return http::Response::Error(HttpStatusOf(st), st.message());
}

// The preview (and create) validation: the webhook's parser on the pod the controller makes,
// and in DRA mode the webhook's conversion into ResourceClaimTemplates (its refusal is an error,
// with the webhook's "DRA mode: " prefix). `templates` gets the converted templates.
json Validate(const json& notebook, const NotebookOptions& options, bool dra_mode,
              Result<core::PodRequest>* parsed, std::vector<json>* templates) {
  json pod = PodOfNotebook(notebook);
  *parsed = core::ParsePodRequest(pod, options.names);
  json errors = json::array();
  json warnings = json::array();
  if (!parsed->ok()) {
    errors.push_back(parsed->status().message());
  } else {
    for (const auto& w : (*parsed)->warnings) warnings.push_back(w);
    if (dra_mode) {
      auto conversion = core::ConvertHamiPod(pod, options.names);
      if (!conversion.ok()) {
        *parsed = Status(conversion.status().code(), "DRA mode: " + conversion.status().message());
        errors.push_back(parsed->status().message());
      } else {
        *templates = std::move(conversion->templates);
      }
    }
  }
  return {{"errors", errors}, {"warnings", warnings}};
}

const char* ContentType(const std::string& path) {
  auto ends = [&](const char* ext) {
    std::string e(ext);
    return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  if (ends(".json")) return "application/json";
  if (ends(".png")) return "image/png";
  return "application/octet-stream";
}

}  // namespace

std::string NotebooksPath(const std::string& ns) {
  return "/apis/kubeflow.org/v1/namespaces/" + ns + "/notebooks";
}

Status ReviewAccess(k8s::Client& client, const std::string& user,
                    const std::vector<std::string>& groups, const std::string& verb,
                    const std::string& ns) {
  json spec = {
      {"user", user},
      {"resourceAttributes",
       {{"namespace", ns}, {"verb", verb}, {"group", "kubeflow.org"}, {"resource", "notebooks"}}}};
  if (!groups.empty()) spec["groups"] = groups;
  json review = {
      {"apiVersion", "authorization.k8s.io/v1"}, {"kind", "SubjectAccessReview"}, {"spec", spec}};
  auto reply = client.Create("/apis/authorization.k8s.io/v1/subjectaccessreviews", review);
  if (!reply.ok()) return reply.status().WithPrefix("cannot check access (SubjectAccessReview)");
  const json& status = reply->contains("status") ? (*reply)["status"] : json::object();
  bool allowed = status.is_object() && status.contains("allowed") &&
                 status["allowed"].is_boolean() && status["allowed"].get<bool>();
  if (allowed) return Status::Ok();
  std::string message = "user \"" + user + "\" may not " + verb +
                        " notebooks (kubeflow.org) in namespace \"" + ns + "\"";
  if (status.is_object() && status.contains("reason") && status["reason"].is_string() &&
      !status["reason"].get<std::string>().empty()) {
    message += ": " + status["reason"].get<std::string>();
  }
  return PermissionDenied(message);
}

Status CheckNotebookCrd(k8s::Client& client) {
  auto group = client.Get("/apis/kubeflow.org/v1");
  if (!group.ok()) {
    if (group.status().code() != StatusCode::kNotFound) return group.status();
  } else if (group->contains("resources") && (*group)["resources"].is_array()) {
    for (const auto& r : (*group)["resources"]) {
      if (r.is_object() && r.value("name", "") == "notebooks") return Status::Ok();
    }
  }
  return NotFound(
      "the API server does not serve notebooks.kubeflow.org/v1 (Kubeflow's Notebook CRD): creating "
      "notebooks will fail. Install Kubeflow's notebook controller and put the UI behind its auth "
      "gateway, "
      "or run fracgpu ui --dashboard-only");
}

std::string NotebookState(const json& nb) {
  if (auto stopped = k8s::Annotation(nb, "kubeflow-resource-stopped"); stopped && !stopped->empty())
    return "Stopped";
  if (!nb.contains("status") || !nb["status"].is_object()) return "Pending";
  const json& st = nb["status"];
  if (st.contains("readyReplicas") && st["readyReplicas"].is_number_integer() &&
      st["readyReplicas"].get<int64_t>() >= 1) {
    return "Ready";
  }
  if (st.contains("containerState") && st["containerState"].is_object()) {
    const json& cs = st["containerState"];
    for (const char* kind : {"waiting", "terminated"}) {
      if (cs.contains(kind) && cs[kind].is_object()) {
        std::string reason = cs[kind].value("reason", "");
        std::string label = std::string(kind) == "waiting" ? "Waiting" : "Terminated";
        return reason.empty() ? label : label + ": " + reason;
      }
    }
  }
  return "Pending";
}

UiService::UiService(k8s::Client* client, ClusterSource* cluster, UiOptions options)
    : client_(client),
      cluster_(cluster),
      options_(std::move(options)),
      access_cache_(std::make_unique<AccessCache>(options_.access_cache_ttl,
                                                  options_.access_cache_failed_ttl,
                                                  options_.access_cache_entries, options_.clock)),
      review_limit_(std::make_unique<ReviewRateLimit>(
          options_.access_reviews_per_second, options_.access_reviews_burst, options_.clock)) {}

void UiService::Register(http::Server& server) const {
  server.Route("POST", "/api/preview", [this](const http::Request& r) { return Preview(r); });
  server.Route("GET", "/api/cluster", [this](const http::Request& r) { return Cluster(r); });
  server.Route("GET", "/api/options", [this](const http::Request& r) { return Options(r); });
  if (options_.dashboard_only) {
    auto refuse = [](const http::Request&) {
      return http::Response::Error(404, kDashboardOnlyMessage);
    };
    server.Route("POST", "/api/notebooks", refuse);
    server.Route("GET", "/api/notebooks", refuse);
  } else {
    server.Route("POST", "/api/notebooks",
                 [this](const http::Request& r) { return CreateNotebook(r); });
    server.Route("GET", "/api/notebooks",
                 [this](const http::Request& r) { return ListNotebooks(r); });
  }
  server.RoutePrefix("GET", "/", [this](const http::Request& r) { return Static(r); });
}

bool UiService::FromGateway(const http::Request& req) const {
  if (!options_.gateway_client_names.empty()) {
    for (const auto& n : req.client_names) {
      for (const auto& g : options_.gateway_client_names) {
        if (n == g) return true;
      }
    }
  }
  if (!options_.gateway_secret.empty()) {
    // Constant time in the secret's length: no early exit on the first differing byte.
    const std::string got = req.Header(options_.gateway_secret_header);
    const std::string& want = options_.gateway_secret;
    unsigned char diff = got.size() == want.size() ? 0 : 1;
    for (size_t i = 0; i < want.size(); ++i) {
      diff |= static_cast<unsigned char>(want[i] ^ (i < got.size() ? got[i] : 0));
    }
    if (diff == 0) return true;
  }
  return options_.gateway_secret.empty() && options_.gateway_client_names.empty() &&
         options_.trust_user_header;
}

http::Response UiService::NotFromGateway() const {
  return http::Response::Error(
      401, "the request did not come through the gateway (no valid " +
               options_.gateway_secret_header + " header or gateway client certificate), so its " +
               options_.user_header +
               " header is not trusted: sign in through the Kubeflow gateway");
}

Status UiService::Caller(const http::Request& req, std::string* user,
                         std::vector<std::string>* groups) const {
  std::string name = req.Header(options_.user_header);
  if (name.empty()) {
    return PermissionDenied("no user identity: the request has no " + options_.user_header +
                            " header (sign in through the Kubeflow gateway)");
  }
  *user = options_.user_prefix + name;
  // Groups: comma-separated, spaces around each trimmed, empty entries dropped.
  if (!options_.groups_header.empty())
    *groups =
        base::SplitComma(req.Header(options_.groups_header), {.trim = " ", .skip_empty = true});
  return Status::Ok();
}

http::Response UiService::Preview(const http::Request& req) const {
  auto form = DecodeNotebookForm(req.body);
  if (!form.ok()) return ErrorResponse(form.status());
  json notebook = BuildNotebook(*form, options_.notebook);
  Result<core::PodRequest> parsed = InvalidArgument("not parsed");
  std::vector<json> templates;
  json out = Validate(notebook, options_.notebook, DraMode(), &parsed, &templates);
  out["notebook"] = notebook;
  out["yaml"] = JsonToYaml(notebook);
  if (!parsed.ok()) {
    out["fit"] = nullptr;
    return http::Response::Json(200, out);
  }
  auto snap = cluster_->Get();
  if (!snap.ok()) {
    out["fit"] = {{"fits", false},
                  {"message", "cluster state unavailable: " + snap.status().message()}};
  } else if (snap->dra) {
    out["fit"] = DraFitPreviewJson(templates, *parsed, *snap);
  } else {
    // The pod's CPU request, as the extender reads it (FGD+CpuRoute weighs it per node).
    out["fit"] = FitPreviewJson(*parsed, *snap, options_.fit,
                                k8s::PodHostRequests(PodOfNotebook(notebook)).cpu_milli);
  }
  return http::Response::Json(200, out);
}

std::set<std::string> UiService::VisibleNamespaces(const http::Request& req,
                                                   const std::vector<std::string>& asked) const {
  std::set<std::string> out;
  // --dashboard-only reads no identity, and a header that did not come through the gateway
  // names nobody: then no pod is named (fail closed).
  if (options_.dashboard_only || asked.empty() || !FromGateway(req)) return out;
  std::string user;
  std::vector<std::string> groups;
  if (!Caller(req, &user, &groups).ok()) return out;
  // Each namespace: a fresh decision counts now; one in flight (another request reviewing it)
  // is waited for; the others are candidates for this request's reviews.
  struct Candidate {
    const std::string* ns;
    std::string key;
    bool decided;  // decided before (expired since)
    std::chrono::steady_clock::time_point since;
  };
  std::vector<Candidate> candidates;
  std::vector<std::pair<const std::string*, std::string>> waits;
  for (const std::string& ns : asked) {
    // A pod always has a namespace; a review of "" would ask about every namespace.
    if (ns.empty()) continue;
    std::string key = AccessCache::Key(user, groups, ns);
    const AccessCache::Lookup look = access_cache_->Look(key);
    if (look.decision) {
      if (*look.decision == AccessDecision::kAllowed) out.insert(ns);
    } else if (look.in_flight) {
      waits.emplace_back(&ns, std::move(key));
    } else {
      candidates.push_back({&ns, std::move(key), look.decided, look.since});
    }
  }
  // Oldest first: a namespace never decided (since it was first asked) before one decided at
  // the same time, then name order. A namespace expired waits only behind those asked or
  // decided before it, so every one is decided within ceil(N / kMaxViewReviews) requests of
  // N namespaces, whoever adds namespaces meanwhile.
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return std::tie(a.since, a.decided, *a.ns) < std::tie(b.since, b.decided, *b.ns);
  });
  std::vector<const Candidate*> mine;
  for (const Candidate& c : candidates) {
    if (mine.size() >= kMaxViewReviews) break;  // the rest unnamed in this answer
    AccessDecision decided;
    switch (access_cache_->Claim(c.key, &decided)) {
      case AccessCache::ClaimResult::kDecided:
        if (decided == AccessDecision::kAllowed) out.insert(*c.ns);
        continue;
      case AccessCache::ClaimResult::kInFlight:
        waits.emplace_back(c.ns, c.key);
        continue;
      case AccessCache::ClaimResult::kClaimed:
        break;
    }
    if (!review_limit_->TryTake()) {
      access_cache_->Abandon(c.key);
      // At most one line a minute: a burst of viewers would otherwise flood the log too.
      static std::atomic<int64_t> last_logged_s{-60};
      const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::steady_clock::now().time_since_epoch())
                                .count();
      if (int64_t last = last_logged_s.load();
          now_s - last >= 60 && last_logged_s.compare_exchange_strong(last, now_s))
        spdlog::warn(
            "ui: the dashboard's SubjectAccessReviews reached {}/s (all viewers): namespaces not "
            "yet decided stay unnamed until the bound allows more",
            options_.access_reviews_per_second);
      break;
    }
    mine.push_back(&c);
  }
  // Never leave a claim behind (an exception out of a review): the claims not yet decided
  // are abandoned, so their waiters wake and find no decision (closed).
  struct AbandonUndecided {
    AccessCache* cache;
    const std::vector<const Candidate*>& claims;
    size_t decided = 0;
    ~AbandonUndecided() {
      for (size_t j = decided; j < claims.size(); ++j) cache->Abandon(claims[j]->key);
    }
  } guard{access_cache_.get(), mine};
  for (const Candidate* claim : mine) {
    const Candidate& c = *claim;
    // The review "Your notebooks" asks: whoever may list the notebooks of a namespace sees
    // its pods' names (slices, idle holders).
    const Status st = ReviewAccess(*client_, user, groups, "list", *c.ns);
    const AccessDecision decision = st.ok() ? AccessDecision::kAllowed
                                    : st.code() == StatusCode::kPermissionDenied
                                        ? AccessDecision::kDenied
                                        : AccessDecision::kFailed;
    if (decision == AccessDecision::kFailed)
      spdlog::warn("ui: {} (pods of {} stay unnamed for {})", st.message(), *c.ns, user);
    access_cache_->Put(c.key, decision);
    ++guard.decided;
    if (decision == AccessDecision::kAllowed) out.insert(*c.ns);
  }
  // Single-flight: the reviews other requests are making of this viewer's keys, waited for
  // together at most access_review_wait; not landed by then, unnamed (fail closed).
  const auto deadline = std::chrono::steady_clock::now() + options_.access_review_wait;
  for (const auto& [ns, key] : waits) {
    if (access_cache_->Wait(key, deadline) == AccessDecision::kAllowed) out.insert(*ns);
  }
  return out;
}

http::Response UiService::Cluster(const http::Request& req) const {
  auto snap = cluster_->Get();
  if (!snap.ok()) return ErrorResponse(snap.status().WithPrefix("cluster state unavailable"));
  const std::set<std::string> visible = VisibleNamespaces(req, NamedNamespaces(*snap));
  return http::Response::Json(
      200, ClusterJson(*snap, [&visible](const std::string& ns) { return visible.count(ns) > 0; }));
}

http::Response UiService::Options(const http::Request& req) const {
  json out = {{"images", options_.images},
              {"node_policies", {"binpack", "spread"}},
              {"gpu_policies", {"binpack", "spread", "topology-aware", "fragmentation-aware"}},
              {"user", nullptr},
              {"user_header", options_.user_header},
              {"dashboard_only", options_.dashboard_only},
              {"dra_mode", DraMode()}};
  if (std::string user = req.Header(options_.user_header); !user.empty() && FromGateway(req))
    out["user"] = user;
  auto snap = cluster_->Get();
  if (snap.ok()) {
    json gpus = GpuOptionsJson(*snap);
    out["gpu_types"] = gpus["gpu_types"];
    out["gpus"] = gpus["gpus"];
  } else {
    out["gpu_types"] = json::array();
    out["gpus"] = json::array();
    out["cluster_error"] = snap.status().message();
  }
  return http::Response::Json(200, out);
}

http::Response UiService::CreateNotebook(const http::Request& req) const {
  if (!FromGateway(req)) return NotFromGateway();
  std::string user;
  std::vector<std::string> groups;
  if (auto st = Caller(req, &user, &groups); !st.ok()) return ErrorResponse(st);
  auto form = DecodeNotebookForm(req.body);
  if (!form.ok()) return ErrorResponse(form.status());
  if (auto st = ReviewAccess(*client_, user, groups, "create", form->namespace_name); !st.ok()) {
    spdlog::info("ui: refused create of {}/{} for {}: {}", form->namespace_name, form->name, user,
                 st.message());
    return ErrorResponse(st);
  }
  json notebook = BuildNotebook(*form, options_.notebook);
  Result<core::PodRequest> parsed = InvalidArgument("not parsed");
  std::vector<json> templates;
  json checks = Validate(notebook, options_.notebook, DraMode(), &parsed, &templates);
  if (!parsed.ok()) return http::Response::Error(400, parsed.status().message());
  auto created = client_->Create(NotebooksPath(form->namespace_name), notebook);
  if (!created.ok()) return ErrorResponse(created.status());
  spdlog::info("ui: {} created notebook {}/{}", user, form->namespace_name, form->name);
  return http::Response::Json(201, {{"notebook", *created}, {"warnings", checks["warnings"]}});
}

http::Response UiService::ListNotebooks(const http::Request& req) const {
  if (!FromGateway(req)) return NotFromGateway();
  std::string user;
  std::vector<std::string> groups;
  if (auto st = Caller(req, &user, &groups); !st.ok()) return ErrorResponse(st);
  std::string ns = req.Param("namespace");
  if (!IsDnsLabel(ns)) {
    return http::Response::Error(
        400, "query parameter namespace must be a DNS-1123 label, got \"" + ns + "\"");
  }
  if (auto st = ReviewAccess(*client_, user, groups, "list", ns); !st.ok())
    return ErrorResponse(st);
  auto list = client_->List(NotebooksPath(ns));
  if (!list.ok()) return ErrorResponse(list.status());
  json items = json::array();
  for (const auto& nb : (*list)["items"]) {
    json limits = json::object();
    std::string image;
    const json pod = PodOfNotebook(nb);
    if (pod["spec"].contains("containers") && pod["spec"]["containers"].is_array() &&
        !pod["spec"]["containers"].empty()) {
      const json& c = pod["spec"]["containers"][0];
      if (c.is_object()) {
        image = c.value("image", "");
        if (c.contains("resources") && c["resources"].is_object() &&
            c["resources"].contains("limits") && c["resources"]["limits"].is_object()) {
          limits = c["resources"]["limits"];
        }
      }
    }
    items.push_back({{"name", k8s::Name(nb)},
                     {"namespace", k8s::Namespace(nb)},
                     {"image", image},
                     {"limits", limits},
                     {"state", NotebookState(nb)}});
  }
  return http::Response::Json(200, {{"notebooks", items}});
}

http::Response UiService::Static(const http::Request& req) const {
  if (options_.web_dir.empty()) return http::Response::Error(404, "no web folder configured");
  std::string path =
      req.path == "/" ? (options_.dashboard_only ? "/dashboard.html" : "/index.html") : req.path;
  if (path.find("..") != std::string::npos || path.find('\\') != std::string::npos) {
    return http::Response::Error(404, "not found: " + req.path);
  }
  auto body = base::ReadFile(options_.web_dir + path, kMaxStaticFileBytes);
  if (!body.ok()) return http::Response::Error(404, "not found: " + req.path);
  http::Response r = http::Response::Text(200, std::move(*body), ContentType(path));
  r.headers.emplace_back("Cache-Control", "no-cache");
  return r;
}

}  // namespace fracgpu::ui
