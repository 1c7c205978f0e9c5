// bench_enforce — the node agent's CPU cost per enforcement poll at 8 GPUs × 64 processes
// (issue 14): the decision core alone, and a whole NodeEnforcer::Poll (limits files, regions,
// /proc lookups, the core) with the driver's answer served from memory (NVML's own cost is
// the driver's, not measurable on the fake). 64 containers (8 per GPU) of 8 processes each,
// every one compliant at exactly its limit: the steady state, nothing to report.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "../tests/support/temp_dir.h"
#include "api/region.h"
#include "enforce/enforce.h"
#include "metrics/registry.h"
#include "monitor/enforcement.h"

namespace {

namespace fs = std::filesystem;
using namespace fracgpu;
constexpr int kGpus = 8, kContainersPerGpu = 8, kProcsPerContainer = 8;
constexpr int kContainers = kGpus * kContainersPerGpu;
constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kPerProcess = 100 * kMiB;

std::string Uuid(int g) {
  char b[64];
  std::snprintf(b, sizeof b, "GPU-%08d-0000-0000-0000-000000000000", g);
  return b;
}
std::string PodUid(int c) {
  char b[64];
  std::snprintf(b, sizeof b, "%08x-0000-4000-8000-000000000000", c);
  return b;
}
uint32_t Pid(int c, int k) { return static_cast<uint32_t>(200000 + c * kProcsPerContainer + k); }

class Source : public enforce::ProcessSource {
 public:
  Result<std::vector<enforce::GpuSample>> Sample(std::vector<std::string>*) override {
    return gpus;
  }
  std::vector<enforce::GpuSample> gpus;
};

// The whole node on disk (limits, regions, a /proc copy) and the driver's answer in memory.
struct Node {
  test_support::TempDir tmp{"fracgpu-bench-enforce-"};  // declared first: dir is its path
  std::string dir = tmp.path();
  Source source;
  enforce::Observation obs;  // the same poll, for the core alone
  Node() {
    fs::create_directories(dir + "/hook/vgpu/limits");
    for (int g = 0; g < kGpus; ++g)
      source.gpus.push_back(
          enforce::GpuSample{Uuid(g), true, true, {}, std::nullopt, static_cast<uint32_t>(g)});
    for (int c = 0; c < kContainers; ++c) {
      int g = c / kContainersPerGpu;
      std::string name = PodUid(c) + "_main";
      std::ofstream(dir + "/hook/vgpu/limits/" + name + ".env")
          << "NVIDIA_VISIBLE_DEVICES=" << Uuid(g)
          << "\nCUDA_DEVICE_MEMORY_LIMIT_0=" << kProcsPerContainer * 100 << "m\n";
      fs::create_directories(dir + "/hook/vgpu/containers/" + name);
      auto r = std::make_unique<api::Region>();
      r->magic = api::kRegionMagic;
      r->version = api::kRegionVersion;
      r->region_size = sizeof(api::Region);
      r->slot_size = sizeof(api::RegionSlot);
      r->max_devices = api::kMaxDevices;
      r->max_slots = api::kMaxSlots;
      r->device_count = 1;
      std::snprintf(r->devices[0].uuid, api::kUuidSize, "%s", Uuid(g).c_str());
      enforce::ContainerState cs;
      cs.id = {PodUid(c), "main"};
      cs.memory_limit_bytes[Uuid(g)] = kProcsPerContainer * kPerProcess;
      for (int k = 0; k < kProcsPerContainer; ++k) {
        uint32_t pid = Pid(c, k);
        r->slots[k].state.store(api::kSlotActive);
        r->slots[k].pid = static_cast<int32_t>(pid);
        r->slots[k].host_pid = static_cast<int32_t>(pid);
        r->slots[k].used[0].store(kPerProcess);
        source.gpus[g].processes.push_back({pid, kPerProcess});
        std::string p = dir + "/proc/" + std::to_string(pid);
        fs::create_directories(p);
        std::string stat = std::to_string(pid) + " (python3) S 1";
        for (int f = 5; f <= 52; ++f) stat += f == 22 ? " 4242" : " 0";
        std::ofstream(p + "/stat") << stat << "\n";
        std::string sd = PodUid(c);
        for (char& ch : sd) ch = ch == '-' ? '_' : ch;
        std::ofstream(p + "/cgroup")
            << "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" << sd
            << ".slice/cri-containerd-" << std::string(64, 'a' + c % 6) << ".scope\n";
        obs.owners[pid] = enforce::ProcessOwner{cs.id, 4242};
        cs.claims[Uuid(g)][pid] = kPerProcess;
      }
      std::ofstream(dir + "/hook/vgpu/containers/" + name + "/region.cache", std::ios::binary)
          .write(reinterpret_cast<const char*>(r.get()), sizeof(api::Region));
      obs.containers.push_back(std::move(cs));
    }
    obs.gpus = source.gpus;
  }
};

Node& TheNode() {
  static Node* n = new Node();
  return *n;
}

void BM_CoreEvaluate_8Gpus64Processes(benchmark::State& state) {
  Node& n = TheNode();
  enforce::Enforcer e;
  for (auto _ : state) {
    n.obs.now_ns += 500'000'000;
    auto f = e.Evaluate(n.obs);
    if (!f.empty()) state.SkipWithError("a compliant node gave a finding");
    benchmark::DoNotOptimize(f);
  }
}
BENCHMARK(BM_CoreEvaluate_8Gpus64Processes)->Unit(benchmark::kMicrosecond);

void BM_NodePoll_8Gpus64Processes(benchmark::State& state) {
  Node& n = TheNode();
  metrics::Registry registry;
  monitor::EnforcementOptions o;
  o.hook_path = n.dir + "/hook";
  o.proc_root = n.dir + "/proc";
  monitor::NodeEnforcer e(o, &n.source, nullptr, &registry);
  uint64_t now = 0;
  std::map<std::string, monitor::PodRef> pods;
  for (auto _ : state) {
    auto f = e.Poll(now += 500'000'000, pods);
    if (!f.empty()) state.SkipWithError(f[0].Describe().c_str());
    benchmark::DoNotOptimize(f);
  }
}
BENCHMARK(BM_NodePoll_8Gpus64Processes)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();

}  // namespace
