#include "core/dra_convert.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "base/strings.h"
#include "core/gputype.h"

namespace fracgpu::core {

using nlohmann::json;

namespace {

// A token inside an RE2 pattern inside a CEL double-quoted string: tokens are upper-cased
// letters, digits and punctuation; every non-alphanumeric character is escaped for RE2 (\\)
// and the backslash for CEL.
std::string ReToken(const std::string& token) {
  std::string out;
  for (char c : token) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      out.push_back(c);
    } else if (c == '"' || c == '\\') {
      out += "\\\\\\";
      out.push_back(c);
    } else {
      out += "\\\\";
      out.push_back(c);
    }
  }
  return out;
}

std::string TypeMatch(const std::vector<std::string>& entries, const std::string& attr) {
  std::string any;
  for (const auto& e : entries) {
    auto tokens = GpuTypeTokens(e);
    if (tokens.empty()) continue;
    std::string re = ",";
    for (size_t i = 0; i < tokens.size(); ++i)
      re += (i ? "([^,]+,)*" : "") + ReToken(tokens[i]) + ",";
    any += (any.empty() ? "" : " || ") + attr + ".matches(\"" + re + "\")";
  }
  return any;
}

std::string UuidList(const std::vector<std::string>& uuids) {
  std::string out = "[";
  for (size_t i = 0; i < uuids.size(); ++i) {
    std::string lower;
    for (char c : uuids[i]) {
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '-')
        lower.push_back(static_cast<char>(std::tolower(c)));
    }
    out += (i ? ", " : "") + std::string("\"") + lower + "\"";
  }
  return out + "]";
}

bool IsGpuResource(const std::string& key, const ResourceNames& n) {
  return key == n.gpu || key == n.gpumem || key == n.gpumem_percentage || key == n.gpucores ||
         key == n.priority;
}

// "~1" escaping of "/" in a JSON pointer token (RFC 6901).
std::string PointerToken(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out.push_back(c);
  }
  return out;
}

}  // namespace

std::string CelSelector(const PodRequest& r, const std::string& driver) {
  std::string base = "device.attributes[\"" + driver + "\"]";
  std::vector<std::string> terms;
  if (std::string use = TypeMatch(r.use_types, base + ".typeTokens"); !use.empty())
    terms.push_back("(" + use + ")");
  if (std::string nouse = TypeMatch(r.nouse_types, base + ".typeTokens"); !nouse.empty())
    terms.push_back("!(" + nouse + ")");
  if (!r.use_uuids.empty())
    terms.push_back(base + ".uuid.lowerAscii() in " + UuidList(r.use_uuids));
  if (!r.nouse_uuids.empty())
    terms.push_back("!(" + base + ".uuid.lowerAscii() in " + UuidList(r.nouse_uuids) + ")");
  std::string out;
  for (size_t i = 0; i < terms.size(); ++i) out += (i ? " && " : "") + terms[i];
  return out;
}

namespace {

// device.attributes["<driver>"].<name> of a ResourceSlice device: the plain or the qualified key,
// nullptr when absent.
const json* Attribute(const DeviceUsage& d, const std::string& driver, const std::string& name) {
  if (!d.attributes.is_object()) return nullptr;
  auto it = d.attributes.find(name);
  if (it == d.attributes.end()) it = d.attributes.find(driver + "/" + name);
  return it == d.attributes.end() || !it->is_object() ? nullptr : &*it;
}

std::optional<std::string> StringAttribute(const DeviceUsage& d, const std::string& driver,
                                           const std::string& name) {
  const json* a = Attribute(d, driver, name);
  if (a == nullptr || !a->contains("string") || !(*a)["string"].is_string()) return std::nullopt;
  return (*a)["string"].get<std::string>();
}

}  // namespace

bool DeviceSelected(const PodRequest& r, const std::string& driver, const DeviceUsage& device) {
  const json* healthy = Attribute(device, driver, "healthy");
  if (healthy == nullptr || !healthy->contains("bool") || !(*healthy)["bool"].is_boolean() ||
      !(*healthy)["bool"].get<bool>()) {
    return false;
  }
  // Entries without tokens write no CEL term (TypeMatch): they are no rule here either.
  auto with_tokens = [](const std::vector<std::string>& entries) {
    std::vector<std::string> out;
    for (const auto& e : entries) {
      if (!GpuTypeTokens(e).empty()) out.push_back(e);
    }
    return out;
  };
  const std::vector<std::string> use = with_tokens(r.use_types), nouse = with_tokens(r.nouse_types);
  if (!use.empty() || !nouse.empty()) {
    auto tokens = StringAttribute(device, driver, "typeTokens");
    if (!tokens) return false;
    // ",NVIDIA,A100,SXM4,80GB," holds the type's tokens: matched as the type itself.
    std::string type = *tokens;
    for (char& c : type) c = c == ',' ? ' ' : c;
    if (!use.empty() && !GpuTypeMatchesAny(use, type)) return false;
    if (!nouse.empty() && GpuTypeMatchesAny(nouse, type)) return false;
  }
  if (!r.use_uuids.empty() || !r.nouse_uuids.empty()) {
    auto uuid = StringAttribute(device, driver, "uuid");
    if (!uuid) return false;
    auto listed = [&](const std::vector<std::string>& list) {
      return std::any_of(list.begin(), list.end(),
                         [&](const std::string& u) { return GpuUuidEquals(u, *uuid); });
    };
    if (!r.use_uuids.empty() && !listed(r.use_uuids)) return false;
    if (listed(r.nouse_uuids)) return false;
  }
  return true;
}

