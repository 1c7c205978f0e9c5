// Allocate per docs/design/CONTRACT.md §2–3 against an in-memory API server: what a container gets,
// how the pod and the node lock move, and what is refused.
#include "deviceplugin/allocator.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "../support/files.h"
#include "fake_cluster.h"
#include "node/device_state.h"
#include "test_support.h"

namespace fracgpu::deviceplugin {
namespace {

using namespace testing;  // NOLINT
namespace fs = std::filesystem;
using Env = std::map<std::string, std::string>;

class AllocatorTest : public ::testing::Test {
 protected:
  AllocatorTest() : state_(TwoGpus(), node::DeviceConfig{}) {
    hook_ = dir_.path() + "/hook";
    fs::create_directories(hook_ + "/vgpu");
    std::ofstream(hook_ + "/vgpu/libvgpu.so") << "ELF";
  }

  Allocator& Make(AllocatorOptions o = {}) {
    o.node_name = kNode;
    o.hook_path = hook_;
    if (!o.verify_signature) {
      o.verify_signature = [](const std::string& uid, const std::string& node,
                              const std::string& allocated, const std::string& sig) {
        return sig == Sign(uid, node, allocated) ? Status::Ok() : PermissionDenied("HMAC mismatch");
      };
    }
    allocator_ =
        std::make_unique<Allocator>(o, &cluster_, &clock_, [this] { return state_.Devices(); });
    EXPECT_TRUE(allocator_->PrepareHostFiles().ok());
    return *allocator_;
  }

  std::string Annotation(const json& obj, const std::string& key) {
    const auto& a = obj["metadata"]["annotations"];
    return a.contains(key) ? a[key].get<std::string>() : "<absent>";
  }
  std::string PodAnnotation(const std::string& name, const std::string& key) {
    return Annotation(cluster_.Pod("ml", name), key);
  }
  std::string Lock() { return Annotation(cluster_.Node(kNode), "hami.io/mutex.lock"); }

