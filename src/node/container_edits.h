#pragma once
// The one builder from a grant to what a container gets (docs/design/CONTRACT.md §3), shared by
// both node plugins: the device plugin's Allocate response (deviceplugin/allocator.cc) and the
// DRA driver's CDI spec (dra/cdi.cc) carry the same environment (the GPUs, the limits, the
// region file, the core policy), the same mounts (libvgpu.so, /etc/ld.so.preload, the region
// directory, the read-only limits file and node directory) and the same host files, so one
// grant gives a container the same share whichever plugin served it.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/device.h"
#include "node/config.h"

namespace fracgpu::node {

/// One bind mount into the container (a ContainerAllocateResponse Mount; a CDI mount).
struct MountSpec {
  std::string container_path;
  std::string host_path;
  bool read_only = true;
  bool operator==(const MountSpec&) const = default;
};

/// What BuildContainerEdits needs besides the grants and the device config.
struct ContainerEditsOptions {
  /// HOOK_PATH: host directory whose `vgpu/` holds libvgpu.so, ld.so.preload, the region
  /// directories (`vgpu/containers/<slot>`), the limits files (`vgpu/limits/<slot>.env`) and the
  /// node directory (`vgpu/node`); the plugins see it at the same path.
  std::string hook_path = "/usr/local";
  /// The name of the container's region directory and limits file: api::PodContainerSlot
  /// ("<pod UID>_<container>") for the device plugin, "claim_<uid>" for a DRA claim.
  std::string slot;
  /// CUDA_TASK_PRIORITY: core::ContainerRequest::priority (0 high, 1 low; 1 is its default).
  int32_t priority = 1;
  /// The container's own literal GPU_CORE_UTILIZATION_POLICY ("" when it sets none); used only
  /// when the device config leaves the policy at "default".
  std::string container_core_policy;
  /// Mount /etc/ld.so.preload (false: the container turned control off, nvidia.com/vgpu-control
  /// "disable": libvgpu.so is mounted but not preloaded).
  bool preload = true;
};

/// What one container gets: environment, mounts (in a fixed order) and its two host paths.
struct ContainerEdits {
  std::map<std::string, std::string> env;
  std::vector<MountSpec> mounts;
  std::string region_dir;   ///< host path of the region directory (mounted read-write)
  std::string limits_file;  ///< host path of the limits file (mounted read-only)
};

/// The edits for `grants` (GPU i of the container is grants[i]; memory in MiB, cores in percent):
/// NVIDIA_VISIBLE_DEVICES (the UUIDs, comma-separated), CUDA_DEVICE_MEMORY_LIMIT_<i> ("<MiB>m"),
/// CUDA_DEVICE_SM_LIMIT_<i> and CUDA_DEVICE_SM_LIMIT (grants[0]'s; absent for no grant),
/// CUDA_DEVICE_MEMORY_SHARED_CACHE, CUDA_TASK_PRIORITY, GPU_CORE_UTILIZATION_POLICY
/// (disableCoreLimit → "disable", else gpuCorePolicy unless "default", else the container's own
/// "force"/"disable" in any letter case, else "default"), CUDA_OVERSUBSCRIBE=true when
/// deviceMemoryScaling > 1 and LIBCUDA_LOG_LEVEL when set; mounts libvgpu.so, ld.so.preload
/// (when options.preload), the region directory (read-write), the limits file and the node
/// directory (read-only). Pure: touches no file, cannot fail.
ContainerEdits BuildContainerEdits(const core::ContainerGrants& grants, const DeviceConfig& config,
                                   const ContainerEditsOptions& options);

/// The limits file content (docs/design/CONTRACT.md §3): one KEY=VALUE per line, for the keys of
/// `env` that libvgpu.so takes from the file, in a fixed order.
std::string LimitsFileContent(const std::map<std::string, std::string>& env);

/// Writes the container's host files: refuses (kInternal, "<hook>/vgpu/libvgpu.so is missing;
/// refusing to give a GPU without isolation") when libvgpu.so is not a regular file, so no
/// container runs unlimited; then a fresh, empty region directory (mode 0777) and the limits file
/// (LimitsFileContent(edits.env), mode 0444, base::WriteFileAtomically). On a failure after the
/// check, removes what it created and returns kInternal naming the path.
Status WriteContainerFiles(const ContainerEdits& edits, const std::string& hook_path);

/// Removes the region directory and the limits file of `slot`. Absent files are fine.
/// Errors: kInternal naming the path that cannot be removed.
Status RemoveContainerFiles(const std::string& hook_path, const std::string& slot);

/// The node's shared host files, once at start: creates the region and limits directories and
/// the node directory `<hook>/vgpu/node` (mode 0755: only the node agent writes its per-GPU
/// files, api/node_gpu.h; containers mount it read-only), and writes `<hook>/vgpu/ld.so.preload`
/// (one line: the path of libvgpu.so, mode 0644) unless it already holds exactly that.
/// Errors: kInternal naming the path.
Status PrepareHostFiles(const std::string& hook_path);

}  // namespace fracgpu::node
