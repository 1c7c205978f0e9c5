#include "core/quantity.h"

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace fracgpu::core {
namespace {

// Longest quantity text accepted. Kubernetes quantities are short; the bound keeps the exact
// arithmetic below trivially cheap on hostile input.
constexpr size_t kMaxQuantityLength = 128;
// Largest |exponent| accepted after "e"/"E".
constexpr int64_t kMaxExponent = 1000;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

struct Suffix {
  std::string_view text;
  int32_t exp10;
  int32_t exp2;
};

// Suffixes of k8s.io/apimachinery/pkg/api/resource (suffix.go).
constexpr std::array<Suffix, 14> kSuffixes = {{
    {"", 0, 0},
    {"m", -3, 0},
    {"k", 3, 0},
    {"M", 6, 0},
    {"G", 9, 0},
    {"T", 12, 0},
    {"P", 15, 0},
    {"E", 18, 0},
    {"Ki", 0, 10},
    {"Mi", 0, 20},
    {"Gi", 0, 30},
    {"Ti", 0, 40},
    {"Pi", 0, 50},
    {"Ei", 0, 60},
}};

// Parses "[+-]digits" fully into *out; false on anything else or |value| > kMaxExponent.
bool ParseExponent(std::string_view s, int64_t* out) {
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    neg = s[i] == '-';
    ++i;
  }
  if (i == s.size()) return false;
  int64_t v = 0;
  for (; i < s.size(); ++i) {
    if (!IsDigit(s[i])) return false;
    v = v * 10 + (s[i] - '0');
    if (v > kMaxExponent) return false;
  }
  *out = neg ? -v : v;
  return true;
}

// A non-negative integer as base-1e9 limbs, most significant first. Only what the exact
// whole-number test needs: remainder and division by a small number.
class SmallBig {
 public:
  explicit SmallBig(const std::string& digits) {
    size_t first = digits.size() % 9;
    if (first == 0) first = 9;
    for (size_t pos = 0; pos < digits.size(); pos += (pos == 0 ? first : 9)) {
      size_t len = pos == 0 ? first : 9;
      uint32_t limb = 0;
      for (size_t k = 0; k < len; ++k)
        limb = limb * 10 + static_cast<uint32_t>(digits[pos + k] - '0');
      limbs_.push_back(limb);
    }
  }
  uint32_t Mod(uint32_t d) const {
    uint64_t r = 0;
    for (uint32_t limb : limbs_) r = (r * 1000000000ULL + limb) % d;
    return static_cast<uint32_t>(r);
  }
  void Div(uint32_t d) {
    uint64_t r = 0;
    for (uint32_t& limb : limbs_) {
      uint64_t cur = r * 1000000000ULL + limb;
      limb = static_cast<uint32_t>(cur / d);
      r = cur % d;
    }
    while (limbs_.size() > 1 && limbs_.front() == 0) limbs_.erase(limbs_.begin());
  }
  // The value when it is at most `limit`; false otherwise.
  bool ToUint64(uint64_t limit, uint64_t* out) const {
    unsigned __int128 v = 0;
    for (uint32_t limb : limbs_) {
      v = v * 1000000000ULL + limb;
      if (v > limit) return false;
    }
    *out = static_cast<uint64_t>(v);
    return true;
  }

 private:
  std::vector<uint32_t> limbs_;
};

}  // namespace

Result<Quantity> ParseQuantity(std::string_view text) {
  if (text.empty()) return InvalidArgument("empty quantity");
  if (text.size() > kMaxQuantityLength) {
    return InvalidArgument("quantity longer than " + std::to_string(kMaxQuantityLength) +
                           " characters");
  }
  Quantity q;
  size_t i = 0;
  if (text[i] == '+' || text[i] == '-') {
    q.negative = text[i] == '-';
    ++i;
  }
  std::string all_digits;
  size_t int_digits = 0;
  size_t frac_digits = 0;
  while (i < text.size() && IsDigit(text[i])) {
    all_digits.push_back(text[i++]);
    ++int_digits;
  }
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && IsDigit(text[i])) {
      all_digits.push_back(text[i++]);
      ++frac_digits;
    }
  }
  if (int_digits + frac_digits == 0) return InvalidArgument("quantity has no digits");

  std::string_view rest = text.substr(i);
  int64_t exp10 = -static_cast<int64_t>(frac_digits);
  bool matched = false;
  if (rest.size() > 1 && (rest[0] == 'e' || rest[0] == 'E') && rest[1] != 'i') {
    int64_t e = 0;
    if (!ParseExponent(rest.substr(1), &e)) {
      return InvalidArgument("bad exponent \"" + std::string(rest) +
                             "\" (want e<integer>, |e| <= " + std::to_string(kMaxExponent) + ")");
    }
    exp10 += e;
    matched = true;
  } else {
    for (const Suffix& s : kSuffixes) {
      if (rest == s.text) {
        exp10 += s.exp10;
        q.exp2 = s.exp2;
        matched = true;
        break;
      }
    }
  }
  if (!matched) {
    return InvalidArgument("unknown suffix \"" + std::string(rest) +
                           "\" (want one of m k M G T P E Ki Mi Gi Ti Pi Ei or e<exponent>)");
  }

  // Normalise: drop leading zeros, move trailing zeros into the exponent.
  size_t lead = all_digits.find_first_not_of('0');
  if (lead == std::string::npos) {
    q.digits.clear();
    q.exp10 = 0;  // exp2 keeps the suffix kind: "0Gi" is still written with a binary suffix
    q.negative = false;
    return q;
  }
  size_t last = all_digits.find_last_not_of('0');
  exp10 += static_cast<int64_t>(all_digits.size() - 1 - last);
  q.digits = all_digits.substr(lead, last - lead + 1);
  q.exp10 = exp10;
  return q;
}

WholeStatus QuantityToInt64(const Quantity& q, int64_t* out, int32_t shift2) {
  if (q.digits.empty()) {
    *out = 0;
    return WholeStatus::kOk;
  }
  // value = D × 5^p5 × 2^p2 with p5 = exp10 and p2 = exp10 + exp2 − shift2.
  int64_t p5 = q.exp10;
  int64_t p2 = q.exp10 + q.exp2 - shift2;
  SmallBig d(q.digits);
  for (int64_t k = p5; k < 0; ++k) {
    if (d.Mod(5) != 0) return WholeStatus::kFraction;
    d.Div(5);
  }
  for (int64_t k = p2; k < 0; ++k) {
    if (d.Mod(2) != 0) return WholeStatus::kFraction;
    d.Div(2);
  }
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  uint64_t v = 0;
  if (!d.ToUint64(kMax, &v)) return WholeStatus::kOutOfRange;
  for (int64_t k = 0; k < p5; ++k) {
    if (v > kMax / 5) return WholeStatus::kOutOfRange;
    v *= 5;
  }
  for (int64_t k = 0; k < p2; ++k) {
    if (v > kMax / 2) return WholeStatus::kOutOfRange;
    v *= 2;
  }
  *out = q.negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return WholeStatus::kOk;
}

}  // namespace fracgpu::core
