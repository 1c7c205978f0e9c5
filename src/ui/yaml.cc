#include "ui/yaml.h"

#include <yaml-cpp/yaml.h>

namespace fracgpu::ui {
namespace {

using nlohmann::json;

// A plain scalar YAML 1.1/1.2 readers would resolve to a non-string (number, bool, null), or
// one that is not a valid plain scalar at all: quote it. yaml-cpp quotes the latter itself,
// but it does not know YAML's type resolution, so numbers and booleans are decided here.
bool NeedsQuotes(const std::string& s) {
  if (s.empty()) return true;
  static const char* kWords[] = {"true", "false", "yes", "no", "on", "off", "null", "~", "y", "n"};
  std::string lower;
  for (char c : s) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  for (const char* w : kWords) {
    if (lower == w) return true;
  }
  // Anything starting like a number (digits, sign, dot) is quoted: "1", "1e3", ".5", "-1".
  char c = s[0];
  return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.';
}

void Emit(YAML::Emitter& out, const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      out << YAML::BeginMap;
      for (const auto& [k, e] : v.items()) {
        out << YAML::Key;
        if (NeedsQuotes(k)) out << YAML::DoubleQuoted;
        out << k << YAML::Value;
        Emit(out, e);
      }
      out << YAML::EndMap;
      break;
    case json::value_t::array:
      out << YAML::BeginSeq;
      for (const auto& e : v) Emit(out, e);
      out << YAML::EndSeq;
      break;
    case json::value_t::string: {
      const auto& s = v.get_ref<const std::string&>();
      if (NeedsQuotes(s)) out << YAML::DoubleQuoted;
      out << s;
      break;
    }
    case json::value_t::boolean:
      out << v.get<bool>();
      break;
    case json::value_t::null:
    case json::value_t::discarded:
      out << YAML::Null;
      break;
    default:  // numbers: JSON's text is valid YAML
      out << v.dump();
      break;
  }
}

}  // namespace

std::string JsonToYaml(const json& value) {
  YAML::Emitter out;
  Emit(out, value);
  std::string text = out.c_str();
  if (!text.empty() && text.back() != '\n') text.push_back('\n');
  return text;
}

}  // namespace fracgpu::ui
