#pragma once
// GpuSource over the real NVML, loaded with dlopen("libnvidia-ml.so.1")
// (docs/design/ARCHITECTURE.md: our own prototypes, src/api/nvml.h; no NVIDIA header at build
// time).

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nvml/gpu_source.h"

namespace fracgpu::nvml {

struct NvmlOptions {
  /// Library to dlopen; the default is what the driver installs.
  std::string library = "libnvidia-ml.so.1";
  /// Root of sysfs (tests point it at a temporary tree): NUMA nodes are read from
  /// `<sysfs_root>/bus/pci/devices/<bus id>/numa_node`.
  std::string sysfs_root = "/sys";
};

/// Reads the NUMA node of a PCI device from `<sysfs_root>/bus/pci/devices/<bus_id>/numa_node`.
/// A missing file or a negative value (no NUMA) gives 0. Errors: kInvalidArgument naming the
/// file and its content when it does not hold an integer.
Result<int32_t> ReadNumaNode(const std::string& sysfs_root, const std::string& bus_id);

/// Converts NVML's bus id ("00000000:3B:00.0", 8-digit domain, upper case) to sysfs's
/// ("0000:3b:00.0"). Errors: kInvalidArgument naming the value when it is not of that shape.
Result<std::string> SysfsBusId(const std::string& nvml_bus_id);

/// The name fracgpu publishes for an NVML architecture value (nvmlDeviceArchitecture_t, the
/// NVML_DEVICE_ARCH_* constants): 2 "Kepler", 3 "Maxwell", 4 "Pascal", 5 "Volta", 6 "Turing",
/// 7 "Ampere", 8 "Ada", 9 "Hopper", 10 "Blackwell", 11 "Orin" (NVML_DEVICE_ARCH_T23X); ""
/// for NVML_DEVICE_ARCH_UNKNOWN and every value this build does not know.
std::string ArchitectureName(unsigned int value);

/// The optional facts of every GPU and why any was left out.
struct FactsReport {
  std::map<std::string, GpuFacts> by_uuid;  ///< every GPU NVML lists, by UUID
  /// One line per fact left out: the entry point is not exported, answers
  /// NVML_ERROR_NOT_SUPPORTED or another error, or gives a value fracgpu cannot name.
  std::vector<std::string> omitted;
};

/// What connects GPU `a` to GPU `b` as NVML reports it, seen from `a` (the data HAMi's device
/// plugin scores, docs/device-plugin.md "Link scores").
struct GpuPairLink {
  std::string a, b;  ///< UUIDs
  /// nvmlDeviceGetTopologyCommonAncestor(a, b): an NVML_TOPOLOGY_* value.
  unsigned int common_ancestor = 0;
  /// Active NVLinks from `a` to `b`: those of `a`'s enabled links whose remote PCI bus id
  /// (nvmlDeviceGetNvLinkRemotePciInfo_v2) is `b`'s; when none is and `a` has enabled links,
  /// through NVSwitch: the smaller of `a`'s and `b`'s counts of enabled links whose remote
  /// device type is NVML_NVLINK_DEVICE_TYPE_SWITCH, when both have some; else 0.
  unsigned int nvlinks = 0;

  bool operator==(const GpuPairLink&) const = default;
};

/// The links between every ordered pair of the node's GPUs, or why there are none.
struct TopologyReport {
  std::vector<std::string> uuids;  ///< every GPU, in index order
  /// Every ordered pair (a, b), a != b, in index order of a then b; empty when `omitted` is set.
  std::vector<GpuPairLink> links;
  /// Set when the topology could not be read (an entry point is not exported, or a call
  /// failed); the line says which and that no link scores are published.
  std::string omitted;
};

/// The NVML-backed GpuSource. Not copyable; thread-compatible (one caller per method at a time;
/// ListGpus and WaitXid may run on different threads).
class Nvml final : public GpuSource {
 public:
  /// Loads the library and calls nvmlInit_v2. Errors: kUnavailable naming the library and
  /// dlerror() / the NVML error when it cannot be loaded or initialised, or a required entry
  /// point is missing.
  static Result<std::unique_ptr<Nvml>> Open(const NvmlOptions& options);
  ~Nvml() override;
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  Result<std::vector<GpuInfo>> ListGpus() override;
  /// Architecture (nvmlDeviceGetArchitecture), CUDA compute capability
  /// (nvmlDeviceGetCudaComputeCapability) and driver version (nvmlSystemGetDriverVersion, the
  /// same for every GPU). Each is optional: a missing entry point or an error leaves that fact
  /// "" and adds a line to `omitted`; never fails. A GPU whose handle or UUID cannot be read is
  /// left out (ListGpus reports that).
  FactsReport Facts();
  /// The link topology of every GPU pair, as HAMi's device plugin reads it (its
  /// pkg/device/nvidia/links.go): nvmlDeviceGetPciInfo_v3, nvmlDeviceGetTopologyCommonAncestor,
  /// and for each link 0 .. NVML_NVLINK_MAX_LINKS-1 nvmlDeviceGetNvLinkState,
  /// nvmlDeviceGetNvLinkRemotePciInfo_v2 and nvmlDeviceGetNvLinkRemoteDeviceType (a link that
  /// answers NVML_ERROR_NOT_SUPPORTED or NVML_ERROR_INVALID_ARGUMENT is skipped). Never fails:
  /// a missing entry point or any other error gives no links and the reason in `omitted`.
  TopologyReport Topology();
  /// Creates the event set on first use (Xid critical errors on every device).
  Result<std::optional<XidEvent>> WaitXid(std::chrono::milliseconds timeout) override;

 private:
  struct Impl;
  explicit Nvml(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fracgpu::nvml
