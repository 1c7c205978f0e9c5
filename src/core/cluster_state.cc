#include "core/cluster_state.h"

#include <algorithm>

#include "base/strings.h"
#include "core/annotations.h"
#include "core/codec.h"
#include "core/lent.h"
#include "core/signature.h"

namespace fracgpu::core {
namespace {

// The cordon annotation: comma-separated UUIDs, spaces around each trimmed, empty entries dropped.
std::set<std::string> SplitList(const std::string& s) {
  std::vector<std::string> items = base::SplitComma(s, {.trim = " ", .skip_empty = true});
  return {std::make_move_iterator(items.begin()), std::make_move_iterator(items.end())};
}

// Every init container terminated with exit code 0 (docs/design/hami-behaviour.md §3.8).
bool InitFinished(const PodObject& pod, size_t num_init) {
  if (num_init == 0) return false;
  return pod.init_statuses >= num_init && pod.init_statuses_succeeded;
}

// Every GPU of the node in full: all memory and cores on the first container, and one slot
// per split on each (count containers), so nothing else fits on any of them.
// Ghost GPUs (no longer registered) are left out: nothing can be placed on them.
PodGrants WholeNodeGrants(const NodeState& node) {
  int32_t slots = 1;
  for (const auto& g : node.gpus) {
    if (!g.ghost) slots = std::max(slots, g.info.count);
  }
  PodGrants grants(static_cast<size_t>(slots));
  for (const auto& g : node.gpus) {
    if (g.ghost) continue;
    for (int32_t c = 0; c < std::max(1, g.info.count); ++c) {
      DeviceGrant grant;
      grant.uuid = g.info.uuid;
      grant.mem_mib = c == 0 ? g.info.devmem_mib : 0;
      grant.cores_percent = c == 0 ? g.info.devcore : 0;
      grants[static_cast<size_t>(c)].push_back(grant);
    }
  }
  return grants;
}

}  // namespace

Result<std::optional<PodAllocation>> AllocationFromPod(const PodObject& pod) {
  if (!pod.vgpu_node || pod.vgpu_node->empty() || !pod.allocated) {
    return std::optional<PodAllocation>();
  }
  auto grants = DecodePodGrants(*pod.allocated);
  if (!grants.ok()) {
    return grants.status().WithPrefix("pod " + pod.key + ": annotation " +
                                      kAnnotationVgpuDevicesAllocated);
  }
  PodAllocation a;
  a.key = pod.key;
  a.uid = pod.uid;
  a.node = *pod.vgpu_node;
  a.grants = std::move(*grants);
  a.num_init = std::min(pod.num_init_containers, a.grants.size());
  a.init_finished = InitFinished(pod, a.num_init);
  a.cpu_milli = pod.cpu_milli;
  a.mem_mib = pod.mem_mib;
  a.borrower = pod.borrower;
  return std::optional<PodAllocation>(std::move(a));
}

ClusterState::ClusterState(const ClusterState& other)
    : nodes_(other.nodes_),
      pods_(other.pods_),
      pods_by_node_(other.pods_by_node_),
      applied_(other.applied_),
      host_(other.host_),
      host_used_(other.host_used_),
      orphaned_(other.orphaned_),
      signing_key_(other.signing_key_),
      unverified_(other.unverified_),
      adopt_unsigned_(other.adopt_unsigned_),
      adopt_created_before_(other.adopt_created_before_),
      adopted_count_(other.adopted_count_),
      adopted_(other.adopted_),
      awaiting_adoption_(other.awaiting_adoption_),
      log_(other.log_) {
  RebuildIndex(nodes_.size());
}

ClusterState& ClusterState::operator=(const ClusterState& other) {
  if (this != &other) *this = ClusterState(other);
  return *this;
}

void ClusterState::ReserveIndex(size_t nodes) {
  // At most half full: linear probing stays short (the expected probe of a present name at
  // load ½ is 1.5 slots). Called before a new node enters the map, so that a failed
  // allocation here leaves map and index as they were.
  if (2 * nodes > index_.size()) RebuildIndex(nodes);
}

void ClusterState::IndexInsert(const NodeMap::value_type* entry) {
  const size_t mask = index_.size() - 1;
  const uint64_t h = HashName(entry->first);
  size_t i = h & mask;
  while (index_[i].entry != nullptr) i = (i + 1) & mask;
  index_[i] = {h, entry};
}

void ClusterState::IndexErase(const NodeMap::value_type* entry) {
  // Backward-shift deletion (no tombstones): every later slot of the same run whose home
  // slot does not lie cyclically in (hole, slot] moves into the hole, so each present name
  // stays reachable from its home slot without crossing an empty one. O(run length), not a
  // rebuild: a node pool scaled down by thousands of nodes stays linear.
  const size_t mask = index_.size() - 1;
  size_t hole = HashName(entry->first) & mask;
  while (index_[hole].entry != entry) hole = (hole + 1) & mask;  // it is indexed
  for (size_t j = (hole + 1) & mask; index_[j].entry != nullptr; j = (j + 1) & mask) {
    const size_t home = index_[j].hash & mask;
    const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (!stays) {
      index_[hole] = index_[j];
      hole = j;
    }
  }
  index_[hole] = IndexSlot{};
}

void ClusterState::RebuildIndex(size_t nodes) {
  size_t size = 16;
  while (size < 2 * nodes) size *= 2;
  std::vector<IndexSlot> fresh(size);
  index_.swap(fresh);
  for (const auto& kv : nodes_) IndexInsert(&kv);
}

void ClusterState::StageHash(Pipeline& p, const std::string& name, size_t i) const {
  const uint64_t h = HashName(name);
  p.hash[i % kRing] = h;
  if (!index_.empty()) __builtin_prefetch(&index_[h & (index_.size() - 1)]);
}

void ClusterState::StageProbe(Pipeline& p, size_t i, bool summary) const {
  // To the first slot with the same 64-bit hash; ask for that node's record: its key and the
  // GPU vector's header, or its key, `usable` and the summary's first 8 GPUs.
  const NodeMap::value_type* found = nullptr;
  if (!index_.empty()) {
    const uint64_t h = p.hash[i % kRing];
    const size_t mask = index_.size() - 1;
    for (size_t s = h & mask; index_[s].entry != nullptr; s = (s + 1) & mask) {
      if (index_[s].hash == h) {
        found = index_[s].entry;
        const char* at = reinterpret_cast<const char*>(found);
        // The summary's GPUs in use are not known before the record arrives: ask for the
        // lines of an 8-GPU node's (the common case; larger nodes wait on the rest).
        const char* end = summary ? reinterpret_cast<const char*>(&found->second.summary.gpu[8])
                                  : reinterpret_cast<const char*>(&found->second.state.gpus) +
                                        sizeof(found->second.state.gpus);
        for (; at < end; at += 64) __builtin_prefetch(at);
        __builtin_prefetch(end - 1);
        break;
      }
    }
  }
  p.candidate[i % kRing] = found;
}

void ClusterState::StageConfirm(Pipeline& p, const std::string& name, size_t i, bool gpus) const {
  // A full-hash collision with another name (never seen: 64-bit hashes) falls back to the
  // map's own look-up. Then, with `gpus`, ask for the part of each GPU fit reads (the first
  // 56 bytes of a GpuState, core/node.h).
  const NodeMap::value_type* e = p.candidate[i % kRing];
  if (e != nullptr && e->first != name) {
    auto it = nodes_.find(name);
    e = it != nodes_.end() ? &*it : nullptr;
  }
  const NodeEntry* entry = e != nullptr && e->second.usable ? &e->second : nullptr;
  p.entry[i % kRing] = entry;
  if (entry != nullptr && gpus) {
    for (const GpuState& g : entry->state.gpus) {
      __builtin_prefetch(&g);
      __builtin_prefetch(reinterpret_cast<const char*>(&g) + 55);
    }
  }
}

Status ClusterState::UpsertNode(const NodeObject& node) {
  const std::string& name = node.name;
  NodeEntry entry;
  entry.state.name = name;
  Status result;
  std::vector<DeviceInfo> devices;
  if (node.node_register) {
    auto decoded = DecodeNodeRegister(*node.node_register);
    if (decoded.ok()) {
      devices = std::move(*decoded);
    } else {
      result =
          decoded.status().WithPrefix("node " + name + ": annotation " + kAnnotationNodeRegister);
    }
  }
  std::set<std::string> cordon;
  if (node.cordon) cordon = SplitList(*node.cordon);
  // One copy of each GPU's registration: the GPU state itself (usage is reset and re-applied
  // by RebuildNode).
  entry.state.gpus.reserve(devices.size());
  for (auto& d : devices) {
    GpuState g;
    g.cordoned = cordon.count(d.uuid) > 0;
    g.info = std::move(d);
    entry.state.gpus.push_back(std::move(g));
  }
  if (node.topology) {
    auto scores = DecodeTopologyScores(*node.topology);
    if (scores.ok()) entry.state.topology = std::move(*scores);
  }
  if (node.lent_memory) {
    auto lent = ParseLentMemory(*node.lent_memory);
    if (lent.ok()) {
      entry.state.lent_at_unix = lent->at_unix;
      for (const LentGpu& l : lent->gpus) {
        for (size_t i = 0; i < entry.state.gpus.size(); ++i) {
          if (entry.state.gpus[i].info.uuid != l.uuid || l.mib == 0) continue;
          entry.state.lent_mib.resize(entry.state.gpus.size(), 0);
          entry.state.lent_mib[i] = static_cast<int32_t>(l.mib);  // ≤ kLentMaxMib
        }
      }
    } else if (result.ok()) {
      result = lent.status().WithPrefix("node " + name + ": annotation " + kAnnotationLentMemory +
                                        " (nothing lent)");
    }
  }
  entry.usable = !entry.state.gpus.empty() && node.allocatable_gpus > 0;
  entry.state.cpu_milli_total = node.allocatable_cpu_milli;
  entry.state.mem_mib_total = node.allocatable_mem_mib;
  if (auto used = host_used_.find(name); used != host_used_.end()) {
    entry.state.cpu_milli_used = used->second.first;
    entry.state.mem_mib_used = used->second.second;
  }
  // The GPUs as they were (ghosts included): a GPU that left keeps its registration as a ghost.
  std::vector<GpuState> previous;
  if (auto old = nodes_.find(name); old != nodes_.end()) {
    previous = std::move(old->second.state.gpus);
  } else {
    ReserveIndex(nodes_.size() + 1);
  }
  auto [it, inserted] = nodes_.insert_or_assign(name, std::move(entry));
  if (inserted) IndexInsert(&*it);
  RebuildNode(name, &previous);
  // Pods that waited for this node to be adopted (SetAdoptUnsigned) are checked now.
  std::vector<PodObject> waiting;
  for (auto w = awaiting_adoption_.begin(); w != awaiting_adoption_.end();) {
    if (w->second.node_name == name) {
      waiting.push_back(std::move(w->second));
      w = awaiting_adoption_.erase(w);
    } else {
      ++w;
    }
  }
  for (const PodObject& p : waiting) (void)UpsertPod(p);
  return result;
}

void ClusterState::RemoveNode(const std::string& name) {
  auto it = nodes_.find(name);
  if (it != nodes_.end()) {
    IndexErase(&*it);
    nodes_.erase(it);
  }
  for (const auto& uid : pods_by_node_[name]) applied_.erase(uid);
}

void ClusterState::RebuildNode(const std::string& name, const std::vector<GpuState>* previous) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return;
  NodeEntry& e = it->second;
  for (auto& g : e.state.gpus) {
    g.used = 0;
    g.used_mem_mib = 0;
    g.used_cores = 0;
  }
  for (const auto& uid : pods_by_node_[name]) {
    applied_.erase(uid);
    auto p = pods_.find(uid);
    if (p != pods_.end()) Apply(p->second, true, previous);
  }
  Touch(e);
}

