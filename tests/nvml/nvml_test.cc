// NVML through dlopen against the fake libnvidia-ml.so.1 (tests/fakes/nvml), and the sysfs
// helpers against a temporary sysfs tree.
#include "nvml/nvml.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../support/temp_dir.h"
#include "api/nvml.h"

namespace fracgpu::nvml {
namespace {

namespace fs = std::filesystem;

class TempTree : public ::fracgpu::test_support::TempDir {
 public:
  TempTree() : ::fracgpu::test_support::TempDir("fgnvml-") {}
};

TEST(Nvml, DiscoversTheFakeDevices) {
  // The fake reads FAKE_GPU_DEVICES when first initialised; this test is its own process.
  setenv("FAKE_GPU_DEVICES",
         "GPU-11111111-2222-3333-4444-555555555555:40960,GPU-66666666-7777-8888-9999-000000000000:"
         "81920:132:NVIDIA H100 80GB HBM3",
         1);
  auto nvml = Nvml::Open({FRACGPU_FAKE_NVML, "/nonexistent"});
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  auto gpus = (*nvml)->ListGpus();
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_EQ(gpus->size(), 2u);
  EXPECT_EQ((*gpus)[0].uuid, "GPU-11111111-2222-3333-4444-555555555555");
  EXPECT_EQ((*gpus)[0].index, 0u);
  EXPECT_EQ((*gpus)[0].total_memory_bytes, 40960ULL << 20);
  EXPECT_EQ((*gpus)[1].uuid, "GPU-66666666-7777-8888-9999-000000000000");
  EXPECT_EQ((*gpus)[1].index, 1u);
  EXPECT_EQ((*gpus)[1].total_memory_bytes, 81920ULL << 20);
  // Named by its size's model when the list gives no name (one size, one type: never per
  // index), else by the name given.
  EXPECT_EQ((*gpus)[0].name, "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ((*gpus)[1].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ((*gpus)[1].numa_node, 0);  // the fake has no PCI info
  // Xid events: none until the fake's xid-events file gets a line, then that one, once, for
  // the device it names.
  TempTree state;
  setenv("FAKE_GPU_STATE_DIR", state.path().c_str(), 1);
  auto none = (*nvml)->WaitXid(std::chrono::milliseconds(0));
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->has_value());
  std::ofstream(state.path() + "/xid-events") << "1 79\n";
  auto xid = (*nvml)->WaitXid(std::chrono::milliseconds(1000));
  ASSERT_TRUE(xid.ok()) << xid.status().ToString();
  ASSERT_TRUE(xid->has_value());
  EXPECT_EQ((*xid)->xid, 79u);
  EXPECT_EQ((*xid)->uuid, "GPU-66666666-7777-8888-9999-000000000000");
  auto again = (*nvml)->WaitXid(std::chrono::milliseconds(0));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->has_value());
  unsetenv("FAKE_GPU_STATE_DIR");
}

TEST(Nvml, MissingLibraryIsAClearError) {
  auto nvml = Nvml::Open({"/nonexistent/libnvidia-ml.so.1", "/sys"});
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(
      nvml.status().message().rfind("cannot load NVML library /nonexistent/libnvidia-ml.so.1: ", 0),
      0u);
}

TEST(Nvml, LibraryWithoutNvmlEntryPointsIsRefused) {
  auto nvml = Nvml::Open({"libm.so.6", "/sys"});
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().message(), "NVML library libm.so.6 lacks entry point nvmlInit_v2");
}

