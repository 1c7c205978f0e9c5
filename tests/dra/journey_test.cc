// The e2e journey in DRA mode (docs/dra.md): one node with one 16 GiB GPU publishes its
// ResourceSlice to the fake API server; four claims ask for 3000 / 4000 / 5000 / 5000 MiB; a
// test-only allocator stand-in (dra::FirstFit — kube-scheduler's first fit, not a scheduler)
// writes their allocations in the exact wire format kube-scheduler writes (shareID,
// consumedCapacity, nodeSelector, reservedFor); the fourth does not fit and stays unallocated.
// The fake kubelet prepares the three over gRPC; each "container" is vgpu_app started with the
// CDI spec's container edits (env; mounts emulated by path translation as in tests/e2e) under
// libvgpu.so over the fake CUDA driver: it allocates its share, gets OOM one MiB past it, and
// sees its share as total memory — all three running on the GPU at once.
#include <gtest/gtest.h>

#include <sstream>

#include "cluster.h"
#include "dra/api.h"
#include "dra/cdi.h"
#include "dra/driver.h"
#include "dra/placement.h"
#include "dra/plugin.h"
#include "dra/slices.h"
#include "fake_apiserver.h"
#include "fake_dra_kubelet.h"
#include "k8s/client.h"
#include "node/container_edits.h"
#include "node/inventory.h"
#include "process.h"
#include "test_util.h"

