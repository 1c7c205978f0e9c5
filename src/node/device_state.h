#pragma once
// The node's GPUs as the node plugin currently advertises them, with health, and a change counter
// that the device plugin's ListAndWatch and registration loop, and the DRA driver's
// ResourceSlice loop, wait on.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/device.h"
#include "node/config.h"
#include "nvml/gpu_source.h"

namespace fracgpu::node {

/// GPUs + health + change notification. Thread-safe.
class DeviceState {
 public:
  DeviceState(std::vector<nvml::GpuInfo> gpus, DeviceConfig config);

  /// The register entries (BuildDeviceInfos) under the current health.
  std::vector<core::DeviceInfo> Devices() const;
  /// Marks one GPU unhealthy (it never recovers, as in HAMi); returns true when this changed
  /// anything. An unknown UUID changes nothing.
  bool MarkUnhealthy(const std::string& uuid);
  /// Marks every GPU unhealthy (an Xid event that names no device).
  bool MarkAllUnhealthy();
  /// Increases on every change.
  uint64_t version() const;
  /// Blocks until version() != `seen`, Wake() is called, or `timeout` passes; returns version().
  uint64_t WaitForChange(uint64_t seen, std::chrono::milliseconds timeout);
  /// Wakes every WaitForChange (used at shutdown).
  void Wake();
  const DeviceConfig& config() const { return config_; }

 private:
  const std::vector<nvml::GpuInfo> gpus_;
  const DeviceConfig config_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> unhealthy_;
  uint64_t version_ = 1;
  uint64_t wakes_ = 0;
};

}  // namespace fracgpu::node
