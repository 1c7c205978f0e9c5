#pragma once
// String helpers shared by every component: trimming and comma-separated lists. One copy here
// instead of one per component; each call site names the characters it trims and whether empty
// pieces count, so parsers that follow another system's rules (HAMi's Go code, the Kubernetes
// API) keep them exactly.

#include <concepts>
#include <cstdint>
#include <ranges>
#include <string>
#include <string_view>
#include <vector>

namespace fracgpu::base {

/// The ASCII whitespace of C's isspace() in the "C" locale: space, \t, \n, \v, \f, \r.
inline constexpr std::string_view kAsciiWhitespace = " \t\n\v\f\r";

/// `s` without the characters of `chars` at either end ("" when it holds nothing else).
/// The result views `s`'s storage.
std::string_view Trim(std::string_view s, std::string_view chars = kAsciiWhitespace);

/// `s` without the characters of `chars` at its end. The result views `s`'s storage.
std::string_view TrimEnd(std::string_view s, std::string_view chars = kAsciiWhitespace);

/// How SplitComma treats each piece. The default keeps every piece as written: "a,,b," →
/// {"a", "", "b", ""}, "" → {""}.
struct SplitOptions {
  /// Characters trimmed from both ends of each piece (none by default), e.g. " " or
  /// kAsciiWhitespace.
  std::string_view trim = {};
  /// Drops every piece that is empty after trimming: " a, ,b" with trim " " → {"a", "b"};
  /// "" and "," → {}.
  bool skip_empty = false;
  /// Drops only the last piece, and only when it is empty (after trimming): "a,,b," →
  /// {"a", "", "b"}; "" → {}; "," → {""}. Inner empty pieces stay.
  bool drop_trailing_empty = false;
};

/// Splits `text` at every ',' and applies `options` to the pieces, in order.
std::vector<std::string> SplitComma(std::string_view text, const SplitOptions& options = {});

/// The pieces of `parts` (strings, string_views or C strings) in order with `sep` between each
/// two: {"a", "", "b"} and "," → "a,,b"; {} → "". With "," it is the inverse of SplitComma
/// (default options) for pieces without a ','.
template <class Range>
requires std::convertible_to<std::ranges::range_reference_t<const Range&>, std::string_view>
    std::string Join(const Range& parts, std::string_view sep) {
  std::string out;
  bool first = true;
  for (const auto& part : parts) {
    if (!first) out += sep;
    out += part;
    first = false;
  }
  return out;
}

/// `prefix + suffix` when that is at most `max` characters; otherwise `prefix` cut, then "-",
/// 8 hex digits of a hash (FNV-1a 32) of the whole `prefix + suffix`, then `suffix`, in `max`
/// characters. Names made from user-chosen parts (a node's, a pod's, a container's) stay within
/// a Kubernetes name limit (a DNS label 63, a subdomain 253) and distinct. '-' and '.' are
/// removed from the end of the cut prefix, so each label still ends in an alphanumeric. `max`
/// must exceed suffix.size() + 9.
std::string BoundedName(const std::string& prefix, const std::string& suffix, size_t max);

/// `s` in double quotes for an error message about outside data, cut to its first 64 bytes
/// (then "…"), every byte outside printable ASCII and every '"' and '\\' written as \xNN, so a
/// hostile value can neither break the message nor flood a log.
std::string QuoteBytes(std::string_view s);

/// Parses `s` as a decimal integer without sign, spaces or leading zero ("0" itself is one),
/// at most `max` (≥ 0) and at most 19 digits, into *out. False (and *out untouched) otherwise.
bool ParseDecimal(std::string_view s, int64_t max, int64_t* out);

}  // namespace fracgpu::base
