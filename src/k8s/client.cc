#include "k8s/client.h"

#include <curl/curl.h>

#include <algorithm>
#include <mutex>

#include "base/file.h"
#include "base/strings.h"
#include "k8s/objects.h"

namespace fracgpu::k8s {
namespace {

std::once_flag g_curl_init;

size_t AppendBody(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

long Millis(double seconds) { return static_cast<long>(seconds * 1000.0); }

std::string AppendQuery(const std::string& path, const std::string& key, const std::string& value) {
  if (value.empty()) return path;
  return path + (path.find('?') == std::string::npos ? "?" : "&") + key + "=" + UrlEncode(value);
}

}  // namespace

std::string UrlEncode(const std::string& value) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string NodePath(const std::string& name) { return "/api/v1/nodes/" + name; }
std::string PodPath(const std::string& ns, const std::string& name) {
  std::string p = "/api/v1/namespaces/" + ns + "/pods";
  return name.empty() ? p : p + "/" + name;
}
std::string LeasePath(const std::string& ns, const std::string& name) {
  std::string p = "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases";
  return name.empty() ? p : p + "/" + name;
}

Result<std::unique_ptr<Client>> Client::Create(Config config, ClientOptions options,
                                               base::Clock* clock) {
  if (config.server.empty()) return InvalidArgument("k8s client: config.server is empty");
  while (!config.server.empty() && config.server.back() == '/') config.server.pop_back();
  std::call_once(g_curl_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  return std::unique_ptr<Client>(new Client(std::move(config), std::move(options),
                                            clock != nullptr ? clock : base::RealClock::Get()));
}

Client::Client(Config config, ClientOptions options, base::Clock* clock)
    : config_(std::move(config)),
      options_(std::move(options)),
      clock_(clock),
      token_(config_.token) {}

Client::~Client() {
  for (void* h : idle_handles_) curl_easy_cleanup(static_cast<CURL*>(h));
}

void* Client::AcquireHandle() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_handles_.empty()) {
      void* h = idle_handles_.back();
      idle_handles_.pop_back();
      curl_easy_reset(static_cast<CURL*>(h));  // keeps the connection cache
      return h;
    }
  }
  return curl_easy_init();
}

void Client::ReleaseHandle(void* handle) {
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_handles_.size() < static_cast<size_t>(std::max(0, options_.max_idle_connections))) {
    idle_handles_.push_back(handle);
  } else {
    curl_easy_cleanup(static_cast<CURL*>(handle));
  }
}

std::string Client::BearerToken() {
  std::lock_guard<std::mutex> lock(mu_);
  if (config_.token_file.empty()) return token_;
  // Projected service-account tokens rotate: re-read about once a minute (docs/design/wire-apis.md
  // §6.1).
  auto now = std::chrono::steady_clock::now();
  if (token_.empty() || now - token_read_ > std::chrono::seconds(60)) {
    if (auto text = base::ReadFile(config_.token_file, kMaxConfigFileBytes); text.ok()) {
      token_ = std::string(base::TrimEnd(*text, kLineEnd));
      token_read_ = now;
    }
  }
  return token_;
}