  TempDir dir_;
  std::string hook_;
  FakeCluster cluster_;
  base::ManualClock clock_;
  node::DeviceState state_;
  std::unique_ptr<Allocator> allocator_;
};

const std::string kOneA = std::string(kUuidA) + ",NVIDIA,3000,30:;";

TEST_F(AllocatorTest, OneContainerGetsEnvMountsAndLimitsFileExactly) {
  cluster_.PutNode(MakeNode("ml", "train"));
  cluster_.PutPod(MakePod("train", {{"main", false, 1}}, kOneA));
  auto r = Make().Allocate({{std::string(kUuidA) + "-3"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  const ContainerAllocation& a = (*r)[0];
  EXPECT_EQ(a.container, "main");
  EXPECT_EQ(a.pod, "ml/train");
  const std::string vgpu = hook_ + "/vgpu";
  Env want = {{"NVIDIA_VISIBLE_DEVICES", kUuidA},
              {"CUDA_DEVICE_MEMORY_LIMIT_0", "3000m"},
              {"CUDA_DEVICE_SM_LIMIT_0", "30"},
              {"CUDA_DEVICE_SM_LIMIT", "30"},
              {"CUDA_DEVICE_MEMORY_SHARED_CACHE", vgpu + "/region.cache"},
              {"CUDA_TASK_PRIORITY", "1"},
              {"GPU_CORE_UTILIZATION_POLICY", "default"}};
  EXPECT_EQ(a.envs, want);
  const std::string region = vgpu + "/containers/uid-train_main";
  const std::string limits = vgpu + "/limits/uid-train_main.env";
  std::vector<node::MountSpec> mounts = {{vgpu + "/libvgpu.so", vgpu + "/libvgpu.so", true},
                                         {"/etc/ld.so.preload", vgpu + "/ld.so.preload", true},
                                         {vgpu, region, false},
                                         {"/etc/fracgpu/limits.env", limits, true},
                                         {"/run/fracgpu/node", vgpu + "/node", true}};
  EXPECT_EQ(a.mounts, mounts);
  EXPECT_EQ(test_support::ReadWholeFile(limits),
            std::string("NVIDIA_VISIBLE_DEVICES=") + kUuidA +
                "\nCUDA_DEVICE_MEMORY_LIMIT_0=3000m\nCUDA_DEVICE_SM_LIMIT_0=30\n"
                "CUDA_DEVICE_MEMORY_SHARED_CACHE=" +
                vgpu +
                "/region.cache\n"
                "GPU_CORE_UTILIZATION_POLICY=default\nCUDA_TASK_PRIORITY=1\n");
  struct stat st {};
  ASSERT_EQ(stat(limits.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
  ASSERT_EQ(stat(region.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0777u);
  EXPECT_TRUE(fs::is_empty(region));
  // The node directory (priority between containers, docs/sm-limiter.md): written by the node
  // agent only, readable by all (issue 32 item 2).
  ASSERT_EQ(stat((vgpu + "/node").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  EXPECT_EQ(test_support::ReadWholeFile(vgpu + "/ld.so.preload"), vgpu + "/libvgpu.so\n");
  // The served entry is blanked, the pod succeeded and the lock is released.
  EXPECT_EQ(PodAnnotation("train", "hami.io/vgpu-devices-to-allocate"), ";");
  EXPECT_EQ(PodAnnotation("train", "hami.io/vgpu-devices-allocated"), kOneA);
  EXPECT_EQ(PodAnnotation("train", "hami.io/bind-phase"), "success");
  EXPECT_EQ(Lock(), "<absent>");
}

// CDI device injection (issue 34 item 2), as NVIDIA's --device-list-strategy: cdi-cri names each
// granted GPU in cdi_devices (allocation order), cdi-annotations in one cdi.k8s.io/ annotation;
// without envvar the environment says "void" while the limits file keeps the GPUs.
TEST_F(AllocatorTest, CdiStrategiesNameTheGrantedGpusInOrder) {
  const std::string alloc = std::string(kUuidB) + ",NVIDIA,4000,25:" + kUuidA + ",NVIDIA,5000,40:;";
  const std::string cdi_b = std::string("nvidia.com/gpu=") + kUuidB;
  const std::string cdi_a = std::string("nvidia.com/gpu=") + kUuidA;
  int n = 0;
  struct Case {
    const char* strategy;
    std::vector<std::string> cri;
    std::map<std::string, std::string> annotations;
    std::string env;
  };
  const std::string both = std::string(kUuidB) + "," + kUuidA;
  for (const Case& c : std::vector<Case>{
           {"envvar", {}, {}, both},
           {"cdi-cri", {cdi_b, cdi_a}, {}, "void"},
           {"cdi-annotations",
            {},
            {{"cdi.k8s.io/fracgpu-device-plugin_uid-pair2-0", cdi_b + "," + cdi_a}},
            "void"},
           {"envvar,cdi-cri,cdi-annotations",
            {cdi_b, cdi_a},
            {{"cdi.k8s.io/fracgpu-device-plugin_uid-pair3-0", cdi_b + "," + cdi_a}},
            both},
       }) {
    SCOPED_TRACE(c.strategy);
    const std::string pod = "pair" + std::to_string(n++);
    cluster_.PutNode(MakeNode("ml", pod));
    cluster_.PutPod(MakePod(pod, {{"main", false, 2}}, alloc));
    AllocatorOptions o;
    auto strategy = ParseDeviceListStrategy(c.strategy, "nvidia.com/gpu", "uuid");
    ASSERT_TRUE(strategy.ok()) << strategy.status().ToString();
    o.device_list = *strategy;
    auto r = Make(o).Allocate({{std::string(kUuidA) + "-0", std::string(kUuidB) + "-0"}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ((*r)[0].cdi_devices, c.cri);
    EXPECT_EQ((*r)[0].annotations, c.annotations);
    EXPECT_EQ((*r)[0].envs.at("NVIDIA_VISIBLE_DEVICES"), c.env);
    const std::string limits = hook_ + "/vgpu/limits/uid-" + pod + "_main.env";
    EXPECT_NE(test_support::ReadWholeFile(limits).find("NVIDIA_VISIBLE_DEVICES=" + both + "\n"),
              std::string::npos);
  }
}

TEST_F(AllocatorTest, CdiIndexNamesAndOtherKinds) {
  cluster_.PutNode(MakeNode("ml", "train"));
  cluster_.PutPod(
      MakePod("train", {{"main", false, 1}}, std::string(kUuidB) + ",NVIDIA,3000,30:;"));
  AllocatorOptions o;
  auto strategy = ParseDeviceListStrategy("cdi-cri", "k8s.device-plugin.nvidia.com/gpu", "index");
  ASSERT_TRUE(strategy.ok()) << strategy.status().ToString();
  o.device_list = *strategy;
  auto r = Make(o).Allocate({{std::string(kUuidB) + "-0"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].cdi_devices, std::vector<std::string>{"k8s.device-plugin.nvidia.com/gpu=1"});
}

TEST(DeviceListStrategyTest, FlagsAreCheckedAndNamed) {
  auto def = ParseDeviceListStrategy("envvar", "nvidia.com/gpu", "uuid");
  ASSERT_TRUE(def.ok());
  EXPECT_TRUE(def->envvar);
  EXPECT_FALSE(def->Cdi());
  struct Bad {
    const char* strategy;
    const char* kind;
    const char* name;
    const char* flag;
  };
  for (const Bad& b :
       std::vector<Bad>{{"", "nvidia.com/gpu", "uuid", "--device-list-strategy"},
                        {"cdi", "nvidia.com/gpu", "uuid", "--device-list-strategy"},
                        {"envvar,envvar", "nvidia.com/gpu", "uuid", "--device-list-strategy"},
                        {"cdi-cri,", "nvidia.com/gpu", "uuid", "--device-list-strategy"},
                        {"cdi-cri", "nvidia.com", "uuid", "--cdi-kind"},
                        {"cdi-cri", "/gpu", "uuid", "--cdi-kind"},
                        {"cdi-cri", "nvidia.com/gpu=x", "uuid", "--cdi-kind"},
                        {"cdi-cri", "1nvidia.com/gpu", "uuid", "--cdi-kind"},
                        {"cdi-cri", "nvidia.com/gpu-", "uuid", "--cdi-kind"},
                        {"cdi-cri", "nvidia.com/gpu", "name", "--cdi-device-name-strategy"}}) {
    auto r = ParseDeviceListStrategy(b.strategy, b.kind, b.name);
    ASSERT_FALSE(r.ok()) << b.strategy << " " << b.kind << " " << b.name;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(b.flag), std::string::npos) << r.status().message();
  }
}

TEST_F(AllocatorTest, SeveralContainersAreServedInOrderAndTheLockHeldUntilTheLast) {
  std::string alloc = std::string(kUuidA) + ",NVIDIA,1000,10:;" + kUuidB + ",NVIDIA,2000,20:;";
  cluster_.PutNode(MakeNode("ml", "multi"));
  cluster_.PutPod(MakePod("multi", {{"a", false, 1}, {"b", false, 1}}, alloc));
  Allocator& al = Make();
  auto first = al.Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ((*first)[0].container, "a");
  EXPECT_EQ((*first)[0].envs.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "1000m");
  EXPECT_EQ(PodAnnotation("multi", "hami.io/vgpu-devices-to-allocate"),
            std::string(";") + kUuidB + ",NVIDIA,2000,20:;");
  EXPECT_EQ(PodAnnotation("multi", "hami.io/bind-phase"), "allocating");
  EXPECT_EQ(Lock(), "2024-05-01T10:00:00Z,ml,multi");
  auto second = al.Allocate({{std::string(kUuidB) + "-0"}});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ((*second)[0].container, "b");
  EXPECT_EQ((*second)[0].envs.at("NVIDIA_VISIBLE_DEVICES"), kUuidB);
  EXPECT_EQ((*second)[0].envs.at("CUDA_DEVICE_SM_LIMIT"), "20");
  EXPECT_EQ(PodAnnotation("multi", "hami.io/vgpu-devices-to-allocate"), ";;");
  EXPECT_EQ(PodAnnotation("multi", "hami.io/bind-phase"), "success");
  EXPECT_EQ(Lock(), "<absent>");
}

TEST_F(AllocatorTest, OneCallWithTwoContainerRequestsServesBoth) {
  std::string alloc = std::string(kUuidA) + ",NVIDIA,1000,10:;" + kUuidB + ",NVIDIA,2000,20:;";
  cluster_.PutNode(MakeNode("ml", "multi"));
  cluster_.PutPod(MakePod("multi", {{"a", false, 1}, {"b", false, 1}}, alloc));
  auto r = Make().Allocate({{std::string(kUuidA) + "-0"}, {std::string(kUuidB) + "-1"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].container, "a");
  EXPECT_EQ((*r)[1].container, "b");
  EXPECT_EQ(PodAnnotation("multi", "hami.io/bind-phase"), "success");
  EXPECT_EQ(cluster_.pod_patches(), 1);  // one write for the whole call
}

TEST_F(AllocatorTest, InitContainersFirstAndContainersWithoutGpuSkipped) {
  // init "setup" (GPU), app "sidecar" (no GPU), app "main" (GPU).
  std::string alloc = std::string(kUuidA) + ",NVIDIA,1000,0:;;" + kUuidA + ",NVIDIA,2000,50:;";
  cluster_.PutNode(MakeNode("ml", "mixed"));
  cluster_.PutPod(MakePod(
      "mixed", {{"setup", true, 1}, {"sidecar", false, 0}, {"main", false, 1, {}, "0"}}, alloc));
  Allocator& al = Make();
  auto init = al.Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_TRUE(init.ok()) << init.status().ToString();
  EXPECT_EQ((*init)[0].container, "setup");
  EXPECT_EQ((*init)[0].envs.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "1000m");
  EXPECT_EQ((*init)[0].envs.at("CUDA_DEVICE_SM_LIMIT"), "0");
  EXPECT_EQ(PodAnnotation("mixed", "hami.io/vgpu-devices-to-allocate"),
            std::string(";;") + kUuidA + ",NVIDIA,2000,50:;");
  auto app = al.Allocate({{std::string(kUuidA) + "-1"}});
  ASSERT_TRUE(app.ok()) << app.status().ToString();
  EXPECT_EQ((*app)[0].container, "main");
  EXPECT_EQ((*app)[0].envs.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "2000m");
  EXPECT_EQ((*app)[0].envs.at("CUDA_TASK_PRIORITY"), "0");
  EXPECT_EQ(PodAnnotation("mixed", "hami.io/vgpu-devices-to-allocate"), ";;;");
  EXPECT_EQ(PodAnnotation("mixed", "hami.io/bind-phase"), "success");
}

TEST_F(AllocatorTest, TwoGpusInOneContainer) {
  std::string alloc = std::string(kUuidB) + ",NVIDIA,4000,25:" + kUuidA + ",NVIDIA,5000,40:;";
  cluster_.PutNode(MakeNode("ml", "pair"));
  cluster_.PutPod(MakePod("pair", {{"main", false, 2}}, alloc));
  auto r = Make().Allocate({{std::string(kUuidA) + "-0", std::string(kUuidB) + "-0"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Env& env = (*r)[0].envs;
  EXPECT_EQ(env.at("NVIDIA_VISIBLE_DEVICES"),
            std::string(kUuidB) + "," + kUuidA);  // allocation order
  EXPECT_EQ(env.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "4000m");
  EXPECT_EQ(env.at("CUDA_DEVICE_MEMORY_LIMIT_1"), "5000m");
  EXPECT_EQ(env.at("CUDA_DEVICE_SM_LIMIT_0"), "25");
  EXPECT_EQ(env.at("CUDA_DEVICE_SM_LIMIT_1"), "40");
  EXPECT_EQ(env.at("CUDA_DEVICE_SM_LIMIT"), "25");  // the first GPU's, as HAMi
}

TEST_F(AllocatorTest, DisableControlSkipsThePreloadMountOnly) {
  std::string alloc = std::string(kUuidA) + ",NVIDIA,32768,100:;";
  cluster_.PutNode(MakeNode("ml", "whole"));
  cluster_.PutPod(MakePod("whole", {{"main", false, 1, "TRUE"}}, alloc));
  auto r = Make().Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ((*r)[0].mounts.size(), 4u);
  for (const auto& m : (*r)[0].mounts) EXPECT_NE(m.container_path, "/etc/ld.so.preload");
}

// The node directory is mounted READ-ONLY into every container (issue 32 item 2: no container
// writes state another container reads; only the node agent writes its per-GPU files), the same
// host directory for all of them, and PrepareHostFiles restores its mode 0755 (was 0777).
TEST_F(AllocatorTest, NodeDirectoryMountedReadOnlyIntoEveryContainer) {
  const std::string node = hook_ + "/vgpu/node";
  Allocator& al = Make();
  fs::permissions(node, fs::perms::all);  // drifted to 0777: PrepareHostFiles must restore 0755
  ASSERT_TRUE(al.PrepareHostFiles().ok());
  struct stat st {};
  ASSERT_EQ(stat(node.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  cluster_.PutNode(MakeNode("ml", "pair"));
  cluster_.PutPod(MakePod("pair", {{"a", false, 1}, {"b", false, 1}}, kOneA + kOneA));
  auto r = al.Allocate({{std::string(kUuidA) + "-1"}, {std::string(kUuidA) + "-2"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  for (const auto& a : *r) {
    int found = 0;
    for (const auto& m : a.mounts) {
      if (m.container_path != "/run/fracgpu/node") continue;
      ++found;
      EXPECT_EQ(m.host_path, node);
      EXPECT_TRUE(m.read_only);
    }
    EXPECT_EQ(found, 1) << a.container;
  }
}

// ld.so.preload names the library on one line; PrepareHostFiles keeps a file that already says
// exactly that (same inode, not rewritten) and replaces any other content, longer or shorter.
TEST_F(AllocatorTest, PreloadFileKeptWhenExactAndReplacedOtherwise) {
  const std::string preload = hook_ + "/vgpu/ld.so.preload";
  const std::string want = hook_ + "/vgpu/libvgpu.so\n";
  Allocator& al = Make();
  ASSERT_EQ(test_support::ReadWholeFile(preload), want);
  struct stat before {};
  ASSERT_EQ(stat(preload.c_str(), &before), 0);
  ASSERT_TRUE(al.PrepareHostFiles().ok());
  struct stat after {};
  ASSERT_EQ(stat(preload.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);  // an exact file is left alone
  for (const std::string& stale : {want + "/opt/other.so\n", want.substr(0, want.size() - 1),
                                   std::string(), std::string(1 << 20, 'x')}) {
    std::ofstream(preload, std::ios::trunc) << stale;
    ASSERT_TRUE(al.PrepareHostFiles().ok());
    EXPECT_EQ(test_support::ReadWholeFile(preload), want)
        << "stale content of " << stale.size() << " bytes";
  }
}

TEST_F(AllocatorTest, ConfigAddsOversubscribeLogLevelAndDisablePolicy) {
  AllocatorOptions o;
  o.config.memory_scaling = 1.5;
  o.config.libcuda_log_level = "3";
  o.config.disable_core_limit = true;
  cluster_.PutNode(MakeNode("ml", "train"));
  cluster_.PutPod(MakePod("train", {{"main", false, 1}}, kOneA));
  auto r = Make(o).Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].envs.at("CUDA_OVERSUBSCRIBE"), "true");
  EXPECT_EQ((*r)[0].envs.at("LIBCUDA_LOG_LEVEL"), "3");
  EXPECT_EQ((*r)[0].envs.at("GPU_CORE_UTILIZATION_POLICY"), "disable");
}

// gpuCorePolicy (HAMi devices.nvidia.gpuCorePolicy) wins over the container's value; the
// container's own value is read in either letter case, as HAMi-core reads it.
TEST_F(AllocatorTest, CorePolicyFromConfigAndContainerEnv) {
  cluster_.PutNode(MakeNode("ml", "train"));
  json pod = MakePod("train", {{"main", false, 1}}, kOneA);
  pod["spec"]["containers"][0]["env"] =
      json::array({{{"name", "GPU_CORE_UTILIZATION_POLICY"}, {"value", "DISABLE"}}});
  cluster_.PutPod(pod);
  auto own = Make().Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  EXPECT_EQ((*own)[0].envs.at("GPU_CORE_UTILIZATION_POLICY"), "disable");

  AllocatorOptions o;
  o.config.core_policy = "force";
  cluster_.PutNode(MakeNode("ml", "train"));
  cluster_.PutPod(pod);
  auto forced = Make(o).Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_TRUE(forced.ok()) << forced.status().ToString();
  EXPECT_EQ((*forced)[0].envs.at("GPU_CORE_UTILIZATION_POLICY"), "force");
}

TEST_F(AllocatorTest, PodNotFoundTouchesNothing) {
  cluster_.PutNode(MakeNode());
  auto r = Make().Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "no pod being bound on node node-a");
  EXPECT_EQ(cluster_.pod_patches() + cluster_.node_patches(), 0);
}

TEST_F(AllocatorTest, LockNamingADeletedPodFallsBackToThePendingSignedPod) {
  cluster_.PutNode(MakeNode("ml", "gone"));
  cluster_.PutPod(MakePod("train", {{"main", false, 1}}, kOneA));
  auto r = Make().Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].pod, "ml/train");
  EXPECT_EQ(PodAnnotation("train", "hami.io/bind-phase"), "success");
  EXPECT_EQ(Lock(), "2024-05-01T10:00:00Z,ml,gone");  // not ours to release
}

// Two signed pods being allocated and no node lock naming one (a scheduler's hold broken, or
// an expired lock taken over): kubelet's request does not say which pod it is for, so none is
// served (HAMi serves the first listed, which can give one pod's container the other's limits)
// and neither pod is touched; once kubelet's refusal has failed one, the other is served.
TEST_F(AllocatorTest, TwoPodsBeingAllocatedWithoutALockNamingOneAreNeitherServed) {
  cluster_.PutNode(MakeNode());
  cluster_.PutPod(MakePod("first", {{"main", false, 1}}, kOneA));
  json second = MakePod("second", {{"main", false, 1}}, std::string(kUuidB) + ",NVIDIA,5000,50:;");
  second["metadata"]["annotations"]["hami.io/bind-time"] = "1700000001";
  cluster_.PutPod(second);
  auto r = Make().Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kConflict);
  EXPECT_EQ(r.status().message(),
            "2 pods are being allocated on node node-a (ml/first, ml/second) and no node lock "
            "names one: cannot tell which pod this Allocate is for; none served");
  EXPECT_EQ(cluster_.pod_patches() + cluster_.node_patches(), 0);
  EXPECT_EQ(PodAnnotation("first", "hami.io/bind-phase"), "allocating");
  EXPECT_EQ(PodAnnotation("second", "hami.io/bind-phase"), "allocating");
  // kubelet failed the pod it was admitting (here: second); the other is then the one.
  second["status"]["phase"] = "Failed";
  cluster_.PutPod(second);
  auto served = Make().Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_TRUE(served.ok()) << served.status().ToString();
  EXPECT_EQ((*served)[0].pod, "ml/first");
}

// Only pods this plugin would serve count: a pod being allocated without a valid signature (a
// forged one, older than the signed pod) does not keep the signed pod from being served, and
// is left for the Allocate that finds it alone (then refused and marked failed, as before).
TEST_F(AllocatorTest, AnUnsignedPodBeingAllocatedDoesNotStandInTheWayOfTheSignedOne) {
  cluster_.PutNode(MakeNode());
  json forged = MakePod("forged", {{"main", false, 1}}, kOneA, "");
  forged["metadata"]["annotations"]["hami.io/bind-time"] = "1600000000";
  cluster_.PutPod(forged);
  cluster_.PutPod(MakePod("signed", {{"main", false, 1}}, kOneA));
  auto r = Make().Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].pod, "ml/signed");
  EXPECT_EQ(PodAnnotation("forged", "hami.io/bind-phase"), "allocating");
  auto alone = Make().Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_FALSE(alone.ok());
  EXPECT_EQ(alone.status().code(), StatusCode::kPermissionDenied) << alone.status().ToString();
  EXPECT_EQ(PodAnnotation("forged", "hami.io/bind-phase"), "failed");
}

TEST_F(AllocatorTest, StaleLockOfAFinishedPodIsSkippedAndThatPodLeftAlone) {
  json done = MakePod("done", {{"main", false, 1}}, kOneA);
  done["metadata"]["annotations"]["hami.io/bind-phase"] = "success";
  done["metadata"]["annotations"]["hami.io/vgpu-devices-to-allocate"] = ";";
  cluster_.PutNode(MakeNode("ml", "done"));
  cluster_.PutPod(done);
  auto r = Make().Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(PodAnnotation("done", "hami.io/bind-phase"), "success");
  EXPECT_EQ(cluster_.pod_patches(), 0);
}

TEST_F(AllocatorTest, DeviceCountMismatchFailsThePodAndReleasesTheLock) {
  cluster_.PutNode(MakeNode("ml", "train"));
  cluster_.PutPod(MakePod("train", {{"main", false, 1}}, kOneA));
  auto r = Make().Allocate({{std::string(kUuidA) + "-0", std::string(kUuidB) + "-0"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "pod ml/train container \"main\": device number not matched: kubelet allocates 2 "
            "device(s), the "
            "scheduler granted 1 GPU(s)");
  EXPECT_EQ(PodAnnotation("train", "hami.io/bind-phase"), "failed");
  EXPECT_EQ(PodAnnotation("train", "hami.io/vgpu-devices-to-allocate"), kOneA);  // nothing served
  EXPECT_EQ(Lock(), "<absent>");
}

// The lock is released only where the node's lock named the pod when Allocate read the node:
// under the scheduler's --node-lock=bind-phase there is none, and Allocate reads the node once
// (the lock check) and writes it never, served or failed; with HAMi's lock naming the pod it
// reads it a second time to release it.
TEST_F(AllocatorTest, WithoutALockNamingThePodTheNodeIsReadOnceAndNeverWritten) {
  cluster_.PutNode(MakeNode());
  cluster_.PutPod(MakePod("train", {{"main", false, 1}}, kOneA));
  auto r = Make().Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(PodAnnotation("train", "hami.io/bind-phase"), "success");
  EXPECT_EQ(cluster_.node_reads(), 1);
  EXPECT_EQ(cluster_.node_patches(), 0);
  // A failed one: marked failed, the node still read once.
  cluster_.PutPod(MakePod("bad", {{"main", false, 1}}, kOneA));
  auto failed = Make().Allocate({{std::string(kUuidA) + "-0", std::string(kUuidB) + "-0"}});
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(PodAnnotation("bad", "hami.io/bind-phase"), "failed");
  EXPECT_EQ(cluster_.node_reads(), 2);
  EXPECT_EQ(cluster_.node_patches(), 0);
  // A lock naming another pod (stale, its pod gone) is not this pod's: left, not re-read.
  cluster_.PutNode(MakeNode("ml", "gone"));
  cluster_.PutPod(MakePod("next", {{"main", false, 1}}, kOneA));
  ASSERT_TRUE(Make().Allocate({{std::string(kUuidA) + "-0"}}).ok());
  EXPECT_EQ(cluster_.node_reads(), 3);
  EXPECT_EQ(Lock(), "2024-05-01T10:00:00Z,ml,gone");
  // HAMi's lock naming the pod: read again and released.
  cluster_.PutNode(MakeNode("ml", "locked"));
  cluster_.PutPod(MakePod("locked", {{"main", false, 1}}, kOneA));
  ASSERT_TRUE(Make().Allocate({{std::string(kUuidA) + "-0"}}).ok());
  EXPECT_EQ(cluster_.node_reads(), 5);
  EXPECT_EQ(cluster_.node_patches(), 1);
  EXPECT_EQ(Lock(), "<absent>");
}

TEST_F(AllocatorTest, UnhealthyGpuIsNotHandedOut) {
  cluster_.PutNode(MakeNode("ml", "train"));
  cluster_.PutPod(MakePod("train", {{"main", false, 1}}, kOneA));
  ASSERT_TRUE(state_.MarkUnhealthy(kUuidA));
  auto r = Make().Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find(std::string("granted GPU ") + kUuidA + " is unhealthy"),
            std::string::npos);
  EXPECT_EQ(PodAnnotation("train", "hami.io/bind-phase"), "failed");
  EXPECT_EQ(Lock(), "<absent>");
}

TEST_F(AllocatorTest, MissingLibvgpuRefusesToStartWithoutIsolation) {
  fs::remove(hook_ + "/vgpu/libvgpu.so");
  cluster_.PutNode(MakeNode("ml", "train"));
  cluster_.PutPod(MakePod("train", {{"main", false, 1}}, kOneA));
  auto r = Make().Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_EQ(PodAnnotation("train", "hami.io/bind-phase"), "failed");
}

struct ForgeryCase {
  const char* name;
  std::function<void(json&)> tamper;
  bool named_by_lock;
  bool allow_unsigned;
  StatusCode code;
  const char* message_part;
  friend void PrintTo(const ForgeryCase& c, std::ostream* os) { *os << c.name; }
};

class ForgedPodTest : public AllocatorTest, public ::testing::WithParamInterface<ForgeryCase> {};

TEST_P(ForgedPodTest, IsRefusedAndGetsNothing) {
  const ForgeryCase& c = GetParam();
  json pod = MakePod("evil", {{"main", false, 1}}, kOneA);
  c.tamper(pod);
  const std::string to_allocate =
      pod["metadata"]["annotations"]["hami.io/vgpu-devices-to-allocate"];
  cluster_.PutNode(c.named_by_lock ? MakeNode("ml", "evil") : MakeNode());
  cluster_.PutPod(pod);
  AllocatorOptions o;
  o.allow_unsigned = c.allow_unsigned;
  auto r = Make(o).Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), c.code) << r.status().ToString();
  EXPECT_NE(r.status().message().find(c.message_part), std::string::npos) << r.status().message();
  EXPECT_EQ(PodAnnotation("evil", "hami.io/vgpu-devices-to-allocate"),
            to_allocate);  // nothing served
  EXPECT_EQ(PodAnnotation("evil", "hami.io/bind-phase"), "failed");
  EXPECT_FALSE(fs::exists(hook_ + "/vgpu/limits/uid-evil_main.env"));
}

const std::string kBigA = std::string(kUuidA) + ",NVIDIA,32000,100:;";

INSTANTIATE_TEST_SUITE_P(
    Cases, ForgedPodTest,
    ::testing::Values(
        ForgeryCase{
            "NoSignature",
            [](json& p) { p["metadata"]["annotations"].erase("fracgpu.io/allocation-signature"); },
            true, false, StatusCode::kPermissionDenied, "has no fracgpu.io/allocation-signature"},
        ForgeryCase{"SignedWithAnotherKey",
                    [](json& p) {
                      p["metadata"]["annotations"]["fracgpu.io/allocation-signature"] =
                          Sign("uid-evil", kNode, kOneA, "guessed-key");
                    },
                    true, false, StatusCode::kPermissionDenied, "signature does not verify"},
        ForgeryCase{"AllocationEditedAfterSigning",
                    [](json& p) {
                      p["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] = kBigA;
                      p["metadata"]["annotations"]["hami.io/vgpu-devices-to-allocate"] = kBigA;
                    },
                    true, false, StatusCode::kPermissionDenied, "signature does not verify"},
        ForgeryCase{"SignatureOfAnotherPod",
                    [](json& p) {
                      p["metadata"]["annotations"]["fracgpu.io/allocation-signature"] =
                          Sign("uid-other", kNode, kOneA);
                    },
                    true, false, StatusCode::kPermissionDenied, "signature does not verify"},
        ForgeryCase{"ToAllocateEditedByUser",
                    [](json& p) {
                      p["metadata"]["annotations"]["hami.io/vgpu-devices-to-allocate"] = kBigA;
                    },
                    true, false, StatusCode::kPermissionDenied, "differs from the signed"},
        ForgeryCase{"ForeignScheduler",
                    [](json& p) { p["spec"]["schedulerName"] = "default-scheduler"; }, true, false,
                    StatusCode::kPermissionDenied, "was not placed by fracgpu-scheduler"},
        ForgeryCase{
            "UnsignedNotNamedByLock",
            [](json& p) { p["metadata"]["annotations"].erase("fracgpu.io/allocation-signature"); },
            false, true, StatusCode::kPermissionDenied, "unsigned and not named by the node lock"}),
    [](const ::testing::TestParamInfo<ForgeryCase>& info) { return std::string(info.param.name); });

TEST_F(AllocatorTest, UnsignedPodNamedByTheLockIsServedWhenAllowed) {
  cluster_.PutNode(MakeNode("ml", "legacy"));
  cluster_.PutPod(MakePod("legacy", {{"main", false, 1}}, kOneA, ""));
  AllocatorOptions o;
  o.allow_unsigned = true;
  auto r = Make(o).Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(PodAnnotation("legacy", "hami.io/bind-phase"), "success");
}

// A migration from HAMi (docs/hami-migration.md step 2): --scheduler-name given twice, the plugin
// serves HAMi's unsigned pod named by the node lock and fracgpu's signed one, and no other name.
TEST_F(AllocatorTest, SeveralSchedulerNamesServeHamisAndFracgpusPods) {
  AllocatorOptions o;
  o.allow_unsigned = true;
  o.scheduler_names = {"fracgpu-scheduler", "hami-scheduler"};
  json legacy = MakePod("legacy", {{"main", false, 1}}, kOneA, "");
  legacy["spec"]["schedulerName"] = "hami-scheduler";
  cluster_.PutNode(MakeNode("ml", "legacy"));
  cluster_.PutPod(legacy);
  auto r = Make(o).Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(PodAnnotation("legacy", "hami.io/bind-phase"), "success");

  cluster_.PutNode(MakeNode("ml", "train"));
  cluster_.PutPod(MakePod("train", {{"main", false, 1}}, kOneA));
  r = Make(o).Allocate({{std::string(kUuidA) + "-1"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(PodAnnotation("train", "hami.io/bind-phase"), "success");

  json other = MakePod("other", {{"main", false, 1}}, kOneA);
  other["spec"]["schedulerName"] = "default-scheduler";
  cluster_.PutNode(MakeNode("ml", "other"));
  cluster_.PutPod(other);
  r = Make(o).Allocate({{std::string(kUuidA) + "-2"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("was not placed by fracgpu-scheduler or hami-scheduler"),
            std::string::npos)
      << r.status().message();
}

TEST_F(AllocatorTest, ApiServerErrorsAreRetriedWithBackoff) {
  cluster_.PutNode(MakeNode("ml", "train"));
  cluster_.PutPod(MakePod("train", {{"main", false, 1}}, kOneA));
  cluster_.FailNext("patch_pod", 2, Unavailable("503 (injected)"));
  cluster_.FailNext("patch_node", 1, Unavailable("503 (injected)"));
  auto r = Make().Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(PodAnnotation("train", "hami.io/bind-phase"), "success");
  EXPECT_EQ(PodAnnotation("train", "hami.io/vgpu-devices-to-allocate"), ";");
  EXPECT_EQ(Lock(), "<absent>");
  using std::chrono::milliseconds;
  std::vector<std::chrono::nanoseconds> want = {milliseconds(200), milliseconds(400),
                                                milliseconds(200)};
  EXPECT_EQ(clock_.sleeps(), want);
}

TEST_F(AllocatorTest, LostReplyIsRetriedWithoutServingTheNextContainerTwice) {
  std::string alloc = std::string(kUuidA) + ",NVIDIA,1000,10:;" + kUuidB + ",NVIDIA,2000,20:;";
  cluster_.PutNode(MakeNode("ml", "multi"));
  cluster_.PutPod(MakePod("multi", {{"a", false, 1}, {"b", false, 1}}, alloc));
  cluster_.LoseNextPodPatchReply();  // applied on the server, but the plugin sees an error
  Allocator& al = Make();
  auto first = al.Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ((*first)[0].container, "a");
  // Container b's entry survived the retry.
  EXPECT_EQ(PodAnnotation("multi", "hami.io/vgpu-devices-to-allocate"),
            std::string(";") + kUuidB + ",NVIDIA,2000,20:;");
  auto second = al.Allocate({{std::string(kUuidB) + "-0"}});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ((*second)[0].container, "b");
  EXPECT_EQ(PodAnnotation("multi", "hami.io/bind-phase"), "success");
}

TEST_F(AllocatorTest, ConcurrentWriterConflictIsRetriedAndBothChangesKept) {
  cluster_.PutNode(MakeNode("ml", "train"));
  cluster_.PutPod(MakePod("train", {{"main", false, 1}}, kOneA));
  cluster_.InterleaveNextPodPatch([](FakeCluster* c) {
    json pod = c->Pod("ml", "train");
    pod["metadata"]["annotations"]["example.com/other"] = "kept";
    c->PutPod(pod);
  });
  auto r = Make().Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(cluster_.conflicts(), 1);
  EXPECT_EQ(PodAnnotation("train", "example.com/other"), "kept");
  EXPECT_EQ(PodAnnotation("train", "hami.io/bind-phase"), "success");
}

TEST_F(AllocatorTest, ApiServerDownFailsAfterTheLastAttempt) {
  cluster_.PutNode(MakeNode("ml", "train"));
  cluster_.PutPod(MakePod("train", {{"main", false, 1}}, kOneA));
  cluster_.FailNext("patch_pod", 5, Unavailable("503 (injected)"));
  auto r = Make().Allocate({{std::string(kUuidA) + "-0"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  // The failure itself is then recorded (the sixth write gets through).
  EXPECT_EQ(PodAnnotation("train", "hami.io/bind-phase"), "failed");
  EXPECT_EQ(PodAnnotation("train", "hami.io/vgpu-devices-to-allocate"), kOneA);
}

TEST_F(AllocatorTest, PreferredAllocationSteersToTheGrantedGpus) {
  std::string alloc = std::string(kUuidB) + ",NVIDIA,1000,10:;";
  cluster_.PutNode(MakeNode("ml", "p"));
  cluster_.PutPod(MakePod("p", {{"main", false, 1}}, alloc));
  PreferredRequest req;
  req.available = {std::string(kUuidA) + "-0", std::string(kUuidA) + "-1",
                   std::string(kUuidB) + "-4", std::string(kUuidB) + "-5"};
  req.size = 1;
  auto out = Make().PreferredAllocation({req});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], std::vector<std::string>{std::string(kUuidB) + "-4"});
}

TEST_F(AllocatorTest, PreferredAllocationWithoutPodKeepsKubeletOrder) {
  cluster_.PutNode(MakeNode());
  PreferredRequest req;
  req.available = {"x-0", "x-1", "y-0"};
  req.must_include = {"y-0"};
  req.size = 2;
  auto out = Make().PreferredAllocation({req});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], (std::vector<std::string>{"y-0", "x-0"}));
}

TEST(NodeLockTest, Table) {
  struct Case {
    const char* value;
    bool ok;
    const char* ns;
    const char* name;
  } cases[] = {
      {"2024-05-01T10:00:00Z,ml,train", true, "ml", "train"},
      {"2024-05-01T10:00:00Z", false, "", ""},  // HAMi legacy form names no pod
      {"2024-05-01T10:00:00Z,ml,", false, "", ""},
      {"2024-05-01T10:00:00Z,,train", false, "", ""},
      {"t,ml,train,extra", false, "", ""},
      {"", false, "", ""},
      {",ml,train", false, "", ""},
  };
  for (const auto& c : cases) {
    auto r = LockedPod(c.value);
    EXPECT_EQ(r.ok(), c.ok) << c.value;
    if (r.ok()) {
      EXPECT_EQ(r->first, c.ns);
      EXPECT_EQ(r->second, c.name);
    } else {
      EXPECT_NE(r.status().message().find("hami.io/mutex.lock"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace fracgpu::deviceplugin
