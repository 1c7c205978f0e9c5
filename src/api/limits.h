#pragma once
// The limits contract between the writers of a GPU container's limits (the device plugin's
// Allocate, deviceplugin/allocator.cc; the DRA driver's CDI edits, dra/cdi.cc) and their reader,
// libvgpu.so (vgpu/limits.cc, vgpu/state.cc, vgpu/sm_limiter.cc): the environment / limits-file
// keys, the paths inside the container and the host directory layout under HOOK_PATH
// (docs/design/CONTRACT.md §3, docs/sm-limiter.md "Priority"). The key names are HAMi-core's.
// Header-only, no dependencies but the C++ standard library (libvgpu.so includes it; it uses
// the constants, never the path builders at the end, which allocate).

#include <string>
#include <string_view>

namespace fracgpu::api {

// ---- keys (container environment and limits file: one KEY=VALUE per line) ----------------

/// GPU UUIDs, comma-separated, in the container's device order.
inline constexpr char kEnvVisibleDevices[] = "NVIDIA_VISIBLE_DEVICES";
/// Prefix of the per-GPU memory limit `CUDA_DEVICE_MEMORY_LIMIT_<i>` = `<MiB>m`.
inline constexpr char kEnvMemoryLimit[] = "CUDA_DEVICE_MEMORY_LIMIT";
/// SM limit in percent (0 = unlimited): alone for every GPU, `CUDA_DEVICE_SM_LIMIT_<i>` per GPU.
inline constexpr char kEnvSmLimit[] = "CUDA_DEVICE_SM_LIMIT";
/// Absolute path of the container's shared region file.
inline constexpr char kEnvSharedCache[] = "CUDA_DEVICE_MEMORY_SHARED_CACHE";
/// `default`, `force` or `disable`.
inline constexpr char kEnvCorePolicy[] = "GPU_CORE_UTILIZATION_POLICY";
/// `0` (high) or `1` (low).
inline constexpr char kEnvTaskPriority[] = "CUDA_TASK_PRIORITY";
/// `true` when device memory is scaled above the physical size (memory scaling > 1).
inline constexpr char kEnvOversubscribe[] = "CUDA_OVERSUBSCRIBE";
/// libvgpu.so's log level `0`..`4` (environment only).
inline constexpr char kEnvLogLevel[] = "LIBCUDA_LOG_LEVEL";

// ---- paths inside the container (compiled into libvgpu.so: a tenant cannot move them) -----

/// The read-only limits file; when present, the limit keys come from it alone.
inline constexpr char kLimitsFilePath[] = "/etc/fracgpu/limits.env";
/// The limits directory (DRA, docs/dra.md "Per-request devices"): one read-only file per GPU
/// (`gpu-<UUID>.env`) and one claim-wide file (`<slot>.env`), each mounted by the CDI edit that
/// gives the GPU or the claim; libvgpu.so merges them (vgpu/limits.h ParseLimitsDir) when the
/// limits file is absent, and refuses CUDA when both are present.
inline constexpr char kLimitsDirPath[] = "/etc/fracgpu/limits.d";
/// The NVIDIA Container Toolkit's device list as volume mounts (its option
/// `accept-nvidia-visible-devices-as-volume-mounts`): a mount at `<this>/<UUID>` asks for that GPU.
inline constexpr char kNvidiaDeviceMountsDir[] = "/var/run/nvidia-container-devices";
/// The preload file (one line: the container path of libvgpu.so).
inline constexpr char kPreloadPath[] = "/etc/ld.so.preload";
/// The node directory, mounted read-only into every GPU container (one file per GPU UUID, written
/// by the node agent only; api/node_gpu.h).
inline constexpr char kNodeDirPath[] = "/run/fracgpu/node";

// ---- host layout: <HOOK_PATH>/<kHostVgpuDir>/… ------------------------------------------

/// The folder under HOOK_PATH holding everything below; libvgpu.so and the region folder are
/// mounted at the same path inside the container.
inline constexpr char kHostVgpuDir[] = "vgpu";
/// `vgpu/libvgpu.so`.
inline constexpr char kHostLibrary[] = "libvgpu.so";
/// `vgpu/ld.so.preload`, mounted read-only at kPreloadPath.
inline constexpr char kHostPreloadFile[] = "ld.so.preload";
/// `vgpu/containers/<slot>/`: one container's region folder, mounted read-write at `vgpu/`.
inline constexpr char kHostContainersDir[] = "containers";
/// `vgpu/limits/<slot>.env`: one container's limits file, mounted read-only at kLimitsFilePath.
inline constexpr char kHostLimitsDir[] = "limits";
/// The suffix of a limits file under kHostLimitsDir.
inline constexpr char kHostLimitsSuffix[] = ".env";
/// `vgpu/node/` (mode 0755, root), mounted read-only at kNodeDirPath.
inline constexpr char kHostNodeDir[] = "node";
/// The region file in a container's region folder (kEnvSharedCache names it).
inline constexpr char kRegionFileName[] = "region.cache";
/// Between the pod UID and the container name of the device plugin's slot
/// `<pod UID>_<container>` (a UID and a container name, a DNS label, hold no '_').
inline constexpr char kSlotSeparator = '_';

// ---- host layout: path builders (the writers and the monitor build the same paths) -------

/// `dir` and `name` joined as std::filesystem::path's operator/ joins a relative name: one '/'
/// between them unless `dir` is empty or already ends with '/'.
inline std::string JoinHostPath(std::string_view dir, std::string_view name) {
  std::string out(dir);
  if (!out.empty() && out.back() != '/') out += '/';
  out += name;
  return out;
}
/// `<hook_path>/vgpu`; the region file path inside a container is under the same path.
inline std::string HostVgpuDir(std::string_view hook_path) {
  return JoinHostPath(hook_path, kHostVgpuDir);
}
/// `<hook_path>/vgpu/libvgpu.so`.
inline std::string HostLibraryFile(std::string_view hook_path) {
  return JoinHostPath(HostVgpuDir(hook_path), kHostLibrary);
}
/// `<hook_path>/vgpu/ld.so.preload`.
inline std::string HostPreloadFile(std::string_view hook_path) {
  return JoinHostPath(HostVgpuDir(hook_path), kHostPreloadFile);
}
/// `<hook_path>/vgpu/containers`: the root of the per-container region folders.
inline std::string HostContainersDir(std::string_view hook_path) {
  return JoinHostPath(HostVgpuDir(hook_path), kHostContainersDir);
}
/// `<hook_path>/vgpu/limits`: the folder of the per-container limits files.
inline std::string HostLimitsDir(std::string_view hook_path) {
  return JoinHostPath(HostVgpuDir(hook_path), kHostLimitsDir);
}
/// `<hook_path>/vgpu/node`: the node directory (the monitor's default --node-dir).
inline std::string HostNodeDir(std::string_view hook_path) {
  return JoinHostPath(HostVgpuDir(hook_path), kHostNodeDir);
}
/// `<hook_path>/vgpu/containers/<slot>`: one container's region folder.
inline std::string HostContainerDir(std::string_view hook_path, std::string_view slot) {
  return JoinHostPath(HostContainersDir(hook_path), slot);
}
/// `<hook_path>/vgpu/containers/<slot>/region.cache`: one container's region file on the host.
inline std::string HostRegionFile(std::string_view hook_path, std::string_view slot) {
  return JoinHostPath(HostContainerDir(hook_path, slot), kRegionFileName);
}
/// `<hook_path>/vgpu/region.cache`: the region file's path inside the container (its region
/// folder is mounted at HostVgpuDir), the value of kEnvSharedCache.
inline std::string ContainerRegionFile(std::string_view hook_path) {
  return JoinHostPath(HostVgpuDir(hook_path), kRegionFileName);
}
/// The name of `slot`'s limits file under HostLimitsDir: `<slot>.env`.
inline std::string LimitsFileName(std::string_view slot) {
  return std::string(slot) + kHostLimitsSuffix;
}
/// `<hook_path>/vgpu/limits/<slot>.env`: one container's limits file.
inline std::string HostLimitsFile(std::string_view hook_path, std::string_view slot) {
  return JoinHostPath(HostLimitsDir(hook_path), LimitsFileName(slot));
}
/// `<hook_path>/vgpu/limits/<slot>.d`: a DRA claim's limits directory files (mounted one by one
/// under kLimitsDirPath); not a `.env` name, so the readers of HostLimitsDir skip it.
inline std::string HostLimitsFragmentDir(std::string_view hook_path, std::string_view slot) {
  return JoinHostPath(HostLimitsDir(hook_path), std::string(slot) + ".d");
}
/// The limits directory file of one GPU: `gpu-<uuid>.env`.
inline std::string LimitsGpuFragmentName(std::string_view uuid) {
  return "gpu-" + std::string(uuid) + kHostLimitsSuffix;
}
/// The device plugin's slot of a container: `<pod UID>_<container>`.
inline std::string PodContainerSlot(std::string_view pod_uid, std::string_view container) {
  std::string out(pod_uid);
  out += kSlotSeparator;
  out += container;
  return out;
}
/// Splits a device plugin's slot (PodContainerSlot) at its first kSlotSeparator into the pod
/// UID and the container name (views into `slot`); false, with both left as they were, when
/// `slot` holds no separator. Whether either side is empty or safe is the caller's check.
inline bool SplitPodContainerSlot(std::string_view slot, std::string_view* pod_uid,
                                  std::string_view* container) {
  const size_t at = slot.find(kSlotSeparator);
  if (at == std::string_view::npos) return false;
  *pod_uid = slot.substr(0, at);
  *container = slot.substr(at + 1);
  return true;
}
/// The slot named by a file name of HostLimitsDir (`<slot>.env` → `<slot>`); empty when `file`
/// does not end with kHostLimitsSuffix or nothing precedes it. A view into `file`.
inline std::string_view SlotFromLimitsFileName(std::string_view file) {
  constexpr std::string_view suffix = kHostLimitsSuffix;
  if (file.size() <= suffix.size() || !file.ends_with(suffix)) return {};
  return file.substr(0, file.size() - suffix.size());
}

}  // namespace fracgpu::api