namespace {

// Adds a ghost GpuState (GpuState::ghost) to `node` for every GPU `grants` name that the node
// does not have: its registration as last seen in `previous` when there (a GPU that just left
// the register annotation), else one with no capacity (a restart rebuilding from pods after
// it left). Ghosts are unhealthy and cordoned, so fit never chooses them; they exist so that
// the pod's usage on the GPUs still registered is counted (accounting never lower than what
// pods hold, docs/scheduler.md "A GPU leaving the registration").
void AddGhosts(NodeState& node, const PodGrants& grants, const std::vector<GpuState>* previous) {
  for (const ContainerGrants& c : grants) {
    for (const DeviceGrant& d : c) {
      bool present = false;
      for (const GpuState& g : node.gpus) present = present || g.info.uuid == d.uuid;
      if (present) continue;
      GpuState ghost;
      ghost.info.uuid = d.uuid;
      ghost.info.devmem_mib = 0;
      ghost.info.devcore = 0;
      ghost.info.count = 0;
      ghost.info.type = d.type;
      if (previous != nullptr) {
        for (const GpuState& g : *previous) {
          if (g.info.uuid == d.uuid) ghost.info = g.info;
        }
      }
      ghost.info.health = false;
      ghost.cordoned = true;
      ghost.ghost = true;
      node.gpus.push_back(std::move(ghost));
    }
  }
}

// Drops the ghosts no pod uses any more.
void DropIdleGhosts(NodeState& node) {
  std::erase_if(node.gpus, [](const GpuState& g) {
    return g.ghost && g.used == 0 && g.used_mem_mib == 0 && g.used_cores == 0;
  });
}

}  // namespace

