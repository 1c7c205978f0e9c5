#include "k8s/objects.h"

#include <charconv>

namespace fracgpu::k8s {
namespace {

using nlohmann::json;

const json* Field(const json& obj, const char* a, const char* b) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(a);
  if (it == obj.end() || !it->is_object()) return nullptr;
  auto jt = it->find(b);
  if (jt == it->end()) return nullptr;
  return &*jt;
}

std::string StringField(const json& obj, const char* a, const char* b) {
  const json* f = Field(obj, a, b);
  return f != nullptr && f->is_string() ? f->get<std::string>() : std::string();
}

std::optional<std::string> MapEntry(const json& obj, const char* map, const std::string& key) {
  const json* m = Field(obj, "metadata", map);
  if (m == nullptr || !m->is_object()) return std::nullopt;
  auto it = m->find(key);
  if (it == m->end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

}  // namespace

std::string Name(const json& obj) { return StringField(obj, "metadata", "name"); }
std::string Namespace(const json& obj) { return StringField(obj, "metadata", "namespace"); }
std::string Uid(const json& obj) { return StringField(obj, "metadata", "uid"); }
std::string ResourceVersion(const json& obj) {
  return StringField(obj, "metadata", "resourceVersion");
}

std::string Key(const json& obj) {
  std::string ns = Namespace(obj);
  return ns.empty() ? Name(obj) : ns + "/" + Name(obj);
}

std::optional<std::string> Annotation(const json& obj, const std::string& key) {
  return MapEntry(obj, "annotations", key);
}
std::optional<std::string> Label(const json& obj, const std::string& key) {
  return MapEntry(obj, "labels", key);
}

std::string PodNodeName(const json& pod) { return StringField(pod, "spec", "nodeName"); }
std::string PodPhase(const json& pod) { return StringField(pod, "status", "phase"); }
std::string PodSchedulerName(const json& pod) { return StringField(pod, "spec", "schedulerName"); }

std::string CreationTimestamp(const json& obj) {
  return StringField(obj, "metadata", "creationTimestamp");
}

bool IsTerminating(const json& obj) {
  const json* f = Field(obj, "metadata", "deletionTimestamp");
  return f != nullptr && !f->is_null();
}

int64_t NodeAllocatable(const json& node, const std::string& resource) {
  const json* a = Field(node, "status", "allocatable");
  if (a == nullptr || !a->is_object()) return 0;
  auto it = a->find(resource);
  if (it == a->end()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (!it->is_string()) return 0;
  const std::string& s = it->get_ref<const std::string&>();
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return 0;
  return v;
}

}  // namespace fracgpu::k8s