// Sets environment variables for one test and restores them after.
class ScopedEnv {
 public:
  void Set(const char* name, const char* value) {
    const char* old = std::getenv(name);
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second)
        setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        unsetenv(it->first.c_str());
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// The devices of DiscoversTheFakeDevices: the fake keeps those of its first initialisation
// for the life of the process, so every test of this file uses the same list.
constexpr const char* kDevices =
    "GPU-11111111-2222-3333-4444-555555555555:40960,GPU-66666666-7777-8888-9999-000000000000:81920";
constexpr const char* kUuidA = "GPU-11111111-2222-3333-4444-555555555555";
constexpr const char* kUuidB = "GPU-66666666-7777-8888-9999-000000000000";

TEST(NvmlFacts, WhatAnH100Reports) {
  ScopedEnv env;
  env.Set("FAKE_GPU_DEVICES", kDevices);
  auto nvml = Nvml::Open({FRACGPU_FAKE_NVML, "/nonexistent"});
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  FactsReport report = (*nvml)->Facts();
  EXPECT_EQ(report.omitted, std::vector<std::string>{});
  const GpuFacts h100{"Hopper", "9.0", "580.95.05"};
  EXPECT_EQ(report.by_uuid, (std::map<std::string, GpuFacts>{{kUuidA, h100}, {kUuidB, h100}}));
}

TEST(NvmlFacts, ConfiguredValuesAndNotSupported) {
  ScopedEnv env;
  env.Set("FAKE_GPU_DEVICES", kDevices);
  env.Set("FAKE_NVML_ARCHITECTURE", "7");
  env.Set("FAKE_NVML_COMPUTE_CAPABILITY", "8.0");
  env.Set("FAKE_NVML_DRIVER_VERSION", "550.54.15");
  auto nvml = Nvml::Open({FRACGPU_FAKE_NVML, "/nonexistent"});
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  EXPECT_EQ((*nvml)->Facts().by_uuid.at(kUuidA), (GpuFacts{"Ampere", "8.0", "550.54.15"}));
  // A product that answers NOT_SUPPORTED: that fact is left out, the others stay.
  env.Set("FAKE_NVML_NOT_SUPPORTED", "nvmlDeviceGetArchitecture,nvmlSystemGetDriverVersion");
  FactsReport report = (*nvml)->Facts();
  EXPECT_EQ(report.by_uuid.at(kUuidA), (GpuFacts{"", "8.0", ""}));
  EXPECT_EQ(report.by_uuid.at(kUuidB), (GpuFacts{"", "8.0", ""}));
  EXPECT_EQ(
      report.omitted,
      (std::vector<std::string>{
          "nvmlSystemGetDriverVersion failed: NVML error 3 (Not Supported): driverVersion omitted",
          std::string("nvmlDeviceGetArchitecture failed: NVML error 3 (Not Supported) for ") +
              kUuidA + ": architecture omitted",
          std::string("nvmlDeviceGetArchitecture failed: NVML error 3 (Not Supported) for ") +
              kUuidB + ": architecture omitted"}));
  // An architecture value without a name (NVML_DEVICE_ARCH_UNKNOWN) is left out, not guessed.
  env.Set("FAKE_NVML_NOT_SUPPORTED", "");
  env.Set("FAKE_NVML_ARCHITECTURE", "0xffffffff");
  report = (*nvml)->Facts();
  EXPECT_EQ(report.by_uuid.at(kUuidA), (GpuFacts{"", "8.0", "550.54.15"}));
  ASSERT_EQ(report.omitted.size(), 2u);
  EXPECT_EQ(report.omitted[0], std::string("nvmlDeviceGetArchitecture gave 4294967295 for ") +
                                   kUuidA + ", which has no name here: architecture omitted");
}

TEST(NvmlFacts, AnOlderDriverWithoutTheEntryPointsOmitsThem) {
  ScopedEnv env;
  env.Set("FAKE_GPU_DEVICES", kDevices);
  auto nvml = Nvml::Open({FRACGPU_FAKE_NVML_WITHOUT_FACTS, "/nonexistent"});
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  auto gpus = (*nvml)->ListGpus();
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  EXPECT_EQ(gpus->size(), 2u);
  FactsReport report = (*nvml)->Facts();
  EXPECT_EQ(report.by_uuid, (std::map<std::string, GpuFacts>{{kUuidA, {}}, {kUuidB, {}}}));
  const std::string lib = FRACGPU_FAKE_NVML_WITHOUT_FACTS;
  EXPECT_EQ(report.omitted,
            (std::vector<std::string>{
                "NVML library " + lib + " has no nvmlSystemGetDriverVersion: driverVersion omitted",
                "NVML library " + lib + " has no nvmlDeviceGetArchitecture: architecture omitted",
                "NVML library " + lib +
                    " has no nvmlDeviceGetCudaComputeCapability: computeCapability omitted"}));
}

TEST(NvmlFacts, ArchitectureNames) {
  const std::pair<unsigned, const char*> names[] = {
      {2, "Kepler"}, {3, "Maxwell"}, {4, "Pascal"}, {5, "Volta"},      {6, "Turing"},
      {7, "Ampere"}, {8, "Ada"},     {9, "Hopper"}, {10, "Blackwell"}, {11, "Orin"}};
  for (const auto& [value, name] : names) EXPECT_EQ(ArchitectureName(value), name) << value;
  for (unsigned unknown : {0u, 1u, 12u, 0xffffffffu})
    EXPECT_EQ(ArchitectureName(unknown), "") << unknown;
}

TEST(Sysfs, BusIdConversion) {
  struct Case {
    const char* in;
    const char* out;
  } good[] = {{"00000000:3B:00.0", "0000:3b:00.0"},
              {"0000:af:1f.7", "0000:af:1f.7"},
              {"00000000:0A:00.1", "0000:0a:00.1"},
              {"00000001:3B:00.0", "0001:3b:00.0"}};
  for (const auto& c : good) {
    auto r = SysfsBusId(c.in);
    ASSERT_TRUE(r.ok()) << c.in;
    EXPECT_EQ(*r, c.out);
  }
  for (const char* bad : {"", "3B:00.0", "00000000:3B:00", "00010000:3B:00.0", "0000:3G:00.0",
                          "00000000:3B:000.0", "00000000:3B:00.0x"}) {
    auto r = SysfsBusId(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(),
              std::string("PCI bus id must look like 00000000:3B:00.0, got \"") + bad + "\"");
  }
}

TEST(Sysfs, NumaNode) {
  TempTree sys;
  sys.Write("bus/pci/devices/0000:3b:00.0/numa_node", "1\n");
  sys.Write("bus/pci/devices/0000:86:00.0/numa_node", "-1\n");
  sys.Write("bus/pci/devices/0000:99:00.0/numa_node", "one\n");
  EXPECT_EQ(*ReadNumaNode(sys.path(), "0000:3b:00.0"), 1);
  EXPECT_EQ(*ReadNumaNode(sys.path(), "0000:86:00.0"), 0);  // no NUMA → 0, as HAMi
  EXPECT_EQ(*ReadNumaNode(sys.path(), "0000:00:00.0"), 0);  // absent
  auto bad = ReadNumaNode(sys.path(), "0000:99:00.0");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(
      bad.status().message(),
      sys.path() +
          "/bus/pci/devices/0000:99:00.0/numa_node must hold an integer NUMA node, got \"one\"");
}

// ---- The GPU link topology (issue 34 item 6) ------------------------------------------------
// Each test is its own process: the fake reads FAKE_GPU_DEVICES once; FAKE_GPU_TOPOLOGY on
// every call.

std::string FakeUuid(int i) {
  return "GPU-00000000-0000-0000-0000-00000000000" + std::to_string(i);
}

void FakeBox(int gpus, const char* topology) {
  std::string list;
  for (int i = 0; i < gpus; ++i) list += (i ? "," : "") + FakeUuid(i) + ":81920";
  setenv("FAKE_GPU_DEVICES", list.c_str(), 1);
  if (topology != nullptr) {
    setenv("FAKE_GPU_TOPOLOGY", topology, 1);
  } else {
    unsetenv("FAKE_GPU_TOPOLOGY");
  }
}

// The link NVML reports from GPU a to GPU b.
const GpuPairLink* Link(const TopologyReport& r, int a, int b) {
  for (const GpuPairLink& l : r.links) {
    if (l.a == FakeUuid(a) && l.b == FakeUuid(b)) return &l;
  }
  return nullptr;
}

TEST(NvmlTopology, TwoWayNvlinkBoxLinksThePairsBridged) {
  FakeBox(4, "nvlink2x");
  auto nvml = Nvml::Open({FRACGPU_FAKE_NVML, "/nonexistent"});
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  TopologyReport r = (*nvml)->Topology();
  ASSERT_EQ(r.omitted, "");
  EXPECT_EQ(r.uuids,
            (std::vector<std::string>{FakeUuid(0), FakeUuid(1), FakeUuid(2), FakeUuid(3)}));
  ASSERT_EQ(r.links.size(), 12u);  // every ordered pair
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      if (a == b) continue;
      const GpuPairLink* l = Link(r, a, b);
      ASSERT_NE(l, nullptr) << a << "-" << b;
      EXPECT_EQ(l->common_ancestor, NVML_TOPOLOGY_NODE) << a << "-" << b;
      // Bridged: 0-1 and 2-3, 4 NVLinks each way; nothing between the pairs (1-2 included).
      EXPECT_EQ(l->nvlinks, a / 2 == b / 2 ? 4u : 0u) << a << "-" << b;
    }
  }
  // The PCI bus ids the NVLinks' remote ends name reach ListGpus too.
  auto gpus = (*nvml)->ListGpus();
  ASSERT_TRUE(gpus.ok());
  EXPECT_EQ((*gpus)[1].pci_bus_id, "0000:20:00.0");
}

