#pragma once
// Parking a container's CUDA processes with the CUDA checkpoint API, and waking them (issue 36
// items 1 and 3): the order of the calls and what is undone when one fails. The caller (the
// node agent) supplies the driver's calls, loaded from libcuda.so.1 (cuda.h since CUDA 12.8:
// cuCheckpointProcessLock, Checkpoint, Restore, Unlock, each naming the target's pid), the
// eligibility facts (checkpoint_eligibility.h) and NVML's free memory; this decides and sequences.
//
// Park, in order:
//   0. every process must still be the one the caller verified (ParkTarget::same), before its
//      Lock, Restore and Unlock;
//   1. the eligibility gates (CheckpointEligible) on the facts before Lock: a failure of Lock or
//      Checkpoint can break the tenant (NVIDIA/cuda-checkpoint#58), so nothing ineligible is
//      touched;
//   2. Lock every process with the timeout; CUDA_ERROR_NOT_READY from any means busy (a call
//      in flight, or work still running past the timeout): the processes already locked are
//      unlocked and the park is retried later;
//   3. the facts read again with every process locked (a process may have used managed memory
//      or IPC between the first read and its Lock; a locked process makes no further call), and
//      the gates again: a failure now unlocks all;
//   4. Checkpoint every process; a failure restores the ones already checkpointed (their memory
//      was released a moment ago) and unlocks all;
//   5. NVML must show at least the processes' device memory released (the record in the region
//      is advisory: a process could hold memory the record does not name); otherwise the park
//      is undone.
// Wake, in order: NVML must show room for everything the park released (Restore is never
// attempted without the memory: a refused Restore can leave the process stuck for good,
// cuda-checkpoint#44); Restore every process (CUDA_ERROR_OUT_OF_MEMORY: still parked, retry once
// the borrowers are gone); Unlock every process.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "node/checkpoint_eligibility.h"

namespace fracgpu::node {

/// The checkpoint calls of the CUDA driver for one pid, each returning the CUresult (0 =
/// CUDA_SUCCESS). `lock` takes the timeout in ms (CUcheckpointLockArgs::timeoutMs; 0 = none).
struct CheckpointDriver {
  /// cuCheckpointProcessGetState: the CUprocessState in `*state` (kProcessState* below).
  std::function<int(int pid, int* state)> get_state;
  std::function<int(int pid, unsigned timeout_ms)> lock;
  std::function<int(int pid)> checkpoint;
  std::function<int(int pid)> restore;
  std::function<int(int pid)> unlock;
};

/// cuda.h's codes the parker tells apart (CUresult values, cuda.h 13.0).
inline constexpr int kCudaSuccess = 0;
inline constexpr int kCudaErrorOutOfMemory = 2;
inline constexpr int kCudaErrorNotReady = 600;
/// CUprocessState values (cuda.h 13.0).
inline constexpr int kProcessStateRunning = 0;
inline constexpr int kProcessStateLocked = 1;
inline constexpr int kProcessStateCheckpointed = 2;

/// A container to park: its CUDA processes on one GPU (children included, each checkpointed on
/// its own, cuda-checkpoint#28) and how to read its facts and the GPU's memory.
struct ParkTarget {
  std::vector<int> pids;  ///< host pids of the container's CUDA processes on the GPU
  /// The eligibility facts now (NVML, the region's slots, the pod's cgroup); called before
  /// Lock and again with every process locked.
  std::function<CheckpointFacts()> facts;
  /// NVML's free device memory of the GPU now, bytes.
  std::function<uint64_t()> free_bytes;
  /// Whether `pid` is still the process the caller verified (its cgroup, its start time): ""
  /// when it is, else why not (gone, its PID reused). Asked before each Lock, Restore and
  /// Unlock of `pid`: a process that is no longer the one verified is never touched (a PID
  /// reused after an exit is another process, perhaps another tenant's). Null: not asked.
  std::function<std::string(int pid)> same;
};

/// What a park or wake did.
enum class ParkOutcome {
  kParked = 0,  ///< Park: every process CHECKPOINTED, the memory free
  kAwake,       ///< Wake: every process RUNNING again
  kIneligible,  ///< Park: a gate failed (before or after Lock); nothing is left locked
  kBusy,        ///< Park: a Lock timed out (work in flight); nothing is left locked; retry later
  kNoRoom,      ///< Wake: the GPU lacks the memory; still parked; retry once it is free
  kFailed,      ///< a driver call failed otherwise; `reason` says which and what was undone
};

/// The result of Park or Wake.
struct ParkResult {
  ParkOutcome outcome = ParkOutcome::kFailed;
  std::string reason;  ///< a sentence naming the pid, the call and its CUresult; "" on success
  uint64_t released_bytes = 0;  ///< Park: device memory NVML showed released, bytes
  /// Park: the processes' charged device memory (CheckpointFacts::device_bytes) read with
  /// every process locked, bytes.
  uint64_t charged_bytes = 0;
  /// Wake: the processes that were no longer the ones parked (ParkTarget::same), left alone:
  /// neither restored nor unlocked.
  std::vector<int> gone;
};

/// Parks and wakes containers through `driver`. Not thread-safe per target: the agent parks or
/// wakes one container at a time.
class Parker {
 public:
  /// `allowed_drivers`: CheckpointEligible's allow-list. `lock_timeout_ms`: Lock's timeout (> 0:
  /// a Lock that would wait longer is "busy").
  Parker(CheckpointDriver driver, std::vector<std::string> allowed_drivers,
         unsigned lock_timeout_ms);

  /// Parks `target` (steps 1–5 above). kParked with released_bytes, or why not, with every
  /// process RUNNING again (kIneligible, kBusy, and kFailed unless an undo itself failed, which
  /// `reason` then names).
  ParkResult Park(const ParkTarget& target) const;

  /// Wakes a target parked by Park: `parked_bytes` is the memory its processes still
  /// CHECKPOINTED need (Park's released_bytes at first). Processes already LOCKED (restored by an
  /// earlier Wake that stopped part-way) are not restored again. A process ParkTarget::same
  /// refuses is skipped (listed in `gone`); when every one is, nothing needs room and the result
  /// is kAwake. kAwake, kNoRoom (nothing was attempted, or a Restore answered out of memory: the
  /// rest stay parked) or kFailed.
  ParkResult Wake(const ParkTarget& target, uint64_t parked_bytes) const;

 private:
  // Unlocks pids[0, n) (those `same` still accepts); returns "" or the failures, for a reason.
  std::string UnlockAll(const ParkTarget& target, size_t n) const;
  // Wake of processes all checked by ParkTarget::same.
  ParkResult WakeLive(const ParkTarget& target, uint64_t parked_bytes) const;

  CheckpointDriver driver_;
  std::vector<std::string> allowed_drivers_;
  unsigned lock_timeout_ms_;
};

}  // namespace fracgpu::node
