#include "deviceplugin/cluster_api.h"

#include "k8s/client.h"

namespace fracgpu::deviceplugin {

Result<json> K8sClusterApi::GetNode(const std::string& name) {
  return client_->Get(k8s::NodePath(name));
}

Result<json> K8sClusterApi::GetPod(const std::string& ns, const std::string& name) {
  return client_->Get(k8s::PodPath(ns, name));
}

Result<json> K8sClusterApi::ListPodsOnNode(const std::string& node) {
  k8s::ListOptions options;
  options.field_selector = "spec.nodeName=" + node;
  auto list = client_->List("/api/v1/pods", options);
  if (!list.ok()) return list.status();
  auto items = list->find("items");
  if (items == list->end() || items->is_null()) return json::array();
  if (!items->is_array()) return Internal("pod list from the API server has no items array");
  return *items;
}

Result<json> K8sClusterApi::PatchPod(const std::string& ns, const std::string& name,
                                     const PatchFn& make_patch) {
  return client_->PatchWithRetry(k8s::PodPath(ns, name), make_patch);
}

Result<json> K8sClusterApi::PatchNode(const std::string& name, const PatchFn& make_patch) {
  return client_->PatchWithRetry(k8s::NodePath(name), make_patch);
}

}  // namespace fracgpu::deviceplugin
