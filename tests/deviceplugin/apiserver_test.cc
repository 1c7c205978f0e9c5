// The whole Allocate path over real HTTP: Allocator → K8sClusterApi → k8s::Client → the fake
// kube-apiserver (tests/fakes/apiserver), with its fault injection; node registration too.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/codec.h"
#include "core/signature.h"
#include "deviceplugin/allocator.h"
#include "deviceplugin/cluster_api.h"
#include "deviceplugin/registrar.h"
#include "fake_apiserver.h"
#include "k8s/client.h"
#include "node/device_state.h"
#include "test_support.h"

namespace fracgpu::deviceplugin {
namespace {

using namespace testing;  // NOLINT
namespace fs = std::filesystem;

class ApiServerTest : public ::testing::Test {
 protected:
  ApiServerTest() : state_(TwoGpus(), node::DeviceConfig{}) {
    k8s::Config config;
    config.server = api_.url();
    auto client = k8s::Client::Create(config, {}, &clock_);
    EXPECT_TRUE(client.ok());
    client_ = std::move(client).value();
    cluster_ = std::make_unique<K8sClusterApi>(client_.get());
    fs::create_directories(dir_.path() + "/vgpu");
    std::ofstream(dir_.path() + "/vgpu/libvgpu.so") << "ELF";
    AllocatorOptions o;
    o.node_name = kNode;
    o.hook_path = dir_.path();
    // The scheduler's own verifier (src/core/signature.h); the pods are signed by test_support's
    // independent OpenSSL HMAC.
    o.verify_signature = [](const std::string& uid, const std::string& node,
                            const std::string& allocated, const std::string& sig) {
      return core::VerifyAllocation(kKey, uid, node, allocated, sig)
                 ? Status::Ok()
                 : PermissionDenied("HMAC mismatch");
    };
    allocator_ = std::make_unique<Allocator>(o, cluster_.get(), &clock_,
                                             [this] { return state_.Devices(); });
    EXPECT_TRUE(allocator_->PrepareHostFiles().ok());
  }

  std::string PodAnnotation(const std::string& name, const std::string& key) {
    auto pod = api_.Get("pods", "ml", name);
    if (!pod) return "<no pod>";
    const auto& a = (*pod)["metadata"]["annotations"];
    return a.contains(key) ? a[key].get<std::string>() : "<absent>";
  }
  bool Locked() {
    auto node = api_.Get("nodes", "", kNode);
    return node && (*node)["metadata"]["annotations"].contains("hami.io/mutex.lock");
  }

  TempDir dir_;
  fakes::FakeApiServer api_;
  base::ManualClock clock_;
  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<K8sClusterApi> cluster_;
  node::DeviceState state_;
  std::unique_ptr<Allocator> allocator_;
};

TEST_F(ApiServerTest, AllocateOverHttpRecordsSuccessAndReleasesTheLock) {
  std::string alloc = std::string(kUuidA) + ",NVIDIA,1000,10:;" + kUuidB + ",NVIDIA,2000,20:;";
  api_.Put("nodes", MakeNode("ml", "train"));
  api_.Put("pods", MakePod("train", {{"a", false, 1}, {"b", false, 1}}, alloc));
  auto first = allocator_->Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(PodAnnotation("train", "hami.io/vgpu-devices-to-allocate"),
            std::string(";") + kUuidB + ",NVIDIA,2000,20:;");
  EXPECT_TRUE(Locked());
  auto second = allocator_->Allocate({{std::string(kUuidB) + "-0"}});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ((*second)[0].container, "b");
  EXPECT_EQ(PodAnnotation("train", "hami.io/vgpu-devices-to-allocate"), ";;");
  EXPECT_EQ(PodAnnotation("train", "hami.io/bind-phase"), "success");
  EXPECT_FALSE(Locked());
}

TEST_F(ApiServerTest, ServerErrorsAreRetriedWithoutLosingTheAllocation) {
  api_.Put("nodes", MakeNode("ml", "train"));
  api_.Put("pods",
           MakePod("train", {{"main", false, 1}}, std::string(kUuidA) + ",NVIDIA,3000,30:;"));
  api_.FailNext("GET", "/api/v1/nodes/node-a", 503, 1);
  api_.FailNext("PATCH", "/api/v1/namespaces/ml/pods/train", 500, 2);
  api_.FailNext("PATCH", "/api/v1/nodes/node-a", 503, 1);
  auto r = allocator_->Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].envs.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "3000m");
  EXPECT_EQ(PodAnnotation("train", "hami.io/vgpu-devices-to-allocate"), ";");
  EXPECT_EQ(PodAnnotation("train", "hami.io/bind-phase"), "success");
  EXPECT_FALSE(Locked());
}

TEST_F(ApiServerTest, ForgedPodOverHttpGetsNothing) {
  api_.Put("nodes", MakeNode("ml", "evil"));
  api_.Put("pods", MakePod("evil", {{"main", false, 1}}, std::string(kUuidA) + ",NVIDIA,3000,30:;",
                           Sign("uid-evil", kNode, "x", "wrong-key")));
  auto r = allocator_->Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(PodAnnotation("evil", "hami.io/bind-phase"), "failed");
  EXPECT_EQ(PodAnnotation("evil", "hami.io/vgpu-devices-to-allocate"),
            std::string(kUuidA) + ",NVIDIA,3000,30:;");
  EXPECT_FALSE(Locked());
}

TEST_F(ApiServerTest, NodeRegistrationIsPatchedOnlyWhenChanged) {
  api_.Put("nodes", MakeNode());
  NodeRegistrar registrar(kNode, cluster_.get());
  ASSERT_TRUE(registrar.Sync(state_.Devices()).ok());
  ASSERT_TRUE(registrar.Sync(state_.Devices()).ok());
  EXPECT_EQ(api_.CountRequests("PATCH", "/api/v1/nodes/node-a"), 1);
  auto node = api_.Get("nodes", "", kNode);
  ASSERT_TRUE(node.has_value());
  auto decoded =
      core::DecodeNodeRegister((*node)["metadata"]["annotations"]["hami.io/node-nvidia-register"]);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, state_.Devices());
  ASSERT_TRUE(state_.MarkUnhealthy(kUuidB));
  ASSERT_TRUE(registrar.Sync(state_.Devices()).ok());
  EXPECT_EQ(api_.CountRequests("PATCH", "/api/v1/nodes/node-a"), 2);
}

}  // namespace
}  // namespace fracgpu::deviceplugin
