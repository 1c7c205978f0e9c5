#include "node/container_edits.h"

#include <filesystem>

#include "api/limits.h"
#include "base/file.h"
#include "base/strings.h"

namespace fracgpu::node {

namespace fs = std::filesystem;

namespace {

// disableCoreLimit, then the device config's gpuCorePolicy, then the container's own value
// (any letter case: HAMi-core reads FORCE/DISABLE too); anything else is "default".
std::string CorePolicy(const DeviceConfig& config, const std::string& container_policy) {
  if (config.disable_core_limit) return "disable";
  if (config.core_policy != "default") return config.core_policy;
  std::string lower = container_policy;
  for (char& ch : lower) {
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
  }
  return lower == "force" || lower == "disable" ? lower : "default";
}

}  // namespace

ContainerEdits BuildContainerEdits(const core::ContainerGrants& grants, const DeviceConfig& config,
                                   const ContainerEditsOptions& options) {
  const std::string& hook = options.hook_path;
  ContainerEdits e;
  e.region_dir = api::HostContainerDir(hook, options.slot);
  e.limits_file = api::HostLimitsFile(hook, options.slot);
  std::vector<std::string> uuids;
  for (const auto& g : grants) uuids.push_back(g.uuid);
  e.env[api::kEnvVisibleDevices] = base::Join(uuids, ",");
  for (size_t i = 0; i < grants.size(); ++i) {
    e.env[std::string(api::kEnvMemoryLimit) + "_" + std::to_string(i)] =
        std::to_string(grants[i].mem_mib) + "m";
    e.env[std::string(api::kEnvSmLimit) + "_" + std::to_string(i)] =
        std::to_string(grants[i].cores_percent);
  }
  if (!grants.empty()) e.env[api::kEnvSmLimit] = std::to_string(grants.front().cores_percent);
  e.env[api::kEnvSharedCache] = api::ContainerRegionFile(hook);
  e.env[api::kEnvTaskPriority] = std::to_string(options.priority);
  e.env[api::kEnvCorePolicy] = CorePolicy(config, options.container_core_policy);
  if (config.memory_scaling > 1.0) e.env[api::kEnvOversubscribe] = "true";
  if (!config.libcuda_log_level.empty()) e.env[api::kEnvLogLevel] = config.libcuda_log_level;

  const std::string lib = api::HostLibraryFile(hook);
  e.mounts.push_back({lib, lib, true});
  if (options.preload) e.mounts.push_back({api::kPreloadPath, api::HostPreloadFile(hook), true});
  e.mounts.push_back({api::HostVgpuDir(hook), e.region_dir, false});
  e.mounts.push_back({api::kLimitsFilePath, e.limits_file, true});
  e.mounts.push_back({api::kNodeDirPath, api::HostNodeDir(hook), true});  // read-only: shared
  return e;
}

std::string LimitsFileContent(const std::map<std::string, std::string>& env) {
  std::string out;
  auto put = [&](const std::string& key) {
    auto it = env.find(key);
    if (it != env.end()) out += key + "=" + it->second + "\n";
  };
  put(api::kEnvVisibleDevices);
  for (int i = 0;; ++i) {
    std::string mem = std::string(api::kEnvMemoryLimit) + "_" + std::to_string(i);
    if (!env.count(mem)) break;
    put(mem);
    put(std::string(api::kEnvSmLimit) + "_" + std::to_string(i));
  }
  put(api::kEnvSharedCache);
  put(api::kEnvCorePolicy);
  put(api::kEnvTaskPriority);
  return out;
}

std::string LimitsGpuFragmentContent(const core::DeviceGrant& grant) {
  return std::string(api::kEnvVisibleDevices) + "=" + grant.uuid + "\n" + api::kEnvMemoryLimit +
         "_0=" + std::to_string(grant.mem_mib) + "m\n" + api::kEnvSmLimit +
         "_0=" + std::to_string(grant.cores_percent) + "\n";
}

std::string LimitsCommonFragmentContent(const std::map<std::string, std::string>& env) {
  std::string out;
  for (const char* key : {api::kEnvSharedCache, api::kEnvCorePolicy, api::kEnvTaskPriority}) {
    auto it = env.find(key);
    if (it != env.end()) out += std::string(key) + "=" + it->second + "\n";
  }
  return out;
}

ComposableEdits SplitComposableEdits(const ContainerEdits& edits,
                                     const core::ContainerGrants& grants,
                                     const ContainerEditsOptions& options) {
  ComposableEdits out;
  for (const auto& [k, v] : edits.env) {
    if (k == api::kEnvVisibleDevices || k.starts_with(api::kEnvMemoryLimit) ||
        k.starts_with(api::kEnvSmLimit))
      continue;
    out.common_env[k] = v;
  }
  out.common_env[api::kEnvVisibleDevices] = "void";
  const std::string dir = api::HostLimitsFragmentDir(options.hook_path, options.slot);
  const std::string common_name = api::LimitsFileName(options.slot);
  out.common_file = api::JoinHostPath(dir, common_name);
  out.common_content = LimitsCommonFragmentContent(edits.env);
  for (const auto& m : edits.mounts) {
    if (m.container_path == api::kLimitsFilePath) {
      out.common_mounts.push_back(
          {api::JoinHostPath(api::kLimitsDirPath, common_name), out.common_file, true});
    } else {
      out.common_mounts.push_back(m);
    }
  }
  for (const auto& g : grants) {
    ComposableEdits::Gpu gpu;
    gpu.uuid = g.uuid;
    const std::string name = api::LimitsGpuFragmentName(g.uuid);
    gpu.file = api::JoinHostPath(dir, name);
    gpu.content = LimitsGpuFragmentContent(g);
    gpu.mounts.push_back({api::JoinHostPath(api::kLimitsDirPath, name), gpu.file, true});
    gpu.mounts.push_back(
        {api::JoinHostPath(api::kNvidiaDeviceMountsDir, g.uuid), "/dev/null", true});
    out.gpus.push_back(std::move(gpu));
  }
  return out;
}

Status WriteComposableFiles(const ComposableEdits& c) {
  const fs::path dir = fs::path(c.common_file).parent_path();
  std::error_code ec;
  fs::remove_all(dir, ec);  // no file of an earlier allocation stays
  fs::create_directories(dir, ec);
  if (ec) return Internal("cannot create " + dir.string() + ": " + ec.message());
  FRACGPU_RETURN_IF_ERROR(base::WriteFileAtomically(c.common_file, c.common_content, 0444));
  for (const auto& g : c.gpus)
    FRACGPU_RETURN_IF_ERROR(base::WriteFileAtomically(g.file, g.content, 0444));
  return Status::Ok();
}

Status WriteContainerFiles(const ContainerEdits& edits, const std::string& hook_path) {
  const std::string lib = api::HostLibraryFile(hook_path);
  std::error_code ec;
  if (!fs::is_regular_file(lib, ec))
    return Internal(lib + " is missing; refusing to give a GPU without isolation");
  const fs::path region = edits.region_dir;
  const fs::path limits = edits.limits_file;
  auto undo = [&](Status st) {
    std::error_code ignored;
    fs::remove_all(region, ignored);
    fs::remove(limits, ignored);
    return st;
  };
  // The region directory starts empty for each allocation (a container restart without a new
  // Allocate or prepare keeps it).
  fs::remove_all(region, ec);
  fs::create_directories(region, ec);
  if (ec) return undo(Internal("cannot create " + region.string() + ": " + ec.message()));
  fs::permissions(region, fs::perms::all, ec);
  if (ec) return undo(Internal("cannot chmod " + region.string() + ": " + ec.message()));
  fs::create_directories(limits.parent_path(), ec);
  if (ec)
    return undo(Internal("cannot create " + limits.parent_path().string() + ": " + ec.message()));
  Status st = base::WriteFileAtomically(limits.string(), LimitsFileContent(edits.env), 0444);
  return st.ok() ? st : undo(st);
}

Status RemoveContainerFiles(const std::string& hook_path, const std::string& slot) {
  std::error_code ec;
  const std::string limits = api::HostLimitsFile(hook_path, slot);
  fs::remove(limits, ec);
  if (ec) return Internal("cannot remove " + limits + ": " + ec.message());
  const std::string fragments = api::HostLimitsFragmentDir(hook_path, slot);
  fs::remove_all(fragments, ec);
  if (ec) return Internal("cannot remove " + fragments + ": " + ec.message());
  const std::string region = api::HostContainerDir(hook_path, slot);
  fs::remove_all(region, ec);
  if (ec) return Internal("cannot remove " + region + ": " + ec.message());
  return Status::Ok();
}

Status PrepareHostFiles(const std::string& hook_path) {
  const std::string& hook = hook_path;
  const std::string node_dir = api::HostNodeDir(hook);
  std::error_code ec;
  for (const std::string& dir :
       {api::HostContainersDir(hook), api::HostLimitsDir(hook), node_dir}) {
    fs::create_directories(dir, ec);
    if (ec) return Internal("cannot create " + dir + ": " + ec.message());
  }
  // Only the node agent (root) writes the per-GPU files; containers get it read-only (issue 32).
  fs::permissions(node_dir,
                  fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                      fs::perms::others_read | fs::perms::others_exec,
                  ec);
  if (ec) return Internal("cannot chmod " + node_dir + ": " + ec.message());
  const std::string want = api::HostLibraryFile(hook) + "\n";
  const std::string preload = api::HostPreloadFile(hook);
  // Rewritten unless it already holds exactly `want`: a missing or unreadable file, or one longer
  // than `want` (refused by the bound, so a stray large file is never read whole), is replaced.
  Result<std::string> have = base::ReadFile(preload, want.size());
  if (have.ok() && *have == want) return Status::Ok();
  return base::WriteFileAtomically(preload, want, 0644);
}

}  // namespace fracgpu::node
