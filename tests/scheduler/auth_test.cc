// Issue 33 item 3: /filter, /prioritize, /bind, /webhook and /metrics of `fracgpu scheduler`
// accept only callers with a client certificate signed by the client CA (kube-scheduler and the
// API server); a refused /bind changes nothing; the health routes stay open; /metrics can move
// to a listener of its own.
#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <filesystem>

#include "core/annotations.h"
#include "core/codec.h"
#include "fake_apiserver.h"
#include "k8s/objects.h"
#include "scheduler/service.h"

namespace fracgpu::scheduler {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A CA, and the certificates it (or it itself) signs, written as PEM.
class Pki {
 public:
  Pki() : key_(EVP_EC_gen("P-256")), ca_(X509_new()) { Sign(ca_, "fracgpu-client-ca", key_, true); }
  ~Pki() {
    X509_free(ca_);
    EVP_PKEY_free(key_);
  }
  void WriteCa(const fs::path& path) const { Write(path, ca_, nullptr); }
  /// A certificate for `cn` signed by this CA (`cert`, `key`).
  void Issue(const std::string& cn, const fs::path& cert, const fs::path& key) const {
    EVP_PKEY* k = EVP_EC_gen("P-256");
    X509* x = X509_new();
    X509_set_pubkey(x, k);
    Sign(x, cn, key_, false);
    Write(cert, x, nullptr);
    Write(key, nullptr, k);
    X509_free(x);
    EVP_PKEY_free(k);
  }

 private:
  void Sign(X509* x, const std::string& cn, EVP_PKEY* signer, bool is_ca) const {
    static long serial = 1;
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
    X509_set_version(x, 2);
    X509_gmtime_adj(X509_getm_notBefore(x), 0);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    if (is_ca) X509_set_pubkey(x, key_);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
    X509_set_issuer_name(x, X509_get_subject_name(is_ca ? x : ca_));
    if (is_ca) {
      X509V3_CTX ctx;
      X509V3_set_ctx(&ctx, x, x, nullptr, nullptr, 0);
      X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, NID_basic_constraints, "CA:TRUE");
      X509_add_ext(x, ext, -1);
      X509_EXTENSION_free(ext);
    }
    X509_sign(x, signer, EVP_sha256());
  }
  static void Write(const fs::path& path, X509* x, EVP_PKEY* k) {
    FILE* f = fopen(path.c_str(), "w");
    if (x != nullptr) PEM_write_X509(f, x);
    if (k != nullptr) PEM_write_PrivateKey(f, k, nullptr, nullptr, 0, nullptr, nullptr);
    fclose(f);
  }
  EVP_PKEY* key_;
  X509* ca_;
};

class SchedulerAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("fracgpu-auth-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    Pki server_ca, other;
    server_ca.Issue("fracgpu-scheduler", dir_ / "tls.crt", dir_ / "tls.key");
    pki_.WriteCa(dir_ / "client-ca.crt");
    pki_.Issue("fracgpu-kube-scheduler", dir_ / "ks.crt", dir_ / "ks.key");
    pki_.Issue("some-kubelet", dir_ / "kubelet.crt", dir_ / "kubelet.key");
    other.Issue("fracgpu-kube-scheduler", dir_ / "forged.crt", dir_ / "forged.key");
    k8s::Config config;
    config.server = api_.url();
    auto c = k8s::Client::Create(config);
    ASSERT_TRUE(c.ok());
    client_ = std::move(*c);
    core::DeviceInfo d;
    d.uuid = "GPU-a";
    d.count = 10;
    d.devmem_mib = 16384;
    d.devcore = 100;
    d.type = "NVIDIA-NVIDIA A10";
    api_.Put("nodes",
             {{"metadata",
               {{"name", "node-a"},
                {"annotations", {{core::kAnnotationNodeRegister, core::EncodeNodeRegister({d})}}}}},
              {"status", {{"allocatable", {{"nvidia.com/gpu", "10"}}}}}});
    pod_ = {{"metadata", {{"name", "p"}, {"namespace", "ml"}, {"uid", "uid-p"}}},
            {"spec",
             {{"schedulerName", "fracgpu-scheduler"},
              {"containers",
               {{{"name", "c"},
                 {"resources",
                  {{"limits", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}}}}}}}}}};
    api_.Put("pods", pod_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<SchedulerService> Start(int metrics_port = -1, bool anonymous_webhook = false) {
    SchedulerOptions o;
    o.http.cert_file = (dir_ / "tls.crt").string();
    o.http.key_file = (dir_ / "tls.key").string();
    o.http.client_ca_file = (dir_ / "client-ca.crt").string();
    o.http.health_port = 0;
    o.require_client_cert = true;
    o.allowed_clients = {"fracgpu-kube-scheduler"};
    o.anonymous_webhook = anonymous_webhook;
    o.metrics_port = metrics_port;
    o.extender.signing_key = "k";
    auto s = std::make_unique<SchedulerService>(o, client_.get());
    EXPECT_TRUE(s->Start().ok());
    EXPECT_TRUE(s->WaitForSync(std::chrono::seconds(10)));
    return s;
  }
  // Status and body of POST `path` with the client certificate `who` ("" = none).
  std::pair<int, std::string> Call(SchedulerService& s, const std::string& method,
                                   const std::string& path, const std::string& who,
                                   const std::string& body = "{}") {
    std::unique_ptr<httplib::SSLClient> c =
        who.empty() ? std::make_unique<httplib::SSLClient>("127.0.0.1", s.port())
                    : std::make_unique<httplib::SSLClient>("127.0.0.1", s.port(),
                                                           (dir_ / (who + ".crt")).string(),
                                                           (dir_ / (who + ".key")).string());
    c->enable_server_certificate_verification(false);
    auto r =
        method == "GET" ? c->Get(path.c_str()) : c->Post(path.c_str(), body, "application/json");
    if (!r) return {-1, httplib::to_string(r.error())};
    return {r->status, r->body};
  }
  std::string BindBody() const {
    return json{{"PodName", "p"}, {"PodNamespace", "ml"}, {"PodUID", "uid-p"}, {"Node", "node-a"}}
        .dump();
  }
  std::string FilterBody() const {
    return json{{"Pod", pod_}, {"Nodes", nullptr}, {"NodeNames", {"node-a"}}}.dump();
  }

  fs::path dir_;
  Pki pki_;
  fakes::FakeApiServer api_;
  std::unique_ptr<k8s::Client> client_;
  json pod_;
};

