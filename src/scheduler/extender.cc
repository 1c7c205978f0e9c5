#include "scheduler/extender.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <initializer_list>
#include <optional>

#include "core/codec.h"
#include "core/fit.h"
#include "core/node_lock_codec.h"
#include "core/score.h"
#include "core/signature.h"
#include "k8s/gpu_objects.h"
#include "k8s/objects.h"
#include "scheduler/gpu_choice.h"

namespace fracgpu::scheduler {
namespace {

using nlohmann::json;

core::FitOptions FitOptionsFor(const core::PodRequest& req, const ExtenderConfig& config,
                               bool reasons, int64_t now_unix) {
  core::FitOptions o;
  o.want_reasons = reasons;
  o.default_gpu_policy = req.gpu_policy.value_or(config.default_gpu_policy);
  o.now_unix = now_unix;  // lent memory, for a borrower only (docs/reclaim.md "Lending")
  return o;
}

// The pod's request, a borrower only at spec.priority 0 or below (docs/reclaim.md "Lending"):
// the webhook refuses a higher one at CREATE; one whose annotation was added later is placed
// as an ordinary pod, so that no pod that outranks ordinary pods is put on lent memory. And a
// borrower only while `lending` (ExtenderConfig::lending_enforced: the API server keeps the
// flag fixed, scheduler/borrower_guard.h); otherwise placed as an ordinary pod too.
Result<core::PodRequest> ParseRequest(const json& pod, const core::ResourceNames& names,
                                      bool lending) {
  auto req = core::ParsePodRequest(pod, names);
  if (req.ok() && req->borrower && !lending) req->borrower = false;
  if (req.ok() && req->borrower) {
    const json* spec = pod.is_object() && pod.contains("spec") ? &pod["spec"] : nullptr;
    if (spec != nullptr && spec->is_object()) {
      auto pr = spec->find("priority");
      if (pr != spec->end() && pr->is_number_integer() && pr->get<int64_t>() > 0) {
        req->borrower = false;
      }
    }
  }
  return req;
}

int64_t UnixSeconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

// Appends `s` as a JSON string literal (RFC 8259 §7), escaping as nlohmann::json's dump()
// does: '"', '\\', the two-letter control escapes and \u00XX for the other control bytes;
// other bytes as they are (the strings here come from the validated request, or are ours, so
// they are valid UTF-8). Hand-written because the reply of /filter is built without a DOM.
void AppendJsonString(std::string& out, std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  out += '"';
  size_t run = 0;  // start of the current run of bytes needing no escape
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += "\\u00";
        out += kHex[c >> 4];
        out += kHex[c & 15];
    }
  }
  out.append(s.data() + run, s.size() - run);
  out += '"';
}

// The Nodes of an ExtenderFilterResult: the request's NodeList (`nodes`, as received) with
// its items replaced by those at `keep` (indices into the request's items, in that order);
// every other member of the list (kind, apiVersion, metadata) is kept. Args built by hand
// without the list get minimal items ({"metadata": {"name": …}}) from `names`.
json FilteredNodeList(const json& nodes, const std::vector<std::string>& names,
                      const std::vector<size_t>& keep) {
  json out = json::object();
  const json* items = FindKeyIgnoringCase(nodes, "items");
  const bool have = items != nullptr && items->is_array() && items->size() == names.size();
  if (nodes.is_object()) {
    for (auto it = nodes.begin(); it != nodes.end(); ++it) {
      if (&*it != items) out[it.key()] = *it;
    }
  }
  json kept = json::array();
  for (size_t i : keep)
    kept.push_back(have ? (*items)[i] : json{{"metadata", {{"name", names[i]}}}});
  out["items"] = std::move(kept);
  return out;
}

// The string at `key` of object `obj`, or nullptr when absent or not a string.
const std::string* StringAt(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr;
}

// The value at `keys` below `obj` (objects all the way), or nullptr.
const json* At(const json& obj, std::initializer_list<const char*> keys) {
  const json* v = &obj;
  for (const char* k : keys) {
    if (!v->is_object()) return nullptr;
    auto it = v->find(k);
    if (it == v->end()) return nullptr;
    v = &*it;
  }
  return v;
}

// Whether one NodeSelectorRequirement (k8s.io/api/core/v1 NodeSelectorRequirement; operators
// In, NotIn, Exists, DoesNotExist, Gt, Lt as nodeaffinity.NewNodeSelector reads them) holds
// for the value `have` (nullptr: the label is absent). An unknown operator or malformed
// requirement holds for no node (fail closed).
bool RequirementHolds(const json& req, const std::string* have) {
  const std::string* op = StringAt(req, "operator");
  if (op == nullptr) return false;
  std::vector<std::string> values;
  if (auto v = req.find("values"); v != req.end() && !v->is_null()) {
    if (!v->is_array()) return false;
    for (const auto& e : *v) {
      if (!e.is_string()) return false;
      values.push_back(e.get<std::string>());
    }
  }
  auto listed = [&] {
    return have != nullptr && std::find(values.begin(), values.end(), *have) != values.end();
  };
  if (*op == "In") return listed();
  if (*op == "NotIn") return !listed();
  if (*op == "Exists") return have != nullptr;
  if (*op == "DoesNotExist") return have == nullptr;
  if (*op == "Gt" || *op == "Lt") {
    if (have == nullptr || values.size() != 1) return false;
    int64_t a = 0, b = 0;
    auto parse = [](const std::string& t, int64_t& out) {
      auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
      return ec == std::errc() && p == t.data() + t.size();
    };
    if (!parse(*have, a) || !parse(values[0], b)) return false;
    return *op == "Gt" ? a > b : a < b;
  }
  return false;
}

