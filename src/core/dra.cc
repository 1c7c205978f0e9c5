#include "core/dra.h"

#include <algorithm>

namespace fracgpu::core {

int64_t ConsumedAmount(const CapacityPolicy& p, int64_t requested) {
  int64_t amount = requested < 0 ? (p.has_policy ? p.default_value : p.total) : requested;
  if (p.has_policy) {
    amount = std::max(amount, p.min);
    if (p.step > 0 && amount > p.min)
      amount = p.min + (amount - p.min + p.step - 1) / p.step * p.step;
    if (p.max > 0 && amount > p.max) return -1;
  }
  return amount > p.total ? -1 : amount;
}

Result<std::vector<DeviceTake>> FirstFitDevices(std::vector<DeviceUsage>* usage,
                                                const ShareRequest& request) {
  std::vector<DeviceUsage>& u = *usage;
  std::vector<DeviceTake> taken;
  auto is_taken = [&](size_t i) {
    return std::any_of(taken.begin(), taken.end(),
                       [&](const DeviceTake& t) { return t.device == i; });
  };
  for (int32_t k = 0; k < request.count; ++k) {
    bool placed = false;
    for (size_t i = 0; i < u.size() && !placed; ++i) {
      const DeviceUsage& d = u[i];
      if (is_taken(i) || d.allocated_whole) continue;
      if (request.selector && !request.selector(d)) continue;
      DeviceTake t{i, d.multiple_allocations, 0, 0};
      if (!d.multiple_allocations) {
        if (d.shares > 0) continue;
      } else {
        t.memory_mib = ConsumedAmount(d.memory, request.memory_mib);
        t.cores = ConsumedAmount(d.cores, request.cores);
        if (t.memory_mib < 0 || t.cores < 0) continue;
        // Overflow-safe form of used + consumed > total (used may be saturated, dra_wire.h).
        auto over = [](int64_t used, int64_t take, int64_t total) {
          return used > total || take > total - used;
        };
        if (over(d.used_memory, t.memory_mib, d.memory.total) ||
            over(d.used_cores, t.cores, d.cores.total))
          continue;
      }
      taken.push_back(t);
      placed = true;
    }
    if (!placed) {
      return ResourceExhausted("request \"" + request.name + "\": device " + std::to_string(k + 1) +
                               " of " + std::to_string(request.count) + " fits no device");
    }
  }
  for (const DeviceTake& t : taken) {
    DeviceUsage& d = u[t.device];
    if (t.shared) {
      d.used_memory += t.memory_mib;
      d.used_cores += t.cores;
    } else {
      d.allocated_whole = true;
    }
    d.shares++;
  }
  return taken;
}

GpuPick DraFirstFitPick(const FragNode& node, const FragDemand& demand) {
  GpuPick pick;
  if (demand.num_gpus <= 0) return pick;
  std::vector<DeviceUsage> usage(static_cast<size_t>(node.num_gpus));
  for (int g = 0; g < node.num_gpus; ++g) {
    DeviceUsage& d = usage[static_cast<size_t>(g)];
    d.multiple_allocations = true;
    d.cores = {kMilliPerGpu, true, kMilliPerGpu, 0, kMilliPerGpu, 1};
    d.used_cores = kMilliPerGpu - node.gpu_left[g];
  }
  ShareRequest r;
  r.count = demand.num_gpus;
  r.cores = demand.gpu_milli;
  // The type rule as the claim's CEL selector would apply it: the device's model allowed
  // (the selector gets the element of `usage`, so its index is the GPU's).
  r.selector = [&](const DeviceUsage& d) {
    return demand.TypeAllowed(node, static_cast<int>(&d - usage.data()));
  };
  auto taken = FirstFitDevices(&usage, r);
  if (!taken.ok()) return pick;
  for (const DeviceTake& t : *taken) pick.index[pick.count++] = static_cast<int8_t>(t.device);
  return pick;
}

}  // namespace fracgpu::core
