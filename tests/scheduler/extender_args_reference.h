#pragma once
// The reference decoder of ExtenderArgs for differential tests (extender_args_test.cc and the
// extender_args_fuzzer): the straightforward DOM version — json::parse, then look the keys up
// case-insensitively (exact match first, then the first match in key order) — that
// DecodeExtenderArgs' streaming parser must agree with on every input: same success, same
// error message, same Pod, NodeNames and had_nodes_list.

#include <nlohmann/json.hpp>
#include <string>

#include "core/codec_json.h"
#include "scheduler/extender_args.h"

namespace fracgpu::scheduler::reference {

inline Result<ExtenderArgs> ReferenceDecodeExtenderArgs(const std::string& body) {
  using nlohmann::json;
  auto parsed = core::ParseJsonBounded(body, "ExtenderArgs body");  // the same depth limit
  if (!parsed.ok()) {
    if (parsed.status().message().find("nests objects/arrays deeper") != std::string::npos)
      return parsed.status();
    return InvalidArgument("ExtenderArgs body is not valid JSON");
  }
  json j = std::move(*parsed);
  if (!j.is_object())
    return InvalidArgument(std::string("ExtenderArgs must be a JSON object, got ") + j.type_name());
  ExtenderArgs out;
  const json* pod = FindKeyIgnoringCase(j, "Pod");
  if (pod == nullptr || !pod->is_object()) {
    return InvalidArgument(std::string("ExtenderArgs.Pod must be an object, got ") +
                           (pod == nullptr ? "nothing" : pod->type_name()));
  }
  out.pod = *pod;
  const json* names = FindKeyIgnoringCase(j, "NodeNames");
  if (names != nullptr && !names->is_null()) {
    if (!names->is_array()) {
      return InvalidArgument(
          std::string("ExtenderArgs.NodeNames must be an array of strings, got ") +
          names->type_name());
    }
    for (size_t i = 0; i < names->size(); ++i) {
      if (!(*names)[i].is_string()) {
        return InvalidArgument("ExtenderArgs.NodeNames[" + std::to_string(i) +
                               "] must be a string, got " + (*names)[i].type_name());
      }
      out.node_names.push_back((*names)[i].get<std::string>());
    }
    FRACGPU_RETURN_IF_ERROR(ValidateExtenderArgs(out));  // the shared post-decoding checks
    return out;
  }
  const json* nodes = FindKeyIgnoringCase(j, "Nodes");
  if (nodes != nullptr && !nodes->is_null()) {
    const json* items = FindKeyIgnoringCase(*nodes, "items");
    if (!nodes->is_object() || items == nullptr || !(items->is_array() || items->is_null())) {
      return InvalidArgument("ExtenderArgs.Nodes must be a NodeList with an items array");
    }
    out.had_nodes_list = true;
    for (size_t i = 0; items->is_array() && i < items->size(); ++i) {
      const json& n = (*items)[i];
      const json* md = FindKeyIgnoringCase(n, "metadata");
      const json* name = md != nullptr ? FindKeyIgnoringCase(*md, "name") : nullptr;
      if (name == nullptr || !name->is_string()) {
        return InvalidArgument("ExtenderArgs.Nodes.items[" + std::to_string(i) +
                               "].metadata.name must be a string");
      }
      out.node_names.push_back(name->get<std::string>());
    }
    FRACGPU_RETURN_IF_ERROR(ValidateExtenderArgs(out));
    out.nodes = *nodes;
    return out;
  }
  return InvalidArgument("ExtenderArgs carries neither NodeNames nor Nodes");
}

/// "" when both decoders agree on `body`, else what differs.
inline std::string CompareDecoders(const std::string& body) {
  auto got = DecodeExtenderArgs(body);
  auto want = ReferenceDecodeExtenderArgs(body);
  if (got.ok() != want.ok()) {
    return std::string("ok: streaming ") + (got.ok() ? "yes" : got.status().message()) +
           ", reference " + (want.ok() ? "yes" : want.status().message());
  }
  if (!got.ok()) {
    return got.status().message() == want.status().message()
               ? ""
               : "message: streaming \"" + got.status().message() + "\", reference \"" +
                     want.status().message() + "\"";
  }
  if (got->pod != want->pod)
    return "Pod: streaming " + got->pod.dump() + ", reference " + want->pod.dump();
  if (got->node_names != want->node_names) {
    return "NodeNames: streaming " + nlohmann::json(got->node_names).dump() + ", reference " +
           nlohmann::json(want->node_names).dump();
  }
  if (got->had_nodes_list != want->had_nodes_list) return "had_nodes_list differs";
  if (got->nodes != want->nodes)
    return "Nodes: streaming " + got->nodes.dump() + ", reference " + want->nodes.dump();
  return "";
}

}  // namespace fracgpu::scheduler::reference