// Why `node` fails `pod`'s own node predicates — spec.nodeSelector (every pair a label of
// the node) and spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
// (some term whose matchExpressions all hold on the node's labels and matchFields on its
// metadata.name; a term with neither matches nothing) — or "" when it passes. Fields of the
// wrong JSON type fail closed.
std::string NodePredicateFailure(const json& pod, const json& node) {
  const std::string node_name = k8s::Name(node);
  const json* labels = At(node, {"metadata", "labels"});
  auto label = [&](const std::string& key) -> const std::string* {
    return labels != nullptr ? StringAt(*labels, key.c_str()) : nullptr;
  };
  if (const json* sel = At(pod, {"spec", "nodeSelector"}); sel != nullptr && !sel->is_null()) {
    if (!sel->is_object()) return "spec.nodeSelector is not an object";
    for (auto it = sel->begin(); it != sel->end(); ++it) {
      if (!it->is_string()) return "spec.nodeSelector[\"" + it.key() + "\"] is not a string";
      const std::string* have = label(it.key());
      if (have == nullptr || *have != it->get_ref<const std::string&>()) {
        return "node " + node_name + " does not match spec.nodeSelector " + it.key() + "=" +
               it->get<std::string>();
      }
    }
  }
  const json* required = At(
      pod, {"spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"});
  if (required == nullptr || required->is_null()) return "";
  const json* terms = At(*required, {"nodeSelectorTerms"});
  if (terms == nullptr || !terms->is_array()) {
    return "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution has no "
           "nodeSelectorTerms array";
  }
  for (const auto& term : *terms) {
    if (!term.is_object()) continue;
    bool any = false, all = true;
    for (const char* kind : {"matchExpressions", "matchFields"}) {
      auto list = term.find(kind);
      if (list == term.end() || list->is_null()) continue;
      if (!list->is_array()) {
        all = false;
        continue;
      }
      const bool fields = kind[5] == 'F';
      for (const auto& req : *list) {
        any = true;
        const std::string* key = req.is_object() ? StringAt(req, "key") : nullptr;
        if (key == nullptr) {
          all = false;
        } else if (fields) {
          // matchFields supports metadata.name only (ValidateNodeFieldSelectorRequirement).
          all = all && *key == "metadata.name" && RequirementHolds(req, &node_name);
        } else {
          all = all && RequirementHolds(req, label(*key));
        }
      }
    }
    if (any && all) return "";
  }
  return "node " + node_name +
         " matches no term of the pod's required node affinity "
         "(spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution)";
}

}  // namespace

Extender::Extender(ExtenderConfig config, ClusterState* state, k8s::Client* client,
                   EventRecorder* events, metrics::Registry* metrics, base::Clock* clock)
    : config_(std::move(config)),
      state_(state),
      client_(client),
      events_(events),
      metrics_(metrics),
      clock_(clock != nullptr ? clock : base::RealClock::Get()) {
  if (client_ != nullptr)
    locker_ = std::make_unique<NodeLocker>(client_, clock_, config_.lock_expiry);
  if (metrics_ != nullptr) {
    metrics_->Describe("fracgpu_binds_total", metrics::Type::kCounter,
                       "Bind requests by result (ok, conflict, unfit, refused, error).");
  }
}

void Extender::Count(const std::string& result) const {
  if (metrics_ != nullptr) metrics_->Add("fracgpu_binds_total", {{"result", result}});
}

