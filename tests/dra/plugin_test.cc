// The kubelet plugin through the fake kubelet's DRA side: registration (v1 and v1beta1
// kubelets, and a kubelet that speaks neither), NodePrepareResources / NodeUnprepareResources
// for claims of one and two GPUs, idempotence, kubelet restart and plugin restart (the
// checkpoint), and bad claims answered per claim with nothing written.
#include "dra/plugin.h"

#include <gtest/gtest.h>

#include "dra/api.h"
#include "dra/driver.h"
#include "fake_apiserver.h"
#include "fake_dra_kubelet.h"
#include "k8s/client.h"
#include "test_util.h"

namespace fracgpu::dra {
namespace {

namespace fs = std::filesystem;
using namespace testing;  // NOLINT
using fakes::ClaimRef;
using fakes::FakeDraKubelet;

constexpr auto kWait = std::chrono::seconds(10);

class PluginTest : public ::testing::Test {
 protected:
  PluginTest() {
    registry_ = dir_.path() + "/registry";
    fs::create_directories(registry_);
    fs::create_directories(dir_.path() + "/hook/vgpu");
    std::ofstream(dir_.path() + "/hook/vgpu/libvgpu.so") << "ELF";
    fs::create_directories(dir_.path() + "/cdi");
    k8s::Config config;
    config.server = api_.url();
    client_ = std::move(k8s::Client::Create(config).value());
    source_ = std::make_unique<K8sClaimSource>(client_.get());
    StartPlugin();
  }
  ~PluginTest() override {
    plugin_.reset();
    driver_.reset();
  }
  void StartPlugin() {
    DriverOptions o{kDriverName,
                    kNode,
                    dir_.path() + "/state",
                    {dir_.path() + "/cdi", dir_.path() + "/hook", {}}};
    driver_ = std::make_unique<Driver>(o, source_.get(), [] { return TwoGpus(); });
    ASSERT_TRUE(driver_->Load().ok());
    plugin_ = std::make_unique<KubeletPlugin>(
        PluginOptions{kDriverName, registry_, dir_.path() + "/plugin", true}, driver_.get());
    ASSERT_TRUE(plugin_->Start().ok());
  }
  void StopPlugin() {
    plugin_.reset();
    driver_.reset();
  }
  std::string CdiFile(const std::string& uid) {
    return dir_.path() + "/cdi/fracgpu.io-gpu-claim-" + uid + ".json";
  }

