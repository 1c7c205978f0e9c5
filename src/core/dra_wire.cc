#include "core/dra_wire.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include "core/quantity.h"

namespace fracgpu::core {

using nlohmann::json;

namespace {

std::string Clipped(std::string s) { return s.size() > 80 ? s.substr(0, 80) + "…" : s; }

// A value as an error message shows it: as JSON (strings quoted), at most 80 characters.
std::string Clip(const json& v) { return Clipped(v.dump()); }

// obj[key] when obj is an object holding key; nullptr otherwise.
const json* WireMember(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

// A string member: "" when absent; an error when present and not a string.
Result<std::string> StringMember(const json& obj, const char* key, const std::string& what) {
  const json* v = WireMember(obj, key);
  if (v == nullptr || v->is_null()) return std::string();
  if (!v->is_string())
    return InvalidArgument(what + "." + key + " must be a string, got " + Clip(*v));
  return v->get<std::string>();
}

// A quantity as a whole, non-negative number of units / 2^shift (20: bytes → MiB).
Result<int64_t> Whole(const json& v, int32_t shift, const std::string& what) {
  if (!v.is_string()) return InvalidArgument(what + " must be a quantity string, got " + Clip(v));
  const std::string shown = "\"" + Clipped(v.get<std::string>()) + "\"";
  auto q = ParseQuantity(v.get<std::string>());
  if (!q.ok()) return InvalidArgument(what + " " + shown + ": " + q.status().message());
  if (q->negative) return InvalidArgument(what + " " + shown + " is negative");
  int64_t out = 0;
  switch (QuantityToInt64(*q, &out, shift)) {
    case WholeStatus::kOk:
      return out;
    case WholeStatus::kFraction:
      return InvalidArgument(what + " " + shown + " is not a whole number of " +
                             (shift ? "MiB" : "units"));
    case WholeStatus::kOutOfRange:
      break;
  }
  return InvalidArgument(what + " " + shown + " is out of range");
}

Result<CapacityPolicy> PolicyOf(const json& cap, int32_t shift, const std::string& what) {
  CapacityPolicy p;
  const json* value = WireMember(cap, "value");
  if (value == nullptr) return InvalidArgument(what + " has no value, got " + Clip(cap));
  auto total = Whole(*value, shift, what + ".value");
  if (!total.ok()) return total.status();
  p.total = *total;
  const json* rp = WireMember(cap, "requestPolicy");
  if (rp == nullptr || rp->is_null()) return p;
  if (!rp->is_object())
    return InvalidArgument(what + ".requestPolicy must be an object, got " + Clip(*rp));
  p.has_policy = true;
  p.default_value = p.total;
  if (const json* d = WireMember(*rp, "default")) {
    auto v = Whole(*d, shift, what + ".requestPolicy.default");
    if (!v.ok()) return v.status();
    p.default_value = *v;
  }
  const json* vr = WireMember(*rp, "validRange");
  if (vr == nullptr || vr->is_null()) return p;
  if (!vr->is_object())
    return InvalidArgument(what + ".requestPolicy.validRange must be an object, got " + Clip(*vr));
  for (auto [key, field] :
       {std::pair{"min", &p.min}, std::pair{"max", &p.max}, std::pair{"step", &p.step}}) {
    const json* v = WireMember(*vr, key);
    if (v == nullptr) continue;
    auto n = Whole(*v, shift, what + ".requestPolicy.validRange." + key);
    if (!n.ok()) return n.status();
    *field = *n;
  }
  return p;
}

const json* Consumed(const json& consumed, const std::string& driver, const char* name) {
  if (const json* v = WireMember(consumed, name)) return v;
  return WireMember(consumed, (driver + "/" + name).c_str());
}

int64_t SaturatingAdd(int64_t a, int64_t b) {
  return b > std::numeric_limits<int64_t>::max() - a ? std::numeric_limits<int64_t>::max() : a + b;
}

// The slice's fields UsageFromSlices needs, checked.
struct SliceHead {
  std::string name, driver, pool, node;
  int64_t generation = 0;
};

Result<SliceHead> HeadOf(const json& s) {
  if (!s.is_object()) return InvalidArgument("ResourceSlice must be a JSON object, got " + Clip(s));
  SliceHead h;
  const json* md = WireMember(s, "metadata");
  auto name = StringMember(md ? *md : json(), "name", "ResourceSlice metadata");
  if (!name.ok()) return name.status();
  h.name = *name;
  std::string what = "ResourceSlice " + h.name + " spec";
  const json* spec = WireMember(s, "spec");
  if (spec == nullptr || !spec->is_object()) return InvalidArgument(what + " must be an object");
  auto driver = StringMember(*spec, "driver", what);
  if (!driver.ok()) return driver.status();
  h.driver = *driver;
  auto node = StringMember(*spec, "nodeName", what);
  if (!node.ok()) return node.status();
  h.node = *node;
  const json* pool = WireMember(*spec, "pool");
  if (pool == nullptr || !pool->is_object())
    return InvalidArgument(what + ".pool must be an object");
  auto pool_name = StringMember(*pool, "name", what + ".pool");
  if (!pool_name.ok()) return pool_name.status();
  h.pool = *pool_name;
  if (const json* g = WireMember(*pool, "generation"); g != nullptr && !g->is_null()) {
    if (!g->is_number_integer())
      return InvalidArgument(what + ".pool.generation must be an integer, got " + Clip(*g));
    h.generation = g->get<int64_t>();
  }
  return h;
}

Result<DeviceUsage> DeviceOf(const json& d, const SliceHead& h, size_t i) {
  std::string what = "ResourceSlice " + h.name + " spec.devices[" + std::to_string(i) + "]";
  if (!d.is_object()) return InvalidArgument(what + " must be an object, got " + Clip(d));
  DeviceUsage u;
  u.pool = h.pool;
  u.node = h.node;
  auto name = StringMember(d, "name", what);
  if (!name.ok()) return name.status();
  if (name->empty()) return InvalidArgument(what + ".name must be a non-empty string");
  u.device = *name;
  what += " (" + u.device + ")";
  const std::string at = what + " ";  // "… spec.devices[2] (gpu-2) capacity.memory"
  if (const json* m = WireMember(d, "allowMultipleAllocations"); m != nullptr && !m->is_null()) {
    if (!m->is_boolean())
      return InvalidArgument(at + "allowMultipleAllocations must be a boolean, got " + Clip(*m));
    u.multiple_allocations = m->get<bool>();
  }
  const json* attrs = WireMember(d, "attributes");
  if (attrs != nullptr && !attrs->is_null() && !attrs->is_object()) {
    return InvalidArgument(at + "attributes must be an object, got " + Clip(*attrs));
  }
  const json* caps = WireMember(d, "capacity");
  if (caps != nullptr && !caps->is_null() && !caps->is_object()) {
    return InvalidArgument(at + "capacity must be an object, got " + Clip(*caps));
  }
  size_t n = (attrs && attrs->is_object() ? attrs->size() : 0) +
             (caps && caps->is_object() ? caps->size() : 0);
  if (n > kDraMaxAttributesAndCapacities) {
    return InvalidArgument(what + " has " + std::to_string(n) +
                           " attributes and capacities (at most " +
                           std::to_string(kDraMaxAttributesAndCapacities) + ")");
  }
  if (attrs && attrs->is_object()) u.attributes = *attrs;
  if (caps && caps->is_object()) {
    for (auto [name_c, shift, policy] : {std::tuple{kDraCapacityMemory, 20, &u.memory},
                                         std::tuple{kDraCapacityCores, 0, &u.cores}}) {
      const json* c = WireMember(*caps, name_c);
      if (c == nullptr) c = WireMember(*caps, (h.driver + "/" + name_c).c_str());
      if (c == nullptr) continue;
      auto p = PolicyOf(*c, shift, at + "capacity." + name_c);
      if (!p.ok()) return p.status();
      *policy = *p;
    }
  }
  return u;
}

}  // namespace

Result<std::vector<DeviceUsage>> UsageFromSlices(const std::vector<json>& slices,
                                                 const std::vector<json>& claims,
                                                 const std::string& driver,
                                                 std::vector<std::string>* problems) {
  // Strict: the first problem is the error. Lenient: note it and go on.
  auto report = [&](const Status& st) -> bool {
    if (problems == nullptr) return false;
    problems->push_back(st.message());
    return true;
  };
  std::vector<SliceHead> heads(slices.size());
  std::vector<bool> usable(slices.size(), false);
  std::map<std::string, int64_t> newest;  // pool → highest generation
  for (size_t i = 0; i < slices.size(); ++i) {
    auto h = HeadOf(slices[i]);
    if (!h.ok()) {
      if (!report(h.status())) return h.status();
      continue;
    }
    if (h->driver != driver) continue;
    heads[i] = *h;
    usable[i] = true;
    auto [it, fresh] = newest.emplace(h->pool, h->generation);
    if (!fresh) it->second = std::max(it->second, h->generation);
  }
  std::vector<DeviceUsage> out;
  for (size_t i = 0; i < slices.size(); ++i) {
    if (!usable[i] || heads[i].generation != newest[heads[i].pool]) continue;
    const SliceHead& h = heads[i];
    const json* devices = WireMember(*WireMember(slices[i], "spec"), "devices");
    if (devices == nullptr || devices->is_null()) continue;
    if (!devices->is_array()) {
      Status st = InvalidArgument("ResourceSlice " + h.name + " spec.devices must be a list, got " +
                                  Clip(*devices));
      if (!report(st)) return st;
      continue;
    }
    if (devices->size() > kDraMaxDevicesPerSlice) {
      Status st = InvalidArgument("ResourceSlice " + h.name + " spec.devices has " +
                                  std::to_string(devices->size()) + " entries (at most " +
                                  std::to_string(kDraMaxDevicesPerSlice) + ")");
      if (!report(st)) return st;
      continue;
    }
    for (size_t k = 0; k < devices->size(); ++k) {
      auto u = DeviceOf((*devices)[k], h, k);
      if (!u.ok()) {
        if (!report(u.status())) return u.status();
        continue;
      }
      out.push_back(std::move(*u));
    }
  }
  std::map<std::pair<std::string, std::string>, size_t> by_name;  // (pool, device) → index in out
  for (size_t i = 0; i < out.size(); ++i) by_name.emplace(std::pair{out[i].pool, out[i].device}, i);
  for (const json& c : claims) {
    if (!c.is_object()) {
      Status st = InvalidArgument("ResourceClaim must be a JSON object, got " + Clip(c));
      if (!report(st)) return st;
      continue;
    }
    const json* md = WireMember(c, "metadata");
    std::string who = "ResourceClaim ";
    {
      auto ns = StringMember(md ? *md : json(), "namespace", "ResourceClaim metadata");
      auto name = StringMember(md ? *md : json(), "name", "ResourceClaim metadata");
      if (!ns.ok() || !name.ok()) {
        Status st = ns.ok() ? name.status() : ns.status();
        if (!report(st)) return st;
        continue;
      }
      who += *ns + "/" + *name;
    }
    const json* status = WireMember(c, "status");
    const json* allocation = status ? WireMember(*status, "allocation") : nullptr;
    if (allocation == nullptr || allocation->is_null()) continue;  // not allocated
    const json* devs = WireMember(*allocation, "devices");
    const json* results = devs ? WireMember(*devs, "results") : nullptr;
    if (results == nullptr || results->is_null()) continue;
    if (!results->is_array()) {
      Status st = InvalidArgument(who + " status.allocation.devices.results must be a list, got " +
                                  Clip(*results));
      if (!report(st)) return st;
      continue;
    }
    if (results->size() > kDraMaxResults) {
      Status st = InvalidArgument(who + " status.allocation.devices.results has " +
                                  std::to_string(results->size()) + " entries (at most " +
                                  std::to_string(kDraMaxResults) + ")");
      if (!report(st)) return st;
      continue;
    }
    std::string pod;
    if (const json* rf = WireMember(*status, "reservedFor");
        rf != nullptr && rf->is_array() && !rf->empty()) {
      if (auto n = StringMember((*rf)[0], "name", who + " status.reservedFor[0]"); n.ok()) pod = *n;
    }
    for (size_t i = 0; i < results->size(); ++i) {
      const json& r = (*results)[i];
      std::string what = who + " status.allocation.devices.results[" + std::to_string(i) + "]";
      if (!r.is_object()) {
        Status st = InvalidArgument(what + " must be an object, got " + Clip(r));
        if (!report(st)) return st;
        continue;
      }
      auto rdriver = StringMember(r, "driver", what);
      auto rpool = StringMember(r, "pool", what);
      auto rdevice = StringMember(r, "device", what);
      if (!rdriver.ok() || !rpool.ok() || !rdevice.ok()) {
        Status st = !rdriver.ok() ? rdriver.status()
                    : !rpool.ok() ? rpool.status()
                                  : rdevice.status();
        if (!report(st)) return st;
        continue;
      }
      if (*rdriver != driver) continue;
      auto found = by_name.find(std::pair{*rpool, *rdevice});
      if (found == by_name.end()) continue;
      DeviceUsage* it = &out[found->second];
      DeviceAllocation a{who.substr(std::string("ResourceClaim ").size()), pod, false, 0, 0};
      const json* consumed = WireMember(r, "consumedCapacity");
      if (!it->multiple_allocations || consumed == nullptr || consumed->is_null()) {
        a.whole = true;
        it->allocated_whole = true;
        it->shares++;
        it->allocations.push_back(std::move(a));
        continue;
      }
      // What a malformed result consumes is unknown: nothing more is placed on its device.
      auto bad = [&](const Status& st) {
        it->allocated_whole = true;
        it->shares++;
        a.whole = true;
        a.memory_mib = a.cores = 0;
        it->allocations.push_back(a);
        return report(st);
      };
      if (!consumed->is_object()) {
        Status st =
            InvalidArgument(what + ".consumedCapacity must be an object, got " + Clip(*consumed));
        if (!bad(st)) return st;
        continue;
      }
      bool ok = true;
      for (auto [name_c, shift, used, field] :
           {std::tuple{kDraCapacityMemory, 20, &it->used_memory, &a.memory_mib},
            std::tuple{kDraCapacityCores, 0, &it->used_cores, &a.cores}}) {
        const json* v = Consumed(*consumed, driver, name_c);
        if (v == nullptr) continue;
        auto n = Whole(*v, shift, what + ".consumedCapacity." + name_c);
        if (!n.ok()) {
          if (!bad(n.status())) return n.status();
          ok = false;
          break;
        }
        *field = *n;
      }
      if (!ok) continue;
      it->used_memory = SaturatingAdd(it->used_memory, a.memory_mib);
      it->used_cores = SaturatingAdd(it->used_cores, a.cores);
      it->shares++;
      it->allocations.push_back(std::move(a));
    }
  }
  return out;
}

Result<ShareRequest> ShareRequestOf(const json& r, const std::string& what) {
  if (!r.is_object()) return InvalidArgument(what + " must be an object, got " + Clip(r));
  ShareRequest out;
  auto name = StringMember(r, "name", what);
  if (!name.ok()) return name.status();
  out.name = *name;
  if (WireMember(r, "firstAvailable") != nullptr) {
    return InvalidArgument(what +
                           ".firstAvailable is not supported (fracgpu's claims use exactly)");
  }
  const json* exactly = WireMember(r, "exactly");
  if (exactly == nullptr || !exactly->is_object()) {
    return InvalidArgument(what + ".exactly must be an object, got " +
                           (exactly ? Clip(*exactly) : "nothing"));
  }
  std::string ew = what + ".exactly";
  auto mode = StringMember(*exactly, "allocationMode", ew);
  if (!mode.ok()) return mode.status();
  if (!mode->empty() && *mode != "ExactCount") {
    return InvalidArgument(ew + ".allocationMode " + Clip(json(*mode)) +
                           " is not supported (only ExactCount)");
  }
  if (const json* count = WireMember(*exactly, "count"); count != nullptr && !count->is_null()) {
    if (!count->is_number_integer() || count->get<int64_t>() < 1 ||
        count->get<int64_t>() > static_cast<int64_t>(kDraMaxResults)) {
      return InvalidArgument(ew + ".count must be an integer 1.." + std::to_string(kDraMaxResults) +
                             ", got " + Clip(*count));
    }
    out.count = static_cast<int32_t>(count->get<int64_t>());
  }
  const json* capacity = WireMember(*exactly, "capacity");
  if (capacity == nullptr || capacity->is_null()) return out;
  const json* requests = WireMember(*capacity, "requests");
  if (requests == nullptr || !requests->is_object()) {
    return InvalidArgument(ew + ".capacity.requests must be an object, got " +
                           (requests ? Clip(*requests) : "nothing"));
  }
  for (auto [name_c, shift, field] : {std::tuple{kDraCapacityMemory, 20, &out.memory_mib},
                                      std::tuple{kDraCapacityCores, 0, &out.cores}}) {
    const json* v = WireMember(*requests, name_c);
    if (v == nullptr) continue;
    auto n = Whole(*v, shift, ew + ".capacity.requests." + name_c);
    if (!n.ok()) return n.status();
    *field = *n;
  }
  return out;
}

}  // namespace fracgpu::core
