#include "nvml/nvml.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <utility>

#include "api/nvml.h"
#include "base/file.h"
#include "base/strings.h"
#include "nvml/library.h"

namespace fracgpu::nvml {

namespace {

// A sysfs attribute holds at most one page (4 KiB on x86_64, 64 KiB on some arm64 kernels).
constexpr size_t kMaxSysfsAttributeBytes = size_t{64} << 10;

bool IsHex(const std::string& s) {
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return !s.empty();
}

}  // namespace

Result<std::string> SysfsBusId(const std::string& nvml_bus_id) {
  // Shape: <domain>:<bus>:<device>.<function>, domain 4 or 8 hex digits.
  std::string id = nvml_bus_id;
  auto bad = [&] {
    return InvalidArgument("PCI bus id must look like 00000000:3B:00.0, got \"" + nvml_bus_id +
                           "\"");
  };
  size_t c1 = id.find(':');
  size_t c2 = c1 == std::string::npos ? c1 : id.find(':', c1 + 1);
  size_t dot = c2 == std::string::npos ? c2 : id.find('.', c2 + 1);
  if (dot == std::string::npos) return bad();
  std::string domain = id.substr(0, c1), bus = id.substr(c1 + 1, c2 - c1 - 1),
              dev = id.substr(c2 + 1, dot - c2 - 1), fn = id.substr(dot + 1);
  if ((domain.size() != 4 && domain.size() != 8) || bus.size() != 2 || dev.size() != 2 ||
      fn.size() != 1 || !IsHex(domain) || !IsHex(bus) || !IsHex(dev) || !IsHex(fn)) {
    return bad();
  }
  if (domain.size() == 8) {
    if (domain.substr(0, 4) != "0000") return bad();
    domain = domain.substr(4);
  }
  std::string out = domain + ":" + bus + ":" + dev + "." + fn;
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Result<int32_t> ReadNumaNode(const std::string& sysfs_root, const std::string& bus_id) {
  std::string path = sysfs_root + "/bus/pci/devices/" + bus_id + "/numa_node";
  // A sysfs attribute holds at most one page; a missing or unreadable one means "no NUMA node".
  auto read = base::ReadFile(path, kMaxSysfsAttributeBytes);
  if (!read.ok()) return 0;
  std::string text(base::Trim(*read));
  int32_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty()) {
    return InvalidArgument(path + " must hold an integer NUMA node, got \"" + text.substr(0, 64) +
                           "\"");
  }
  return value < 0 ? 0 : value;
}

struct Nvml::Impl {
  NvmlOptions options;
  std::unique_ptr<Library> lib;
  decltype(&::nvmlDeviceGetCount_v2) get_count = nullptr;
  decltype(&::nvmlDeviceGetHandleByIndex_v2) get_handle = nullptr;
  decltype(&::nvmlDeviceGetIndex) get_index = nullptr;
  decltype(&::nvmlDeviceGetUUID) get_uuid = nullptr;
  decltype(&::nvmlDeviceGetName) get_name = nullptr;
  decltype(&::nvmlDeviceGetMemoryInfo) get_memory = nullptr;
  decltype(&::nvmlDeviceGetPciInfo_v3) get_pci = nullptr;
  decltype(&::nvmlEventSetCreate) event_create = nullptr;
  decltype(&::nvmlDeviceRegisterEvents) register_events = nullptr;
  decltype(&::nvmlEventSetWait_v2) event_wait = nullptr;
  decltype(&::nvmlEventSetFree) event_free = nullptr;
  nvmlEventSet_t event_set = nullptr;
  // Optional facts (older drivers lack them).
  decltype(&::nvmlDeviceGetArchitecture) get_arch = nullptr;
  decltype(&::nvmlDeviceGetCudaComputeCapability) get_cc = nullptr;
  decltype(&::nvmlSystemGetDriverVersion) get_driver_version = nullptr;
  // Optional: the link topology (hami.io/node-nvidia-score).
  decltype(&::nvmlDeviceGetTopologyCommonAncestor) get_ancestor = nullptr;
  decltype(&::nvmlDeviceGetNvLinkState) get_nvlink_state = nullptr;
  decltype(&::nvmlDeviceGetNvLinkRemotePciInfo_v2) get_nvlink_remote_pci = nullptr;
  decltype(&::nvmlDeviceGetNvLinkRemoteDeviceType) get_nvlink_remote_type = nullptr;

  std::string Error(const char* call, nvmlReturn_t r) const { return lib->Error(call, r); }

