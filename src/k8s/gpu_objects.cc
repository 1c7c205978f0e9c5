#include "k8s/gpu_objects.h"

#include <cmath>
#include <map>

#include "core/annotations.h"
#include "core/quantity.h"
#include "core/request.h"
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

std::optional<int64_t> ScaledQuantity(const std::string& text, int32_t shift10, int32_t shift2,
                                      bool round_up);

// A container of the pod lists `resource` in its limits or requests, with a quantity other
// than 0 (a pod that lists `nvidia.com/gpu: 0`, e.g. to be sent to the extender, asks for no
// GPU; a value that does not parse counts as asking).
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
        if (m == res->end() || !m->is_object()) continue;
        auto q = m->find(resource);
        if (q == m->end()) continue;
        const std::optional<int64_t> n =
            q->is_string() ? ScaledQuantity(q->get<std::string>(), 0, 0, true) : std::nullopt;
        if (n != std::optional<int64_t>(0)) return true;
      }
    }
  }
  return false;
}

// `text` × 10^shift10 / 2^shift2 as a whole number, rounded down or up.
std::optional<int64_t> ScaledQuantity(const std::string& text, int32_t shift10, int32_t shift2,
                                      bool round_up) {
  auto q = core::ParseQuantity(text);
  if (!q.ok() || q->negative) return std::nullopt;
  core::Quantity scaled = *q;
  scaled.exp10 += shift10;
  int64_t v = 0;
  switch (core::QuantityToInt64(scaled, &v, shift2)) {
    case core::WholeStatus::kOk:
      return v;
    case core::WholeStatus::kOutOfRange:
      return std::nullopt;
    case core::WholeStatus::kFraction:
      break;
  }
  // Not whole: the digits as a double (exact to 2^53, far beyond any node's millicores or MiB).
  const double d = std::stod(scaled.digits) * std::pow(10.0, static_cast<double>(scaled.exp10)) *
                   std::pow(2.0, static_cast<double>(scaled.exp2 - shift2));
  const double r = round_up ? std::ceil(d) : std::floor(d);
  if (!(r < 9.2e18)) return std::nullopt;
  return static_cast<int64_t>(r);
}

// Adds the cpu and memory of one ResourceList (requests, limits, overhead) to `out`; with
// `fallback`, a resource absent from `list` is read from `fallback` (a container's limits).
void AddList(const json* list, const json* fallback, int64_t& cpu, int64_t& mem) {
  auto read = [&](const char* name) -> const json* {
    if (list != nullptr && list->is_object()) {
      if (auto it = list->find(name); it != list->end()) return &*it;
    }
    if (fallback != nullptr && fallback->is_object()) {
      if (auto it = fallback->find(name); it != fallback->end()) return &*it;
    }
    return nullptr;
  };
  if (const json* c = read("cpu"); c != nullptr && c->is_string()) {
    cpu += QuantityMilli(c->get<std::string>(), true).value_or(0);
  }
  if (const json* m = read("memory"); m != nullptr && m->is_string()) {
    mem += QuantityMib(m->get<std::string>(), true).value_or(0);
  }
}

// A container's request: resources.requests, else resources.limits, per resource.
std::pair<int64_t, int64_t> ContainerRequest(const json& c) {
  int64_t cpu = 0, mem = 0;
  if (!c.is_object()) return {0, 0};
  auto res = c.find("resources");
  if (res == c.end() || !res->is_object()) return {0, 0};
  const auto req = res->find("requests");
  const auto lim = res->find("limits");
  AddList(req != res->end() ? &*req : nullptr, lim != res->end() ? &*lim : nullptr, cpu, mem);
  return {cpu, mem};
}

}  // namespace

std::optional<int64_t> QuantityMilli(const std::string& text, bool round_up) {
  return ScaledQuantity(text, 3, 0, round_up);
}

std::optional<int64_t> QuantityMib(const std::string& text, bool round_up) {
  return ScaledQuantity(text, 0, 20, round_up);
}

