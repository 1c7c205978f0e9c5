#include "node/health.h"

#include <spdlog/spdlog.h>

#include <charconv>

namespace fracgpu::node {

namespace {

Status ParseXidList(const std::string& value, const std::string& var, std::set<uint64_t>* out) {
  size_t start = 0;
  while (start <= value.size()) {
    size_t comma = value.find(',', start);
    if (comma == std::string::npos) comma = value.size();
    std::string item = value.substr(start, comma - start);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) {
      uint64_t xid = 0;
      auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), xid);
      if (ec != std::errc() || ptr != item.data() + item.size()) {
        return InvalidArgument(var +
                               " must be all, xids or a comma list of Xid numbers; got entry \"" +
                               item.substr(0, 32) + "\"");
      }
      out->insert(xid);
    }
    start = comma + 1;
  }
  return Status::Ok();
}

}  // namespace

Result<XidPolicy> ParseXidPolicy(const std::string& disable_env, const std::string& enable_env) {
  XidPolicy policy;
  if (disable_env == "all" || disable_env == "xids") {
    policy.enabled = false;
  } else {
    FRACGPU_RETURN_IF_ERROR(ParseXidList(disable_env, "DP_DISABLE_HEALTHCHECKS", &policy.ignored));
  }
  std::set<uint64_t> enable;
  FRACGPU_RETURN_IF_ERROR(ParseXidList(enable_env, "DP_ENABLE_HEALTHCHECKS", &enable));
  for (uint64_t x : enable) policy.ignored.erase(x);
  return policy;
}

bool ApplyXidEvent(const nvml::XidEvent& event, const XidPolicy& policy, DeviceState* state) {
  if (!policy.Counts(event.xid)) {
    spdlog::info("Xid {} on {} ignored (application error)", event.xid,
                 event.uuid.empty() ? "all GPUs" : event.uuid);
    return false;
  }
  spdlog::error("Xid {} on {}: marking unhealthy", event.xid,
                event.uuid.empty() ? "all GPUs" : event.uuid);
  return event.uuid.empty() ? state->MarkAllUnhealthy() : state->MarkUnhealthy(event.uuid);
}

Status WatchHealth(nvml::GpuSource* source, const XidPolicy& policy, DeviceState* state,
                   base::StopSignal* stop, const std::function<void()>& on_change,
                   std::chrono::milliseconds wait_step) {
  if (!policy.enabled) return Status::Ok();
  while (!stop->stopped()) {
    auto event = source->WaitXid(wait_step);
    if (!event.ok()) return event.status();
    if (*event && ApplyXidEvent(**event, policy, state) && on_change) on_change();
  }
  return Status::Ok();
}

}  // namespace fracgpu::node
