// http::Server: routing, limits, plain HTTP and HTTPS with certificate reload.
#include "http/server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <filesystem>
#include <fstream>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace fracgpu::http {
namespace {

namespace fs = std::filesystem;

// Writes a fresh self-signed certificate with common name `cn` and its key.
void WriteSelfSigned(const std::string& cn, const fs::path& cert, const fs::path& key) {
  EVP_PKEY* pkey = EVP_EC_gen("P-256");
  X509* x = X509_new();
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), 0);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600);
  X509_set_pubkey(x, pkey);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(x, name);
  X509_sign(x, pkey, EVP_sha256());
  // Write to temporary names and rename, as a Secret update does (atomic swap).
  fs::path tmp_cert = cert.string() + ".tmp", tmp_key = key.string() + ".tmp";
  FILE* f = fopen(tmp_cert.c_str(), "w");
  PEM_write_X509(f, x);
  fclose(f);
  f = fopen(tmp_key.c_str(), "w");
  PEM_write_PrivateKey(f, pkey, nullptr, nullptr, 0, nullptr, nullptr);
  fclose(f);
  fs::rename(tmp_key, key);
  fs::rename(tmp_cert, cert);
  X509_free(x);
  EVP_PKEY_free(pkey);
}

// The common name of the certificate the server presents.
std::string PeerCommonName(int port) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  std::string cn;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    if (SSL_connect(ssl) == 1) {
      X509* peer = SSL_get1_peer_certificate(ssl);
      char buf[256] = {0};
      X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, buf, sizeof buf);
      cn = buf;
      X509_free(peer);
      SSL_shutdown(ssl);
    }
    SSL_free(ssl);
  }
  close(fd);
  SSL_CTX_free(ctx);
  return cn;
}

TEST(ServerTest, RoutesLimitsAndErrors) {
  ServerOptions o;
  o.max_body_bytes = 100;
  Server s(o);
  s.Route("POST", "/echo", [](const Request& r) { return Response::Text(200, r.body + r.Param("x")); });
  s.Route("GET", "/throw", [](const Request&) -> Response { throw std::runtime_error("boom"); });
  s.RoutePrefix("GET", "/static/", [](const Request& r) { return Response::Text(200, r.path); });
  ASSERT_TRUE(s.Start().ok());
  httplib::Client c("127.0.0.1", s.port());
  auto r = c.Post("/echo?x=1", "hi", "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hi1");
  r = c.Post("/echo", std::string(101, 'a'), "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("101 bytes; the limit is 100"), std::string::npos);
  r = c.Get("/nope");
  EXPECT_EQ(r->status, 404);
  r = c.Get("/echo");
  EXPECT_EQ(r->status, 405);
  r = c.Get("/throw");
  EXPECT_EQ(r->status, 500);
  EXPECT_NE(r->body.find("boom"), std::string::npos);
  r = c.Get("/static/a/b.js");
  EXPECT_EQ(r->body, "/static/a/b.js");
  s.Stop();
  s.Stop();
}

TEST(ServerTest, HttpsReloadsTheCertificateWhenFilesChange) {
  fs::path dir = fs::temp_directory_path() / ("fracgpu-tls-" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::path cert = dir / "tls.crt", key = dir / "tls.key";
  WriteSelfSigned("first", cert, key);
  ServerOptions o;
  o.cert_file = cert.string();
  o.key_file = key.string();
  Server s(o);
  s.Route("GET", "/healthz", [](const Request&) { return Response::Text(200, "ok"); });
  ASSERT_TRUE(s.Start().ok());
  EXPECT_EQ(s.BaseUrl().rfind("https://127.0.0.1:", 0), 0u);
  httplib::SSLClient c("127.0.0.1", s.port());
  c.enable_server_certificate_verification(false);
  auto r = c.Get("/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "ok");
  EXPECT_EQ(PeerCommonName(s.port()), "first");
  WriteSelfSigned("second", cert, key);
  EXPECT_EQ(PeerCommonName(s.port()), "second");
  EXPECT_EQ(s.cert_loads(), 2);
  // A broken rotation keeps the previous pair.
  std::ofstream(key) << "not a key";
  EXPECT_EQ(PeerCommonName(s.port()), "second");
  s.Stop();
  fs::remove_all(dir);
}

TEST(ServerTest, BadCertificateFilesAreReported) {
  ServerOptions o;
  o.cert_file = "/nonexistent/tls.crt";
  o.key_file = "/nonexistent/tls.key";
  Server s(o);
  Status st = s.Start();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("/nonexistent/tls.crt"), std::string::npos);
  ServerOptions half;
  half.cert_file = "x";
  EXPECT_EQ(Server(half).Start().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fracgpu::http
