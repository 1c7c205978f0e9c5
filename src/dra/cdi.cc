#include "dra/cdi.h"

#include <cctype>
#include <filesystem>

#include "base/file.h"
#include "dra/api.h"

namespace fracgpu::dra {

namespace fs = std::filesystem;

std::string ClaimSlot(const std::string& claim_uid) { return "claim_" + claim_uid; }
std::string CdiDeviceName(const std::string& claim_uid, const std::string& device) {
  return "claim-" + claim_uid + "-" + device;
}
std::string CdiDeviceId(const std::string& claim_uid, const std::string& device) {
  return std::string(kCdiKind) + "=" + CdiDeviceName(claim_uid, device);
}
std::string CdiSpecPath(const CdiOptions& options, const std::string& claim_uid) {
  return (fs::path(options.cdi_dir) / ("fracgpu.io-gpu-claim-" + claim_uid + ".json")).string();
}

namespace {

json CdiMounts(const std::vector<node::MountSpec>& mounts) {
  json out = json::array();
  for (const auto& m : mounts) {
    out.push_back({{"hostPath", m.host_path},
                   {"containerPath", m.container_path},
                   {"type", "bind"},
                   {"options", m.read_only ? json{"ro", "nosuid", "nodev", "bind"}
                                           : json{"rw", "nosuid", "nodev", "bind"}}});
  }
  return out;
}

core::ContainerGrants GrantsOf(const std::vector<AllocatedShare>& shares) {
  core::ContainerGrants grants;
  for (const auto& s : shares) grants.push_back({s.uuid, "NVIDIA", s.mem_mib, s.cores});
  return grants;
}

node::ContainerEditsOptions EditsOptions(const std::string& claim_uid, const CdiOptions& options) {
  node::ContainerEditsOptions eo;
  eo.hook_path = options.hook_path;
  eo.slot = ClaimSlot(claim_uid);
  return eo;
}

}  // namespace

json BuildCdiSpec(const std::string& claim_uid, const std::vector<AllocatedShare>& shares,
                  const node::ComposableEdits& edits) {
  json env = json::array();
  for (const auto& [k, v] : edits.common_env) env.push_back(k + "=" + v);
  json devices = json::array();
  for (size_t i = 0; i < shares.size() && i < edits.gpus.size(); ++i) {
    devices.push_back({{"name", CdiDeviceName(claim_uid, shares[i].device)},
                       {"containerEdits", {{"mounts", CdiMounts(edits.gpus[i].mounts)}}}});
  }
  json spec = {{"kind", kCdiKind},
               {"containerEdits", {{"env", env}, {"mounts", CdiMounts(edits.common_mounts)}}},
               {"devices", devices}};
  spec["cdiVersion"] = MinimumCdiVersion(spec);
  return spec;
}

node::ContainerEdits BuildClaimEdits(const std::string& claim_uid,
                                     const std::vector<AllocatedShare>& shares,
                                     const CdiOptions& options) {
  return node::BuildContainerEdits(GrantsOf(shares), options.config,
                                   EditsOptions(claim_uid, options));
}

node::ComposableEdits BuildComposableClaimEdits(const std::string& claim_uid,
                                                const std::vector<AllocatedShare>& shares,
                                                const CdiOptions& options) {
  return node::SplitComposableEdits(BuildClaimEdits(claim_uid, shares, options), GrantsOf(shares),
                                    EditsOptions(claim_uid, options));
}

std::string MinimumCdiVersion(const json& spec) {
  // Every set of container edits: the spec's own and each device's.
  std::vector<const json*> edits;
  auto field = [](const json& o, const char* k) -> const json* {
    return o.is_object() && o.contains(k) ? &o[k] : nullptr;
  };
  auto non_empty = [](const json* v) {
    return v != nullptr && !v->is_null() && !(v->is_structured() && v->empty());
  };
  if (const json* e = field(spec, "containerEdits")) edits.push_back(e);
  const json* devices = field(spec, "devices");
  bool digit_name = false, device_annotations = false;
  if (devices != nullptr && devices->is_array()) {
    for (const json& d : *devices) {
      if (const json* e = field(d, "containerEdits")) edits.push_back(e);
      const json* name = field(d, "name");
      if (name != nullptr && name->is_string() && !name->get<std::string>().empty() &&
          !std::isalpha(static_cast<unsigned char>(name->get<std::string>()[0])))
        digit_name = true;
      if (non_empty(field(d, "annotations"))) device_annotations = true;
    }
  }
  bool rdt_or_gids = false, node_host_path = false, mount_type = false;
  for (const json* e : edits) {
    if (non_empty(field(*e, "intelRdt")) || non_empty(field(*e, "additionalGids")))
      rdt_or_gids = true;
    if (const json* nodes = field(*e, "deviceNodes"); nodes != nullptr && nodes->is_array()) {
      for (const json& n : *nodes) node_host_path |= non_empty(field(n, "hostPath"));
    }
    if (const json* mounts = field(*e, "mounts"); mounts != nullptr && mounts->is_array()) {
      for (const json& m : *mounts) mount_type |= non_empty(field(m, "type"));
    }
  }
  std::string kind = spec.value("kind", "");
  size_t slash = kind.find('/');
  bool dotted_class = slash != std::string::npos && kind.find('.', slash) != std::string::npos;
  if (rdt_or_gids) return "0.7.0";
  if (non_empty(field(spec, "annotations")) || device_annotations || dotted_class) return "0.6.0";
  if (digit_name || node_host_path) return "0.5.0";
  if (mount_type) return "0.4.0";
  return "0.3.0";
}

Status WriteClaimSpecFiles(const std::string& claim_uid, const std::vector<AllocatedShare>& shares,
                           const CdiOptions& options) {
  const std::string who = "claim " + claim_uid;
  FRACGPU_RETURN_IF_ERROR(
      node::WriteComposableFiles(BuildComposableClaimEdits(claim_uid, shares, options))
          .WithPrefix(who));
  return base::WriteFileAtomically(CdiSpecPath(options, claim_uid),
                                   CdiSpecText(claim_uid, shares, options), 0644)
      .WithPrefix(who + ": CDI spec directory " + options.cdi_dir);
}

std::string CdiSpecText(const std::string& claim_uid, const std::vector<AllocatedShare>& shares,
                        const CdiOptions& options) {
  return BuildCdiSpec(claim_uid, shares, BuildComposableClaimEdits(claim_uid, shares, options))
             .dump(2) +
         "\n";
}

Status WriteClaimFiles(const std::string& claim_uid, const std::vector<AllocatedShare>& shares,
                       const CdiOptions& options) {
  const std::string who = "claim " + claim_uid;
  node::ContainerEdits edits = BuildClaimEdits(claim_uid, shares, options);
  FRACGPU_RETURN_IF_ERROR(node::WriteContainerFiles(edits, options.hook_path).WithPrefix(who));
  Status st = WriteClaimSpecFiles(claim_uid, shares, options);
  if (!st.ok()) {
    (void)node::RemoveContainerFiles(options.hook_path, ClaimSlot(claim_uid));
    std::error_code ec;
    fs::remove(CdiSpecPath(options, claim_uid), ec);
    return st;
  }
  return Status::Ok();
}

Status RemoveClaimFiles(const std::string& claim_uid, const CdiOptions& options) {
  const std::string spec = CdiSpecPath(options, claim_uid);
  std::error_code ec;
  fs::remove(spec, ec);
  if (ec) return Internal("claim " + claim_uid + ": cannot remove " + spec + ": " + ec.message());
  return node::RemoveContainerFiles(options.hook_path, ClaimSlot(claim_uid))
      .WithPrefix("claim " + claim_uid);
}

}  // namespace fracgpu::dra