// Adds (or removes) a pod's collapsed usage on its node; tracks which pods are applied so
// add and remove always pair up. A GPU of the allocation the node no longer registers gets a
// ghost (AddGhosts, its registration from `previous` when known), so the rest of the
// allocation is still counted.
void ClusterState::Apply(PodAllocation& a, bool add, const std::vector<GpuState>* previous) {
  auto it = nodes_.find(a.node);
  if (add) {
    if (applied_.count(a.uid) || it == nodes_.end()) return;
    if (a.whole_node) {
      a.grants = WholeNodeGrants(it->second.state);  // the node's GPUs as they are now
      a.num_init = 0;
      a.init_finished = false;
    }
    NodeState& node = it->second.state;
    const size_t before = node.gpus.size();
    AddGhosts(node, a.grants, previous);
    Status st = AddPodGrants(node, a.grants, a.num_init, a.init_finished);
    if (!st.ok()) node.gpus.resize(before);  // no ghost without its usage
    if (st.ok()) {
      Touch(it->second);
      applied_.insert(a.uid);
      if (node.gpus.size() > before) {
        ++orphaned_;
        std::string uuids;
        for (size_t i = before; i < node.gpus.size(); ++i)
          uuids += (uuids.empty() ? "" : ",") + node.gpus[i].info.uuid;
        Log(LogSeverity::kWarning, "pod " + a.key + ": allocation on GPU " + uuids +
                                       ", which node " + a.node +
                                       " does not register; counted there as a ghost GPU (not "
                                       "schedulable) until the pod ends");
      }
    } else {
      ++orphaned_;
      Log(LogSeverity::kWarning,
          "pod " + a.key + ": allocation not counted on node " + a.node + ": " + st.ToString());
    }
  } else {
    if (!applied_.count(a.uid) || it == nodes_.end()) {
      applied_.erase(a.uid);
      return;
    }
    Status st = RemovePodGrants(it->second.state, a.grants, a.num_init, a.init_finished);
    if (st.ok()) DropIdleGhosts(it->second.state);
    Touch(it->second);  // all or nothing: unchanged on error
    if (!st.ok()) {
      Log(LogSeverity::kError,
          "pod " + a.key + ": cannot release usage on " + a.node + ": " + st.ToString());
    }
    applied_.erase(a.uid);
  }
}

