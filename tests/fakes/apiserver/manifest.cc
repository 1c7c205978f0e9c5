// YAML manifests as JSON objects (manifest.h).
#include "manifest.h"

namespace fracgpu::fakes {

nlohmann::json YamlToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& kv : node) out[kv.first.as<std::string>()] = YamlToJson(kv.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& e : node) out.push_back(YamlToJson(e));
      return out;
    }
    case YAML::NodeType::Scalar: {
      std::string v = node.as<std::string>();
      if (node.Tag() == "!") return v;  // quoted
      if (v == "true" || v == "false") return v == "true";
      if (v == "null" || v == "~") return nullptr;
      if (!v.empty() && v.find_first_not_of("-0123456789") == std::string::npos && v != "-") {
        try {
          return std::stoll(v);
        } catch (const std::exception&) {
        }
      }
      return v;
    }
    default:
      return nullptr;
  }
}

std::vector<nlohmann::json> LoadManifest(const std::string& path) {
  std::vector<nlohmann::json> out;
  for (const auto& doc : YAML::LoadAllFromFile(path)) {
    if (doc.IsNull() || !doc.IsDefined()) continue;
    out.push_back(YamlToJson(doc));
  }
  return out;
}

}  // namespace fracgpu::fakes
