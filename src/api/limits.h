#pragma once
// The limits contract between the writers of a GPU container's limits (the device plugin's
// Allocate, deviceplugin/allocator.cc; the DRA driver's CDI edits, dra/cdi.cc) and their reader,
// libvgpu.so (vgpu/limits.cc, vgpu/state.cc, vgpu/sm_limiter.cc): the environment / limits-file
// keys, the paths inside the container and the host directory layout under HOOK_PATH
// (docs/design/CONTRACT.md §3, docs/sm-limiter.md "Priority"). The key names are HAMi-core's.
// Header-only, no dependencies (libvgpu.so includes it).

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
/// The preload file (one line: the container path of libvgpu.so).
inline constexpr char kPreloadPath[] = "/etc/ld.so.preload";
/// The node directory shared read-write by every GPU container (one file per GPU UUID).
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
/// `vgpu/node/` (mode 0777), mounted read-write at kNodeDirPath.
inline constexpr char kHostNodeDir[] = "node";
/// The region file in a container's region folder (kEnvSharedCache names it).
inline constexpr char kRegionFileName[] = "region.cache";

}  // namespace fracgpu::api
