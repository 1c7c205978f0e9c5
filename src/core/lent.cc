#include "core/lent.h"

#include <string>

#include "base/strings.h"

namespace fracgpu::core {
namespace {

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

Result<TimedRecord> ParseTimedRecord(std::string_view value, std::string_view want) {
  const size_t semi = value.find(';');
  if (semi == std::string_view::npos) {
    return InvalidArgument("value " + base::QuoteBytes(value) + " has no ';': want " +
                           std::string(want));
  }
  TimedRecord out;
  const std::string_view time = value.substr(0, semi);
  constexpr int64_t kMaxTime = int64_t{1} << 53;
  if (!base::ParseDecimal(time, kMaxTime, &out.at_unix) || out.at_unix < 1) {
    return InvalidArgument("time " + base::QuoteBytes(time) + " must be Unix seconds 1.." +
                           std::to_string(kMaxTime));
  }
  out.entries = value.substr(semi + 1);
  return out;
}

Result<LentMemory> ParseLentMemory(std::string_view value) {
  if (value.size() > kLentMaxBytes) {
    return InvalidArgument("value is " + std::to_string(value.size()) + " bytes, more than " +
                           std::to_string(kLentMaxBytes));
  }
  auto record = ParseTimedRecord(value, "<unix seconds>;<gpu uuid>:<MiB>,…");
  if (!record.ok()) return record.status();
  LentMemory out;
  out.at_unix = record->at_unix;
  std::string_view rest = record->entries;
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
      return InvalidArgument(where + ": entry " + base::QuoteBytes(item) +
                             " must be <gpu uuid>:<MiB> with one ':'");
    }
    const std::string_view uuid = item.substr(0, colon);
    const std::string_view mib = item.substr(colon + 1);
    if (!LentUuidShape(uuid)) {
      return InvalidArgument(where + ": uuid " + base::QuoteBytes(uuid) +
                             " must be GPU- followed by 1.." + std::to_string(kLentMaxUuid - 4) +
                             " of [0-9A-Za-z-]");
    }
    LentGpu g;
    if (!base::ParseDecimal(mib, kLentMaxMib, &g.mib)) {
      return InvalidArgument(where + " (" + base::QuoteBytes(uuid) + "): MiB " +
                             base::QuoteBytes(mib) + " must be an integer 0.." +
                             std::to_string(kLentMaxMib));
    }
    for (const LentGpu& seen : out.gpus) {
      if (seen.uuid == uuid) {
        return InvalidArgument(where + ": uuid " + base::QuoteBytes(uuid) + " is listed twice");
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