std::string Extender::Filter(const ExtenderArgs& args) const {
  // The reply takes the request's form (kube-scheduler's HTTPExtender.Filter reads NodeNames
  // only when nodeCacheCapable, Nodes otherwise); the other member is null, as Go writes a nil
  // pointer. Keys are the Go field names (the types carry no json tags).
  const bool full = args.had_nodes_list;
  auto req = ParseRequest(args.pod, config_.names, LendingEnforced());
  if (!req.ok()) {
    std::string out =
        R"({"Nodes":null,"NodeNames":null,"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":)";
    AppendJsonString(out, req.status().message());
    out += '}';
    return out;
  }
  size_t names_bytes = 0;
  for (const auto& n : args.node_names) names_bytes += n.size() + 3;
  if (!req->UsesGpu()) {
    std::string out;
    if (full) {
      std::vector<size_t> all(args.node_names.size());
      for (size_t i = 0; i < all.size(); ++i) all[i] = i;
      out = R"({"Nodes":)" + FilteredNodeList(args.nodes, args.node_names, all).dump() +
            R"(,"NodeNames":null,)";
    } else {
      out.reserve(names_bytes + 96);
      out += R"({"Nodes":null,"NodeNames":[)";
      for (size_t i = 0; i < args.node_names.size(); ++i) {
        if (i > 0) out += ',';
        AppendJsonString(out, args.node_names[i]);
      }
      out += "],";
    }
    out += R"("FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":""})";
    return out;
  }
  static const std::string kNoGpus =
      "node has no fracgpu GPUs registered (hami.io/node-nvidia-register) or allocatable is 0";
  // The clock is read only for a borrower: lent memory counts for nobody else.
  const int64_t now_unix = req->borrower ? UnixSeconds(clock_->Now()) : 0;
  core::FitOptions fast = FitOptionsFor(*req, config_, false, now_unix);
  core::TypeVerdictCache types(*req);
  fast.type_cache = &types;
  const core::FitOptions with_reasons = FitOptionsFor(*req, config_, true, now_unix);
  // A pod being re-filtered after a failed bind may still hold an assumed allocation.
  std::optional<PodAllocation> own;
  const std::string pod_uid = k8s::Uid(args.pod);
  std::vector<const std::string*> fit;
  fit.reserve(args.node_names.size());
  // name, reason ("" = kNoGpus: no GPUs at all, which preemption cannot change)
  std::vector<std::pair<const std::string*, std::string>> failed;
  // Most pods' fit is decided by each node's packed summary (core::FitsBySummary, the same
  // checks): about 3 cache lines a node instead of its GPUs' 16. A node it rejects, or one
  // that holds this pod's own assumed allocation, goes the full way.
  const bool by_summary = core::SummaryDecides(*req);
  auto each_node = [&](const std::string& name, const core::NodeState* node,
                       const core::NodeFitSummary* summary) {
    if (node == nullptr) {
      failed.emplace_back(&name, std::string());
      return;
    }
    const bool own_here = own && own->node == name;
    const core::NodeState* view = node;
    core::NodeState without_own;
    if (own_here) {
      without_own = *node;
      (void)core::RemovePodGrants(without_own, own->grants, own->num_init, own->init_finished);
      view = &without_own;
    }
    const bool fits = by_summary && summary->exact && !own_here
                          ? core::FitsBySummary(*req, *summary)
                          : core::Fits(*req, *view, fast);
    if (fits) {
      fit.push_back(&name);
      return;
    }
    core::FitResult r = core::Fit(*req, *view, with_reasons);
    failed.emplace_back(&name,
                        r.summary.empty() ? std::string("does not fit") : std::move(r.summary));
  };
  // The pod's own allocation and every node's fit under one shared lock (ClusterState::Locked).
  state_->Locked([&](const ClusterState::View& v) {
    if (const PodAllocation* a = v.FindAllocation(pod_uid)) own = *a;
    v.model().ForEachNodeSummary(args.node_names, each_node);
  });
  // Namespace GPU quotas (scheduler/quota.h): what the pod would hold on each fitting node,
  // its percentages and whole cards resolved on that node's cards, on top of what the
  // namespace holds.
  const std::string ns = k8s::Namespace(args.pod);
  if (config_.quotas != nullptr && !fit.empty() && config_.quotas->Limited(ns)) {
    const QuotaAmount used = UsedIn(*state_, ns, k8s::Uid(args.pod));
    bool card_dependent = false;
    const QuotaAmount spec_amount = AmountOfRequest(*req, &card_dependent);
    std::vector<const std::string*> within;
    within.reserve(fit.size());
    for (const std::string* name : fit) {
      QuotaAmount add = spec_amount;
      if (card_dependent) {
        auto node = state_->Node(*name);
        if (node && own && own->node == *name) {
          (void)core::RemovePodGrants(*node, own->grants, own->num_init, own->init_finished);
        }
        core::FitResult r = node ? core::Fit(*req, *node, fast) : core::FitResult{};
        if (r.fits) add = AmountOfGrants(r.grants);
      }
      std::string why = config_.quotas->Check(ns, used, add);
      if (why.empty()) {
        within.push_back(name);
      } else {
        failed.emplace_back(name, std::move(why));
      }
    }
    fit = std::move(within);
  }
  auto reason = [&](const std::pair<const std::string*, std::string>& f) -> const std::string& {
    return f.second.empty() ? kNoGpus : f.second;
  };
  if (fit.empty() && events_ != nullptr) {
    // The first five failed nodes by name, as the DOM reply's sorted FailedNodes listed them.
    std::vector<const std::pair<const std::string*, std::string>*> by_name;
    by_name.reserve(failed.size());
    for (const auto& f : failed) by_name.push_back(&f);
    std::stable_sort(by_name.begin(), by_name.end(),
                     [](const auto* a, const auto* b) { return *a->first < *b->first; });
    by_name.erase(std::unique(by_name.begin(), by_name.end(),
                              [](const auto* a, const auto* b) { return *a->first == *b->first; }),
                  by_name.end());
    std::string msg = std::to_string(by_name.size()) + " nodes do not fit:";
    for (size_t i = 0; i < by_name.size() && i < 5; ++i) {
      msg += " " + *by_name[i]->first + " (" + reason(*by_name[i]) + ")";
    }
    events_->Record(args.pod, "Warning", "FilteringFailed", msg);
  }
  // The node /prioritize would score highest, alone (ExtenderConfig::
  // filter_returns_every_fitting_node): kube-scheduler then binds there without scoring the
  // others or calling /prioritize, and the pod is reserved on it now, as /prioritize would.
  // (Ranked in a shared section of its own: one section for the fit and the ranking made the
  // tail no shorter, rather longer, docs/performance.md run 15.)
  if (!config_.filter_returns_every_fitting_node && !fit.empty()) {
    std::vector<std::string> names;
    names.reserve(fit.size());
    for (const std::string* n : fit) names.push_back(*n);
    const Ranking r = Rank(args.pod, &*req, names);
    if (r.top) {
      const std::string* top = fit[*r.top];  // names[i] is *fit[i]
      fit.assign(1, top);
    }
  }
  std::string out;
  size_t failed_bytes = 0;
  for (const auto& f : failed) failed_bytes += f.first->size() + reason(f).size() + 6;
  out.reserve(names_bytes + failed_bytes + 128);
  if (full) {
    // ForEachNode hands out references into args.node_names, whose order is the items'.
    std::vector<size_t> keep;
    keep.reserve(fit.size());
    for (const std::string* n : fit)
      keep.push_back(static_cast<size_t>(n - args.node_names.data()));
    out += R"({"Nodes":)";
    out += FilteredNodeList(args.nodes, args.node_names, keep).dump();
    out += R"(,"NodeNames":null)";
  } else {
    out += R"({"Nodes":null,"NodeNames":[)";
    for (size_t i = 0; i < fit.size(); ++i) {
      if (i > 0) out += ',';
      AppendJsonString(out, *fit[i]);
    }
    out += ']';
  }
  // A node with no fracgpu GPUs goes to FailedAndUnresolvableNodes, one that is only too full
  // (or of the wrong type now) to FailedNodes: preemption is tried for the latter only.
  for (const bool unresolvable : {false, true}) {
    out += unresolvable ? R"(,"FailedAndUnresolvableNodes":{)" : R"(,"FailedNodes":{)";
    bool first = true;
    for (const auto& f : failed) {
      if (f.second.empty() != unresolvable) continue;
      if (!first) out += ',';
      first = false;
      AppendJsonString(out, *f.first);
      out += ':';
      AppendJsonString(out, reason(f));
    }
    out += '}';
  }
  out += R"(,"Error":""})";
  return out;
}

