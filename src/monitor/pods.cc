#include "monitor/pods.h"

#include "k8s/objects.h"

namespace fracgpu::monitor {

Result<std::vector<PodRef>> PodsFromList(const nlohmann::json& list) {
  if (!list.is_object() || !list.contains("items") || !list["items"].is_array())
    return InvalidArgument("pod list has no items array");
  std::vector<PodRef> out;
  for (const auto& item : list["items"]) {
    if (!item.is_object()) continue;
    PodRef p{k8s::Uid(item), k8s::Namespace(item), k8s::Name(item)};
    if (p.uid.empty()) continue;
    out.push_back(std::move(p));
  }
  return out;
}

Result<std::vector<PodRef>> K8sPodLister::ListNodePods(const std::string& node) {
  k8s::ListOptions options;
  options.field_selector = "spec.nodeName=" + node;
  auto list = client_->List("/api/v1/pods", options);
  if (!list.ok()) return list.status();
  return PodsFromList(*list);
}

}  // namespace fracgpu::monitor