Status CheckHamiAdoption(const PodObject& pod, const PodAllocation& allocation,
                         const NodeState* node, const std::string& created_before) {
  const std::string who = "pod " + pod.key + " (unsigned allocation): ";
  if (pod.signature) return PermissionDenied(who + "carries a signature that does not verify");
  // RFC 3339 UTC timestamps of one fixed width compare as strings.
  if (pod.created.size() != 20 || created_before.size() != 20 || pod.created >= created_before) {
    return PermissionDenied(who + "created at \"" + pod.created +
                            "\", not before fracgpu took over (\"" + created_before + "\")");
  }
  if (pod.phase != "Running") {
    return PermissionDenied(who + "phase is \"" + pod.phase + "\", not Running");
  }
  if (pod.node_name.empty() || pod.node_name != allocation.node) {
    return PermissionDenied(who + "bound to node \"" + pod.node_name + "\", but " +
                            kAnnotationVgpuNode + " names \"" + allocation.node + "\"");
  }
  if (node == nullptr) return NotFound(who + "node " + allocation.node + " is not known (yet)");
  auto usage = CollapsePodUsage(allocation.grants, allocation.num_init, allocation.init_finished);
  if (!usage.ok()) return PermissionDenied(who + usage.status().message());
  for (const GpuUsageDelta& d : *usage) {
    const GpuState* gpu = nullptr;
    for (const GpuState& g : node->gpus) {
      if (g.info.uuid == d.uuid && !g.ghost) gpu = &g;
    }
    if (gpu == nullptr) {
      return PermissionDenied(who + "GPU " + d.uuid + " is not registered by node " + node->name +
                              " (" + kAnnotationNodeRegister + ")");
    }
    if (gpu->used + d.slots > gpu->info.count ||
        gpu->used_mem_mib + d.mem_mib > gpu->info.devmem_mib ||
        gpu->used_cores + d.cores > gpu->info.devcore) {
      return PermissionDenied(
          who + "GPU " + d.uuid + " has no room for it: " + std::to_string(d.slots) + " slot(s), " +
          std::to_string(d.mem_mib) + " MiB, " + std::to_string(d.cores) + "% asked; " +
          std::to_string(gpu->used) + "/" + std::to_string(gpu->info.count) + " slots, " +
          std::to_string(gpu->used_mem_mib) + "/" + std::to_string(gpu->info.devmem_mib) +
          " MiB, " + std::to_string(gpu->used_cores) + "/" + std::to_string(gpu->info.devcore) +
          "% already counted");
    }
  }
  return Status::Ok();
}

