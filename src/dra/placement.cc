#include "dra/placement.h"

#include <algorithm>
#include <map>

#include "core/quantity.h"
#include "dra/api.h"

namespace fracgpu::dra {

namespace {

Result<int64_t> QuantityIn(const json& v, int32_t shift, const std::string& what) {
  if (!v.is_string()) return InvalidArgument(what + " must be a quantity string");
  auto q = core::ParseQuantity(v.get<std::string>());
  if (!q.ok()) return InvalidArgument(what + ": " + q.status().message());
  int64_t out = 0;
  if (q->negative || core::QuantityToInt64(*q, &out, shift) != core::WholeStatus::kOk) {
    return InvalidArgument(what + " \"" + v.get<std::string>() + "\" is not a whole non-negative amount");
  }
  return out;
}

Result<CapacityPolicy> PolicyOf(const json& cap, int32_t shift, const std::string& what) {
  CapacityPolicy p;
  if (!cap.is_object() || !cap.contains("value")) return InvalidArgument(what + " has no value");
  auto total = QuantityIn(cap["value"], shift, what + ".value");
  if (!total.ok()) return total.status();
  p.total = *total;
  if (cap.contains("requestPolicy") && cap["requestPolicy"].is_object()) {
    const json& rp = cap["requestPolicy"];
    p.has_policy = true;
    p.default_value = p.total;
    if (rp.contains("default")) {
      auto d = QuantityIn(rp["default"], shift, what + ".requestPolicy.default");
      if (!d.ok()) return d.status();
      p.default_value = *d;
    }
    if (rp.contains("validRange") && rp["validRange"].is_object()) {
      const json& vr = rp["validRange"];
      for (auto [key, field] : {std::pair{"min", &p.min}, std::pair{"max", &p.max}, std::pair{"step", &p.step}}) {
        if (!vr.contains(key)) continue;
        auto v = QuantityIn(vr[key], shift, what + ".requestPolicy.validRange." + key);
        if (!v.ok()) return v.status();
        *field = *v;
      }
    }
  }
  return p;
}

const json* Consumed(const json& consumed, const std::string& driver, const char* name) {
  if (consumed.contains(name)) return &consumed[name];
  std::string q = driver + "/" + name;
  return consumed.contains(q) ? &consumed[q] : nullptr;
}

}  // namespace

std::string MiBQuantity(int64_t mib) {
  return mib % 1024 == 0 && mib != 0 ? std::to_string(mib / 1024) + "Gi" : std::to_string(mib) + "Mi";
}

Result<std::vector<DeviceUsage>> UsageFromSlices(const std::vector<json>& slices, const std::vector<json>& claims,
                                                 const std::string& driver) {
  std::map<std::string, int64_t> newest;  // pool → highest generation
  for (const auto& s : slices) {
    if (s.value("/spec/driver"_json_pointer, "") != driver) continue;
    std::string pool = s.value("/spec/pool/name"_json_pointer, "");
    int64_t gen = s.value("/spec/pool/generation"_json_pointer, int64_t{0});
    newest[pool] = std::max(newest[pool], gen);
  }
  std::vector<DeviceUsage> out;
  for (const auto& s : slices) {
    if (s.value("/spec/driver"_json_pointer, "") != driver) continue;
    std::string pool = s.value("/spec/pool/name"_json_pointer, "");
    if (s.value("/spec/pool/generation"_json_pointer, int64_t{0}) != newest[pool]) continue;
    const json* devices = s.contains("/spec/devices"_json_pointer) ? &s.at("/spec/devices"_json_pointer) : nullptr;
    if (devices == nullptr || !devices->is_array()) continue;
    for (const auto& d : *devices) {
      DeviceUsage u;
      u.pool = pool;
      u.device = d.value("name", "");
      std::string what = "slice " + s.value("/metadata/name"_json_pointer, "") + " device " + u.device;
      u.multiple_allocations = d.value("allowMultipleAllocations", false);
      u.attributes = d.value("attributes", json::object());
      json caps = d.value("capacity", json::object());
      if (caps.contains(kCapacityMemory)) {
        auto p = PolicyOf(caps[kCapacityMemory], 20, what + " capacity memory");
        if (!p.ok()) return p.status();
        u.memory = *p;
      }
      if (caps.contains(kCapacityCores)) {
        auto p = PolicyOf(caps[kCapacityCores], 0, what + " capacity cores");
        if (!p.ok()) return p.status();
        u.cores = *p;
      }
      out.push_back(std::move(u));
    }
  }
  for (const auto& c : claims) {
    const json* results = c.contains("/status/allocation/devices/results"_json_pointer)
                              ? &c.at("/status/allocation/devices/results"_json_pointer)
                              : nullptr;
    if (results == nullptr || !results->is_array()) continue;
    for (const auto& r : *results) {
      if (r.value("driver", "") != driver) continue;
      auto it = std::find_if(out.begin(), out.end(), [&](const DeviceUsage& u) {
        return u.pool == r.value("pool", "") && u.device == r.value("device", "");
      });
      if (it == out.end()) continue;
      it->shares++;
      const json* consumed = r.contains("consumedCapacity") ? &r["consumedCapacity"] : nullptr;
      if (!it->multiple_allocations || consumed == nullptr) {
        it->allocated_whole = true;
        continue;
      }
      if (const json* m = Consumed(*consumed, driver, kCapacityMemory)) {
        auto v = QuantityIn(*m, 20, "consumedCapacity memory");
        if (!v.ok()) return v.status();
        it->used_memory += *v;
      }
      if (const json* k = Consumed(*consumed, driver, kCapacityCores)) {
        auto v = QuantityIn(*k, 0, "consumedCapacity cores");
        if (!v.ok()) return v.status();
        it->used_cores += *v;
      }
    }
  }
  return out;
}

Result<json> FirstFit(std::vector<DeviceUsage>* usage, const ShareRequest& request, const std::string& driver,
                      const std::function<std::string()>& new_share_id) {
  auto taken = core::FirstFitDevices(usage, request);
  if (!taken.ok()) return Status(taken.status().code(), taken.status().message() + " of driver " + driver);
  json results = json::array();
  for (const core::DeviceTake& t : *taken) {
    const DeviceUsage& u = (*usage)[t.device];
    json r = {{"request", request.name}, {"driver", driver}, {"pool", u.pool}, {"device", u.device}};
    if (t.shared) {
      r["shareID"] = new_share_id();
      r["consumedCapacity"] = {{kCapacityMemory, MiBQuantity(t.memory_mib)}, {kCapacityCores, std::to_string(t.cores)}};
    }
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace fracgpu::dra
