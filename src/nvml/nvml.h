#pragma once
// GpuSource over the real NVML, loaded with dlopen("libnvidia-ml.so.1") (docs/design/ARCHITECTURE.md:
// our own prototypes, nvml_abi.h; no NVIDIA header at build time).

#include <memory>
#include <string>

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
  /// Creates the event set on first use (Xid critical errors on every device).
  Result<std::optional<XidEvent>> WaitXid(std::chrono::milliseconds timeout) override;

 private:
  struct Impl;
  explicit Nvml(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fracgpu::nvml
