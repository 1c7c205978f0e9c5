// `fracgpu certs` reconcile (src/certs/reconcile.h) against the fake API server, with the
// webhook configurations served by WebhookFront.
#include "certs/reconcile.h"

#include <gtest/gtest.h>

#include "certs/pki.h"
#include "fake_apiserver.h"
#include "test_client.h"
#include "webhook_front.h"

namespace fracgpu::certs {
namespace {

using nlohmann::json;
using testing::SampleWebhookConfig;
using testing::WebhookFront;

constexpr std::time_t kNow = 1'780'000'000;
constexpr int64_t kDay = 86400;

std::string Field(const json& secret, const std::string& key) {
  auto r = Base64Decode(secret["data"][key].get<std::string>());
  EXPECT_TRUE(r.ok()) << key;
  return r.ok() ? *r : "";
}

class ReconcileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    front_.PutConfig(SampleWebhookConfig("fracgpu-webhook", 2));
    auto c = fakes::NoRetryClient(front_.url());
    ASSERT_TRUE(c.ok());
    client_ = std::move(*c);
  }
  json Secret(const std::string& name = "fracgpu-scheduler-tls") {
    auto s = front_.Secret("fracgpu-system", name);
    EXPECT_TRUE(s.has_value()) << name;
    return s.value_or(json::object());
  }
  std::vector<std::string> Bundles() {
    std::vector<std::string> out;
    const json config = front_.Config("fracgpu-webhook").value_or(json::object());
    for (const auto& h : config.value("webhooks", json::array())) {
      out.push_back(*Base64Decode(h["clientConfig"].value("caBundle", "")));
    }
    return out;
  }
  int SecretWrites() { return front_.secret_writes(); }

  fakes::FakeApiServer fake_;
  WebhookFront front_{fake_};
  std::unique_ptr<k8s::Client> client_;
  CertsOptions options_;
};

TEST_F(ReconcileTest, FirstRunCreatesSecretCaBundleAndSigningKey) {
  options_.extra_sans = {"fracgpu-scheduler.example.com", "10.96.0.42"};
  auto out = Reconcile(*client_, options_, kNow);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(out->ca_generated);
  EXPECT_TRUE(out->cert_issued);
  EXPECT_TRUE(out->secret_written);
  EXPECT_EQ(out->webhooks_patched, 1);
  EXPECT_TRUE(out->signing_key_created);

  json secret = Secret();
  EXPECT_EQ(secret["type"], "kubernetes.io/tls");
  std::string crt = Field(secret, "tls.crt"), key = Field(secret, "tls.key"),
              ca = Field(secret, "ca.crt");
  EXPECT_TRUE(VerifyIssuedBy(crt, ca, kNow).ok());
  EXPECT_TRUE(KeyMatchesCert(crt, key).ok());
  EXPECT_TRUE(KeyMatchesCert(ca, Field(secret, "ca.key")).ok());
  auto info = InspectCert(crt);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->dns_names,
            (std::vector<std::string>{"fracgpu-scheduler", "fracgpu-scheduler.fracgpu-system",
                                      "fracgpu-scheduler.fracgpu-system.svc",
                                      "fracgpu-scheduler.fracgpu-system.svc.cluster.local",
                                      "fracgpu-scheduler.example.com"}));
  EXPECT_EQ(info->ip_addresses, (std::vector<std::string>{"10.96.0.42"}));
  EXPECT_EQ(info->not_after, kNow + 365 * kDay);
  EXPECT_EQ(InspectCert(ca)->not_after, kNow + 3650 * kDay);
  // Every webhook of the configuration trusts exactly this CA.
  EXPECT_EQ(Bundles(), (std::vector<std::string>{ca, ca}));

  json signing = Secret("fracgpu-signing-key");
  EXPECT_EQ(signing["type"], "Opaque");
  std::string k = Field(signing, "key");
  EXPECT_EQ(k.size(), 64u);
  EXPECT_EQ(k.find_first_not_of("0123456789abcdef"), std::string::npos) << k;
}

