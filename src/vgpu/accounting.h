#pragma once
// Helpers shared by the memory, pool, graph and context hooks.
#include <atomic>
#include <cstdint>

#include "vgpu/cuda_api.h"

namespace fracgpu::vgpu {

/// Re-reads the reservation of every tracked stream-ordered pool and of the graph memory pool
/// on device `dev` (-1: all devices) and charges or returns the difference, so pools are
/// charged what they reserve, not what is live. Called at synchronisation points and before
/// refusing an allocation.
void ReconcilePools(int dev) noexcept;
/// The stream-ordered pools only (pools.cc); takes the pool spinlock.
void ReconcileStreamPools(int dev) noexcept;
/// The graph memory pools only (hooks_graph.cc); takes the graph spinlock. Nothing to do (one
/// relaxed load) while no graph with memory nodes has been instantiated.
void ReconcileGraphMemory(int dev) noexcept;

/// The driver freed every allocation of device `dev` in this process (its last context went
/// away): returns their charges and forgets them (plain, pool, array records; pools and
/// graph memory too).
void DropDeviceCharges(int dev) noexcept;
/// Graph memory of device `dev` (hooks_graph.cc), for DropDeviceCharges.
void GraphsForgetDevice(int dev) noexcept;

/// Executable graphs with graph memory whose memory is not reserved yet (never uploaded or
/// launched, or released by cuDeviceGraphMemTrim). While it is 0 a graph launch does no
/// accounting at all: one relaxed load (hooks_launch.cc).
extern std::atomic<int> g_graph_pending;
/// cuGraphLaunch(_ptsz) while some executable graph is pending: charges the growth of the graph
/// pool that launching `exec` can cause before the driver sees it (refusal:
/// CUDA_ERROR_OUT_OF_MEMORY, nothing launched), then settles to what the driver reserved. An
/// exec that is not pending goes straight to the driver; no lock is taken for it.
CUresult GraphLaunchReserving(CUgraphExec exec, CUstream stream, bool ptsz) noexcept;

/// Resets pool, graph and context bookkeeping in a forked child.
void PoolsResetAfterFork() noexcept;
void GraphsResetAfterFork() noexcept;
void ContextsResetAfterFork() noexcept;
inline void AccountingResetAfterFork() noexcept {
  PoolsResetAfterFork();
  GraphsResetAfterFork();
  ContextsResetAfterFork();
}

}  // namespace fracgpu::vgpu