bool ClusterState::Adopt(const PodObject& pod, const PodAllocation& a) {
  if (auto rec = adopted_.find(pod.uid); rec != adopted_.end()) {
    return rec->second.node == a.node && pod.allocated && rec->second.allocated == *pod.allocated &&
           (pod.node_name.empty() || pod.node_name == a.node);
  }
  // The node as counted without this pod's own usage (its whole-node count, when it had one).
  std::optional<NodeState> node;
  if (auto n = nodes_.find(a.node); n != nodes_.end() && n->second.usable) {
    node = n->second.state;
    auto existing = pods_.find(pod.uid);
    if (existing != pods_.end() && applied_.count(pod.uid) && existing->second.node == a.node) {
      const PodAllocation& e = existing->second;
      if (!RemovePodGrants(*node, e.grants, e.num_init, e.init_finished).ok()) node.reset();
    }
    // Nor with the whole-node counts of the node's other unverified pods: each fills every GPU,
    // so beside one no check could pass, and two HAMi pods of one node, both seen before the
    // node, would each block the other's adoption for good. They stay counted whole node in
    // the books; only this room check leaves them out.
    if (auto on = pods_by_node_.find(a.node); node && on != pods_by_node_.end()) {
      for (const std::string& uid : on->second) {
        auto other = pods_.find(uid);
        if (uid == pod.uid || other == pods_.end() || !other->second.whole_node ||
            !applied_.count(uid) || other->second.node != a.node)
          continue;
        const PodAllocation& o = other->second;
        if (!RemovePodGrants(*node, o.grants, o.num_init, o.init_finished).ok()) node.reset();
        if (!node) break;
      }
    }
  }
  Status st = CheckHamiAdoption(pod, a, node ? &*node : nullptr, adopt_created_before_);
  if (!st.ok()) {
    if (st.code() == StatusCode::kNotFound && !pod.node_name.empty()) {
      awaiting_adoption_[pod.uid] = pod;
    } else {
      awaiting_adoption_.erase(pod.uid);
    }
    Log(LogSeverity::kWarning, "not adopted: " + st.message());
    return false;
  }
  awaiting_adoption_.erase(pod.uid);
  adopted_[pod.uid] = Adoption{a.node, *pod.allocated};
  ++adopted_count_;
  Log(LogSeverity::kWarning, "pod " + pod.key + ": unsigned (HAMi) allocation on node " + a.node +
                                 " verified against the node and adopted: counted as written");
  return true;
}

void ClusterState::AddHostUsed(const std::string& node, int64_t cpu_milli, int64_t mem_mib) {
  auto& used = host_used_[node];
  used.first += cpu_milli;
  used.second += mem_mib;
  if (auto it = nodes_.find(node); it != nodes_.end()) {
    it->second.state.cpu_milli_used = used.first;
    it->second.state.mem_mib_used = used.second;
  }
  if (used.first == 0 && used.second == 0) host_used_.erase(node);
}

