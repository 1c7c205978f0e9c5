#include "http/server.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <system_error>

#include "http/cert_store.h"

// ---- httplib's per-connection entry point ----
//
// cpp-httplib 0.11 (Debian 12) has no hook between accept() and the request parser: no
// per-connection callback, no total deadline for a request's headers (only a per-recv
// timeout, which a client sending a byte every few seconds never trips), no bound on a header
// line while it is read (it buffers the whole line, then checks CPPHTTPLIB_HEADER_MAX_LENGTH:
// 12 connections sending one 64 MiB line each took the scheduler to 688 MiB, issue 33), and its
// thread pool queues every accepted connection without bound. fracgpu therefore runs two httplib
// servers: an acceptor whose process_and_close_socket override hands each socket to the Gate
// (caps, deadlines, a worker per connection), and the serving server, whose protected
// process_request() the worker calls once per request on fracgpu's own Stream (ConnStream:
// plain or TLS, counting the request line and headers as they are read).

namespace fracgpu::http {
namespace {

using Clock = std::chrono::steady_clock;

// Listening sockets: SO_REUSEADDR (a restart may bind while old connections sit in
// TIME_WAIT) but not httplib's default SO_REUSEPORT, with which a second process binds the
// same port and the kernel splits the connections between the two (issue 15).
void ListenSocketOptions(::socket_t sock) {
  int yes = 1;
  ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

// The serving server: httplib's own implementation, with the listening socket number set so
// that its keep-alive loop runs (it stops when the number is INVALID_SOCKET, i.e. at Stop()).
template <typename Base>
class Serving : public Base {
 public:
  using Base::Base;
  void set_listen_socket(::socket_t s) { this->svr_sock_ = s; }
  /// Reads, routes and answers one request from `strm` (httplib's own per-request step).
  bool ServeOne(httplib::Stream& strm, bool close_connection, bool& connection_closed,
                const std::function<void(httplib::Request&)>& setup) {
    return this->process_request(strm, close_connection, connection_closed, setup);
  }
};

// The acceptor: httplib's accept loop; each accepted socket goes to `on_socket`, which owns it.
class Acceptor : public httplib::Server {
 public:
  explicit Acceptor(std::function<void(::socket_t)> on_socket) : on_socket_(std::move(on_socket)) {}

 private:
  bool process_and_close_socket(::socket_t sock) override {
    on_socket_(sock);
    return true;
  }
  std::function<void(::socket_t)> on_socket_;
};

// Runs each task on the calling (accept) thread: the acceptor's tasks only count and hand off.
class InlineQueue : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

std::string PeerAddress(::socket_t sock) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(sock, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "?";
  char buf[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr, buf, sizeof(buf));
  } else if (addr.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr, buf, sizeof(buf));
  }
  return buf;
}

bool IsBodyMethod(const std::string& m) {
  return m == "POST" || m == "PUT" || m == "PATCH" || m == "DELETE";
}

// The socket of the connection the calling worker thread serves (-1 outside a worker).
thread_local ::socket_t tls_socket = -1;

bool IEquals(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

int CertCallback(SSL* ssl, void* arg) {
  auto* store = static_cast<Server::CertStore*>(arg);
  store->MaybeReload();
  return store->Apply(ssl) ? 1 : 0;
}

// Ends a refused connection without destroying its answer: closes the write side, then reads
// and drops up to `max_bytes` of what the client still sends, for at most `ms` milliseconds
// (closing with unread bytes would send a TCP RST that can destroy the answer before the
// client reads it). Nothing read is kept.
void DrainAfterAnswer(::socket_t sock, size_t max_bytes, int ms) {
  ::shutdown(sock, SHUT_WR);
  auto until = Clock::now() + std::chrono::milliseconds(ms);
  size_t drained = 0;
  char buf[16384];
  while (drained < max_bytes && Clock::now() < until) {
    pollfd p{sock, POLLIN, 0};
    int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count());
    if (::poll(&p, 1, std::max(1, left)) <= 0) break;
    ssize_t n = ::recv(sock, buf, sizeof(buf), MSG_DONTWAIT);
    if (n <= 0) break;
    drained += static_cast<size_t>(n);
  }
  ::shutdown(sock, SHUT_RD);
}

// The names of the client certificate `ssl` verified: subject CN, then DNS SANs.
std::vector<std::string> VerifiedClientNames(SSL* ssl) {
  std::vector<std::string> names;
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (cert == nullptr) return names;
  if (SSL_get_verify_result(ssl) == X509_V_OK) {
    char cn[256] = {0};
    if (X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn) > 0)
      names.emplace_back(cn);
    auto* sans =
        static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
    for (int i = 0; sans != nullptr && i < sk_GENERAL_NAME_num(sans); ++i) {
      const GENERAL_NAME* g = sk_GENERAL_NAME_value(sans, i);
      if (g->type != GEN_DNS) continue;
      const auto* d = reinterpret_cast<const char*>(ASN1_STRING_get0_data(g->d.dNSName));
      names.emplace_back(d, static_cast<size_t>(ASN1_STRING_length(g->d.dNSName)));
    }
    GENERAL_NAMES_free(sans);
  }
  X509_free(cert);
  return names;
}

