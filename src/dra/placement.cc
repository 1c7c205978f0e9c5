#include "dra/placement.h"

#include "dra/api.h"

namespace fracgpu::dra {

std::string MiBQuantity(int64_t mib) {
  return mib % 1024 == 0 && mib != 0 ? std::to_string(mib / 1024) + "Gi"
                                     : std::to_string(mib) + "Mi";
}

Result<json> FirstFit(std::vector<DeviceUsage>* usage, const ShareRequest& request,
                      const std::string& driver, const std::function<std::string()>& new_share_id) {
  auto taken = core::FirstFitDevices(usage, request);
  if (!taken.ok())
    return Status(taken.status().code(), taken.status().message() + " of driver " + driver);
  json results = json::array();
  for (const core::DeviceTake& t : *taken) {
    const DeviceUsage& u = (*usage)[t.device];
    json r = {
        {"request", request.name}, {"driver", driver}, {"pool", u.pool}, {"device", u.device}};
    if (t.shared) {
      r["shareID"] = new_share_id();
      r["consumedCapacity"] = {{kCapacityMemory, MiBQuantity(t.memory_mib)},
                               {kCapacityCores, std::to_string(t.cores)}};
    }
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace fracgpu::dra
