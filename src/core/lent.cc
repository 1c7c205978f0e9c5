#include "core/lent.h"

#include <string>

namespace fracgpu::core {
namespace {

// Quotes `s` for an error message, cut to 64 bytes, with bytes outside printable ASCII as \xNN.
std::string LentQuote(std::string_view s) {
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

// A decimal integer without sign or leading zero ("0" itself allowed), at most `max`.
bool LentDecimal(std::string_view s, int64_t max, int64_t* out) {
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

bool LentUuidShape(std::string_view s) {
  if (s.size() <= 4 || s.size() > kLentMaxUuid || s.substr(0, 4) != "GPU-") return false;
  for (char c : s.substr(4)) {
    const bool ok =
        (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::string FormatLentMemory(const LentMemory& lent) {
  std::string out = std::to_string(lent.at_unix);
  out += ';';
  for (size_t i = 0; i < lent.gpus.size(); ++i) {
    if (i > 0) out += ',';
    out += lent.gpus[i].uuid;
    out += ':';
    out += std::to_string(lent.gpus[i].mib);
  }
  return out;
}

Result<LentMemory> ParseLentMemory(std::string_view value) {
  if (value.size() > kLentMaxBytes) {
    return InvalidArgument("value is " + std::to_string(value.size()) + " bytes, more than " +
                           std::to_string(kLentMaxBytes));
  }
  const size_t semi = value.find(';');
  if (semi == std::string_view::npos) {
    return InvalidArgument("value " + LentQuote(value) +
                           " has no ';': want <unix seconds>;<gpu uuid>:<MiB>,…");
  }
  LentMemory out;
  const std::string_view time = value.substr(0, semi);
  constexpr int64_t kMaxTime = int64_t{1} << 53;
  if (!LentDecimal(time, kMaxTime, &out.at_unix) || out.at_unix < 1) {
    return InvalidArgument("time " + LentQuote(time) + " must be Unix seconds 1.." +
                           std::to_string(kMaxTime));
  }
  std::string_view rest = value.substr(semi + 1);
  if (rest.empty()) return out;
  size_t entry = 0;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const std::string where = "gpu " + std::to_string(entry);
    if (entry >= kLentMaxGpus) {
      return InvalidArgument("more than " + std::to_string(kLentMaxGpus) + " gpus");
    }
    if (item.empty()) return InvalidArgument(where + ": empty entry");
    const size_t colon = item.find(':');
    if (colon == std::string_view::npos || item.find(':', colon + 1) != std::string_view::npos) {
      return InvalidArgument(where + ": entry " + LentQuote(item) +
                             " must be <gpu uuid>:<MiB> with one ':'");
    }
    const std::string_view uuid = item.substr(0, colon);
    const std::string_view mib = item.substr(colon + 1);
    if (!LentUuidShape(uuid)) {
      return InvalidArgument(where + ": uuid " + LentQuote(uuid) + " must be GPU- followed by 1.." +
                             std::to_string(kLentMaxUuid - 4) + " of [0-9A-Za-z-]");
    }
    LentGpu g;
    if (!LentDecimal(mib, kLentMaxMib, &g.mib)) {
      return InvalidArgument(where + " (" + LentQuote(uuid) + "): MiB " + LentQuote(mib) +
                             " must be an integer 0.." + std::to_string(kLentMaxMib));
    }
    for (const LentGpu& seen : out.gpus) {
      if (seen.uuid == uuid) {
        return InvalidArgument(where + ": uuid " + LentQuote(uuid) + " is listed twice");
      }
    }
    g.uuid = std::string(uuid);
    out.gpus.push_back(std::move(g));
    ++entry;
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return out;
}

}  // namespace fracgpu::core
