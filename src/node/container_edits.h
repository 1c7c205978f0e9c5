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

/// A container's edits split for composition (docs/dra.md "Per-request devices"): what is
/// claim-wide, applied once however many of the claim's devices a container names, and what
/// belongs to one GPU, under names no other GPU uses, so any subset of the GPUs composes without
/// an env key or a mount path given twice.
struct ComposableEdits {
  /// `edits.env` without NVIDIA_VISIBLE_DEVICES and the limit keys, plus
  /// NVIDIA_VISIBLE_DEVICES=void (the runtime's GPUs come from the GPUs' mounts).
  std::map<std::string, std::string> common_env;
  /// `edits.mounts` with the limits file replaced by the common limits directory file
  /// (`<kLimitsDirPath>/<slot>.env` from `<hook>/vgpu/limits/<slot>.d/<slot>.env`).
  std::vector<MountSpec> common_mounts;
  std::string common_file;     ///< host path of the common limits directory file
  std::string common_content;  ///< LimitsCommonFragmentContent(edits.env)
  /// One GPU's part.
  struct Gpu {
    std::string uuid;
    /// Its limits directory file (`<kLimitsDirPath>/gpu-<uuid>.env`, read-only) and the NVIDIA
    /// Container Toolkit's device mount (`/var/run/nvidia-container-devices/<uuid>` from
    /// /dev/null, the toolkit's `accept-nvidia-visible-devices-as-volume-mounts`).
    std::vector<MountSpec> mounts;
    std::string file;     ///< host path of its limits directory file
    std::string content;  ///< LimitsGpuFragmentContent
  };
  std::vector<Gpu> gpus;  ///< in grant order
};

/// Splits `edits` (BuildContainerEdits of `grants` with `options.slot` and `.hook_path`) as
/// above. Pure.
ComposableEdits SplitComposableEdits(const ContainerEdits& edits,
                                     const core::ContainerGrants& grants,
                                     const ContainerEditsOptions& options);

/// Writes the limits directory files of `c` (a fresh `<hook>/vgpu/limits/<slot>.d/`: the common
/// file and one per GPU, mode 0444, base::WriteFileAtomically). Errors: kInternal naming the path.
Status WriteComposableFiles(const ComposableEdits& c);

/// The limits directory file of one GPU (vgpu/limits.h ParseLimitsDir, "a GPU file"):
/// `NVIDIA_VISIBLE_DEVICES=<uuid>`, `CUDA_DEVICE_MEMORY_LIMIT_0=<mem_mib>m`,
/// `CUDA_DEVICE_SM_LIMIT_0=<cores_percent>`, one per line.
std::string LimitsGpuFragmentContent(const core::DeviceGrant& grant);

/// The claim-wide limits directory file ("a common file"): the keys of `env` that are neither a
/// GPU list nor a limit (CUDA_DEVICE_MEMORY_SHARED_CACHE, GPU_CORE_UTILIZATION_POLICY,
/// CUDA_TASK_PRIORITY), one per line in that order.
std::string LimitsCommonFragmentContent(const std::map<std::string, std::string>& env);

/// Writes the container's host files: refuses (kInternal, "<hook>/vgpu/libvgpu.so is missing;
/// refusing to give a GPU without isolation") when libvgpu.so is not a regular file, so no
/// container runs unlimited; then a fresh, empty region directory (mode 0777) and the limits file
/// (LimitsFileContent(edits.env), mode 0444, base::WriteFileAtomically). On a failure after the
/// check, removes what it created and returns kInternal naming the path.
Status WriteContainerFiles(const ContainerEdits& edits, const std::string& hook_path);

/// Removes the region directory, the limits file and the limits directory files
/// (api::HostLimitsFragmentDir) of `slot`. Absent files are fine.
/// Errors: kInternal naming the path that cannot be removed.
Status RemoveContainerFiles(const std::string& hook_path, const std::string& slot);

/// The node's shared host files, once at start: creates the region and limits directories and
/// the node directory `<hook>/vgpu/node` (mode 0755: only the node agent writes its per-GPU
/// files, api/node_gpu.h; containers mount it read-only), and writes `<hook>/vgpu/ld.so.preload`
/// (one line: the path of libvgpu.so, mode 0644) unless it already holds exactly that.
/// Errors: kInternal naming the path.
Status PrepareHostFiles(const std::string& hook_path);

}  // namespace fracgpu::node
