// Annotation codecs of docs/design/CONTRACT.md §2 and docs/design/hami-behaviour.md §3.3 / §3.5.

#include "core/codec.h"

#include <charconv>
#include <cstdint>
#include <exception>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/strings.h"
#include "core/codec_json.h"
#include "core/gputype.h"
#include "core/request_json.h"

namespace fracgpu::core {
namespace {

using nlohmann::json;
using request_json::Describe;
using request_json::Quote;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
// Largest per-GPU figures accepted: HAMi holds devmem, devcore and grants in int32 (MiB, %),
// and the bound keeps sums and percent products far from int64 overflow downstream.
constexpr int64_t kMaxMib = kInt32Max;

// Trimmed from both ends of an annotation value before decoding: space, tab, \n and \r (\v and
// \f are not trimmed; they stay part of the value).
constexpr std::string_view kValueSpace = " \t\n\r";

// Splits on `sep`, keeping empty pieces: "a::b" → {"a", "", "b"}; "" → {""}.
std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

// A decimal integer written with digits only (a leading '-' only when min < 0), within [min, max].
bool ParseInt(std::string_view s, int64_t min, int64_t max, int64_t* out) {
  if (s.empty() || s.front() == '+' || (min >= 0 && s.front() == '-')) return false;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return false;
  if (v < min || v > max) return false;
  *out = v;
  return true;
}

// Kubernetes annotation values are UTF-8; the legacy format is not JSON, so check it here (the
// JSON parser checks the rest). nlohmann's strict dump is the validator.
bool ValidUtf8(std::string_view s) {
  try {
    (void)json(std::string(s)).dump();
    return true;
  } catch (const json::exception&) {
    return false;
  }
}

std::string RangeText(int64_t min, int64_t max) {
  return std::to_string(min) + ".." + std::to_string(max);
}

// Reads an optional integer member of a JSON object (absent or null → 0, as Go's omitempty
// writes zero values). Floats, strings and booleans are errors, as in Go's encoding/json.
Status JsonInt(const json& obj, const char* key, int64_t max, const std::string& where,
               int64_t* out) {
  *out = 0;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (it->is_number_unsigned()) {
    if (it->get<uint64_t>() <= static_cast<uint64_t>(max)) {
      *out = static_cast<int64_t>(it->get<uint64_t>());
      return Status::Ok();
    }
  } else if (it->is_number_integer()) {
    int64_t v = it->get<int64_t>();
    if (v >= 0 && v <= max) {
      *out = v;
      return Status::Ok();
    }
  }
  return InvalidArgument(where + ": " + key + " must be an integer " + RangeText(0, max) +
                         ", got " + Describe(*it));
}

Status JsonString(const json& obj, const char* key, const std::string& where, std::string* out) {
  out->clear();
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (!it->is_string()) {
    return InvalidArgument(where + ": " + key + " must be a string, got " + Describe(*it));
  }
  *out = it->get<std::string>();
  return Status::Ok();
}

// Annotation values are outside input: parsed with the depth bound (core/codec_json.h).
Result<json> ParseJson(std::string_view text) { return ParseJsonBounded(text, ""); }

Result<std::vector<DeviceInfo>> DecodeRegisterJson(std::string_view text) {
  Result<json> parsed = ParseJson(text);
  if (!parsed.ok()) return parsed.status();
  const json& doc = *parsed;
  if (!doc.is_array()) return InvalidArgument("want a JSON array of devices, got " + Describe(doc));
  std::vector<DeviceInfo> out;
  std::set<std::string> seen;
  for (size_t i = 0; i < doc.size(); ++i) {
    const json& d = doc[i];
    std::string where = "device " + std::to_string(i);
    if (!d.is_object()) return InvalidArgument(where + " must be an object, got " + Describe(d));
    DeviceInfo info;
    auto id = d.find("id");
    if (id == d.end() || id->is_null()) return InvalidArgument(where + ": id is missing");
    if (!id->is_string() || id->get_ref<const std::string&>().empty()) {
      return InvalidArgument(where + ": id must be a non-empty string, got " + Describe(*id));
    }
    info.uuid = id->get<std::string>();
    where += " (" + Quote(info.uuid) + ")";
    if (!seen.insert(info.uuid).second) return InvalidArgument(where + ": duplicate id");
    int64_t v = 0;
    FRACGPU_RETURN_IF_ERROR(JsonInt(d, "index", kInt32Max, where, &v));
    info.index = static_cast<int32_t>(v);
    FRACGPU_RETURN_IF_ERROR(JsonInt(d, "count", kInt32Max, where, &v));
    info.count = static_cast<int32_t>(v);
    FRACGPU_RETURN_IF_ERROR(JsonInt(d, "devmem", kMaxMib, where, &v));
    info.devmem_mib = v;
    FRACGPU_RETURN_IF_ERROR(JsonInt(d, "devcore", kInt32Max, where, &v));
    info.devcore = static_cast<int32_t>(v);
    FRACGPU_RETURN_IF_ERROR(JsonInt(d, "numa", kInt32Max, where, &v));
    info.numa = static_cast<int32_t>(v);
    FRACGPU_RETURN_IF_ERROR(JsonString(d, "type", where, &info.type));
    FRACGPU_RETURN_IF_ERROR(JsonString(d, "mode", where, &info.mode));
    info.health = false;
    auto health = d.find("health");
    if (health != d.end() && !health->is_null()) {
      if (!health->is_boolean()) {
        return InvalidArgument(where + ": health must be true or false, got " + Describe(*health));
      }
      info.health = health->get<bool>();
    }
    out.push_back(std::move(info));
  }
  return out;
}

// HAMi ≤ v2.7: `<UUID>,<count>,<devmem>,<devcore>,<type>,<numa>,<health>[,<index>,<mode>]:`.
Result<std::vector<DeviceInfo>> DecodeRegisterLegacy(std::string_view text) {
  std::vector<DeviceInfo> out;
  std::set<std::string> seen;
  std::vector<std::string_view> records = Split(text, ':');
  for (size_t r = 0; r < records.size(); ++r) {
    if (records[r].empty()) continue;  // the terminator after the last record
    std::vector<std::string_view> f = Split(records[r], ',');
    std::string where = "record " + std::to_string(r);
    if (f.size() != 7 && f.size() != 9) {
      return InvalidArgument(
          where +
          ": want 7 or 9 comma-separated fields "
          "(<UUID>,<count>,<devmem>,<devcore>,<type>,<numa>,<health>[,<index>,<mode>]), got " +
          std::to_string(f.size()) + " in " + Quote(records[r]));
    }
    if (!ValidUtf8(records[r])) return InvalidArgument(where + ": not valid UTF-8");
    DeviceInfo info;
    if (f[0].empty()) return InvalidArgument(where + ": id is empty");
    info.uuid = std::string(f[0]);
    where += " (" + Quote(info.uuid) + ")";
    if (!seen.insert(info.uuid).second) return InvalidArgument(where + ": duplicate id");
    auto field = [&](std::string_view s, const char* name, int64_t max, int64_t* v) -> Status {
      if (ParseInt(s, 0, max, v)) return Status::Ok();
      return InvalidArgument(where + ": " + name + " must be an integer " + RangeText(0, max) +
                             ", got " + Quote(s));
    };
    int64_t v = 0;
    FRACGPU_RETURN_IF_ERROR(field(f[1], "count", kInt32Max, &v));
    info.count = static_cast<int32_t>(v);
    FRACGPU_RETURN_IF_ERROR(field(f[2], "devmem", kMaxMib, &v));
    info.devmem_mib = v;
    FRACGPU_RETURN_IF_ERROR(field(f[3], "devcore", kInt32Max, &v));
    info.devcore = static_cast<int32_t>(v);
    info.type = std::string(f[4]);
    FRACGPU_RETURN_IF_ERROR(field(f[5], "numa", kInt32Max, &v));
    info.numa = static_cast<int32_t>(v);
    std::optional<bool> health = request_json::ParseGoBool(f[6]);
    if (!health)
      return InvalidArgument(where + ": health must be true or false, got " + Quote(f[6]));
    info.health = *health;
    if (f.size() == 9) {
      FRACGPU_RETURN_IF_ERROR(field(f[7], "index", kInt32Max, &v));
      info.index = static_cast<int32_t>(v);
      if (f[8].empty()) return InvalidArgument(where + ": mode is empty");
      info.mode = std::string(f[8]);
    }  // the 7-field form implies index 0 and mode hami-core (DeviceInfo's defaults)
    out.push_back(std::move(info));
  }
  return out;
}

Result<ContainerGrants> DecodeContainer(std::string_view part, size_t k) {
  ContainerGrants out;
  const std::string where = "container " + std::to_string(k);
  if (part.empty()) return out;
  if (part.back() != ':') {
    return InvalidArgument(where + ": the last device is not terminated by ':' in " + Quote(part));
  }
  std::vector<std::string_view> devices = Split(part.substr(0, part.size() - 1), ':');
  for (size_t j = 0; j < devices.size(); ++j) {
    const std::string dwhere = where + " device " + std::to_string(j);
    std::vector<std::string_view> f = Split(devices[j], ',');
    if (f.size() != 4) {
      return InvalidArgument(
          dwhere + ": want 4 comma-separated fields <UUID>,<type>,<mem MiB>,<cores %>, got " +
          std::to_string(f.size()) + " in " + Quote(devices[j]));
    }
    DeviceGrant g;
    if (f[0].empty()) return InvalidArgument(dwhere + ": uuid is empty");
    g.uuid = std::string(f[0]);
    if (f[1].empty()) return InvalidArgument(dwhere + ": type is empty");
    g.type = std::string(f[1]);
    int64_t v = 0;
    if (!ParseInt(f[2], 0, kMaxMib, &v)) {
      return InvalidArgument(dwhere + ": mem must be an integer " + RangeText(0, kMaxMib) +
                             " (MiB), got " + Quote(f[2]));
    }
    g.mem_mib = v;
    if (!ParseInt(f[3], 0, 100, &v)) {
      return InvalidArgument(dwhere + ": cores must be an integer 0..100 (%), got " + Quote(f[3]));
    }
    g.cores_percent = static_cast<int32_t>(v);
    for (const DeviceGrant& earlier : out) {
      if (GpuUuidEquals(earlier.uuid, g.uuid)) {
        return InvalidArgument(dwhere + ": GPU " + Quote(g.uuid) +
                               " is listed twice (a container gets distinct GPUs)");
      }
    }
    out.push_back(std::move(g));
  }
  return out;
}

Result<PodGrants> DecodePodGrantsImpl(const std::string& value) {
  PodGrants out;
  if (value.empty()) return out;
  if (value.back() != ';') {
    return InvalidArgument("container " + std::to_string(Split(value, ';').size() - 1) +
                           ": part not terminated by ';'");
  }
  std::vector<std::string_view> parts =
      Split(std::string_view(value).substr(0, value.size() - 1), ';');
  for (size_t k = 0; k < parts.size(); ++k) {
    Result<ContainerGrants> c = DecodeContainer(parts[k], k);
    if (!c.ok()) return c.status();
    out.push_back(std::move(c).value());
  }
  return out;
}

Result<TopologyScores> DecodeTopologyScoresImpl(const std::string& value) {
  TopologyScores out;
  std::string_view text = base::Trim(value, kValueSpace);
  if (text.empty()) return out;
  Result<json> parsed = ParseJson(text);
  if (!parsed.ok()) return parsed.status();
  const json& doc = *parsed;
  if (!doc.is_array())
    return InvalidArgument("want a JSON array of GPU scores, got " + Describe(doc));
  for (size_t i = 0; i < doc.size(); ++i) {
    const json& e = doc[i];
    std::string where = "entry " + std::to_string(i);
    if (!e.is_object()) return InvalidArgument(where + " must be an object, got " + Describe(e));
    auto uuid = e.find("uuid");
    if (uuid == e.end() || uuid->is_null()) return InvalidArgument(where + ": uuid is missing");
    if (!uuid->is_string() || uuid->get_ref<const std::string&>().empty()) {
      return InvalidArgument(where + ": uuid must be a non-empty string, got " + Describe(*uuid));
    }
    const std::string& id = uuid->get_ref<const std::string&>();
    where += " (" + Quote(id) + ")";
    if (out.count(id) != 0) return InvalidArgument(where + ": duplicate uuid");
    std::map<std::string, int32_t>& row = out[id];
    auto score = e.find("score");
    if (score == e.end() || score->is_null()) continue;
    if (!score->is_object()) {
      return InvalidArgument(where + ": score must be an object of uuid → integer, got " +
                             Describe(*score));
    }
    for (auto it = score->begin(); it != score->end(); ++it) {
      int64_t v = -1;
      if (it->is_number_unsigned() && it->get<uint64_t>() <= static_cast<uint64_t>(kInt32Max)) {
        v = static_cast<int64_t>(it->get<uint64_t>());
      } else if (it->is_number_integer() && it->get<int64_t>() >= 0 &&
                 it->get<int64_t>() <= kInt32Max) {
        v = it->get<int64_t>();
      } else {
        return InvalidArgument(where + ": score[" + Quote(it.key()) + "] must be an integer " +
                               RangeText(0, kInt32Max) + ", got " + Describe(*it));
      }
      row[it.key()] = static_cast<int32_t>(v);
    }
  }
  return out;
}

}  // namespace

std::string EncodeNodeRegister(const std::vector<DeviceInfo>& devices) {
  // Field order follows HAMi's DeviceInfo JSON tags; every field is written (readers also
  // accept the zero fields omitted, as HAMi's omitempty writes them).
  nlohmann::ordered_json doc = nlohmann::ordered_json::array();
  for (const DeviceInfo& d : devices) {
    doc.push_back({{"id", d.uuid},
                   {"index", d.index},
                   {"count", d.count},
                   {"devmem", d.devmem_mib},
                   {"devcore", d.devcore},
                   {"type", d.type},
                   {"numa", d.numa},
                   {"health", d.health},
                   {"mode", d.mode}});
  }
  return doc.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

Result<std::vector<DeviceInfo>> DecodeNodeRegister(const std::string& value) {
  try {
    std::string_view text = base::Trim(value, kValueSpace);
    if (text.empty()) return std::vector<DeviceInfo>{};
    // A legacy record starts with a UUID; '[' or '{' can only be (possibly wrong) JSON.
    if (text.front() == '[' || text.front() == '{') return DecodeRegisterJson(text);
    return DecodeRegisterLegacy(text);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("malformed node register value: ") + e.what());
  }
}

std::string EncodePodGrants(const PodGrants& grants) {
  std::string out;
  for (const ContainerGrants& container : grants) {
    for (const DeviceGrant& g : container) {
      out += g.uuid;
      out += ',';
      out += g.type;
      out += ',';
      out += std::to_string(g.mem_mib);
      out += ',';
      out += std::to_string(g.cores_percent);
      out += ':';
    }
    out += ';';
  }
  return out;
}

Result<PodGrants> DecodePodGrants(const std::string& value) {
  try {
    return DecodePodGrantsImpl(value);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("malformed allocation: ") + e.what());
  }
}

Result<TopologyScores> DecodeTopologyScores(const std::string& value) {
  try {
    return DecodeTopologyScoresImpl(value);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("malformed topology scores: ") + e.what());
  }
}

}  // namespace fracgpu::core
