#pragma once
// HTTP(S) server shared by the scheduler (extender + webhook), the monitor and the UI
// (docs/design/ARCHITECTURE.md "http/"), on cpp-httplib. With a certificate and key it serves HTTPS
// (TLS 1.2+ through OpenSSL) and reloads both files when they change on disk (checked at each
// TLS handshake), so a rotated Secret takes effect without a restart; without them it serves
// plain HTTP (tests, metrics behind a Service).
//
//   http::Server server({.host = "0.0.0.0", .port = 8443, .cert_file = c, .key_file = k});
//   server.Route("POST", "/filter", [](const http::Request& r) { return http::Response::Json(200,
//   ...); }); if (auto st = server.Start(); !st.ok()) ...;   // binds and serves on a background
//   thread server.port();                                 // the bound port (when port was 0)
//   server.Stop();
//
// Hostile traffic (issues 15, 33): every body limit is enforced while reading, per route (a
// Content-Length over it is refused before a byte of the body is read; a chunked body is cut at
// the limit): 413 with a message naming the size and the limit, and the connection is closed.
// The request line and headers are bounded while they are read (max_header_line_bytes per line,
// max_header_bytes in all: 414 for the request line, 431 for a header, then the connection is
// closed; cpp-httplib itself buffers a whole line before it checks its length), and the bodies
// held at once by all connections are bounded (max_body_bytes_in_flight: 503 past it). Each
// connection has a deadline for its request line + headers + body (header_timeout_s; a client
// that trickles a byte every few seconds is cut), connections are capped per client address and
// in total (503 at once past either cap, on an HTTPS port a TLS fatal alert instead of the plain
// text a TLS client cannot read; at the total cap the oldest connection that has sent
// no complete request for a second is cut to make room), and every admitted connection has a
// worker thread of its own (started on demand), so a slow client never delays another's
// request. The health routes can be served on a listener of their own (health_port) as well.
// With client_ca_file, HTTPS asks for a client certificate (optional at the TLS level) and
// hands the verified certificate's names to the handler (Request::client_names); routes decide
// whether to require one. A taken port is an error (no SO_REUSEPORT: two processes never share
// a port). Unknown paths 404; a handler that throws gets 500 (never a crash).

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/status.h"

namespace httplib {
class Server;
}

namespace fracgpu::http {

/// An incoming request. Header names are matched case-insensitively by Header().
struct Request {
  std::string method;
  std::string path;  ///< without the query string
  std::string body;
  std::multimap<std::string, std::string> params;  ///< query parameters
  std::vector<std::pair<std::string, std::string>> headers;
  std::string remote_addr;
  /// Names of the client certificate verified against ServerOptions::client_ca_file during the
  /// TLS handshake: its subject common name first, then its DNS subject alternative names.
  /// Empty when the client presented none (or the server has no client_ca_file, or plain HTTP).
  std::vector<std::string> client_names;

  /// The first header named `name` (case-insensitive), or "".
  std::string Header(const std::string& name) const;
  /// The first query parameter `name`, or "".
  std::string Param(const std::string& name) const;
};

/// A response. `content_type` defaults to JSON.
struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;

  static Response Json(int status, const nlohmann::json& body);
  static Response Text(int status, std::string body,
                       std::string content_type = "text/plain; charset=utf-8");
  /// A JSON error body {"error": message} with `status`.
  static Response Error(int status, const std::string& message);
};

using Handler = std::function<Response(const Request&)>;