json Extender::Prioritize(const ExtenderArgs& args) const {
  auto req = ParseRequest(args.pod, config_.names, LendingEnforced());
  const Ranking r = Rank(args.pod, req.ok() ? &*req : nullptr, args.node_names);
  json out = json::array();
  for (size_t i = 0; i < args.node_names.size(); ++i)
    out.push_back({{"Host", args.node_names[i]}, {"Score", r.scores[i]}});
  return out;
}

Extender::Ranking Extender::Rank(const json& pod, const core::PodRequest* req,
                                 const std::vector<std::string>& names) const {
  RankStart start = BeginRank(pod, req);
  if (!start.ranks) return Ranking{std::vector<int64_t>(names.size(), 0), std::nullopt};
  std::optional<core::NodeState> reserve_on;
  Ranking r = state_->Locked(
      [&](const ClusterState::View& v) { return RankIn(v, start, req, names, &reserve_on); });
  // After the section: the reservation on the top node.
  if (reserve_on) Reserve(pod, *req, names[*r.top], start.now, std::move(reserve_on));
  return r;
}

Extender::RankStart Extender::BeginRank(const json& pod, const core::PodRequest* req) const {
  RankStart s;
  if (req == nullptr) return s;
  s.policy = req->node_policy.value_or(config_.default_node_policy);
  // A pod without GPUs scores 0 everywhere, unless it is fragmentation-aware: FGD places a
  // CPU-only pod too, where its CPU strands the fewest GPUs (the simulator's experiment does;
  // spreading them by kube-scheduler's own scores costs FGD points, docs/simulate.md).
  const bool fragmentation_aware =
      req->gpu_policy.value_or(config_.default_gpu_policy) == core::GpuPolicy::kFragmentationAware;
  s.ranks = req->UsesGpu() || fragmentation_aware;
  if (!s.ranks) return s;
  // Reservations (file comment): this pod's own earlier one no longer holds.
  s.uid = k8s::Uid(pod);
  s.now = clock_->Now();
  s.reserving = req->UsesGpu() && !s.uid.empty() && client_ != nullptr;
  if (s.reserving) {
    ExpireReservations(s.now);
    (void)TakeReservation(s.uid, /*forget=*/true);
  }
  // The pod's CPU request and the nodes' CPU left feed FGD+CpuRoute (issue 34 item 7).
  s.inputs.fixed_workload = &config_.fragmentation_workload;
  if (fragmentation_aware) s.inputs.pod_cpu_milli = k8s::PodHostRequests(pod).cpu_milli;
  // Busy nodes 0, the others at least 1, while some node is not busy, under spread and
  // (opted in) binpack (file comment). The reservations' and binds' nodes are read here,
  // under pending_mu_, which is never taken inside the state's lock.
  s.avoid_busy = s.policy == core::NodePolicy::kSpread ||
                 (s.policy == core::NodePolicy::kBinpack && config_.binpack_avoids_busy_nodes);
  if (s.avoid_busy) {
    std::lock_guard<std::mutex> lock(pending_mu_);
    for (const auto& [node, n] : busy_) s.pending_busy.insert(s.pending_busy.end(), node);
  }
  return s;
}

Extender::Ranking Extender::RankIn(const ClusterState::View& v, const RankStart& s,
                                   const core::PodRequest* req,
                                   const std::vector<std::string>& names,
                                   std::optional<core::NodeState>* reserve_on) const {
  Ranking r;
  r.scores.assign(names.size(), 0);
  if (req == nullptr || !s.ranks) return r;
  // The position in `prio` of the highest score, when no other position has it too.
  auto unique_top = [](const std::vector<int64_t>& prio) -> std::optional<size_t> {
    size_t best = 0, ties = 0;
    for (size_t i = 0; i < prio.size(); ++i) {
      if (ties == 0 || prio[i] > prio[best]) {
        best = i;
        ties = 1;
      } else if (prio[i] == prio[best]) {
        ++ties;
      }
    }
    if (ties != 1) return std::nullopt;
    return best;
  };
  // The node the reservation goes to (Rank, after the section): copied here, unless the pod has an
  // allocation (bound, or being bound), which a reservation never moves.
  auto reserve_top = [&] {
    if (s.reserving && r.top && v.FindAllocation(s.uid) == nullptr) {
      *reserve_on = v.model().Node(names[*r.top]);
    }
  };
  // A fragmentation-aware pod: the node FGD would choose scores 10 (core/bind_choice.h, the
  // model /bind then picks the GPUs with).
  std::optional<std::vector<int64_t>> frag = core::FragmentationAwarePriorities(
      *req, names, v.model(), config_.default_gpu_policy, s.inputs);
  if (!req->UsesGpu() && !frag) return r;
  if (frag) {
    r.scores = std::move(*frag);
    r.top = unique_top(r.scores);
    reserve_top();
    return r;
  }
  // The nodes the state knows (index into `names`) and their raw scores; the others stay 0.
  std::vector<size_t> known;
  std::vector<float> scores;
  known.reserve(names.size());
  scores.reserve(names.size());
  v.model().ForEachNode(names, [&](const std::string& name, const core::NodeState* node) {
    if (node == nullptr) return;
    // ForEachNode hands out references into `names`.
    known.push_back(static_cast<size_t>(&name - names.data()));
    scores.push_back(core::NodeScore(*node));
  });
  if (known.empty()) return r;
  auto prio = core::PriorityScores(s.policy, scores);
  std::vector<char> busy(known.size());
  bool any_busy = false, any_free = false;
  if (s.avoid_busy) {
    const std::set<std::string> busy_now = BusyNodes(s, v);
    for (size_t i = 0; i < known.size(); ++i) {
      busy[i] = busy_now.count(names[known[i]]) != 0 ? 1 : 0;
      (busy[i] != 0 ? any_busy : any_free) = true;
    }
  }
  if (s.avoid_busy && any_busy && any_free) {
    for (size_t i = 0; i < known.size(); ++i)
      prio[i] = busy[i] != 0 ? 0 : std::max<int64_t>(1, prio[i]);
  }
  // One node alone at the top, the one of the highest raw score (the first in the request's
  // order among equals); the others at the top one step lower. Rounding to 0–10 ties nodes
  // of nearly the same use (and all empty nodes), and kube-scheduler picks at random among
  // equal totals: so its choice is the node reserved below.
  const core::NodePolicy policy = s.policy;
  size_t best = known.size();
  for (size_t i = 0; i < known.size(); ++i) {
    if (best == known.size() || prio[i] > prio[best] ||
        (prio[i] == prio[best] && policy == core::NodePolicy::kBinpack &&
         scores[i] > scores[best]) ||
        (prio[i] == prio[best] && policy != core::NodePolicy::kBinpack &&
         scores[i] < scores[best])) {
      best = i;
    }
  }
  for (size_t i = 0; i < known.size(); ++i) {
    if (i != best && prio[i] == prio[best] && prio[i] > 0) --prio[i];
  }
  for (size_t i = 0; i < known.size(); ++i) r.scores[known[i]] = prio[i];
  if (auto top = unique_top(prio)) r.top = known[*top];
  reserve_top();
  return r;
}

