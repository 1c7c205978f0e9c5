#include "node/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <tuple>

#include "base/strings.h"

namespace fracgpu::node {

namespace {

using nlohmann::json;

constexpr int32_t kMaxSplitCount = 1000;
constexpr double kMaxScaling = 100.0;
// defaultMemory: MiB, within the int32 HAMi reads it into.
constexpr int64_t kMaxDefaultMemoryMib = 2147483647;
// defaultGPUNum: a node has at most 16 GPUs (docs/design/CONTRACT.md); 0 (HAMi: slice-only
// containers get no GPU) is refused rather than quietly dropping their slices.
constexpr int64_t kMaxDefaultGpuNum = 16;
// memoryFactor: HAMi's int32; 1 Mi MiB (1 TiB per unit) is far past any card.
constexpr int64_t kMaxMemoryFactor = int64_t{1} << 20;

// Quotes a value for an error message, cut to 64 characters. (Built with append: GCC 12's
// -Wrestrict misfires on `"\"" + s + "\""`.)
std::string Shown(const std::string& s) {
  std::string out;
  out.reserve(66);
  out.push_back('"');
  out.append(s, 0, 64);
  out.push_back('"');
  return out;
}

// ---- YAML ----

Result<std::string> YamlScalar(const YAML::Node& node, const std::string& key) {
  if (!node.IsScalar()) return InvalidArgument("nvidia." + key + " must be a scalar");
  return node.Scalar();
}

Result<int64_t> YamlInt(const YAML::Node& node, const std::string& key, int64_t lo, int64_t hi) {
  auto s = YamlScalar(node, key);
  if (!s.ok()) return s.status();
  int64_t v = 0;
  if (!YAML::convert<int64_t>::decode(node, v) || v < lo || v > hi) {
    return InvalidArgument("nvidia." + key + " must be an integer " + std::to_string(lo) + ".." +
                           std::to_string(hi) + ", got " + Shown(*s));
  }
  return v;
}

Result<double> YamlScale(const YAML::Node& node, const std::string& key) {
  auto s = YamlScalar(node, key);
  if (!s.ok()) return s.status();
  double v = 0;
  if (!YAML::convert<double>::decode(node, v) || !std::isfinite(v) || v <= 0 || v > kMaxScaling) {
    return InvalidArgument("nvidia." + key + " must be a number > 0 and <= 100, got " + Shown(*s));
  }
  return v;
}

Result<bool> YamlBool(const YAML::Node& node, const std::string& key) {
  auto s = YamlScalar(node, key);
  if (!s.ok()) return s.status();
  bool v = false;
  if (!YAML::convert<bool>::decode(node, v)) {
    return InvalidArgument("nvidia." + key + " must be true or false, got " + Shown(*s));
  }
  return v;
}

Result<std::string> YamlResourceName(const YAML::Node& node, const std::string& key) {
  auto s = YamlScalar(node, key);
  if (!s.ok()) return s.status();
  // An extended resource name is domain-prefixed: "<domain>/<name>".
  size_t slash = s->find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == s->size() ||
      s->find('/', slash + 1) != std::string::npos ||
      s->find_first_of(" \t\n,;") != std::string::npos) {
    return InvalidArgument("nvidia." + key +
                           " must be a domain-prefixed resource name like nvidia.com/gpu, got " +
                           Shown(*s));
  }
  return *s;
}

Result<std::string> LogLevel(const std::string& value, const std::string& field) {
  if (value.empty()) return value;
  if (value.size() != 1 || value[0] < '0' || value[0] > '4') {
    return InvalidArgument(field + " must be 0..4, got " + Shown(value));
  }
  return value;
}

// "default" / "force" / "disable" in any letter case (HAMi-core reads both cases) → lower case.
Result<std::string> CorePolicy(const std::string& value, const std::string& field) {
  std::string lower = value;
  for (char& ch : lower) {
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
  }
  if (lower != "default" && lower != "force" && lower != "disable") {
    return InvalidArgument(field + " must be default, force or disable, got " + Shown(value));
  }
  return lower;
}

// runtimeClassName: a RuntimeClass object name (a DNS-1123 subdomain, Kubernetes
// `metadata.name` rules: lower-case alphanumerics, '-' and '.', at most 253 characters,
// alphanumeric at both ends). "" = not set.
Result<std::string> RuntimeClassName(const YAML::Node& node, const std::string& key) {
  if (node.IsNull()) return std::string();
  auto s = YamlScalar(node, key);
  if (!s.ok()) return s.status();
  auto alnum = [](char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'); };
  bool ok = s->size() <= 253;
  for (char ch : *s) ok = ok && (alnum(ch) || ch == '-' || ch == '.');
  if (!s->empty()) ok = ok && alnum(s->front()) && alnum(s->back());
  // Each dot-separated label also starts and ends with an alphanumeric.
  for (const char* bad : {"..", ".-", "-."}) ok = ok && s->find(bad) == std::string::npos;
  if (!ok) {
    return InvalidArgument("nvidia." + key +
                           " must be a RuntimeClass name (lower-case DNS-1123 subdomain), got " +
                           Shown(*s));
  }
  return *s;
}

// The MIG lists: only GPUs in MIG mode read them, and fracgpu runs every GPU in hami-core mode
// (node overrides refuse operatingmode mig), so they have no effect; their shape is checked.
Status MigList(const YAML::Node& node, const std::string& key, DeviceConfig* c) {
  if (!node.IsNull() && !node.IsSequence()) {
    return InvalidArgument("nvidia." + key + " must be a list");
  }
  if (node.IsSequence() && node.size() > 0) {
    c->notes.push_back("nvidia." + key +
                       " has no effect: fracgpu runs every GPU in hami-core mode, none in MIG");
  }
  return Status::Ok();
}

Status ParseNvidiaSection(const YAML::Node& nv, DeviceConfig* c) {
  for (const auto& entry : nv) {
    std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "";
    const YAML::Node& v = entry.second;
    const auto& known = KnownNvidiaKeys();
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      const std::string list = base::Join(known, ", ");
      return InvalidArgument(
          "nvidia." + key.substr(0, 64) +
          " is not a key fracgpu knows (refused rather than ignored; known: " + list + ")");
    }
    // `key:` with no value is YAML null: not set, as Go's YAML decoder leaves the zero value
    // (HAMi's chart renders an unset value so).
    if (v.IsNull()) continue;
#define FRACGPU_SET(expr, target)   \
  {                                 \
    auto r = (expr);                \
    if (!r.ok()) return r.status(); \
    target = *r;                    \
  }
    if (key == "resourceCountName")
      FRACGPU_SET(YamlResourceName(v, key), c->resources.gpu)
    else if (key == "resourceMemoryName")
      FRACGPU_SET(YamlResourceName(v, key), c->resources.gpumem)
    else if (key == "resourceMemoryPercentageName")
      FRACGPU_SET(YamlResourceName(v, key), c->resources.gpumem_percentage)
    else if (key == "resourceCoreName")
      FRACGPU_SET(YamlResourceName(v, key), c->resources.gpucores)
    else if (key == "resourcePriorityName")
      FRACGPU_SET(YamlResourceName(v, key), c->resources.priority)
    else if (key == "deviceSplitCount")
      FRACGPU_SET(YamlInt(v, key, 1, kMaxSplitCount), c->split_count)
    else if (key == "deviceMemoryScaling")
      FRACGPU_SET(YamlScale(v, key), c->memory_scaling)
    else if (key == "deviceCoreScaling")
      FRACGPU_SET(YamlScale(v, key), c->core_scaling)
    else if (key == "defaultMemory")
      FRACGPU_SET(YamlInt(v, key, 0, kMaxDefaultMemoryMib), c->default_memory_mib)
    else if (key == "defaultCores")
      FRACGPU_SET(YamlInt(v, key, 0, 100), c->default_cores)
    else if (key == "defaultGPUNum")
      FRACGPU_SET(YamlInt(v, key, 1, kMaxDefaultGpuNum), c->resources.defaults.default_gpu_num)
    else if (key == "memoryFactor")
      FRACGPU_SET(YamlInt(v, key, 1, kMaxMemoryFactor), c->resources.defaults.memory_factor)
    else if (key == "overwriteEnv")
      FRACGPU_SET(YamlBool(v, key), c->overwrite_env)
    else if (key == "runtimeClassName")
      FRACGPU_SET(RuntimeClassName(v, key), c->runtime_class_name)
    else if (key == "migProfileAllowlist" || key == "knownMigGeometries")
      FRACGPU_RETURN_IF_ERROR(MigList(v, key, c));
    else if (key == "disableCoreLimit")
      FRACGPU_SET(YamlBool(v, key), c->disable_core_limit)
    else if (key == "enableNumaTopology")
      FRACGPU_SET(YamlBool(v, key), c->enable_numa_topology)
    else if (key == "preConfiguredDeviceMemory")
      FRACGPU_SET(YamlInt(v, key, 0, int64_t{1} << 40), c->preconfigured_memory_mib)
    else if (key == "gpuCorePolicy") {
      auto s = YamlScalar(v, key);
      if (!s.ok()) return s.status();
      FRACGPU_SET(CorePolicy(*s, "nvidia.gpuCorePolicy"), c->core_policy)
    } else if (key == "libCudaLogLevel") {
      auto s = YamlScalar(v, key);
      if (!s.ok()) return s.status();
      FRACGPU_SET(LogLevel(*s, "nvidia.libCudaLogLevel"), c->libcuda_log_level)
    }
#undef FRACGPU_SET
  }
  c->resources.defaults.default_memory_mib = c->default_memory_mib;
  c->resources.defaults.default_cores = c->default_cores;
  return Status::Ok();
}

// ---- JSON ----

Result<double> JsonScale(const json& v, const std::string& field) {
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0 ||
      v.get<double>() > kMaxScaling) {
    return InvalidArgument(field + " must be a number > 0 and <= 100, got " +
                           v.dump().substr(0, 64));
  }
  return v.get<double>();
}

