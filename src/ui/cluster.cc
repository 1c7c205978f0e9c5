#include "ui/cluster.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <tuple>

#include "core/annotations.h"
#include "core/bind_choice.h"
#include "core/frag_choice.h"
#include "core/lent.h"
#include "k8s/gpu_objects.h"
#include "k8s/objects.h"
#include "ui/dra_cluster.h"

namespace fracgpu::ui {

using nlohmann::json;

ClusterSource::ClusterSource(k8s::Client* client, std::chrono::milliseconds ttl,
                             std::string gpu_resource, bool dra_mode)
    : client_(client), ttl_(ttl), gpu_resource_(std::move(gpu_resource)), dra_mode_(dra_mode) {}

namespace {

std::vector<json> ItemsOf(const json& list) {
  std::vector<json> out;
  if (list.is_object() && list.contains("items") && list["items"].is_array()) {
    for (const auto& item : list["items"]) out.push_back(item);
  }
  return out;
}

// The model's lines about usage it cannot count go to the log, as the scheduler's do.
std::shared_ptr<core::ClusterState> NewState() {
  auto state = std::make_shared<core::ClusterState>();
  state->SetLogger([](core::LogSeverity severity, std::string_view line) {
    if (severity == core::LogSeverity::kError) {
      spdlog::error("{}", line);
    } else {
      spdlog::warn("{}", line);
    }
  });
  return state;
}

}  // namespace

Result<ClusterSnapshot> ClusterSource::Get() {
  std::lock_guard<std::mutex> lock(mu_);
  auto now = std::chrono::steady_clock::now();
  if (cached_ && ttl_.count() > 0 && now - taken_ < ttl_) return *cached_;
  auto nodes = client_->List("/api/v1/nodes");
  if (!nodes.ok()) return nodes.status();
  if (dra_mode_) {
    k8s::ListOptions by_driver;
    by_driver.field_selector = std::string("spec.driver=") + core::kDraDriverName;
    auto slices = client_->List("/apis/resource.k8s.io/v1/resourceslices", by_driver);
    if (!slices.ok()) return slices.status().WithPrefix("listing ResourceSlices");
    auto claims = client_->List("/apis/resource.k8s.io/v1/resourceclaims");
    if (!claims.ok()) return claims.status().WithPrefix("listing ResourceClaims");
    ClusterSnapshot snap;
    snap.nodes = ItemsOf(*nodes);
    snap.state = NewState();
    auto dra = std::make_shared<DraCluster>(
        BuildDraCluster(snap.nodes, ItemsOf(*slices), ItemsOf(*claims)));
    // Logged when they first appear, not on every listing.
    std::set<std::string> now_problems(dra->problems.begin(), dra->problems.end());
    for (const auto& p : now_problems) {
      if (!logged_problems_.count(p)) spdlog::warn("ui: {}", p);
    }
    logged_problems_ = std::move(now_problems);
    snap.dra = std::move(dra);
    cached_ = snap;
    taken_ = now;
    return snap;
  }
  auto pods = client_->List("/api/v1/pods");
  if (!pods.ok()) return pods.status();
  auto state = NewState();
  ClusterSnapshot snap;
  snap.listed_unix = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  std::set<std::string> idle_problems;
  for (const auto& node : (*nodes)["items"]) {
    // A bad register annotation makes the node GPU-less; the dashboard shows it without GPUs.
    if (auto st = state->UpsertNode(k8s::NodeObjectOf(node, gpu_resource_)); !st.ok())
      spdlog::warn("ui: {}", st.message());
    if (auto idle = k8s::Annotation(node, core::kAnnotationIdleHolders); idle) {
      auto record = core::ParseIdleHolders(*idle);
      if (record.ok()) {
        snap.idle_holders[k8s::Name(node)] = std::move(*record);
      } else {
        idle_problems.insert("node " + k8s::Name(node) + ": " + core::kAnnotationIdleHolders +
                             ": " + record.status().message());
      }
    }
    snap.nodes.push_back(node);
  }
  // Logged when they first appear, not on every listing.
  for (const auto& p : idle_problems) {
    if (!logged_idle_.count(p)) spdlog::warn("ui: {} (its idle holders are not shown)", p);
  }
  logged_idle_ = std::move(idle_problems);
  for (const auto& pod : (*pods)["items"]) {
    if (auto st = state->UpsertPod(k8s::PodObjectOf(pod, gpu_resource_)); !st.ok())
      spdlog::warn("ui: {}", st.message());
    if (pod.contains("metadata") && pod["metadata"].is_object()) {
      const std::string uid = pod["metadata"].value("uid", "");
      if (!uid.empty()) snap.pods_by_uid[uid] = {k8s::Namespace(pod), k8s::Name(pod)};
    }
  }
  snap.state = std::move(state);
  cached_ = snap;
  taken_ = now;
  return snap;
}

bool NodeUnschedulable(const json& node) {
  if (!node.is_object() || !node.contains("spec") || !node["spec"].is_object()) return false;
  auto it = node["spec"].find("unschedulable");
  return it != node["spec"].end() && it->is_boolean() && it->get<bool>();
}

std::string FitMessage(int64_t takes, int64_t fit_nodes, int64_t fit_gpus, size_t total_nodes) {
  auto plural = [](int64_t n, const char* word) {
    return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
  };
  if (fit_nodes > 0) {
    return "fits now: takes " + plural(takes, "GPU") + " on one node; " +
           plural(fit_nodes, "node") + " of " + std::to_string(total_nodes) + " can take it (" +
           plural(fit_gpus, "candidate GPU") + ")";
  }
  return total_nodes == 0 ? "fits on no node: the cluster has no GPU nodes" : "fits on no node";
}

namespace {

// Slices per GPU UUID: every recorded allocation collapsed as the scheduler counts it, each
// with its namespace (to decide whether the viewer sees its name).
struct Slice {
  std::string ns, pod;
  int64_t mem_mib = 0, cores = 0;
};
std::map<std::string, std::vector<Slice>> SlicesByGpu(const core::ClusterState& state) {
  std::map<std::string, std::vector<Slice>> out;
  for (const auto& a : state.Allocations()) {
    auto usage = core::CollapsePodUsage(a.grants, a.num_init, a.init_finished);
    if (!usage.ok()) continue;
    auto slash = a.key.find('/');
    std::string ns = slash == std::string::npos ? "" : a.key.substr(0, slash);
    std::string name = slash == std::string::npos ? a.key : a.key.substr(slash + 1);
    for (const auto& d : *usage)
      out[a.node + "\n" + d.uuid].push_back({ns, name, d.mem_mib, d.cores});
  }
  return out;
}

// One GPU's slices as the viewer may see them (ClusterJson).
json SlicesJson(const std::vector<Slice>& slices, const NamespaceFilter& visible) {
  std::vector<const Slice*> sorted;
  for (const Slice& s : slices) sorted.push_back(&s);
  // Named slices by namespace and pod (the allocations come in pod UID order).
  std::stable_sort(sorted.begin(), sorted.end(), [](const Slice* a, const Slice* b) {
    return std::tie(a->ns, a->pod) < std::tie(b->ns, b->pod);
  });
  json named = json::array();
  std::vector<json> anonymous;
  for (const Slice* p : sorted) {
    const Slice& s = *p;
    if (visible && !s.ns.empty() && visible(s.ns)) {
      named.push_back(
          {{"pod", s.pod}, {"namespace", s.ns}, {"mem_mib", s.mem_mib}, {"cores", s.cores}});
    } else {
      anonymous.push_back(
          {{"pod", nullptr}, {"namespace", nullptr}, {"mem_mib", s.mem_mib}, {"cores", s.cores}});
    }
  }
  AppendAnonymousSlices(&named, std::move(anonymous));
  return named;
}

}  // namespace

std::vector<const json*> NodesByName(const ClusterSnapshot& snapshot) {
  std::vector<const json*> nodes;
  for (const auto& n : snapshot.nodes) nodes.push_back(&n);
  std::sort(nodes.begin(), nodes.end(),
            [](const json* a, const json* b) { return k8s::Name(*a) < k8s::Name(*b); });
  return nodes;
}

namespace {

// The fresh idle-holder record of a node, or null.
const core::IdleHolders* FreshIdleHolders(const ClusterSnapshot& snapshot,
                                          const std::string& node) {
  auto it = snapshot.idle_holders.find(node);
  if (it == snapshot.idle_holders.end()) return nullptr;
  return core::IdleHoldersFresh(it->second.at_unix, snapshot.listed_unix) ? &it->second : nullptr;
}

// One GPU's idle holders (see ClusterJson).
json IdleHoldersJson(const ClusterSnapshot& snapshot, const core::IdleHolders* record,
                     const std::string& uuid, const NamespaceFilter& visible) {
  int64_t count = 0, held = 0, longest = 0;
  json pods = json::array();
  if (record != nullptr) {
    // Idle seconds as of the listing: the record's plus the time since it was written.
    const int64_t since = std::max<int64_t>(0, snapshot.listed_unix - record->at_unix);
    for (const core::IdleHolder& h : record->holders) {
      if (h.gpu_uuid != uuid) continue;
      // A pod the listing does not hold was deleted: its region stays until the agent removes
      // the directory (--orphan-grace), but nothing holds that memory any more.
      auto pod = snapshot.pods_by_uid.find(h.pod_uid);
      if (pod == snapshot.pods_by_uid.end()) continue;
      const int64_t idle = h.idle_s + since;
      ++count;
      held += h.mib;
      longest = std::max(longest, idle);
      if (!visible || !visible(pod->second.first)) continue;
      pods.push_back({{"pod", pod->second.second},
                      {"namespace", pod->second.first},
                      {"mib", h.mib},
                      {"idle_s", idle}});
    }
  }
  return {{"count", count}, {"held_mib", held}, {"longest_idle_s", longest}, {"pods", pods}};
}

}  // namespace

std::vector<std::string> NamedNamespaces(const ClusterSnapshot& snapshot) {
  std::set<std::string> out;
  if (snapshot.dra) {
    for (const auto& n : snapshot.dra->nodes) {
      for (const auto& d : n.devices) {
        for (const auto& a : d.allocations) {
          auto slash = a.claim.find('/');
          if (slash != std::string::npos && slash > 0) out.insert(a.claim.substr(0, slash));
        }
      }
    }
    for (const std::string& p : snapshot.dra->problems) {
      if (auto ns = ClaimProblemNamespace(p); ns && !ns->empty()) out.insert(*ns);
    }
    return {out.begin(), out.end()};
  }
  for (const auto& a : snapshot.state->Allocations()) {
    auto slash = a.key.find('/');
    if (slash != std::string::npos && slash > 0) out.insert(a.key.substr(0, slash));
  }
  for (const auto& [node, record] : snapshot.idle_holders) {
    if (!core::IdleHoldersFresh(record.at_unix, snapshot.listed_unix)) continue;
    for (const core::IdleHolder& h : record.holders) {
      auto pod = snapshot.pods_by_uid.find(h.pod_uid);
      if (pod != snapshot.pods_by_uid.end() && !pod->second.first.empty())
        out.insert(pod->second.first);
    }
  }
  return {out.begin(), out.end()};
}

json ClusterJson(const ClusterSnapshot& snapshot, const NamespaceFilter& visible) {
  if (snapshot.dra) return DraClusterJson(snapshot, visible);
  auto slices = SlicesByGpu(*snapshot.state);
  const std::map<std::string, int64_t> borrowed = snapshot.state->BorrowedMib();
  const std::vector<const json*> nodes = NodesByName(snapshot);
  json out_nodes = json::array();
  int64_t total_gpus = 0, total_mem = 0, used_mem = 0;
  for (const json* node : nodes) {
    std::string name = k8s::Name(*node);
    auto state = snapshot.state->Node(name);
    json gpus = json::array();
    if (state) {
      const bool lending = core::LentFresh(state->lent_at_unix, snapshot.listed_unix);
      const core::IdleHolders* idle = FreshIdleHolders(snapshot, name);
      for (size_t i = 0; i < state->gpus.size(); ++i) {
        const core::GpuState& g = state->gpus[i];
        auto it = slices.find(name + "\n" + g.info.uuid);
        auto b = borrowed.find(g.info.uuid);
        gpus.push_back(
            {{"uuid", g.info.uuid},
             {"index", g.info.index},
             {"type", g.info.type},
             {"numa", g.info.numa},
             {"health", g.info.health},
             {"cordoned", g.cordoned},
             {"count", g.info.count},
             {"used", g.used},
             {"devmem_mib", g.info.devmem_mib},
             {"used_mem_mib", g.used_mem_mib},
             {"devcore", g.info.devcore},
             {"used_cores", g.used_cores},
             // Lending (docs/reclaim.md "Lending"): what the GPU lends to borrowers
             // while its node's record is fresh, and what borrowers hold on it.
             {"lent_mib", lending ? state->LentMib(i) : 0},
             {"borrowed_mib", b == borrowed.end() ? 0 : b->second},
             // Pods holding memory there while idle (docs/ui.md "Idle holders").
             {"idle_holders", IdleHoldersJson(snapshot, idle, g.info.uuid, visible)},
             // Named only where the viewer may see; else size and cores alone.
             {"slices", it == slices.end() ? json::array() : SlicesJson(it->second, visible)}});
        ++total_gpus;
        total_mem += g.info.devmem_mib;
        used_mem += g.used_mem_mib;
      }
    }
    out_nodes.push_back({{"name", name},
                         {"unschedulable", NodeUnschedulable(*node)},
                         {"gpu_ready", state.has_value()},
                         {"gpus", gpus}});
  }
  return {{"nodes", out_nodes},
          {"totals",
           {{"nodes", out_nodes.size()},
            {"gpus", total_gpus},
            {"devmem_mib", total_mem},
            {"used_mem_mib", used_mem}}}};
}

void AppendAnonymousSlices(json* slices, std::vector<json> anonymous) {
  auto num = [](const json& s, const char* field) {
    return s.contains(field) && s[field].is_number_integer() ? s[field].get<int64_t>() : 0;
  };
  std::stable_sort(anonymous.begin(), anonymous.end(), [&](const json& a, const json& b) {
    if (num(a, "mem_mib") != num(b, "mem_mib")) return num(a, "mem_mib") > num(b, "mem_mib");
    return num(a, "cores") > num(b, "cores");
  });
  for (auto& s : anonymous) slices->push_back(std::move(s));
}

json GpuOptionsJson(const ClusterSnapshot& snapshot) {
  if (snapshot.dra) return DraGpuOptionsJson(snapshot);
  std::set<std::string> types;
  json gpus = json::array();
  for (const auto& node : snapshot.state->Nodes()) {
    for (const auto& g : node.gpus) {
      types.insert(g.info.type);
      gpus.push_back({{"uuid", g.info.uuid},
                      {"node", node.name},
                      {"type", g.info.type},
                      {"index", g.info.index}});
    }
  }
  return {{"gpu_types", json(std::vector<std::string>(types.begin(), types.end()))},
          {"gpus", gpus}};
}

json FitPreviewJson(const core::PodRequest& request, const ClusterSnapshot& snapshot,
                    const core::FitOptions& options, int64_t pod_cpu_milli) {
  auto nodes = snapshot.state->Nodes();
  if (!request.UsesGpu()) {
    return {{"fits", true},
            {"gpus", 0},
            {"nodes", 0},
            {"total_nodes", nodes.size()},
            {"message", "uses no GPU"},
            {"per_node", json::array()}};
  }
  const core::ContainerRequest* first = nullptr;
  for (const auto& c : request.containers) {
    if (c.UsesGpu()) {
      first = &c;
      break;
    }
  }
  const std::vector<core::WeightedShape> workload =
      core::BindWorkload(request, *snapshot.state, options.default_gpu_policy, pod_cpu_milli);
  // A cordoned node (spec.unschedulable) takes no new pod: kube-scheduler's NodeUnschedulable
  // filter runs before fracgpu's extender sees the node, so core::Fit never judges it.
  std::set<std::string> cordoned;
  for (const auto& n : snapshot.nodes) {
    if (NodeUnschedulable(n)) cordoned.insert(k8s::Name(n));
  }
  // /prioritize's scores for a fragmentation-aware pod (core::FragmentationPriorities over the
  // same workload), so the preview also shows which node kube-scheduler is steered to.
  std::vector<int64_t> priorities;
  if (!workload.empty()) {
    std::vector<const core::NodeState*> candidates;
    for (const auto& node : nodes) {
      candidates.push_back(cordoned.count(node.name) ? nullptr : &node);
    }
    priorities = core::FragmentationPriorities(request, candidates, workload, pod_cpu_milli);
  }
  int64_t fit_nodes = 0, fit_gpus = 0;
  json per_node = json::array();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const core::NodeState& node = nodes[i];
    json eligible = json::array();
    json candidates = json::array();  // what the slice means on each eligible card, in MiB
    for (const auto& g : node.gpus) {
      if (core::CheckGpu(*first, request, g) == core::FitReason::kFits) {
        eligible.push_back(g.info.uuid);
        candidates.push_back({{"uuid", g.info.uuid},
                              {"mem_mib", first->MemOn(g.info.devmem_mib)},
                              {"devmem_mib", g.info.devmem_mib},
                              {"free_mem_mib", g.FreeMemMib()}});
      }
    }
    if (cordoned.count(node.name)) {
      per_node.push_back({{"node", node.name},
                          {"fits", false},
                          {"eligible", eligible},
                          {"gpus", json::array()},
                          {"candidates", candidates},
                          {"reason", kCordonedNodeReason}});
      continue;
    }
    // What /bind would choose on this node (core::FitForBind's path: same workload, same fit).
    auto result = core::FitFragmentationAware(request, node, workload, options.default_gpu_policy,
                                              pod_cpu_milli);
    json entry = {{"node", node.name},
                  {"fits", result.fits},
                  {"eligible", eligible},
                  {"candidates", candidates}};
    if (!priorities.empty()) entry["priority"] = priorities[i];
    if (result.fits) {
      ++fit_nodes;
      fit_gpus += static_cast<int64_t>(eligible.size());
      json chosen = json::array();
      for (const auto& cg : result.grants) {
        for (const auto& g : cg) chosen.push_back(g.uuid);
      }
      entry["gpus"] = chosen;
    } else {
      entry["gpus"] = json::array();
      entry["reason"] = result.summary;
    }
    per_node.push_back(std::move(entry));
  }
  // Say what the pod takes apart from where it could go: "fits now on 2 GPUs of 2 nodes" for a
  // 1-GPU request read as "will use 2 GPUs".
  int64_t takes = 0;
  for (const auto& c : request.containers) takes = std::max<int64_t>(takes, c.num_gpus);
  std::string message = FitMessage(takes, fit_nodes, fit_gpus, nodes.size());
  return {{"fits", fit_nodes > 0},       {"gpus", fit_gpus},   {"nodes", fit_nodes},
          {"total_nodes", nodes.size()}, {"message", message}, {"per_node", per_node}};
}

}  // namespace fracgpu::ui
