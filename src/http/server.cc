#include "http/server.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>

#include <sys/socket.h>

#include "http/cert_store.h"

namespace fracgpu::http {
namespace {

constexpr size_t kHardBodyLimit = 64u << 20;  // bodies past this are cut by httplib (413 → 400)

bool IEquals(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

int CertCallback(SSL* ssl, void* arg) {
  auto* store = static_cast<Server::CertStore*>(arg);
  store->MaybeReload();
  return store->Apply(ssl) ? 1 : 0;
}

}  // namespace

std::string Request::Header(const std::string& name) const {
  for (const auto& [k, v] : headers) {
    if (IEquals(k, name)) return v;
  }
  return "";
}

std::string Request::Param(const std::string& name) const {
  auto it = params.find(name);
  return it == params.end() ? "" : it->second;
}

Response Response::Json(int status, const nlohmann::json& body) {
  Response r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

Response Response::Text(int status, std::string body, std::string content_type) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  r.content_type = std::move(content_type);
  return r;
}

Response Response::Error(int status, const std::string& message) {
  return Json(status, {{"error", message}});
}

Server::Server(ServerOptions options) : options_(std::move(options)) {}

Server::~Server() { Stop(); }

void Server::Route(const std::string& method, const std::string& path, Handler handler) {
  exact_[{method, path}] = std::move(handler);
}

void Server::RoutePrefix(const std::string& method, const std::string& prefix, Handler handler) {
  prefix_.emplace_back(method, prefix, std::move(handler));
  std::sort(prefix_.begin(), prefix_.end(),
            [](const auto& a, const auto& b) { return std::get<1>(a).size() > std::get<1>(b).size(); });
}

Response Server::Dispatch(const Request& req) const {
  const Handler* handler = nullptr;
  bool path_known = false;
  if (auto it = exact_.find({req.method, req.path}); it != exact_.end()) {
    handler = &it->second;
  } else {
    for (const auto& [m, p, h] : prefix_) {
      if (req.path.rfind(p, 0) == 0) {
        path_known = true;
        if (m == req.method) {
          handler = &h;
          break;
        }
      }
    }
    for (const auto& [k, h] : exact_) {
      if (k.second == req.path) path_known = true;
    }
  }
  if (handler == nullptr) {
    return path_known ? Response::Error(405, "method " + req.method + " not allowed on " + req.path)
                      : Response::Error(404, "no route for " + req.path);
  }
  if (req.body.size() > options_.max_body_bytes) {
    return Response::Error(400, "request body is " + std::to_string(req.body.size()) + " bytes; the limit is " +
                                    std::to_string(options_.max_body_bytes));
  }
  try {
    return (*handler)(req);
  } catch (const std::exception& e) {
    return Response::Error(500, std::string("internal error: ") + e.what());
  } catch (...) {
    return Response::Error(500, "internal error");
  }
}

Status Server::Start() {
  if (server_) return Status::Ok();
  if (options_.cert_file.empty() != options_.key_file.empty()) {
    return InvalidArgument("both a certificate file and a key file are needed for HTTPS");
  }
  if (tls()) {
    certs_ = std::make_unique<CertStore>(options_.cert_file, options_.key_file);
    FRACGPU_RETURN_IF_ERROR(certs_->Load());
    CertStore* store = certs_.get();
    server_ = std::make_unique<httplib::SSLServer>([store](SSL_CTX& ctx) {
      SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
      SSL_CTX_set_options(&ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_SESSION_RESUMPTION_ON_RENEGOTIATION);
      SSL_CTX_set_cert_cb(&ctx, &CertCallback, store);
      return true;
    });
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  if (!server_->is_valid()) return Internal("cannot create the HTTP server (OpenSSL context)");
  int threads = std::max(1, options_.threads);
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  server_->set_tcp_nodelay(true);
  server_->set_read_timeout(options_.read_timeout_s, 0);
  server_->set_write_timeout(options_.write_timeout_s, 0);
  server_->set_payload_max_length(std::max(kHardBodyLimit, options_.max_body_bytes));
  auto handler = [this](const httplib::Request& hreq, httplib::Response& hres) {
    Request req;
    req.method = hreq.method;
    req.path = hreq.path;
    req.body = hreq.body;
    req.remote_addr = hreq.remote_addr;
    for (const auto& [k, v] : hreq.params) req.params.emplace(k, v);
    for (const auto& [k, v] : hreq.headers) req.headers.emplace_back(k, v);
    Response res = Dispatch(req);
    hres.status = res.status;
    for (const auto& [k, v] : res.headers) hres.set_header(k, v);
    hres.set_content(res.body, res.content_type);
  };
  server_->Get(R"(/.*)", handler);
  server_->Post(R"(/.*)", handler);
  server_->Put(R"(/.*)", handler);
  server_->Patch(R"(/.*)", handler);
  server_->Delete(R"(/.*)", handler);
  server_->set_error_handler([this](const httplib::Request&, httplib::Response& res) {
    if (res.status == 413) {
      Response r = Response::Error(400, "request body exceeds " + std::to_string(std::max(kHardBodyLimit, options_.max_body_bytes)) +
                                            " bytes");
      res.status = 400;
      res.set_content(r.body, r.content_type);
    } else if (res.body.empty()) {
      res.set_content(Response::Error(res.status, "HTTP " + std::to_string(res.status)).body, "application/json");
    }
  });
  // httplib listens with a backlog of 5: a burst of connections (kube-scheduler binds in
  // parallel) overflows it. Remember the socket and listen again with a deep backlog.
  auto listen_fd = std::make_shared<int>(-1);
  server_->set_socket_options([listen_fd](int sock) {
    httplib::default_socket_options(sock);
    *listen_fd = sock;
  });
  if (options_.port == 0) {
    port_ = server_->bind_to_any_port(options_.host);
  } else {
    port_ = server_->bind_to_port(options_.host, options_.port) ? options_.port : -1;
  }
  if (port_ <= 0) {
    server_.reset();
    return Unavailable("cannot listen on " + options_.host + ":" + std::to_string(options_.port));
  }
  if (*listen_fd >= 0) ::listen(*listen_fd, 1024);
  {
    std::lock_guard<std::mutex> lock(listen_mu_);
    listen_returned_ = false;
  }
  thread_ = std::thread([this] {
    server_->listen_after_bind();
    {
      std::lock_guard<std::mutex> lock(listen_mu_);
      listen_returned_ = true;
    }
    listen_cv_.notify_all();
  });
  WaitUntilListening();
  return Status::Ok();
}

// cpp-httplib 0.11 sets is_running() only once listen_after_bind() has entered its accept
// loop, and Server::stop() does nothing while is_running() is false
// (yhirose/cpp-httplib#1371, #1645). A Stop() that lands in that window is lost and the
// accept() blocks forever, so Stop()'s join hangs (this is what hung
// ExtenderTest.RestartRebuildsTheSameUsage: a service stopped right after its start).
// httplib 0.11 has no readiness hook (wait_until_ready() came later), so poll is_running()
// in 1 ms steps; it turns true within one scheduling quantum of the thread starting.
void Server::WaitUntilListening() {
  std::unique_lock<std::mutex> lock(listen_mu_);
  while (!listen_returned_ && !server_->is_running()) {
    listen_cv_.wait_for(lock, std::chrono::milliseconds(1));
  }
}

void Server::Stop() {
  if (!server_) return;
  WaitUntilListening();
  server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
}

std::string Server::BaseUrl() const {
  std::string host = options_.host == "0.0.0.0" || options_.host.empty() ? "127.0.0.1" : options_.host;
  return std::string(tls() ? "https://" : "http://") + host + ":" + std::to_string(port_);
}

int64_t Server::cert_loads() const { return certs_ ? certs_->loads() : 0; }

}  // namespace fracgpu::http