HostRequests PodHostRequests(const json& pod) {
  HostRequests out;
  auto spec = pod.is_object() ? pod.find("spec") : pod.end();
  if (!pod.is_object() || spec == pod.end() || !spec->is_object()) return out;
  int64_t cpu = 0, mem = 0;  // app containers + sidecars
  if (auto cs = spec->find("containers"); cs != spec->end() && cs->is_array()) {
    for (const auto& c : *cs) {
      auto [c_cpu, c_mem] = ContainerRequest(c);
      cpu += c_cpu;
      mem += c_mem;
    }
  }
  int64_t init_cpu = 0, init_mem = 0;  // the largest init container's use
  int64_t side_cpu = 0, side_mem = 0;  // sidecars declared so far
  if (auto is = spec->find("initContainers"); is != spec->end() && is->is_array()) {
    for (const auto& c : *is) {
      auto [c_cpu, c_mem] = ContainerRequest(c);
      const bool sidecar = c.is_object() && c.contains("restartPolicy") &&
                           c["restartPolicy"].is_string() && c["restartPolicy"] == "Always";
      if (sidecar) {
        cpu += c_cpu;
        mem += c_mem;
        side_cpu += c_cpu;
        side_mem += c_mem;
        init_cpu = std::max(init_cpu, side_cpu);
        init_mem = std::max(init_mem, side_mem);
      } else {
        init_cpu = std::max(init_cpu, c_cpu + side_cpu);
        init_mem = std::max(init_mem, c_mem + side_mem);
      }
    }
  }
  cpu = std::max(cpu, init_cpu);
  mem = std::max(mem, init_mem);
  // Pod-level requests (PodLevelResources) replace the container sum for what they name.
  if (auto r = spec->find("resources"); r != spec->end() && r->is_object()) {
    if (auto req = r->find("requests"); req != r->end() && req->is_object()) {
      int64_t p_cpu = 0, p_mem = 0;
      AddList(&*req, nullptr, p_cpu, p_mem);
      if (req->contains("cpu")) cpu = p_cpu;
      if (req->contains("memory")) mem = p_mem;
    }
  }
  if (auto o = spec->find("overhead"); o != spec->end() && o->is_object()) {
    AddList(&*o, nullptr, cpu, mem);
  }
  out.cpu_milli = cpu;
  out.mem_mib = mem;
  return out;
}

core::NodeObject NodeObjectOf(const json& node, const std::string& gpu_resource) {
  core::NodeObject out;
  out.name = Name(node);
  out.node_register = Annotation(node, core::kAnnotationNodeRegister);
  out.cordon = Annotation(node, core::kAnnotationCordon);
  out.topology = Annotation(node, core::kAnnotationTopology);
  out.lent_memory = Annotation(node, core::kAnnotationLentMemory);
  out.allocatable_gpus = NodeAllocatable(node, gpu_resource);
  const json* a = nullptr;
  if (auto st = node.is_object() ? node.find("status") : node.end();
      node.is_object() && st != node.end() && st->is_object()) {
    if (auto al = st->find("allocatable"); al != st->end()) a = &*al;
  }
  if (a != nullptr && a->is_object()) {
    if (auto c = a->find("cpu"); c != a->end() && c->is_string()) {
      out.allocatable_cpu_milli = QuantityMilli(c->get<std::string>(), false).value_or(0);
    }
    if (auto m = a->find("memory"); m != a->end() && m->is_string()) {
      out.allocatable_mem_mib = QuantityMib(m->get<std::string>(), false).value_or(0);
    }
  }
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
  out.borrower = Annotation(pod, core::kAnnotationBorrower).value_or("") == "true";
  out.num_init_containers = ListSize(pod, "initContainers");
  ReadInitStatuses(pod, out);
  out.asks_for_gpu = AsksFor(pod, gpu_resource);
  out.created = CreationTimestamp(pod);
  const HostRequests host = PodHostRequests(pod);
  out.cpu_milli = host.cpu_milli;
  out.mem_mib = host.mem_mib;
  return out;
}

}  // namespace fracgpu::k8s