// One connection's byte stream for httplib's request parser: plain (recv/send) or TLS
// (SSL_read/SSL_write) on a blocking socket with SO_RCVTIMEO/SO_SNDTIMEO set, read through a
// 16 KiB buffer. Between BeginRequest() and the blank line that ends the headers it counts what
// it hands out: a line longer than max_line or a head longer than max_head is answered here
// (414 for the request line, 431 for a header line), the connection is ended and every later
// read fails, so no more than the caps (plus one buffer) of a request's head is ever held.
class ConnStream final : public httplib::Stream {
 public:
  ConnStream(::socket_t sock, SSL* ssl, size_t max_line, size_t max_head, int read_ms, int write_ms)
      : sock_(sock),
        ssl_(ssl),
        max_line_(max_line),
        max_head_(max_head),
        read_ms_(read_ms),
        write_ms_(write_ms) {}

  /// Starts counting the next request's head.
  void BeginRequest() {
    in_head_ = true;
    head_ = 0;
    line_ = 0;
    first_line_ = true;
  }
  /// Whether the head was refused (the connection is over).
  bool refused() const { return refused_; }
  /// Whether bytes of a next request are already buffered (pipelined).
  bool buffered() const { return pos_ < len_ || (ssl_ != nullptr && SSL_pending(ssl_) > 0); }

  bool is_readable() const override { return buffered() || Poll(POLLIN, read_ms_); }
  bool is_writable() const override { return !refused_ && Poll(POLLOUT, write_ms_); }

