#pragma once
// SIGTERM/SIGINT → StopSignal, for the long-running subcommands (device-plugin, DRA,
// monitor, scheduler, ui).
#include <signal.h>

#include <atomic>
#include <thread>

#include "base/clock.h"

namespace fracgpu::base {

/// Turns SIGTERM/SIGINT into `stop->Stop()`: blocks both signals in the calling thread (so in
/// every thread started after it) and waits for them with sigwait in a dedicated thread.
/// Create it before any other thread of the process. Destroying it wakes and joins that thread.
class SignalWatcher {
 public:
  explicit SignalWatcher(StopSignal* stop);
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

 private:
  sigset_t set_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace fracgpu::base
