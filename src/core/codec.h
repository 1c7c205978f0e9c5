#pragma once
// Encoders/decoders of the annotations exchanged between components (CONTRACT.md §2).
// Decoders take outside input: they validate everything, return kInvalidArgument naming the
// field and value, and never crash (fuzzed under tests/fuzz/).

#include <string>
#include <vector>

#include "core/device.h"
#include "core/status.h"

namespace fracgpu::core {

/// Encodes `hami.io/node-nvidia-register` as the JSON array of CONTRACT.md §2.
std::string EncodeNodeRegister(const std::vector<DeviceInfo>& devices);
/// Decodes `hami.io/node-nvidia-register`: the JSON array (zero fields may be omitted), or
/// HAMi ≤ v2.7's legacy colon format (7 or 9 comma fields per `:`-terminated record).
Result<std::vector<DeviceInfo>> DecodeNodeRegister(const std::string& value);

/// Encodes a pod allocation (`hami.io/vgpu-devices-allocated` / `-to-allocate`):
/// each container's part ends with ';', each GPU is `<UUID>,<type>,<mem>,<cores>:`.
std::string EncodePodGrants(const PodGrants& grants);
/// Decodes the allocation encoding. Errors name the container index and the field.
Result<PodGrants> DecodePodGrants(const std::string& value);

/// Decodes `hami.io/node-nvidia-score` (JSON array of {"uuid", "score": {uuid: int}}).
Result<TopologyScores> DecodeTopologyScores(const std::string& value);

}  // namespace fracgpu::core
