#include "base/strings.h"

#include <cstdint>
#include <cstdio>

namespace fracgpu::base {

std::string_view Trim(std::string_view s, std::string_view chars) {
  const size_t first = s.find_first_not_of(chars);
  if (first == std::string_view::npos) return s.substr(s.size());
  const size_t last = s.find_last_not_of(chars);
  return s.substr(first, last - first + 1);
}

std::string_view TrimEnd(std::string_view s, std::string_view chars) {
  const size_t last = s.find_last_not_of(chars);
  return last == std::string_view::npos ? s.substr(0, 0) : s.substr(0, last + 1);
}

std::vector<std::string> SplitComma(std::string_view text, const SplitOptions& options) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const bool last = comma == std::string_view::npos;
    std::string_view piece = text.substr(start, last ? std::string_view::npos : comma - start);
    if (!options.trim.empty()) piece = Trim(piece, options.trim);
    const bool drop =
        piece.empty() && (options.skip_empty || (last && options.drop_trailing_empty));
    if (!drop) out.emplace_back(piece);
    if (last) return out;
    start = comma + 1;
  }
}

std::string BoundedName(const std::string& prefix, const std::string& suffix, size_t max) {
  std::string whole = prefix + suffix;
  if (whole.size() <= max) return whole;
  uint32_t h = 2166136261u;  // FNV-1a 32: a short, stable tag of the whole name
  for (unsigned char c : whole) h = (h ^ c) * 16777619u;
  char tag[9];
  std::snprintf(tag, sizeof tag, "%08x", h);
  size_t keep = max > suffix.size() + 9 ? max - suffix.size() - 9 : 0;
  std::string cut = prefix.substr(0, keep);
  while (!cut.empty() && (cut.back() == '-' || cut.back() == '.')) cut.pop_back();
  return cut + "-" + tag + suffix;
}

std::string QuoteBytes(std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  std::string out = "\"";
  const size_t n = s.size() < 64 ? s.size() : 64;
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (s.size() > n) out += "…";
  out += '"';
  return out;
}

bool ParseDecimal(std::string_view s, int64_t max, int64_t* out) {
  if (s.empty() || s.size() > 19 || (s.size() > 1 && s[0] == '0')) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const int64_t d = c - '0';
    if (v > (max - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

}  // namespace fracgpu::base
