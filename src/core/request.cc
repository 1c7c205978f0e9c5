// ParsePodRequest: the one request parser of docs/design/CONTRACT.md §1 (webhook, scheduler,
// simulator, UI).

#include "core/request.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "base/strings.h"
#include "core/gputype.h"
#include "core/quantity.h"
#include "core/request_json.h"

namespace fracgpu::core {
namespace {

using nlohmann::json;
using request_json::Describe;
using request_json::ParseGoBool;
using request_json::Quote;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// How one resource is validated and described in messages.
struct ResourceRule {
  const std::string& name;
  int64_t min;
  int64_t max;
  const char* range;  // "must be <range>, got …"
  const char* whole;  // "<name> <whole>, got …" for fractions and binary suffixes
  bool mib_hint;      // suggest the MiB value of a binary-suffixed quantity
};

// "<name> must be <range>, got <value>"
Status RangeError(const ResourceRule& rule, const json& value) {
  return InvalidArgument(rule.name + " must be " + rule.range + ", got " + Describe(value));
}

// "<name> <whole>, got <value>[ (did you mean N?)]"
Status WholeError(const ResourceRule& rule, const json& value, const Quantity* q) {
  std::string msg = rule.name + " " + rule.whole + ", got " + Describe(value);
  if (rule.mib_hint && q != nullptr && q->HasBinarySuffix() && !q->negative) {
    int64_t mib = 0;
    if (QuantityToInt64(*q, &mib, 20) == WholeStatus::kOk && mib >= rule.min && mib <= rule.max) {
      msg += " (did you mean " + std::to_string(mib) + "?)";
    }
  }
  return InvalidArgument(msg);
}

// Reads a resource value (a JSON number, or a quantity string) as a whole number within the
// rule's range. Errors name the resource and the value, without the container.
Result<int64_t> ReadResource(const json& value, const ResourceRule& rule) {
  int64_t v = 0;
  switch (value.type()) {
    case json::value_t::number_integer:
      v = value.get<int64_t>();
      break;
    case json::value_t::number_unsigned:
      if (value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return RangeError(rule, value);
      }
      v = static_cast<int64_t>(value.get<uint64_t>());
      break;
    case json::value_t::number_float: {
      double d = value.get<double>();
      if (!std::isfinite(d)) return RangeError(rule, value);
      if (std::floor(d) != d) return WholeError(rule, value, nullptr);
      if (d < -9.2e18 || d > 9.2e18) return RangeError(rule, value);
      v = static_cast<int64_t>(d);
      break;
    }
    case json::value_t::string: {
      Result<Quantity> q = ParseQuantity(value.get_ref<const std::string&>());
      if (!q.ok()) return RangeError(rule, value);
      if (q->HasBinarySuffix()) return WholeError(rule, value, &*q);
      switch (QuantityToInt64(*q, &v)) {
        case WholeStatus::kOk:
          break;
        case WholeStatus::kFraction:
          return WholeError(rule, value, &*q);
        case WholeStatus::kOutOfRange:
          return RangeError(rule, value);
      }
      break;
    }
    default:
      return RangeError(rule, value);
  }
  if (v < rule.min || v > rule.max) return RangeError(rule, value);
  return v;
}

// CUDA_DISABLE_CONTROL: Go's strconv.ParseBool forms (HAMi v2.10.0's device plugin,
// `plugin/server.go`) plus "true"/"false" in any letter case (fracgpu's earlier contract).
std::optional<bool> ParseDisableControlValue(std::string_view s) {
  if (std::optional<bool> b = ParseGoBool(s)) return b;
  auto eq = [](std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      char c = a[i];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      if (c != b[i]) return false;
    }
    return true;
  };
  if (eq(s, "true")) return true;
  if (eq(s, "false")) return false;
  return std::nullopt;
}

// Trims ASCII spaces and tabs (Go's strings.TrimSpace on the values HAMi splits).
std::string_view TrimSpace(std::string_view s) { return base::Trim(s, " \t"); }

class PodParser {
 public:
  PodParser(const json& pod, const ResourceNames& names) : pod_(pod), names_(names) {}

