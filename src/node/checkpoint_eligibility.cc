#include "node/checkpoint_eligibility.h"

#include "api/region.h"

namespace fracgpu::node {
namespace {

bool DriverAllowed(const std::string& version, const std::vector<std::string>& allowed) {
  if (version.empty()) return false;
  for (const std::string& a : allowed) {
    if (a.empty()) continue;
    if (a.back() == '.' ? version.rfind(a, 0) == 0 : version == a) return true;
  }
  return false;
}

CheckpointEligibility Fail(CheckpointGate gate, std::string reason) {
  return {gate, std::move(reason)};
}

std::string MiB(uint64_t bytes) { return std::to_string(bytes / (1024 * 1024)) + " MiB"; }

}  // namespace

CheckpointEligibility CheckpointEligible(const CheckpointFacts& f,
                                         const std::vector<std::string>& allowed_drivers) {
  if (!f.unknown.empty())
    return Fail(CheckpointGate::kFactsUnknown, "a fact could not be read: " + f.unknown);
  if (!DriverAllowed(f.driver_version, allowed_drivers))
    return Fail(CheckpointGate::kDriverNotAllowed,
                "driver version '" + f.driver_version + "' is not on the checkpoint allow-list");
  if (!f.persistence_mode)
    return Fail(CheckpointGate::kNoPersistence, "persistence mode is off on the GPU");
  if (f.mig_enabled) return Fail(CheckpointGate::kMig, "MIG is enabled on the GPU");
  if (f.mps_active) return Fail(CheckpointGate::kMps, "an MPS server runs on the GPU");
  if (f.process_uses.empty())
    return Fail(CheckpointGate::kNoProcesses, "no CUDA process is recorded in the region");
  struct Bit {
    uint32_t bit;
    CheckpointGate gate;
    const char* what;
  };
  static constexpr Bit kBits[] = {
      {api::kSlotUsedManagedMemory, CheckpointGate::kManagedMemory, "allocated managed memory"},
      {api::kSlotUsedIpcMemory, CheckpointGate::kIpc, "used IPC memory handles"},
      {api::kSlotUsedIpcEvent, CheckpointGate::kIpc, "used IPC event handles"},
      {api::kSlotSharedVmmHandle, CheckpointGate::kSharedVmm,
       "exported or imported a VMM shareable handle"},
      {api::kSlotSharedPool, CheckpointGate::kSharedPool,
       "exported or imported a memory pool or pool pointer"},
      {api::kSlotUnwakeable, CheckpointGate::kUnwakeable,
       "holds a CUDA driver function without a wake trampoline (its call while parked would "
       "never ask for the wake)"},
  };
  for (size_t i = 0; i < f.process_uses.size(); ++i)
    if ((f.process_uses[i] & api::kSlotUsesRecorded) == 0)
      return Fail(CheckpointGate::kUsesUnknown,
                  "process " + std::to_string(i) +
                      "'s libvgpu.so does not record managed memory or IPC use");
  uint32_t known = api::kSlotUsesRecorded;
  for (const Bit& b : kBits) known |= b.bit;
  for (size_t i = 0; i < f.process_uses.size(); ++i)
    if ((f.process_uses[i] & ~known) != 0)
      return Fail(CheckpointGate::kUsesUnknown,
                  "process " + std::to_string(i) + " records uses this agent does not know (bits " +
                      std::to_string(f.process_uses[i] & ~known) + ")");
  for (const Bit& b : kBits)
    for (size_t i = 0; i < f.process_uses.size(); ++i)
      if (f.process_uses[i] & b.bit)
        return Fail(b.gate, "process " + std::to_string(i) + " " + b.what);
  if (!f.host_limit_known)
    return Fail(CheckpointGate::kHostMemory, "the pod's memory limit could not be read");
  if (f.host_limit_bytes != 0 && (f.host_used_bytes > f.host_limit_bytes ||
                                  f.device_bytes > f.host_limit_bytes - f.host_used_bytes))
    return Fail(CheckpointGate::kHostMemory, "the pod's memory limit of " +
                                                 MiB(f.host_limit_bytes) + " cannot hold the " +
                                                 MiB(f.device_bytes) + " host copy beside the " +
                                                 MiB(f.host_used_bytes) + " in use");
  return {};
}

}  // namespace fracgpu::node