TEST_F(SchedulerAuthTest, AnonymousAndForeignCallersChangeNothing) {
  auto s = Start();
  // No certificate: 401 on every protected route; the pod is not bound, nothing is annotated.
  for (const std::string path : {"/bind", "/filter", "/prioritize", "/webhook"}) {
    auto [status, body] = Call(*s, "POST", path, "", path == "/bind" ? BindBody() : FilterBody());
    EXPECT_EQ(status, 401) << path << " " << body;
    EXPECT_NE(body.find("client certificate"), std::string::npos) << body;
  }
  // A certificate of the same CA with another name (a kubelet's): 403.
  auto [status, body] = Call(*s, "POST", "/bind", "kubelet", BindBody());
  EXPECT_EQ(status, 403) << body;
  EXPECT_NE(body.find("some-kubelet"), std::string::npos) << body;
  // The right name from another CA: the handshake fails.
  EXPECT_EQ(Call(*s, "POST", "/bind", "forged", BindBody()).first, -1);
  auto pod = api_.Get("pods", "ml", "p");
  ASSERT_TRUE(pod);
  EXPECT_FALSE((*pod)["spec"].contains("nodeName")) << pod->dump();
  EXPECT_FALSE(k8s::Annotation(*pod, core::kAnnotationVgpuDevicesAllocated).has_value());
  // /metrics on the main port needs the certificate too; the health routes stay open.
  EXPECT_EQ(Call(*s, "GET", "/metrics", "").first, 401);
  EXPECT_EQ(Call(*s, "GET", "/healthz", "").first, 200);
  // kube-scheduler's certificate: served.
  auto f = Call(*s, "POST", "/filter", "ks", FilterBody());
  EXPECT_EQ(f.first, 200) << f.second;
  EXPECT_NE(f.second.find("node-a"), std::string::npos) << f.second;
  auto b = Call(*s, "POST", "/bind", "ks", BindBody());
  EXPECT_EQ(b.first, 200) << b.second;
  EXPECT_TRUE(api_.WaitFor([&] {
    auto p = api_.Get("pods", "ml", "p");
    return p && (*p)["spec"].value("nodeName", "") == "node-a";
  })) << b.second;
  EXPECT_EQ(Call(*s, "GET", "/metrics", "ks").first, 200);
}

TEST_F(SchedulerAuthTest, MetricsOnTheirOwnPortAndAnAnonymousWebhookWhenAsked) {
  auto s = Start(/*metrics_port=*/0, /*anonymous_webhook=*/true);
  ASSERT_GT(s->metrics_port(), 0);
  httplib::Client m("127.0.0.1", s->metrics_port());
  auto r = m.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("fracgpu_gpu_memory_limit_bytes"), std::string::npos);
  EXPECT_EQ(Call(*s, "GET", "/metrics", "ks").first, 404);  // not on the main port
  // /webhook answers without a certificate (400 here: "{}" is no AdmissionReview), /bind not.
  EXPECT_EQ(Call(*s, "POST", "/webhook", "").first, 400);
  EXPECT_EQ(Call(*s, "POST", "/bind", "", BindBody()).first, 401);
}

}  // namespace
}  // namespace fracgpu::scheduler