  Result<std::string> DeviceUuid(nvmlDevice_t device) const {
    char buf[kNvmlDeviceUuidBufferSize] = {};
    nvmlReturn_t r = get_uuid(device, buf, sizeof(buf));
    if (r != NVML_SUCCESS) return Unavailable(Error("nvmlDeviceGetUUID", r));
    return std::string(buf, strnlen(buf, sizeof(buf)));
  }
};

Result<std::unique_ptr<Nvml>> Nvml::Open(const NvmlOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  auto lib = Library::Open(options.library,
                           {"nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2",
                            "nvmlDeviceGetUUID", "nvmlDeviceGetName", "nvmlDeviceGetMemoryInfo"});
  if (!lib.ok()) return lib.status();
  impl->lib = std::move(lib).value();
  const Library& l = *impl->lib;
  impl->get_count = l.Get<decltype(&::nvmlDeviceGetCount_v2)>("nvmlDeviceGetCount_v2");
  impl->get_handle =
      l.Get<decltype(&::nvmlDeviceGetHandleByIndex_v2)>("nvmlDeviceGetHandleByIndex_v2");
  impl->get_index = l.Get<decltype(&::nvmlDeviceGetIndex)>("nvmlDeviceGetIndex");
  impl->get_uuid = l.Get<decltype(&::nvmlDeviceGetUUID)>("nvmlDeviceGetUUID");
  impl->get_name = l.Get<decltype(&::nvmlDeviceGetName)>("nvmlDeviceGetName");
  impl->get_memory = l.Get<decltype(&::nvmlDeviceGetMemoryInfo)>("nvmlDeviceGetMemoryInfo");
  // Optional: PCI (NUMA), Xid events, the ResourceSlice facts.
  impl->get_pci = l.Get<decltype(&::nvmlDeviceGetPciInfo_v3)>("nvmlDeviceGetPciInfo_v3");
  impl->event_create = l.Get<decltype(&::nvmlEventSetCreate)>("nvmlEventSetCreate");
  impl->register_events = l.Get<decltype(&::nvmlDeviceRegisterEvents)>("nvmlDeviceRegisterEvents");
  impl->event_wait = l.Get<decltype(&::nvmlEventSetWait_v2)>("nvmlEventSetWait_v2");
  impl->event_free = l.Get<decltype(&::nvmlEventSetFree)>("nvmlEventSetFree");
  impl->get_arch = l.Get<decltype(&::nvmlDeviceGetArchitecture)>("nvmlDeviceGetArchitecture");
  impl->get_cc =
      l.Get<decltype(&::nvmlDeviceGetCudaComputeCapability)>("nvmlDeviceGetCudaComputeCapability");
  impl->get_driver_version =
      l.Get<decltype(&::nvmlSystemGetDriverVersion)>("nvmlSystemGetDriverVersion");
  impl->get_ancestor = l.Get<decltype(&::nvmlDeviceGetTopologyCommonAncestor)>(
      "nvmlDeviceGetTopologyCommonAncestor");
  impl->get_nvlink_state = l.Get<decltype(&::nvmlDeviceGetNvLinkState)>("nvmlDeviceGetNvLinkState");
  impl->get_nvlink_remote_pci = l.Get<decltype(&::nvmlDeviceGetNvLinkRemotePciInfo_v2)>(
      "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  impl->get_nvlink_remote_type = l.Get<decltype(&::nvmlDeviceGetNvLinkRemoteDeviceType)>(
      "nvmlDeviceGetNvLinkRemoteDeviceType");
  return std::unique_ptr<Nvml>(new Nvml(std::move(impl)));
}

Nvml::Nvml(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Nvml::~Nvml() {
  if (impl_->event_set != nullptr && impl_->event_free != nullptr)
    impl_->event_free(impl_->event_set);
  // impl_->lib shuts NVML down (and keeps it mapped: nvml/library.h).
}

Result<std::vector<GpuInfo>> Nvml::ListGpus() {
  Impl& n = *impl_;
  unsigned int count = 0;
  nvmlReturn_t r = n.get_count(&count);
  if (r != NVML_SUCCESS) return Unavailable(n.Error("nvmlDeviceGetCount_v2", r));
  std::vector<GpuInfo> gpus;
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    r = n.get_handle(i, &device);
    if (r != NVML_SUCCESS)
      return Unavailable(n.Error("nvmlDeviceGetHandleByIndex_v2", r) + " for index " +
                         std::to_string(i));
    GpuInfo gpu;
    gpu.index = i;
    if (n.get_index != nullptr) {
      unsigned int index = i;
      if (n.get_index(device, &index) == NVML_SUCCESS) gpu.index = index;
    }
    auto uuid = n.DeviceUuid(device);
    if (!uuid.ok()) return uuid.status().WithPrefix("GPU index " + std::to_string(i));
    gpu.uuid = *uuid;
    if (gpu.uuid.empty())
      return Internal("GPU index " + std::to_string(i) + ": NVML returned an empty UUID");
    char name[kNvmlDeviceNameBufferSize] = {};
    r = n.get_name(device, name, sizeof(name));
    if (r != NVML_SUCCESS) return Unavailable(n.Error("nvmlDeviceGetName", r) + " for " + gpu.uuid);
    gpu.name.assign(name, strnlen(name, sizeof(name)));
    nvmlMemory_t memory{};
    r = n.get_memory(device, &memory);
    if (r != NVML_SUCCESS)
      return Unavailable(n.Error("nvmlDeviceGetMemoryInfo", r) + " for " + gpu.uuid);
    gpu.total_memory_bytes = memory.total;
    if (n.get_pci != nullptr) {
      nvmlPciInfo_t pci{};
      if (n.get_pci(device, &pci) == NVML_SUCCESS) {
        std::string bus_id(pci.busId, strnlen(pci.busId, sizeof(pci.busId)));
        auto sysfs_id = SysfsBusId(bus_id);
        if (!sysfs_id.ok()) return sysfs_id.status().WithPrefix(gpu.uuid);
        gpu.pci_bus_id = *sysfs_id;
        auto numa = ReadNumaNode(n.options.sysfs_root, gpu.pci_bus_id);
        if (!numa.ok()) return numa.status().WithPrefix(gpu.uuid);
        gpu.numa_node = *numa;
      }
    }
    gpus.push_back(std::move(gpu));
  }
  return gpus;
}

std::string ArchitectureName(unsigned int value) {
  switch (value) {
    case NVML_DEVICE_ARCH_KEPLER:
      return "Kepler";
    case NVML_DEVICE_ARCH_MAXWELL:
      return "Maxwell";
    case NVML_DEVICE_ARCH_PASCAL:
      return "Pascal";
    case NVML_DEVICE_ARCH_VOLTA:
      return "Volta";
    case NVML_DEVICE_ARCH_TURING:
      return "Turing";
    case NVML_DEVICE_ARCH_AMPERE:
      return "Ampere";
    case NVML_DEVICE_ARCH_ADA:
      return "Ada";
    case NVML_DEVICE_ARCH_HOPPER:
      return "Hopper";
    case NVML_DEVICE_ARCH_BLACKWELL:
      return "Blackwell";
    case NVML_DEVICE_ARCH_T23X:
      return "Orin";
    default:
      return "";
  }
}

FactsReport Nvml::Facts() {
  Impl& n = *impl_;
  FactsReport report;
  auto missing = [&](const char* symbol, const char* fact) {
    report.omitted.push_back("NVML library " + n.options.library + " has no " + symbol + ": " +
                             fact + " omitted");
  };
  // The driver version is the system's: one call for every GPU.
  std::string driver_version;
  if (n.get_driver_version == nullptr) {
    missing("nvmlSystemGetDriverVersion", "driverVersion");
  } else {
    char buf[kNvmlDriverVersionBufferSize] = {};
    nvmlReturn_t r = n.get_driver_version(buf, sizeof(buf));
    if (r == NVML_SUCCESS) {
      driver_version = std::string(base::Trim(std::string_view(buf, strnlen(buf, sizeof(buf)))));
    } else {
      report.omitted.push_back(n.Error("nvmlSystemGetDriverVersion", r) +
                               ": driverVersion omitted");
    }
  }
  if (n.get_arch == nullptr) missing("nvmlDeviceGetArchitecture", "architecture");
  if (n.get_cc == nullptr) missing("nvmlDeviceGetCudaComputeCapability", "computeCapability");
  unsigned int count = 0;
  if (nvmlReturn_t r = n.get_count(&count); r != NVML_SUCCESS) {
    report.omitted.push_back(n.Error("nvmlDeviceGetCount_v2", r) + ": every fact omitted");
    return report;
  }
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    if (n.get_handle(i, &device) != NVML_SUCCESS) continue;
    auto uuid = n.DeviceUuid(device);
    if (!uuid.ok() || uuid->empty()) continue;
    GpuFacts facts;
    facts.driver_version = driver_version;
    if (n.get_arch != nullptr) {
      nvmlDeviceArchitecture_t arch = NVML_DEVICE_ARCH_UNKNOWN;
      nvmlReturn_t r = n.get_arch(device, &arch);
      if (r != NVML_SUCCESS) {
        report.omitted.push_back(n.Error("nvmlDeviceGetArchitecture", r) + " for " + *uuid +
                                 ": architecture omitted");
      } else {
        facts.architecture = ArchitectureName(arch);
        if (facts.architecture.empty()) {
          report.omitted.push_back("nvmlDeviceGetArchitecture gave " + std::to_string(arch) +
                                   " for " + *uuid +
                                   ", which has no name here: architecture omitted");
        }
      }
    }
    if (n.get_cc != nullptr) {
      int major = -1, minor = -1;
      nvmlReturn_t r = n.get_cc(device, &major, &minor);
      if (r != NVML_SUCCESS) {
        report.omitted.push_back(n.Error("nvmlDeviceGetCudaComputeCapability", r) + " for " +
                                 *uuid + ": computeCapability omitted");
      } else if (major < 0 || minor < 0) {
        report.omitted.push_back("nvmlDeviceGetCudaComputeCapability gave " +
                                 std::to_string(major) + "." + std::to_string(minor) + " for " +
                                 *uuid + ": computeCapability omitted");
      } else {
        facts.compute_capability = std::to_string(major) + "." + std::to_string(minor);
      }
    }
    report.by_uuid[*uuid] = std::move(facts);
  }
  return report;
}

