#pragma once
// Small JSON helpers shared by the request parser (request.cc) and the limit defaults
// (limit_defaults.cc): type-checked member access and value descriptions for error messages.
// Internal to core/; other components use request.h.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace fracgpu::core::request_json {

/// Go's strconv.ParseBool spellings ("1", "t", "T", "TRUE", "true", "True" and their false
/// counterparts), which HAMi uses for nvidia.com/numa-bind and the legacy register health
/// field; nullopt for anything else.
std::optional<bool> ParseGoBool(std::string_view s);

/// A string quoted JSON-style for an error message, cut to 64 bytes with "…" appended.
std::string Quote(std::string_view s);

/// A JSON value for an error message without recursing into it: strings quoted (Quote),
/// numbers and booleans as written, "null", and "an object" / "an array" for containers (so
/// a hostile, deeply nested value cannot blow up the message or the stack).
std::string Describe(const nlohmann::json& value);

/// Finds `key` in `object` (which must be a JSON object). Absent or null → *out = nullptr and
/// OK. Present with another type than `type` → kInvalidArgument
/// "<path> must be an object|an array, got <Describe(value)>".
Status Member(const nlohmann::json& object, const char* key, nlohmann::json::value_t type,
              const std::string& path, const nlohmann::json** out);

/// A container's `resources.limits` and `resources.requests` (nullptr when absent or null).
struct ContainerResources {
  const nlohmann::json* limits = nullptr;
  const nlohmann::json* requests = nullptr;

  /// The non-null value of `name` in limits, if present there.
  const nlohmann::json* InLimits(const std::string& name) const;
  /// The non-null value of `name` in requests, if present there.
  const nlohmann::json* InRequests(const std::string& name) const;
  /// limits[name], falling back to requests[name] (docs/design/CONTRACT.md §1); nullptr when
  /// neither.
  const nlohmann::json* Lookup(const std::string& name) const {
    const nlohmann::json* v = InLimits(name);
    return v != nullptr ? v : InRequests(name);
  }
};

/// Reads `container.resources.{limits,requests}`. Errors: kInvalidArgument when `resources`,
/// `resources.limits` or `resources.requests` is present with a non-object type.
Status FindResources(const nlohmann::json& container, ContainerResources* out);

}  // namespace fracgpu::core::request_json
