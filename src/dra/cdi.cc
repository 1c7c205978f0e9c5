#include "dra/cdi.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "api/limits.h"
#include "dra/api.h"

namespace fracgpu::dra {

namespace fs = std::filesystem;

namespace {

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + v[i];
  return out;
}

}  // namespace

std::string ClaimSlot(const std::string& claim_uid) { return "claim_" + claim_uid; }
std::string CdiDeviceId(const std::string& claim_uid) {
  return std::string(kCdiKind) + "=claim-" + claim_uid;
}
std::string CdiSpecPath(const CdiOptions& options, const std::string& claim_uid) {
  return (fs::path(options.cdi_dir) / ("fracgpu.io-gpu-claim-" + claim_uid + ".json")).string();
}

ClaimEdits BuildClaimEdits(const std::string& claim_uid, const std::vector<AllocatedShare>& shares,
                           const CdiOptions& options) {
  const std::string& hook = options.hook_path;
  const std::string slot = ClaimSlot(claim_uid);
  ClaimEdits e;
  std::vector<std::string> uuids;
  for (const auto& s : shares) uuids.push_back(s.uuid);
  e.env[api::kEnvVisibleDevices] = Join(uuids);
  for (size_t i = 0; i < shares.size(); ++i) {
    e.env[std::string(api::kEnvMemoryLimit) + "_" + std::to_string(i)] =
        std::to_string(shares[i].mem_mib) + "m";
    e.env[std::string(api::kEnvSmLimit) + "_" + std::to_string(i)] =
        std::to_string(shares[i].cores);
  }
  if (!shares.empty()) e.env[api::kEnvSmLimit] = std::to_string(shares.front().cores);
  e.env[api::kEnvSharedCache] = api::ContainerRegionFile(hook);
  e.env[api::kEnvTaskPriority] = "1";  // core::ContainerRequest's default (low)
  e.env[api::kEnvCorePolicy] = options.config.disable_core_limit ? "disable" : "default";
  if (options.config.memory_scaling > 1.0) e.env[api::kEnvOversubscribe] = "true";
  if (!options.config.libcuda_log_level.empty())
    e.env[api::kEnvLogLevel] = options.config.libcuda_log_level;
  const std::string lib = api::HostLibraryFile(hook);
  e.mounts.push_back({lib, lib, true});
  e.mounts.push_back({api::kPreloadPath, api::HostPreloadFile(hook), true});
  e.mounts.push_back({api::HostVgpuDir(hook), api::HostContainerDir(hook, slot), false});
  e.mounts.push_back({api::kLimitsFilePath, api::HostLimitsFile(hook, slot), true});
  e.mounts.push_back({api::kNodeDirPath, api::HostNodeDir(hook), true});  // read-only: shared
  return e;
}

json BuildCdiSpec(const std::string& claim_uid, const ClaimEdits& edits) {
  json env = json::array();
  for (const auto& [k, v] : edits.env) env.push_back(k + "=" + v);
  json mounts = json::array();
  for (const auto& m : edits.mounts) {
    mounts.push_back({{"hostPath", m.host_path},
                      {"containerPath", m.container_path},
                      {"type", "bind"},
                      {"options", m.read_only ? json{"ro", "nosuid", "nodev", "bind"}
                                              : json{"rw", "nosuid", "nodev", "bind"}}});
  }
  json spec = {
      {"kind", kCdiKind},
      {"devices", json::array({{{"name", "claim-" + claim_uid},
                                {"containerEdits", {{"env", env}, {"mounts", mounts}}}}})}};
  spec["cdiVersion"] = MinimumCdiVersion(spec);
  return spec;
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

Status WriteFileAtomically(const std::string& path, const std::string& content, unsigned mode) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Internal("cannot write " + tmp + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Internal("cannot write " + tmp + ": " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::fchmod(fd, mode) != 0 || ::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return Internal("cannot finish " + tmp + ": " + std::strerror(err));
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return Internal("cannot rename " + tmp + " to " + path + ": " + std::strerror(err));
  }
  return Status::Ok();
}

Status WriteClaimFiles(const std::string& claim_uid, const std::vector<AllocatedShare>& shares,
                       const CdiOptions& options) {
  const std::string slot = ClaimSlot(claim_uid);
  fs::path region = api::HostContainerDir(options.hook_path, slot);
  fs::path limits = api::HostLimitsFile(options.hook_path, slot);
  const std::string lib = api::HostLibraryFile(options.hook_path);
  std::error_code ec;
  if (!fs::is_regular_file(lib, ec)) {
    return Internal("claim " + claim_uid + ": " + lib +
                    " is missing; refusing to prepare a GPU without isolation");
  }
  ClaimEdits edits = BuildClaimEdits(claim_uid, shares, options);
  auto undo = [&] {
    std::error_code ignored;
    fs::remove_all(region, ignored);
    fs::remove(limits, ignored);
  };
  fs::remove_all(region, ec);
  fs::create_directories(region, ec);
  if (ec)
    return undo(), Internal("claim " + claim_uid + ": cannot create " + region.string() + ": " +
                            ec.message());
  fs::permissions(region, fs::perms::all, ec);
  if (ec)
    return undo(), Internal("claim " + claim_uid + ": cannot chmod " + region.string() + ": " +
                            ec.message());
  fs::create_directories(limits.parent_path(), ec);
  Status st =
      WriteFileAtomically(limits.string(), deviceplugin::LimitsFileContent(edits.env), 0444);
  if (!st.ok()) return undo(), st.WithPrefix("claim " + claim_uid);
  st = WriteFileAtomically(CdiSpecPath(options, claim_uid),
                           BuildCdiSpec(claim_uid, edits).dump(2) + "\n", 0644);
  if (!st.ok())
    return undo(), st.WithPrefix("claim " + claim_uid + ": CDI spec directory " + options.cdi_dir);
  return Status::Ok();
}

Status RemoveClaimFiles(const std::string& claim_uid, const CdiOptions& options) {
  const std::string slot = ClaimSlot(claim_uid);
  std::error_code ec;
  for (const fs::path& p : {fs::path(CdiSpecPath(options, claim_uid)),
                            fs::path(api::HostLimitsFile(options.hook_path, slot))}) {
    fs::remove(p, ec);
    if (ec)
      return Internal("claim " + claim_uid + ": cannot remove " + p.string() + ": " + ec.message());
  }
  const std::string region = api::HostContainerDir(options.hook_path, slot);
  fs::remove_all(region, ec);
  if (ec) return Internal("claim " + claim_uid + ": cannot remove " + region + ": " + ec.message());
  return Status::Ok();
}

}  // namespace fracgpu::dra
