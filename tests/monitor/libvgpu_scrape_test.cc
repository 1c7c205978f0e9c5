// The monitor against regions WRITTEN BY libvgpu.so: tests/vgpu/vgpu_app runs with the test copy
// of libvgpu.so preloaded over the fake driver and the fake NVML (the vgpu tests' harness), as
// three containers of one node (one with two GPUs), seven processes, one of them killed with
// SIGKILL. The monitor then polls the node (fake NVML in-process, the fake API server for pod
// names) and every scraped value must equal what the test allocated, exactly; the scrape must
// pass `promtool check metrics` and match the golden file (tests/monitor/golden/).
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "../vgpu/harness.h"
#include "fake_apiserver.h"
#include "k8s/client.h"
#include "monitor/monitor.h"
#include "monitor/nvml_stats.h"
#include "region_files.h"

namespace fracgpu::monitor::testing {
namespace {

using vgpu::testing::Child;
using vgpu::testing::Finish;
using vgpu::testing::kTwoGpus;
using vgpu::testing::kUuid0;
using vgpu::testing::kUuid1;
using vgpu::testing::Rc;
using vgpu::testing::ReadLine;
using vgpu::testing::Sandbox;
using vgpu::testing::Spawn;

constexpr const char* kUidA = "7d1c0c6e-0000-4000-8000-00000000000a";
constexpr const char* kUidB = "7d1c0c6e-0000-4000-8000-00000000000b";
constexpr const char* kUidC = "7d1c0c6e-0000-4000-8000-00000000000c";
constexpr const char* kUidBroken = "7d1c0c6e-0000-4000-8000-0000000000ff";
constexpr uint64_t kCtx = 2 * kMiB;     // FAKE_CUDA_CTX_BYTES
constexpr uint64_t kModule = 1 * kMiB;  // FAKE_CUDA_MODULE_BYTES

// Series → value of a Prometheus text scrape (comment lines skipped).
std::map<std::string, double> ParseScrape(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    size_t sp = line.rfind(' ');
    out[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
  }
  return out;
}

std::string SliceLabels(const std::string& ns, const std::string& pod, const std::string& container,
                        const std::string& uuid) {
  return "{node=\"node-1\",namespace=\"" + ns + "\",pod=\"" + pod + "\",container=\"" + container +
         "\",device_uuid=\"" + uuid + "\"}";
}
// The fake NVML names a GPU by its size (tests/fakes/cuda/fake_gpu.h FakeModelName): GPU 0
// has 1024 MiB, GPU 1 2048 MiB here.
std::string GpuLabels(const std::string& uuid, int index) {
  return "{node=\"node-1\",device_uuid=\"" + uuid + "\",device_index=\"" + std::to_string(index) +
         "\",model=\"Fake GPU " + std::to_string(index + 1) + "GB\"}";
}

// Replaces the values of the wall-clock-dependent series (kernel ages) with "<age>".
std::string NormaliseAges(const std::string& text) {
  std::istringstream in(text);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("fracgpu_container_last_kernel_age_seconds{", 0) == 0 ||
        line.rfind("hami_container_last_kernel_elapsed_seconds{", 0) == 0) {
      line = line.substr(0, line.rfind(' ')) + " <age>";
    }
    out += line + "\n";
  }
  return out;
}

