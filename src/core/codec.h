#pragma once
// Encoders/decoders of the annotations exchanged between components (docs/design/CONTRACT.md §2).
// Decoders take outside input: they validate everything, return kInvalidArgument naming the
// field and value, and never crash (fuzzed under tests/fuzz/).

#include <string>
#include <vector>

#include "base/status.h"
#include "core/device.h"

namespace fracgpu::core {

// Error messages name the element and field ("device 1 (\"GPU-…\"): devmem must be an integer
// 0..2147483647, got -5") but not the annotation key: callers add it with Status::WithPrefix.
// Bounds: MiB and split counts fit int32 as in HAMi (devmem ≤ 2147483647 MiB).

/// Encodes `hami.io/node-nvidia-register` as the JSON array of docs/design/CONTRACT.md §2, every
/// field written, in HAMi's field order (id, index, count, devmem, devcore, type, numa, health,
/// mode).
std::string EncodeNodeRegister(const std::vector<DeviceInfo>& devices);
/// Decodes `hami.io/node-nvidia-register`: the JSON array (absent or null fields read as zero,
/// "" and false, as Go's omitempty leaves them out; unknown fields such as migProfiles are
/// ignored), or HAMi ≤ v2.7's legacy colon format (7 or 9 comma fields per `:`-terminated
/// record; 7 fields imply index 0, mode "hami-core"). An empty or blank value is zero devices.
/// Errors (kInvalidArgument): invalid JSON, a non-array, a missing/empty/duplicate id, a
/// negative, fractional, non-numeric or out-of-range number, a non-boolean health, a legacy
/// record with another field count.
Result<std::vector<DeviceInfo>> DecodeNodeRegister(const std::string& value);

/// Encodes a pod allocation (`hami.io/vgpu-devices-allocated` / `-to-allocate`):
/// each container's part ends with ';', each GPU is `<UUID>,<type>,<mem MiB>,<cores %>:`.
/// Precondition: uuid and type contain none of ',', ':' and ';' (true of NVML UUIDs and of
/// everything DecodePodGrants returns).
std::string EncodePodGrants(const PodGrants& grants);
/// Decodes the allocation encoding; "" is a pod of zero containers. Strict: the value must end
/// with ';', a non-empty part with ':', each GPU has exactly 4 fields, non-empty uuid and type,
/// mem 0..2147483647 MiB, cores 0..100, no GPU twice in one container. Errors name the
/// container index, the device index and the field ("container 1 device 0: cores must be …").
Result<PodGrants> DecodePodGrants(const std::string& value);

/// Decodes `hami.io/node-nvidia-score` (JSON array of {"uuid", "score": {uuid: int}},
/// docs/design/hami-behaviour.md §3.3); scores are integers 0..2147483647, a missing score map is
/// empty, an empty value is no scores. Errors name the entry, the uuid and the field.
Result<TopologyScores> DecodeTopologyScores(const std::string& value);

}  // namespace fracgpu::core