  ssize_t read(char* ptr, size_t size) override {
    if (refused_) return -1;
    if (pos_ == len_) {
      ssize_t n = Fill();
      if (n <= 0) return n;
    }
    size_t n = std::min(size, len_ - pos_);
    if (in_head_) {
      for (size_t i = 0; i < n; ++i) {
        const char c = buf_[pos_ + i];
        ++head_;
        if (c == '\n') {
          if (line_ == 0 && !first_line_) {  // the blank line: the body (if any) follows
            in_head_ = false;
            n = i + 1;
            break;
          }
          line_ = 0;
          first_line_ = false;
          continue;
        }
        if (c != '\r') ++line_;
        if (line_ > max_line_ || head_ > max_head_) {
          RefuseHead();
          return -1;
        }
      }
    }
    std::memcpy(ptr, buf_ + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (refused_) return static_cast<ssize_t>(size);  // httplib's own 400 after ours: dropped
    return WriteRaw(ptr, size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Address(&::getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Address(&::getsockname, ip, port);
  }
  ::socket_t socket() const override { return sock_; }

 private:
  ssize_t Fill() {
    pos_ = len_ = 0;
    for (;;) {
      ssize_t n;
      if (ssl_ != nullptr) {
        int r = SSL_read(ssl_, buf_, sizeof(buf_));
        if (r > 0) {
          n = r;
        } else {
          return SSL_get_error(ssl_, r) == SSL_ERROR_ZERO_RETURN ? 0 : -1;
        }
      } else {
        n = ::recv(sock_, buf_, sizeof(buf_), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n;
      }
      len_ = static_cast<size_t>(n);
      return n;
    }
  }

  ssize_t WriteRaw(const char* ptr, size_t size) {
    if (ssl_ != nullptr) {
      int r = SSL_write(ssl_, ptr, static_cast<int>(std::min<size_t>(size, 1 << 30)));
      return r > 0 ? r : -1;
    }
    for (;;) {
      ssize_t n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      return n;
    }
  }

  void RefuseHead() {
    const bool uri = first_line_;
    const int status = uri ? 414 : 431;
    const std::string what = uri ? "request line" : "header line";
    std::string message = line_ > max_line_ ? "the " + what + " is longer than " +
                                                  std::to_string(max_line_) + " bytes"
                                            : "the request line and headers are longer than " +
                                                  std::to_string(max_head_) + " bytes";
    std::string body = Response::Error(status, message).body;
    std::string head = "HTTP/1.1 " + std::to_string(status) +
                       (uri ? " URI Too Long" : " Request Header Fields Too Large") +
                       "\r\nContent-Type: application/json\r\nConnection: close\r\n"
                       "Content-Length: " +
                       std::to_string(body.size()) + "\r\n\r\n" + body;
    (void)WriteRaw(head.data(), head.size());
    refused_ = true;
    pos_ = len_ = 0;
    // At most 1 MiB / 1 s more is read (and dropped) so that the answer is not lost to a reset.
    DrainAfterAnswer(sock_, 1u << 20, 1000);
  }

  bool Poll(short events, int ms) const {
    pollfd p{sock_, events, 0};
    return ::poll(&p, 1, ms) > 0 && (p.revents & events) != 0;
  }

  void Address(int (*fn)(int, sockaddr*, socklen_t*), std::string& ip, int& port) const {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    ip.clear();
    port = 0;
    if (fn(sock_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
    char buf[INET6_ADDRSTRLEN] = {0};
    if (addr.ss_family == AF_INET) {
      auto* a = reinterpret_cast<sockaddr_in*>(&addr);
      ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
      port = ntohs(a->sin_port);
    } else if (addr.ss_family == AF_INET6) {
      auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
      ::inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
      port = ntohs(a->sin6_port);
    }
    ip = buf;
  }

  ::socket_t sock_;
  SSL* ssl_;
  size_t max_line_, max_head_;
  int read_ms_, write_ms_;
  char buf_[16384];
  size_t pos_ = 0, len_ = 0;
  bool in_head_ = true, first_line_ = true, refused_ = false;
  size_t head_ = 0, line_ = 0;
};

}  // namespace

// Worker threads started on demand: one per queued connection when none is idle, up to `max`.
class ConnectionWorkers {
 public:
  ConnectionWorkers(size_t start, size_t max) : max_(std::max<size_t>(1, max)) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < std::min(start, max_); ++i) threads_.emplace_back([this] { Loop(); });
  }
  void Enqueue(std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(fn));
    if (static_cast<size_t>(idle_) < queue_.size() && threads_.size() < max_) {
      try {
        threads_.emplace_back([this] { Loop(); });
      } catch (const std::system_error&) {
        // No thread to be had (EAGAIN): the connection waits for a running worker instead.
      }
    }
    cv_.notify_one();
  }
  /// Runs what is queued, then joins every thread.
  void Shutdown() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }
  size_t threads() {
    std::lock_guard<std::mutex> lock(mu_);
    return threads_.size();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      ++idle_;
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      --idle_;
      if (queue_.empty()) return;
      auto fn = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      fn();
      lock.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> threads_;
  int idle_ = 0;
  bool stop_ = false;
  size_t max_;
};

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

/// Caps and deadlines of the connections of one Server (see server.h). Each admitted
/// connection's socket stays open (the serving server gets a dup) until it is deregistered,
/// so the watchdog's shutdown() never reaches a reused descriptor number.
struct Server::Gate {
  struct Conn {
    std::string peer;
    Clock::time_point deadline;
    Clock::time_point retire;  // accepted + max_connection_age_s: answers after it close
    Clock::time_point accepted;
    bool retired = false;  // past `retire` at an answer: `deadline` is final
    bool cut = false;
    bool requested = false;  // a request of it has reached its handler
  };
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::map<::socket_t, Conn> conns;
  std::map<std::string, int> per_client;
  int cut_count = 0;      // entries of `conns` already cut (not counted against the cap)
  size_t body_bytes = 0;  // request bodies held at once (max_body_bytes_in_flight)
  std::unique_ptr<ConnectionWorkers> pool;
  std::thread watchdog;

  /// Marks `c` cut (shutdown(2) of its socket; its worker then ends and releases it).
  void Cut(::socket_t sock, Conn& c) {
    if (c.cut) return;
    c.cut = true;
    ++cut_count;
    ::shutdown(sock, SHUT_RDWR);
  }

  /// Reserves `n` bytes of the body budget `max`; false when they do not fit.
  bool ReserveBody(size_t n, size_t max) {
    std::lock_guard<std::mutex> lock(mu);
    if (n > max - std::min(max, body_bytes)) return false;
    body_bytes += n;
    return true;
  }
  void ReleaseBody(size_t n) {
    std::lock_guard<std::mutex> lock(mu);
    body_bytes -= std::min(n, body_bytes);
  }

  /// Whether the connection is retired (its last answer said `Connection: close`).
  bool Retired(::socket_t sock) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = conns.find(sock);
    return it == conns.end() || it->second.retired || it->second.cut;
  }

  /// Sets the connection's deadline to `t`, unless it is retired. When `now` is past its
  /// retire time it is retired: its deadline becomes now + grace and stays. Returns whether the
  /// connection is retired.
  bool SetDeadline(::socket_t sock, Clock::time_point t,
                   Clock::time_point now = Clock::time_point::min(), Clock::duration grace = {}) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = conns.find(sock);
    if (it == conns.end()) return false;
    Conn& c = it->second;
    if (!c.retired && now >= c.retire) {
      c.retired = true;
      c.deadline = now + grace;
    }
    if (!c.retired) c.deadline = t;
    if (t == Clock::time_point::max()) c.requested = true;
    return c.retired;
  }
};

Server::Server(ServerOptions options) : options_(std::move(options)) {}

Server::~Server() { Stop(); }

void Server::Route(const std::string& method, const std::string& path, Handler handler,
                   size_t max_body_bytes) {
  exact_[{method, path}] = std::move(handler);
  if (max_body_bytes > 0) body_limits_[{method, path}] = max_body_bytes;
}

void Server::RouteHealth(const std::string& path, Handler handler) {
  health_routes_[path] = handler;
  Route("GET", path, std::move(handler));
}

void Server::RoutePrefix(const std::string& method, const std::string& prefix, Handler handler) {
  prefix_.emplace_back(method, prefix, std::move(handler));
  std::sort(prefix_.begin(), prefix_.end(), [](const auto& a, const auto& b) {
    return std::get<1>(a).size() > std::get<1>(b).size();
  });
}

size_t Server::BodyLimit(const std::string& method, const std::string& path) const {
  auto it = body_limits_.find({method, path});
  return it != body_limits_.end() ? it->second : options_.max_body_bytes;
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
  size_t limit = BodyLimit(req.method, req.path);
  if (req.body.size() > limit) {  // read with this limit already; kept for direct callers
    return Response::Error(413, "request body is " + std::to_string(req.body.size()) +
                                    " bytes; the limit of " + req.method + " " + req.path + " is " +
                                    std::to_string(limit));
  }
  try {
    return (*handler)(req);
  } catch (const std::exception& e) {
    return Response::Error(500, std::string("internal error: ") + e.what());
  } catch (...) {
    return Response::Error(500, "internal error");
  }
}