  Result<PodRequest> Parse() {
    if (!pod_.is_object())
      return InvalidArgument("pod must be a JSON object, got " + Describe(pod_));
    FRACGPU_RETURN_IF_ERROR(ParseAnnotations());
    const json* spec = nullptr;
    FRACGPU_RETURN_IF_ERROR(
        request_json::Member(pod_, "spec", json::value_t::object, "spec", &spec));
    if (spec != nullptr) {
      // Init containers (sidecars included) first, then app containers; never ephemeral ones.
      FRACGPU_RETURN_IF_ERROR(ParseContainerList(*spec, "initContainers", /*init=*/true));
      FRACGPU_RETURN_IF_ERROR(ParseContainerList(*spec, "containers", /*init=*/false));
    }
    return std::move(out_);
  }

 private:
  Status ParseAnnotations() {
    const json* metadata = nullptr;
    FRACGPU_RETURN_IF_ERROR(
        request_json::Member(pod_, "metadata", json::value_t::object, "metadata", &metadata));
    if (metadata == nullptr) return Status::Ok();
    const json* annotations = nullptr;
    FRACGPU_RETURN_IF_ERROR(request_json::Member(*metadata, "annotations", json::value_t::object,
                                                 "metadata.annotations", &annotations));
    if (annotations == nullptr) return Status::Ok();

    auto get = [&](const char* key, std::string* value) -> Status {
      value->clear();
      auto it = annotations->find(key);
      if (it == annotations->end() || it->is_null()) return Status::Ok();
      if (!it->is_string()) {
        return InvalidArgument(std::string("annotation ") + key + " must be a string, got " +
                               Describe(*it));
      }
      *value = it->get<std::string>();
      return Status::Ok();
    };
    std::string v;
    // Each list capped (kMaxAnnotationListEntries): fit matches every GPU of every candidate
    // node against these lists.
    auto capped = [](const char* key, const std::vector<std::string>& list) -> Status {
      if (list.size() <= kMaxAnnotationListEntries) return Status::Ok();
      return InvalidArgument(std::string("annotation ") + key + " lists " +
                             std::to_string(list.size()) + " entries; at most " +
                             std::to_string(kMaxAnnotationListEntries) + " are allowed");
    };
    FRACGPU_RETURN_IF_ERROR(get(kAnnotationUseGpuType, &v));
    out_.use_types = TypeList(v);
    FRACGPU_RETURN_IF_ERROR(capped(kAnnotationUseGpuType, out_.use_types));
    FRACGPU_RETURN_IF_ERROR(get(kAnnotationNoUseGpuType, &v));
    out_.nouse_types = TypeList(v);
    FRACGPU_RETURN_IF_ERROR(capped(kAnnotationNoUseGpuType, out_.nouse_types));
    FRACGPU_RETURN_IF_ERROR(get(kAnnotationUseGpuUuid, &v));
    out_.use_uuids = SplitCommaList(v);
    FRACGPU_RETURN_IF_ERROR(capped(kAnnotationUseGpuUuid, out_.use_uuids));
    out_.use_uuid_index = GpuUuidIndex::Of(out_.use_uuids);
    FRACGPU_RETURN_IF_ERROR(get(kAnnotationNoUseGpuUuid, &v));
    out_.nouse_uuids = SplitCommaList(v);
    FRACGPU_RETURN_IF_ERROR(capped(kAnnotationNoUseGpuUuid, out_.nouse_uuids));
    out_.nouse_uuid_index = GpuUuidIndex::Of(out_.nouse_uuids);

    FRACGPU_RETURN_IF_ERROR(get(kAnnotationNumaBind, &v));
    if (!v.empty()) {
      std::optional<bool> b = ParseGoBool(v);
      if (!b) {
        // HAMi v2.10.0 (`assertNuma`) treats a value strconv.ParseBool rejects as false.
        out_.warnings.push_back(std::string("annotation ") + kAnnotationNumaBind + " " + Quote(v) +
                                " is not a boolean (1, t, true, 0, f, false, …); it counts as "
                                "false, as in HAMi");
      }
      out_.numa_bind = b.value_or(false);
    }
    FRACGPU_RETURN_IF_ERROR(get(kAnnotationBorrower, &v));
    out_.borrower = v == "true";
    if (!v.empty() && v != "true" && v != "false") {
      out_.warnings.push_back(std::string("annotation ") + kAnnotationBorrower + " " + Quote(v) +
                              " is neither \"true\" nor \"false\"; the pod is not a borrower");
    }
    FRACGPU_RETURN_IF_ERROR(get(kAnnotationNodePolicy, &v));
    if (!v.empty()) {
      Result<NodePolicy> p = ParseNodePolicy(v);
      if (!p.ok()) return p.status().WithPrefix(std::string("annotation ") + kAnnotationNodePolicy);
      out_.node_policy = *p;
    }
    FRACGPU_RETURN_IF_ERROR(get(kAnnotationGpuPolicy, &v));
    if (!v.empty()) {
      Result<GpuPolicySpec> p = ParseGpuPolicySpec(v);
      if (!p.ok()) return p.status().WithPrefix(std::string("annotation ") + kAnnotationGpuPolicy);
      out_.gpu_policy = p->policy;
      out_.gpu_policy_spec = *p;
    }
    FRACGPU_RETURN_IF_ERROR(get(kAnnotationVgpuMode, &v));
    if (!v.empty()) {
      out_.vgpu_mode = v;
      // fracgpu registers every GPU in HAMi's "hami-core" mode (no MIG, no MPS).
      if (v.find("hami-core") == std::string::npos) {
        out_.warnings.push_back(std::string("annotation ") + kAnnotationVgpuMode + " " + Quote(v) +
                                ": fracgpu GPUs run in hami-core mode only, so no GPU matches "
                                "and the pod will stay Pending");
      }
    }
    FRACGPU_RETURN_IF_ERROR(get(kAnnotationScoringWeights, &v));
    if (!v.empty()) {
      Result<ScoringWeights> w = ParseScoringWeights(v);
      if (!w.ok())
        return w.status().WithPrefix(std::string("annotation ") + kAnnotationScoringWeights);
      out_.scoring_weights = *w;
    }

    // Slice keys written as annotations instead of resources do nothing (docs/design/CONTRACT.md
    // §1).
    for (const std::string* key : {&names_.gpu, &names_.gpumem, &names_.gpumem_percentage,
                                   &names_.gpucores, &names_.priority}) {
      if (annotations->contains(*key)) {
        out_.warnings.push_back("annotation " + *key +
                                " has no effect: GPU resources belong in each container's "
                                "resources.limits");
      }
    }
    return Status::Ok();
  }