/// Listening and limits.
struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;                     ///< 0 = any free port
  std::string cert_file;            ///< PEM; with key_file → HTTPS
  std::string key_file;             ///< PEM private key
  size_t max_body_bytes = 1 << 20;  ///< default per-route body limit, bytes (413 past it)
  /// Worker threads started with the server. More start on demand, up to one per admitted
  /// connection (max_connections), so no admitted connection waits behind a slow one.
  int threads = 32;
  int read_timeout_s = 10;    ///< per-read (recv) timeout, seconds
  int write_timeout_s = 10;   ///< per-write (send) timeout, seconds
  int header_timeout_s = 10;  ///< deadline for a request's line, headers and body, seconds
  /// Idle time allowed between two requests of a connection, seconds. Past it the server
  /// closes the connection, which races a client reusing it (a POST written into it is lost).
  int keep_alive_timeout_s = 5;
  /// The same for a connection whose client certificate verified against client_ca_file;
  /// 0 = keep_alive_timeout_s. Set above the callers' own idle timeout (Go: 90 s) so that
  /// they close first, while anonymous connections keep the short one and cannot hold
  /// workers that long (fracgpu scheduler: 120 s).
  int verified_client_keep_alive_timeout_s = 0;
  /// Requests one connection may make (at least 1) before the server answers with
  /// `Connection: close` (1,000: nginx's keepalive_requests default). Not httplib's 5:
  /// kube-scheduler's extender client (Go net/http) would open a new connection every fifth
  /// /filter, and the new connection's first request of a 180 KiB body is the slow one
  /// (docs/scheduler.md "/filter performance").
  int keep_alive_max_requests = 1000;
  /// Seconds a connection may be kept: the first answer after them says `Connection: close`
  /// and the server closes it. With keep_alive_max_requests, bounds how long one client holds
  /// a worker (at most this plus one request's deadlines), as httplib's 5 requests did.
  int max_connection_age_s = 60;
  /// Connections admitted at once (served + waiting); 503 past it (HTTPS: a TLS alert).
  int max_connections = 256;
  /// The same, per client IP address. 128, half the total: kube-scheduler opens one
  /// connection per concurrent extender call and binds asynchronously (binds in flight ≈ pods
  /// per second × /bind's latency), and where the API server's webhook calls come from the
  /// same address the two share it (docs/performance.md, scale runs: 64 refused ~700–2,700
  /// of their calls a run).
  int max_connections_per_client = 128;
  int health_port = -1;  ///< -1: no health listener; 0: any free port; else that port
  /// Longest request line or header line, bytes, counted while it is read (414 for the
  /// request line, 431 for a header line past it; the connection is then closed). 16 KiB:
  /// twice nginx's large_client_header_buffers line (8k), room for a Kubeflow gateway's cookies.
  size_t max_header_line_bytes = 16 << 10;
  /// Request line plus all header lines of one request, bytes (431 past it).
  size_t max_header_bytes = 64 << 10;
  /// Request bodies held at once by all connections together, bytes: a body is counted from
  /// its Content-Length (or its route's limit when chunked) until its answer is written; a
  /// request that does not fit is answered 503 before its body is read.
  size_t max_body_bytes_in_flight = 64 << 20;
  /// PEM bundle of the CA(s) that sign client certificates (HTTPS only). With it the TLS
  /// handshake asks for a client certificate; one presented must verify against it (else the
  /// handshake fails), and its names reach handlers as Request::client_names. Read at Start().
  std::string client_ca_file;
  /// Whether answers are gzip- or brotli-compressed for a client that accepts it (httplib's
  /// own choice for text and JSON bodies). Off for an API whose callers are on the cluster
  /// network: compressing the extender's few-KiB answers cost fracgpu scheduler more CPU than
  /// sending them, and the Go client the same to inflate them (perf at 5,000 nodes, issue 37).
  bool compress_responses = true;
  /// Whether the TLS server lets a client resume a session (TLS 1.3 tickets, the TLS 1.2
  /// session cache). Off where no caller resumes: Go's net/http clients (kube-scheduler's
  /// extender client, kube-apiserver's webhook client) keep no session cache, so every ticket
  /// the server makes — an encoding and a copy of the session with the client's certificate —
  /// is work for nothing on each new connection.
  bool tls_session_resumption = true;
};

