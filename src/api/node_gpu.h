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

/// One GPU's node file, written whole with one pwrite of 64 bytes.
struct NodeGpu {
  uint32_t magic;                   ///< kNodeGpuMagic
  uint32_t version;                 ///< kNodeGpuVersion
  uint64_t high_last_launch_ns;     ///< CLOCK_MONOTONIC ns of the last priority-0 launch; 0 = none
  uint64_t high_last_launch_check;  ///< ~high_last_launch_ns (a torn or forged read fails it)
  uint64_t reserved[5];             ///< zero
};

// The byte layout of version 2, pinned (containers of different builds read the file).
static_assert(sizeof(NodeGpu) == 64);
static_assert(offsetof(NodeGpu, magic) == 0);
static_assert(offsetof(NodeGpu, version) == 4);
static_assert(offsetof(NodeGpu, high_last_launch_ns) == 8);
static_assert(offsetof(NodeGpu, high_last_launch_check) == 16);
static_assert(offsetof(NodeGpu, reserved) == 24);

/// The stamp of a node file's bytes, or 0 when they are not a valid version-2 file (size, magic,
/// version, check word). `size` is the number of bytes read.
inline uint64_t NodeGpuStamp(const NodeGpu& n, size_t size) noexcept {
  if (size != sizeof(NodeGpu) || n.magic != kNodeGpuMagic || n.version != kNodeGpuVersion ||
      n.high_last_launch_check != ~n.high_last_launch_ns)
    return 0;
  return n.high_last_launch_ns;
}

}  // namespace fracgpu::api
