// Borrowers of a GPU and their eviction (borrowers.h; docs/reclaim.md "Evicting borrowers").
#include "monitor/borrowers.h"

#include <spdlog/spdlog.h>
#include <strings.h>

#include <algorithm>

#include "core/annotations.h"
#include "core/codec.h"
#include "core/request.h"

namespace fracgpu::monitor {
namespace {

using nlohmann::json;

std::string StrAt(const json& obj, const char* a, const char* b) {
  auto ia = obj.find(a);
  if (ia == obj.end() || !ia->is_object()) return "";
  auto ib = ia->find(b);
  return ib != ia->end() && ib->is_string() ? ib->get<std::string>() : "";
}

// A Kubernetes object name or namespace as it may appear in a request path (RFC 1123 subdomain
// characters); anything else is refused rather than spliced into the path.
bool PathSafe(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
  });
}

}  // namespace

std::vector<Borrower> BorrowersOf(const json& pods, const std::string& gpu_uuid) {
  std::vector<Borrower> out;
  const json* items = &pods;
  if (pods.is_object()) {
    auto it = pods.find("items");
    if (it == pods.end()) return out;
    items = &*it;
  }
  if (!items->is_array()) return out;
  for (const json& pod : *items) {
    if (!pod.is_object()) continue;
    auto md = pod.find("metadata");
    if (md == pod.end() || !md->is_object()) continue;
    if (md->contains("deletionTimestamp") && !(*md)["deletionTimestamp"].is_null()) continue;
    const std::string phase = StrAt(pod, "status", "phase");
    if (phase == "Succeeded" || phase == "Failed") continue;
    auto ann = md->find("annotations");
    if (ann == md->end() || !ann->is_object()) continue;
    auto flag = ann->find(core::kAnnotationBorrower);
    if (flag == ann->end() || !flag->is_string() || flag->get<std::string>() != "true") continue;
    auto alloc = ann->find(core::kAnnotationVgpuDevicesAllocated);
    if (alloc == ann->end() || !alloc->is_string()) continue;
    auto grants = core::DecodePodGrants(alloc->get<std::string>());
    if (!grants.ok()) continue;
    int64_t mib = 0;
    bool on_gpu = false;
    for (const auto& container : *grants) {
      for (const auto& g : container) {
        if (strcasecmp(g.uuid.c_str(), gpu_uuid.c_str()) != 0) continue;
        on_gpu = true;
        mib += g.mem_mib;
      }
    }
    if (!on_gpu) continue;
    out.push_back({md->value("namespace", ""), md->value("name", ""), md->value("uid", ""),
                   md->value("creationTimestamp", ""), mib});
  }
  return out;
}

std::vector<Borrower> ChooseEvictions(std::vector<Borrower> borrowers, int64_t need_mib) {
  if (need_mib <= 0) return {};
  std::stable_sort(borrowers.begin(), borrowers.end(),
                   [](const Borrower& a, const Borrower& b) { return a.created > b.created; });
  std::vector<Borrower> out;
  int64_t freed = 0;
  for (auto& b : borrowers) {
    if (freed >= need_mib) break;
    freed += b.mib;
    out.push_back(std::move(b));
  }
  return out;
}

Status EvictBorrower(k8s::Client& client, const Borrower& b, const std::string& owner,
                     const std::string& gpu_uuid, const std::string& node) {
  if (!PathSafe(b.namespace_name) || !PathSafe(b.name)) {
    return InvalidArgument("borrower \"" + b.namespace_name + "/" + b.name +
                           "\" is not a valid namespace/name: not evicted");
  }
  const std::string pod_path = "/api/v1/namespaces/" + b.namespace_name + "/pods/" + b.name;
  json eviction = {{"apiVersion", "policy/v1"},
                   {"kind", "Eviction"},
                   {"metadata", {{"name", b.name}, {"namespace", b.namespace_name}}},
                   {"deleteOptions", {{"gracePeriodSeconds", kBorrowerGraceSeconds}}}};
  if (!b.uid.empty()) eviction["deleteOptions"]["preconditions"] = {{"uid", b.uid}};
  auto r = client.Create(pod_path + "/eviction", eviction);
  if (!r.ok()) {
    // 429: a PodDisruptionBudget forbids the eviction (the client retried already). A
    // borrower is preemptible by contract: delete it, if it is still the same pod.
    if (r.status().code() != StatusCode::kUnavailable ||
        r.status().message().find("HTTP 429") == std::string::npos) {
      return r.status();
    }
    auto live = client.Get(pod_path);
    if (!live.ok()) return live.status();
    if (!b.uid.empty() && StrAt(*live, "metadata", "uid") != b.uid) {
      return Conflict("borrower " + b.namespace_name + "/" + b.name +
                      " was recreated (uid changed): not deleted");
    }
    FRACGPU_RETURN_IF_ERROR(
        client.Delete(pod_path + "?gracePeriodSeconds=" + std::to_string(kBorrowerGraceSeconds)));
    spdlog::warn("borrower {}/{}: eviction refused (HTTP 429, a PodDisruptionBudget): deleted",
                 b.namespace_name, b.name);
  }
  json involved = {
      {"kind", "Pod"},
      {"metadata", {{"name", b.name}, {"namespace", b.namespace_name}, {"uid", b.uid}}}};
  Status ev =
      client.CreateEvent(involved, "Warning", "GPUMemoryReclaimed",
                         "evicted: it borrowed " + std::to_string(b.mib) + " MiB of GPU " +
                             gpu_uuid + (node.empty() ? std::string() : " on node " + node) +
                             ", lent by a parked pod, which woke and needs its memory back",
                         "fracgpu-monitor");
  if (!ev.ok())
    spdlog::warn("event on evicted borrower {}/{} (for {}): {}", b.namespace_name, b.name, owner,
                 ev.message());
  return Status::Ok();
}

Result<int> ReclaimFromBorrowers(k8s::Client& client, const std::string& node,
                                 const std::string& gpu_uuid, uint64_t need_bytes,
                                 const std::string& owner) {
  k8s::ListOptions options;
  options.field_selector = "spec.nodeName=" + node;
  auto pods = client.List("/api/v1/pods", options);
  if (!pods.ok()) return pods.status().WithPrefix("listing the borrowers of " + gpu_uuid);
  const int64_t need_mib = static_cast<int64_t>(
      std::min<uint64_t>((need_bytes + (1 << 20) - 1) >> 20, uint64_t{1} << 40));
  int evicted = 0;
  Status first;
  for (const Borrower& b : ChooseEvictions(BorrowersOf(*pods, gpu_uuid), need_mib)) {
    Status st = EvictBorrower(client, b, owner, gpu_uuid, node);
    if (st.ok()) {
      ++evicted;
      spdlog::warn("evicted borrower {}/{} ({} MiB of {}) for the wake of {}", b.namespace_name,
                   b.name, b.mib, gpu_uuid, owner);
    } else if (st.code() != StatusCode::kNotFound) {  // gone already: nothing to do
      spdlog::error("evicting borrower {}/{} of {}: {}", b.namespace_name, b.name, gpu_uuid,
                    st.message());
      if (first.ok()) first = st;
    }
  }
  if (evicted == 0 && !first.ok()) return first;
  return evicted;
}

}  // namespace fracgpu::monitor
