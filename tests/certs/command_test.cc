// `fracgpu certs` command line (src/certs/command.cc), run in process against the fake API
// server through a kubeconfig, as the install Job runs it.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "certs/pki.h"
#include "cli/usage.h"
#include "fake_apiserver.h"
#include "webhook_front.h"

namespace fracgpu::cli {
void RegisterCertsCommand(CLI::App& app);
}

namespace fracgpu::certs {
namespace {

using nlohmann::json;

class CertsCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    front_.PutConfig(testing::SampleWebhookConfig("fracgpu-webhook"));
    kubeconfig_ = std::filesystem::temp_directory_path() /
                  ("certs-kubeconfig-" + std::to_string(::getpid()) + "-" +
                   ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".yaml");
    std::ofstream(kubeconfig_)
        << "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: "
        << front_.url()
        << "\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: c\n  context:\n"
           "    cluster: fake\n    user: u\ncurrent-context: c\n";
  }
  void TearDown() override { std::filesystem::remove(kubeconfig_); }

  // Runs `fracgpu certs <args> --kubeconfig <fake>`; returns the exit code main() would give.
  int Run(std::vector<std::string> args) {
    CLI::App app{"fracgpu"};
    app.require_subcommand(1);
    cli::RegisterCertsCommand(app);
    args.insert(args.begin(), "certs");
    args.push_back("--kubeconfig");
    args.push_back(kubeconfig_.string());
    std::reverse(args.begin(), args.end());  // CLI11's vector form takes arguments in reverse
    try {
      app.parse(args);
    } catch (const CLI::Error& e) {
      ::testing::internal::CaptureStderr();
      int rc = cli::ExitFor(app, "certs", e);  // what fracgpu prints and returns
      last_error_ = ::testing::internal::GetCapturedStderr();
      return rc;
    }
    return 0;
  }

  fakes::FakeApiServer fake_;
  testing::WebhookFront front_{fake_};
  std::filesystem::path kubeconfig_;
  std::string last_error_;
};

TEST_F(CertsCommandTest, InstallCommandLineCreatesTheSecretAndRerunKeepsIt) {
  ASSERT_EQ(Run({"--namespace", "fracgpu-system", "--service", "fracgpu-scheduler", "--extra-san",
                 "127.0.0.1"}),
            0)
      << last_error_;
  auto secret = front_.Secret("fracgpu-system", "fracgpu-scheduler-tls");
  ASSERT_TRUE(secret.has_value());
  std::string crt = *Base64Decode((*secret)["data"]["tls.crt"]);
  std::string ca = *Base64Decode((*secret)["data"]["ca.crt"]);
  EXPECT_TRUE(VerifyIssuedBy(crt, ca, std::time(nullptr)).ok());
  EXPECT_EQ(InspectCert(crt)->ip_addresses, std::vector<std::string>{"127.0.0.1"});
  EXPECT_EQ(*Base64Decode(
                front_.Config("fracgpu-webhook")->at("webhooks")[0]["clientConfig"]["caBundle"]),
            ca);
  std::string rv = (*secret)["metadata"]["resourceVersion"];
  ASSERT_EQ(Run({"--extra-san", "127.0.0.1"}), 0);
  EXPECT_EQ(
      (*front_.Secret("fracgpu-system", "fracgpu-scheduler-tls"))["metadata"]["resourceVersion"],
      rv);
}

TEST_F(CertsCommandTest, SkipWebhookAndNoSigningKeyLeaveThemAlone) {
  ASSERT_EQ(Run({"--skip-webhook", "--signing-key-secret", ""}), 0) << last_error_;
  EXPECT_TRUE(front_.Secret("fracgpu-system", "fracgpu-scheduler-tls").has_value());
  EXPECT_FALSE(front_.Secret("fracgpu-system", "fracgpu-signing-key").has_value());
  EXPECT_EQ(front_.patches(), 0);
}

TEST_F(CertsCommandTest, BadFlagsGiveClearErrorsAndWriteNothing) {
  struct Case {
    std::vector<std::string> args;
    std::string message;  // in the one line on stderr, after "fracgpu certs: "
  };
  // Every usage error, CLI11's and ours alike, exits 2 with one line (issue 38 item 5).
  const std::vector<Case> cases = {
      {{"--validity-days", "0"}, "--validity-days"},
      {{"--validity-days", "ten"}, "--validity-days"},
      {{"--renew-before-days", "-1"}, "--renew-before-days"},
      {{"--no-such-flag"}, "--no-such-flag"},
      {{"--namespace", "Bad_NS"}, "Bad_NS"},
      {{"--renew-before-days", "400"}, "--renew-before-days \"400\""},
      {{"--extra-san", "not a name"}, "--extra-san: "},
  };
  for (const auto& c : cases) {
    last_error_.clear();
    EXPECT_EQ(Run(c.args), 2) << c.args[0];
    EXPECT_EQ(last_error_.rfind("fracgpu certs: ", 0), 0u) << last_error_;
    EXPECT_NE(last_error_.find(c.message), std::string::npos) << last_error_;
    EXPECT_EQ(last_error_.find('\n'), last_error_.size() - 1) << last_error_;
  }
  EXPECT_EQ(front_.secret_writes(), 0);
  EXPECT_FALSE(front_.Secret("fracgpu-system", "fracgpu-scheduler-tls").has_value());
  EXPECT_EQ(front_.patches(), 0);
}

}  // namespace
}  // namespace fracgpu::certs