namespace {

void SetError(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(Response::Error(status, message).body, "application/json");
}

const char* Reason(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 413:
      return "Payload Too Large";
    case 503:
      return "Service Unavailable";
    case 415:
      return "Unsupported Media Type";
    default:
      return "Error";
  }
}

// Whether the calling worker's connection is TLS (set with tls_socket).
thread_local bool tls_is_tls = false;
// The verified client certificate's names of the calling worker's connection (or null).
thread_local const std::vector<std::string>* tls_client_names = nullptr;

// Refuses the request the calling worker is reading and ends its connection, leaving the rest
// of the body unread. Plain HTTP: the answer is written here, then the write side is closed
// and up to 16 MiB / 1 s of what the client still sends is read and dropped before the
// socket closes (closing with unread bytes would send a TCP RST that can destroy the answer
// before the client reads it); httplib's own write of `res` then fails and its keep-alive loop
// ends. TLS: the answer goes through httplib, after the read side is shut (the client may see
// a reset instead of the answer if it is still sending).
void Refuse(httplib::Response& res, int status, const std::string& message) {
  SetError(res, status, message);
  if (tls_socket < 0) return;
  if (tls_is_tls) {
    ::shutdown(tls_socket, SHUT_RD);
    return;
  }
  std::string head = "HTTP/1.1 " + std::to_string(status) + " " + Reason(status) +
                     "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
                     std::to_string(res.body.size()) + "\r\n\r\n" + res.body;
  (void)::send(tls_socket, head.data(), head.size(), MSG_NOSIGNAL);
  ::shutdown(tls_socket, SHUT_WR);
  auto until = Clock::now() + std::chrono::milliseconds(1000);
  size_t drained = 0;
  char buf[16384];
  while (drained < (16u << 20) && Clock::now() < until) {
    pollfd p{tls_socket, POLLIN, 0};
    int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count());
    if (::poll(&p, 1, std::max(1, left)) <= 0) break;
    ssize_t n = ::recv(tls_socket, buf, sizeof(buf), MSG_DONTWAIT);
    if (n <= 0) break;
    drained += static_cast<size_t>(n);
  }
  ::shutdown(tls_socket, SHUT_RD);
}

}  // namespace

