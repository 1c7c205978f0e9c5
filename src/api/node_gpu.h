#pragma once
// The per-GPU node file's byte layout: <node dir>/<GPU UUID> (api::kNodeDirPath inside a
// container, <HOOK_PATH>/vgpu/node on the host; docs/sm-limiter.md "Priority").
//
// Written only by the node agent (`fracgpu monitor`, monitor/priority.h), as root, mode 0644,
// in a directory the device plugin creates 0755 and mounts READ-ONLY into every GPU container:
// no container can write state another container reads (issue 32 item 2). The agent publishes
// the latest kernel launch of the node's priority-0 containers on the GPU (their regions'
// RegionDevice::last_launch_ns, priority taken from the device plugin's limits file, never from
// the tenant-writable region). libvgpu.so in a priority-1 container reads it with pread (never
// mmap), and treats anything unexpected (wrong size, owner other than root or itself, writable by
// group or others, bad magic/version/check, a stamp in the future) as "no priority-0 launch".
// Header-only, no dependencies (libvgpu.so includes it).
#include <cstddef>
#include <cstdint>

namespace fracgpu::api {

inline constexpr uint32_t kNodeGpuMagic = 0x4e474746;  // "FGGN" little-endian
/// Version 2: written by the node agent only; high_last_launch_check added. (Version 1 files
/// were created and mmapped read-write by libvgpu.so in every container.)
inline constexpr uint32_t kNodeGpuVersion = 2;

/// How long (ns) after its last kernel launch a container counts as active on a GPU for
/// contention (GPU_CORE_UTILIZATION_POLICY=default, docs/sm-limiter.md "Policy").
inline constexpr uint64_t kContentionActiveNs = 100'000'000;

/// One GPU's node file, written whole with one pwrite of 64 bytes.
struct NodeGpu {
  uint32_t magic;                   ///< kNodeGpuMagic
  uint32_t version;                 ///< kNodeGpuVersion
  uint64_t high_last_launch_ns;     ///< CLOCK_MONOTONIC ns of the last priority-0 launch; 0 = none
  uint64_t high_last_launch_check;  ///< ~high_last_launch_ns (a torn or forged read fails it)
  /// CLOCK_MONOTONIC ns until which two or more containers count as active on the GPU: the
  /// second-newest container's last launch + kContentionActiveNs (0 = fewer than two ever seen).
  /// Added within version 2 (formerly reserved[0], zero): a file of an agent that does not
  /// write it fails the check word, which readers take as "contended" (the cap applies).
  uint64_t contended_until_ns;
  uint64_t contended_until_check;  ///< ~contended_until_ns
  uint64_t reserved[3];            ///< zero
};

// The byte layout of version 2, pinned (containers of different builds read the file).
static_assert(sizeof(NodeGpu) == 64);
static_assert(offsetof(NodeGpu, magic) == 0);
static_assert(offsetof(NodeGpu, version) == 4);
static_assert(offsetof(NodeGpu, high_last_launch_ns) == 8);
static_assert(offsetof(NodeGpu, high_last_launch_check) == 16);
static_assert(offsetof(NodeGpu, contended_until_ns) == 24);
static_assert(offsetof(NodeGpu, contended_until_check) == 32);
static_assert(offsetof(NodeGpu, reserved) == 40);

/// The stamp of a node file's bytes, or 0 when they are not a valid version-2 file (size, magic,
/// version, check word). `size` is the number of bytes read.
inline uint64_t NodeGpuStamp(const NodeGpu& n, size_t size) noexcept {
  if (size != sizeof(NodeGpu) || n.magic != kNodeGpuMagic || n.version != kNodeGpuVersion ||
      n.high_last_launch_check != ~n.high_last_launch_ns)
    return 0;
  return n.high_last_launch_ns;
}

/// True when a node file's bytes are a valid version-2 file whose contention word passes its
/// check; then `*until` is contended_until_ns. False (the reader then assumes contention) for
/// anything else, including a file of an agent that predates the word.
inline bool NodeGpuContendedUntil(const NodeGpu& n, size_t size, uint64_t* until) noexcept {
  if (size != sizeof(NodeGpu) || n.magic != kNodeGpuMagic || n.version != kNodeGpuVersion ||
      n.contended_until_check != ~n.contended_until_ns)
    return false;
  *until = n.contended_until_ns;
  return true;
}

}  // namespace fracgpu::api