Result<int64_t> JsonInt(const json& v, const std::string& field, int64_t lo, int64_t hi) {
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi ||
      (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))) {
    return InvalidArgument(field + " must be an integer " + std::to_string(lo) + ".." +
                           std::to_string(hi) + ", got " + v.dump().substr(0, 64));
  }
  return v.get<int64_t>();
}

Result<bool> JsonBool(const json& v, const std::string& field) {
  if (!v.is_boolean())
    return InvalidArgument(field + " must be true or false, got " + v.dump().substr(0, 64));
  return v.get<bool>();
}

Status ApplyEntry(const json& e, const std::string& where, DeviceConfig* c) {
  for (const auto& [key, v] : e.items()) {
    std::string field = where + "." + key;
    if (v.is_null() || key == "name") continue;
#define FRACGPU_SET(expr, target)   \
  {                                 \
    auto r = (expr);                \
    if (!r.ok()) return r.status(); \
    target = *r;                    \
  }
    if (key == "devicememoryscaling")
      FRACGPU_SET(JsonScale(v, field), c->memory_scaling)
    else if (key == "devicecorescaling")
      FRACGPU_SET(JsonScale(v, field), c->core_scaling)
    else if (key == "devicesplitcount")
      FRACGPU_SET(JsonInt(v, field, 1, kMaxSplitCount), c->split_count)
    else if (key == "preconfigureddevicememory")
      FRACGPU_SET(JsonInt(v, field, 0, int64_t{1} << 40), c->preconfigured_memory_mib)
    else if (key == "enablenumatopology")
      FRACGPU_SET(JsonBool(v, field), c->enable_numa_topology)
    else if (key == "enablegetpreferredallocation")
      FRACGPU_SET(JsonBool(v, field), c->preferred_allocation)
    else if (key == "libcudaloglevel") {
      if (!v.is_string())
        return InvalidArgument(field + " must be a string \"0\"..\"4\", got " +
                               v.dump().substr(0, 64));
      FRACGPU_SET(LogLevel(v.get<std::string>(), field), c->libcuda_log_level)
    } else if (key == "operatingmode") {
      if (!v.is_string() ||
          (v.get<std::string>() != "hami-core" && !v.get<std::string>().empty())) {
        return InvalidArgument(
            field + " must be \"hami-core\" (mig and mps modes are not supported), got " +
            v.dump().substr(0, 64));
      }
    } else if (key == "migstrategy") {
      if (!v.is_string() || (v.get<std::string>() != "none" && !v.get<std::string>().empty())) {
        return InvalidArgument(field + " must be \"none\" (MIG is not supported), got " +
                               v.dump().substr(0, 64));
      }
    } else if (key == "filterdevices") {
      if (!v.is_object())
        return InvalidArgument(field + " must be an object {\"uuid\":[…],\"index\":[…]}");
      c->filter_uuids.clear();
      c->filter_indices.clear();
      for (const auto& [fk, fv] : v.items()) {
        std::string ff = field + "." + fk;
        if (fv.is_null()) continue;
        if (!fv.is_array())
          return InvalidArgument(ff + " must be a list, got " + fv.dump().substr(0, 64));
        for (const auto& item : fv) {
          if (fk == "uuid") {
            if (!item.is_string() || item.get<std::string>().empty()) {
              return InvalidArgument(ff + " entries must be non-empty strings, got " +
                                     item.dump().substr(0, 64));
            }
            c->filter_uuids.push_back(item.get<std::string>());
          } else if (fk == "index") {
            auto idx = JsonInt(item, ff, 0, 1 << 20);
            if (!idx.ok()) return idx.status();
            c->filter_indices.push_back(static_cast<uint32_t>(*idx));
          }
        }
      }
    }
#undef FRACGPU_SET
  }
  return Status::Ok();
}

}  // namespace