  // A comma list of GPU types; entries without tokens (" - ") are dropped as empty.
  static std::vector<std::string> TypeList(const std::string& value) {
    std::vector<std::string> out;
    for (std::string& e : SplitCommaList(value)) {
      if (!GpuTypeTokens(e).empty()) out.push_back(std::move(e));
    }
    return out;
  }

  Status ParseContainerList(const json& spec, const char* key, bool init) {
    const std::string path = std::string("spec.") + key;
    const json* list = nullptr;
    FRACGPU_RETURN_IF_ERROR(request_json::Member(spec, key, json::value_t::array, path, &list));
    if (list == nullptr) return Status::Ok();
    for (size_t i = 0; i < list->size(); ++i) {
      const json& c = (*list)[i];
      const std::string where = path + "[" + std::to_string(i) + "]";
      if (!c.is_object()) return InvalidArgument(where + " must be an object, got " + Describe(c));
      Result<ContainerRequest> r = ParseContainer(c, where, init);
      if (!r.ok()) return r.status();
      out_.containers.push_back(std::move(r).value());
    }
    return Status::Ok();
  }

  Result<ContainerRequest> ParseContainer(const json& c, const std::string& where, bool init) {
    ContainerRequest req;
    req.init = init;
    std::string label = where;
    auto name_it = c.find("name");
    if (name_it != c.end() && !name_it->is_null()) {
      if (!name_it->is_string()) {
        return InvalidArgument(where + ".name must be a string, got " + Describe(*name_it));
      }
      req.name = name_it->get<std::string>();
      label = "container " + Quote(req.name);
    }

    request_json::ContainerResources res;
    Status st = request_json::FindResources(c, &res);
    if (!st.ok()) return st.WithPrefix(label);

    const ResourceRule gpu_rule{
        names_.gpu, 0, kInt32Max, "an integer 0..2147483647", "is a whole number of GPUs", false};
    const ResourceRule mem_rule{
        names_.gpumem, 1, kInt32Max, "an integer 1..2147483647 (MiB)", "is MiB as a whole number",
        true};
    // 0 is HAMi's "not set" (v2.10.0 webhook accepts 0..100; 0 leaves the whole card's memory).
    const ResourceRule pct_rule{names_.gpumem_percentage,
                                0,
                                100,
                                "an integer 0..100",
                                "is a whole percentage of the card's memory",
                                false};
    const ResourceRule cores_rule{names_.gpucores,
                                  0,
                                  100,
                                  "an integer 0..100",
                                  "is a whole percentage of the card's SMs",
                                  false};
    const ResourceRule prio_rule{
        names_.priority, 0, 1, "0 (high) or 1 (low)", "must be 0 (high) or 1 (low)", false};

    std::optional<int64_t> gpu, mem, pct, cores, prio;
    const json* gpu_v = nullptr;
    const json* mem_v = nullptr;
    const json* pct_v = nullptr;
    const json* cores_v = nullptr;
    for (auto [rule, slot, raw] :
         {std::tuple{&gpu_rule, &gpu, &gpu_v}, std::tuple{&mem_rule, &mem, &mem_v},
          std::tuple{&pct_rule, &pct, &pct_v}, std::tuple{&cores_rule, &cores, &cores_v},
          std::tuple{&prio_rule, &prio, static_cast<const json**>(nullptr)}}) {
      const json* value = res.Lookup(rule->name);
      if (value == nullptr) continue;
      Result<int64_t> v = ReadResource(*value, *rule);
      if (!v.ok()) return v.status().WithPrefix(label);
      *slot = *v;
      if (raw != nullptr) *raw = value;
    }

    const bool slice_given = mem || pct || cores;
    if (gpu && *gpu == 0 && slice_given) {
      const json* first = mem ? mem_v : (pct ? pct_v : cores_v);
      const std::string& first_name =
          mem ? names_.gpumem : (pct ? names_.gpumem_percentage : names_.gpucores);
      return InvalidArgument(label + ": " + names_.gpu + " is 0 (no GPU) but " + first_name +
                             " is " + Describe(*first) + "; remove one of them");
    }
    // gpumem, gpumem-percentage or gpucores without nvidia.com/gpu → defaultGPUNum GPUs (1).
    const RequestDefaults& defaults = names_.defaults;
    req.num_gpus = static_cast<int32_t>(
        gpu ? *gpu : (slice_given ? std::max(defaults.default_gpu_num, 1) : 0));
    if (prio) req.priority = static_cast<int32_t>(*prio);

    if (req.UsesGpu()) {
      // HAMi's defaultExclusiveCoreIfNeeded: no memory key, or percentage 100, asks for the
      // whole card's memory; decided on the keys given, before defaultMemory applies.
      const bool whole_memory_asked = !mem && (!pct || *pct == 100);
      if (mem) {
        // memoryFactor: gpumem is counted in units of memoryFactor MiB (HAMi v2.10
        // GenerateResourceRequests; it refuses a product past int32, so does this).
        const int64_t factor = std::max<int64_t>(defaults.memory_factor, 1);
        if (*mem > kInt32Max / factor) {
          return InvalidArgument(label + ": " + names_.gpumem + " " + Describe(*mem_v) +
                                 " × memoryFactor " + std::to_string(factor) +
                                 " MiB exceeds 2147483647 MiB");
        }
        req.mem_mib = *mem * factor;
        if (pct) {
          out_.warnings.push_back(label + ": both " + names_.gpumem + " and " +
                                  names_.gpumem_percentage + " are set; " + names_.gpumem + " (" +
                                  std::to_string(*mem) + " MiB) wins");
        }
      } else if (pct && *pct > 0) {
        req.mem_percent = static_cast<int32_t>(*pct);
      } else if (!pct && defaults.default_memory_mib > 0) {
        req.mem_mib = defaults.default_memory_mib;  // defaultMemory: neither key given
      }  // else (percentage 0, or no defaultMemory): mem_percent stays 100, the whole card
      if (cores) {
        req.cores_percent = static_cast<int32_t>(*cores);
      } else {
        // A whole card's memory without cores means the whole card, exclusively; a partial
        // slice without cores is time-shared with no SM limit. gpumem-percentage 0 is HAMi's
        // "percentage not set": the whole card's memory, but no exclusive cores (HAMi v2.10.0
        // `defaultExclusiveCoreIfNeeded` adds cores 100 only for percentage 100 or no memory).
        // Otherwise defaultCores (HAMi's GenerateResourceRequests).
        req.cores_percent = whole_memory_asked ? 100 : std::clamp(defaults.default_cores, 0, 100);
      }
    } else if (prio) {
      out_.warnings.push_back(label + ": " + names_.priority + " has no effect without a GPU (" +
                              names_.gpu + " >= 1, or " + names_.gpumem + ", " +
                              names_.gpumem_percentage + " or " + names_.gpucores + ")");
    }

    st = ParseDisableControl(c, label, &req, &out_.warnings);
    if (!st.ok()) return st;
    return req;
  }