void Client::ApplyCommon(void* h, const std::string& url, std::vector<std::string>* headers) {
  CURL* curl = static_cast<CURL*>(h);
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, Millis(config_.connect_timeout_s));
  curl_easy_setopt(curl, CURLOPT_USERAGENT, options_.user_agent.c_str());
  if (!config_.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, config_.ca_file.c_str());
  if (!config_.ca_data.empty()) {
    curl_blob blob{const_cast<char*>(config_.ca_data.data()), config_.ca_data.size(),
                   CURL_BLOB_COPY};
    curl_easy_setopt(curl, CURLOPT_CAINFO_BLOB, &blob);
  }
  if (!config_.client_cert_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLCERT, config_.client_cert_file.c_str());
  }
  if (!config_.client_cert_data.empty()) {
    curl_blob blob{const_cast<char*>(config_.client_cert_data.data()),
                   config_.client_cert_data.size(), CURL_BLOB_COPY};
    curl_easy_setopt(curl, CURLOPT_SSLCERT_BLOB, &blob);
  }
  if (!config_.client_key_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLKEY, config_.client_key_file.c_str());
  }
  if (!config_.client_key_data.empty()) {
    curl_blob blob{const_cast<char*>(config_.client_key_data.data()),
                   config_.client_key_data.size(), CURL_BLOB_COPY};
    curl_easy_setopt(curl, CURLOPT_SSLKEY_BLOB, &blob);
  }
  if (config_.insecure_skip_tls_verify) {
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  headers->push_back("Accept: application/json");
  headers->push_back("Expect:");  // no 100-continue round trip before request bodies
  std::string token = BearerToken();
  if (!token.empty()) headers->push_back("Authorization: Bearer " + token);
}

Result<Client::Reply> Client::Perform(const std::string& method, const std::string& path,
                                      const std::string& content_type, const std::string& body) {
  CURL* curl = static_cast<CURL*>(AcquireHandle());
  if (curl == nullptr) return Internal("curl_easy_init failed");
  std::vector<std::string> header_lines;
  ApplyCommon(curl, config_.server + path, &header_lines);
  if (!content_type.empty()) header_lines.push_back("Content-Type: " + content_type);
  curl_slist* headers = nullptr;
  for (const auto& h : header_lines) headers = curl_slist_append(headers, h.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, Millis(config_.timeout_s));
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  if (method == "POST" || method == "PUT" || method == "PATCH") {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  }
  Reply reply;
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &AppendBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply.body);
  CURLcode rc = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &reply.status);
  curl_slist_free_all(headers);
  ReleaseHandle(curl);
  if (rc != CURLE_OK) {
    // Name the whole URL: "API server unreachable" is useless without the address tried.
    return Unavailable(method + " " + config_.server + path + ": " + curl_easy_strerror(rc) +
                       " (API server " + config_.server + ")");
  }
  return reply;
}

Status Client::ErrorFor(const std::string& method, const std::string& path,
                        const Reply& reply) const {
  std::string detail = reply.body.substr(0, 512);
  auto parsed = json::parse(reply.body, nullptr, false);
  if (parsed.is_object() && parsed.contains("message") && parsed["message"].is_string()) {
    detail = parsed["message"].get<std::string>();
  }
  std::string msg = method + " " + path + ": HTTP " + std::to_string(reply.status) + ": " + detail;
  switch (reply.status) {
    case 400:
    case 422:
      return InvalidArgument(msg);
    case 401:
    case 403:
      return PermissionDenied(msg);
    case 404:
      return NotFound(msg);
    case 409:
      return Conflict(msg);
    default:
      if (reply.status == 410 || reply.status == 429 || reply.status >= 500)
        return Unavailable(msg);
      return Internal(msg);
  }
}

Result<json> Client::Call(const std::string& method, const std::string& path,
                          const std::string& content_type, const std::string& body, bool retry,
                          bool strict) {
  const std::string target = strict ? AppendQuery(path, "fieldValidation", "Strict") : path;
  base::Backoff backoff(options_.backoff);
  for (int attempt = 0;; ++attempt) {
    auto reply = Perform(method, target, content_type, body);
    Status st;
    if (reply.ok() && reply->status >= 200 && reply->status < 300) {
      if (reply->body.empty()) return json::object();
      auto parsed = json::parse(reply->body, nullptr, false);
      if (parsed.is_discarded()) {
        return Internal(method + " " + path + ": reply is not JSON: " + reply->body.substr(0, 200));
      }
      return parsed;
    }
    st = reply.ok() ? ErrorFor(method, path, *reply) : reply.status();
    if (!retry || st.code() != StatusCode::kUnavailable || attempt >= options_.retries) return st;
    clock_->Sleep(backoff.Next(), nullptr);
  }
}

