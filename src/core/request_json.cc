#include "core/request_json.h"

namespace fracgpu::core::request_json {

using nlohmann::json;

namespace {
constexpr size_t kMaxQuoted = 64;

const json* NonNullMember(const json* object, const std::string& name) {
  if (object == nullptr) return nullptr;
  auto it = object->find(name);
  if (it == object->end() || it->is_null()) return nullptr;
  return &*it;
}
}  // namespace

std::optional<bool> ParseGoBool(std::string_view s) {
  for (std::string_view t : {"1", "t", "T", "TRUE", "true", "True"}) {
    if (s == t) return true;
  }
  for (std::string_view f : {"0", "f", "F", "FALSE", "false", "False"}) {
    if (s == f) return false;
  }
  return std::nullopt;
}

std::string Quote(std::string_view s) {
  bool cut = s.size() > kMaxQuoted;
  json j = std::string(cut ? s.substr(0, kMaxQuoted) : s);
  // `replace` keeps dump() from throwing on a multi-byte character cut in half.
  std::string out = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (cut) out.insert(out.size() - 1, "…");
  return out;
}

std::string Describe(const json& value) {
  switch (value.type()) {
    case json::value_t::string:
      return Quote(value.get_ref<const std::string&>());
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return value.dump();
    case json::value_t::binary:
      return "binary data";
    case json::value_t::discarded:
      return "nothing";
  }
  return "a value";
}

Status Member(const json& object, const char* key, json::value_t type, const std::string& path,
              const json** out) {
  *out = nullptr;
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return Status::Ok();
  if (it->type() != type) {
    return InvalidArgument(path + " must be " +
                           (type == json::value_t::object ? "an object" : "an array") + ", got " +
                           Describe(*it));
  }
  *out = &*it;
  return Status::Ok();
}

const json* ContainerResources::InLimits(const std::string& name) const {
  return NonNullMember(limits, name);
}

const json* ContainerResources::InRequests(const std::string& name) const {
  return NonNullMember(requests, name);
}

Status FindResources(const json& container, ContainerResources* out) {
  *out = {};
  const json* resources = nullptr;
  FRACGPU_RETURN_IF_ERROR(
      Member(container, "resources", json::value_t::object, "resources", &resources));
  if (resources == nullptr) return Status::Ok();
  FRACGPU_RETURN_IF_ERROR(
      Member(*resources, "limits", json::value_t::object, "resources.limits", &out->limits));
  FRACGPU_RETURN_IF_ERROR(
      Member(*resources, "requests", json::value_t::object, "resources.requests", &out->requests));
  return Status::Ok();
}

}  // namespace fracgpu::core::request_json