Status Server::Start() {
  if (server_) return Status::Ok();
  if (options_.cert_file.empty() != options_.key_file.empty()) {
    return InvalidArgument("both a certificate file and a key file are needed for HTTPS");
  }
  if (!options_.client_ca_file.empty() && !tls()) {
    return InvalidArgument("a client CA file (" + options_.client_ca_file +
                           ") needs HTTPS: give a certificate and a key too");
  }
  if (tls()) {
    certs_ = std::make_unique<CertStore>(options_.cert_file, options_.key_file);
    FRACGPU_RETURN_IF_ERROR(certs_->Load());
    CertStore* store = certs_.get();
    const std::string ca = options_.client_ca_file;
    if (!ca.empty()) {
      // Checked here so that the error names the file (the context callback can only fail).
      STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(ca.c_str());
      if (names == nullptr || sk_X509_NAME_num(names) == 0) {
        if (names != nullptr) sk_X509_NAME_pop_free(names, X509_NAME_free);
        return InvalidArgument("client CA file " + ca + " holds no readable PEM certificate");
      }
      sk_X509_NAME_pop_free(names, X509_NAME_free);
    }
    const bool resumption = options_.tls_session_resumption;
    server_ = std::make_unique<Serving<httplib::SSLServer>>([store, ca, resumption](SSL_CTX& ctx) {
      SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
      SSL_CTX_set_options(&ctx,
                          SSL_OP_NO_COMPRESSION | SSL_OP_NO_SESSION_RESUMPTION_ON_RENEGOTIATION);
      if (!resumption) {
        SSL_CTX_set_options(&ctx, SSL_OP_NO_TICKET);
        SSL_CTX_set_num_tickets(&ctx, 0);
        SSL_CTX_set_session_cache_mode(&ctx, SSL_SESS_CACHE_OFF);
      }
      SSL_CTX_set_cert_cb(&ctx, &CertCallback, store);
      if (!ca.empty()) {
        // Ask for a client certificate but do not require one at the TLS level (the health
        // routes and the kubelet's probes have none); one presented must verify.
        if (SSL_CTX_load_verify_locations(&ctx, ca.c_str(), nullptr) != 1) return false;
        SSL_CTX_set_client_CA_list(&ctx, SSL_load_client_CA_file(ca.c_str()));
        SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER, nullptr);
        // Needed with client verification, or a resumed session fails its handshake.
        static const unsigned char kContext[] = "fracgpu";
        SSL_CTX_set_session_id_context(&ctx, kContext, sizeof(kContext) - 1);
      }
      return true;
    });
  } else {
    server_ = std::make_unique<Serving<httplib::Server>>();
  }
  if (!server_->is_valid()) {
    server_.reset();
    return Internal("cannot create the HTTP server (OpenSSL context)");
  }
  size_t max_limit = options_.max_body_bytes;
  for (const auto& [k, v] : body_limits_) max_limit = std::max(max_limit, v);
  const int header_timeout = std::max(1, options_.header_timeout_s);
  const int keep_alive = std::max(1, options_.keep_alive_timeout_s);
  server_->set_tcp_nodelay(true);
  server_->set_read_timeout(options_.read_timeout_s, 0);
  server_->set_write_timeout(options_.write_timeout_s, 0);
  server_->set_keep_alive_timeout(keep_alive);
  server_->set_keep_alive_max_count(
      static_cast<size_t>(std::max(1, options_.keep_alive_max_requests)));
  server_->set_payload_max_length(max_limit);

  gate_ = std::make_unique<Gate>();
  Gate* gate = gate_.get();
  // A connection's idle allowance: longer for a verified client certificate where asked.
  const int verified_keep_alive = options_.verified_client_keep_alive_timeout_s > 0
                                      ? options_.verified_client_keep_alive_timeout_s
                                      : keep_alive;
  const auto idle_s = [keep_alive, verified_keep_alive](bool verified) {
    return verified ? verified_keep_alive : keep_alive;
  };
  const auto after_response = [header_timeout, idle_s, this](bool verified) {
    return std::chrono::seconds(options_.write_timeout_s + idle_s(verified) + header_timeout);
  };

  // After the headers, before any of the body: refuse what is over the route's limit, bodies on
  // GET/HEAD, and multipart bodies (nothing here takes them). Returns the status, 0 = fine.
  auto check_headers = [this](const httplib::Request& hreq, std::string* message) -> int {
    bool chunked = hreq.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos;
    bool has_length = hreq.has_header("Content-Length");
    uint64_t length = has_length ? hreq.get_header_value<uint64_t>("Content-Length") : 0;
    if (!IsBodyMethod(hreq.method)) {
      if (!chunked && length == 0) return 0;
      *message = hreq.method + " " + hreq.path + " takes no request body";
      return 400;
    }
    size_t limit = BodyLimit(hreq.method, hreq.path);
    if (has_length && length > limit) {
      *message = "request body is " + std::to_string(length) +
                 " bytes (Content-Length); the limit of " + hreq.method + " " + hreq.path + " is " +
                 std::to_string(limit) + " bytes";
      return 413;
    }
    if (hreq.is_multipart_form_data()) {
      *message = "multipart bodies are not accepted on " + hreq.path;
      return 415;
    }
    return 0;
  };
  server_->set_expect_100_continue_handler(
      [check_headers](const httplib::Request& hreq, httplib::Response& res) {
        std::string message;
        int status = check_headers(hreq, &message);
        if (status == 0) return 100;
        Refuse(res, status, message);
        return status;
      });
  server_->set_pre_routing_handler(
      [check_headers](const httplib::Request& hreq, httplib::Response& res) {
        std::string message;
        int status = check_headers(hreq, &message);
        if (status == 0) return httplib::Server::HandlerResponse::Unhandled;
        Refuse(res, status, message);
        return httplib::Server::HandlerResponse::Handled;
      });
  auto serve = [this, gate, after_response](const httplib::Request& hreq, std::string body,
                                            httplib::Response& hres) {
    Request req;
    req.method = hreq.method;
    req.path = hreq.path;
    req.body = std::move(body);
    req.remote_addr = hreq.remote_addr;
    if (tls_client_names != nullptr) req.client_names = *tls_client_names;
    for (const auto& [k, v] : hreq.params) req.params.emplace(k, v);
    for (const auto& [k, v] : hreq.headers) req.headers.emplace_back(k, v);
    const ::socket_t sock = tls_socket;
    gate->SetDeadline(sock, Clock::time_point::max());  // the handler's own time is not cut
    Response res = Dispatch(req);
    const Clock::time_point now = Clock::now();
    const bool verified = tls_client_names != nullptr && !tls_client_names->empty();
    const bool retire = gate->SetDeadline(sock, now + after_response(verified), now,
                                          std::chrono::seconds(options_.write_timeout_s));
    hres.status = res.status;
    for (const auto& [k, v] : res.headers) hres.set_header(k, v);
    // A connection past its age is told to close with this answer, so that no client holds a
    // worker for keep_alive_max_requests slow requests. httplib 0.11 does not end its
    // keep-alive loop on a handler's "Connection: close" (the client's close ends it); a
    // client that ignores it is cut by the watchdog write_timeout_s after the answer.
    if (retire) hres.set_header("Connection", "close");
    hres.set_content(res.body, res.content_type);
  };
  auto plain = [serve](const httplib::Request& hreq, httplib::Response& hres) {
    serve(hreq, hreq.body, hres);
  };
  auto with_body = [this, serve, gate](const httplib::Request& hreq, httplib::Response& hres,
                                       const httplib::ContentReader& reader) {
    const size_t limit = BodyLimit(hreq.method, hreq.path);
    // Counted against max_body_bytes_in_flight from here until the answer is written: the
    // Content-Length (checked against `limit` already), or the whole limit when chunked.
    const bool has_length = hreq.has_header("Content-Length");
    const size_t held =
        has_length ? std::min<size_t>(limit, hreq.get_header_value<uint64_t>("Content-Length"))
                   : limit;
    if (!gate->ReserveBody(held, options_.max_body_bytes_in_flight)) {
      Refuse(hres, 503,
             "the server holds its limit of request bodies (" +
                 std::to_string(options_.max_body_bytes_in_flight) +
                 " bytes) from other clients; retry");
      return;
    }
    struct Held {
      Gate* gate;
      size_t n;
      ~Held() { gate->ReleaseBody(n); }
    } release{gate, held};
    std::string body;
    if (has_length) body.reserve(held);
    bool over = false;
    bool read = reader([&](const char* data, size_t n) {
      if (n > limit - body.size()) {
        over = true;
        return false;  // stops reading: nothing past the limit is kept
      }
      body.append(data, n);
      return true;
    });
    if (!read) {
      if (over) {
        Refuse(hres, 413,
               "request body exceeds the limit of " + hreq.method + " " + hreq.path + " (" +
                   std::to_string(limit) + " bytes)");
      } else {
        Refuse(
            hres, 400,
            "request body could not be read (malformed chunked encoding, or the client stopped)");
      }
      return;
    }
    serve(hreq, std::move(body), hres);
  };
  server_->Get(R"(/.*)", plain);
  server_->Post(R"(/.*)", with_body);
  server_->Put(R"(/.*)", with_body);
  server_->Patch(R"(/.*)", with_body);
  server_->Delete(R"(/.*)", with_body);
  server_->set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.status == 413) {
      SetError(res, 413, "request body exceeds the limit");
    } else if (res.body.empty()) {
      res.set_content(Response::Error(res.status, "HTTP " + std::to_string(res.status)).body,
                      "application/json");
    }
  });

  // The acceptor: counts, admits or refuses at once, and hands admitted sockets to the workers.
  std::function<bool(httplib::Stream&, bool, bool&, const std::function<void(httplib::Request&)>&)>
      serve_one;
  SSL_CTX* ssl_ctx = nullptr;
  if (tls()) {
    auto* sv = static_cast<Serving<httplib::SSLServer>*>(server_.get());
    ssl_ctx = sv->ssl_context();
    serve_one = [sv](httplib::Stream& st, bool close, bool& closed,
                     const std::function<void(httplib::Request&)>& setup) {
      return sv->ServeOne(st, close, closed, setup);
    };
  } else {
    auto* sv = static_cast<Serving<httplib::Server>*>(server_.get());
    serve_one = [sv](httplib::Stream& st, bool close, bool& closed,
                     const std::function<void(httplib::Request&)>& setup) {
      return sv->ServeOne(st, close, closed, setup);
    };
  }
  gate->pool = std::make_unique<ConnectionWorkers>(
      static_cast<size_t>(std::max(1, options_.threads)),
      static_cast<size_t>(std::max(1, options_.max_connections)));
  const auto max_age = std::chrono::seconds(std::max(0, options_.max_connection_age_s));
  // One connection, on its own worker: the TLS handshake, then requests while it is kept.
  auto run_connection = [this, gate, serve_one, ssl_ctx, idle_s](::socket_t sock) {
    timeval rt{std::max(1, options_.read_timeout_s), 0};
    timeval wt{std::max(1, options_.write_timeout_s), 0};
    (void)::setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &rt, sizeof(rt));
    (void)::setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &wt, sizeof(wt));
    SSL* ssl = nullptr;
    bool ok = true;
    std::vector<std::string> names;
    if (ssl_ctx != nullptr) {
      ssl = SSL_new(ssl_ctx);
      ok = ssl != nullptr && SSL_set_fd(ssl, sock) == 1 && SSL_accept(ssl) == 1;
      if (ok) names = VerifiedClientNames(ssl);
    }
    bool refused = false;
    if (ok) {
      ConnStream strm(sock, ssl, options_.max_header_line_bytes, options_.max_header_bytes,
                      std::max(1, options_.read_timeout_s) * 1000,
                      std::max(1, options_.write_timeout_s) * 1000);
      tls_socket = sock;
      tls_is_tls = ssl != nullptr;
      tls_client_names = &names;
      const SSL* req_ssl = ssl;
      const bool compress = options_.compress_responses;
      const auto setup = [req_ssl, compress](httplib::Request& r) {
        r.ssl = req_ssl;
        // httplib compresses an answer by the request's Accept-Encoding alone.
        if (!compress) r.headers.erase("Accept-Encoding");
      };
      for (int left = std::max(1, options_.keep_alive_max_requests), n = 0; left > 0; --left, ++n) {
        if (n > 0 && !strm.buffered()) {  // idle between two requests: keep_alive_timeout_s
          pollfd p{sock, POLLIN, 0};
          if (::poll(&p, 1, idle_s(!names.empty()) * 1000) <= 0) break;
        }
        strm.BeginRequest();
        bool closed = false;
        bool served = serve_one(strm, left == 1, closed, setup);
        if (strm.refused()) refused = true;
        if (!served || closed || refused || gate->Retired(sock)) break;
      }
      tls_socket = -1;
      tls_is_tls = false;
      tls_client_names = nullptr;
    }
    if (ssl != nullptr) {
      if (ok && !refused) (void)SSL_shutdown(ssl);
      SSL_free(ssl);
    }
    {
      std::lock_guard<std::mutex> lock(gate->mu);
      auto it = gate->conns.find(sock);
      if (it != gate->conns.end()) {
        if (--gate->per_client[it->second.peer] <= 0) gate->per_client.erase(it->second.peer);
        if (it->second.cut) --gate->cut_count;
        gate->conns.erase(it);
      }
    }
    ::close(sock);
  };
  acceptor_ = std::make_unique<Acceptor>([this, gate, header_timeout, max_age,
                                          run_connection](::socket_t sock) {
    std::string peer = PeerAddress(sock);
    bool admit = false;
    {
      std::lock_guard<std::mutex> lock(gate->mu);
      int& mine = gate->per_client[peer];
      const Clock::time_point now = Clock::now();
      if (!gate->stopping && mine < options_.max_connections_per_client &&
          static_cast<int>(gate->conns.size()) - gate->cut_count >= options_.max_connections) {
        // At the total cap: make room by cutting the oldest connection that has not brought a
        // complete request to a handler within a second (a slow or idle client), if any.
        auto oldest = gate->conns.end();
        for (auto it = gate->conns.begin(); it != gate->conns.end(); ++it) {
          const Gate::Conn& c = it->second;
          if (c.cut || c.requested || now - c.accepted < std::chrono::seconds(1)) continue;
          if (oldest == gate->conns.end() || c.accepted < oldest->second.accepted) oldest = it;
        }
        if (oldest != gate->conns.end()) {
          gate->Cut(oldest->first, oldest->second);
          ++evicted_;
        }
      }
      admit = !gate->stopping &&
              static_cast<int>(gate->conns.size()) - gate->cut_count < options_.max_connections &&
              mine < options_.max_connections_per_client;
      if (admit) {
        ++mine;
        Gate::Conn c{peer, now + std::chrono::seconds(header_timeout), now + max_age, now};
        gate->conns[sock] = c;
      } else if (mine == 0) {
        gate->per_client.erase(peer);
      }
    }
    if (!admit) {
      ++refused_;
      // Nothing here may block the accept thread (MSG_DONTWAIT), and no handshake is run for a
      // refused client. Plain HTTP gets a 503; a TLS port a TLS fatal alert record instead
      // (RFC 8446 §6: content type alert 21, legacy version 3.3, length 2, level fatal 2,
      // internal_error 80), which a TLS client reports as the server's refusal ("remote
      // error: tls: internal error") rather than as plain text it cannot parse ("server gave
      // HTTP response to HTTPS client").
      static const char kBusy[] =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: "
          "close\r\n"
          "Content-Length: 62\r\n\r\n{\"error\":\"too many connections from this client or in "
          "total\"}\n";
      static const unsigned char kTlsAlert[] = {21, 3, 3, 0, 2, 2, 80};
      if (tls()) {
        (void)::send(sock, kTlsAlert, sizeof(kTlsAlert), MSG_DONTWAIT | MSG_NOSIGNAL);
      } else {
        (void)::send(sock, kBusy, sizeof(kBusy) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
      }
      ::shutdown(sock, SHUT_RDWR);
      ::close(sock);
      return;
    }
    // The serving server's set_tcp_nodelay applies only to sockets it creates; the accepted
    // ones come from the acceptor's listener. Without it a reply written as headers then body
    // waits for the client's delayed ACK (~40 ms on Linux) whenever the body is below one
    // segment: bench_filter measured 42 ms per /filter at 1,000 nodes, 1 ms at 5,000.
    int nodelay = 1;
    (void)::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &nodelay, sizeof(nodelay));
    gate->pool->Enqueue([run_connection, sock] { run_connection(sock); });
  });
  acceptor_->new_task_queue = [] { return new InlineQueue(); };
  acceptor_->set_read_timeout(options_.read_timeout_s, 0);
  acceptor_->set_write_timeout(options_.write_timeout_s, 0);
  gate->watchdog = std::thread([this, gate] {
    std::unique_lock<std::mutex> lock(gate->mu);
    while (!gate->stopping) {
      gate->cv.wait_for(lock, std::chrono::milliseconds(100));
      auto now = Clock::now();
      for (auto& [sock, c] : gate->conns) {
        if (!c.cut && (gate->stopping || c.deadline <= now)) {
          // Counted before the shutdown: the client sees the close at once, and whoever it
          // tells (a test, an operator reading /metrics) must already find it counted.
          if (!gate->stopping) ++timed_out_;
          gate->Cut(sock, c);  // the worker's next read or write fails; it then ends
        }
      }
    }
  });

  // httplib listens with a backlog of 5: a burst of connections (kube-scheduler binds in
  // parallel) overflows it. Remember the socket and listen again with a deep backlog.
  auto listen_fd = std::make_shared<int>(-1);
  acceptor_->set_socket_options([listen_fd](::socket_t sock) {
    ListenSocketOptions(sock);
    *listen_fd = sock;
  });
  errno = 0;
  if (options_.port == 0) {
    port_ = acceptor_->bind_to_any_port(options_.host);
  } else {
    port_ = acceptor_->bind_to_port(options_.host, options_.port) ? options_.port : -1;
  }
  int bind_errno = errno;
  if (port_ <= 0) {
    StopGate();
    return Unavailable("cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                       ": " + (bind_errno != 0 ? std::strerror(bind_errno) : "bind failed"));
  }
  if (*listen_fd >= 0) ::listen(*listen_fd, 1024);
  if (tls()) {
    static_cast<Serving<httplib::SSLServer>*>(server_.get())->set_listen_socket(*listen_fd);
  } else {
    static_cast<Serving<httplib::Server>*>(server_.get())->set_listen_socket(*listen_fd);
  }

  if (options_.health_port >= 0) {
    Status st = StartHealth();
    if (!st.ok()) {
      acceptor_->stop();
      StopGate();
      return st;
    }
  }
  {
    std::lock_guard<std::mutex> lock(listen_mu_);
    listen_returned_ = false;
  }
  thread_ = std::thread([this] {
    acceptor_->listen_after_bind();
    {
      std::lock_guard<std::mutex> lock(listen_mu_);
      listen_returned_ = true;
    }
    listen_cv_.notify_all();
  });
  WaitUntilListening();
  return Status::Ok();
}

