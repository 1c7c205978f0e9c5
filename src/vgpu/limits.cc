// Configuration parsing for libvgpu.so (see limits.h). Hand-written rather than a library:
// it runs inside every GPU process before anything else, must not allocate or throw, and is
// a few dozen lines.
#include "vgpu/limits.h"

#include <cstdio>
#include <cstring>

#include "api/limits.h"

namespace fracgpu::vgpu {
namespace {

// string_view::substr without its out_of_range throw (libvgpu.so links no exception support).
std::string_view Sub(std::string_view s, size_t pos, size_t n = std::string_view::npos) {
  if (pos > s.size()) pos = s.size();
  return std::string_view(s.data() + pos, n < s.size() - pos ? n : s.size() - pos);
}

constexpr std::string_view kMemKey = api::kEnvMemoryLimit;
constexpr std::string_view kSmKey = api::kEnvSmLimit;

// Records an error; one from the file also marks the file bad (cuInit refuses). Key and value
// are printed with at most 64 bytes each.
void AddError(Config* c, Source source, std::string_view key, std::string_view value,
              const char* why) {
  if (source == Source::kFile) c->file_bad = true;
  if (c->error_count++ > 0) return;
  char where[32] = "environment";
  if (source == Source::kFile)
    std::snprintf(where, sizeof(where), c->file_line > 0 ? "limits file line %d" : "limits file",
                  c->file_line);
  std::snprintf(c->error, sizeof(c->error), "%s: %.*s=\"%.*s\": %s", where,
                static_cast<int>(key.size() > 64 ? 64 : key.size()), key.data(),
                static_cast<int>(value.size() > 64 ? 64 : value.size()), value.data(), why);
}

// Parses "_<i>" after a key prefix; -1 if malformed or out of range.
int ParseIndexSuffix(std::string_view rest) {
  if (rest.size() < 2 || rest.size() > 3 || rest[0] != '_') return -1;
  int v = 0;
  for (size_t i = 1; i < rest.size(); ++i) {
    if (rest[i] < '0' || rest[i] > '9') return -1;
    v = v * 10 + (rest[i] - '0');
  }
  if (rest.size() == 3 && rest[1] == '0') return -1;  // no leading zeros: "_01"
  return v < kMaxDevices ? v : -1;
}

bool CopyString(char* dst, size_t cap, std::string_view v) {
  if (v.size() >= cap) return false;
  std::memcpy(dst, v.data(), v.size());
  dst[v.size()] = '\0';
  return true;
}

// `value` equals the lower-case ASCII word `lower` in any letter case ("FORCE", "Force").
bool EqualsAsciiNoCase(std::string_view value, std::string_view lower) {
  if (value.size() != lower.size()) return false;
  for (size_t i = 0; i < value.size(); ++i) {
    char ch = value[i];
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
    if (ch != lower[i]) return false;
  }
  return true;
}

bool IsContractKey(std::string_view key) {
  return key.starts_with(kMemKey) || key.starts_with(kSmKey) || key == api::kEnvSharedCache ||
         key == api::kEnvCorePolicy || key == api::kEnvTaskPriority ||
         key == api::kEnvVisibleDevices;
}

}  // namespace

bool ParseMemoryLimit(std::string_view text, uint64_t* bytes) noexcept {
  if (text.empty()) return false;
  uint64_t mult = 1;
  char last = text.back();
  if (last == 'k' || last == 'K') mult = 1ull << 10;
  if (last == 'm' || last == 'M') mult = 1ull << 20;
  if (last == 'g' || last == 'G') mult = 1ull << 30;
  if (mult != 1) text.remove_suffix(1);
  if (text.empty() || text.size() > 20) return false;
  uint64_t v = 0;
  for (char ch : text) {
    if (ch < '0' || ch > '9') return false;
    uint64_t d = static_cast<uint64_t>(ch - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  if (v > UINT64_MAX / mult) return false;
  *bytes = v * mult;
  return true;
}

bool ParseSmLimit(std::string_view text, uint32_t* percent) noexcept {
  if (text.empty() || text.size() > 3) return false;
  uint32_t v = 0;
  for (char ch : text) {
    if (ch < '0' || ch > '9') return false;
    v = v * 10 + static_cast<uint32_t>(ch - '0');
  }
  if (v > 100) return false;
  *percent = v;
  return true;
}

void ApplyKey(Config* c, std::string_view key, std::string_view value, Source source) noexcept {
  if (key.starts_with(kMemKey)) {
    std::string_view rest = Sub(key, kMemKey.size());
    int idx = rest.empty() ? -2 : ParseIndexSuffix(rest);
    if (idx == -1) {
      // Not one of ours (e.g. CUDA_DEVICE_MEMORY_LIMIT_FOO) in the environment: ignore it;
      // in the device plugin's file it means the file is corrupt.
      if (source == Source::kFile) {
        c->all_fail_closed = true;
        AddError(c, source, key, value, "unknown key (index must be 0..15)");
      }
      return;
    }
    uint64_t bytes = 0;
    bool ok = ParseMemoryLimit(value, &bytes);
    if (!ok)
      AddError(c, source, key, value, "memory limit must be digits with optional k/m/g suffix");
    if (idx == -2) {
      c->global_memory_set = ok;
      c->global_memory_bytes = bytes;
      if (!ok) c->all_fail_closed = true;
    } else {
      c->devices[idx].memory_set = ok;
      c->devices[idx].memory_bytes = bytes;
      if (!ok) c->devices[idx].fail_closed = true;
    }
    return;
  }
  if (key.starts_with(kSmKey)) {
    std::string_view rest = Sub(key, kSmKey.size());
    int idx = rest.empty() ? -2 : ParseIndexSuffix(rest);
    if (idx == -1) {
      if (source == Source::kFile) {
        c->all_fail_closed = true;
        AddError(c, source, key, value, "unknown key (index must be 0..15)");
      }
      return;
    }
    uint32_t pct = 0;
    bool ok = ParseSmLimit(value, &pct);
    if (!ok) AddError(c, source, key, value, "SM limit must be an integer percent 0..100");
    if (idx == -2) {
      c->global_sm_set = ok;
      c->global_sm_percent = pct;
      if (!ok) c->all_fail_closed = true;
    } else {
      c->devices[idx].sm_set = ok;
      c->devices[idx].sm_percent = pct;
      if (!ok) c->devices[idx].fail_closed = true;
    }
    return;
  }
  if (key == api::kEnvSharedCache) {
    if (value.empty() || value[0] != '/' || value.find('\0') != std::string_view::npos ||
        !CopyString(c->region_path, sizeof(c->region_path), value)) {
      c->region_path[0] = '\0';
      c->all_fail_closed = true;
      AddError(c, source, key, value, "must be an absolute path shorter than 512 bytes");
    }
    return;
  }
  if (key == api::kEnvCorePolicy) {
    // Any letter case: HAMi-core reads FORCE and DISABLE as well as force and disable.
    if (EqualsAsciiNoCase(value, "default"))
      c->policy = CorePolicy::kDefault;
    else if (EqualsAsciiNoCase(value, "force"))
      c->policy = CorePolicy::kForce;
    else if (EqualsAsciiNoCase(value, "disable"))
      c->policy = CorePolicy::kDisable;
    else {
      c->policy = CorePolicy::kForce;  // the strict reading of a bad value
      AddError(c, source, key, value, "must be default, force or disable (using force)");
    }
    return;
  }
  if (key == api::kEnvTaskPriority) {
    if (value == "0")
      c->priority = 0;
    else if (value == "1")
      c->priority = 1;
    else {
      c->priority = 1;  // the lower priority for a bad value
      AddError(c, source, key, value, "must be 0 or 1 (using 1)");
    }
    return;
  }
  if (key == api::kEnvVisibleDevices) {
    if (!CopyString(c->visible_devices, sizeof(c->visible_devices), value)) {
      c->all_fail_closed = true;
      AddError(c, source, key, value, "longer than 1023 bytes");
    }
    return;
  }
  if (key == api::kEnvLogLevel) {
    if (value.size() == 1 && value[0] >= '0' && value[0] <= '4') c->log_level = value[0] - '0';
    return;
  }
}

namespace {
// A bit per key the file may hold (for duplicates): memory and SM limits, global (index 0) and
// per device (1 + i), then the four single keys; -1 for a key the file may not hold.
int FileKeyBit(std::string_view key) {
  auto indexed = [&](std::string_view prefix, int base) {
    std::string_view rest = Sub(key, prefix.size());
    if (rest.empty()) return base;
    int i = ParseIndexSuffix(rest);
    return i < 0 ? -1 : base + 1 + i;
  };
  if (key.starts_with(kMemKey)) return indexed(kMemKey, 0);
  if (key.starts_with(kSmKey)) return indexed(kSmKey, kMaxDevices + 1);
  constexpr int kSingles = 2 * (kMaxDevices + 1);
  if (key == api::kEnvSharedCache) return kSingles;
  if (key == api::kEnvCorePolicy) return kSingles + 1;
  if (key == api::kEnvTaskPriority) return kSingles + 2;
  if (key == api::kEnvVisibleDevices) return kSingles + 3;
  return -1;
}
static_assert(2 * (kMaxDevices + 1) + 4 <= 64, "the key bits fit one uint64_t");
}  // namespace

void ParseLimitsFile(Config* c, const char* text, size_t size) noexcept {
  c->file_present = true;
  std::string_view all(text, size);
  uint64_t seen = 0;
  bool memory = false;
  c->file_line = 0;
  while (!all.empty()) {
    size_t nl = all.find('\n');
    std::string_view line = Sub(all, 0, nl);
    all = nl == std::string_view::npos ? std::string_view() : Sub(all, nl + 1);
    ++c->file_line;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line[0] == '#') continue;
    size_t eq = line.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      c->all_fail_closed = true;
      AddError(c, Source::kFile, line, "", "line is not KEY=VALUE");
      continue;
    }
    std::string_view key = Sub(line, 0, eq), value = Sub(line, eq + 1);
    int bit = FileKeyBit(key);
    if (bit < 0) {
      // `export KEY`, a lower-case or misspelt key, LIBCUDA_LOG_LEVEL (environment only), a
      // device index out of range: not the device plugin's grammar.
      c->all_fail_closed = true;
      AddError(c, Source::kFile, key, value,
               "unknown key (docs/design/CONTRACT.md section 3, upper case; index must be 0..15)");
      continue;
    }
    if (seen & (1ull << bit)) {
      c->all_fail_closed = true;
      AddError(c, Source::kFile, key, value, "key given twice");
      continue;
    }
    seen |= 1ull << bit;
    if (key.starts_with(kMemKey)) memory = true;
    ApplyKey(c, key, value, Source::kFile);
  }
  if (!memory) {
    c->all_fail_closed = true;
    c->file_line = 0;
    AddError(c, Source::kFile, kMemKey, "",
             "the file names no memory limit (empty or comments only?)");
  }
  if (c->file_bad) c->all_fail_closed = true;  // a broken file limits nothing: all fail closed
}

void ApplyEnvironment(Config* c, char* const* envp) noexcept {
  if (!envp) return;
  for (char* const* e = envp; *e; ++e) {
    std::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    std::string_view key = Sub(kv, 0, eq);
    if (c->file_present && IsContractKey(key)) continue;
    if (key == api::kEnvLogLevel || IsContractKey(key)) {
      ApplyKey(c, key, Sub(kv, eq + 1), Source::kEnvironment);
    }
  }
}

void FinishConfig(Config* c) noexcept {
  if (c->region_path[0] == '\0' && !c->all_fail_closed) {
    CopyString(c->region_path, sizeof(c->region_path), kDefaultRegionPath);
  }
}

uint64_t EffectiveMemoryLimit(const Config& c, int i, bool* fail_closed) noexcept {
  *fail_closed = c.all_fail_closed || (i >= 0 && i < kMaxDevices && c.devices[i].fail_closed);
  if (i >= 0 && i < kMaxDevices && c.devices[i].memory_set) return c.devices[i].memory_bytes;
  return c.global_memory_set ? c.global_memory_bytes : 0;
}

uint32_t EffectiveSmLimit(const Config& c, int i) noexcept {
  uint32_t v = 0;
  if (i >= 0 && i < kMaxDevices && c.devices[i].sm_set)
    v = c.devices[i].sm_percent;
  else if (c.global_sm_set)
    v = c.global_sm_percent;
  return v >= 100 ? 0 : v;
}

}  // namespace fracgpu::vgpu
