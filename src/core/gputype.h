#pragma once
// The GPU type token rule and the comma lists of the use/nouse annotations (docs/design/CONTRACT.md
// §1, marked "(fixed)": HAMi matches raw upper-cased substrings, so "A10" matched "A100").

#include <string>
#include <string_view>
#include <vector>

namespace fracgpu::core {

/// Splits a comma-separated annotation value into entries, trimming spaces and tabs around
/// each and dropping empty entries: " A100, ,H100 " → {"A100", "H100"}.
std::vector<std::string> SplitCommaList(std::string_view value);

/// Tokens of a GPU type string or list entry: split on space, tab, '-' and '_', empty tokens
/// dropped, ASCII upper-cased. "NVIDIA A100-SXM4-80GB" → {"NVIDIA", "A100", "SXM4", "80GB"}.
std::vector<std::string> GpuTypeTokens(std::string_view text);

/// True when the list entry `entry` matches the GPU type `gpu_type`: the entry's tokens appear
/// among the type's tokens in the same order, not necessarily adjacent (case-insensitive).
/// An entry without tokens ("", " - ") matches nothing. "A100-80GB" matches
/// "NVIDIA A100-SXM4-80GB"; "A10" does not match "NVIDIA A100"; "H200" does not match
/// "NVIDIA GH200".
bool GpuTypeEntryMatches(std::string_view entry, std::string_view gpu_type);

/// True when any entry of `entries` matches `gpu_type` by GpuTypeEntryMatches.
bool GpuTypeMatchesAny(const std::vector<std::string>& entries, std::string_view gpu_type);

/// GPU UUIDs compare ASCII case-insensitively (RFC 4122 §3: hex digits are case-insensitive
/// on input); "GPU-0FC3…" equals "gpu-0fc3…".
bool GpuUuidEquals(std::string_view a, std::string_view b);

}  // namespace fracgpu::core