TEST_F(ReconcileTest, RerunKeepsAValidCertificateAndWritesNothing) {
  ASSERT_TRUE(Reconcile(*client_, options_, kNow).ok());
  json before = Secret();
  json key_before = Secret("fracgpu-signing-key");
  int writes = SecretWrites(), patches = front_.patches();
  auto out = Reconcile(*client_, options_, kNow + 300 * kDay);  // 65 days left > 30
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_FALSE(out->ca_generated || out->cert_issued || out->secret_written ||
               out->signing_key_created);
  EXPECT_EQ(out->webhooks_patched, 0);
  EXPECT_TRUE(out->notes.empty());
  EXPECT_EQ(SecretWrites(), writes);
  EXPECT_EQ(front_.patches(), patches);
  EXPECT_EQ(Secret(), before);
  EXPECT_EQ(Secret("fracgpu-signing-key"), key_before);
}

TEST_F(ReconcileTest, ExpiringServingCertIsRenewedUnderTheSameCa) {
  ASSERT_TRUE(Reconcile(*client_, options_, kNow).ok());
  std::string ca = Field(Secret(), "ca.crt");
  std::string old_crt = Field(Secret(), "tls.crt");
  int patches = front_.patches();
  const std::time_t later = kNow + 340 * kDay;  // 25 days left < 30
  auto out = Reconcile(*client_, options_, later);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_FALSE(out->ca_generated);
  EXPECT_TRUE(out->cert_issued);
  std::string crt = Field(Secret(), "tls.crt");
  EXPECT_NE(crt, old_crt);
  EXPECT_EQ(Field(Secret(), "ca.crt"), ca);
  EXPECT_TRUE(VerifyIssuedBy(crt, ca, later).ok());
  EXPECT_EQ(InspectCert(crt)->not_after, later + 365 * kDay);
  EXPECT_EQ(front_.patches(), patches);  // caBundle already right: not touched
  EXPECT_EQ(Bundles(), (std::vector<std::string>{ca, ca}));
}

TEST_F(ReconcileTest, ExpiringCaIsRotatedAndTheOldCaStaysTrustedMeanwhile) {
  ASSERT_TRUE(Reconcile(*client_, options_, kNow).ok());
  std::string old_ca = Field(Secret(), "ca.crt");
  const std::time_t later = kNow + 3630 * kDay;  // CA: 20 days left
  auto out = Reconcile(*client_, options_, later);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(out->ca_generated);
  EXPECT_TRUE(out->cert_issued);
  std::string ca = Field(Secret(), "ca.crt");
  EXPECT_NE(ca, old_ca);
  EXPECT_TRUE(VerifyIssuedBy(Field(Secret(), "tls.crt"), ca, later).ok());
  EXPECT_EQ(Bundles(), (std::vector<std::string>{ca + old_ca, ca + old_ca}));
  // The next run (old serving cert long gone) trusts only the current CA.
  ASSERT_TRUE(Reconcile(*client_, options_, later + kDay).ok());
  EXPECT_EQ(Bundles(), (std::vector<std::string>{ca, ca}));
}

TEST_F(ReconcileTest, NewSanOrForeignCertificateIsReissued) {
  ASSERT_TRUE(Reconcile(*client_, options_, kNow).ok());
  options_.extra_sans = {"webhook.example.org"};
  auto out = Reconcile(*client_, options_, kNow);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->cert_issued);
  EXPECT_FALSE(out->ca_generated);
  EXPECT_EQ(InspectCert(Field(Secret(), "tls.crt"))->dns_names.back(), "webhook.example.org");

  // Someone swaps in a certificate from another CA: it does not verify, so it is replaced.
  auto other = GenerateCa("other", 100 * kDay, kNow);
  auto foreign = IssueServingCert(*other, ServingSans(options_), 50 * kDay, kNow);
  ASSERT_TRUE(foreign.ok());
  json s = Secret();
  s["data"]["tls.crt"] = Base64Encode(foreign->cert_pem);
  s["data"]["tls.key"] = Base64Encode(foreign->key_pem);
  front_.PutSecret(s);
  out = Reconcile(*client_, options_, kNow);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->cert_issued);
  EXPECT_TRUE(VerifyIssuedBy(Field(Secret(), "tls.crt"), Field(Secret(), "ca.crt"), kNow).ok());
}

