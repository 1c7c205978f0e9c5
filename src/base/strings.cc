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

}  // namespace fracgpu::base
