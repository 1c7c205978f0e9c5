#include "dra/slices.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <optional>

#include "base/strings.h"
#include "core/gputype.h"
#include "core/quantity.h"
#include "dra/api.h"
#include "k8s/client.h"

namespace fracgpu::dra {

namespace {

constexpr const char* kSlicesPath = "/apis/resource.k8s.io/v1/resourceslices";
// resource/v1 DeviceAttributeMaxValueLength.
constexpr size_t kMaxAttributeValue = 64;

json Str(const std::string& v) { return json{{"string", v.substr(0, kMaxAttributeValue)}}; }

std::string Mi(int64_t mib) { return std::to_string(mib) + "Mi"; }

}  // namespace

std::string DeviceName(int32_t index) { return "gpu-" + std::to_string(index); }

Result<std::string> SemverOf(const std::string& dotted) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : dotted) {
    if (c == '.') {
      parts.push_back(cur);
      cur.clear();
    } else if (std::isdigit(static_cast<unsigned char>(c)) && cur.size() < 9) {
      cur.push_back(c);
    } else {
      return InvalidArgument("version \"" + dotted.substr(0, 64) +
                             "\" is not 1 to 3 dot-separated numbers");
    }
  }
  parts.push_back(cur);
  if (parts.size() > 3 ||
      std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); })) {
    return InvalidArgument("version \"" + dotted.substr(0, 64) +
                           "\" is not 1 to 3 dot-separated numbers");
  }
  while (parts.size() < 3) parts.push_back("0");
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i)
    out += (i ? "." : "") + std::to_string(std::stoll(parts[i]));
  return out;
}

std::vector<std::string> UnpublishableFacts(const std::map<std::string, GpuFacts>& facts) {
  std::vector<std::string> out;
  for (const auto& [uuid, f] : facts) {
    for (auto [attr, value] :
         {std::pair<const char*, const std::string*>{"computeCapability", &f.compute_capability},
          std::pair<const char*, const std::string*>{"driverVersion", &f.driver_version}}) {
      if (value->empty()) continue;
      if (auto v = SemverOf(*value); !v.ok())
        out.push_back(uuid + ": attribute " + attr + " omitted: " + v.status().message());
    }
  }
  return out;
}

std::string TypeTokensAttribute(const std::string& gpu_type) {
  std::string out = ",";
  for (const auto& t : core::GpuTypeTokens(gpu_type)) out += t + ",";
  return out;
}

json BuildSliceDevices(const std::vector<core::DeviceInfo>& devices,
                       const std::vector<nvml::GpuInfo>& gpus,
                       const std::map<std::string, GpuFacts>& facts, const SliceOptions& options) {
  json out = json::array();
  for (const auto& d : devices) {
    json attrs = {{"uuid", Str(d.uuid)},
                  {"type", Str(d.type)},
                  {"index", {{"int", d.index}}},
                  {"numaNode", {{"int", d.numa}}},
                  {"healthy", {{"bool", d.health}}}};
    std::string tokens = TypeTokensAttribute(d.type);
    if (tokens.size() <= kMaxAttributeValue) attrs["typeTokens"] = Str(tokens);
    auto g = std::find_if(gpus.begin(), gpus.end(),
                          [&](const nvml::GpuInfo& x) { return x.uuid == d.uuid; });
    if (g != gpus.end()) {
      attrs["productName"] = Str(g->name);
      if (!g->pci_bus_id.empty()) attrs["pciBusID"] = Str(g->pci_bus_id);
    }
    if (auto f = facts.find(d.uuid); f != facts.end()) {
      if (!f->second.architecture.empty()) attrs["architecture"] = Str(f->second.architecture);
      if (auto v = SemverOf(f->second.compute_capability); v.ok())
        attrs["computeCapability"] = {{"version", *v}};
      if (auto v = SemverOf(f->second.driver_version); v.ok())
        attrs["driverVersion"] = {{"version", *v}};
    }
    json memory = {{"value", Mi(d.devmem_mib)}};
    json cores = {{"value", "100"}};
    json dev = {{"name", DeviceName(d.index)}, {"attributes", attrs}};
    if (!d.health && options.device_taints) {
      // resource/v1 Device.taints (DRADeviceTaints, on by default from 1.36): NoExecute keeps
      // new claims off the GPU and has kube-controller-manager evict the pods whose claims
      // already hold it, so they are placed again elsewhere instead of failing prepare forever.
      dev["taints"] = json::array({{{"key", kTaintUnhealthy}, {"effect", "NoExecute"}}});
    }
    if (options.consumable_capacity) {
      // A request without a memory entry takes the whole card, whatever the device config's
      // defaultMemory: the whole-GPU class asks for no memory, and only taking all of it keeps
      // every other share (at least validRange.min) off the card. defaultMemory cannot be a
      // policy default here without making "whole" a defaultMemory-sized share.
      int64_t def_mem = d.devmem_mib;
      int32_t def_cores = std::clamp(options.default_cores, 0, 100);
      memory["requestPolicy"] = {
          {"default", Mi(def_mem)},
          {"validRange", {{"min", "1Mi"}, {"max", Mi(d.devmem_mib)}, {"step", "1Mi"}}}};
      cores["requestPolicy"] = {{"default", std::to_string(def_cores)},
                                {"validRange", {{"min", "0"}, {"max", "100"}, {"step", "1"}}}};
      dev["allowMultipleAllocations"] = true;
    }
    dev["capacity"] = {{kCapacityMemory, memory}, {kCapacityCores, cores}};
    out.push_back(std::move(dev));
  }
  return out;
}