std::string Extender::ReservedNode(const std::string& uid) const {
  std::lock_guard<std::mutex> lock(pending_mu_);
  auto it = reservations_.find(uid);
  return it != reservations_.end() ? it->second.node : std::string();
}

void Extender::AddBusy(const std::string& node, int delta) const {
  std::lock_guard<std::mutex> lock(pending_mu_);
  int& n = busy_[node];
  n += delta;
  if (n <= 0) busy_.erase(node);
}

std::set<std::string> Extender::BusyNodes(const RankStart& s, const ClusterState::View& v) const {
  std::set<std::string> out = s.pending_busy;
  for (const auto& [node, at] : v.NodeLockTimes(s.now)) {
    if (s.now - at < config_.lock_expiry) out.insert(node);
  }
  if (config_.node_lock == NodeLockMode::kBindPhase) out.merge(v.PodLockedNodes());
  return out;
}

void Extender::ExpireReservations(std::chrono::system_clock::time_point now) const {
  std::lock_guard<std::mutex> lock(pending_mu_);
  if (reservations_.empty()) return;
  // Whether the watch showed each pod bound (its annotations) or deleted, so that nothing is
  // left to hold: all read under one shared lock, in the map's order.
  std::vector<char> shown(reservations_.size());
  state_->Locked([&](const ClusterState::View& v) {
    size_t i = 0;
    for (const auto& [uid, r] : reservations_) {
      const PodAllocation* a = v.FindAllocation(uid);
      shown[i++] = a == nullptr || !a->assumed || a->node != r.node ? 1 : 0;
    }
  });
  size_t i = 0;
  for (auto it = reservations_.begin(); it != reservations_.end(); ++i) {
    const std::string& uid = it->first;
    const Reservation& r = it->second;
    bool drop = now - r.at >= config_.reservation_ttl;
    if (drop) {
      (void)state_->ForgetAssumed(uid, r.node);
    } else {
      drop = shown[i] != 0;
    }
    if (!drop) {
      ++it;
      continue;
    }
    if (--busy_[r.node] <= 0) busy_.erase(r.node);
    it = reservations_.erase(it);
  }
}

std::optional<std::string> Extender::TakeReservation(const std::string& uid, bool forget) const {
  std::lock_guard<std::mutex> lock(pending_mu_);
  auto it = reservations_.find(uid);
  if (it == reservations_.end()) return std::nullopt;
  std::string node = it->second.node;
  if (forget) (void)state_->ForgetAssumed(uid, node);
  if (--busy_[node] <= 0) busy_.erase(node);
  reservations_.erase(it);
  return node;
}

void Extender::Reserve(const json& pod, const core::PodRequest& req, const std::string& node_name,
                       std::chrono::system_clock::time_point now,
                       std::optional<core::NodeState> node) const {
  const std::string ns = k8s::Namespace(pod);
  const std::string uid = k8s::Uid(pod);
  if (config_.quotas != nullptr && config_.quotas->Limited(ns)) return;
  if (!node) return;
  const k8s::HostRequests host = k8s::PodHostRequests(pod);
  core::FragmentationInputs inputs;
  inputs.pod_cpu_milli = host.cpu_milli;
  inputs.fixed_workload = &config_.fragmentation_workload;
  inputs.now_unix = UnixSeconds(now);
  core::FitResult fit = FitForBind(req, *node, *state_, config_.default_gpu_policy, inputs);
  if (!fit.fits) return;
  PodAllocation alloc;
  alloc.key = ns + "/" + k8s::Name(pod);
  alloc.uid = uid;
  alloc.node = node_name;
  alloc.grants = fit.grants;
  alloc.num_init = core::CountInitContainers(req);
  alloc.cpu_milli = host.cpu_milli;
  alloc.mem_mib = host.mem_mib;
  alloc.borrower = req.borrower;
  std::lock_guard<std::mutex> lock(pending_mu_);
  // Checked again under pending_mu_, with the binds in flight: a bind claims its pod before it
  // takes the pod's reservation (under pending_mu_) and only then forgets and assumes its own
  // decision, so a reservation made here either comes before that take (and the bind replaces
  // it) or sees the claim, or the bind's decision, and stays out. Without it a /filter of a pod
  // being bound could replace the bind's decision, or leave a reservation whose lapse forgets
  // it: accounting lower than what the pod holds.
  if (reservations_.size() >= kMaxReservations || reservations_.count(uid) != 0 ||
      BeingBound(uid) || !state_->AssumeIfAbsent(alloc).ok()) {
    return;
  }
  reservations_[uid] = Reservation{node_name, now};
  ++busy_[node_name];
}

