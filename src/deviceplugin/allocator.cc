#include "deviceplugin/allocator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>

#include "api/limits.h"
#include "base/strings.h"
#include "core/codec.h"
#include "core/node_lock_codec.h"
#include "core/request.h"
#include "core/request_json.h"
#include "deviceplugin/annotations.h"
#include "k8s/objects.h"
#include "node/inventory.h"

namespace fracgpu::deviceplugin {

namespace fs = std::filesystem;

namespace {

bool Blank(const core::ContainerGrants& g) { return g.empty(); }

// Literal env[].value of a container spec (valueFrom / envFrom are not looked at).
std::optional<std::string> LiteralEnv(const json& container, const std::string& key) {
  auto env = container.find("env");
  if (env == container.end() || !env->is_array()) return std::nullopt;
  for (const auto& e : *env) {
    if (e.is_object() && e.value("name", "") == key && e.contains("value") &&
        e["value"].is_string()) {
      return e["value"].get<std::string>();
    }
  }
  return std::nullopt;
}

// The CDI annotation key of one container's response (CDI pkg/cdi/annotations.go AnnotationKey:
// "cdi.k8s.io/" + plugin + "_" + device ID, the name part at most 63 characters: 22 + 36 + 1 + a
// few digits here).
std::string CdiAnnotationKey(const std::string& pod_uid, size_t container_index) {
  return "cdi.k8s.io/fracgpu-device-plugin_" + pod_uid + "-" + std::to_string(container_index);
}

bool CdiNamePart(const std::string& s) {
  auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  auto alnum = [&](char c) { return letter(c) || (c >= '0' && c <= '9'); };
  if (s.empty() || !letter(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(),
                     [&](char c) { return alnum(c) || c == '_' || c == '-' || c == '.'; });
}

}  // namespace

Result<DeviceListStrategy> ParseDeviceListStrategy(const std::string& strategies,
                                                   const std::string& cdi_kind,
                                                   const std::string& cdi_device_name) {
  DeviceListStrategy out;
  out.envvar = false;
  std::set<std::string> seen;
  size_t start = 0;
  while (start <= strategies.size()) {
    size_t comma = strategies.find(',', start);
    if (comma == std::string::npos) comma = strategies.size();
    std::string one = strategies.substr(start, comma - start);
    start = comma + 1;
    if (!seen.insert(one).second) {
      return InvalidArgument("--device-list-strategy \"" + strategies + "\" names \"" + one +
                             "\" twice");
    }
    if (one == "envvar") {
      out.envvar = true;
    } else if (one == "cdi-annotations") {
      out.cdi_annotations = true;
    } else if (one == "cdi-cri") {
      out.cdi_cri = true;
    } else {
      return InvalidArgument("--device-list-strategy \"" + strategies.substr(0, 200) + "\": \"" +
                             one.substr(0, 100) +
                             "\" is not one of envvar, cdi-annotations, cdi-cri");
    }
  }
  size_t slash = cdi_kind.find('/');
  if (cdi_kind.size() > 253 || slash == std::string::npos ||
      !CdiNamePart(cdi_kind.substr(0, slash)) || !CdiNamePart(cdi_kind.substr(slash + 1))) {
    return InvalidArgument("--cdi-kind \"" + cdi_kind.substr(0, 300) +
                           "\" is not a CDI kind \"<vendor>/<class>\" (each starting with a "
                           "letter, ending with a letter or digit, of [A-Za-z0-9_.-])");
  }
  if (cdi_device_name != "uuid" && cdi_device_name != "index") {
    return InvalidArgument("--cdi-device-name-strategy \"" + cdi_device_name.substr(0, 100) +
                           "\" is not uuid or index");
  }
  out.cdi_kind = cdi_kind;
  out.cdi_device_name = cdi_device_name;
  return out;
}

Result<std::pair<std::string, std::string>> LockedPod(const std::string& value) {
  Result<core::NodeLock> lock = core::DecodeNodeLock(value);
  if (!lock.ok()) return lock.status().WithPrefix(kNodeLockKey);
  if (!lock->names_pod()) {
    return InvalidArgument(std::string(kNodeLockKey) +
                           " names no pod: " + core::request_json::Quote(value));
  }
  return std::make_pair(std::move(lock->pod_namespace), std::move(lock->pod_name));
}

struct Allocator::FoundPod {
  json pod;
  std::string ns, name, uid;
  bool via_lock = false;
  // The node's lock named this pod when FindPod read the node: only then is there a lock of
  // its to release. The scheduler takes the lock before the Binding, so an Allocate, which
  // follows the Binding, sees it; under `--node-lock=bind-phase` there is none, and Allocate
  // reads the node once, not twice (docs/device-plugin.md "Allocate", step 6).
  bool lock_names_pod = false;
  core::PodGrants allocated;
  core::PodGrants to_allocate;
  core::PodRequest request;
  std::vector<json> containers;  // init containers first, then app containers
  std::string Key() const { return ns + "/" + name; }
};

Allocator::Allocator(AllocatorOptions options, ClusterApi* api, base::Clock* clock,
                     std::function<std::vector<core::DeviceInfo>()> devices)
    : options_(std::move(options)), api_(api), clock_(clock), devices_(std::move(devices)) {}

std::string MissingLibraryWarning(const std::string& hook_path) {
  const fs::path lib = api::HostLibraryFile(hook_path);
  std::error_code ec;
  if (fs::is_regular_file(lib, ec)) return "";
  return lib.string() +
         " is missing: every GPU container will be refused (fracgpu never runs a "
         "container without isolation). Install it there (the DaemonSet's init container copies it "
         "from the image) or point --hook-path (env HOOK_PATH) at the folder holding "
         "vgpu/libvgpu.so";
}

Status Allocator::PrepareHostFiles() { return node::PrepareHostFiles(options_.hook_path); }

Result<Allocator::FoundPod> Allocator::FindPod() {
  const std::string& node = options_.node_name;
  auto node_obj = api_->GetNode(node);
  if (!node_obj.ok()) return node_obj.status().WithPrefix("reading node " + node);
  FoundPod found;
  std::optional<std::pair<std::string, std::string>> lock_names;
  if (auto lock = k8s::Annotation(*node_obj, kNodeLockKey)) {
    auto named = LockedPod(*lock);
    if (named.ok()) {
      lock_names = *named;
      auto pod = api_->GetPod(named->first, named->second);
      if (pod.ok() && k8s::Annotation(*pod, kBindPhaseKey).value_or("") == kBindPhaseAllocating) {
        found.pod = std::move(pod).value();
        found.via_lock = true;
      } else if (pod.ok()) {
        // A stale lock (its pod already served or failed): never touch that pod again.
        spdlog::warn(
            "node lock of {} names pod {}/{} whose bind-phase is \"{}\"; looking for a pending pod",
            node, named->first, named->second, k8s::Annotation(*pod, kBindPhaseKey).value_or(""));
      } else if (pod.status().code() != StatusCode::kNotFound) {
        return pod.status().WithPrefix("reading pod " + named->first + "/" + named->second +
                                       " named by the node lock");
      } else {
        spdlog::warn(
            "node lock of {} names pod {}/{}, which does not exist; looking for a pending pod",
            node, named->first, named->second);
      }
    } else {
      spdlog::warn("node {}: {}", node, named.status().message());
    }
  }
  if (!found.via_lock) {
    auto pods = api_->ListPodsOnNode(node);
    if (!pods.ok()) return pods.status().WithPrefix("listing pods on node " + node);
    std::vector<const json*> candidates;
    for (const auto& p : *pods) {
      if (k8s::PodPhase(p) != "Pending" || k8s::IsTerminating(p)) continue;
      if (k8s::Annotation(p, kBindPhaseKey).value_or("") != kBindPhaseAllocating) continue;
      if (k8s::Annotation(p, kVgpuNodeKey).value_or("") != node) continue;
      if (!k8s::Annotation(p, kBindTimeKey)) continue;
      candidates.push_back(&p);
    }
    if (candidates.empty()) return NotFound("no pod being bound on node " + node);
    // The ones this plugin would serve (Verify: placed by our scheduler, signed; an unsigned
    // pod is served only under a lock naming it).
    std::vector<const json*> servable;
    for (const json* p : candidates) {
      FoundPod f;
      f.pod = *p;
      f.ns = k8s::Namespace(*p);
      f.name = k8s::Name(*p);
      f.uid = k8s::Uid(*p);
      if (Verify(f).ok()) servable.push_back(p);
    }
    if (servable.empty()) {
      // None would be served: the first (oldest bind-time, then name) is taken, so that
      // Verify refuses it and marks it failed, as before (a forged or foreign pod is cleared
      // after one Allocate instead of standing in the way of every later one).
      const json* first = candidates.front();
      for (const json* p : candidates) {
        if (std::make_pair(k8s::Annotation(*p, kBindTimeKey).value_or(""), k8s::Key(*p)) <
            std::make_pair(k8s::Annotation(*first, kBindTimeKey).value_or(""), k8s::Key(*first)))
          first = p;
      }
      servable.push_back(first);
    }
    // kubelet's AllocateRequest does not say which pod it is for (device IDs only): with two
    // servable pods being allocated and no lock naming one, any choice (HAMi takes the first
    // listed) may serve one pod's container the other's allocation, which the real cluster
    // showed (tests/realcluster/test_node_lock.py with the scheduler's hold removed). Refused,
    // so kubelet fails this admission and no container runs with another pod's limits.
    if (servable.size() > 1) {
      std::string names;
      for (const json* p : servable) names += (names.empty() ? "" : ", ") + k8s::Key(*p);
      return Conflict(std::to_string(servable.size()) + " pods are being allocated on node " +
                      node + " (" + names +
                      ") and no node lock names one: cannot tell which pod this Allocate is for; "
                      "none served");
    }
    found.pod = *servable.front();
  }
  found.ns = k8s::Namespace(found.pod);
  found.name = k8s::Name(found.pod);
  found.uid = k8s::Uid(found.pod);
  found.lock_names_pod =
      lock_names && lock_names->first == found.ns && lock_names->second == found.name;
  return found;
}

Status Allocator::Verify(const FoundPod& f) {
  const std::string& node = options_.node_name;
  const json& pod = f.pod;
  std::string who = "pod " + f.Key();
  const std::vector<std::string>& names = options_.scheduler_names;
  if (std::find(names.begin(), names.end(), k8s::PodSchedulerName(pod)) == names.end()) {
    std::string served;
    for (const std::string& n : names) served += (served.empty() ? "" : " or ") + n;
    return PermissionDenied(who + " was not placed by " + served + " (spec.schedulerName \"" +
                            k8s::PodSchedulerName(pod) + "\")");
  }
  if (k8s::Annotation(pod, kVgpuNodeKey).value_or("") != node) {
    return PermissionDenied(who + ": " + kVgpuNodeKey + " is \"" +
                            k8s::Annotation(pod, kVgpuNodeKey).value_or("") + "\", not this node " +
                            node);
  }
  if (!k8s::PodNodeName(pod).empty() && k8s::PodNodeName(pod) != node) {
    return PermissionDenied(who + " is bound to node " + k8s::PodNodeName(pod) + ", not " + node);
  }
  std::string phase = k8s::Annotation(pod, kBindPhaseKey).value_or("");
  if (phase != kBindPhaseAllocating) {
    return InvalidArgument(who + ": " + kBindPhaseKey + " is \"" + phase +
                           "\", not \"allocating\"");
  }
  auto allocated = k8s::Annotation(pod, kAllocatedKey);
  if (!allocated) return InvalidArgument(who + " has no " + kAllocatedKey + " annotation");
  auto signature = k8s::Annotation(pod, kSignatureKey);
  if (signature || !options_.allow_unsigned) {
    if (!signature)
      return PermissionDenied(who + " has no " + kSignatureKey +
                              ": its allocation was not decided by our scheduler");
    if (!options_.verify_signature) return Internal("no signature key configured");
    Status st = options_.verify_signature(f.uid, node, *allocated, *signature);
    if (!st.ok())
      return PermissionDenied(who + ": allocation signature does not verify (" + st.message() +
                              ")");
  } else if (!f.via_lock) {
    return PermissionDenied(who + " is unsigned and not named by the node lock of " + node);
  }
  return Status::Ok();
}

Result<json> Allocator::WriteWithRetry(const std::function<Result<json>()>& write,
                                       const std::string& what) {
  // Doubling from retry_delay, no jitter, no cap (write_attempts bounds it).
  base::Backoff backoff({options_.retry_delay, 2.0, 0.0, std::chrono::milliseconds::max()},
                        /*seed=*/0);
  for (int attempt = 1;; ++attempt) {
    auto r = write();
    if (r.ok() || r.status().code() != StatusCode::kUnavailable ||
        attempt >= options_.write_attempts) {
      if (!r.ok()) return r.status().WithPrefix(what);
      return r;
    }
    spdlog::warn("{}: {} (attempt {}/{}, retrying)", what, r.status().ToString(), attempt,
                 options_.write_attempts);
    clock_->Sleep(backoff.Next(), nullptr);
  }
}

Result<ContainerAllocation> Allocator::Serve(const FoundPod& f, size_t index,
                                             const std::vector<std::string>& device_ids) {
  const core::ContainerGrants& grants = f.allocated[index];
  const json& spec = f.containers[index];
  std::string container = spec.value("name", "");
  std::string who = "pod " + f.Key() + " container \"" + container + "\"";
  if (grants.size() != device_ids.size()) {
    return InvalidArgument(who + ": device number not matched: kubelet allocates " +
                           std::to_string(device_ids.size()) +
                           " device(s), the scheduler granted " + std::to_string(grants.size()) +
                           " GPU(s)");
  }
  auto devices = devices_();
  std::vector<std::string> uuids;
  for (const auto& g : grants) {
    auto it = std::find_if(devices.begin(), devices.end(),
                           [&](const core::DeviceInfo& d) { return d.uuid == g.uuid; });
    if (it == devices.end())
      return InvalidArgument(who + ": granted GPU " + g.uuid + " is not a GPU of node " +
                             options_.node_name);
    if (!it->health) return Unavailable(who + ": granted GPU " + g.uuid + " is unhealthy");
    if (g.mem_mib <= 0 || g.cores_percent < 0 || g.cores_percent > 100) {
      return InvalidArgument(who + ": grant on " + g.uuid + " has memory " +
                             std::to_string(g.mem_mib) + " MiB, cores " +
                             std::to_string(g.cores_percent) + "%");
    }
    if (std::find(uuids.begin(), uuids.end(), g.uuid) != uuids.end()) {
      return InvalidArgument(who + ": GPU " + g.uuid + " granted twice");
    }
    uuids.push_back(g.uuid);
  }
  for (const auto& id : device_ids) {
    auto uuid = node::ReplicaUuid(id);
    if (!uuid.ok() || std::find(uuids.begin(), uuids.end(), *uuid) == uuids.end()) {
      spdlog::info(
          "pod {} container {}: kubelet chose device {} outside the granted GPUs {}; the granted "
          "GPUs are used",
          f.Key(), container, id, base::Join(uuids, ","));
    }
  }
  const core::ContainerRequest& req = f.request.containers[index];
  node::ContainerEditsOptions eo;
  eo.hook_path = options_.hook_path;
  eo.slot = api::PodContainerSlot(f.uid, container);
  eo.priority = req.priority;
  eo.container_core_policy = LiteralEnv(spec, api::kEnvCorePolicy).value_or("");
  eo.preload = !req.disable_control.value_or(false);
  node::ContainerEdits edits = node::BuildContainerEdits(grants, options_.config, eo);
  // libvgpu.so present, a fresh region directory and the limits file (which keeps the GPUs in
  // NVIDIA_VISIBLE_DEVICES even when the environment below says "void").
  FRACGPU_RETURN_IF_ERROR(node::WriteContainerFiles(edits, options_.hook_path).WithPrefix(who));

  ContainerAllocation a;
  a.pod = f.Key();
  a.container = container;
  a.uuids = uuids;
  a.envs = std::move(edits.env);
  a.mounts = std::move(edits.mounts);
  if (options_.device_list.Cdi()) {
    for (const auto& g : grants) {
      auto it = std::find_if(devices.begin(), devices.end(),
                             [&](const core::DeviceInfo& d) { return d.uuid == g.uuid; });
      a.cdi_devices.push_back(
          options_.device_list.cdi_kind + "=" +
          (options_.device_list.cdi_device_name == "index" ? std::to_string(it->index) : g.uuid));
    }
    if (options_.device_list.cdi_annotations) {
      a.annotations[CdiAnnotationKey(f.uid, index)] = base::Join(a.cdi_devices, ",");
    }
    if (!options_.device_list.cdi_cri) a.cdi_devices.clear();
  }
  // Without the envvar strategy the GPUs travel by CDI only; the variable still carries the
  // GPUs in the limits file (libvgpu.so reads them there), and in the environment it becomes
  // "void" (the NVIDIA Container Toolkit: no device injection by variable), so that an image's
  // own NVIDIA_VISIBLE_DEVICES=all cannot make the NVIDIA runtime add every GPU of the node.
  if (!options_.device_list.envvar) a.envs[api::kEnvVisibleDevices] = "void";
  return a;
}

Status Allocator::Commit(const FoundPod& f, const std::vector<size_t>& served) {
  std::string encoded_allocated = k8s::Annotation(f.pod, kAllocatedKey).value_or("");
  bool all_served = false;
  auto make_patch = [&](const json& current) -> Result<json> {
    if (k8s::Uid(current) != f.uid)
      return NotFound("pod " + f.Key() + " was deleted and recreated during Allocate");
    if (k8s::Annotation(current, kAllocatedKey).value_or("") != encoded_allocated) {
      return PermissionDenied("pod " + f.Key() + ": " + kAllocatedKey + " changed during Allocate");
    }
    auto to_allocate = core::DecodePodGrants(k8s::Annotation(current, kToAllocateKey).value_or(""));
    if (!to_allocate.ok()) return to_allocate.status().WithPrefix(kToAllocateKey);
    if (to_allocate->size() != f.allocated.size())
      return InvalidArgument(std::string(kToAllocateKey) + " changed shape");
    for (size_t i : served) {
      // Blank already (a retried write that had reached the server): nothing to do.
      if (!Blank((*to_allocate)[i]) && (*to_allocate)[i] != f.allocated[i]) {
        return InvalidArgument(std::string(kToAllocateKey) + " entry " + std::to_string(i) +
                               " changed during Allocate");
      }
      (*to_allocate)[i].clear();
    }
    all_served = std::all_of(to_allocate->begin(), to_allocate->end(), Blank);
    json annotations = {{kToAllocateKey, core::EncodePodGrants(*to_allocate)}};
    if (all_served) annotations[kBindPhaseKey] = kBindPhaseSuccess;
    return json{{"metadata", {{"annotations", annotations}}}};
  };
  auto patched = WriteWithRetry([&] { return api_->PatchPod(f.ns, f.name, make_patch); },
                                "recording the allocation on pod " + f.Key());
  if (!patched.ok()) return patched.status();
  if (all_served) {
    spdlog::info("pod {}: every container served; bind-phase success", f.Key());
    if (f.lock_names_pod) ReleaseLock(f.ns, f.name);
  }
  return Status::Ok();
}

void Allocator::ReleaseLock(const std::string& ns, const std::string& name) {
  auto make_patch = [&](const json& node) -> Result<json> {
    auto lock = k8s::Annotation(node, kNodeLockKey);
    if (!lock) return json();
    auto named = LockedPod(*lock);
    if (!named.ok() || named->first != ns || named->second != name)
      return json();  // not ours to release
    return json{{"metadata", {{"annotations", {{kNodeLockKey, nullptr}}}}}};
  };
  auto r = WriteWithRetry([&] { return api_->PatchNode(options_.node_name, make_patch); },
                          "releasing the node lock of " + options_.node_name);
  if (!r.ok())
    spdlog::warn("{} (the lock expires on its own after 5 minutes)", r.status().ToString());
}

void Allocator::MarkFailed(const FoundPod& f, const std::string& reason) {
  spdlog::error("pod {}: allocation failed: {}", f.Key(), reason);
  auto make_patch = [&](const json& current) -> Result<json> {
    // Only a pod still being allocated is marked: a finished pod keeps its outcome.
    if (k8s::Uid(current) != f.uid ||
        k8s::Annotation(current, kBindPhaseKey).value_or("") != kBindPhaseAllocating) {
      return json();
    }
    return json{{"metadata", {{"annotations", {{kBindPhaseKey, kBindPhaseFailed}}}}}};
  };
  auto r = WriteWithRetry([&] { return api_->PatchPod(f.ns, f.name, make_patch); },
                          "setting bind-phase failed on pod " + f.Key());
  if (!r.ok()) spdlog::warn("{}", r.status().ToString());
  if (f.lock_names_pod) ReleaseLock(f.ns, f.name);
}

Result<std::vector<ContainerAllocation>> Allocator::Allocate(
    const std::vector<std::vector<std::string>>& requests) {
  std::lock_guard<std::mutex> lock(mu_);
  auto found_or = FindPod();
  if (!found_or.ok()) {
    spdlog::error("Allocate on node {} ({} container(s)): {}", options_.node_name, requests.size(),
                  found_or.status().ToString());
    return found_or.status();
  }
  FoundPod& f = found_or.value();
  auto fail = [&](Status st) -> Status {
    MarkFailed(f, st.message());
    return st;
  };
  {
    Status st = Verify(f);
    if (!st.ok()) return fail(st);
  }
  {
    auto allocated = core::DecodePodGrants(k8s::Annotation(f.pod, kAllocatedKey).value_or(""));
    if (!allocated.ok())
      return fail(allocated.status().WithPrefix("pod " + f.Key() + ": " + kAllocatedKey));
    f.allocated = std::move(allocated).value();
    auto to_allocate = core::DecodePodGrants(k8s::Annotation(f.pod, kToAllocateKey).value_or(""));
    if (!to_allocate.ok())
      return fail(to_allocate.status().WithPrefix("pod " + f.Key() + ": " + kToAllocateKey));
    f.to_allocate = std::move(to_allocate).value();
    auto request = core::ParsePodRequest(f.pod, options_.config.resources);
    if (!request.ok()) return fail(request.status().WithPrefix("pod " + f.Key()));
    f.request = std::move(request).value();
  }
  const json& spec = f.pod.contains("spec") ? f.pod["spec"] : json::object();
  for (const char* list : {"initContainers", "containers"}) {
    if (spec.contains(list) && spec[list].is_array()) {
      for (const auto& c : spec[list]) f.containers.push_back(c);
    }
  }
  if (f.allocated.size() != f.containers.size() || f.to_allocate.size() != f.containers.size() ||
      f.request.containers.size() != f.containers.size()) {
    return fail(InvalidArgument("pod " + f.Key() + " has " + std::to_string(f.containers.size()) +
                                " containers but " + kAllocatedKey + " has " +
                                std::to_string(f.allocated.size()) + " entries and " +
                                kToAllocateKey + " " + std::to_string(f.to_allocate.size())));
  }
  for (size_t i = 0; i < f.to_allocate.size(); ++i) {
    if (!Blank(f.to_allocate[i]) && f.to_allocate[i] != f.allocated[i]) {
      return fail(PermissionDenied("pod " + f.Key() + ": " + kToAllocateKey + " entry " +
                                   std::to_string(i) + " differs from the signed " +
                                   kAllocatedKey));
    }
  }
  std::vector<ContainerAllocation> out;
  std::vector<size_t> served;
  size_t next = 0;
  for (const auto& ids : requests) {
    while (next < f.to_allocate.size() && Blank(f.to_allocate[next])) ++next;
    if (next >= f.to_allocate.size()) {
      return fail(InvalidArgument(
          "pod " + f.Key() + ": kubelet asks for " + std::to_string(requests.size()) +
          " container(s) but no container entry is left in " + kToAllocateKey));
    }
    auto a = Serve(f, next, ids);
    if (!a.ok()) return fail(a.status());
    served.push_back(next);
    out.push_back(std::move(a).value());
    ++next;
  }
  Status st = Commit(f, served);
  if (!st.ok()) return fail(st);
  for (const auto& a : out) {
    spdlog::info("Allocate pod={} container={} gpus={} memory_limits={} sm_limit={}", a.pod,
                 a.container, base::Join(a.uuids, ","),
                 a.envs.at(std::string(api::kEnvMemoryLimit) + "_0"), a.envs.at(api::kEnvSmLimit));
  }
  return out;
}

std::vector<std::vector<std::string>> Allocator::PreferredAllocation(
    const std::vector<PreferredRequest>& requests) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::vector<std::string>> out;
  core::PodGrants pending;
  auto found = FindPod();
  if (found.ok() && Verify(*found).ok()) {
    auto to_allocate =
        core::DecodePodGrants(k8s::Annotation(found->pod, kToAllocateKey).value_or(""));
    if (to_allocate.ok()) {
      for (auto& g : *to_allocate) {
        if (!Blank(g)) pending.push_back(std::move(g));
      }
    }
  }
  for (size_t k = 0; k < requests.size(); ++k) {
    const PreferredRequest& r = requests[k];
    std::vector<std::string> chosen = r.must_include;
    auto take = [&](const std::string& id) {
      if (static_cast<int32_t>(chosen.size()) < r.size &&
          std::find(chosen.begin(), chosen.end(), id) == chosen.end()) {
        chosen.push_back(id);
      }
    };
    if (k < pending.size()) {
      for (const auto& g : pending[k]) {
        bool have = std::any_of(chosen.begin(), chosen.end(), [&](const std::string& id) {
          auto u = node::ReplicaUuid(id);
          return u.ok() && *u == g.uuid;
        });
        if (have) continue;
        for (const auto& id : r.available) {
          auto u = node::ReplicaUuid(id);
          if (u.ok() && *u == g.uuid) {
            take(id);
            break;
          }
        }
      }
    }
    for (const auto& id : r.available) take(id);
    out.push_back(std::move(chosen));
  }
  return out;
}

}  // namespace fracgpu::deviceplugin
