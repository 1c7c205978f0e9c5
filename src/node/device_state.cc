#include "node/device_state.h"

#include "node/inventory.h"

namespace fracgpu::node {

DeviceState::DeviceState(std::vector<nvml::GpuInfo> gpus, DeviceConfig config)
    : gpus_(std::move(gpus)), config_(std::move(config)) {}

std::vector<core::DeviceInfo> DeviceState::Devices() const {
  std::lock_guard<std::mutex> lock(mu_);
  return BuildDeviceInfos(gpus_, config_, unhealthy_);
}

bool DeviceState::MarkUnhealthy(const std::string& uuid) {
  std::lock_guard<std::mutex> lock(mu_);
  bool known = false;
  for (const auto& g : gpus_) known = known || g.uuid == uuid;
  if (!known || !unhealthy_.insert(uuid).second) return false;
  ++version_;
  cv_.notify_all();
  return true;
}

bool DeviceState::MarkAllUnhealthy() {
  std::lock_guard<std::mutex> lock(mu_);
  bool changed = false;
  for (const auto& g : gpus_) changed = unhealthy_.insert(g.uuid).second || changed;
  if (changed) {
    ++version_;
    cv_.notify_all();
  }
  return changed;
}

uint64_t DeviceState::version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return version_;
}

uint64_t DeviceState::WaitForChange(uint64_t seen, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t wakes = wakes_;
  cv_.wait_for(lock, timeout, [&] { return version_ != seen || wakes_ != wakes; });
  return version_;
}

void DeviceState::Wake() {
  std::lock_guard<std::mutex> lock(mu_);
  ++wakes_;
  cv_.notify_all();
}

}  // namespace fracgpu::node
