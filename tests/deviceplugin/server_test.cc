// The device plugin against the fake kubelet over real gRPC on Unix sockets: registration,
// re-registration after a kubelet restart, ListAndWatch, health updates, Allocate.
#include "deviceplugin/server.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "fake_cluster.h"
#include "fake_kubelet.h"
#include "test_support.h"

namespace fracgpu::deviceplugin {
namespace {

using namespace testing;  // NOLINT
namespace fs = std::filesystem;
constexpr auto kWait = std::chrono::seconds(20);

std::set<std::string> Ids(const std::vector<v1beta1::Device>& devices,
                          const std::string& health = "") {
  std::set<std::string> out;
  for (const auto& d : devices) {
    if (health.empty() || d.health() == health) out.insert(d.id());
  }
  return out;
}

class ServerTest : public ::testing::Test {
 protected:
  ServerTest() : kubelet_(dir_.path()), state_(TwoGpus(), Config()) {
    fs::create_directories(dir_.path() + "/hook/vgpu");
    std::ofstream(dir_.path() + "/hook/vgpu/libvgpu.so") << "ELF";
    AllocatorOptions a;
    a.node_name = kNode;
    a.hook_path = dir_.path() + "/hook";
    a.verify_signature = [](const std::string& uid, const std::string& node,
                            const std::string& alloc, const std::string& sig) {
      return sig == Sign(uid, node, alloc) ? Status::Ok() : PermissionDenied("HMAC mismatch");
    };
    allocator_ =
        std::make_unique<Allocator>(a, &cluster_, &clock_, [this] { return state_.Devices(); });
    EXPECT_TRUE(allocator_->PrepareHostFiles().ok());
  }
  ~ServerTest() override { StopPlugin(); }

  static node::DeviceConfig Config() {
    node::DeviceConfig c;
    c.split_count = 4;
    return c;
  }

  void StartPlugin(ServerOptions o = {}) {
    o.socket_dir = dir_.path();
    o.socket_name = "fracgpu.sock";
    o.register_timeout = std::chrono::milliseconds(2000);
    o.retry_interval = std::chrono::milliseconds(50);
    server_ = std::make_unique<PluginServer>(o, &state_, allocator_.get());
    runner_ = std::thread([this] { run_status_ = server_->Run(&stop_); });
  }
  void StopPlugin() {
    stop_.Stop();
    if (runner_.joinable()) runner_.join();
    if (server_) server_->Stop();
  }

