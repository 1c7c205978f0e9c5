#include "core/gputype.h"

#include <algorithm>
#include <string>

#include "base/strings.h"
#include "core/request.h"

namespace fracgpu::core {
namespace {

char Upper(char c) { return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c; }
bool IsTokenSeparator(char c) { return c == ' ' || c == '\t' || c == '-' || c == '_'; }
// What HAMi's list parsing trims around each entry: spaces and tabs.
constexpr std::string_view kListSpace = " \t";

// Walks the tokens of a string without allocating (fit calls the matcher per GPU per node).
class TokenCursor {
 public:
  explicit TokenCursor(std::string_view text) : text_(text) {}
  // The next token, or an empty view at the end.
  std::string_view Next() {
    while (pos_ < text_.size() && IsTokenSeparator(text_[pos_])) ++pos_;
    size_t start = pos_;
    while (pos_ < text_.size() && !IsTokenSeparator(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

bool TokenEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return Upper(x) == Upper(y); });
}

bool HasTokens(std::string_view text) { return !TokenCursor(text).Next().empty(); }

// True when the tokens of `entry` appear among those of `type` in order (gaps allowed).
bool TokensInOrder(std::string_view entry, std::string_view type) {
  TokenCursor want(entry);
  TokenCursor have(type);
  for (std::string_view w = want.Next(); !w.empty(); w = want.Next()) {
    std::string_view h = have.Next();
    while (!h.empty() && !TokenEquals(w, h)) h = have.Next();
    if (h.empty()) return false;
  }
  return true;
}

}  // namespace

std::vector<std::string> SplitCommaList(std::string_view value) {
  return base::SplitComma(value, {.trim = kListSpace, .skip_empty = true});
}

std::vector<std::string> GpuTypeTokens(std::string_view text) {
  std::vector<std::string> tokens;
  std::string current;
  for (char c : text) {
    if (IsTokenSeparator(c)) {
      if (!current.empty()) tokens.push_back(std::move(current));
      current.clear();
    } else {
      current.push_back(Upper(c));
    }
  }
  if (!current.empty()) tokens.push_back(std::move(current));
  return tokens;
}

bool GpuTypeEntryMatches(std::string_view entry, std::string_view gpu_type) {
  return HasTokens(entry) && TokensInOrder(entry, gpu_type);
}

bool GpuTypeMatchesAny(const std::vector<std::string>& entries, std::string_view gpu_type) {
  return std::any_of(entries.begin(), entries.end(),
                     [gpu_type](const std::string& e) { return GpuTypeEntryMatches(e, gpu_type); });
}

bool GpuUuidEquals(std::string_view a, std::string_view b) { return TokenEquals(a, b); }

bool GpuTypeAllowed(const PodRequest& request, const std::string& gpu_type) {
  // Fast path for the common pod without type lists (fit calls this per GPU per node).
  if (request.use_types.empty() && request.nouse_types.empty()) return true;
  if (GpuTypeMatchesAny(request.nouse_types, gpu_type)) return false;
  // Entries without tokens are ignored, so a use list made only of them is no constraint.
  bool any_use = std::any_of(request.use_types.begin(), request.use_types.end(),
                             [](const std::string& e) { return HasTokens(e); });
  return !any_use || GpuTypeMatchesAny(request.use_types, gpu_type);
}

bool GpuUuidAllowed(const PodRequest& request, const std::string& uuid) {
  // O(1) through the request's hash set (ParsePodRequest builds it); a request built by hand
  // without one is scanned.
  auto listed = [&uuid](const std::vector<std::string>& list, const GpuUuidIndex& index) {
    if (index.Covers(list)) return index.set.count(uuid) > 0;
    return std::any_of(list.begin(), list.end(),
                       [&uuid](const std::string& u) { return GpuUuidEquals(u, uuid); });
  };
  if (listed(request.nouse_uuids, request.nouse_uuid_index)) return false;
  return request.use_uuids.empty() || listed(request.use_uuids, request.use_uuid_index);
}

}  // namespace fracgpu::core