  // CUDA_DISABLE_CONTROL counts only as a literal env[].value; the last entry of that name
  // decides (Kubernetes lets a later duplicate win). valueFrom entries are ignored.
  static Status ParseDisableControl(const json& c, const std::string& label, ContainerRequest* req,
                                    std::vector<std::string>* warnings) {
    const json* env = nullptr;
    FRACGPU_RETURN_IF_ERROR(
        request_json::Member(c, "env", json::value_t::array, "env", &env).WithPrefix(label));
    if (env == nullptr) return Status::Ok();
    const json* literal = nullptr;
    for (size_t i = 0; i < env->size(); ++i) {
      const json& e = (*env)[i];
      const std::string where = label + ": env[" + std::to_string(i) + "]";
      if (!e.is_object()) return InvalidArgument(where + " must be an object, got " + Describe(e));
      auto name = e.find("name");
      if (name == e.end() || !name->is_string()) {
        return InvalidArgument(where + ".name must be a string, got " +
                               (name == e.end() ? std::string("nothing") : Describe(*name)));
      }
      if (name->get_ref<const std::string&>() != kEnvDisableControl) continue;
      auto value = e.find("value");
      if (value == e.end() || value->is_null()) {
        literal = nullptr;  // valueFrom: cannot be checked at admission, ignored
        continue;
      }
      if (!value->is_string()) {
        return InvalidArgument(where + ": " + kEnvDisableControl + " value must be a string, got " +
                               Describe(*value));
      }
      literal = &*value;
    }
    if (literal == nullptr) return Status::Ok();
    std::optional<bool> b = ParseDisableControlValue(literal->get_ref<const std::string&>());
    if (!b) {
      // Irrelevant in a container without GPU. HAMi v2.10.0's device plugin reads a value
      // strconv.ParseBool rejects as false: isolation stays on (fail closed), with a warning.
      if (!req->UsesGpu()) return Status::Ok();
      warnings->push_back(label + ": env " + kEnvDisableControl + " " + Describe(*literal) +
                          " is not a boolean (1, t, true, 0, f, false, …); isolation stays on");
      req->disable_control = false;
      return Status::Ok();
    }
    req->disable_control = *b;
    return Status::Ok();
  }

