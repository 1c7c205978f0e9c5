#pragma once
// Kubernetes resource quantities ("3k", "1M", "500m", "3Gi", "1e3"), read exactly.
//
// Grammar (k8s.io/apimachinery/pkg/api/resource, quantity.go, API v1):
//   <quantity> ::= <signedNumber><suffix>
//   <suffix>   ::= <binarySI> | <decimalExponent> | <decimalSI>
//   <binarySI> ::= Ki | Mi | Gi | Ti | Pi | Ei
//   <decimalSI> ::= m | "" | k | M | G | T | P | E
//   <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>
//   <signedNumber> ::= [+-] (<digits> | <digits>.<digits> | <digits>. | .<digits>)
//
// Hand-written because no packaged C++ library parses Kubernetes quantities; the value is kept
// as exact digits and powers of ten and two, so "0.5Ki" is recognised as the whole number 512
// and "1e-3" as a fraction, with no floating-point rounding.

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace fracgpu::core {

/// A parsed quantity: value = (negative ? -1 : 1) × digits × 10^exp10 × 2^exp2.
struct Quantity {
  bool negative = false;
  /// Significant decimal digits with no leading or trailing zeros; "" means the value is 0.
  std::string digits;
  int64_t exp10 = 0;  ///< power of ten (from the fraction, the exponent and a decimal-SI suffix)
  int32_t exp2 = 0;   ///< power of two from a binary-SI suffix (10 for Ki … 60 for Ei)

  /// True when the quantity was written with a binary-SI suffix (Ki, Mi, Gi, Ti, Pi, Ei).
  bool HasBinarySuffix() const { return exp2 > 0; }
  bool IsZero() const { return digits.empty(); }
};

/// How a quantity converts to a whole number.
enum class WholeStatus {
  kOk,          ///< a whole number within int64
  kFraction,    ///< not a whole number (e.g. "500m", "1.5")
  kOutOfRange,  ///< whole but beyond int64 (e.g. "10E")
};

/// Parses `text` by the grammar above. No surrounding whitespace is allowed.
/// Errors: kInvalidArgument saying what is wrong with the text (empty, bad number, unknown
/// suffix, or an exponent beyond ±1000).
Result<Quantity> ParseQuantity(std::string_view text);

/// Converts `q` / 2^shift2 to an int64 when it is a whole number (shift2 ≥ 0; use 20 to turn a
/// byte count into MiB). Writes the value to *out only on kOk.
WholeStatus QuantityToInt64(const Quantity& q, int64_t* out, int32_t shift2 = 0);

}  // namespace fracgpu::core
