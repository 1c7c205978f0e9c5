#include "monitor/pods.h"

#include "k8s/objects.h"

namespace fracgpu::monitor {

Result<std::vector<PodRef>> PodsFromList(const nlohmann::json& list) {
  if (!list.is_object() || !list.contains("items") || !list["items"].is_array())
    return InvalidArgument("pod list has no items array");
  std::vector<PodRef> out;
  for (const auto& item : list["items"]) {
    if (!item.is_object()) continue;
    PodRef p{k8s::Uid(item), k8s::Namespace(item), k8s::Name(item), {}, {}, {}};
    if (p.uid.empty()) continue;
    // Bounded: a pod has at most a few hundred containers; the IDs are CRI-formatted strings.
    const auto* status =
        item.contains("status") && item["status"].is_object() ? &item["status"] : nullptr;
    for (const char* key : {"containerStatuses", "initContainerStatuses"}) {
      if (!status || !status->contains(key) || !(*status)[key].is_array()) continue;
      for (const auto& cs : (*status)[key]) {
        if (!cs.is_object() || p.container_names.size() >= 512) continue;
        auto name = cs.value("name", std::string());
        auto id = cs.value("containerID", std::string());
        size_t sep = id.find("://");
        if (name.empty() || sep == std::string::npos || id.size() - sep - 3 > 128) continue;
        p.container_names[id.substr(sep + 3)] = name;
      }
    }
    const auto* meta =
        item.contains("metadata") && item["metadata"].is_object() ? &item["metadata"] : nullptr;
    if (meta && meta->contains("annotations") && (*meta)["annotations"].is_object()) {
      const auto& a = (*meta)["annotations"];
      if (a.contains("fracgpu.io/enforcement") && a["fracgpu.io/enforcement"].is_string())
        p.enforcement = a["fracgpu.io/enforcement"].get<std::string>().substr(0, 16);
      if (a.contains("fracgpu.io/park") && a["fracgpu.io/park"].is_string())
        p.park = a["fracgpu.io/park"].get<std::string>().substr(0, 16);
    }
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
