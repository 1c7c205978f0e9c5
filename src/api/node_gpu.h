#pragma once
// The per-GPU node file's byte layout: <node dir>/<GPU UUID> (api::kNodeDirPath inside a
// container, <HOOK_PATH>/vgpu/node on the host; docs/sm-limiter.md "Priority"), shared
// read-write by every GPU container on the node. libvgpu.so (vgpu/sm_limiter.cc) creates,
// initialises and stamps it; the monitor reads it (docs/monitor.md). Header-only, no
// dependencies (libvgpu.so includes it).
#include <cstddef>
#include <cstdint>

namespace fracgpu::api {

inline constexpr uint32_t kNodeGpuMagic = 0x4e474746;  // "FGGN" little-endian
inline constexpr uint32_t kNodeGpuVersion = 1;

/// One GPU's node file. A writer initialises version, then magic (each from 0 by CAS); a reader
/// ignores a file whose magic or version differ.
struct NodeGpu {
  uint32_t magic;                ///< kNodeGpuMagic once initialised
  uint32_t version;              ///< kNodeGpuVersion
  uint64_t high_last_launch_ns;  ///< limiter clock of the last priority-0 launch (atomic)
  uint64_t reserved[6];
};

// The byte layout of version 1, pinned (containers of different builds share the file).
static_assert(sizeof(NodeGpu) == 64);
static_assert(offsetof(NodeGpu, magic) == 0);
static_assert(offsetof(NodeGpu, version) == 4);
static_assert(offsetof(NodeGpu, high_last_launch_ns) == 8);
static_assert(offsetof(NodeGpu, reserved) == 16);

}  // namespace fracgpu::api