namespace {

// A PCI bus id as HAMi compares them (its PciInfo.BusID): lower case, the domain's leading
// "0000" dropped, so NVML's "00000000:3B:00.0" and "0000:3b:00.0" are the same device.
std::string ComparableBusId(const char* raw, size_t size) {
  std::string id(raw, strnlen(raw, size));
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (id != "0000" && id.starts_with("0000")) id = id.substr(4);
  return id;
}

bool SkippedLink(nvmlReturn_t r) {
  return r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_INVALID_ARGUMENT;
}

}  // namespace

TopologyReport Nvml::Topology() {
  Impl& n = *impl_;
  TopologyReport report;
  auto none = [&](const std::string& why) {
    report.links.clear();
    report.omitted = why + ": no GPU link scores (hami.io/node-nvidia-score) published";
    return report;
  };
  const std::pair<bool, const char*> entry_points[] = {
      {n.get_pci != nullptr, "nvmlDeviceGetPciInfo_v3"},
      {n.get_ancestor != nullptr, "nvmlDeviceGetTopologyCommonAncestor"},
      {n.get_nvlink_state != nullptr, "nvmlDeviceGetNvLinkState"},
      {n.get_nvlink_remote_pci != nullptr, "nvmlDeviceGetNvLinkRemotePciInfo_v2"},
      {n.get_nvlink_remote_type != nullptr, "nvmlDeviceGetNvLinkRemoteDeviceType"}};
  for (auto [present, name] : entry_points) {
    if (!present) return none("NVML library " + n.options.library + " has no " + name);
  }
  unsigned int count = 0;
  if (nvmlReturn_t r = n.get_count(&count); r != NVML_SUCCESS)
    return none(n.Error("nvmlDeviceGetCount_v2", r));
  struct Gpu {
    nvmlDevice_t device = nullptr;
    std::string bus_id;
    std::vector<std::string> remote_bus_ids;  // of its enabled links
    unsigned int switch_links = 0;            // enabled links to an NVSwitch
  };
  std::vector<Gpu> gpus(count);
  for (unsigned int i = 0; i < count; ++i) {
    Gpu& g = gpus[i];
    std::string at = " for GPU index " + std::to_string(i);
    if (nvmlReturn_t r = n.get_handle(i, &g.device); r != NVML_SUCCESS)
      return none(n.Error("nvmlDeviceGetHandleByIndex_v2", r) + at);
    auto uuid = n.DeviceUuid(g.device);
    if (!uuid.ok()) return none(uuid.status().message() + at);
    report.uuids.push_back(*uuid);
    nvmlPciInfo_t pci{};
    if (nvmlReturn_t r = n.get_pci(g.device, &pci); r != NVML_SUCCESS)
      return none(n.Error("nvmlDeviceGetPciInfo_v3", r) + at);
    g.bus_id = ComparableBusId(pci.busId, sizeof(pci.busId));
    for (unsigned int link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
      std::string on = at + " link " + std::to_string(link);
      nvmlEnableState_t state = NVML_FEATURE_DISABLED;
      nvmlReturn_t r = n.get_nvlink_state(g.device, link, &state);
      if (SkippedLink(r)) continue;
      if (r != NVML_SUCCESS) return none(n.Error("nvmlDeviceGetNvLinkState", r) + on);
      if (state != NVML_FEATURE_ENABLED) continue;
      nvmlPciInfo_t remote{};
      r = n.get_nvlink_remote_pci(g.device, link, &remote);
      if (r == NVML_SUCCESS) {
        g.remote_bus_ids.push_back(ComparableBusId(remote.busId, sizeof(remote.busId)));
      } else if (!SkippedLink(r)) {
        return none(n.Error("nvmlDeviceGetNvLinkRemotePciInfo_v2", r) + on);
      }
      nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
      r = n.get_nvlink_remote_type(g.device, link, &type);
      if (r == NVML_SUCCESS) {
        if (type == NVML_NVLINK_DEVICE_TYPE_SWITCH) ++g.switch_links;
      } else if (!SkippedLink(r)) {
        return none(n.Error("nvmlDeviceGetNvLinkRemoteDeviceType", r) + on);
      }
    }
  }
  for (unsigned int i = 0; i < count; ++i) {
    for (unsigned int j = 0; j < count; ++j) {
      if (i == j) continue;
      GpuPairLink link;
      link.a = report.uuids[i];
      link.b = report.uuids[j];
      nvmlGpuTopologyLevel_t level = NVML_TOPOLOGY_SYSTEM;
      if (nvmlReturn_t r = n.get_ancestor(gpus[i].device, gpus[j].device, &level);
          r != NVML_SUCCESS) {
        return none(n.Error("nvmlDeviceGetTopologyCommonAncestor", r) + " for GPU indices " +
                    std::to_string(i) + " and " + std::to_string(j));
      }
      link.common_ancestor = level;
      const Gpu& a = gpus[i];
      const Gpu& b = gpus[j];
      link.nvlinks = static_cast<unsigned int>(
          std::count(a.remote_bus_ids.begin(), a.remote_bus_ids.end(), b.bus_id));
      if (link.nvlinks == 0 && !a.remote_bus_ids.empty() && a.switch_links > 0 &&
          b.switch_links > 0) {
        link.nvlinks = std::min(a.switch_links, b.switch_links);
      }
      report.links.push_back(std::move(link));
    }
  }
  return report;
}

