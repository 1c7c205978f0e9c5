#pragma once
// ResourceSlice publishing (resource.k8s.io/v1, Kubernetes 1.34+): one device per GPU of the
// node, in one pool named after the node, kept current (pool generation bumped on every
// change of the devices, one slice per pool).
//
// Per device (k8s.io/api/resource/v1 types.go Device, DeviceAttribute, DeviceCapacity,
// CapacityRequestPolicy{,Range}; consumable capacity is KEP-5075, feature gate
// DRAConsumableCapacity):
//   attributes  uuid, productName, type (the register annotation's type), typeTokens
//               (",NVIDIA,A100,SXM4,80GB,": the use-gputype tokens, so CEL can match a whole
//               token with contains(",A100,")), index, numaNode, healthy, pciBusID, and when
//               known architecture, computeCapability (version), driverVersion (version)
//   capacity    memory = the card's MiB (× deviceMemoryScaling), cores = 100
//   consumable  allowMultipleAllocations + requestPolicy {default, validRange{min,max,step}}
//               on both capacities; off: whole-device allocation (no policy, no sharing).

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/device.h"
#include "nvml/gpu_source.h"

namespace fracgpu::k8s {
class Client;
}

namespace fracgpu::dra {

using nlohmann::json;

/// Facts NVML knows beyond nvml::GpuInfo (nvml::Nvml::Facts); empty strings are left out of
/// the slice.
using GpuFacts = nvml::GpuFacts;

/// How devices are published.
struct SliceOptions {
  std::string driver;     ///< spec.driver (kDriverName)
  std::string node_name;  ///< spec.nodeName and the pool name
  /// Publish allowMultipleAllocations and request policies (KEP-5075); false = whole cards.
  bool consumable_capacity = true;
  /// requestPolicy.default of cores, percent (HAMi's defaultCores).
  int32_t default_cores = 0;
  /// The Node's metadata.uid: the slice gets an ownerReference to its Node (as the upstream
  /// kubeletplugin helper writes it) so the garbage collector removes it with the Node.
  /// "" = no ownerReference (the Node could not be read).
  std::string node_uid;
  /// Unhealthy devices carry the NoExecute taint kTaintUnhealthy (resource/v1 Device.taints).
  /// An API server without DRADeviceTaints drops the field: the publisher then stops sending it.
  bool device_taints = true;
};

/// The taint key of an unhealthy GPU (its effect: NoExecute).
inline constexpr const char* kTaintUnhealthy = "gpu.fracgpu.io/unhealthy";

/// The name of a node's slice: "<node>-<driver>" when that fits a DNS subdomain (253
/// characters, metav1 ObjectMeta.name of ResourceSlice); otherwise the node name is cut and 8
/// hex digits of a hash of the whole name keep it unique: "<node prefix>-<hash>-<driver>".
std::string SliceNameFor(const std::string& node_name, const std::string& driver);

/// The device name of the GPU with NVML index `index`: "gpu-<index>" (a DNS label).
std::string DeviceName(int32_t index);

/// A version attribute value (semver 2.0.0, resource/v1 DeviceAttribute.version) from a
/// dotted number: "8.0" → "8.0.0", "535.104.05" → "535.104.5" (leading zeros are not semver).
/// Errors: kInvalidArgument naming the value when it is not 1–3 dot-separated numbers.
Result<std::string> SemverOf(const std::string& dotted);

/// One line per fact of `facts` that BuildSliceDevices leaves out because its version is not
/// a dotted number SemverOf accepts (naming the GPU, the attribute and the value); empty when
/// every non-empty fact is published.
std::vector<std::string> UnpublishableFacts(const std::map<std::string, GpuFacts>& facts);

/// The ",TOKEN,TOKEN," form of a GPU type's use-gputype tokens (core/gputype.h).
std::string TypeTokensAttribute(const std::string& gpu_type);

/// spec.devices of the node's slice: one entry per register entry of `devices` (the device
/// plugin's BuildDeviceInfos, health included); `gpus` gives product names and bus IDs by
/// UUID, `facts` the optional NVML facts by UUID.
json BuildSliceDevices(const std::vector<core::DeviceInfo>& devices,
                       const std::vector<nvml::GpuInfo>& gpus,
                       const std::map<std::string, GpuFacts>& facts, const SliceOptions& options);

/// The ResourceSlice object (name SliceNameFor; ownerReference to the Node when its uid is
/// known) for `devices` at pool `generation`.
json BuildResourceSlice(const json& devices, const SliceOptions& options, int64_t generation);

/// Whether a slice spec read back from the API server says what `want` says. Quantities under
/// `capacity` compare by value: the API server stores them canonicalised ("16384Mi" reads back
/// as "16Gi"), so comparing strings would rewrite the slice on every sync.
bool SameSliceSpec(const json& published, const json& want);

/// The consumable-capacity fields (KEP-5075) that `published` (a ResourceSlice read back from
/// the API server) lacks although `sent` (what was written) had them: "devices[i].
/// allowMultipleAllocations", "devices[i].capacity.memory.requestPolicy", … . An API server
/// without the DRAConsumableCapacity feature gate drops them silently (1.34–1.35 by default);
/// empty when every field came back.
std::vector<std::string> DroppedConsumableFields(const json& sent, const json& published);

/// Whether `stored` (a ResourceSlice the API server answered a write with) lacks the taints
/// some device of `sent_devices` carried: the API server does not serve DRADeviceTaints.
bool DroppedTaints(const json& sent_devices, const json& stored);

/// Keeps the node's ResourceSlice equal to the devices it is given. Thread-compatible.
class SlicePublisher {
 public:
  /// `client` not owned.
  SlicePublisher(SliceOptions options, k8s::Client* client)
      : options_(std::move(options)), client_(client) {}
  /// Creates the slice (generation 1), or updates it with generation + 1 when its devices or
  /// pool differ; nothing when equal. Returns the pool generation now published.
  /// Errors: the API server's (kUnavailable, kConflict after retries, …).
  Result<int64_t> Sync(const json& devices);
  /// Deletes the node's slice (driver uninstall). NotFound counts as done.
  Status Delete();
  std::string SliceName() const;
  /// The slice as the API server stores it now. Errors: the API server's (kNotFound, …).
  Result<json> Read() const;
  /// Switches to publishing whole devices (no allowMultipleAllocations, no request policies).
  void UseWholeDevices() { options_.consumable_capacity = false; }
  const SliceOptions& options() const { return options_; }

 private:
  // Stops sending taints (options_.device_taints = false) once a write came back without them.
  void NoteDroppedTaints(const json& sent_devices, const json& stored);
  SliceOptions options_;
  k8s::Client* client_;
};

}  // namespace fracgpu::dra
