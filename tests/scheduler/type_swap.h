#pragma once
// Type-swapped requests (issue 33 item 1): a seed request of each endpoint (/filter,
// /prioritize, /bind, the webhook's AdmissionReview) and the same request with one field's
// value replaced by a value of another JSON type (null, number, string, array, object,
// boolean). Shared by tests/scheduler/extender_test.cc (every field × every type) and the
// fuzz target tests/fuzz/endpoints_type_swap_fuzz.cc (chains of swaps chosen by the input).

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fracgpu::scheduler::typeswap {

using nlohmann::json;

/// The endpoints driven.
enum class Endpoint { kFilter, kPrioritize, kBind, kWebhook };

/// One seed request: where it goes and its body.
struct Seed {
  Endpoint endpoint;
  json body;
};

/// A GPU pod that fits no node of tests' clusters (a 1,000,000 MiB slice), in namespace "ml",
/// name `name`, UID "uid-<name>", with a nodeSelector, annotations of every fracgpu list kind
/// and an init container: every field the parsers read.
inline json SeedPod(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name},
            {"namespace", "ml"},
            {"uid", "uid-" + name},
            {"labels", {{"app", "x"}}},
            {"annotations",
             {{"nvidia.com/use-gputype", "A100"},
              {"nvidia.com/nouse-gpuuuid", "GPU-x"},
              {"hami.io/gpu-scheduler-policy", "spread"},
              {"hami.io/node-scheduler-policy", "binpack"}}}}},
          {"spec",
           {{"schedulerName", "fracgpu-scheduler"},
            {"nodeSelector", {{"pool", "gpu"}}},
            {"initContainers",
             {{{"name", "i"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}}},
            {"containers",
             {{{"name", "c"},
               {"resources",
                {{"limits",
                  {{"nvidia.com/gpu", "1"},
                   {"nvidia.com/gpumem", "1000000"},
                   {"nvidia.com/gpucores", "30"}}},
                 {"requests", {{"nvidia.com/gpu", 1}}}}}}}}}},
          {"status", {{"phase", "Pending"}}}};
}

/// The seeds: /filter with NodeNames and with a full NodeList, /prioritize, /bind and an
/// AdmissionReview CREATE of the same pod. `nodes` are the candidate node names.
inline std::vector<Seed> Seeds(const std::vector<std::string>& nodes) {
  json items = json::array();
  for (const auto& n : nodes) {
    items.push_back({{"metadata", {{"name", n}, {"labels", {{"pool", "gpu"}}}}},
                     {"status", {{"allocatable", {{"nvidia.com/gpu", "10"}}}}}});
  }
  return {
      {Endpoint::kFilter, {{"Pod", SeedPod("p")}, {"Nodes", nullptr}, {"NodeNames", nodes}}},
      {Endpoint::kFilter, {{"Pod", SeedPod("p")}, {"Nodes", {{"items", items}}}}},
      {Endpoint::kPrioritize, {{"Pod", SeedPod("p")}, {"NodeNames", nodes}}},
      {Endpoint::kBind,
       {{"PodName", "p"},
        {"PodNamespace", "ml"},
        {"PodUID", "uid-p"},
        {"Node", nodes.empty() ? "node-a" : nodes[0]}}},
      {Endpoint::kWebhook,
       {{"apiVersion", "admission.k8s.io/v1"},
        {"kind", "AdmissionReview"},
        {"request",
         {{"uid", "review-1"},
          {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
          {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
          {"namespace", "ml"},
          {"operation", "CREATE"},
          {"userInfo", {{"username", "alice"}, {"groups", {"system:authenticated"}}}},
          {"object", SeedPod("p")},
          {"oldObject", nullptr}}}}},
  };
}

/// Every path below the root of `doc`: each member of each object and each element of each
/// array, parents before children.
inline std::vector<json::json_pointer> Paths(const json& doc) {
  std::vector<json::json_pointer> out;
  std::vector<std::pair<json::json_pointer, const json*>> todo = {{json::json_pointer(), &doc}};
  while (!todo.empty()) {
    auto [at, v] = todo.back();
    todo.pop_back();
    if (v->is_object()) {
      for (auto it = v->begin(); it != v->end(); ++it) {
        out.push_back(at / it.key());
        todo.emplace_back(at / it.key(), &*it);
      }
    } else if (v->is_array()) {
      for (size_t i = 0; i < v->size(); ++i) {
        out.push_back(at / i);
        todo.emplace_back(at / i, &(*v)[i]);
      }
    }
  }
  return out;
}

/// The replacement values: null, numbers (integer, negative, huge float), strings (empty,
/// plain), arrays (empty, mixed), objects (empty, nested), a boolean.
inline const std::vector<json>& Replacements() {
  static const std::vector<json> kValues = {nullptr,        json(7),
                                            json(-1),       json(1e300),
                                            json(""),       json("x"),
                                            json::array(),  json::array({1, "a", nullptr}),
                                            json::object(), json({{"a", {{"b", 1}}}}),
                                            json(true)};
  return kValues;
}

/// `doc` with the value at `path` replaced by `value`.
inline json Swapped(json doc, const json::json_pointer& path, const json& value) {
  doc[path] = value;
  return doc;
}

}  // namespace fracgpu::scheduler::typeswap