void ClusterState::SetHostUse(const std::string& uid, const std::string& node, int64_t cpu_milli,
                              int64_t mem_mib) {
  auto [it, fresh] = host_.try_emplace(uid);
  HostUse& h = it->second;
  if (!fresh) {
    if (h.node == node && h.cpu_milli == cpu_milli && h.mem_mib == mem_mib) return;
    AddHostUsed(h.node, -h.cpu_milli, -h.mem_mib);
  }
  h = HostUse{node, cpu_milli, mem_mib};
  AddHostUsed(node, cpu_milli, mem_mib);
}

void ClusterState::DropHostUse(const std::string& uid) {
  auto it = host_.find(uid);
  if (it == host_.end()) return;
  AddHostUsed(it->second.node, -it->second.cpu_milli, -it->second.mem_mib);
  host_.erase(it);
}

ClusterState::PodCheck ClusterState::CheckPod(const PodObject& pod) const {
  PodCheck check{AllocationFromPod(pod)};
  if (signing_key_.empty()) return check;
  const auto& alloc = check.alloc;
  const std::string& bound = pod.node_name;
  check.verified =
      alloc.ok() && alloc->has_value() && pod.signature &&
      VerifyAllocation(signing_key_, pod.uid, *pod.vgpu_node, *pod.allocated, *pod.signature) &&
      (bound.empty() || bound == *pod.vgpu_node);
  return check;
}

Status ClusterState::UpsertPod(const PodObject& pod, PodCheck check) {
  const std::string& uid = pod.uid;
  if (pod.phase == "Succeeded" || pod.phase == "Failed") {
    Forget(uid);
    return Status::Ok();
  }
  // Host CPU and memory: every bound pod, GPU or not. A version without spec.nodeName (older
  // than the Binding) leaves a bind's Assume in place; a pod is never unbound.
  if (!pod.node_name.empty()) SetHostUse(uid, pod.node_name, pod.cpu_milli, pod.mem_mib);
  auto& alloc = check.alloc;
  auto existing = pods_.find(uid);
  Status unverified;
  if (!signing_key_.empty()) {
    // Accounting only from verified signatures (docs/scheduler.md).
    const auto& node = pod.vgpu_node;
    const auto& allocated = pod.allocated;
    const auto& signature = pod.signature;
    const std::string& bound = pod.node_name;
    bool claims = node.has_value() || allocated.has_value() || signature.has_value();
    bool verified = check.verified;
    if (!verified && adopt_unsigned_ && !signature && alloc.ok() && alloc->has_value()) {
      verified = Adopt(pod, **alloc);
    }
    if (verified) {
      (*alloc)->verified = true;
    } else if (claims || (!bound.empty() && pod.asks_for_gpu)) {
      ++unverified_;
      std::string what = !signature ? "carries no valid fracgpu.io/allocation-signature"
                                    : "has an allocation whose signature does not verify";
      if (existing != pods_.end() && (existing->second.verified || existing->second.assumed) &&
          !existing->second.whole_node) {
        // An edit cannot lower the accounting: the last verified allocation stays.
        return PermissionDenied("pod " + pod.key + " " + what +
                                "; still counting its last verified allocation on node " +
                                existing->second.node);
      }
      PodAllocation whole;
      whole.key = pod.key;
      whole.uid = uid;
      whole.node = bound;  // spec.nodeName: immutable once bound, unlike the annotations
      whole.whole_node = true;
      if (whole.node.empty()) {
        // Not bound: no kubelet runs it, so no device plugin served it anything.
        if (existing != pods_.end()) {
          Apply(existing->second, false);
          pods_by_node_[existing->second.node].erase(uid);
          pods_.erase(existing);
        }
        return PermissionDenied("pod " + pod.key + " " + what +
                                " and is not bound to a node; not counted");
      }
      alloc = std::optional<PodAllocation>(std::move(whole));
      unverified = PermissionDenied("pod " + pod.key + " " + what +
                                    "; counted as holding every GPU of node " + (*alloc)->node);
    }
  }
  if (!alloc.ok() || !alloc->has_value()) {
    // An assumed decision survives older versions of the pod that do not show it yet.
    if (existing != pods_.end() && !existing->second.assumed) {
      Apply(existing->second, false);
      pods_by_node_[existing->second.node].erase(uid);
      pods_.erase(existing);
    }
    return alloc.ok() ? Status::Ok() : alloc.status();
  }
  PodAllocation a = std::move(**alloc);
  if (existing != pods_.end()) {
    PodAllocation& old = existing->second;
    if (a.whole_node && old.whole_node && old.node == a.node) return unverified;
    if (!a.whole_node && !old.whole_node && old.node == a.node && old.grants == a.grants &&
        old.init_finished == a.init_finished && old.num_init == a.num_init) {
      existing->second.assumed = false;
      existing->second.verified = existing->second.verified || a.verified;
      return Status::Ok();
    }
    Apply(old, false);
    pods_by_node_[old.node].erase(uid);
  }
  pods_by_node_[a.node].insert(uid);
  pods_[uid] = a;
  Apply(pods_[uid], true);
  return unverified;
}

