// X.509 helpers of `fracgpu certs` (src/certs/pki.h).
#include "certs/pki.h"

#include <gtest/gtest.h>

namespace fracgpu::certs {
namespace {

constexpr std::time_t kNow = 1'780'000'000;  // 2026-05-28T20:26:40Z
constexpr int64_t kDay = 86400;

TEST(PkiTest, CaIsSelfSignedCaWithTheAskedWindow) {
  auto ca = GenerateCa("test-ca", 10 * kDay, kNow);
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  auto info = InspectCert(ca->cert_pem);
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->is_ca);
  EXPECT_EQ(info->common_name, "test-ca");
  EXPECT_EQ(info->not_before, kNow - kBackdateSeconds);
  EXPECT_EQ(info->not_after, kNow + 10 * kDay);
  EXPECT_TRUE(KeyMatchesCert(ca->cert_pem, ca->key_pem).ok());
  EXPECT_NE(ca->cert_pem.find("-----BEGIN CERTIFICATE-----"), std::string::npos);
  EXPECT_NE(ca->key_pem.find("-----BEGIN PRIVATE KEY-----"), std::string::npos);
}

TEST(PkiTest, ServingCertHasSansAndVerifiesAgainstItsCaOnly) {
  auto ca = GenerateCa("ca", 100 * kDay, kNow);
  auto other = GenerateCa("other", 100 * kDay, kNow);
  ASSERT_TRUE(ca.ok() && other.ok());
  auto srv = IssueServingCert(*ca, {"svc", "svc.ns.svc", "10.0.0.7", "::1"}, 30 * kDay, kNow);
  ASSERT_TRUE(srv.ok()) << srv.status().ToString();
  auto info = InspectCert(srv->cert_pem);
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->is_ca);
  EXPECT_EQ(info->common_name, "svc");
  EXPECT_EQ(info->dns_names, (std::vector<std::string>{"svc", "svc.ns.svc"}));
  EXPECT_EQ(info->ip_addresses, (std::vector<std::string>{"10.0.0.7", "::1"}));
  EXPECT_EQ(info->not_before, kNow - kBackdateSeconds);
  EXPECT_EQ(info->not_after, kNow + 30 * kDay);
  EXPECT_TRUE(VerifyIssuedBy(srv->cert_pem, ca->cert_pem, kNow).ok());
  Status wrong_ca = VerifyIssuedBy(srv->cert_pem, other->cert_pem, kNow);
  EXPECT_EQ(wrong_ca.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(wrong_ca.message().find("unable to get local issuer certificate"), std::string::npos)
      << wrong_ca.message();
  Status expired = VerifyIssuedBy(srv->cert_pem, ca->cert_pem, kNow + 31 * kDay);
  EXPECT_NE(expired.message().find("expired"), std::string::npos) << expired.message();
  Status early = VerifyIssuedBy(srv->cert_pem, ca->cert_pem, kNow - kBackdateSeconds - 10);
  EXPECT_NE(early.message().find("not yet valid"), std::string::npos) << early.message();
  EXPECT_TRUE(KeyMatchesCert(srv->cert_pem, srv->key_pem).ok());
  EXPECT_EQ(KeyMatchesCert(srv->cert_pem, ca->key_pem).code(), StatusCode::kInvalidArgument);
}

TEST(PkiTest, ServingCertNeverOutlivesItsCa) {
  auto ca = GenerateCa("ca", 5 * kDay, kNow);
  ASSERT_TRUE(ca.ok());
  auto srv = IssueServingCert(*ca, {"svc"}, 365 * kDay, kNow);
  ASSERT_TRUE(srv.ok());
  EXPECT_EQ(InspectCert(srv->cert_pem)->not_after, kNow + 5 * kDay);
}

TEST(PkiTest, BadInputsAreRefusedWithTheValue) {
  auto ca = GenerateCa("ca", kDay, kNow);
  ASSERT_TRUE(ca.ok());
  struct Case {
    std::vector<std::string> sans;
    int64_t validity;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{}, kDay, "at least one SAN"},
      {{"svc"}, 0, "validity must be > 0 seconds, got 0"},
      {{"Svc.ns"}, kDay, "SAN \"Svc.ns\""},
      {{"svc..ns"}, kDay, "empty label"},
      {{"-svc"}, kDay, "starting or ending with '-'"},
      {{"svc_1"}, kDay, "bad character '_'"},
      {{std::string(64, 'a')}, kDay, "longer than 63"},
      {{"10.0.0.1/24"}, kDay, "bad character '/'"},
  };
  for (const auto& c : cases) {
    auto r = IssueServingCert(*ca, c.sans, c.validity, kNow);
    ASSERT_FALSE(r.ok()) << c.message;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.message), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(GenerateCa("", kDay, kNow).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(GenerateCa("ca", -1, kNow).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(IssueServingCert({"junk", "junk"}, {"svc"}, kDay, kNow).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(InspectCert("not a certificate").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(VerifyIssuedBy("junk", ca->cert_pem, kNow).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(ValidateSan("*.svc.cluster.local").ok());
  EXPECT_TRUE(ValidateSan("fe80::1").ok());
}

TEST(PkiTest, Base64MatchesRfc4648Vectors) {
  // RFC 4648 §10 test vectors.
  const std::vector<std::pair<std::string, std::string>> vectors = {{"", ""},
                                                                    {"f", "Zg=="},
                                                                    {"fo", "Zm8="},
                                                                    {"foo", "Zm9v"},
                                                                    {"foob", "Zm9vYg=="},
                                                                    {"fooba", "Zm9vYmE="},
                                                                    {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : vectors) {
    EXPECT_EQ(Base64Encode(plain), encoded);
    auto back = Base64Decode(encoded);
    ASSERT_TRUE(back.ok()) << encoded;
    EXPECT_EQ(*back, plain);
  }
  std::string binary("\x00\xff\x10", 3);
  EXPECT_EQ(*Base64Decode(Base64Encode(binary)), binary);
  for (const std::string bad : {"Zm9", "Zm9v!A==", "Zg==Zg==", "=Zm9"}) {
    EXPECT_EQ(Base64Decode(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(PkiTest, RandomBytesHaveTheLengthAndDiffer) {
  auto a = RandomBytes(32);
  auto b = RandomBytes(32);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 32u);
  EXPECT_NE(*a, *b);
}

}  // namespace
}  // namespace fracgpu::certs