Result<std::optional<XidEvent>> Nvml::WaitXid(std::chrono::milliseconds timeout) {
  Impl& n = *impl_;
  if (n.event_create == nullptr || n.register_events == nullptr || n.event_wait == nullptr) {
    return Unavailable("NVML library " + n.options.library +
                       " has no event API: Xid health checks are off");
  }
  if (n.event_set == nullptr) {
    nvmlReturn_t r = n.event_create(&n.event_set);
    if (r != NVML_SUCCESS) return Unavailable(n.Error("nvmlEventSetCreate", r));
    unsigned int count = 0;
    r = n.get_count(&count);
    if (r != NVML_SUCCESS) return Unavailable(n.Error("nvmlDeviceGetCount_v2", r));
    for (unsigned int i = 0; i < count; ++i) {
      nvmlDevice_t device = nullptr;
      if (n.get_handle(i, &device) != NVML_SUCCESS) continue;
      r = n.register_events(device, nvmlEventTypeXidCriticalError, n.event_set);
      // A device that does not support Xid events is simply not watched.
      if (r != NVML_SUCCESS && r != NVML_ERROR_NOT_SUPPORTED) {
        return Unavailable(n.Error("nvmlDeviceRegisterEvents", r) + " for index " +
                           std::to_string(i));
      }
    }
  }
  nvmlEventData_t data{};
  auto ms = static_cast<unsigned int>(std::max<int64_t>(0, timeout.count()));
  nvmlReturn_t r = n.event_wait(n.event_set, &data, ms);
  if (r == NVML_ERROR_TIMEOUT) return std::optional<XidEvent>();
  if (r != NVML_SUCCESS) return Unavailable(n.Error("nvmlEventSetWait_v2", r));
  if ((data.eventType & nvmlEventTypeXidCriticalError) == 0) return std::optional<XidEvent>();
  XidEvent event;
  event.xid = data.eventData;
  if (data.device != nullptr) {
    auto uuid = n.DeviceUuid(data.device);
    if (uuid.ok()) event.uuid = *uuid;
  }
  return std::optional<XidEvent>(event);
}

}  // namespace fracgpu::nvml
