#include "deviceplugin/registrar.h"

#include <spdlog/spdlog.h>

#include "core/codec.h"
#include "deviceplugin/annotations.h"
#include "k8s/objects.h"

namespace fracgpu::deviceplugin {

Result<bool> NodeRegistrar::Sync(const std::vector<core::DeviceInfo>& devices) {
  std::string value = core::EncodeNodeRegister(devices);
  bool patched = false;
  auto r = api_->PatchNode(node_, [&](const json& node) -> Result<json> {
    patched = false;
    if (k8s::Annotation(node, kNodeRegisterKey).value_or("") == value) return json();
    patched = true;
    return json{{"metadata", {{"annotations", {{kNodeRegisterKey, value}}}}}};
  });
  if (!r.ok()) return r.status().WithPrefix("registering the GPUs of node " + node_);
  if (patched) spdlog::info("node {}: {} = {}", node_, kNodeRegisterKey, value);
  return patched;
}

}  // namespace fracgpu::deviceplugin
