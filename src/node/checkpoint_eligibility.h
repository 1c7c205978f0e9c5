#pragma once
// Whether a container's CUDA processes may be checkpointed (parked) with the CUDA checkpoint
// API (cuCheckpointProcessLock/Checkpoint/Restore/Unlock, cuda.h since CUDA 12.8): the gates
// issue 36 item 1 names, checked before Lock because a failure can break the tenant. Pure: the
// caller gathers the facts (NVML for the driver, persistence, MIG and MPS; the container's
// region slots for libvgpu.so's record, api/region.h RegionSlot::uses; the pod's cgroup for host
// memory) and this decides. Limits it encodes, from NVIDIA/cuda-checkpoint's README and issues:
// no UVM (managed memory) and no IPC; MIG and MPS unsupported; restore needs persistence mode
// (cuda.h, cuCheckpointProcessRestore) ; the device memory is copied into the process's host
// memory, which the pod's memory limit must hold.
#include <cstdint>
#include <string>
#include <vector>

namespace fracgpu::node {

/// The facts about one container on one GPU.
struct CheckpointFacts {
  /// A fact that could not be read (an NVML call that failed): names the call and its error;
  /// non-empty fails the first gate, so an unknown fact is never taken for a good one.
  std::string unknown;
  std::string driver_version;  ///< NVML's system driver version, e.g. "580.95.05"
  bool persistence_mode = false;
  bool mig_enabled = false;
  bool mps_active = false;
  /// RegionSlot::uses of each of the container's processes (api/region.h kSlotUses* bits).
  std::vector<uint32_t> process_uses;
  uint64_t device_bytes = 0;  ///< device memory the checkpoint copies to host, bytes
  /// Whether the pod's memory limit was read (its cgroup); false fails the host gate: a limit
  /// that could not be read is not taken for "no limit".
  bool host_limit_known = false;
  uint64_t host_limit_bytes = 0;  ///< the pod's memory limit, bytes; 0 = none (when known)
  uint64_t host_used_bytes = 0;   ///< the pod's host memory in use now, bytes
};

/// The first gate a container fails, in the order checked.
enum class CheckpointGate {
  kEligible = 0,
  kFactsUnknown,      ///< a fact could not be read (CheckpointFacts::unknown)
  kDriverNotAllowed,  ///< driver_version not on the allow-list
  kNoPersistence,     ///< persistence mode off
  kMig,               ///< MIG enabled on the GPU
  kMps,               ///< an MPS server runs on the GPU
  kNoProcesses,       ///< no CUDA process recorded in the region
  kUsesUnknown,       ///< a slot of a libvgpu.so that does not record its uses, or a use
                      ///< bit this code does not know (a newer libvgpu.so's record)
  kManagedMemory,     ///< a process allocated managed memory
  kIpc,               ///< a process used IPC memory or event handles
  kSharedVmm,         ///< a process exported or imported a VMM shareable handle
  kSharedPool,        ///< a process exported or imported a memory pool or pool pointer
  kUnwakeable,        ///< a process holds a driver function no wake trampoline guards
                      ///< (api::kSlotUnwakeable: its call while parked would not wake it)
  kHostMemory,        ///< the pod's memory limit cannot hold the host copy, or is unknown
};

/// The decision: the gate, and a sentence naming it and the offending value.
struct CheckpointEligibility {
  CheckpointGate gate = CheckpointGate::kEligible;
  std::string reason;  ///< "" when eligible
  bool eligible() const { return gate == CheckpointGate::kEligible; }
};

/// Decides eligibility from `facts`. `allowed_drivers`: exact driver versions ("580.95.05") or
/// prefixes ending in '.' ("580." allows every 580 driver); empty allows none. Gates in the
/// order of CheckpointGate; the first failing one is returned. Pure, thread-safe.
CheckpointEligibility CheckpointEligible(const CheckpointFacts& facts,
                                         const std::vector<std::string>& allowed_drivers);

}  // namespace fracgpu::node