const std::vector<std::string>& KnownNvidiaKeys() {
  static const std::vector<std::string> keys = {
      "resourceCountName",
      "resourceMemoryName",
      "resourceMemoryPercentageName",
      "resourceCoreName",
      "resourcePriorityName",
      "overwriteEnv",
      "defaultMemory",
      "defaultCores",
      "defaultGPUNum",
      "memoryFactor",
      "deviceSplitCount",
      "deviceMemoryScaling",
      "deviceCoreScaling",
      "preConfiguredDeviceMemory",
      "libCudaLogLevel",
      "enableNumaTopology",
      "disableCoreLimit",
      "gpuCorePolicy",
      "runtimeClassName",
      "migProfileAllowlist",
      "knownMigGeometries",
  };
  return keys;
}

bool DeviceConfig::operator==(const DeviceConfig& o) const {
  auto names = [](const core::ResourceNames& r) {
    return std::tie(r.gpu, r.gpumem, r.gpumem_percentage, r.gpucores, r.priority, r.defaults);
  };
  auto rest = [](const DeviceConfig& c) {
    return std::tie(c.split_count, c.memory_scaling, c.core_scaling, c.default_memory_mib,
                    c.default_cores, c.overwrite_env, c.runtime_class_name, c.disable_core_limit,
                    c.core_policy, c.libcuda_log_level, c.enable_numa_topology,
                    c.preconfigured_memory_mib, c.preferred_allocation, c.filter_uuids,
                    c.filter_indices);
  };
  return names(resources) == names(o.resources) && rest(*this) == rest(o);
}

