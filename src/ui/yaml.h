#pragma once
// JSON → YAML text for the form's preview (what `kubectl get -o yaml` would show), written
// with yaml-cpp's emitter.

#include <nlohmann/json.hpp>
#include <string>

namespace fracgpu::ui {

/// Block-style YAML of `value`, keys in the JSON object's order (nlohmann sorts them).
/// Strings that a YAML reader would take for another type ("1", "true", "null", "") are
/// double-quoted, so the text parses back to the same JSON types. Never throws.
std::string JsonToYaml(const nlohmann::json& value);

}  // namespace fracgpu::ui