  TempDir dir_;
  std::string registry_;
  fakes::FakeApiServer api_;
  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<K8sClaimSource> source_;
  std::unique_ptr<Driver> driver_;
  std::unique_ptr<KubeletPlugin> plugin_;
};

TEST_F(PluginTest, RegistersPreparesAndUnpreparesOverV1) {
  api_.Put("resourceclaims",
           Claim("one", "uid-1", json::array({Result("gpu-0", "3000Mi", "30", "s-1")})));
  FakeDraKubelet kubelet(registry_);
  ASSERT_TRUE(kubelet.WaitForDriver(kDriverName, kWait));
  auto regs = kubelet.registrations();
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_EQ(regs[0].registration_socket, registry_ + "/gpu.fracgpu.io-reg.sock");
  EXPECT_EQ(regs[0].endpoint, dir_.path() + "/plugin/dra.sock");
  EXPECT_EQ(regs[0].service, "v1.DRAPlugin");
  EXPECT_TRUE(plugin_->registered());
  EXPECT_EQ(plugin_->registration_notifications(), 1);

  drav1::NodePrepareResourcesResponse resp;
  ASSERT_TRUE(kubelet.Prepare(kDriverName, {ClaimRef("ml", "one", "uid-1")}, &resp).ok());
  ASSERT_EQ(resp.claims().count("uid-1"), 1u);
  const auto& c = resp.claims().at("uid-1");
  EXPECT_EQ(c.error(), "");
  ASSERT_EQ(c.devices_size(), 1);
  EXPECT_EQ(c.devices(0).pool_name(), kNode);
  EXPECT_EQ(c.devices(0).device_name(), "gpu-0");
  ASSERT_EQ(c.devices(0).request_names_size(), 1);
  EXPECT_EQ(c.devices(0).request_names(0), "gpu");
  ASSERT_EQ(c.devices(0).cdi_device_ids_size(), 1);
  EXPECT_EQ(c.devices(0).cdi_device_ids(0), "fracgpu.io/gpu=claim-uid-1-gpu-0");
  // dra/v1 Device.share_id (field 5) carries the allocation's shareID.
  ASSERT_TRUE(c.devices(0).has_share_id());
  EXPECT_EQ(c.devices(0).share_id(), "s-1");
  ASSERT_TRUE(fs::exists(CdiFile("uid-1")));
  EXPECT_NE(ReadFile(dir_.path() + "/hook/vgpu/limits/claim_uid-1.env")
                .find("CUDA_DEVICE_MEMORY_LIMIT_0=3000m\n"),
            std::string::npos);

  // Idempotent: the same answer again, one checkpoint entry.
  drav1::NodePrepareResourcesResponse again;
  ASSERT_TRUE(kubelet.Prepare(kDriverName, {ClaimRef("ml", "one", "uid-1")}, &again).ok());
  EXPECT_EQ(again.SerializeAsString(), resp.SerializeAsString());
  EXPECT_EQ(driver_->Prepared().size(), 1u);

  drav1::NodeUnprepareResourcesResponse un;
  ASSERT_TRUE(kubelet.Unprepare(kDriverName, {ClaimRef("ml", "one", "uid-1")}, &un).ok());
  ASSERT_EQ(un.claims().count("uid-1"), 1u);
  EXPECT_EQ(un.claims().at("uid-1").error(), "");
  EXPECT_FALSE(fs::exists(CdiFile("uid-1")));
  EXPECT_FALSE(fs::exists(dir_.path() + "/hook/vgpu/limits/claim_uid-1.env"));
  EXPECT_TRUE(driver_->Prepared().empty());
  ASSERT_TRUE(kubelet.Unprepare(kDriverName, {ClaimRef("ml", "one", "uid-1")}, &un).ok());
  EXPECT_EQ(un.claims().at("uid-1").error(), "");
}

TEST_F(PluginTest, FirstAvailableSubrequestIsReportedUnderItsRequest) {
  // kube-scheduler writes results[].request "<request>/<subrequest>" for a firstAvailable
  // request; the container names the request ("gpu") and must get the claim's CDI device.
  api_.Put(
      "resourceclaims",
      Claim("fa", "uid-fa", json::array({Result("gpu-1", "2000Mi", "20", "s-1", "gpu/small")})));
  FakeDraKubelet kubelet(registry_);
  ASSERT_TRUE(kubelet.WaitForDriver(kDriverName, kWait));
  drav1::NodePrepareResourcesResponse resp;
  ASSERT_TRUE(kubelet.Prepare(kDriverName, {ClaimRef("ml", "fa", "uid-fa")}, &resp).ok());
  const auto& c = resp.claims().at("uid-fa");
  EXPECT_EQ(c.error(), "");
  ASSERT_EQ(c.devices_size(), 1);
  EXPECT_EQ(c.devices(0).device_name(), "gpu-1");
  ASSERT_EQ(c.devices(0).request_names_size(), 1);
  EXPECT_EQ(c.devices(0).request_names(0), "gpu");
  const std::vector<std::string> want = {"fracgpu.io/gpu=claim-uid-fa-gpu-1"};
  EXPECT_EQ(fakes::ContainerCdiDevices(c, "gpu"), want);
  EXPECT_EQ(fakes::ContainerCdiDevices(c, ""), want);
  EXPECT_TRUE(fakes::ContainerCdiDevices(c, "other").empty());
  // The checkpoint keeps the allocation's own request name.
  EXPECT_EQ(driver_->Prepared().at("uid-fa").shares.at(0).request, "gpu/small");
}

TEST_F(PluginTest, KubeletOfOneThirtyThreeNegotiatesV1beta1) {
  api_.Put(
      "resourceclaims",
      Claim("two", "uid-2",
            json::array({Result("gpu-0", "4Gi", "0", "a"), Result("gpu-1", "5000Mi", "50", "b")})));
  FakeDraKubelet kubelet(registry_, {"v1beta1.DRAPlugin"});
  ASSERT_TRUE(kubelet.WaitForDriver(kDriverName, kWait));
  EXPECT_EQ(kubelet.registrations()[0].service, "v1beta1.DRAPlugin");
  drav1::NodePrepareResourcesResponse resp;
  ASSERT_TRUE(kubelet.Prepare(kDriverName, {ClaimRef("ml", "two", "uid-2")}, &resp).ok());
  const auto& c = resp.claims().at("uid-2");
  ASSERT_EQ(c.devices_size(), 2) << c.error();
  EXPECT_EQ(c.devices(1).device_name(), "gpu-1");
  // One CDI device per allocated device (each carries only its GPU).
  ASSERT_EQ(c.devices(0).cdi_device_ids_size(), 1);
  ASSERT_EQ(c.devices(1).cdi_device_ids_size(), 1);
  EXPECT_EQ(c.devices(0).cdi_device_ids(0), "fracgpu.io/gpu=claim-uid-2-gpu-0");
  EXPECT_EQ(c.devices(1).cdi_device_ids(0), "fracgpu.io/gpu=claim-uid-2-gpu-1");
  // dra/v1beta1 has no share_id: nothing of it crosses that wire.
  EXPECT_FALSE(c.devices(0).has_share_id());
  EXPECT_FALSE(c.devices(1).has_share_id());
  std::string limits = ReadFile(dir_.path() + "/hook/vgpu/limits/claim_uid-2.env");
  EXPECT_NE(limits.find("CUDA_DEVICE_MEMORY_LIMIT_0=4096m\nCUDA_DEVICE_SM_LIMIT_0=0\nCUDA_DEVICE_"
                        "MEMORY_LIMIT_1=5000m\n"
                        "CUDA_DEVICE_SM_LIMIT_1=50\n"),
            std::string::npos)
      << limits;
}

TEST_F(PluginTest, EachRequestGetsOnlyItsOwnDevicesEachOnce) {
  // A claim of two requests, one GPU each: a container naming one request gets that request's
  // CDI device only (the kubelet's matching: fakes::ContainerCdiDevices), one naming the claim
  // (every request) each device once.
  api_.Put("resourceclaims", Claim("pair", "uid-p",
                                   json::array({Result("gpu-0", "4Gi", "30", "a", "small"),
                                                Result("gpu-1", "8Gi", "60", "b", "large")})));
  FakeDraKubelet kubelet(registry_);
  ASSERT_TRUE(kubelet.WaitForDriver(kDriverName, kWait));
  drav1::NodePrepareResourcesResponse resp;
  ASSERT_TRUE(kubelet.Prepare(kDriverName, {ClaimRef("ml", "pair", "uid-p")}, &resp).ok());
  const auto& c = resp.claims().at("uid-p");
  ASSERT_EQ(c.devices_size(), 2) << c.error();
  const std::string id0 = "fracgpu.io/gpu=claim-uid-p-gpu-0";
  const std::string id1 = "fracgpu.io/gpu=claim-uid-p-gpu-1";
  EXPECT_EQ(fakes::ContainerCdiDevices(c, "small"), std::vector<std::string>{id0});
  EXPECT_EQ(fakes::ContainerCdiDevices(c, "large"), std::vector<std::string>{id1});
  EXPECT_EQ(fakes::ContainerCdiDevices(c, ""), (std::vector<std::string>{id0, id1}));
  // The spec names both devices; each mounts its own GPU's limits file.
  json spec = json::parse(ReadFile(CdiFile("uid-p")));
  ASSERT_EQ(spec["devices"].size(), 2u);
  EXPECT_EQ(spec["devices"][0]["name"], "claim-uid-p-gpu-0");
  EXPECT_EQ(spec["devices"][1]["name"], "claim-uid-p-gpu-1");
}

TEST_F(PluginTest, SpecOfAnOlderDriverIsRewrittenOnTheNextPrepare) {
  // A claim prepared by a driver that wrote one CDI device per claim: after the upgrade the
  // kubelet's next prepare answers the per-device IDs, so the spec must name them; the region
  // of the containers already running stays.
  api_.Put("resourceclaims",
           Claim("old", "uid-o", json::array({Result("gpu-1", "2000Mi", "20", "s")})));
  FakeDraKubelet kubelet(registry_);
  ASSERT_TRUE(kubelet.WaitForDriver(kDriverName, kWait));
  drav1::NodePrepareResourcesResponse first, again;
  ASSERT_TRUE(kubelet.Prepare(kDriverName, {ClaimRef("ml", "old", "uid-o")}, &first).ok());
  const std::string fresh = ReadFile(CdiFile("uid-o"));
  const std::string marker = dir_.path() + "/hook/vgpu/containers/claim_uid-o/region.cache";
  std::ofstream(marker) << "in use";
  std::ofstream(CdiFile("uid-o"), std::ios::trunc)
      << R"({"cdiVersion":"0.4.0","kind":"fracgpu.io/gpu","devices":[{"name":"claim-uid-o"}]})";
  ASSERT_TRUE(kubelet.Prepare(kDriverName, {ClaimRef("ml", "old", "uid-o")}, &again).ok());
  EXPECT_EQ(again.SerializeAsString(), first.SerializeAsString());
  EXPECT_EQ(ReadFile(CdiFile("uid-o")), fresh);
  EXPECT_EQ(ReadFile(marker), "in use");
}

TEST_F(PluginTest, KubeletThatSpeaksNoOfferedServiceRejectsTheRegistration) {
  FakeDraKubelet kubelet(registry_, {"v1alpha4.DRAPlugin"});
  EXPECT_EQ(kubelet.Discover(), 0);
  ASSERT_EQ(kubelet.rejections().size(), 1u);
  EXPECT_FALSE(plugin_->registered());
  EXPECT_EQ(plugin_->registration_error(),
            "none of the plugin's services is supported by this kubelet");
}

TEST_F(PluginTest, KubeletRestartRegistersAgainAndPreparedClaimsStay) {
  api_.Put("resourceclaims",
           Claim("one", "uid-1", json::array({Result("gpu-0", "3000Mi", "30", "s-1")})));
  FakeDraKubelet kubelet(registry_);
  ASSERT_TRUE(kubelet.WaitForDriver(kDriverName, kWait));
  drav1::NodePrepareResourcesResponse resp;
  ASSERT_TRUE(kubelet.Prepare(kDriverName, {ClaimRef("ml", "one", "uid-1")}, &resp).ok());
  kubelet.Restart();
  EXPECT_TRUE(kubelet.registrations().empty());
  drav1::NodePrepareResourcesResponse none;
  EXPECT_FALSE(kubelet.Prepare(kDriverName, {ClaimRef("ml", "one", "uid-1")}, &none).ok());
  ASSERT_TRUE(kubelet.WaitForDriver(kDriverName, kWait));
  EXPECT_EQ(plugin_->registration_notifications(), 2);
  // A restarted kubelet prepares its pods' claims again: the same answer.
  drav1::NodePrepareResourcesResponse again;
  ASSERT_TRUE(kubelet.Prepare(kDriverName, {ClaimRef("ml", "one", "uid-1")}, &again).ok());
  EXPECT_EQ(again.SerializeAsString(), resp.SerializeAsString());
}

TEST_F(PluginTest, PluginRestartKeepsPreparedClaimsFromTheCheckpoint) {
  api_.Put("resourceclaims",
           Claim("one", "uid-1", json::array({Result("gpu-1", "3000Mi", "30", "s-1")})));
  FakeDraKubelet kubelet(registry_);
  ASSERT_TRUE(kubelet.WaitForDriver(kDriverName, kWait));
  drav1::NodePrepareResourcesResponse resp;
  ASSERT_TRUE(kubelet.Prepare(kDriverName, {ClaimRef("ml", "one", "uid-1")}, &resp).ok());
  StopPlugin();
  EXPECT_FALSE(fs::exists(registry_ + "/gpu.fracgpu.io-reg.sock"));
  EXPECT_EQ(kubelet.Discover(), 0);  // socket gone: unregistered
  // The claim disappears from the API server: a restarted plugin must answer from its checkpoint.
  ASSERT_TRUE(api_.Remove("resourceclaims", "ml", "one"));
  StartPlugin();
  ASSERT_EQ(driver_->Prepared().count("uid-1"), 1u);
  ASSERT_TRUE(kubelet.WaitForDriver(kDriverName, kWait));
  drav1::NodePrepareResourcesResponse again;
  ASSERT_TRUE(kubelet.Prepare(kDriverName, {ClaimRef("ml", "one", "uid-1")}, &again).ok());
  EXPECT_EQ(again.SerializeAsString(), resp.SerializeAsString());
  drav1::NodeUnprepareResourcesResponse un;
  ASSERT_TRUE(kubelet.Unprepare(kDriverName, {ClaimRef("ml", "one", "uid-1")}, &un).ok());
  EXPECT_EQ(un.claims().at("uid-1").error(), "");
  EXPECT_FALSE(fs::exists(CdiFile("uid-1")));
  StopPlugin();
  StartPlugin();
  EXPECT_TRUE(driver_->Prepared().empty());
}

TEST_F(PluginTest, BadClaimsGetTheirOwnErrorAndLeaveNothing) {
  api_.Put("resourceclaims",
           Claim("good", "uid-g", json::array({Result("gpu-0", "1Gi", "10", "g")})));
  api_.Put("resourceclaims",
           Claim("ghost", "uid-x", json::array({Result("gpu-9", "1Gi", "10", "x")})));
  api_.Put("resourceclaims",
           Claim("broken", "uid-b", json::array({Result("gpu-0", "1.5", "10", "b")})));
  FakeDraKubelet kubelet(registry_);
  ASSERT_TRUE(kubelet.WaitForDriver(kDriverName, kWait));
  drav1::NodePrepareResourcesResponse resp;
  ASSERT_TRUE(kubelet
                  .Prepare(kDriverName,
                           {ClaimRef("ml", "good", "uid-g"), ClaimRef("ml", "ghost", "uid-x"),
                            ClaimRef("ml", "broken", "uid-b"), ClaimRef("ml", "good", "uid-other"),
                            ClaimRef("ml", "missing", "uid-m")},
                           &resp)
                  .ok());
  ASSERT_EQ(resp.claims_size(), 5);
  EXPECT_EQ(resp.claims().at("uid-g").error(), "");
  EXPECT_NE(resp.claims().at("uid-x").error().find("\"gpu-9\" is not a device of pool node-a"),
            std::string::npos);
  EXPECT_NE(resp.claims().at("uid-b").error().find("consumedCapacity.memory \"1.5\""),
            std::string::npos);
  EXPECT_NE(resp.claims().at("uid-other").error().find("claim was recreated"), std::string::npos);
  EXPECT_NE(resp.claims().at("uid-m").error().find("NOT_FOUND"), std::string::npos);
  for (const char* uid : {"uid-x", "uid-b", "uid-other", "uid-m"}) {
    EXPECT_FALSE(fs::exists(CdiFile(uid))) << uid;
    EXPECT_FALSE(fs::exists(dir_.path() + "/hook/vgpu/limits/claim_" + std::string(uid) + ".env"))
        << uid;
    EXPECT_FALSE(fs::exists(dir_.path() + "/hook/vgpu/containers/claim_" + std::string(uid)))
        << uid;
  }
  EXPECT_EQ(driver_->Prepared().size(), 1u);
}

TEST_F(PluginTest, SharedClaimSharesOneLimit) {
  // Two pods reference one claim: kubelet prepares it for each; both get the same CDI device,
  // so the same region directory and limits file — one 6000 MiB limit for both.
  api_.Put("resourceclaims",
           Claim("shared", "uid-s", json::array({Result("gpu-0", "6000Mi", "20", "s")})));
  FakeDraKubelet kubelet(registry_);
  ASSERT_TRUE(kubelet.WaitForDriver(kDriverName, kWait));
  drav1::NodePrepareResourcesResponse a, b;
  ASSERT_TRUE(kubelet.Prepare(kDriverName, {ClaimRef("ml", "shared", "uid-s")}, &a).ok());
  ASSERT_TRUE(kubelet.Prepare(kDriverName, {ClaimRef("ml", "shared", "uid-s")}, &b).ok());
  EXPECT_EQ(a.claims().at("uid-s").devices(0).cdi_device_ids(0),
            b.claims().at("uid-s").devices(0).cdi_device_ids(0));
  size_t limits = 0;
  for (const auto& e : fs::directory_iterator(dir_.path() + "/hook/vgpu/limits"))
    limits += e.path().filename() == "claim_uid-s.env";
  EXPECT_EQ(limits, 1u);
}

}  // namespace
}  // namespace fracgpu::dra