namespace fracgpu::dra {
namespace {

namespace fs = std::filesystem;
using namespace testing;  // NOLINT

constexpr auto kWait = std::chrono::seconds(20);
constexpr int64_t kGpuMiB = 16384;

struct Mount {
  std::string container_path, host_path;
};

std::string Translate(const std::vector<Mount>& mounts, const std::string& path) {
  const Mount* best = nullptr;
  for (const auto& m : mounts) {
    bool under = path == m.container_path ||
                 (path.size() > m.container_path.size() &&
                  path.compare(0, m.container_path.size(), m.container_path) == 0 &&
                  path[m.container_path.size()] == '/');
    if (under && (best == nullptr || m.container_path.size() > best->container_path.size()))
      best = &m;
  }
  return best == nullptr ? path : best->host_path + path.substr(best->container_path.size());
}

json ClaimRequest(const std::string& name, int64_t mib) {
  return json{
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaim"},
      {"metadata", {{"name", name}, {"namespace", "ml"}}},
      {"spec",
       {{"devices",
         {{"requests",
           json::array({{{"name", "gpu"},
                         {"exactly",
                          {{"deviceClassName", "gpu.fracgpu.io"},
                           {"allocationMode", "ExactCount"},
                           {"count", 1},
                           {"capacity",
                            {{"requests", {{"memory", std::to_string(mib) + "Mi"}}}}}}}}})}}}}}};
}

// The stand-in: allocates every claim without an allocation, in creation order, first fit.
void AllocatePendingClaims(fakes::FakeApiServer& api, k8s::Client* client) {
  std::vector<json> slices = api.List("resourceslices");
  std::vector<json> claims = api.List("resourceclaims");
  std::sort(claims.begin(), claims.end(), [](const json& a, const json& b) {
    return a["metadata"].value("creationTimestamp", "") + a["metadata"].value("name", "") <
           b["metadata"].value("creationTimestamp", "") + b["metadata"].value("name", "");
  });
  auto usage = UsageFromSlices(slices, claims, kDriverName);
  ASSERT_TRUE(usage.ok()) << usage.status().ToString();
  int n = 0;
  for (auto& c : claims) {
    if (c.contains("status") && c["status"].contains("allocation")) continue;
    const json& req = c["spec"]["devices"]["requests"][0];
    ShareRequest r;
    r.name = req["name"];
    r.count = req["exactly"].value("count", 1);
    auto q = req["exactly"]["capacity"]["requests"]["memory"].get<std::string>();
    r.memory_mib = std::stoll(q.substr(0, q.size() - 2));
    auto results = FirstFit(&*usage, r, kDriverName, [&] {
      char id[40];
      std::snprintf(id, sizeof id, "00000000-0000-4000-8000-%012d", ++n);
      return std::string(id);
    });
    if (!results.ok()) continue;  // does not fit: stays pending, as kube-scheduler leaves it
    c["status"] = {{"allocation",
                    {{"devices", {{"results", *results}}},
                     {"nodeSelector",
                      {{"nodeSelectorTerms",
                        json::array({{{"matchFields",
                                       json::array({{{"key", "metadata.name"},
                                                     {"operator", "In"},
                                                     {"values", json::array({kNode})}}})}}})}}}}},
                   {"reservedFor",
                    json::array({{{"resource", "pods"},
                                  {"name", c["metadata"]["name"].get<std::string>() + "-pod"},
                                  {"uid", "pod-" + c["metadata"]["uid"].get<std::string>()}}})}};
    auto put = client->Update("/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/" +
                                  c["metadata"]["name"].get<std::string>() + "/status",
                              c);
    ASSERT_TRUE(put.ok()) << put.status().ToString();
  }
}

TEST(DraJourneyTest, ThreeSharesOnOneSixteenGiBGpuAreEnforcedAndAFourthStaysPending) {
  TempDir dir;
  const std::string hook = dir.path() + "/hook";
  for (const char* sub : {"/hook/vgpu", "/cdi", "/registry", "/gpu-state", "/containers"}) {
    fs::create_directories(dir.path() + sub);
  }
  fs::copy_file(FRACGPU_LIBVGPU_TESTPATH, hook + "/vgpu/libvgpu.so");
  ASSERT_TRUE(node::PrepareHostFiles(hook).ok());
  fakes::FakeApiServer api;
  k8s::Config config;
  config.server = api.url();
  auto client = std::move(k8s::Client::Create(config).value());

  // The node: one 16 GiB GPU, published.
  nvml::GpuInfo gpu{kUuid0, 0, "Tesla T4", static_cast<uint64_t>(kGpuMiB) << 20, "0000:3b:00.0", 0};
  auto infos = node::BuildDeviceInfos({gpu}, node::DeviceConfig{}, {});
  SliceOptions so{kDriverName, kNode, true, 0, "", true};
  SlicePublisher publisher(so, client.get());
  ASSERT_TRUE(publisher.Sync(BuildSliceDevices(infos, {gpu}, {}, so)).ok());

  // The claims, then the stand-in allocator.
  const std::vector<std::pair<std::string, int64_t>> wanted = {
      {"c3000", 3000}, {"c4000", 4000}, {"c5000", 5000}, {"c5000b", 5000}};
  for (const auto& [name, mib] : wanted) api.Put("resourceclaims", ClaimRequest(name, mib));
  AllocatePendingClaims(api, client.get());
  for (const auto& [name, mib] : wanted) {
    auto c = api.Get("resourceclaims", "ml", name);
    ASSERT_TRUE(c.has_value());
    if (name == "c5000b") {
      // 3000 + 4000 + 5000 = 12000 MiB used; 5000 more exceed 16384: unallocated.
      EXPECT_FALSE(c->contains("status") && (*c)["status"].contains("allocation")) << c->dump();
      continue;
    }
    const json& r = (*c)["status"]["allocation"]["devices"]["results"][0];
    EXPECT_EQ(r["device"], "gpu-0");
    EXPECT_EQ(r["consumedCapacity"]["memory"], MiBQuantity(mib));
    EXPECT_EQ(r["consumedCapacity"]["cores"], "0");  // the cores policy default
    EXPECT_TRUE(r.contains("shareID"));
  }

  // The driver and the kubelet.
  DriverOptions dopt{kDriverName, kNode, dir.path() + "/state", {dir.path() + "/cdi", hook, {}}};
  K8sClaimSource source(client.get());
  Driver driver(dopt, &source, [&] { return infos; });
  ASSERT_TRUE(driver.Load().ok());
  KubeletPlugin plugin({kDriverName, dir.path() + "/registry", dir.path() + "/plugin", true},
                       &driver);
  ASSERT_TRUE(plugin.Start().ok());
  fakes::FakeDraKubelet kubelet(dir.path() + "/registry");
  ASSERT_TRUE(kubelet.WaitForDriver(kDriverName, kWait));

  std::vector<std::unique_ptr<e2e::ContainerProcess>> containers;
  for (size_t i = 0; i < 3; ++i) {
    const auto& [name, mib] = wanted[i];
    std::string uid = (*api.Get("resourceclaims", "ml", name))["metadata"]["uid"];
    drav1::NodePrepareResourcesResponse resp;
    ASSERT_TRUE(kubelet.Prepare(kDriverName, {fakes::ClaimRef("ml", name, uid)}, &resp).ok());
    const auto& prepared = resp.claims().at(uid);
    ASSERT_EQ(prepared.error(), "");
    ASSERT_EQ(prepared.devices_size(), 1);
    ASSERT_EQ(prepared.devices(0).cdi_device_ids_size(), 1);
    std::string cdi_id = prepared.devices(0).cdi_device_ids(0);
    // The runtime's part, as the CDI library does it (pkg/cdi/cache.go InjectDevices): find
    // the CDI device by its fully qualified name, apply the spec's own edits once and then the
    // device's.
    json spec = json::parse(ReadFile(dir.path() + "/cdi/fracgpu.io-gpu-claim-" + uid + ".json"));
    ASSERT_EQ(spec["devices"].size(), 1u);
    ASSERT_EQ(spec["kind"].get<std::string>() + "=" + spec["devices"][0]["name"].get<std::string>(),
              cdi_id);
    std::string cwd = dir.path() + "/containers/" + name;
    fs::create_directories(cwd + "/fracgpu-limits.d");
    std::map<std::string, std::string> env = {{"PATH", "/usr/bin:/bin"},
                                              {"LD_LIBRARY_PATH", FRACGPU_FAKES_LIB},
                                              {"FAKE_GPU_STATE_DIR", dir.path() + "/gpu-state"}};
    std::vector<Mount> mounts;
    for (const json* edits : {&spec["containerEdits"], &spec["devices"][0]["containerEdits"]}) {
      for (const auto& e : edits->value("env", json::array())) {
        std::string kv = e;
        ASSERT_EQ(env.count(kv.substr(0, kv.find('='))), 0u) << "env key set twice: " << kv;
        env[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
      }
      for (const auto& m : edits->value("mounts", json::array()))
        mounts.push_back({m["containerPath"], m["hostPath"]});
    }
    env["CUDA_DEVICE_MEMORY_SHARED_CACHE"] =
        Translate(mounts, env["CUDA_DEVICE_MEMORY_SHARED_CACHE"]);
    const std::string limits_dir = "/etc/fracgpu/limits.d/";
    const std::string toolkit_dir = "/var/run/nvidia-container-devices/";
    std::vector<std::string> runtime_gpus;
    for (const auto& m : mounts) {
      EXPECT_NE(m.container_path, "/etc/fracgpu/limits.env");  // the device plugin's file only
      if (m.container_path.rfind(limits_dir, 0) == 0) {
        std::stringstream in(ReadFile(m.host_path));
        std::ofstream out(cwd + "/fracgpu-limits.d/" + m.container_path.substr(limits_dir.size()));
        for (std::string line; std::getline(in, line);) {
          const std::string key = "CUDA_DEVICE_MEMORY_SHARED_CACHE=";
          if (line.rfind(key, 0) == 0) line = key + Translate(mounts, line.substr(key.size()));
          out << line << "\n";
        }
      } else if (m.container_path.rfind(toolkit_dir, 0) == 0) {
        runtime_gpus.push_back(m.container_path.substr(toolkit_dir.size()));
      } else if (m.container_path == "/etc/ld.so.preload") {
        std::stringstream in(ReadFile(m.host_path));
        std::string lib;
        std::getline(in, lib);
        env["LD_PRELOAD"] = Translate(mounts, lib);
      }
    }
    EXPECT_EQ(ReadFile(cwd + "/fracgpu-limits.d/gpu-" + kUuid0 + ".env"),
              std::string("NVIDIA_VISIBLE_DEVICES=") + kUuid0 + "\nCUDA_DEVICE_MEMORY_LIMIT_0=" +
                  std::to_string(mib) + "m\nCUDA_DEVICE_SM_LIMIT_0=0\n");
    EXPECT_EQ(env["NVIDIA_VISIBLE_DEVICES"], "void");  // the GPUs come from the devices' mounts
    EXPECT_EQ(env.count("CUDA_DEVICE_MEMORY_LIMIT_0"), 0u);
    EXPECT_EQ(env["LD_PRELOAD"], hook + "/vgpu/libvgpu.so");
    ASSERT_EQ(runtime_gpus, std::vector<std::string>{kUuid0});
    env["FAKE_GPU_DEVICES"] =
        runtime_gpus[0] + ":" + std::to_string(kGpuMiB);  // the runtime's visible GPU
    std::vector<std::string> argv = {FRACGPU_VGPU_APP};
    for (const auto& op : e2e::SliceProbe(mib)) argv.push_back(op);
    containers.push_back(std::make_unique<e2e::ContainerProcess>(argv, env, cwd, cwd + ".stderr"));
    ASSERT_TRUE(containers.back()->started());
  }
  // All three resident at once, each held to its share.
  for (size_t i = 0; i < 3; ++i) {
    auto expected = e2e::ExpectedSliceLines(wanted[i].second);
    ASSERT_TRUE(containers[i]->WaitForLine(expected.back(), kWait))
        << wanted[i].first << ": " << ::testing::PrintToString(containers[i]->Lines()) << " "
        << ReadFile(dir.path() + "/containers/" + wanted[i].first + ".stderr");
    EXPECT_EQ(containers[i]->Lines(), expected) << wanted[i].first;
  }
  for (auto& c : containers) {
    c->CloseStdin();
    auto st = c->WaitExit(kWait);
    ASSERT_TRUE(st.has_value());
    EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
  }
  // Unprepare: nothing of the claims is left on the node.
  for (size_t i = 0; i < 3; ++i) {
    std::string uid = (*api.Get("resourceclaims", "ml", wanted[i].first))["metadata"]["uid"];
    drav1::NodeUnprepareResourcesResponse un;
    ASSERT_TRUE(
        kubelet.Unprepare(kDriverName, {fakes::ClaimRef("ml", wanted[i].first, uid)}, &un).ok());
    EXPECT_EQ(un.claims().at(uid).error(), "");
  }
  EXPECT_TRUE(fs::is_empty(dir.path() + "/cdi"));
  EXPECT_TRUE(fs::is_empty(hook + "/vgpu/limits"));
  plugin.Stop();
}

}  // namespace
}  // namespace fracgpu::dra