Result<DeviceConfig> ParseDeviceConfigYaml(const std::string& text) {
  DeviceConfig config;
  try {
    YAML::Node root = YAML::Load(text);
    if (!root || root.IsNull()) return config;
    if (!root.IsMap())
      return InvalidArgument("device config must be a YAML mapping with an nvidia: section");
    YAML::Node nv = root["nvidia"];
    if (!nv || nv.IsNull()) return config;
    if (!nv.IsMap()) return InvalidArgument("device config: nvidia must be a mapping");
    FRACGPU_RETURN_IF_ERROR(ParseNvidiaSection(nv, &config));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string("device config is not valid YAML: ") + e.what());
  }
  return config;
}

Result<DeviceConfig> ApplyNodeOverrides(const DeviceConfig& base, const std::string& json_text,
                                        const std::string& node_name) {
  json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return InvalidArgument("node config is not valid JSON");
  if (!root.is_object())
    return InvalidArgument("node config must be a JSON object with a nodeconfig list");
  auto it = root.find("nodeconfig");
  if (it == root.end() || it->is_null()) return base;
  if (!it->is_array())
    return InvalidArgument("node config: nodeconfig must be a list, got " +
                           it->dump().substr(0, 64));
  DeviceConfig out = base;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& e = (*it)[i];
    std::string where = "nodeconfig[" + std::to_string(i) + "]";
    if (!e.is_object())
      return InvalidArgument(where + " must be an object, got " + e.dump().substr(0, 64));
    auto name = e.find("name");
    if (name == e.end() || !name->is_string() || name->get<std::string>().empty()) {
      return InvalidArgument(where + ".name must be a non-empty string");
    }
    if (name->get<std::string>() != node_name) continue;
    FRACGPU_RETURN_IF_ERROR(ApplyEntry(e, where, &out));
  }
  return out;
}

}  // namespace fracgpu::node