std::mutex& Extender::NodeMutex(const std::string& node) {
  std::lock_guard<std::mutex> lock(mutexes_mu_);
  auto& m = node_mutexes_[node];
  if (!m) m = std::make_unique<std::mutex>();
  return *m;
}

bool Extender::ClaimPod(const std::string& key, const std::string& uid) {
  std::lock_guard<std::mutex> lock(binding_mu_);
  if (binding_.count(key) != 0 || (!uid.empty() && binding_uids_.count(uid) != 0)) return false;
  binding_.insert(key);
  if (!uid.empty()) binding_uids_.insert(uid);
  return true;
}

void Extender::ReleasePod(const std::string& key, const std::string& uid) {
  std::lock_guard<std::mutex> lock(binding_mu_);
  binding_.erase(key);
  if (!uid.empty()) binding_uids_.erase(uid);
}

bool Extender::BeingBound(const std::string& uid) const {
  std::lock_guard<std::mutex> lock(binding_mu_);
  return binding_uids_.count(uid) != 0;
}

Status Extender::WriteAllowed() const {
  return config_.write_guard ? config_.write_guard() : Status::Ok();
}

json Extender::Bind(const ExtenderBindingArgs& args) {
  std::string who = args.pod_namespace + "/" + args.pod_name;
  // The node /prioritize reserved the pod on, taken over by this bind (file comment).
  std::optional<std::string> reserved_on;
  auto fail = [&](const Status& st, const json& pod, const std::string& result) {
    // A failed bind leaves no reservation behind (BindLocked forgets its own decision).
    if (reserved_on) (void)state_->ForgetAssumed(args.pod_uid, *reserved_on);
    Count(result);
    if (events_ != nullptr && pod.is_object()) {
      events_->Record(pod, "Warning", "BindingFailed",
                      "Failed to bind " + who + " to node " + args.node + ": " + st.message());
    }
    spdlog::info("bind {} → {} failed: {}", who, args.node, st.ToString());
    return json{{"Error", st.message()}};
  };
  if (client_ == nullptr) return fail(Internal("the extender has no API client"), json(), "error");
  // One bind per pod at a time: a second call while one is in flight (kube-scheduler retrying,
  // or anyone else) changes nothing — no lock, no annotation, no rollback of the first's.
  if (!ClaimPod(who, args.pod_uid)) {
    return fail(Conflict("a bind of pod " + who + " is already in progress"), json(), "conflict");
  }
  struct Release {
    Extender* self;
    const std::string& key;
    const std::string& uid;
    ~Release() { self->ReleasePod(key, uid); }
  } release{this, who, args.pod_uid};
  // Until it ends, the bind makes its node busy for /prioritize; the reservation (still
  // counted in the state) becomes this bind's to replace or drop.
  reserved_on = TakeReservation(args.pod_uid, /*forget=*/false);
  AddBusy(args.node, 1);
  struct Unbusy {
    const Extender* self;
    const std::string& node;
    ~Unbusy() { self->AddBusy(node, -1); }
  } unbusy{this, args.node};
  // The pod as kube-apiserver's watch cache has it (resourceVersion=0), not a quorum read of
  // etcd (issue 37 item 1), and never a caller's copy: the grant is computed from the API
  // server's pod. The Binding carries the resourceVersion read, so the API server binds that
  // version of the pod or nothing; on its 409 (the cache was behind) the attempt is undone
  // and runs once more on a quorum read. A cache that lacks the pod, or holds another pod of
  // the name, is read past the same way.
  bool from_cache = true;
  for (;;) {
    Result<json> pod = client_->Get(k8s::PodPath(args.pod_namespace, args.pod_name) +
                                    (from_cache ? "?resourceVersion=0" : ""));
    if (from_cache && ((!pod.ok() && pod.status().code() == StatusCode::kNotFound) ||
                       (pod.ok() && k8s::Uid(*pod) != args.pod_uid))) {
      from_cache = false;
      continue;
    }
    if (!pod.ok()) return fail(pod.status(), json(), "error");
    if (k8s::Uid(*pod) != args.pod_uid) {
      return fail(Conflict("pod " + who + " has UID " + k8s::Uid(*pod) + ", not " + args.pod_uid),
                  *pod, "error");
    }
    if (!k8s::PodNodeName(*pod).empty()) {
      return fail(Conflict("pod " + who + " is already bound to node " + k8s::PodNodeName(*pod)),
                  *pod, "conflict");
    }
    if (k8s::PodSchedulerName(*pod) != config_.scheduler_name) {
      return fail(PermissionDenied("pod " + who + " is not scheduled by " + config_.scheduler_name +
                                   " (spec.schedulerName \"" + k8s::PodSchedulerName(*pod) +
                                   "\"); not bound"),
                  *pod, "refused");
    }
    // resourceVersion=0: the API server's watch cache answers, not a quorum read of etcd (one
    // etcd read a bind fewer, issue 37 item 1). A stale copy costs nothing but a re-read: the
    // lock patch carries its resourceVersion (409 → NodeLocker reads the node afresh), and a
    // lock it shows that is gone since is read again too.
    auto node_obj = config_.node_lookup
                        ? config_.node_lookup(args.node)
                        : client_->Get(k8s::NodePath(args.node) + "?resourceVersion=0");
    if (!node_obj.ok()) {
      if (node_obj.status().code() != StatusCode::kNotFound) {
        return fail(node_obj.status(), *pod, "error");
      }
      return fail(NotFound("node " + args.node + " does not exist; pod " + who + " not bound"),
                  *pod, "refused");
    }
    if (std::string why = NodePredicateFailure(*pod, *node_obj); !why.empty()) {
      return fail(PermissionDenied("pod " + who + " cannot run on node " + args.node + ": " + why),
                  *pod, "refused");
    }
    auto req = ParseRequest(*pod, config_.names, LendingEnforced());
    if (!req.ok()) return fail(req.status(), *pod, "error");
    if (!req->UsesGpu()) {
      Status st = WriteAllowed();
      // Its CPU and memory count on the node before the Binding can be seen (as a GPU pod's do
      // through Assume): the next /prioritize reads the node's CPU left (FGD+CpuRoute).
      const std::string uid = k8s::Uid(*pod);
      const k8s::HostRequests host = k8s::PodHostRequests(*pod);
      if (st.ok() && !uid.empty()) {
        state_->AssumeHostUse(uid, args.node, host.cpu_milli, host.mem_mib);
      }
      // The Binding carries the pod's UID and resourceVersion as read: the API server binds
      // that pod as read or nothing (a 409 for the cache's copy: once more, read afresh).
      k8s::Client::BindingMeta meta;
      meta.uid = args.pod_uid;
      meta.resource_version = k8s::ResourceVersion(*pod);
      if (st.ok()) st = client_->BindPod(args.pod_namespace, args.pod_name, args.node, meta);
      if (!st.ok()) {
        if (!uid.empty()) state_->Forget(uid);
        if (from_cache && st.code() == StatusCode::kConflict) {
          from_cache = false;
          continue;
        }
        return fail(st, *pod, "error");
      }
      Count("ok");
      return json{{"Error", ""}};
    }
    Status st;
    bool stale = false;
    {
      std::lock_guard<std::mutex> node_guard(NodeMutex(args.node));
      // The node as read just now (not an informer's copy, which may lack the lock) saves the
      // node lock one GET.
      st = BindLocked(args, *pod, *req, config_.node_lookup ? nullptr : &*node_obj,
                      from_cache ? &stale : nullptr);
    }
    if (stale) {
      spdlog::info(
          "bind {}: the Binding's preconditions failed on the watch cache's copy of the "
          "pod; read afresh",
          who);
      from_cache = false;
      continue;
    }
    if (!st.ok()) {
      const char* result = st.code() == StatusCode::kConflict            ? "conflict"
                           : st.code() == StatusCode::kResourceExhausted ? "unfit"
                                                                         : "error";
      return fail(st, *pod, result);
    }
    Count("ok");
    if (events_ != nullptr) {
      events_->Record(*pod, "Normal", "BindingSucceed",
                      "Successfully binding node [" + args.node + "] to " + who);
    }
    return json{{"Error", ""}};
  }
}

