#include "scheduler/extender_args.h"

#include <cctype>

namespace fracgpu::scheduler {
namespace {

using nlohmann::json;

bool IEquals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

Result<json> ParseObject(const std::string& body, const char* what) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return InvalidArgument(std::string(what) + " body is not valid JSON");
  if (!j.is_object()) return InvalidArgument(std::string(what) + " must be a JSON object, got " + j.type_name());
  return j;
}

}  // namespace

const json* FindKeyIgnoringCase(const json& obj, const std::string& key) {
  if (!obj.is_object()) return nullptr;
  auto exact = obj.find(key);
  if (exact != obj.end()) return &*exact;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (IEquals(it.key(), key)) return &*it;
  }
  return nullptr;
}

Result<ExtenderArgs> DecodeExtenderArgs(const std::string& body) {
  auto j = ParseObject(body, "ExtenderArgs");
  if (!j.ok()) return j.status();
  ExtenderArgs out;
  const json* pod = FindKeyIgnoringCase(*j, "Pod");
  if (pod == nullptr || !pod->is_object()) {
    return InvalidArgument(std::string("ExtenderArgs.Pod must be an object, got ") +
                           (pod == nullptr ? "nothing" : pod->type_name()));
  }
  out.pod = *pod;
  const json* names = FindKeyIgnoringCase(*j, "NodeNames");
  const json* nodes = FindKeyIgnoringCase(*j, "Nodes");
  if (names != nullptr && !names->is_null()) {
    if (!names->is_array()) {
      return InvalidArgument(std::string("ExtenderArgs.NodeNames must be an array of strings, got ") + names->type_name());
    }
    for (size_t i = 0; i < names->size(); ++i) {
      if (!(*names)[i].is_string()) {
        return InvalidArgument("ExtenderArgs.NodeNames[" + std::to_string(i) + "] must be a string, got " +
                               (*names)[i].type_name());
      }
      out.node_names.push_back((*names)[i].get<std::string>());
    }
    return out;
  }
  if (nodes != nullptr && !nodes->is_null()) {
    const json* items = FindKeyIgnoringCase(*nodes, "items");
    if (!nodes->is_object() || items == nullptr || !items->is_array()) {
      return InvalidArgument("ExtenderArgs.Nodes must be a NodeList with an items array");
    }
    out.had_nodes_list = true;
    for (size_t i = 0; i < items->size(); ++i) {
      const json& n = (*items)[i];
      const json* md = FindKeyIgnoringCase(n, "metadata");
      const json* name = md != nullptr ? FindKeyIgnoringCase(*md, "name") : nullptr;
      if (name == nullptr || !name->is_string()) {
        return InvalidArgument("ExtenderArgs.Nodes.items[" + std::to_string(i) + "].metadata.name must be a string");
      }
      out.node_names.push_back(name->get<std::string>());
    }
    return out;
  }
  return InvalidArgument("ExtenderArgs carries neither NodeNames nor Nodes");
}

Result<ExtenderBindingArgs> DecodeExtenderBindingArgs(const std::string& body) {
  auto j = ParseObject(body, "ExtenderBindingArgs");
  if (!j.ok()) return j.status();
  ExtenderBindingArgs out;
  struct Field {
    const char* key;
    std::string* dst;
    bool required;
  } fields[] = {{"PodName", &out.pod_name, true},
                {"PodNamespace", &out.pod_namespace, true},
                {"PodUID", &out.pod_uid, false},
                {"Node", &out.node, true}};
  for (const auto& f : fields) {
    const json* v = FindKeyIgnoringCase(*j, f.key);
    if (v == nullptr || v->is_null()) {
      if (f.required) return InvalidArgument(std::string("ExtenderBindingArgs.") + f.key + " is missing");
      continue;
    }
    if (!v->is_string()) {
      return InvalidArgument(std::string("ExtenderBindingArgs.") + f.key + " must be a string, got " + v->type_name());
    }
    *f.dst = v->get<std::string>();
    if (f.required && f.dst->empty()) return InvalidArgument(std::string("ExtenderBindingArgs.") + f.key + " is empty");
  }
  return out;
}

}  // namespace fracgpu::scheduler