TEST_F(ReconcileTest, ConcurrentWebhookEditIsRetried) {
  front_.FailNext("PATCH", "/apis/admissionregistration.k8s.io/", 409);
  auto out = Reconcile(*client_, options_, kNow);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(front_.patches(), 2);
  EXPECT_EQ(Bundles()[0], Field(Secret(), "ca.crt"));
}

TEST_F(ReconcileTest, ErrorsNameTheObjectAndChangeNothingElse) {
  // A Secret of another type under our name: refused, not overwritten.
  front_.PutSecret(
      {{"metadata", {{"name", "fracgpu-scheduler-tls"}, {"namespace", "fracgpu-system"}}},
       {"type", "Opaque"},
       {"data", {{"x", "eA=="}}}});
  auto out = Reconcile(*client_, options_, kNow);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("fracgpu-system/fracgpu-scheduler-tls has type \"Opaque\""),
            std::string::npos)
      << out.status().message();
  EXPECT_EQ(Secret()["type"], "Opaque");
  EXPECT_EQ(front_.patches(), 0);
  front_.RemoveSecret("fracgpu-system", "fracgpu-scheduler-tls");

  // A webhook configuration that does not exist.
  options_.webhook_configs = {"missing-webhook"};
  out = Reconcile(*client_, options_, kNow);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kNotFound);
  EXPECT_NE(out.status().message().find("MutatingWebhookConfiguration missing-webhook"),
            std::string::npos);

  // A signing-key Secret without a key is reported, never replaced.
  options_.webhook_configs = {"fracgpu-webhook"};
  front_.PutSecret(
      {{"metadata", {{"name", "fracgpu-signing-key"}, {"namespace", "fracgpu-system"}}},
       {"type", "Opaque"},
       {"data", json::object()}});
  out = Reconcile(*client_, options_, kNow);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("without a usable data.key"), std::string::npos)
      << out.status().message();
  EXPECT_EQ(Secret("fracgpu-signing-key")["data"], json::object());

  // No RBAC: the API server's 403 comes back naming the Secret.
  front_.FailNext("GET", "/api/v1/namespaces/fracgpu-system/secrets/", 403);
  out = Reconcile(*client_, options_, kNow);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(out.status().message().find("Secret fracgpu-system/fracgpu-scheduler-tls"),
            std::string::npos);
}

TEST(CertsOptionsTest, BadOptionsNameTheFlagAndValue) {
  struct Case {
    std::function<void(CertsOptions&)> edit;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](CertsOptions& o) { o.namespace_name = "Fracgpu"; },
       "--namespace \"Fracgpu\" is not a DNS-1123 label"},
      {[](CertsOptions& o) { o.service = ""; }, "--service \"\""},
      {[](CertsOptions& o) { o.secret_name = "tls_secret"; }, "--secret-name \"tls_secret\""},
      {[](CertsOptions& o) { o.signing_key_secret = "fracgpu-scheduler-tls"; },
       "must differ from --secret-name"},
      {[](CertsOptions& o) { o.webhook_configs = {"a..b"}; }, "--webhook-config \"a..b\""},
      {[](CertsOptions& o) { o.cluster_domain = "cluster_local"; },
       "--cluster-domain \"cluster_local\""},
      {[](CertsOptions& o) { o.extra_sans = {"Bad Name"}; }, "--extra-san: SAN \"Bad Name\""},
      {[](CertsOptions& o) { o.renew_before_s = 365 * kDay; },
       "--renew-before-days \"365\" must be less than --validity-days (365)"},
      {[](CertsOptions& o) { o.ca_validity_s = 10 * kDay; },
       "must be less than --ca-validity-days (10)"},
      {[](CertsOptions& o) { o.cert_validity_s = 0; }, "--validity-days \"0\" must be > 0"},
  };
  for (const auto& c : cases) {
    CertsOptions o;
    c.edit(o);
    Status st = ValidateOptions(o);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_NE(st.message().find(c.message), std::string::npos) << st.message();
  }
  EXPECT_TRUE(ValidateOptions(CertsOptions{}).ok());
}

}  // namespace
}  // namespace fracgpu::certs
