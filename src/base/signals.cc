#include "base/signals.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

namespace fracgpu::base {

SignalWatcher::SignalWatcher(StopSignal* stop) {
  sigemptyset(&set_);
  sigaddset(&set_, SIGTERM);
  sigaddset(&set_, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  thread_ = std::thread([this, stop] {
    int sig = 0;
    sigwait(&set_, &sig);
    if (!done_) spdlog::info("signal {}: stopping", sig);
    stop->Stop();
  });
}

SignalWatcher::~SignalWatcher() {
  done_ = true;
  pthread_kill(thread_.native_handle(), SIGTERM);  // wakes sigwait (blocked in that thread)
  thread_.join();
}

}  // namespace fracgpu::base