TEST(NvmlTopology, EightGpuNvswitchBoxLinksEveryPairThroughTheSwitches) {
  FakeBox(8, "nvlink8x");
  auto nvml = Nvml::Open({FRACGPU_FAKE_NVML, "/nonexistent"});
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  TopologyReport r = (*nvml)->Topology();
  ASSERT_EQ(r.omitted, "");
  ASSERT_EQ(r.links.size(), 56u);
  for (int a = 0; a < 8; ++a) {
    for (int b = 0; b < 8; ++b) {
      if (a == b) continue;
      const GpuPairLink* l = Link(r, a, b);
      ASSERT_NE(l, nullptr) << a << "-" << b;
      // 18 links to the NVSwitches each: the pair's count is the smaller, 18.
      EXPECT_EQ(l->nvlinks, 18u) << a << "-" << b;
      // GPUs 0-3 on one socket, 4-7 on the other.
      EXPECT_EQ(l->common_ancestor, a / 4 == b / 4 ? NVML_TOPOLOGY_NODE : NVML_TOPOLOGY_SYSTEM)
          << a << "-" << b;
    }
  }
}

TEST(NvmlTopology, AnExplicitLinkListAndAPcieBox) {
  FakeBox(3, "links:0-2x2");
  auto nvml = Nvml::Open({FRACGPU_FAKE_NVML, "/nonexistent"});
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  TopologyReport r = (*nvml)->Topology();
  ASSERT_EQ(r.omitted, "");
  EXPECT_EQ(Link(r, 0, 2)->nvlinks, 2u);
  EXPECT_EQ(Link(r, 2, 0)->nvlinks, 2u);
  EXPECT_EQ(Link(r, 0, 1)->nvlinks, 0u);
  EXPECT_EQ(Link(r, 1, 2)->nvlinks, 0u);
  setenv("FAKE_GPU_TOPOLOGY", "pcie", 1);
  r = (*nvml)->Topology();
  ASSERT_EQ(r.omitted, "");
  ASSERT_EQ(r.links.size(), 6u);
  for (const GpuPairLink& l : r.links) {
    EXPECT_EQ(l.nvlinks, 0u);
    EXPECT_EQ(l.common_ancestor, NVML_TOPOLOGY_NODE);
  }
}

