#pragma once
// The process's host PID: the PID NVML reports for it (nvmlDeviceGetComputeRunningProcesses,
// nvmlDeviceGetProcessUtilization report host PIDs, docs/design/wire-apis.md §8.3), which differs
// from getpid() inside a container's PID namespace. Written into RegionSlot::host_pid so that the
// SM limiter (and the node monitor) can match NVML's samples to the container's processes.
// Design and limits: docs/sm-limiter.md "Host PIDs".
#include <cstdint>

namespace fracgpu::vgpu {

/// Most NVML processes one snapshot holds (on the stack; more are ignored).
inline constexpr int kMaxNvmlProcs = 64;

/// NVML's compute processes on one device: host PID and used bytes.
struct NvmlProcs {
  bool ok = false;  ///< NVML answered
  unsigned count = 0;
  unsigned pid[kMaxNvmlProcs];
  unsigned long long used[kMaxNvmlProcs];  ///< bytes; ~0ull = NVML_VALUE_NOT_AVAILABLE
};

/// Lists nvmlDeviceGetComputeRunningProcesses_v3 of region device `dev` (by UUID). Sets
/// out->ok = false when NVML cannot be used. Allocates nothing.
void ListNvmlProcesses(int dev, NvmlProcs* out) noexcept;

/// True when this process runs in the initial (host) PID namespace: /proc/self/ns/pid is
/// "pid:[4026531836]" (PROC_PID_INIT_INO, Linux include/linux/proc_ns.h); then getpid() is the
/// host PID. The test copy of libvgpu.so answers false while FAKE_NVML_HOST_PID_OFFSET is set
/// (the fake NVML then emulates a PID namespace).
bool InHostPidNamespace() noexcept;

/// This process's host PID, 0 while unknown. One relaxed load.
int32_t OwnHostPid() noexcept;

/// Sets the host PID when it is known without NVML (host namespace); called when the slot is
/// claimed. Returns the PID set, or 0.
int32_t HostPidAtClaim() noexcept;

/// Before this process creates a context on region device `dev`: snapshot of NVML's processes
/// (only while the host PID is unknown; otherwise before->ok stays false).
void HostPidBeforeContext(int dev, NvmlProcs* before) noexcept;

/// After the context exists (`ctx`, possibly not current): finds this process among NVML's
/// processes and writes the slot's host_pid. Candidates are the PIDs that appeared since
/// `before` and that no other active slot of the container has claimed; if several remain
/// (processes of the container or others starting at the same time), a probe allocation of
/// kHostPidProbeBytes is made and the candidate whose usage grew by it wins, all under the
/// region lock so the container's probes never overlap. Leaves host_pid 0 when undecided
/// (HostPidRetry tries again later).
void HostPidAfterContext(int dev, void* ctx, const NvmlProcs* before) noexcept;

/// Tries again (no `before`; at most once per second per process) with the current context.
void HostPidRetry(int dev) noexcept;

/// Forgets the host PID (forked child: a new process).
void HostPidResetAfterFork() noexcept;

/// Size of the probe allocation (bytes): 2 MiB, the driver's allocation granularity, so it
/// shows in NVML's per-process usage exactly.
inline constexpr uint64_t kHostPidProbeBytes = 2ull << 20;

}  // namespace fracgpu::vgpu