Result<json> Client::Get(const std::string& path) { return Call("GET", path, "", "", true); }

namespace {

// The path of one page of a list: selectors, page size, and `cont` (the previous page's
// continue token) or, on the first page, the resourceVersion asked for.
std::string ListPagePath(const std::string& path, const ListOptions& options,
                         const std::string& cont) {
  std::string p = AppendQuery(path, "labelSelector", options.label_selector);
  p = AppendQuery(p, "fieldSelector", options.field_selector);
  if (options.limit > 0) p = AppendQuery(p, "limit", std::to_string(options.limit));
  p = AppendQuery(p, "continue", cont);
  if (cont.empty()) p = AppendQuery(p, "resourceVersion", options.resource_version);
  return p;
}

// The continue token of a list page ("" on the last page).
std::string ContinueToken(const json& page) {
  if (!page.contains("metadata") || !page["metadata"].is_object()) return "";
  const auto& md = page["metadata"];
  if (md.contains("continue") && md["continue"].is_string())
    return md["continue"].get<std::string>();
  return "";
}

}  // namespace

Result<std::string> Client::ListEach(const std::string& path, const ListOptions& options,
                                     const std::function<void(json& item)>& on_item) {
  std::string cont, rv;
  do {
    std::string p = ListPagePath(path, options, cont);
    auto page = Call("GET", p, "", "", true);
    if (!page.ok()) return page.status();
    json& pj = *page;
    if (!pj.is_object()) return Internal("GET " + p + ": list reply is not an object");
    if (pj.contains("items") && pj["items"].is_array()) {
      for (auto& item : pj["items"]) on_item(item);
    }
    rv = ResourceVersion(pj);
    cont = ContinueToken(pj);
  } while (!cont.empty());
  return rv;
}

Result<json> Client::List(const std::string& path, const ListOptions& options) {
  json all;
  std::string cont;
  do {
    std::string p = ListPagePath(path, options, cont);
    auto page = Call("GET", p, "", "", true);
    if (!page.ok()) return page.status();
    json& pj = *page;
    if (!pj.is_object()) return Internal("GET " + p + ": list reply is not an object");
    if (all.is_null()) {
      all = pj;
      if (!all.contains("items") || !all["items"].is_array()) all["items"] = json::array();
    } else if (pj.contains("items") && pj["items"].is_array()) {
      for (auto& item : pj["items"]) all["items"].push_back(std::move(item));
      all["metadata"] = pj.value("metadata", json::object());
    }
    cont = ContinueToken(pj);
  } while (!cont.empty());
  if (all.contains("metadata") && all["metadata"].is_object()) all["metadata"].erase("continue");
  return all;
}

// Every write asks the API server for strict field validation (fieldValidation=Strict,
// kube-apiserver 1.27+ GA, docs: "Field validation"): an unknown or duplicate field in what
// fracgpu writes is a 400 naming the field, never a field the server drops without a word.
Result<json> Client::Create(const std::string& path, const json& body) {
  return Call("POST", path, "application/json", body.dump(), false, /*strict=*/true);
}

Result<json> Client::Update(const std::string& path, const json& body) {
  return Call("PUT", path, "application/json", body.dump(), false, /*strict=*/true);
}

Status Client::Delete(const std::string& path) {
  auto r = Call("DELETE", path, "", "", false);
  return r.ok() ? Status::Ok() : r.status();
}

Result<json> Client::MergePatch(const std::string& path, const json& patch) {
  return Call("PATCH", path, "application/merge-patch+json", patch.dump(), true, /*strict=*/true);
}

