#include "dra/claim.h"

#include <algorithm>
#include <set>

#include "core/quantity.h"
#include "dra/api.h"
#include "dra/slices.h"

namespace fracgpu::dra {

namespace {

std::string Clip(const json& v) {
  std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  return s.size() > 80 ? s.substr(0, 80) + "…" : s;
}

// consumedCapacity[name] or consumedCapacity["<driver>/name"]; nullptr when absent.
const json* Capacity(const json& consumed, const std::string& driver, const char* name) {
  if (consumed.contains(name)) return &consumed[name];
  std::string qualified = driver + "/" + name;
  if (consumed.contains(qualified)) return &consumed[qualified];
  return nullptr;
}

// A quantity as a whole number of units / 2^shift.
Result<int64_t> Whole(const json& v, int32_t shift, const std::string& what) {
  if (!v.is_string()) return InvalidArgument(what + " must be a quantity string, got " + Clip(v));
  auto q = core::ParseQuantity(v.get<std::string>());
  if (!q.ok()) return InvalidArgument(what + " \"" + Clip(v) + "\": " + q.status().message());
  if (q->negative) return InvalidArgument(what + " \"" + Clip(v) + "\" is negative");
  int64_t out = 0;
  switch (core::QuantityToInt64(*q, &out, shift)) {
    case core::WholeStatus::kOk:
      return out;
    case core::WholeStatus::kFraction:
      return InvalidArgument(what + " \"" + Clip(v) + "\" is not a whole number of " +
                             (shift ? "MiB" : "units"));
    case core::WholeStatus::kOutOfRange:
      break;
  }
  return InvalidArgument(what + " \"" + Clip(v) + "\" is out of range");
}

// The capacity.requests map the claim's spec gives the allocated request "<request>" or
// "<request>/<subrequest>" (resource/v1 DeviceRequest.exactly / firstAvailable[]), or nullptr.
const json* RequestedCapacity(const json& claim, const std::string& request) {
  json::json_pointer p("/spec/devices/requests");
  if (!claim.contains(p) || !claim.at(p).is_array()) return nullptr;
  size_t slash = request.find('/');
  std::string base = request.substr(0, slash);
  std::string sub = slash == std::string::npos ? "" : request.substr(slash + 1);
  auto capacity_of = [](const json& r) -> const json* {
    json::json_pointer c("/capacity/requests");
    if (!r.is_object() || !r.contains(c)) return nullptr;
    const json& m = r.at(c);
    return m.is_object() && !m.empty() ? &m : nullptr;
  };
  for (const json& r : claim.at(p)) {
    if (!r.is_object() || r.value("name", json()) != base) continue;
    if (sub.empty()) return r.contains("exactly") ? capacity_of(r["exactly"]) : nullptr;
    if (!r.contains("firstAvailable") || !r["firstAvailable"].is_array()) return nullptr;
    for (const json& s : r["firstAvailable"]) {
      if (s.is_object() && s.value("name", json()) == sub) return capacity_of(s);
    }
  }
  return nullptr;
}

}  // namespace

Result<std::vector<AllocatedShare>> ParseClaimAllocation(
    const json& claim, const std::string& driver, const std::string& pool,
    const std::vector<core::DeviceInfo>& devices) {
  if (!claim.is_object()) return InvalidArgument("ResourceClaim is not a JSON object");
  const json* results = nullptr;
  {
    json::json_pointer p("/status/allocation/devices/results");
    if (!claim.contains(p))
      return InvalidArgument("claim has no status.allocation.devices.results (not allocated)");
    results = &claim.at(p);
  }
  if (!results->is_array())
    return InvalidArgument("status.allocation.devices.results must be a list, got " +
                           Clip(*results));
  if (results->size() > kMaxResults) {
    return InvalidArgument("status.allocation.devices.results has " +
                           std::to_string(results->size()) + " entries (at most " +
                           std::to_string(kMaxResults) + ")");
  }
  // Opaque configuration for this driver (resource/v1 DeviceAllocationConfiguration.opaque):
  // fracgpu takes none, and ignoring it silently would run the container other than asked.
  if (json::json_pointer cp("/status/allocation/devices/config"); claim.contains(cp)) {
    const json& configs = claim.at(cp);
    if (configs.is_array()) {
      for (size_t j = 0; j < configs.size(); ++j) {
        const json& c = configs[j];
        if (!c.is_object() || !c.contains("opaque") || !c["opaque"].is_object()) continue;
        if (c["opaque"].value("driver", json()) != driver) continue;
        return InvalidArgument("status.allocation.devices.config[" + std::to_string(j) +
                               "].opaque: " + driver + " takes no opaque parameters (got " +
                               Clip(c["opaque"].value("parameters", json())) +
                               "); remove the config from the claim or its DeviceClass");
      }
    }
  }
  std::vector<AllocatedShare> out;
  std::set<std::string> whole_devices;
  for (size_t i = 0; i < results->size(); ++i) {
    const json& r = (*results)[i];
    std::string at = "status.allocation.devices.results[" + std::to_string(i) + "]";
    if (!r.is_object()) return InvalidArgument(at + " must be an object, got " + Clip(r));
    for (const char* key : {"request", "driver", "pool", "device"}) {
      if (!r.contains(key) || !r[key].is_string() || r[key].get<std::string>().empty()) {
        return InvalidArgument(at + "." + key + " must be a non-empty string, got " +
                               (r.contains(key) ? Clip(r[key]) : std::string("nothing")));
      }
    }
    if (r["driver"] != driver) continue;  // another driver's device in the same claim
    if (r.contains("adminAccess") && r["adminAccess"] == true) {
      // Admin access shares a device already in use without counting against it (KEP-5018):
      // for a fractional GPU that is a container without a slice. Refused, not ignored.
      return InvalidArgument(at + ".adminAccess: admin access to " + driver +
                             " devices is not supported (it would bypass the slice limits)");
    }
    AllocatedShare s;
    s.request = r["request"];
    s.pool = r["pool"];
    s.device = r["device"];
    if (s.pool != pool) {
      return InvalidArgument(at + ".pool is \"" + Clip(r["pool"]) + "\", not this node's pool \"" +
                             pool + "\"");
    }
    auto dev = std::find_if(devices.begin(), devices.end(), [&](const core::DeviceInfo& d) {
      return DeviceName(d.index) == s.device;
    });
    if (dev == devices.end()) {
      return NotFound(at + ".device \"" + Clip(r["device"]) + "\" is not a device of pool " + pool);
    }
    if (!dev->health)
      return Unavailable(at + ": device " + s.device + " (" + dev->uuid + ") is unhealthy");
    s.uuid = dev->uuid;
    if (r.contains("shareID") && !r["shareID"].is_null()) {
      if (!r["shareID"].is_string() || r["shareID"].get<std::string>().empty() ||
          r["shareID"].get<std::string>().size() > 64) {
        return InvalidArgument(at + ".shareID must be a UID string, got " + Clip(r["shareID"]));
      }
      s.share_id = r["shareID"];
    }
    const json* consumed = r.contains("consumedCapacity") && !r["consumedCapacity"].is_null()
                               ? &r["consumedCapacity"]
                               : nullptr;
    if (consumed != nullptr && !consumed->is_object()) {
      return InvalidArgument(at + ".consumedCapacity must be a map, got " + Clip(*consumed));
    }
    if (consumed == nullptr) {
      // A request that asked for capacity but consumed none was allocated by a cluster that
      // does not serve consumable capacity (the gate off on the API server or kube-scheduler,
      // or whole-card slices): refuse rather than give a whole GPU for a share.
      if (const json* asked = RequestedCapacity(claim, s.request); asked != nullptr) {
        return InvalidArgument(
            at + " (request \"" + s.request + "\") asks for capacity " + Clip(*asked) +
            " but the allocation consumed none: this cluster does not serve consumable capacity "
            "(DRAConsumableCapacity off on kube-apiserver or kube-scheduler, or the driver "
            "publishes whole GPUs); ask for a whole GPU (no capacity) or enable the gate");
      }
      s.mem_mib = dev->devmem_mib;
      s.cores = 100;
    } else {
      const json* mem = Capacity(*consumed, driver, kCapacityMemory);
      const json* cores = Capacity(*consumed, driver, kCapacityCores);
      if (mem == nullptr) return InvalidArgument(at + ".consumedCapacity has no \"memory\" entry");
      auto mib = Whole(*mem, 20, at + ".consumedCapacity.memory");
      if (!mib.ok()) return mib.status();
      if (*mib <= 0 || *mib > dev->devmem_mib) {
        return InvalidArgument(at + ".consumedCapacity.memory is " + std::to_string(*mib) +
                               " MiB; device " + s.device + " has " +
                               std::to_string(dev->devmem_mib) + " MiB");
      }
      s.mem_mib = *mib;
      if (cores != nullptr) {
        auto pct = Whole(*cores, 0, at + ".consumedCapacity.cores");
        if (!pct.ok()) return pct.status();
        if (*pct > 100)
          return InvalidArgument(at + ".consumedCapacity.cores is " + std::to_string(*pct) +
                                 " (at most 100)");
        s.cores = static_cast<int32_t>(*pct);
      }
    }
    for (const auto& o : out) {
      if (o.device == s.device) {
        return InvalidArgument(at + ": device " + s.device +
                               " is allocated twice in one claim (one limit per GPU)");
      }
    }
    out.push_back(std::move(s));
  }
  if (out.empty())
    return InvalidArgument("status.allocation.devices.results has no device of driver " + driver);
  return out;
}

json ShareToJson(const AllocatedShare& s) {
  return json{{"request", s.request}, {"pool", s.pool},   {"device", s.device},   {"uuid", s.uuid},
              {"memMiB", s.mem_mib},  {"cores", s.cores}, {"shareID", s.share_id}};
}

Result<AllocatedShare> ShareFromJson(const json& j) {
  AllocatedShare s;
  try {
    s.request = j.at("request").get<std::string>();
    s.pool = j.at("pool").get<std::string>();
    s.device = j.at("device").get<std::string>();
    s.uuid = j.at("uuid").get<std::string>();
    s.mem_mib = j.at("memMiB").get<int64_t>();
    s.cores = j.at("cores").get<int32_t>();
    s.share_id = j.at("shareID").get<std::string>();
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("checkpoint share: ") + e.what());
  }
  return s;
}

}  // namespace fracgpu::dra