Status Server::StartHealth() {
  // Its own listener, for the kubelet's probes: answers while the main listener is busy. It is
  // a Server of its own, so it has the same bounds while reading (an open port takes the same
  // hostile traffic): GET only, no body, short timeouts, one request per connection, few
  // connections.
  ServerOptions ho;
  ho.host = options_.host;
  ho.port = options_.health_port;
  ho.max_body_bytes = 0;
  ho.threads = 2;
  ho.read_timeout_s = 2;
  ho.write_timeout_s = 2;
  ho.header_timeout_s = 2;
  ho.keep_alive_timeout_s = 1;
  ho.keep_alive_max_requests = 1;
  ho.max_connections = 16;
  ho.max_connections_per_client = 8;
  ho.max_header_line_bytes = 8 << 10;
  ho.max_header_bytes = 16 << 10;
  ho.max_body_bytes_in_flight = 0;
  health_ = std::make_unique<Server>(ho);
  for (const auto& [path, handler] : health_routes_) health_->Route("GET", path, handler);
  Status st = health_->Start();
  if (!st.ok()) {
    health_.reset();
    health_port_ = -1;
    // "cannot listen on H:P: <reason>" → "... H:P (health): <reason>"
    const std::string prefix =
        "cannot listen on " + options_.host + ":" + std::to_string(options_.health_port) + ": ";
    std::string reason =
        st.message().rfind(prefix, 0) == 0 ? st.message().substr(prefix.size()) : st.message();
    return Status(st.code(), "cannot listen on " + options_.host + ":" +
                                 std::to_string(options_.health_port) + " (health): " + reason);
  }
  health_port_ = health_->port();
  return Status::Ok();
}