Result<json> Client::PatchWithRetry(
    const std::string& path, const std::function<Result<json>(const json& current)>& make_patch) {
  base::Backoff backoff(options_.backoff);
  for (int attempt = 0;; ++attempt) {
    auto current = Get(path);
    if (!current.ok()) return current.status();
    auto patch = make_patch(*current);
    if (!patch.ok()) return patch.status();
    if (patch->is_null()) return current;
    json p = *patch;
    std::string rv;
    if (current->contains("metadata") && (*current)["metadata"].is_object()) {
      rv = (*current)["metadata"].value("resourceVersion", "");
    }
    p["metadata"]["resourceVersion"] = rv;
    auto result = MergePatch(path, p);
    if (result.ok() || result.status().code() != StatusCode::kConflict ||
        attempt >= options_.conflict_retries) {
      return result;
    }
    clock_->Sleep(backoff.Next(), nullptr);
  }
}

Status Client::BindPod(const std::string& ns, const std::string& name, const std::string& uid,
                       const std::string& node) {
  BindingMeta meta;
  meta.uid = uid;
  return BindPod(ns, name, node, meta);
}

Status Client::BindPod(const std::string& ns, const std::string& name, const std::string& node,
                       const BindingMeta& meta) {
  json binding = {{"apiVersion", "v1"},
                  {"kind", "Binding"},
                  {"metadata", {{"name", name}, {"namespace", ns}}},
                  {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
  if (!meta.uid.empty()) binding["metadata"]["uid"] = meta.uid;
  if (!meta.resource_version.empty())
    binding["metadata"]["resourceVersion"] = meta.resource_version;
  if (!meta.annotations.empty()) binding["metadata"]["annotations"] = meta.annotations;
  if (!meta.labels.empty()) binding["metadata"]["labels"] = meta.labels;
  auto r = Create(PodPath(ns, name) + "/binding", binding);
  return r.ok() ? Status::Ok() : r.status();
}

Status Client::CreateEvent(const json& involved, const std::string& type, const std::string& reason,
                           const std::string& message, const std::string& component) {
  const json md = involved.value("metadata", json::object());
  std::string ns = md.value("namespace", "");
  std::string kind = involved.value("kind", ns.empty() ? "Node" : "Pod");
  if (ns.empty()) ns = "default";  // events about cluster-scoped objects live in "default"
  auto now = clock_->Now();
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char ts[32];
  std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
  json event = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"generateName", md.value("name", "object") + "."}, {"namespace", ns}}},
      {"involvedObject",
       {{"apiVersion", "v1"},
        {"kind", kind},
        {"name", md.value("name", "")},
        {"namespace", md.value("namespace", "")},
        {"uid", md.value("uid", "")}}},
      {"type", type},
      {"reason", reason},
      {"message", message.substr(0, 1024)},
      {"source", {{"component", component}}},
      {"firstTimestamp", ts},
      {"lastTimestamp", ts},
      {"count", 1}};
  auto r = Create("/api/v1/namespaces/" + ns + "/events", event);
  return r.ok() ? Status::Ok() : r.status();
}

namespace {

struct WatchState {
  std::string buffer;
  const std::function<bool(const WatchEvent&)>* on_event = nullptr;
  bool expired = false;
  bool callback_stopped = false;
  std::string bad_line;
  CURL* curl = nullptr;
};

// Splits the chunked stream into lines; each line is one JSON event (docs/design/wire-apis.md
// §6.2).
size_t WatchWrite(char* data, size_t size, size_t n, void* user) {
  auto* st = static_cast<WatchState*>(user);
  st->buffer.append(data, size * n);
  long http_status = 0;
  curl_easy_getinfo(st->curl, CURLINFO_RESPONSE_CODE, &http_status);
  if (http_status != 200) return st->buffer.size() > (1 << 20) ? 0 : size * n;  // an error body
  size_t pos;
  while ((pos = st->buffer.find('\n')) != std::string::npos) {
    std::string line = st->buffer.substr(0, pos);
    st->buffer.erase(0, pos + 1);
    if (base::TrimEnd(line, kLineEnd).empty()) continue;
    auto parsed = json::parse(line, nullptr, false);
    if (!parsed.is_object() || !parsed.contains("type") || !parsed["type"].is_string()) {
      st->bad_line = line.substr(0, 200);
      return 0;  // abort: the stream is corrupt
    }
    WatchEvent ev{parsed["type"].get<std::string>(), parsed.value("object", json::object())};
    if (ev.type == "ERROR") {
      if (ev.object.is_object() && ev.object.value("code", 0) == 410) {
        st->expired = true;
        return 0;
      }
    }
    if (!(*st->on_event)(ev)) {
      st->callback_stopped = true;
      return 0;
    }
  }
  return size * n;
}

}  // namespace

