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
  char where[kFragmentNameMax + 40] = "environment";
  if (source == Source::kFile && c->file_name[0] != '\0')
    std::snprintf(
        where, sizeof(where),
        c->file_line > 0 ? "limits directory file %s line %d" : "limits directory file %s",
        c->file_name, c->file_line);
  else if (source == Source::kFile)
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
  if (key == kEnvReclaimWaitMs) {
    uint64_t ms = 0;
    bool ok = !value.empty() && value.size() <= 7;
    for (char ch : value) {
      if (ch < '0' || ch > '9') ok = false;
      if (ok) ms = ms * 10 + static_cast<uint64_t>(ch - '0');
    }
    if (ok && ms <= kMaxReclaimWaitMs) {
      c->reclaim_wait_ms = static_cast<uint32_t>(ms);
    } else {
      c->reclaim_wait_ms = kDefaultReclaimWaitMs;
      AddError(c, source, key, value, "must be milliseconds 0..600000 (using 40000)");
    }
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

namespace {
// The line grammar of a limits file (ParseLimitsFile): applies each line to `c` and returns the
// bits (FileKeyBit) of the keys it held.
uint64_t ParseLimitsLines(Config* c, const char* text, size_t size) noexcept {
  std::string_view all(text, size);
  uint64_t seen = 0;
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
    ApplyKey(c, key, value, Source::kFile);
  }
  return seen;
}

constexpr int kSingleBits = 2 * (kMaxDevices + 1);
// The memory and SM limit keys, global and per device.
constexpr uint64_t kLimitBitsMask = (1ull << kSingleBits) - 1;
constexpr uint64_t kMemoryBitsMask = (1ull << (kMaxDevices + 1)) - 1;
constexpr uint64_t kVisibleBit = 1ull << (kSingleBits + 3);
// What a GPU file of the limits directory holds: its UUID, memory and SM limits of device 0.
constexpr uint64_t kGpuMemoryBit = 1ull << 1;
constexpr uint64_t kGpuSmBit = 1ull << (kMaxDevices + 2);
}  // namespace

void ParseLimitsFile(Config* c, const char* text, size_t size) noexcept {
  c->file_present = true;
  const uint64_t seen = ParseLimitsLines(c, text, size);
  if ((seen & kMemoryBitsMask) == 0) {
    c->all_fail_closed = true;
    c->file_line = 0;
    AddError(c, Source::kFile, kMemKey, "",
             "the file names no memory limit (empty or comments only?)");
  }
  if (c->file_bad) c->all_fail_closed = true;  // a broken file limits nothing: all fail closed
}

namespace {
// Refuses the whole directory (file_bad, every device fail closed) for a reason about one file
// (`name`, may be "") or about the directory.
void RefuseDir(Config* c, const char* name, std::string_view key, std::string_view value,
               const char* why) {
  c->file_line = 0;
  CopyString(c->file_name, sizeof(c->file_name), "");
  if (name != nullptr) {
    const std::string_view n(name, strnlen(name, kFragmentNameMax - 1));
    CopyString(c->file_name, sizeof(c->file_name), n);
  }
  if (c->file_name[0] == '\0') CopyString(c->file_name, sizeof(c->file_name), "(directory)");
  c->all_fail_closed = true;
  AddError(c, Source::kFile, key, value, why);
}

bool ValidFragmentName(const char* name) {
  if (name == nullptr) return false;
  const size_t n = strnlen(name, kFragmentNameMax);
  if (n == 0 || n >= kFragmentNameMax) return false;
  const std::string_view v(name, n);
  constexpr std::string_view suffix = api::kHostLimitsSuffix;
  return v.size() > suffix.size() && v.ends_with(suffix) && v.find('/') == std::string_view::npos;
}

// One UUID: not empty, no ',', not a keyword, shorter than a region UUID field.
bool SingleUuid(const char* v) {
  const size_t n = strnlen(v, kVisibleMax);
  if (n == 0 || n >= kUuidSize) return false;
  const std::string_view s(v, n);
  return s.find(',') == std::string_view::npos && s != "all" && s != "none" && s != "void";
}
}  // namespace