void Server::StopGate() {
  if (gate_) {
    {
      std::lock_guard<std::mutex> lock(gate_->mu);
      gate_->stopping = true;
      for (auto& [sock, c] : gate_->conns) gate_->Cut(sock, c);
    }
    gate_->cv.notify_all();
    if (gate_->watchdog.joinable()) gate_->watchdog.join();
    if (gate_->pool) gate_->pool->Shutdown();  // joins the workers (their connections are cut)
  }
  if (server_) {
    if (tls()) {
      static_cast<Serving<httplib::SSLServer>*>(server_.get())->set_listen_socket(INVALID_SOCKET);
    } else {
      static_cast<Serving<httplib::Server>*>(server_.get())->set_listen_socket(INVALID_SOCKET);
    }
  }
  acceptor_.reset();
  gate_.reset();
  server_.reset();
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
  while (!listen_returned_ && !acceptor_->is_running()) {
    listen_cv_.wait_for(lock, std::chrono::milliseconds(1));
  }
}

void Server::Stop() {
  if (!acceptor_) return;
  WaitUntilListening();
  acceptor_->stop();
  if (thread_.joinable()) thread_.join();
  // Mark the serving server stopped before cutting the connections, so none loops on.
  if (tls()) {
    static_cast<Serving<httplib::SSLServer>*>(server_.get())->set_listen_socket(INVALID_SOCKET);
  } else {
    static_cast<Serving<httplib::Server>*>(server_.get())->set_listen_socket(INVALID_SOCKET);
  }
  StopGate();
  if (health_) {
    health_->Stop();
    health_.reset();
  }
}

std::string Server::BaseUrl() const {
  std::string host =
      options_.host == "0.0.0.0" || options_.host.empty() ? "127.0.0.1" : options_.host;
  return std::string(tls() ? "https://" : "http://") + host + ":" + std::to_string(port_);
}

int Server::open_connections() const {
  if (!gate_) return 0;
  std::lock_guard<std::mutex> lock(gate_->mu);
  return static_cast<int>(gate_->conns.size());
}

size_t Server::body_bytes_in_flight() const {
  if (!gate_) return 0;
  std::lock_guard<std::mutex> lock(gate_->mu);
  return gate_->body_bytes;
}

int64_t Server::cert_loads() const { return certs_ ? certs_->loads() : 0; }

}  // namespace fracgpu::http