std::string SliceNameFor(const std::string& node_name, const std::string& driver) {
  return base::BoundedName(node_name, "-" + driver, 253);  // a DNS-1123 subdomain
}

json BuildResourceSlice(const json& devices, const SliceOptions& options, int64_t generation) {
  json metadata = {
      {"name", SliceNameFor(options.node_name, options.driver)},
      {"labels",
       {{"app.kubernetes.io/name", "fracgpu"}, {"app.kubernetes.io/component", "dra-driver"}}}};
  if (!options.node_uid.empty()) {
    metadata["ownerReferences"] = json::array({{{"apiVersion", "v1"},
                                                {"kind", "Node"},
                                                {"name", options.node_name},
                                                {"uid", options.node_uid},
                                                {"controller", true}}});
  }
  return json{
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceSlice"},
      {"metadata", metadata},
      {"spec",
       {{"driver", options.driver},
        {"nodeName", options.node_name},
        {"pool",
         {{"name", options.node_name}, {"generation", generation}, {"resourceSliceCount", 1}}},
        {"devices", devices}}}};
}

namespace {

// A quantity string's value as a whole number, when it is one.
std::optional<int64_t> WholeQuantity(const json& v) {
  if (!v.is_string()) return std::nullopt;
  auto q = core::ParseQuantity(v.get<std::string>());
  int64_t out = 0;
  if (!q.ok() || core::QuantityToInt64(*q, &out) != core::WholeStatus::kOk) return std::nullopt;
  return out;
}

bool Equivalent(const json& a, const json& b, bool quantities) {
  if (a.is_object() && b.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [k, v] : a.items()) {
      if (!b.contains(k) || !Equivalent(v, b[k], quantities || k == "capacity")) return false;
    }
    return true;
  }
  if (a.is_array() && b.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!Equivalent(a[i], b[i], quantities)) return false;
    }
    return true;
  }
  if (a == b) return true;
  if (!quantities) return false;
  auto x = WholeQuantity(a), y = WholeQuantity(b);
  return x && y && *x == *y;
}

}  // namespace

bool SameSliceSpec(const json& published, const json& want) {
  // The API server stamps taints[].timeAdded when the writer leaves it out.
  json p = published;
  if (p.contains("devices") && p["devices"].is_array()) {
    for (auto& d : p["devices"]) {
      if (!d.is_object() || !d.contains("taints") || !d["taints"].is_array()) continue;
      for (auto& t : d["taints"]) {
        if (t.is_object()) t.erase("timeAdded");
      }
    }
  }
  return Equivalent(p, want, false);
}

std::string SlicePublisher::SliceName() const {
  return SliceNameFor(options_.node_name, options_.driver);
}