/// The server. Routes are exact paths (the query string is ignored), plus prefix routes.
/// Route()/RoutePrefix() must be called before Start(). Thread-safe after Start().
class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Routes `method` ("GET", "POST", …) on exactly `path`; bodies up to
  /// ServerOptions::max_body_bytes, or `max_body_bytes` when given (> 0).
  void Route(const std::string& method, const std::string& path, Handler handler,
             size_t max_body_bytes = 0);
  /// Routes GET `path` on the main listener and on the health listener (when health_port ≥ 0).
  /// The health listener is a Server of its own (two threads, 16 connections, the same bounds
  /// while reading) and serves only these routes.
  void RouteHealth(const std::string& path, Handler handler);
  /// Routes `method` on every path starting with `prefix` (longest exact route wins first).
  void RoutePrefix(const std::string& method, const std::string& prefix, Handler handler);
  /// Loads the certificate (if any), binds and starts serving on a background thread;
  /// returns once the accept loop runs, so a Stop() right after it cannot be lost.
  /// Errors: kInvalidArgument (unreadable or mismatched certificate/key, naming the file),
  /// kUnavailable (cannot bind host:port).
  Status Start();
  /// Stops serving and joins the thread; idempotent; safe at any time after Start().
  void Stop();
  /// The bound port (after Start()).
  int port() const { return port_; }
  /// The health listener's bound port (after Start()), or -1 when there is none.
  int health_port() const { return health_port_; }
  /// Connections refused at the caps (total or per client) since Start().
  int64_t refused_connections() const { return refused_.load(); }
  /// Connections cut at the total cap to make room (slow or idle for a second) since Start().
  int64_t evicted_connections() const { return evicted_.load(); }
  /// Connections cut at their deadline (header_timeout_s) since Start().
  int64_t timed_out_connections() const { return timed_out_.load(); }
  /// Connections admitted and not yet released (a cut connection is released when its worker
  /// returns, a moment after the client sees the close); 0 before Start().
  int open_connections() const;
  /// Request-body bytes reserved at this moment against max_body_bytes_in_flight (bytes).
  size_t body_bytes_in_flight() const;
  bool tls() const { return !options_.cert_file.empty(); }
  /// "http(s)://<host>:<port>" (127.0.0.1 when bound to 0.0.0.0).
  std::string BaseUrl() const;
  /// Times the certificate was (re)loaded, including the first load.
  int64_t cert_loads() const;

  class CertStore;  // implementation detail (tls.cc)
  struct Gate;      // implementation detail (server.cc): caps, deadlines, the watchdog

 private:
  Response Dispatch(const Request& req) const;
  size_t BodyLimit(const std::string& method, const std::string& path) const;
  /// Blocks until httplib's accept loop is running (or has already returned).
  void WaitUntilListening();
  /// Binds and starts the health listener (options_.health_port ≥ 0).
  Status StartHealth();
  /// Cuts every connection, joins the watchdog and the workers, frees the servers.
  void StopGate();

  ServerOptions options_;
  std::unique_ptr<CertStore> certs_;
  std::unique_ptr<httplib::Server> server_;    // serves the requests (never listens itself)
  std::unique_ptr<httplib::Server> acceptor_;  // accepts and hands each connection to gate_
  std::unique_ptr<Gate> gate_;
  std::unique_ptr<Server> health_;  // the health listener: a Server of its own
  int health_port_ = -1;
  std::atomic<int64_t> refused_{0};
  std::atomic<int64_t> timed_out_{0};
  std::atomic<int64_t> evicted_{0};
  std::map<std::pair<std::string, std::string>, size_t> body_limits_;
  std::map<std::string, Handler> health_routes_;
  std::thread thread_;
  std::mutex listen_mu_;
  std::condition_variable listen_cv_;
  bool listen_returned_ = false;  ///< listen_after_bind() returned (guarded by listen_mu_)
  int port_ = 0;
  std::map<std::pair<std::string, std::string>, Handler> exact_;
  std::vector<std::tuple<std::string, std::string, Handler>> prefix_;
};

}  // namespace fracgpu::http
