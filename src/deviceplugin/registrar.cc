#include "deviceplugin/registrar.h"

#include <spdlog/spdlog.h>

#include "core/cluster_state.h"
#include "core/codec.h"
#include "deviceplugin/annotations.h"
#include "k8s/objects.h"

namespace fracgpu::deviceplugin {

Result<bool> NodeRegistrar::Sync(const std::vector<core::DeviceInfo>& devices) {
  std::string value = core::EncodeNodeRegister(devices);
  bool patched = false;
  bool register_patched = false, scores_patched = false;
  auto r = api_->PatchNode(node_, [&](const json& node) -> Result<json> {
    json annotations = json::object();
    if (k8s::Annotation(node, kNodeRegisterKey).value_or("") != value)
      annotations[kNodeRegisterKey] = value;
    if (!topology_scores_.empty() &&
        k8s::Annotation(node, core::kAnnotationTopology).value_or("") != topology_scores_) {
      annotations[core::kAnnotationTopology] = topology_scores_;
    }
    patched = !annotations.empty();
    register_patched = annotations.contains(kNodeRegisterKey);
    scores_patched = annotations.contains(core::kAnnotationTopology);
    if (!patched) return json();
    return json{{"metadata", {{"annotations", annotations}}}};
  });
  if (!r.ok()) return r.status().WithPrefix("registering the GPUs of node " + node_);
  if (register_patched) spdlog::info("node {}: {} = {}", node_, kNodeRegisterKey, value);
  if (scores_patched)
    spdlog::info("node {}: {} = {}", node_, core::kAnnotationTopology, topology_scores_);
  return patched;
}

}  // namespace fracgpu::deviceplugin