Result<HamiConversion> ConvertHamiPod(const json& pod, const ResourceNames& names) {
  auto parsed = ParsePodRequest(pod, names);
  if (!parsed.ok()) return parsed.status();
  HamiConversion out;
  const json& md = pod.value("metadata", json::object());
  std::string base = md.value("name", "");
  if (base.empty()) base = md.value("generateName", "pod-");
  while (!base.empty() && base.back() == '-') base.pop_back();
  std::string ns = md.value("namespace", "default");
  std::string selector = CelSelector(*parsed, kDraDriverName);
  const json& spec = pod.value("spec", json::object());
  bool has_claims = spec.contains("resourceClaims") && spec["resourceClaims"].is_array();
  size_t index = 0;
  for (const char* list : {"initContainers", "containers"}) {
    if (!spec.contains(list) || !spec[list].is_array()) continue;
    for (size_t i = 0; i < spec[list].size(); ++i, ++index) {
      const json& c = spec[list][i];
      if (index >= parsed->containers.size()) break;
      const ContainerRequest& req = parsed->containers[index];
      if (!req.UsesGpu()) continue;
      std::string who = "container \"" + req.name + "\"";
      if (req.mem_mib == 0 && req.mem_percent != 100) {
        return InvalidArgument(
            who + ": " + names.gpumem_percentage + " " + std::to_string(req.mem_percent) +
            " cannot be expressed in DRA (capacity requests are absolute MiB); use " +
            names.gpumem);
      }
      json exactly = {{"deviceClassName", req.WholeCards() ? kDraWholeClass : kDraFractionalClass},
                      {"allocationMode", "ExactCount"},
                      {"count", req.num_gpus}};
      if (!req.WholeCards()) {
        // No memory entry = the policy default (the whole card's memory, docs/dra.md).
        json requests = {{kDraCapacityCores, std::to_string(req.cores_percent)}};
        if (req.mem_mib > 0) requests[kDraCapacityMemory] = std::to_string(req.mem_mib) + "Mi";
        exactly["capacity"] = {{"requests", requests}};
      } else {
        // A whole card: all its cores, and no memory entry, whose policy default is the whole
        // card's memory (src/dra/slices.cc), so no other share fits beside it.
        exactly["capacity"] = {{"requests", {{kDraCapacityCores, "100"}}}};
      }
      if (!selector.empty())
        exactly["selectors"] = json::array({{{"cel", {{"expression", selector}}}}});
      // The pod's claim name is a DNS label (63) and the template's a subdomain (253): long
      // pod or container names are cut with a hash, never refused by the API server.
      std::string claim_name = base::BoundedName(req.name, "-gpu", 63);
      std::string template_name = base::BoundedName(base + "-" + req.name, "-gpu", 253);
      json devices = {{"requests", json::array({{{"name", "gpu"}, {"exactly", exactly}}})}};
      if (req.num_gpus > 1) {
        // N GPUs are N distinct cards (HAMi's nvidia.com/gpu: N). A multi-allocatable device
        // can be taken more than once by one request (kube-scheduler's allocator before 1.37
        // restarts each device's search at the first device), unless the claim says that the
        // devices' UUIDs must differ (KEP-5075 distinctAttribute).
        devices["constraints"] =
            json::array({{{"requests", json::array({"gpu"})},
                          {"distinctAttribute", std::string(kDraDriverName) + "/uuid"}}});
      }
      out.templates.push_back({{"apiVersion", "resource.k8s.io/v1"},
                               {"kind", "ResourceClaimTemplate"},
                               {"metadata", {{"name", template_name}, {"namespace", ns}}},
                               {"spec", {{"spec", {{"devices", devices}}}}}});
      if (!has_claims) {
        out.pod_patch.push_back(
            {{"op", "add"}, {"path", "/spec/resourceClaims"}, {"value", json::array()}});
        has_claims = true;
      }
      out.pod_patch.push_back(
          {{"op", "add"},
           {"path", "/spec/resourceClaims/-"},
           {"value", {{"name", claim_name}, {"resourceClaimTemplateName", template_name}}}});
      std::string cpath = std::string("/spec/") + list + "/" + std::to_string(i) + "/resources";
      const json& res = c.value("resources", json::object());
      if (!c.contains("resources"))
        out.pod_patch.push_back({{"op", "add"}, {"path", cpath}, {"value", json::object()}});
      if (!res.contains("claims"))
        out.pod_patch.push_back(
            {{"op", "add"}, {"path", cpath + "/claims"}, {"value", json::array()}});
      out.pod_patch.push_back(
          {{"op", "add"}, {"path", cpath + "/claims/-"}, {"value", {{"name", claim_name}}}});
      for (const char* section : {"limits", "requests"}) {
        if (!res.contains(section) || !res[section].is_object()) continue;
        for (const auto& [key, v] : res[section].items()) {
          if (IsGpuResource(key, names)) {
            out.pod_patch.push_back(
                {{"op", "remove"}, {"path", cpath + "/" + section + "/" + PointerToken(key)}});
          }
        }
      }
    }
  }
  return out;
}

}  // namespace fracgpu::core
