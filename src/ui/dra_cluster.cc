#include "ui/dra_cluster.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "core/dra_convert.h"
#include "core/dra_wire.h"
#include "k8s/objects.h"
#include "ui/cluster.h"

namespace fracgpu::ui {

using nlohmann::json;

namespace {

// attributes[name] (plain or "<driver>/<name>") of type `kind` ("string", "int", "bool").
const json* DraAttr(const core::DeviceUsage& d, const char* name, const char* kind) {
  if (!d.attributes.is_object()) return nullptr;
  auto it = d.attributes.find(name);
  if (it == d.attributes.end())
    it = d.attributes.find(std::string(core::kDraDriverName) + "/" + name);
  if (it == d.attributes.end() || !it->is_object()) return nullptr;
  auto v = it->find(kind);
  return v == it->end() ? nullptr : &*v;
}

std::string DraString(const core::DeviceUsage& d, const char* name) {
  const json* v = DraAttr(d, name, "string");
  return v && v->is_string() ? v->get<std::string>() : "";
}

int64_t DraInt(const core::DeviceUsage& d, const char* name, int64_t fallback) {
  const json* v = DraAttr(d, name, "int");
  return v && v->is_number_integer() ? v->get<int64_t>() : fallback;
}

bool DraHealthy(const core::DeviceUsage& d) {
  const json* v = DraAttr(d, "healthy", "bool");
  return v && v->is_boolean() && v->get<bool>();
}

// What a device shows as its UUID: the attribute, else "<pool>/<device>".
std::string DraUuid(const core::DeviceUsage& d) {
  std::string uuid = DraString(d, "uuid");
  return uuid.empty() ? d.pool + "/" + d.device : uuid;
}

// The type the dashboard and the form show: `type`, else the product name.
std::string DraType(const core::DeviceUsage& d) {
  std::string type = DraString(d, "type");
  return type.empty() ? DraString(d, "productName") : type;
}

int64_t DraSum(int64_t a, int64_t b) {
  return b > std::numeric_limits<int64_t>::max() - a ? std::numeric_limits<int64_t>::max() : a + b;
}

// Consumed capacity as the dashboard shows it: a whole allocation consumes everything.
int64_t DraUsedMemory(const core::DeviceUsage& d) {
  return d.allocated_whole ? d.memory.total : d.used_memory;
}
int64_t DraUsedCores(const core::DeviceUsage& d) {
  return d.allocated_whole ? d.cores.total : d.used_cores;
}

std::vector<json> DraItems(const std::vector<json>& list, size_t max, const char* kind,
                           std::vector<std::string>* problems) {
  if (list.size() <= max) return list;
  problems->push_back(std::string(kind) + ": " + std::to_string(list.size()) +
                      " listed, only the first " + std::to_string(max) + " are read");
  return std::vector<json>(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(max));
}

// Why device `d` cannot take one device of `r` now (after what `r`'s claim already took).
std::string DraRefusal(const core::DeviceUsage& d, const core::ShareRequest& r) {
  if (!DraHealthy(d)) return "unhealthy";
  if (r.selector && !r.selector(d)) return "not selected by the type/UUID rules";
  if (d.allocated_whole || (!d.multiple_allocations && d.shares > 0))
    return "taken whole by a claim";
  if (!d.multiple_allocations) return "could take one";
  int64_t mem = core::ConsumedAmount(d.memory, r.memory_mib);
  int64_t cores = core::ConsumedAmount(d.cores, r.cores);
  if (mem < 0)
    return "memory request outside the device's request policy (" + std::to_string(d.memory.total) +
           " MiB)";
  if (cores < 0) return "cores request outside the device's request policy";
  // Overflow-safe used + take > total (sums of hostile claims saturate, core/dra_wire.h).
  auto over = [](int64_t used, int64_t take, int64_t total) {
    return used > total || take > total - used;
  };
  if (over(d.used_memory, mem, d.memory.total)) {
    return "needs " + std::to_string(mem) + " MiB, " +
           std::to_string(std::max<int64_t>(0, d.memory.total - d.used_memory)) + " MiB free";
  }
  if (over(d.used_cores, cores, d.cores.total)) {
    return "needs " + std::to_string(cores) + " % cores, " +
           std::to_string(std::max<int64_t>(0, d.cores.total - d.used_cores)) + " % free";
  }
  return "could take one";
}

// A request of the claims to place, with the container it is for.
struct DraClaimRequest {
  std::string container;
  core::ShareRequest share;
};

}  // namespace

DraCluster BuildDraCluster(const std::vector<json>& nodes, const std::vector<json>& slices,
                           const std::vector<json>& claims, const std::string& driver) {
  DraCluster out;
  std::vector<json> s = DraItems(slices, kDraMaxSlices, "ResourceSlices", &out.problems);
  std::vector<json> c = DraItems(claims, kDraMaxClaims, "ResourceClaims", &out.problems);
  // Lenient: every malformed object is a problem, never the end of the view.
  auto usage = core::UsageFromSlices(s, c, driver, &out.problems);
  if (!usage.ok()) {  // not expected: the lenient read reports instead of failing
    out.problems.push_back(usage.status().message());
    return out;
  }
  std::set<std::string> known;
  for (const auto& n : nodes) known.insert(k8s::Name(n));
  std::map<std::string, DraCluster::Node> by_node;
  std::set<std::string> reported;
  for (auto& d : *usage) {
    if (d.node.empty() || !known.count(d.node)) {
      std::string key = d.node + "\n" + d.pool;
      if (reported.insert(key).second) {
        std::string where =
            d.node.empty() ? " has no spec.nodeName"
                           : " is for node \"" + d.node + "\", which is not a node of the cluster";
        out.problems.push_back("ResourceSlice pool \"" + d.pool + "\" of driver " + driver + where +
                               ": its devices are not shown");
      }
      continue;
    }
    DraCluster::Node& n = by_node[d.node];
    n.name = d.node;
    n.devices.push_back(std::move(d));
  }
  for (auto& [name, n] : by_node) out.nodes.push_back(std::move(n));
  return out;
}

json DraClusterJson(const ClusterSnapshot& snapshot,
                    const std::function<bool(const std::string& ns)>& visible) {
  const DraCluster& dra = *snapshot.dra;
  std::map<std::string, const DraCluster::Node*> by_name;
  for (const auto& n : dra.nodes) by_name[n.name] = &n;
  const std::vector<const json*> nodes = NodesByName(snapshot);
  json out_nodes = json::array();
  int64_t total_gpus = 0, total_mem = 0, used_mem = 0;
  for (const json* node : nodes) {
    std::string name = k8s::Name(*node);
    auto it = by_name.find(name);
    json gpus = json::array();
    if (it != by_name.end()) {
      int64_t position = 0;
      for (const auto& d : it->second->devices) {
        json slices = json::array();
        std::vector<json> anonymous;  // slices of namespaces the viewer may not see
        for (const auto& a : d.allocations) {
          auto slash = a.claim.find('/');
          std::string ns = slash == std::string::npos ? "" : a.claim.substr(0, slash);
          std::string claim = slash == std::string::npos ? a.claim : a.claim.substr(slash + 1);
          const int64_t mem = a.whole ? d.memory.total : a.memory_mib;
          const int64_t cores = a.whole ? d.cores.total : a.cores;
          if (visible && !ns.empty() && visible(ns)) {
            slices.push_back({{"pod", a.pod.empty() ? claim : a.pod},
                              {"namespace", ns},
                              {"claim", claim},
                              {"mem_mib", mem},
                              {"cores", cores},
                              {"whole", a.whole}});
          } else {
            anonymous.push_back({{"pod", nullptr},
                                 {"namespace", nullptr},
                                 {"claim", nullptr},
                                 {"mem_mib", mem},
                                 {"cores", cores},
                                 {"whole", a.whole}});
          }
        }
        AppendAnonymousSlices(&slices, std::move(anonymous));
        gpus.push_back({{"uuid", DraUuid(d)},
                        {"index", DraInt(d, "index", position)},
                        {"type", DraType(d)},
                        {"numa", DraInt(d, "numaNode", 0)},
                        {"health", DraHealthy(d)},
                        {"cordoned", false},
                        {"used", d.shares},
                        {"devmem_mib", d.memory.total},
                        {"used_mem_mib", DraUsedMemory(d)},
                        {"devcore", d.cores.total},
                        {"used_cores", DraUsedCores(d)},
                        {"device", d.device},
                        {"pool", d.pool},
                        {"shared", d.multiple_allocations},
                        {"slices", slices}});
        ++position;
        ++total_gpus;
        total_mem = DraSum(total_mem, d.memory.total);
        used_mem = DraSum(used_mem, DraUsedMemory(d));
      }
    }
    out_nodes.push_back({{"name", name},
                         {"unschedulable", NodeUnschedulable(*node)},
                         {"gpu_ready", it != by_name.end()},
                         {"gpus", gpus}});
  }
  // A claim's problem names it: shown only to a viewer of its namespace, else counted.
  json problems = json::array();
  int64_t problems_hidden = 0;
  for (const std::string& p : dra.problems) {
    std::optional<std::string> ns = ClaimProblemNamespace(p);
    if (!ns || (visible && !ns->empty() && visible(*ns))) {
      problems.push_back(p);
    } else {
      ++problems_hidden;
    }
  }
  return {{"mode", "dra"},
          {"nodes", out_nodes},
          {"totals",
           {{"nodes", out_nodes.size()},
            {"gpus", total_gpus},
            {"devmem_mib", total_mem},
            {"used_mem_mib", used_mem}}},
          {"problems", problems},
          {"problems_hidden", problems_hidden}};
}

std::optional<std::string> ClaimProblemNamespace(const std::string& problem) {
  static const std::string kClaim = "ResourceClaim";
  if (problem.rfind(kClaim, 0) != 0) return std::nullopt;          // a slice's, a node's
  if (problem.rfind(kClaim + "s: ", 0) == 0) return std::nullopt;  // "ResourceClaims: N listed"
  // core::UsageFromSlices names a claim "ResourceClaim <ns>/<name> …"; anything else about a
  // claim (no metadata, not an object: its text clipped) belongs to nobody the UI can tell.
  if (problem.rfind(kClaim + " ", 0) != 0) return std::string();
  const size_t start = kClaim.size() + 1;
  const size_t slash = problem.find('/', start);
  const size_t space = problem.find(' ', start);
  if (slash == std::string::npos || slash == start || (space != std::string::npos && space < slash))
    return std::string();
  return problem.substr(start, slash - start);
}

json DraGpuOptionsJson(const ClusterSnapshot& snapshot) {
  std::set<std::string> types;
  json gpus = json::array();
  for (const auto& n : snapshot.dra->nodes) {
    int64_t position = 0;
    for (const auto& d : n.devices) {
      std::string type = DraType(d);
      if (!type.empty()) types.insert(type);
      gpus.push_back({{"uuid", DraUuid(d)},
                      {"node", n.name},
                      {"type", type},
                      {"index", DraInt(d, "index", position)}});
      ++position;
    }
  }
  return {{"gpu_types", json(std::vector<std::string>(types.begin(), types.end()))},
          {"gpus", gpus}};
}

json DraFitPreviewJson(const std::vector<json>& templates, const core::PodRequest& request,
                       const ClusterSnapshot& snapshot) {
  const DraCluster& dra = *snapshot.dra;
  const size_t total_nodes = dra.nodes.size();
  // The claims' requests, in template order (one template per GPU container, in the order
  // ConvertHamiPod writes them: the pod request's GPU containers).
  std::vector<const core::ContainerRequest*> gpu_containers;
  for (const auto& c : request.containers) {
    if (c.UsesGpu()) gpu_containers.push_back(&c);
  }
  std::vector<DraClaimRequest> claims;
  auto selector = [&request](const core::DeviceUsage& d) {
    return core::DeviceSelected(request, core::kDraDriverName, d);
  };
  for (size_t t = 0; t < templates.size(); ++t) {
    const json& tmpl = templates[t];
    std::string what = "ResourceClaimTemplate " +
                       tmpl.value("/metadata/name"_json_pointer, std::string()) +
                       " spec.spec.devices.requests";
    const json* requests = tmpl.contains("/spec/spec/devices/requests"_json_pointer)
                               ? &tmpl.at("/spec/spec/devices/requests"_json_pointer)
                               : nullptr;
    if (requests == nullptr || !requests->is_array()) {
      return {{"mode", "dra"},
              {"fits", false},
              {"message", what + " is missing"},
              {"per_node", json::array()}};
    }
    for (size_t i = 0; i < requests->size(); ++i) {
      auto share = core::ShareRequestOf((*requests)[i], what + "[" + std::to_string(i) + "]");
      if (!share.ok()) {
        return {{"mode", "dra"},
                {"fits", false},
                {"message", share.status().message()},
                {"per_node", json::array()}};
      }
      share->selector = selector;
      claims.push_back(
          {t < gpu_containers.size() ? gpu_containers[t]->name : "", std::move(*share)});
    }
  }
  if (claims.empty()) {
    return {{"mode", "dra"},
            {"fits", true},
            {"gpus", 0},
            {"nodes", 0},
            {"total_nodes", total_nodes},
            {"message", "uses no GPU"},
            {"per_node", json::array()}};
  }
  std::set<std::string> cordoned;
  for (const auto& n : snapshot.nodes) {
    if (NodeUnschedulable(n)) cordoned.insert(k8s::Name(n));
  }
  int64_t fit_nodes = 0, fit_gpus = 0;
  json per_node = json::array();
  for (const auto& node : dra.nodes) {
    // Eligible: the devices that could take one device of the first claim on their own.
    json eligible = json::array(), candidates = json::array();
    for (const auto& d : node.devices) {
      std::vector<core::DeviceUsage> alone = {d};
      core::ShareRequest one = claims[0].share;
      one.count = 1;
      auto taken = core::FirstFitDevices(&alone, one);
      if (!taken.ok()) continue;
      const core::DeviceTake& t = (*taken)[0];
      eligible.push_back(DraUuid(d));
      candidates.push_back(
          {{"uuid", DraUuid(d)},
           {"device", d.device},
           {"mem_mib", t.shared ? t.memory_mib : d.memory.total},
           {"devmem_mib", d.memory.total},
           {"free_mem_mib", std::max<int64_t>(0, d.memory.total - DraUsedMemory(d))}});
    }
    json entry = {{"node", node.name},
                  {"eligible", eligible},
                  {"candidates", candidates},
                  {"gpus", json::array()},
                  {"devices", json::array()}};
    if (cordoned.count(node.name)) {
      entry["fits"] = false;
      entry["reason"] = kCordonedNodeReason;
      per_node.push_back(std::move(entry));
      continue;
    }
    // Every claim of the pod on this node, in order: kube-scheduler allocates a pod's claims
    // on one node.
    std::vector<core::DeviceUsage> usage = node.devices;
    std::string reason;
    json chosen = json::array(), chosen_devices = json::array();
    for (const auto& c : claims) {
      auto taken = core::FirstFitDevices(&usage, c.share);
      if (!taken.ok()) {
        std::string why;
        size_t shown = 0;
        for (const auto& d : usage) {
          if (shown == 8) {
            why += "; and " + std::to_string(usage.size() - shown) + " more";
            break;
          }
          why += (shown++ ? "; " : "") + d.device + ": " + DraRefusal(d, c.share);
        }
        reason = (c.container.empty() ? "" : "container \"" + c.container + "\": ") +
                 taken.status().message() + " (" + why + ")";
        break;
      }
      for (const auto& t : *taken) {
        chosen.push_back(DraUuid(usage[t.device]));
        chosen_devices.push_back(usage[t.device].device);
      }
    }
    entry["fits"] = reason.empty();
    if (reason.empty()) {
      ++fit_nodes;
      fit_gpus += static_cast<int64_t>(eligible.size());
      entry["gpus"] = chosen;
      entry["devices"] = chosen_devices;
    } else {
      entry["reason"] = reason;
    }
    per_node.push_back(std::move(entry));
  }
  int64_t takes = 0;
  for (const auto& c : claims) takes = std::max<int64_t>(takes, c.share.count);
  return {{"mode", "dra"},
          {"fits", fit_nodes > 0},
          {"gpus", fit_gpus},
          {"nodes", fit_nodes},
          {"total_nodes", total_nodes},
          {"message", FitMessage(takes, fit_nodes, fit_gpus, total_nodes)},
          {"per_node", per_node}};
}

}  // namespace fracgpu::ui
