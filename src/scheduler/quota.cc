#include "scheduler/quota.h"

#include <algorithm>
#include <limits>

#include "core/quantity.h"

namespace fracgpu::scheduler {
namespace {

using nlohmann::json;

constexpr char kLimitsPrefix[] = "limits.";

std::string Str(const json& o, const char* key) {
  if (!o.is_object()) return "";
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

// "<namespace>/<name>" of a ResourceQuota object, "" when either is missing.
std::string KeyOf(const json& rq) {
  if (!rq.is_object()) return "";
  auto md = rq.find("metadata");
  if (md == rq.end()) return "";
  std::string ns = Str(*md, "namespace"), name = Str(*md, "name");
  if (ns.empty() || name.empty()) return "";
  return ns + "/" + name;
}

// a + b without overflow (saturating): the amounts come from API objects.
int64_t Add(int64_t a, int64_t b) {
  if (b > 0 && a > std::numeric_limits<int64_t>::max() - b)
    return std::numeric_limits<int64_t>::max();
  return a + b;
}

int64_t Mul(int64_t a, int64_t b) {
  if (a != 0 && b > std::numeric_limits<int64_t>::max() / a)
    return std::numeric_limits<int64_t>::max();
  return a * b;
}

}  // namespace

QuotaAmount AmountOfGrants(const core::PodGrants& grants) {
  QuotaAmount a;
  for (const auto& container : grants) {
    for (const auto& g : container) {
      a.mem_mib = Add(a.mem_mib, std::max<int64_t>(g.mem_mib, 0));
      a.cores = Add(a.cores, std::max<int64_t>(g.cores_percent, 0));
    }
  }
  return a;
}

QuotaAmount AmountOfRequest(const core::PodRequest& request, bool* card_dependent) {
  QuotaAmount a;
  *card_dependent = false;
  for (const auto& c : request.containers) {
    if (!c.UsesGpu()) continue;
    if (c.mem_mib > 0) {
      a.mem_mib = Add(a.mem_mib, Mul(c.mem_mib, c.num_gpus));
    } else {
      *card_dependent = true;  // a percentage or the whole card: known on a node only
    }
    a.cores = Add(a.cores, Mul(c.cores_percent, c.num_gpus));
  }
  return a;
}

QuotaAmount UsedIn(const ClusterState& state, const std::string& ns, const std::string& skip_uid) {
  const std::string prefix = ns + "/";
  QuotaAmount used;
  state.ForEachAllocation([&](const PodAllocation& a) {
    if (a.key.compare(0, prefix.size(), prefix) != 0 || (!skip_uid.empty() && a.uid == skip_uid))
      return;
    QuotaAmount g = AmountOfGrants(a.grants);
    used.mem_mib = Add(used.mem_mib, g.mem_mib);
    used.cores = Add(used.cores, g.cores);
  });
  return used;
}

QuotaTracker::QuotaTracker(core::ResourceNames names) : names_(std::move(names)) {}

void QuotaTracker::Upsert(const json& rq) {
  const std::string key = KeyOf(rq);
  if (key.empty()) return;
  std::map<std::string, int64_t> limits;
  const json* hard = nullptr;
  if (auto spec = rq.find("spec"); spec != rq.end() && spec->is_object()) {
    if (auto h = spec->find("hard"); h != spec->end() && h->is_object()) hard = &*h;
  }
  if (hard != nullptr) {
    for (const std::string* name : {&names_.gpumem, &names_.gpucores}) {
      auto it = hard->find(kLimitsPrefix + *name);
      if (it == hard->end()) continue;
      std::string text = it->is_string()           ? it->get<std::string>()
                         : it->is_number_integer() ? std::to_string(it->get<int64_t>())
                                                   : "";
      auto q = core::ParseQuantity(text);
      int64_t v = 0;
      if (!q.ok() || q->negative || core::QuantityToInt64(*q, &v, 0) != core::WholeStatus::kOk)
        continue;
      limits[*name] = v;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (limits.empty()) {
    quotas_.erase(key);
  } else {
    quotas_[key] = std::move(limits);
  }
}

void QuotaTracker::Remove(const json& rq) {
  const std::string key = KeyOf(rq);
  std::lock_guard<std::mutex> lock(mu_);
  quotas_.erase(key);
}

bool QuotaTracker::Limited(const std::string& ns) const { return !LimitingQuota(ns).empty(); }

std::string QuotaTracker::LimitingQuota(const std::string& ns) const {
  const std::string prefix = ns + "/";
  std::lock_guard<std::mutex> lock(mu_);
  auto it = quotas_.lower_bound(prefix);
  if (it == quotas_.end() || it->first.compare(0, prefix.size(), prefix) != 0) return "";
  if (it->second.empty()) return it->first;  // Upsert keeps only GPU entries; never empty
  return it->first + " limits." + it->second.begin()->first;
}

std::string QuotaTracker::Check(const std::string& ns, const QuotaAmount& used,
                                const QuotaAmount& add) const {
  const std::string prefix = ns + "/";
  const int64_t factor = std::max<int64_t>(names_.defaults.memory_factor, 1);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = quotas_.lower_bound(prefix);
       it != quotas_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    for (const auto& [resource, limit] : it->second) {
      const bool mem = resource == names_.gpumem;
      const int64_t cap = mem ? Mul(limit, factor) : limit;
      const int64_t have = mem ? used.mem_mib : used.cores;
      const int64_t want = mem ? add.mem_mib : add.cores;
      if (want <= 0 || Add(have, want) <= cap) continue;
      std::string unit = mem ? (factor > 1 ? " (× memoryFactor " + std::to_string(factor) + " = " +
                                                 std::to_string(cap) + " MiB)"
                                           : " (MiB)")
                             : " (% of a card)";
      return "ResourceQuotaNotFit: ResourceQuota " + it->first + " " + kLimitsPrefix + resource +
             " is " + std::to_string(limit) + unit + ", " + std::to_string(have) + " used, " +
             std::to_string(want) + " asked";
    }
  }
  return "";
}

std::vector<QuotaTracker::Limit> QuotaTracker::Limits() const {
  std::map<std::pair<std::string, std::string>, int64_t> smallest;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, limits] : quotas_) {
      const std::string ns = key.substr(0, key.find('/'));
      for (const auto& [resource, limit] : limits) {
        auto [it, added] = smallest.emplace(std::make_pair(ns, resource), limit);
        if (!added) it->second = std::min(it->second, limit);
      }
    }
  }
  std::vector<Limit> out;
  for (const auto& [k, v] : smallest) out.push_back({k.first, k.second, v});
  return out;
}

}  // namespace fracgpu::scheduler
