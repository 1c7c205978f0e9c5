#include "node/park.h"

#include <utility>

namespace fracgpu::node {

namespace {

std::string Call(const char* name, int pid, int rc) {
  return std::string(name) + " of pid " + std::to_string(pid) + " answered CUresult " +
         std::to_string(rc);
}

// "" when `pid` is still the process verified (or nothing checks), else why not.
std::string NotSame(const ParkTarget& target, int pid) {
  if (!target.same) return "";
  std::string why = target.same(pid);
  return why.empty() ? ""
                     : "pid " + std::to_string(pid) + " is no longer the process verified: " + why;
}

}  // namespace

Parker::Parker(CheckpointDriver driver, std::vector<std::string> allowed_drivers,
               unsigned lock_timeout_ms)
    : driver_(std::move(driver)),
      allowed_drivers_(std::move(allowed_drivers)),
      lock_timeout_ms_(lock_timeout_ms) {}

std::string Parker::UnlockAll(const ParkTarget& target, size_t n) const {
  std::string failed;
  for (size_t i = 0; i < n; ++i) {
    const int pid = target.pids[i];
    if (std::string why = NotSame(target, pid); !why.empty()) {
      failed += (failed.empty() ? "" : "; ") + why + " (not unlocked)";
      continue;
    }
    const int rc = driver_.unlock(pid);
    if (rc != kCudaSuccess) failed += (failed.empty() ? "" : "; ") + Call("Unlock", pid, rc);
  }
  return failed;
}

ParkResult Parker::Park(const ParkTarget& target) const {
  ParkResult r;
  if (target.pids.empty()) {
    r.outcome = ParkOutcome::kIneligible;
    r.reason = "no CUDA process to park";
    return r;
  }
  // 1. The gates before anything is touched.
  CheckpointEligibility e = CheckpointEligible(target.facts(), allowed_drivers_);
  if (!e.eligible()) {
    r.outcome = ParkOutcome::kIneligible;
    r.reason = e.reason;
    return r;
  }
  const uint64_t free_before = target.free_bytes();
  // 2. Lock each; busy or failed: unlock the ones locked.
  for (size_t i = 0; i < target.pids.size(); ++i) {
    if (std::string why = NotSame(target, target.pids[i]); !why.empty()) {
      const std::string undo = UnlockAll(target, i);
      r.outcome = undo.empty() ? ParkOutcome::kIneligible : ParkOutcome::kFailed;
      r.reason = why + " (not locked)" + (undo.empty() ? "" : "; undo: " + undo);
      return r;
    }
    const int rc = driver_.lock(target.pids[i], lock_timeout_ms_);
    if (rc == kCudaSuccess) continue;
    const std::string undo = UnlockAll(target, i);
    r.outcome =
        rc == kCudaErrorNotReady && undo.empty() ? ParkOutcome::kBusy : ParkOutcome::kFailed;
    r.reason = Call("Lock", target.pids[i], rc) +
               (rc == kCudaErrorNotReady ? " (busy: work in flight past the timeout)" : "") +
               (undo.empty() ? "" : "; undo: " + undo);
    return r;
  }
  // 3. The facts again, every process locked.
  e = CheckpointEligible(target.facts(), allowed_drivers_);
  if (!e.eligible()) {
    const std::string undo = UnlockAll(target, target.pids.size());
    r.outcome = undo.empty() ? ParkOutcome::kIneligible : ParkOutcome::kFailed;
    r.reason = "after Lock: " + e.reason + (undo.empty() ? "" : "; undo: " + undo);
    return r;
  }
  const uint64_t device_bytes = target.facts().device_bytes;
  // 4. Checkpoint each; a failure restores the ones checkpointed and unlocks all.
  auto undo_checkpoints = [&](size_t n) {
    std::string failed;
    for (size_t i = 0; i < n; ++i) {
      if (std::string why = NotSame(target, target.pids[i]); !why.empty()) {
        failed += (failed.empty() ? "" : "; ") + why + " (not restored)";
        continue;
      }
      const int rc = driver_.restore(target.pids[i]);
      if (rc != kCudaSuccess)
        failed += (failed.empty() ? "" : "; ") + Call("Restore", target.pids[i], rc);
    }
    const std::string unlocked = UnlockAll(target, target.pids.size());
    if (!unlocked.empty()) failed += (failed.empty() ? "" : "; ") + unlocked;
    return failed;
  };
  for (size_t i = 0; i < target.pids.size(); ++i) {
    const int rc = driver_.checkpoint(target.pids[i]);
    if (rc == kCudaSuccess) continue;
    const std::string undo = undo_checkpoints(i);
    r.outcome = ParkOutcome::kFailed;
    r.reason = Call("Checkpoint", target.pids[i], rc) + (undo.empty() ? "" : "; undo: " + undo);
    return r;
  }
  // 5. NVML must show the memory released.
  const uint64_t free_after = target.free_bytes();
  const uint64_t released = free_after > free_before ? free_after - free_before : 0;
  if (released < device_bytes) {
    const std::string undo = undo_checkpoints(target.pids.size());
    r.outcome = ParkOutcome::kFailed;
    r.reason = "NVML shows " + std::to_string(released) + " bytes released, below the " +
               std::to_string(device_bytes) + " the processes hold; the park was undone" +
               (undo.empty() ? "" : "; undo: " + undo);
    return r;
  }
  r.outcome = ParkOutcome::kParked;
  r.released_bytes = released;
  r.charged_bytes = device_bytes;
  return r;
}

ParkResult Parker::Wake(const ParkTarget& target, uint64_t parked_bytes) const {
  ParkResult r;
  // The processes still the ones parked; the others (exited, their PID reused) are left alone.
  ParkTarget live = target;
  live.pids.clear();
  std::string gone;
  for (int pid : target.pids) {
    if (std::string why = NotSame(target, pid); !why.empty()) {
      r.gone.push_back(pid);
      gone += (gone.empty() ? "" : "; ") + why;
    } else {
      live.pids.push_back(pid);
    }
  }
  if (live.pids.empty()) {
    r.outcome = ParkOutcome::kAwake;  // nothing left to restore: no room needed
    r.reason = gone;
    return r;
  }
  ParkResult w = WakeLive(live, parked_bytes);
  w.gone = std::move(r.gone);
  if (!gone.empty()) w.reason = gone + (w.reason.empty() ? "" : "; " + w.reason);
  return w;
}

ParkResult Parker::WakeLive(const ParkTarget& target, uint64_t parked_bytes) const {
  ParkResult r;
  const uint64_t free_now = target.free_bytes();
  if (free_now < parked_bytes) {
    r.outcome = ParkOutcome::kNoRoom;
    r.reason = "the GPU has " + std::to_string(free_now) + " bytes free, below the " +
               std::to_string(parked_bytes) + " the parked processes need; Restore not attempted";
    return r;
  }
  for (size_t i = 0; i < target.pids.size(); ++i) {
    int state = -1;
    const int got = driver_.get_state(target.pids[i], &state);
    if (got != kCudaSuccess) {
      r.outcome = ParkOutcome::kFailed;
      r.reason = Call("GetState", target.pids[i], got);
      return r;
    }
    if (state == kProcessStateLocked) continue;  // restored by an earlier Wake
    if (std::string why = NotSame(target, target.pids[i]); !why.empty()) {
      r.outcome = ParkOutcome::kFailed;  // exited between the check above and now
      r.reason = why + " (not restored)";
      return r;
    }
    const int rc = driver_.restore(target.pids[i]);
    if (rc == kCudaSuccess) continue;
    // The ones restored stay LOCKED with their memory: waking again restores the rest. They are
    // not checkpointed back: their memory is theirs, and a second copy costs the tenant time.
    r.outcome = rc == kCudaErrorOutOfMemory ? ParkOutcome::kNoRoom : ParkOutcome::kFailed;
    r.reason = Call("Restore", target.pids[i], rc) + " (" + std::to_string(i) + " of " +
               std::to_string(target.pids.size()) + " restored, still locked)";
    return r;
  }
  const std::string failed = UnlockAll(target, target.pids.size());
  if (!failed.empty()) {
    r.outcome = ParkOutcome::kFailed;
    r.reason = failed;
    return r;
  }
  r.outcome = ParkOutcome::kAwake;
  return r;
}

}  // namespace fracgpu::node