  const json& pod_;
  const ResourceNames& names_;
  PodRequest out_;
};

}  // namespace

Result<NodePolicy> ParseNodePolicy(const std::string& value) {
  for (NodePolicy p : {NodePolicy::kBinpack, NodePolicy::kSpread}) {
    if (value == NodePolicyName(p)) return p;
  }
  return InvalidArgument("unknown node policy " + Quote(value) + " (want binpack or spread)");
}

Result<GpuPolicy> ParseGpuPolicy(const std::string& value) {
  for (GpuPolicy p : {GpuPolicy::kBinpack, GpuPolicy::kSpread, GpuPolicy::kTopologyAware,
                      GpuPolicy::kFragmentationAware}) {
    if (value == GpuPolicyName(p)) return p;
  }
  return InvalidArgument("unknown GPU policy " + Quote(value) +
                         " (want binpack, spread, topology-aware or fragmentation-aware)");
}

Result<GpuPolicySpec> ParseGpuPolicySpec(const std::string& value) {
  GpuPolicySpec spec;
  if (value.find(',') == std::string::npos) {
    if (value == "mutex") {
      spec.mutex = true;  // HAMi's single "mutex": idle GPUs only, spread order among them
      return spec;
    }
    if (value == "numa") {  // HAMi routes bare "numa" to the chain order
      spec.chain = true;
      spec.sort_keys = {GpuSortKey::kNuma};
      return spec;
    }
    Result<GpuPolicy> p = ParseGpuPolicy(value);
    if (!p.ok()) {
      return InvalidArgument("unknown GPU policy " + Quote(value) +
                             " (want binpack, spread, topology-aware, fragmentation-aware, mutex, "
                             "numa, or a comma list of binpack, spread, numa, mutex and "
                             "topology-aware)");
    }
    spec.policy = *p;
    return spec;
  }
  spec.chain = true;
  bool topology = false;
  std::optional<GpuPolicy> first_order;
  std::string_view rest = value;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view entry = TrimSpace(rest.substr(0, comma));
    auto add_key = [&](GpuSortKey k) {
      for (GpuSortKey seen : spec.sort_keys) {
        if (seen == k) return;
      }
      spec.sort_keys.push_back(k);
    };
    if (entry.empty()) {
      // skipped, as HAMi's split-and-match does
    } else if (entry == "binpack") {
      add_key(GpuSortKey::kBinpack);
      if (!first_order) first_order = GpuPolicy::kBinpack;
    } else if (entry == "spread") {
      add_key(GpuSortKey::kSpread);
      if (!first_order) first_order = GpuPolicy::kSpread;
    } else if (entry == "numa") {
      add_key(GpuSortKey::kNuma);
    } else if (entry == "mutex") {
      spec.mutex = true;
    } else if (entry == "topology-aware") {
      topology = true;
    } else if (entry == "fragmentation-aware") {
      return InvalidArgument("GPU policy " + Quote(value) +
                             ": fragmentation-aware is a policy of its own and cannot be part of "
                             "a comma list");
    } else {
      return InvalidArgument("unknown GPU policy " + Quote(std::string(entry)) + " in " +
                             Quote(value) +
                             " (a list takes binpack, spread, numa, mutex and "
                             "topology-aware)");
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  spec.policy = topology ? GpuPolicy::kTopologyAware : first_order.value_or(GpuPolicy::kSpread);
  return spec;
}

Result<ScoringWeights> ParseScoringWeights(const std::string& value) {
  const std::string what = "must be slot=<int>,core=<int>,memory=<int>, got " + Quote(value);
  ScoringWeights w;
  bool seen[3] = {false, false, false};
  std::string_view rest = value;
  int entries = 0;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view entry = TrimSpace(rest.substr(0, comma));
    if (++entries > 3) return InvalidArgument(what + " (more than three entries)");
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos) return InvalidArgument(what + " (an entry is not key=value)");
    const std::string_view key = TrimSpace(entry.substr(0, eq));
    const std::string_view num = TrimSpace(entry.substr(eq + 1));
    int slot = key == "slot" ? 0 : key == "core" ? 1 : key == "memory" ? 2 : -1;
    if (slot < 0)
      return InvalidArgument(what + " (unknown weight " + Quote(std::string(key)) + ")");
    if (seen[slot]) return InvalidArgument(what + " (duplicate " + Quote(std::string(key)) + ")");
    seen[slot] = true;
    // Go's strconv.ParseInt(s, 10, 64): optional sign, decimal digits, within int64.
    std::string_view digits = num;
    bool negative = false;
    if (!digits.empty() && (digits.front() == '+' || digits.front() == '-')) {
      negative = digits.front() == '-';
      digits.remove_prefix(1);
    }
    if (digits.empty() || digits.size() > 18) {
      return InvalidArgument(what + " (" + Quote(std::string(key)) + " weight must be an integer)");
    }
    int64_t n = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') {
        return InvalidArgument(what + " (" + Quote(std::string(key)) +
                               " weight must be an integer)");
      }
      n = n * 10 + (c - '0');
    }
    if (negative && n > 0) {
      return InvalidArgument(what + " (" + Quote(std::string(key)) +
                             " weight must not be negative)");
    }
    (slot == 0 ? w.slot : slot == 1 ? w.core : w.memory) = n;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (entries != 3) return InvalidArgument(what + " (three entries are needed)");
  if (w.slot == 0 && w.core == 0 && w.memory == 0) {
    return InvalidArgument(what + " (at least one weight must be positive)");
  }
  return w;
}

const char* NodePolicyName(NodePolicy policy) {
  switch (policy) {
    case NodePolicy::kBinpack:
      return "binpack";
    case NodePolicy::kSpread:
      return "spread";
  }
  return "unknown";
}

const char* GpuPolicyName(GpuPolicy policy) {
  switch (policy) {
    case GpuPolicy::kBinpack:
      return "binpack";
    case GpuPolicy::kSpread:
      return "spread";
    case GpuPolicy::kTopologyAware:
      return "topology-aware";
    case GpuPolicy::kFragmentationAware:
      return "fragmentation-aware";
  }
  return "unknown";
}

Result<PodRequest> ParsePodRequest(const nlohmann::json& pod, const ResourceNames& names) {
  // Our code checks every type before reading it; the catch is the library edge
  // (docs/design/STYLE.md), so no nlohmann exception can escape to a caller even if a check is ever
  // missed.
  try {
    return PodParser(pod, names).Parse();
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("malformed pod: ") + e.what());
  }
}

}  // namespace fracgpu::core
