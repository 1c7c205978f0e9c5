// The values the admission webhook writes into container limits (docs/design/CONTRACT.md §1
// "Defaults").

#include <exception>
#include <string>
#include <vector>

#include "core/request.h"
#include "core/request_json.h"

namespace fracgpu::core {
namespace {

using nlohmann::json;

// One container's defaults and the shape of its resources, for building a JSON Patch.
struct ContainerDefaults {
  std::string pointer;
  bool has_limits = false;  // `resources.limits` is an object
  std::vector<LimitDefault> values;
};

// Escapes one RFC 6901 reference token ("nvidia.com/gpu" → "nvidia.com~1gpu").
std::string EscapePointerToken(const std::string& token) {
  std::string out;
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

Result<std::vector<ContainerDefaults>> Compute(const json& pod, const ResourceNames& names) {
  Result<PodRequest> parsed = ParsePodRequest(pod, names);
  if (!parsed.ok()) return parsed.status();
  std::vector<ContainerDefaults> out;
  // ParsePodRequest accepted the pod, so every member read below has the checked type.
  auto spec = pod.find("spec");
  if (spec == pod.end() || spec->is_null()) return out;
  size_t index = 0;
  for (const char* key : {"initContainers", "containers"}) {
    auto list = spec->find(key);
    if (list == spec->end() || list->is_null()) continue;
    for (size_t i = 0; i < list->size(); ++i, ++index) {
      const json& c = (*list)[i];
      const ContainerRequest& req = parsed->containers.at(index);
      request_json::ContainerResources res;
      FRACGPU_RETURN_IF_ERROR(request_json::FindResources(c, &res));
      ContainerDefaults d;
      d.pointer = std::string("/spec/") + key + "/" + std::to_string(i);
      d.has_limits = res.limits != nullptr;
      for (const std::string* name : {&names.gpu, &names.gpumem, &names.gpumem_percentage,
                                      &names.gpucores, &names.priority}) {
        if (res.InLimits(*name) != nullptr) continue;
        if (const json* requested = res.InRequests(*name)) {
          d.values.push_back({d.pointer, *name, *requested});  // copied as given
        } else if (req.UsesGpu() && name == &names.gpu) {
          d.values.push_back({d.pointer, *name, std::to_string(req.num_gpus)});
        } else if (req.UsesGpu() && name == &names.gpucores && req.cores_percent == 100) {
          d.values.push_back({d.pointer, *name, "100"});  // whole card → exclusive
        }
        // Memory is never written: absent memory means the whole card.
      }
      if (!d.values.empty()) out.push_back(std::move(d));
    }
  }
  return out;
}

}  // namespace

Result<std::vector<LimitDefault>> ComputeLimitDefaults(const json& pod,
                                                       const ResourceNames& names) {
  try {
    Result<std::vector<ContainerDefaults>> per_container = Compute(pod, names);
    if (!per_container.ok()) return per_container.status();
    std::vector<LimitDefault> out;
    for (ContainerDefaults& d : *per_container) {
      for (LimitDefault& v : d.values) out.push_back(std::move(v));
    }
    return out;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("malformed pod: ") + e.what());
  }
}

Result<json> LimitDefaultsPatch(const json& pod, const ResourceNames& names) {
  try {
    Result<std::vector<ContainerDefaults>> per_container = Compute(pod, names);
    if (!per_container.ok()) return per_container.status();
    json patch = json::array();
    for (const ContainerDefaults& d : *per_container) {
      json limits = json::object();
      for (const LimitDefault& v : d.values) limits[v.resource] = v.value;
      // Every value comes from `resources` (a request-only value, or a default caused by a
      // slice value), so `resources` is an object here; "add" on a null `limits` member
      // replaces it (RFC 6902 §4.1).
      if (!d.has_limits) {
        patch.push_back(
            {{"op", "add"}, {"path", d.pointer + "/resources/limits"}, {"value", limits}});
      } else {
        for (const LimitDefault& v : d.values) {
          patch.push_back(
              {{"op", "add"},
               {"path", d.pointer + "/resources/limits/" + EscapePointerToken(v.resource)},
               {"value", v.value}});
        }
      }
    }
    return patch;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("malformed pod: ") + e.what());
  }
}

Status ApplyLimitDefaults(json& pod, const ResourceNames& names) {
  try {
    Result<std::vector<ContainerDefaults>> per_container = Compute(pod, names);
    if (!per_container.ok()) return per_container.status();
    for (const ContainerDefaults& d : *per_container) {
      json& c = pod.at(json::json_pointer(d.pointer));
      json& resources = c["resources"];
      if (!resources.is_object()) resources = json::object();
      json& limits = resources["limits"];
      if (!limits.is_object()) limits = json::object();
      for (const LimitDefault& v : d.values) limits[v.resource] = v.value;
    }
    return Status::Ok();
  } catch (const std::exception& e) {
    return Internal(std::string("applying limit defaults: ") + e.what());
  }
}

}  // namespace fracgpu::core
