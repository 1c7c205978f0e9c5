#pragma once
// The lock of libvgpu's small bookkeeping tables (the handle table, the pool list, the graph
// records). Hand-written because these tables are touched from inside the host program's CUDA
// calls, where libvgpu.so must not allocate, must not depend on a futex-based mutex a fork
// could leave held, and is held only for a few table operations.
#include <sched.h>

#include <atomic>

namespace fracgpu::vgpu {

/// Test-and-test-and-set spinlock that yields the CPU while it is held. No heap, no system call
/// while uncontended. Not recursive.
class SpinLock {
 public:
  void lock() noexcept {
    while (held_.exchange(true, std::memory_order_acquire)) {
      while (held_.load(std::memory_order_relaxed)) sched_yield();
    }
  }
  void unlock() noexcept { held_.store(false, std::memory_order_release); }
  /// In a forked child: whoever held it in the parent does not exist there.
  void ResetAfterFork() noexcept { held_.store(false, std::memory_order_relaxed); }

 private:
  std::atomic<bool> held_{false};
};

/// Holds a SpinLock for a scope.
class SpinGuard {
 public:
  explicit SpinGuard(SpinLock& lock) noexcept : lock_(lock) { lock_.lock(); }
  ~SpinGuard() { lock_.unlock(); }
  SpinGuard(const SpinGuard&) = delete;
  SpinGuard& operator=(const SpinGuard&) = delete;

 private:
  SpinLock& lock_;
};

}  // namespace fracgpu::vgpu
