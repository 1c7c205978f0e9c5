#pragma once
// The GPU link scores of `hami.io/node-nvidia-score` (docs/design/hami-behaviour.md §3.3), as
// HAMi's device plugin computes them from NVML (its pkg/device/nvidia/calculate_score.go and
// links.go): what the scheduler's topology-aware policy reads (core::ChooseByTopology).

#include <string>
#include <vector>

#include "core/device.h"
#include "nvml/nvml.h"

namespace fracgpu::deviceplugin {

/// HAMi's score of one GPU pair from the links seen from each end (`ab` from a, `ba` from b).
/// Each end's link list holds the PCIe path (always) and the NVLinks (when 1 .. 18 are
/// active); the score is the sum over `ab`'s list: common ancestor NVML_TOPOLOGY_SYSTEM 10
/// (CrossCPU), NODE 20 (SameCPU), HOSTBRIDGE 30, MULTIPLE 40 (MultiSwitch), SINGLE 50
/// (SingleSwitch), INTERNAL 60 (SameBoard), an unknown level nothing; plus 100 per NVLink.
/// The two lists of different lengths (asymmetric NVLink data) score 0 and set *asymmetric.
int PairScore(const nvml::GpuPairLink& ab, const nvml::GpuPairLink& ba, bool* asymmetric);

/// The annotation's value for the GPUs `uuids` (the register annotation's, in its order):
/// HAMi's JSON `[{"uuid":"<A>","score":{"<B>":<int>,...}},...]`, each GPU's map naming every
/// other GPU of `uuids` (keys sorted, as Go's encoding/json writes a map), no spaces. A GPU
/// `report` lacks scores 0 to the others. "" when `report.omitted` is set or `uuids` is empty
/// (nothing is published). *asymmetric is set when a pair's link data was asymmetric.
std::string EncodeTopologyScores(const std::vector<std::string>& uuids,
                                 const nvml::TopologyReport& report, bool* asymmetric);

/// What the device plugin registers: EncodeTopologyScores of `devices` (the register entries)
/// over `nvml->Topology()`. Logs a warning with the reason when NVML gives no topology (an
/// entry point missing, a call failing: nothing is published) and when a pair's link data is
/// asymmetric (HAMi's AsymmetricGPUP2PLink; that pair scores 0).
std::string NodeTopologyScores(nvml::Nvml* nvml, const std::vector<core::DeviceInfo>& devices);

}  // namespace fracgpu::deviceplugin