TEST(NvmlTopology, NoTopologyIsNoLinksWithTheReason) {
  // A driver that answers NOT_SUPPORTED (the fake without FAKE_GPU_TOPOLOGY).
  FakeBox(2, nullptr);
  auto nvml = Nvml::Open({FRACGPU_FAKE_NVML, "/nonexistent"});
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  TopologyReport r = (*nvml)->Topology();
  EXPECT_TRUE(r.links.empty());
  EXPECT_NE(r.omitted.find("nvmlDeviceGetPciInfo_v3 failed: NVML error 3 (Not Supported)"),
            std::string::npos)
      << r.omitted;
  EXPECT_NE(r.omitted.find("no GPU link scores (hami.io/node-nvidia-score) published"),
            std::string::npos)
      << r.omitted;
}

TEST(NvmlTopology, AMissingEntryPointIsNoLinksNotACrash) {
  // The older driver lacks nvmlDeviceGetNvLinkRemoteDeviceType.
  FakeBox(4, "nvlink2x");
  auto nvml = Nvml::Open({FRACGPU_FAKE_NVML_WITHOUT_FACTS, "/nonexistent"});
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  TopologyReport r = (*nvml)->Topology();
  EXPECT_TRUE(r.links.empty());
  EXPECT_EQ(r.omitted, std::string("NVML library ") + FRACGPU_FAKE_NVML_WITHOUT_FACTS +
                           " has no nvmlDeviceGetNvLinkRemoteDeviceType: no GPU link scores "
                           "(hami.io/node-nvidia-score) published");
}

}  // namespace
}  // namespace fracgpu::nvml