class LibvgpuScrape : public ::testing::Test {
 protected:
  void SetUp() override {
    hook_ = box_.dir() + "/hook";
    // The monitor process sees the same fake node as the containers.
    ::setenv("FAKE_GPU_DEVICES", kTwoGpus, 1);
    ::setenv("FAKE_GPU_STATE_DIR", box_.dir().c_str(), 1);
  }
  // The environment of one container's processes (what the device plugin's Allocate sets).
  std::map<std::string, std::string> ContainerEnv(const std::string& uid,
                                                  const std::string& container) {
    std::string dir = hook_ + "/vgpu/containers/" + uid + "_" + container;
    std::filesystem::create_directories(dir);
    auto env = box_.Env();
    env["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = dir + "/region.cache";
    env["FAKE_CUDA_CTX_BYTES"] = std::to_string(kCtx);
    env["FAKE_CUDA_MODULE_BYTES"] = std::to_string(kModule);
    env["GPU_CORE_UTILIZATION_POLICY"] = "disable";  // limits recorded, launches not paced
    return env;
  }
  // Spawns a process that ends in `wait`; checks every op line succeeded up to "ready".
  Child Start(const std::map<std::string, std::string>& env, std::vector<std::string> ops) {
    ops.push_back("wait");
    Child c = Spawn(box_, env, ops);
    // Processes spawned later must not inherit this one's pipes (its stdin would never close).
    ::fcntl(c.in, F_SETFD, FD_CLOEXEC);
    ::fcntl(c.out, F_SETFD, FD_CLOEXEC);
    for (size_t i = 0; i + 1 < ops.size(); ++i) {
      std::string line = ReadLine(c);
      EXPECT_EQ(Rc(line), 0) << ops[i] << " -> " << line;
    }
    EXPECT_EQ(ReadLine(c), "ready");
    return c;
  }

  Sandbox box_;
  std::string hook_;
};

TEST_F(LibvgpuScrape, ScrapedValuesEqualWhatTheContainersAllocated) {
  // Container A: GPU 0, 256 MiB, SM limit 30 %. Two live processes launch timed kernels on the
  // fake clock (5 ms each: 50 → 250 ms busy, 20 → 100 ms busy); a third is SIGKILLed holding
  // 40 MiB; a fourth allocates 180 MiB, which fits only once the killed one is reclaimed.
  auto a = ContainerEnv(kUidA, "main");
  a["NVIDIA_VISIBLE_DEVICES"] = kUuid0;
  a["CUDA_VISIBLE_DEVICES"] = "0";
  a["CUDA_DEVICE_MEMORY_LIMIT_0"] = "256m";
  a["CUDA_DEVICE_SM_LIMIT"] = "30";
  uint64_t before_launch = MonotonicNowNs();
  Child a1 = Start(a, {"init", "alloc:10485760", "alloc:20971520", "module", "cost:5000000000",
                       "launch:50", "sync"});
  Child a2 = Start(a, {"init", "alloc:31457280", "cost:5000000000", "launch:20", "sync"});
  uint64_t after_launch = MonotonicNowNs();
  Child a3 = Start(a, {"init", "alloc:41943040"});
  ::kill(a3.pid, SIGKILL);
  int status = 0;
  Finish(a3, &status);
  ASSERT_TRUE(WIFSIGNALED(status));
  auto a4 = vgpu::testing::RunApp(box_, a, {"init", "alloc:188743680"});
  ASSERT_EQ(a4.size(), 2u);
  ASSERT_EQ(Rc(a4[1]), 0) << "the killed process's 40 MiB was not reclaimed";

  // Container B: GPU 1 only, 512 MiB, SM limit 50 %, two processes, no kernels.
  auto b = ContainerEnv(kUidB, "server");
  b["NVIDIA_VISIBLE_DEVICES"] = kUuid1;
  b["CUDA_VISIBLE_DEVICES"] = "1";
  b["CUDA_DEVICE_MEMORY_LIMIT_0"] = "512m";
  b["CUDA_DEVICE_SM_LIMIT"] = "50";
  Child b1 = Start(b, {"init", "alloc:104857600"});
  Child b2 = Start(b, {"init", "managed:52428800"});

  // Container C: both GPUs, 128 MiB each, no SM limit, one process using both.
  auto c = ContainerEnv(kUidC, "worker");
  c["NVIDIA_VISIBLE_DEVICES"] = std::string(kUuid0) + "," + kUuid1;
  c["CUDA_DEVICE_MEMORY_LIMIT_0"] = "128m";
  c["CUDA_DEVICE_MEMORY_LIMIT_1"] = "128m";
  Child c1 = Start(c, {"init", "alloc:8388608", "ctx:1", "alloc:16777216"});

  // A container whose region is damaged (a version-1 header): skipped, the rest exported.
  {
    std::string dir = hook_ + "/vgpu/containers/" + std::string(kUidBroken) + "_broken";
    std::filesystem::copy_file(hook_ + "/vgpu/containers/" + kUidC + "_worker/region.cache",
                               dir + ".tmp");
    std::filesystem::create_directories(dir);
    std::string bytes = ReadBytes(dir + ".tmp");
    uint32_t one = 1;
    std::memcpy(bytes.data() + 4, &one, 4);
    WriteBytes(dir + "/region.cache", bytes);
    std::filesystem::remove(dir + ".tmp");
  }

  fakes::FakeApiServer api;
  auto pod = [](const char* ns, const char* name, const char* uid) {
    return nlohmann::json{{"metadata", {{"namespace", ns}, {"name", name}, {"uid", uid}}},
                          {"spec", {{"nodeName", "node-1"}}}};
  };
  api.Put("pods", pod("team-a", "train", kUidA));
  api.Put("pods", pod("team-b", "infer", kUidB));
  api.Put("pods", pod("team-c", "etl", kUidC));
  api.Put("pods", pod("team-d", "broken", kUidBroken));
  k8s::Config config;
  config.server = api.url();
  auto client = k8s::Client::Create(config);
  ASSERT_TRUE(client.ok());
  K8sPodLister lister(client->get());

  // The monitor samples NVML at virtual time 1 s: every kernel above ran in [0, 250 ms].
  void* cuda =
      ::dlopen((std::string(FRACGPU_FAKES_LIB) + "/libcuda.so.1").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(cuda, nullptr) << ::dlerror();
  auto sleep_until = reinterpret_cast<void (*)(uint64_t)>(::dlsym(cuda, "fakeClockSleepUntilNs"));
  ASSERT_NE(sleep_until, nullptr);
  sleep_until(1'000'000'000ull);
  auto nvml = NvmlGpuStats::Open(std::string(FRACGPU_FAKES_LIB) + "/libnvidia-ml.so.1");
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();

  MonitorOptions options;
  options.node_name = "node-1";
  options.hook_path = hook_;
  options.node_dir = "";
  options.version = "golden";
  Monitor monitor(options, nvml->get(), &lister);
  uint64_t now = MonotonicNowNs();
  monitor.Poll(now);
  std::string text = monitor.registry().Render();
  auto v = ParseScrape(text);

  // Container A on GPU 0: live processes a1 (2 ctx + 10 + 20 data + 1 module) and a2 (2 ctx + 30).
  const std::string la = SliceLabels("team-a", "train", "main", kUuid0);
  EXPECT_EQ(v["fracgpu_container_memory_used_bytes" + la], 2 * kCtx + 60 * kMiB + kModule) << text;
  EXPECT_EQ(v["fracgpu_container_memory_context_bytes" + la], 2 * kCtx);
  EXPECT_EQ(v["fracgpu_container_memory_module_bytes" + la], kModule);
  EXPECT_EQ(v["fracgpu_container_memory_data_bytes" + la], 60 * kMiB);
  EXPECT_EQ(v["fracgpu_container_memory_limit_bytes" + la], 256 * kMiB);
  EXPECT_EQ(v["fracgpu_container_sm_limit_ratio" + la], 0.3);
  EXPECT_EQ(v["fracgpu_container_processes" + la], 2);
  EXPECT_DOUBLE_EQ(v["fracgpu_container_sm_utilization_ratio" + la], 0.35);  // 25 % + 10 %
  double age = v["fracgpu_container_last_kernel_age_seconds" + la];
  EXPECT_GE(age, static_cast<double>(now - after_launch) / 1e9);
  EXPECT_LE(age, static_cast<double>(now - before_launch) / 1e9);
  // Container B on GPU 1.
  const std::string lb = SliceLabels("team-b", "infer", "server", kUuid1);
  EXPECT_EQ(v["fracgpu_container_memory_used_bytes" + lb], 2 * kCtx + 150 * kMiB);
  EXPECT_EQ(v["fracgpu_container_memory_context_bytes" + lb], 2 * kCtx);
  EXPECT_EQ(v["fracgpu_container_memory_module_bytes" + lb], 0);
  EXPECT_EQ(v["fracgpu_container_memory_data_bytes" + lb], 150 * kMiB);
  EXPECT_EQ(v["fracgpu_container_memory_limit_bytes" + lb], 512 * kMiB);
  EXPECT_EQ(v["fracgpu_container_sm_limit_ratio" + lb], 0.5);
  EXPECT_EQ(v["fracgpu_container_sm_utilization_ratio" + lb], 0);
  EXPECT_EQ(v.count("fracgpu_container_last_kernel_age_seconds" + lb), 0u);  // never launched
  // Container C on both GPUs.
  const std::string lc0 = SliceLabels("team-c", "etl", "worker", kUuid0);
  const std::string lc1 = SliceLabels("team-c", "etl", "worker", kUuid1);
  EXPECT_EQ(v["fracgpu_container_memory_used_bytes" + lc0], kCtx + 8 * kMiB);
  EXPECT_EQ(v["fracgpu_container_memory_used_bytes" + lc1], kCtx + 16 * kMiB);
  EXPECT_EQ(v["fracgpu_container_memory_limit_bytes" + lc1], 128 * kMiB);
  EXPECT_EQ(v["fracgpu_container_sm_limit_ratio" + lc0], 1);  // unlimited
  // GPUs: NVML's physical usage of the live processes; totals from FAKE_GPU_DEVICES.
  EXPECT_EQ(v["fracgpu_gpu_memory_used_bytes" + GpuLabels(kUuid0, 0)],
            (2 * kCtx + 60 * kMiB + kModule) + (kCtx + 8 * kMiB));
  EXPECT_EQ(v["fracgpu_gpu_memory_used_bytes" + GpuLabels(kUuid1, 1)],
            (2 * kCtx + 150 * kMiB) + (kCtx + 16 * kMiB));
  EXPECT_EQ(v["fracgpu_gpu_memory_total_bytes" + GpuLabels(kUuid0, 0)], 1024 * kMiB);
  EXPECT_EQ(v["fracgpu_gpu_memory_total_bytes" + GpuLabels(kUuid1, 1)], 2048 * kMiB);
  EXPECT_EQ(v["fracgpu_gpu_slices" + GpuLabels(kUuid0, 0)], 2);
  EXPECT_EQ(v["fracgpu_gpu_slices" + GpuLabels(kUuid1, 1)], 2);
  // The fake NVML keeps busy time per process and reports it on every device (fake_nvml.cc).
  EXPECT_DOUBLE_EQ(v["fracgpu_gpu_utilization_ratio" + GpuLabels(kUuid0, 0)], 0.35);
  // The damaged region: skipped with its reason; its pod has no series.
  EXPECT_EQ(v["fracgpu_monitor_region_skipped_total{reason=\"bad_version\"}"], 1);
  EXPECT_EQ(text.find("pod=\"broken\""), std::string::npos);
  // HAMi names: same values, HAMi's labels and percent units.
  const std::string ha =
      "{namespace=\"team-a\",pod=\"train\",container=\"main\",vdevice_index=\"0\",device_uuid=\"" +
      std::string(kUuid0) + "\",zone=\"vGPU\"}";
  EXPECT_EQ(v["hami_vgpu_memory_used_bytes" + ha], 2 * kCtx + 60 * kMiB + kModule);
  EXPECT_EQ(v["hami_vgpu_memory_module_bytes" + ha], kModule);
  EXPECT_DOUBLE_EQ(v["hami_container_device_utilization_ratio" + ha], 35);

  // promtool (Debian package `prometheus`, scripts/deps/monitor.txt) accepts the scrape.
  std::string scrape = box_.dir() + "/scrape.prom";
  WriteBytes(scrape, text);
  ASSERT_STRNE(FRACGPU_PROMTOOL, "PROMTOOL-NOTFOUND") << "install the Debian package prometheus";
  std::string cmd = std::string(FRACGPU_PROMTOOL) + " check metrics < " + scrape + " > " +
                    box_.dir() + "/promtool.out 2>&1";
  int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << ReadBytes(box_.dir() + "/promtool.out");

  // Golden scrape (kernel ages depend on wall time and are masked). Regenerate with
  // FRACGPU_UPDATE_GOLDEN=1 after checking the differences by hand.
  std::string golden = std::string(FRACGPU_MONITOR_GOLDEN) + "/libvgpu_scrape.prom";
  std::string normalised = NormaliseAges(text);
  if (const char* up = std::getenv("FRACGPU_UPDATE_GOLDEN"); up && std::string(up) == "1")
    WriteBytes(golden, normalised);
  EXPECT_EQ(normalised, ReadBytes(golden));

  for (Child* k : {&a1, &a2, &b1, &b2, &c1}) Finish(*k);
  nvml->reset();
  ::dlclose(cuda);
}

}  // namespace
}  // namespace fracgpu::monitor::testing