Status Extender::BindLocked(const ExtenderBindingArgs& args, const json& pod,
                            const core::PodRequest& req, const json* node_obj, bool* stale) {
  const std::string& ns = args.pod_namespace;
  const std::string& name = args.pod_name;
  const std::string uid = k8s::Uid(pod);
  FRACGPU_RETURN_IF_ERROR(WriteAllowed());
  // kBindPhase: a pod of this node between its Binding and its Allocate holds the node. The
  // check and this bind's own hold (noted before its Binding is written: the watch may show
  // the pod served before this thread runs again) happen under this node's mutex, so no
  // other bind of the process passes in between. Also where a Node lock is taken over below
  // under kBindPhase: that lock must not name a second pod of the node.
  const bool pod_lock = config_.node_lock == NodeLockMode::kBindPhase;
  if (pod_lock) {
    ClusterState::PodLock held;
    switch (state_->HoldNode(
        uid, {args.node, ns + "/" + name, clock_->Now(), false, k8s::CreationTimestamp(pod)},
        &held)) {
      case ClusterState::Hold::kTaken:
        break;
      case ClusterState::Hold::kHeldByOther:
        return Conflict("node " + args.node + " is held by pod " + held.key +
                        " (hami.io/bind-phase allocating since " +
                        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                           held.since.time_since_epoch())
                                           .count()) +
                        ") until its device plugin serves it");
      case ClusterState::Hold::kAlreadyHolding:
        // This pod holds a node already (bound, its first reply lost, and bound again from a
        // stale copy): a repeated bind must neither move nor drop that hold.
        return Conflict("pod " + ns + "/" + name + " is already bound and being allocated");
    }
  }
  // The Node's own lock: always under kAnnotation; under kBindPhase only while the watch shows
  // one on the node (HAMi's scheduler's, or one set before the switch), which its protocol
  // then checks and takes over. (Not a lock only noted: the one this process takes over is
  // covered by the pod's hold.)
  const bool node_lock = !pod_lock || state_->NodeLockTime(args.node).has_value();
  if (node_lock) {
    std::string lock_value;
    Status locked = locker_->Lock(args.node, ns, name, node_obj, &lock_value);
    // The lock taken, or the one met, counts for /prioritize at once (Busy), before the watch
    // shows it (ClusterState::NoteNodeLock).
    if (!lock_value.empty()) {
      if (auto v = core::DecodeNodeLock(lock_value); v.ok())
        state_->NoteNodeLock(args.node, v->time, clock_->Now());
    }
    if (!locked.ok() && pod_lock) state_->ForgetPodLockNote(uid, args.node);
    FRACGPU_RETURN_IF_ERROR(locked);
  }
  // Until `done`, every way out releases the lock and forgets the decision: a failed bind
  // leaves neither a lock, a hold nor a reservation behind.
  bool done = false;
  struct Undo {
    Extender* self;
    const ExtenderBindingArgs& args;
    const std::string& uid;
    bool& done;
    bool pod_lock;
    bool node_lock;
    ~Undo() {
      if (done) return;
      self->state_->Forget(uid);
      // Only the note this bind wrote: a hold the watch shows (the Binding landed after all)
      // stays until the watch shows it end.
      if (pod_lock) self->state_->ForgetPodLockNote(uid, args.node);
      if (!node_lock) return;
      Status u = self->locker_->Unlock(args.node, args.pod_namespace, args.pod_name);
      if (!u.ok()) spdlog::warn("node {}: lock not released: {}", args.node, u.ToString());
      if (u.ok()) self->state_->ForgetNodeLockNote(args.node);
    }
  } undo{this, args, uid, done, pod_lock, node_lock};
  // Re-check against the state now (another bind may have landed since /filter). The pod's
  // own earlier decision, if any (a bind that failed), no longer holds.
  state_->Forget(uid);
  auto node = state_->Node(args.node);
  if (!node) return NotFound("node " + args.node + " has no fracgpu GPUs registered");
  const k8s::HostRequests host = k8s::PodHostRequests(pod);
  core::FragmentationInputs inputs;
  inputs.pod_cpu_milli = host.cpu_milli;
  inputs.fixed_workload = &config_.fragmentation_workload;
  inputs.now_unix = UnixSeconds(clock_->Now());
  core::FitResult fit = FitForBind(req, *node, *state_, config_.default_gpu_policy, inputs);
  if (!fit.fits) {
    return ResourceExhausted("pod no longer fits on node " + args.node + ": " + fit.summary);
  }
  PodAllocation alloc;
  alloc.key = ns + "/" + name;
  alloc.uid = uid;
  alloc.node = args.node;
  alloc.grants = fit.grants;
  alloc.num_init = core::CountInitContainers(req);
  alloc.cpu_milli = host.cpu_milli;  // counted on the node's CPU at once (Assume)
  alloc.mem_mib = host.mem_mib;
  alloc.borrower = req.borrower;
  // Namespace GPU quotas: checked against what the namespace holds now and recorded in the
  // same critical section, so two binds of one namespace on different nodes cannot both pass.
  std::unique_lock<std::mutex> quota_lock(quota_mu_, std::defer_lock);
  if (config_.quotas != nullptr && config_.quotas->Limited(ns)) {
    quota_lock.lock();
    std::string why =
        config_.quotas->Check(ns, UsedIn(*state_, ns, uid), AmountOfGrants(fit.grants));
    if (!why.empty())
      return ResourceExhausted("pod does not fit on node " + args.node + ": " + why);
  }
  FRACGPU_RETURN_IF_ERROR(state_->Assume(alloc));
  if (quota_lock.owns_lock()) quota_lock.unlock();
  std::string encoded = core::EncodePodGrants(fit.grants);
  auto now = clock_->Now();
  std::string secs = std::to_string(
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count());
  // The decision travels in the Binding itself, not in a pod PATCH before it (issue 37
  // item 1: one pod write, one admission pass and one watch event a bind fewer). The API
  // server's BindingREST.setPodNodeAndMetadata (pkg/registry/core/pod/storage/storage.go,
  // identical in v1.34.4 and v1.37.2) merges metadata.annotations into the pod's in the same
  // GuaranteedUpdate that sets spec.nodeName, under the Binding's uid and resourceVersion
  // preconditions: the pod is either bound with the decision, or left as it was. So a device
  // plugin (fracgpu's or HAMi's) never sees a bound pod without these annotations, and a
  // failed Binding leaves nothing on the pod to clear. The label hami.io/vgpu-node (HAMi sets
  // it; nothing at Allocate reads it) is copied by the same function only where the feature
  // gate PodTopologyLabelsAdmission is on (1.35 and later by default), so 1.34 drops it.
  k8s::Client::BindingMeta meta;
  meta.uid = uid;
  // The pod's resourceVersion as read: if anyone changed the pod since (another binder's
  // decision), the API server answers 409 and nothing is written.
  meta.resource_version = k8s::ResourceVersion(pod);
  meta.annotations = {{core::kAnnotationVgpuNode, args.node},
                      {core::kAnnotationVgpuTime, secs},
                      {core::kAnnotationVgpuDevicesAllocated, encoded},
                      {core::kAnnotationVgpuDevicesToAllocate, encoded},
                      {core::kAnnotationBindPhase, core::kBindPhaseAllocating},
                      {core::kAnnotationBindTime, secs}};
  if (!config_.signing_key.empty()) {
    meta.annotations[core::kAnnotationAllocationSignature] =
        core::SignAllocation(config_.signing_key, uid, args.node, encoded);
  }
  meta.labels = {{core::kAnnotationVgpuNode, args.node}};
  FRACGPU_RETURN_IF_ERROR(WriteAllowed());
  if (Status bound = client_->BindPod(ns, name, args.node, meta); !bound.ok()) {
    if (stale != nullptr && bound.code() == StatusCode::kConflict) *stale = true;
    return bound;
  }
  // The lock stays: the device plugin releases it after Allocate, or ends the pod's
  // bind-phase (docs/design/CONTRACT.md §2).
  done = true;
  return Status::Ok();
}

}  // namespace fracgpu::scheduler
