#include "k8s/gpu_objects.h"

#include "core/annotations.h"
#include "k8s/objects.h"

namespace fracgpu::k8s {
namespace {

using nlohmann::json;

size_t ListSize(const json& pod, const char* list) {
  if (!pod.contains("spec") || !pod["spec"].is_object()) return 0;
  auto it = pod["spec"].find(list);
  return it != pod["spec"].end() && it->is_array() ? it->size() : 0;
}

// status.initContainerStatuses: how many, and whether each terminated with exit code 0
// (docs/design/hami-behaviour.md §3.8).
void ReadInitStatuses(const json& pod, core::PodObject& out) {
  if (!pod.contains("status") || !pod["status"].is_object()) return;
  auto it = pod["status"].find("initContainerStatuses");
  if (it == pod["status"].end() || !it->is_array()) return;
  out.init_statuses = it->size();
  for (const auto& s : *it) {
    if (!s.is_object() || !s.contains("state") || !s["state"].is_object()) return;
    auto t = s["state"].find("terminated");
    if (t == s["state"].end() || !t->is_object()) return;
    auto code = t->find("exitCode");
    if (code == t->end() || !code->is_number_integer() || code->get<int64_t>() != 0) return;
  }
  out.init_statuses_succeeded = true;
}

// A container of the pod lists `resource` in its limits or requests.
bool AsksFor(const json& pod, const std::string& resource) {
  auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->is_object()) return false;
  for (const char* list : {"initContainers", "containers"}) {
    auto cs = spec->find(list);
    if (cs == spec->end() || !cs->is_array()) continue;
    for (const auto& c : *cs) {
      auto res = c.is_object() ? c.find("resources") : c.end();
      if (!c.is_object() || res == c.end() || !res->is_object()) continue;
      for (const char* kind : {"limits", "requests"}) {
        auto m = res->find(kind);
        if (m != res->end() && m->is_object() && m->contains(resource)) return true;
      }
    }
  }
  return false;
}

}  // namespace

core::NodeObject NodeObjectOf(const json& node, const std::string& gpu_resource) {
  core::NodeObject out;
  out.name = Name(node);
  out.node_register = Annotation(node, core::kAnnotationNodeRegister);
  out.cordon = Annotation(node, core::kAnnotationCordon);
  out.topology = Annotation(node, core::kAnnotationTopology);
  out.allocatable_gpus = NodeAllocatable(node, gpu_resource);
  return out;
}

core::PodObject PodObjectOf(const json& pod, const std::string& gpu_resource) {
  core::PodObject out;
  out.key = Key(pod);
  out.uid = Uid(pod);
  out.phase = PodPhase(pod);
  out.node_name = PodNodeName(pod);
  out.vgpu_node = Annotation(pod, core::kAnnotationVgpuNode);
  out.allocated = Annotation(pod, core::kAnnotationVgpuDevicesAllocated);
  out.signature = Annotation(pod, core::kAnnotationAllocationSignature);
  out.num_init_containers = ListSize(pod, "initContainers");
  ReadInitStatuses(pod, out);
  out.asks_for_gpu = AsksFor(pod, gpu_resource);
  if (pod.contains("metadata") && pod["metadata"].is_object()) {
    auto ts = pod["metadata"].find("creationTimestamp");
    if (ts != pod["metadata"].end() && ts->is_string()) out.created = ts->get<std::string>();
  }
  return out;
}

}  // namespace fracgpu::k8s