Status ClusterState::Assume(const PodAllocation& allocation) {
  auto it = nodes_.find(allocation.node);
  if (it == nodes_.end()) return NotFound("node " + allocation.node + " is not in the cache");
  if (auto old = pods_.find(allocation.uid); old != pods_.end()) {
    Apply(old->second, false);
    pods_by_node_[old->second.node].erase(allocation.uid);
    pods_.erase(old);
  }
  NodeState trial = it->second.state;
  FRACGPU_RETURN_IF_ERROR(
      AddPodGrants(trial, allocation.grants, allocation.num_init, allocation.init_finished));
  PodAllocation a = allocation;
  a.assumed = true;
  a.verified = true;  // this scheduler's own decision
  pods_by_node_[a.node].insert(a.uid);
  pods_[a.uid] = a;
  it->second.state = std::move(trial);
  Touch(it->second);
  applied_.insert(a.uid);
  SetHostUse(a.uid, a.node, a.cpu_milli, a.mem_mib);
  return Status::Ok();
}

void ClusterState::AssumeHostUse(const std::string& uid, const std::string& node, int64_t cpu_milli,
                                 int64_t mem_mib) {
  SetHostUse(uid, node, cpu_milli, mem_mib);
}

void ClusterState::Forget(const std::string& uid) {
  adopted_.erase(uid);
  awaiting_adoption_.erase(uid);
  DropHostUse(uid);
  auto it = pods_.find(uid);
  if (it == pods_.end()) return;
  Apply(it->second, false);
  pods_by_node_[it->second.node].erase(uid);
  pods_.erase(it);
}

std::optional<NodeState> ClusterState::Node(const std::string& name) const {
  const NodeState* node = FindNode(name);
  if (node == nullptr) return std::nullopt;
  return *node;
}

std::optional<PodAllocation> ClusterState::Allocation(const std::string& uid) const {
  const PodAllocation* a = FindAllocation(uid);
  if (a == nullptr) return std::nullopt;
  return *a;
}

const PodAllocation* ClusterState::FindAllocation(const std::string& uid) const {
  auto it = pods_.find(uid);
  return it == pods_.end() ? nullptr : &it->second;
}

std::vector<PodAllocation> ClusterState::Allocations() const {
  std::vector<PodAllocation> out;
  for (const auto& [uid, a] : pods_) out.push_back(a);
  return out;
}

std::vector<NodeState> ClusterState::Nodes() const {
  std::vector<NodeState> out;
  for (const auto& [name, e] : nodes_) {
    if (e.usable) out.push_back(e.state);
  }
  std::sort(out.begin(), out.end(),
            [](const NodeState& a, const NodeState& b) { return a.name < b.name; });
  return out;
}

std::map<std::string, int64_t> ClusterState::BorrowedMib() const {
  std::map<std::string, int64_t> out;
  for (const auto& [uid, a] : pods_) {
    if (!a.borrower) continue;
    auto usage = CollapsePodUsage(a.grants, a.num_init, a.init_finished);
    if (!usage.ok()) continue;  // never applied either (orphaned_allocations counts it)
    for (const GpuUsageDelta& d : *usage) out[d.uuid] += d.mem_mib;
  }
  return out;
}

}  // namespace fracgpu::core
