#pragma once
// Helpers shared by the memory, pool and context hooks.
#include <cstdint>

namespace fracgpu::vgpu {

/// Re-reads the reservation of every tracked pool on device `dev` (-1: all devices) and
/// charges or returns the difference, so pools are charged what they reserve, not what is
/// live. Called at synchronisation points and before refusing an allocation.
void ReconcilePools(int dev) noexcept;

/// The driver freed every allocation of device `dev` in this process (its last context went
/// away): returns their charges and forgets them (plain, pool, array records; pools too).
void DropDeviceCharges(int dev) noexcept;

/// Resets pool and context bookkeeping in a forked child.
void PoolsResetAfterFork() noexcept;
void ContextsResetAfterFork() noexcept;
inline void AccountingResetAfterFork() noexcept {
  PoolsResetAfterFork();
  ContextsResetAfterFork();
}

}  // namespace fracgpu::vgpu