void ParseLimitsDir(Config* c, const LimitsFragment* files, size_t count) noexcept {
  c->file_present = true;
  if (files == nullptr || count == 0) {
    RefuseDir(c, nullptr, api::kEnvVisibleDevices, "", "the limits directory holds no file");
    c->file_bad = true;
    return;
  }
  if (count > kMaxFragments) {
    RefuseDir(c, nullptr, api::kEnvVisibleDevices, "",
              "the limits directory holds more than 32 files");
    return;
  }
  // File-name order (insertion sort of indexes: at most kMaxFragments).
  size_t order[kMaxFragments];
  for (size_t i = 0; i < count; ++i) {
    if (!ValidFragmentName(files[i].name) || (files[i].text == nullptr && files[i].size > 0)) {
      RefuseDir(c, files[i].name, "name", "",
                "a limits directory file must be named <name>.env (at most 95 bytes, no '/')");
      return;
    }
    size_t j = i;
    while (j > 0 && std::strcmp(files[order[j - 1]].name, files[i].name) > 0) {
      order[j] = order[j - 1];
      --j;
    }
    order[j] = i;
  }
  uint64_t common_seen = 0;
  int gpus = 0;
  size_t visible_len = 0;
  static_assert(sizeof(Config) < 8192, "one Config per file fits the stack");
  for (size_t k = 0; k < count; ++k) {
    const LimitsFragment& f = files[order[k]];
    Config frag;
    CopyString(frag.file_name, sizeof(frag.file_name), f.name);
    const uint64_t seen = ParseLimitsLines(&frag, f.text, f.size);
    if (frag.error_count > 0) {  // the file's own error, naming its line
      c->file_bad = true;
      c->all_fail_closed = true;
      if (c->error_count++ == 0) std::memcpy(c->error, frag.error, sizeof(c->error));
      return;
    }
    if (seen & kVisibleBit) {
      // A GPU file: its UUID and its limits, nothing claim-wide.
      if (!SingleUuid(frag.visible_devices)) {
        RefuseDir(c, f.name, api::kEnvVisibleDevices, frag.visible_devices,
                  "a GPU file names exactly one GPU UUID");
        return;
      }
      if ((seen & kGpuMemoryBit) == 0 || (seen & ~(kVisibleBit | kGpuMemoryBit | kGpuSmBit))) {
        RefuseDir(c, f.name, api::kEnvVisibleDevices, frag.visible_devices,
                  "a GPU file holds its UUID, CUDA_DEVICE_MEMORY_LIMIT_0 and optionally "
                  "CUDA_DEVICE_SM_LIMIT_0, nothing else");
        return;
      }
      const std::string_view uuid(frag.visible_devices);
      for (std::string_view have(c->visible_devices, visible_len); !have.empty();) {
        const size_t comma = have.find(',');
        if (Sub(have, 0, comma) == uuid) {
          RefuseDir(c, f.name, api::kEnvVisibleDevices, uuid, "the GPU is named by two files");
          return;
        }
        have = comma == std::string_view::npos ? std::string_view() : Sub(have, comma + 1);
      }
      if (gpus >= kMaxDevices) {
        RefuseDir(c, f.name, api::kEnvVisibleDevices, uuid, "more than 16 GPU files");
        return;
      }
      c->devices[gpus++] = frag.devices[0];
      if (visible_len > 0) c->visible_devices[visible_len++] = ',';
      std::memcpy(c->visible_devices + visible_len, uuid.data(), uuid.size());
      visible_len += uuid.size();  // 16 UUIDs of < 48 bytes each fit kVisibleMax
      c->visible_devices[visible_len] = '\0';
      continue;
    }
    // A common file: claim-wide keys, each from one file only.
    if ((seen & kLimitBitsMask) != 0 || seen == 0) {
      RefuseDir(c, f.name, kMemKey, "",
                "a common file holds only CUDA_DEVICE_MEMORY_SHARED_CACHE, "
                "GPU_CORE_UTILIZATION_POLICY and CUDA_TASK_PRIORITY (limits go in GPU files)");
      return;
    }
    if (seen & common_seen) {
      RefuseDir(c, f.name, "key", "", "a claim-wide key is given by two files");
      return;
    }
    common_seen |= seen;
    if (seen & (1ull << kSingleBits)) std::memcpy(c->region_path, frag.region_path, kPathMax);
    if (seen & (2ull << kSingleBits)) c->policy = frag.policy;
    if (seen & (4ull << kSingleBits)) c->priority = frag.priority;
  }
  if (gpus == 0) {
    RefuseDir(c, nullptr, api::kEnvVisibleDevices, "", "the limits directory names no GPU");
    return;
  }
  c->file_line = 0;
  c->file_name[0] = '\0';
}

void ApplyEnvironment(Config* c, char* const* envp) noexcept {
  if (!envp) return;
  for (char* const* e = envp; *e; ++e) {
    std::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    std::string_view key = Sub(kv, 0, eq);
    if (c->file_present && IsContractKey(key)) continue;
    if (key == api::kEnvLogLevel || key == kEnvReclaimWaitMs || IsContractKey(key)) {
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
