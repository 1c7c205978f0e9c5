// Registration client against the fake kubelet: accepted, rejected, and kubelet absent.
#include "kubelet/registration.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "../support/temp_dir.h"
#include "fake_kubelet.h"

namespace fracgpu::kubelet {
namespace {

// A minimal plugin endpoint kubelet can dial back.
class Plugin final : public v1beta1::DevicePlugin::Service {
  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* out) override {
    out->set_pre_start_required(true);
    return grpc::Status::OK;
  }
};

class RegistrationTest : public ::testing::Test {
 protected:
  ~RegistrationTest() override {
    if (server_) server_->Shutdown();
  }
  void ServePlugin() {
    grpc::ServerBuilder b;
    b.AddListeningPort(UnixTarget(dir_ + "/p.sock"), grpc::InsecureServerCredentials());
    b.RegisterService(&plugin_);
    server_ = b.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  v1beta1::RegisterRequest Request(const std::string& version = kVersion,
                                   const std::string& resource = "nvidia.com/gpu") {
    v1beta1::RegisterRequest r;
    r.set_version(version);
    r.set_endpoint("p.sock");
    r.set_resource_name(resource);
    return r;
  }
  ::fracgpu::test_support::TempDir tmp_{"fgkl-", /*socket_safe=*/true};
  std::string dir_ = tmp_.path();
  Plugin plugin_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(RegistrationTest, KubeletDialsBackAndRecordsThePlugin) {
  ServePlugin();
  fakes::FakeKubelet kubelet(dir_);
  ASSERT_TRUE(kubelet.Start());
  Status st = RegisterWithKubelet(kubelet.socket_path(), Request(), std::chrono::seconds(10));
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto regs = kubelet.registrations();
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_EQ(regs[0].endpoint, "p.sock");
  EXPECT_EQ(regs[0].resource_name, "nvidia.com/gpu");
  EXPECT_TRUE(regs[0].options.pre_start_required());
}

TEST_F(RegistrationTest, RejectedRequestsAreInvalidArgument) {
  ServePlugin();
  fakes::FakeKubelet kubelet(dir_);
  ASSERT_TRUE(kubelet.Start());
  Status v1 = RegisterWithKubelet(kubelet.socket_path(), Request("v1"), std::chrono::seconds(10));
  EXPECT_EQ(v1.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(v1.message(),
            "kubelet Register(nvidia.com/gpu, endpoint p.sock): unsupported version v1");
  Status name = RegisterWithKubelet(kubelet.socket_path(), Request(kVersion, "gpu"),
                                    std::chrono::seconds(10));
  EXPECT_EQ(name.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(kubelet.registrations().size(), 0u);
}

TEST_F(RegistrationTest, NoKubeletIsUnavailable) {
  Status st =
      RegisterWithKubelet(dir_ + "/kubelet.sock", Request(), std::chrono::milliseconds(200));
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_EQ(st.message(), "kubelet socket " + dir_ + "/kubelet.sock: cannot connect");
}

}  // namespace
}  // namespace fracgpu::kubelet