  TempDir dir_;
  fakes::FakeKubelet kubelet_;
  FakeCluster cluster_;
  base::ManualClock clock_;
  node::DeviceState state_;
  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<PluginServer> server_;
  base::StopSignal stop_;
  std::thread runner_;
  Status run_status_;
};

TEST_F(ServerTest, RegistersAndListsEachGpuAsSplitCountReplicas) {
  ASSERT_TRUE(kubelet_.Start());
  StartPlugin();
  ASSERT_TRUE(kubelet_.WaitForRegistrations(1, kWait));
  auto reg = kubelet_.registrations().at(0);
  EXPECT_EQ(reg.endpoint, "fracgpu.sock");
  EXPECT_EQ(reg.resource_name, "nvidia.com/gpu");
  EXPECT_TRUE(reg.options.get_preferred_allocation_available());
  EXPECT_FALSE(reg.options.pre_start_required());
  std::set<std::string> want;
  for (const char* u : {kUuidA, kUuidB}) {
    for (int i = 0; i < 4; ++i) want.insert(std::string(u) + "-" + std::to_string(i));
  }
  ASSERT_TRUE(
      kubelet_.WaitForDevices([&](const auto& d) { return Ids(d, "Healthy") == want; }, kWait));
  EXPECT_EQ(kubelet_.devices().size(), 8u);
  EXPECT_FALSE(kubelet_.devices()[0].has_topology());
  EXPECT_TRUE(kubelet_.PreStartContainer({std::string(kUuidA) + "-0"}).ok());
}

TEST_F(ServerTest, ReportsNumaNodesWhenEnabled) {
  ASSERT_TRUE(kubelet_.Start());
  ServerOptions o;
  o.numa_topology = true;
  StartPlugin(o);
  ASSERT_TRUE(kubelet_.WaitForDevices([](const auto& d) { return d.size() == 8; }, kWait));
  for (const auto& d : kubelet_.devices()) {
    ASSERT_EQ(d.topology().nodes_size(), 1);
    EXPECT_EQ(d.topology().nodes(0).id(), d.id().rfind(kUuidB, 0) == 0 ? 1 : 0) << d.id();
  }
}

TEST_F(ServerTest, ReRegistersAfterKubeletRestart) {
  ASSERT_TRUE(kubelet_.Start());
  StartPlugin();
  ASSERT_TRUE(kubelet_.WaitForRegistrations(1, kWait));
  ASSERT_TRUE(kubelet_.Restart());  // deletes our socket, recreates kubelet.sock
  ASSERT_TRUE(kubelet_.WaitForRegistrations(2, kWait));
  ASSERT_TRUE(kubelet_.WaitForDevices([](const auto& d) { return d.size() == 8; }, kWait));
  // The new server answers calls.
  cluster_.PutNode(MakeNode("ml", "train"));
  cluster_.PutPod(
      MakePod("train", {{"main", false, 1}}, std::string(kUuidA) + ",NVIDIA,3000,30:;"));
  v1beta1::AllocateResponse response;
  grpc::Status st;
  // A third registration may still be under way (kubelet.sock appeared after our socket went):
  // retry through the fake's current stub until the call lands.
  for (int i = 0; i < 50; ++i) {
    st = kubelet_.Allocate({{std::string(kUuidA) + "-1"}}, &response);
    if (st.error_code() != grpc::StatusCode::UNAVAILABLE &&
        st.error_code() != grpc::StatusCode::CANCELLED)
      break;
    kubelet_.WaitForRegistrations(kubelet_.registrations().size() + 1,
                                  std::chrono::milliseconds(200));
  }
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(response.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), kUuidA);
}

TEST_F(ServerTest, RegistersOnceKubeletComesUp) {
  StartPlugin();  // no kubelet yet: registration fails and is retried
  ASSERT_TRUE(kubelet_.Start());
  ASSERT_TRUE(kubelet_.WaitForRegistrations(1, kWait));
  ASSERT_TRUE(kubelet_.WaitForDevices([](const auto& d) { return d.size() == 8; }, kWait));
}

TEST_F(ServerTest, UnhealthyGpuIsResentToKubelet) {
  ASSERT_TRUE(kubelet_.Start());
  StartPlugin();
  ASSERT_TRUE(
      kubelet_.WaitForDevices([](const auto& d) { return Ids(d, "Healthy").size() == 8; }, kWait));
  int before = kubelet_.lists_received();
  ASSERT_TRUE(state_.MarkUnhealthy(kUuidB));
  std::set<std::string> sick;
  for (int i = 0; i < 4; ++i) sick.insert(std::string(kUuidB) + "-" + std::to_string(i));
  ASSERT_TRUE(kubelet_.WaitForDevices(
      [&](const auto& d) { return Ids(d, "Unhealthy") == sick && Ids(d, "Healthy").size() == 4; },
      kWait));
  EXPECT_EQ(kubelet_.lists_received(), before + 1);
}

TEST_F(ServerTest, AllocateAndPreferredAllocationOverGrpc) {
  ASSERT_TRUE(kubelet_.Start());
  StartPlugin();
  ASSERT_TRUE(kubelet_.WaitForRegistrations(1, kWait));
  cluster_.PutNode(MakeNode("ml", "train"));
  cluster_.PutPod(
      MakePod("train", {{"main", false, 1}}, std::string(kUuidB) + ",NVIDIA,3000,30:;"));

  v1beta1::PreferredAllocationRequest preq;
  auto* c = preq.add_container_requests();
  for (const char* id : {"-0", "-1"}) {
    c->add_available_deviceids(std::string(kUuidA) + id);
    c->add_available_deviceids(std::string(kUuidB) + id);
  }
  c->set_allocation_size(1);
  v1beta1::PreferredAllocationResponse presp;
  ASSERT_TRUE(kubelet_.GetPreferredAllocation(preq, &presp).ok());
  ASSERT_EQ(presp.container_responses_size(), 1);
  ASSERT_EQ(presp.container_responses(0).deviceids_size(), 1);
  EXPECT_EQ(presp.container_responses(0).deviceids(0), std::string(kUuidB) + "-0");

  v1beta1::AllocateResponse response;
  grpc::Status st = kubelet_.Allocate({{std::string(kUuidB) + "-0"}}, &response);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(response.container_responses_size(), 1);
  const auto& r = response.container_responses(0);
  EXPECT_EQ(r.envs().at("CUDA_DEVICE_MEMORY_LIMIT_0"), "3000m");
  EXPECT_EQ(r.envs().at("CUDA_DEVICE_SM_LIMIT"), "30");
  ASSERT_EQ(r.mounts_size(), 5);
  EXPECT_EQ(r.mounts(1).container_path(), "/etc/ld.so.preload");
  EXPECT_TRUE(r.mounts(1).read_only());
  EXPECT_FALSE(r.mounts(2).read_only());

  // Nothing left to bind: kubelet sees the error message.
  st = kubelet_.Allocate({{std::string(kUuidB) + "-1"}}, &response);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(st.error_message(), "no pod being bound on node node-a");
}

// CDI over the wire (issue 34 item 2): the response's cdi_devices and annotations fields carry
// what the allocator names (device plugin API v1beta1 ContainerAllocateResponse fields 4 and 5).
TEST_F(ServerTest, AllocateCarriesCdiDevicesAndAnnotations) {
  AllocatorOptions a = allocator_->options();
  auto strategy = ParseDeviceListStrategy("cdi-cri,cdi-annotations", "nvidia.com/gpu", "uuid");
  ASSERT_TRUE(strategy.ok());
  a.device_list = *strategy;
  allocator_ =
      std::make_unique<Allocator>(a, &cluster_, &clock_, [this] { return state_.Devices(); });
  ASSERT_TRUE(kubelet_.Start());
  StartPlugin();
  ASSERT_TRUE(kubelet_.WaitForRegistrations(1, kWait));
  cluster_.PutNode(MakeNode("ml", "train"));
  cluster_.PutPod(
      MakePod("train", {{"main", false, 1}}, std::string(kUuidB) + ",NVIDIA,3000,30:;"));
  v1beta1::AllocateResponse response;
  grpc::Status st = kubelet_.Allocate({{std::string(kUuidB) + "-0"}}, &response);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(response.container_responses_size(), 1);
  const auto& r = response.container_responses(0);
  const std::string name = std::string("nvidia.com/gpu=") + kUuidB;
  ASSERT_EQ(r.cdi_devices_size(), 1);
  EXPECT_EQ(r.cdi_devices(0).name(), name);
  ASSERT_EQ(r.annotations_size(), 1);
  EXPECT_EQ(r.annotations().at("cdi.k8s.io/fracgpu-device-plugin_uid-train-0"), name);
  EXPECT_EQ(r.envs().at("NVIDIA_VISIBLE_DEVICES"), "void");
}

TEST_F(ServerTest, StopEndsStreamsAndRemovesTheSocket) {
  ASSERT_TRUE(kubelet_.Start());
  StartPlugin();
  ASSERT_TRUE(kubelet_.WaitForRegistrations(1, kWait));
  EXPECT_TRUE(fs::exists(dir_.path() + "/fracgpu.sock"));
  StopPlugin();
  EXPECT_TRUE(run_status_.ok());
  EXPECT_FALSE(fs::exists(dir_.path() + "/fracgpu.sock"));
}

}  // namespace
}  // namespace fracgpu::deviceplugin
