#include "core/idle_holders.h"

#include <string>

#include "base/strings.h"

namespace fracgpu::core {
namespace {

bool IdleNameChars(std::string_view s) {
  for (char c : s) {
    const bool ok =
        (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool PodUidShape(std::string_view s) {
  return !s.empty() && s.size() <= kIdleHoldersMaxPodUid && IdleNameChars(s);
}

bool GpuUuidShape(std::string_view s) {
  return s.size() > 4 && s.size() <= kLentMaxUuid && s.substr(0, 4) == "GPU-" &&
         IdleNameChars(s.substr(4));
}

}  // namespace

bool IdleHolderWritable(const IdleHolder& h) {
  return PodUidShape(h.pod_uid) && GpuUuidShape(h.gpu_uuid) && h.mib >= 0 &&
         h.mib <= kIdleHoldersMaxMib && h.idle_s >= 0 && h.idle_s <= kIdleHoldersMaxIdleSeconds;
}

std::string FormatIdleHolders(const IdleHolders& record) {
  std::string out = std::to_string(record.at_unix);
  out += ';';
  for (size_t i = 0; i < record.holders.size(); ++i) {
    const IdleHolder& h = record.holders[i];
    if (i > 0) out += ',';
    out += h.pod_uid;
    out += ':';
    out += h.gpu_uuid;
    out += ':';
    out += std::to_string(h.mib);
    out += ':';
    out += std::to_string(h.idle_s);
  }
  return out;
}

Result<IdleHolders> ParseIdleHolders(std::string_view value) {
  if (value.size() > kIdleHoldersMaxBytes) {
    return InvalidArgument("value is " + std::to_string(value.size()) + " bytes, more than " +
                           std::to_string(kIdleHoldersMaxBytes));
  }
  auto record =
      ParseTimedRecord(value, "<unix seconds>;<pod uid>:<gpu uuid>:<MiB>:<idle seconds>,…");
  if (!record.ok()) return record.status();
  IdleHolders out;
  out.at_unix = record->at_unix;
  std::string_view rest = record->entries;
  if (rest.empty()) return out;
  size_t entry = 0;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const std::string where = "entry " + std::to_string(entry);
    if (entry >= kIdleHoldersMaxEntries) {
      return InvalidArgument("more than " + std::to_string(kIdleHoldersMaxEntries) + " entries");
    }
    if (item.empty()) return InvalidArgument(where + ": empty entry");
    std::string_view fields[4];
    size_t n = 0, start = 0;
    bool too_many = false;
    while (true) {
      const size_t colon = item.find(':', start);
      if (n == 4) {
        too_many = true;
        break;
      }
      fields[n++] = item.substr(start, colon == std::string_view::npos ? colon : colon - start);
      if (colon == std::string_view::npos) break;
      start = colon + 1;
    }
    if (too_many || n != 4) {
      return InvalidArgument(where + ": " + base::QuoteBytes(item) +
                             " must be <pod uid>:<gpu uuid>:<MiB>:<idle seconds>");
    }
    IdleHolder h;
    if (!PodUidShape(fields[0])) {
      return InvalidArgument(where + ": pod uid " + base::QuoteBytes(fields[0]) + " must be 1.." +
                             std::to_string(kIdleHoldersMaxPodUid) + " of [0-9A-Za-z-]");
    }
    if (!GpuUuidShape(fields[1])) {
      return InvalidArgument(where + ": gpu uuid " + base::QuoteBytes(fields[1]) +
                             " must be GPU- followed by 1.." + std::to_string(kLentMaxUuid - 4) +
                             " of [0-9A-Za-z-]");
    }
    if (!base::ParseDecimal(fields[2], kIdleHoldersMaxMib, &h.mib)) {
      return InvalidArgument(where + ": MiB " + base::QuoteBytes(fields[2]) +
                             " must be an integer 0.." + std::to_string(kIdleHoldersMaxMib));
    }
    if (!base::ParseDecimal(fields[3], kIdleHoldersMaxIdleSeconds, &h.idle_s)) {
      return InvalidArgument(where + ": idle seconds " + base::QuoteBytes(fields[3]) +
                             " must be an integer 0.." +
                             std::to_string(kIdleHoldersMaxIdleSeconds));
    }
    for (const IdleHolder& seen : out.holders) {
      if (seen.pod_uid == fields[0] && seen.gpu_uuid == fields[1]) {
        return InvalidArgument(where + ": pod " + base::QuoteBytes(fields[0]) + " on " +
                               base::QuoteBytes(fields[1]) + " is listed twice");
      }
    }
    h.pod_uid = std::string(fields[0]);
    h.gpu_uuid = std::string(fields[1]);
    out.holders.push_back(std::move(h));
    ++entry;
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return out;
}

}  // namespace fracgpu::core
