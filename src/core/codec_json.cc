#include "core/codec_json.h"

#include <string>

namespace fracgpu::core {
namespace {

using nlohmann::json;

// "an array", "an object", "a number", … for error messages (no dump of the value: it may be
// deep or large).
std::string Kind(const json& v) {
  std::string t = v.type_name();
  bool vowel = !t.empty() && (t[0] == 'a' || t[0] == 'o');
  return (vowel ? "an " : "a ") + t;
}

std::string Quoted(const std::string& key) {
  std::string out = "\"";
  for (char c : key.substr(0, 253)) {  // label/annotation keys are at most 253+1+63 bytes
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(static_cast<unsigned char>(c) < 0x20 ? '?' : c);
  }
  return out + (key.size() > 253 ? "…\"" : "\"");
}

}  // namespace

Result<json> ParseJsonBounded(std::string_view text, const std::string& what, int max_depth) {
  bool too_deep = false;
  // The callback's depth is the number of open containers around the value, 0 at the top.
  json::parser_callback_t limit = [&](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= max_depth) {
      too_deep = true;
      return false;  // discard it: nothing deeper is kept
    }
    return !too_deep;
  };
  json doc;
  try {
    doc = json::parse(text, limit, /*allow_exceptions=*/true);
  } catch (const json::exception& e) {
    return InvalidArgument((what.empty() ? "" : what + " is ") + "not valid JSON: " + e.what());
  }
  if (too_deep) {
    return InvalidArgument((what.empty() ? std::string("JSON") : what) +
                           " nests objects/arrays deeper than " + std::to_string(max_depth) +
                           " levels");
  }
  return doc;
}

Status CheckObjectMetaStrings(const json& object, const std::string& where) {
  if (!object.is_object()) return Status::Ok();
  auto md = object.find("metadata");
  if (md == object.end() || md->is_null()) return Status::Ok();
  if (!md->is_object())
    return InvalidArgument(where + ".metadata must be an object, got " + Kind(*md));
  for (const char* field : {"annotations", "labels"}) {
    auto m = md->find(field);
    if (m == md->end() || m->is_null()) continue;
    if (!m->is_object()) {
      return InvalidArgument(where + ".metadata." + field + " must be an object of strings, got " +
                             Kind(*m));
    }
    for (auto it = m->begin(); it != m->end(); ++it) {
      if (!it->is_string()) {
        return InvalidArgument(where + ".metadata." + field + "[" + Quoted(it.key()) +
                               "] must be a string (Kubernetes map[string]string), got " +
                               Kind(*it));
      }
    }
  }
  return Status::Ok();
}

}  // namespace fracgpu::core
