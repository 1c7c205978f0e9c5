#include "deviceplugin/topology.h"

#include <spdlog/spdlog.h>

#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "api/nvml.h"
#include "core/cluster_state.h"

namespace fracgpu::deviceplugin {

namespace {

// HAMi's P2PLinkType score of a PCIe common ancestor; 0 (no entry) for a level it cannot name.
int AncestorScore(unsigned int level, bool* known) {
  *known = true;
  switch (level) {
    case NVML_TOPOLOGY_SYSTEM:
      return 10;
    case NVML_TOPOLOGY_NODE:
      return 20;
    case NVML_TOPOLOGY_HOSTBRIDGE:
      return 30;
    case NVML_TOPOLOGY_MULTIPLE:
      return 40;
    case NVML_TOPOLOGY_SINGLE:
      return 50;
    case NVML_TOPOLOGY_INTERNAL:
      return 60;
    default:
      *known = false;
      return 0;
  }
}

constexpr unsigned int kMaxScoredNvlinks = 18;  // HAMi's EighteenNVLINKLinks

// How many links HAMi's Device.Links[b] of `link.a` holds: the PCIe path and the NVLinks.
int LinkEntries(const nvml::GpuPairLink& link) {
  bool known = false;
  AncestorScore(link.common_ancestor, &known);
  return (known ? 1 : 0) + (link.nvlinks >= 1 && link.nvlinks <= kMaxScoredNvlinks ? 1 : 0);
}

}  // namespace

int PairScore(const nvml::GpuPairLink& ab, const nvml::GpuPairLink& ba, bool* asymmetric) {
  if (LinkEntries(ab) != LinkEntries(ba)) {
    if (asymmetric != nullptr) *asymmetric = true;
    return 0;
  }
  bool known = false;
  int score = AncestorScore(ab.common_ancestor, &known);
  if (ab.nvlinks >= 1 && ab.nvlinks <= kMaxScoredNvlinks)
    score += 100 * static_cast<int>(ab.nvlinks);
  return score;
}

std::string EncodeTopologyScores(const std::vector<std::string>& uuids,
                                 const nvml::TopologyReport& report, bool* asymmetric) {
  if (!report.omitted.empty() || uuids.empty()) return "";
  std::map<std::pair<std::string, std::string>, const nvml::GpuPairLink*> by_pair;
  for (const nvml::GpuPairLink& l : report.links) by_pair[{l.a, l.b}] = &l;
  nlohmann::ordered_json doc = nlohmann::ordered_json::array();
  for (const std::string& a : uuids) {
    std::map<std::string, int> row;  // sorted, as Go writes a map's keys
    for (const std::string& b : uuids) {
      if (a == b) continue;
      auto ab = by_pair.find({a, b});
      auto ba = by_pair.find({b, a});
      row[b] = ab == by_pair.end() || ba == by_pair.end()
                   ? 0
                   : PairScore(*ab->second, *ba->second, asymmetric);
    }
    nlohmann::ordered_json scores = nlohmann::ordered_json::object();
    for (const auto& [b, score] : row) scores[b] = score;
    doc.push_back({{"uuid", a}, {"score", scores}});
  }
  return doc.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string NodeTopologyScores(nvml::Nvml* nvml, const std::vector<core::DeviceInfo>& devices) {
  std::vector<std::string> uuids;
  for (const core::DeviceInfo& d : devices) uuids.push_back(d.uuid);
  nvml::TopologyReport report = nvml->Topology();
  if (!report.omitted.empty()) spdlog::warn("{}", report.omitted);
  bool asymmetric = false;
  std::string value = EncodeTopologyScores(uuids, report, &asymmetric);
  if (asymmetric) {
    spdlog::warn(
        "AsymmetricGPUP2PLink: one or more GPU pairs have asymmetric P2P link data; those pairs "
        "score 0 in {} (possible NVLink hardware or driver issue)",
        core::kAnnotationTopology);
  }
  return value;
}

}  // namespace fracgpu::deviceplugin