Result<int64_t> SlicePublisher::Sync(const json& devices) {
  const std::string path = std::string(kSlicesPath) + "/" + SliceName();
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto cur = client_->Get(path);
    if (!cur.ok() && cur.status().code() == StatusCode::kNotFound) {
      auto created = client_->Create(kSlicesPath, BuildResourceSlice(devices, options_, 1));
      if (created.ok()) {
        NoteDroppedTaints(devices, *created);
        return int64_t{1};
      }
      if (created.status().code() == StatusCode::kConflict) continue;  // created meanwhile
      return created.status().WithPrefix("creating ResourceSlice " + SliceName());
    }
    if (!cur.ok()) return cur.status().WithPrefix("reading ResourceSlice " + SliceName());
    const json& spec = cur->contains("spec") ? (*cur)["spec"] : json::object();
    int64_t generation = 0;
    if (spec.contains("pool") && spec["pool"].contains("generation") &&
        spec["pool"]["generation"].is_number_integer()) {
      generation = spec["pool"]["generation"].get<int64_t>();
    }
    json want = BuildResourceSlice(devices, options_, generation);
    const json owners = (*cur)["metadata"].value("ownerReferences", json::array());
    bool same_owners = options_.node_uid.empty() || owners == want["metadata"]["ownerReferences"];
    bool same_spec = SameSliceSpec(spec, want["spec"]);
    if (same_spec && same_owners) return generation;
    // A new pool generation only when the devices changed; an ownerReference alone does not.
    if (!same_spec) want = BuildResourceSlice(devices, options_, generation + 1);
    want["metadata"]["resourceVersion"] = (*cur)["metadata"].value("resourceVersion", "");
    auto updated = client_->Update(path, want);
    if (updated.ok()) {
      NoteDroppedTaints(devices, *updated);
      return same_spec ? generation : generation + 1;
    }
    if (updated.status().code() == StatusCode::kConflict) continue;
    return updated.status().WithPrefix("updating ResourceSlice " + SliceName());
  }
  return Conflict("ResourceSlice " + SliceName() + " kept changing under us (5 attempts)");
}

std::vector<std::string> DroppedConsumableFields(const json& sent, const json& published) {
  std::vector<std::string> out;
  const json* sd = sent.contains("devices") ? &sent["devices"] : nullptr;
  const json* pd = published.contains("devices") ? &published["devices"] : nullptr;
  if (sd == nullptr || !sd->is_array()) return out;
  for (size_t i = 0; i < sd->size(); ++i) {
    const json& s = (*sd)[i];
    static const json kNone = json::object();
    const json& p = pd != nullptr && pd->is_array() && i < pd->size() ? (*pd)[i] : kNone;
    std::string at = "devices[" + std::to_string(i) + "]";
    if (s.contains("allowMultipleAllocations") && !p.contains("allowMultipleAllocations"))
      out.push_back(at + ".allowMultipleAllocations");
    if (!s.contains("capacity")) continue;
    for (const auto& [name, cap] : s["capacity"].items()) {
      if (!cap.is_object() || !cap.contains("requestPolicy")) continue;
      json::json_pointer ptr("/capacity/" + name + "/requestPolicy");
      if (!p.contains(ptr)) out.push_back(at + ".capacity." + name + ".requestPolicy");
    }
  }
  return out;
}

bool DroppedTaints(const json& sent_devices, const json& stored) {
  json::json_pointer p("/spec/devices");
  const json* got = stored.contains(p) ? &stored.at(p) : nullptr;
  for (size_t i = 0; i < sent_devices.size(); ++i) {
    if (!sent_devices[i].contains("taints")) continue;
    if (got == nullptr || !got->is_array() || i >= got->size() || !(*got)[i].contains("taints"))
      return true;
  }
  return false;
}

void SlicePublisher::NoteDroppedTaints(const json& sent_devices, const json& stored) {
  if (!options_.device_taints || !DroppedTaints(sent_devices, stored)) return;
  spdlog::warn(
      "the API server dropped devices[].taints of ResourceSlice {}: DRADeviceTaints is off "
      "(on by default from 1.36); unhealthy GPUs are only marked by the healthy attribute, and "
      "claims already on them are not moved",
      SliceName());
  options_.device_taints = false;
}

Result<json> SlicePublisher::Read() const {
  return client_->Get(std::string(kSlicesPath) + "/" + SliceName());
}

Status SlicePublisher::Delete() {
  Status st = client_->Delete(std::string(kSlicesPath) + "/" + SliceName());
  if (st.ok() || st.code() == StatusCode::kNotFound) return Status::Ok();
  return st.WithPrefix("deleting ResourceSlice " + SliceName());
}

}  // namespace fracgpu::dra