Result<WatchEnd> Client::Watch(const std::string& path, const WatchOptions& options,
                               const std::function<bool(const WatchEvent&)>& on_event,
                               base::StopSignal* stop) {
  std::string p = AppendQuery(path, "watch", "true");
  p = AppendQuery(p, "labelSelector", options.label_selector);
  p = AppendQuery(p, "fieldSelector", options.field_selector);
  p = AppendQuery(p, "resourceVersion", options.resource_version);
  if (options.allow_bookmarks) p = AppendQuery(p, "allowWatchBookmarks", "true");
  p = AppendQuery(p, "timeoutSeconds", std::to_string(options.timeout_s));

  // A fresh easy handle in a multi handle, so Stop() can interrupt a blocked read at once
  // through curl_multi_wakeup.
  CURL* curl = curl_easy_init();
  CURLM* multi = curl_multi_init();
  if (curl == nullptr || multi == nullptr) {
    if (curl) curl_easy_cleanup(curl);
    if (multi) curl_multi_cleanup(multi);
    return Internal("curl init failed");
  }
  std::vector<std::string> header_lines;
  ApplyCommon(curl, config_.server + p, &header_lines);
  curl_slist* headers = nullptr;
  for (const auto& h : header_lines) headers = curl_slist_append(headers, h.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (options.timeout_s + 30) * 1000L);
  WatchState state;
  state.on_event = &on_event;
  state.curl = curl;
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &WatchWrite);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &state);
  curl_multi_add_handle(multi, curl);

  std::atomic<bool> stopping{false};
  int64_t waker = -1;
  if (stop != nullptr) {
    waker = stop->OnStop([&] {
      stopping = true;
      curl_multi_wakeup(multi);
    });
  }
  CURLcode result = CURLE_OK;
  bool done = false;
  while (!done && !stopping) {
    int running = 0;
    curl_multi_perform(multi, &running);
    int queued = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi, &queued)) {
      if (msg->msg == CURLMSG_DONE) {
        result = msg->data.result;
        done = true;
      }
    }
    if (done || running == 0) {
      done = true;
      break;
    }
    curl_multi_poll(multi, nullptr, 0, 1000, nullptr);
  }
  if (stop != nullptr && waker >= 0) stop->Unregister(waker);
  long http_status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &http_status);
  curl_multi_remove_handle(multi, curl);
  curl_easy_cleanup(curl);
  curl_multi_cleanup(multi);
  curl_slist_free_all(headers);

  if (stopping || state.callback_stopped) return WatchEnd::kStopped;
  if (state.expired || http_status == 410) return WatchEnd::kExpired;
  if (http_status != 0 && (http_status < 200 || http_status >= 300)) {
    Reply reply{http_status, state.buffer};
    return ErrorFor("WATCH", path, reply);
  }
  if (!state.bad_line.empty()) {
    return Unavailable("WATCH " + path + ": malformed event line: " + state.bad_line);
  }
  if (result != CURLE_OK) {
    return Unavailable("WATCH " + config_.server + path + ": " + curl_easy_strerror(result) +
                       " (API server " + config_.server + ")");
  }
  return WatchEnd::kClosed;
}

Result<std::unique_ptr<Client>> Connect(const std::string& kubeconfig) {
  auto config = LoadConfig(kubeconfig);
  if (!config.ok()) return config.status().WithPrefix("Kubernetes configuration");
  auto client = Client::Create(std::move(*config));
  if (!client.ok()) return client.status().WithPrefix("Kubernetes client");
  return client;
}

}  // namespace fracgpu::k8s
