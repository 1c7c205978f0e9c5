// CheckpointEligible (node/checkpoint_eligibility.h): one row per gate, each failing exactly one
// fact of an otherwise eligible container, with the gate expected and a piece of the reason.
#include "node/checkpoint_eligibility.h"

#include <gtest/gtest.h>

#include <functional>

#include "api/region.h"

namespace fracgpu::node {
namespace {

constexpr uint64_t kMiB = 1024ull * 1024ull;

CheckpointFacts Eligible() {
  CheckpointFacts f;
  f.driver_version = "580.95.05";
  f.persistence_mode = true;
  f.process_uses = {api::kSlotUsesRecorded, api::kSlotUsesRecorded};
  f.device_bytes = 4096 * kMiB;
  f.host_limit_known = true;
  f.host_limit_bytes = 8192 * kMiB;
  f.host_used_bytes = 4096 * kMiB;  // exactly room for the 4096 MiB copy
  return f;
}

struct Row {
  const char* name;
  std::function<void(CheckpointFacts&)> change;
  CheckpointGate gate;
  const char* reason_part;
};

TEST(CheckpointEligibility, EachGateFailsOnItsFactAlone) {
  const std::vector<std::string> allow = {"580.95.05", "575."};
  const std::vector<Row> rows = {
      {"eligible as is", [](CheckpointFacts&) {}, CheckpointGate::kEligible, ""},
      {"a prefix entry allows its branch",
       [](CheckpointFacts& f) { f.driver_version = "575.57.08"; }, CheckpointGate::kEligible, ""},
      {"no memory limit: no host gate",
       [](CheckpointFacts& f) {
         f.host_limit_bytes = 0;
         f.host_used_bytes = 1ull << 40;
       },
       CheckpointGate::kEligible, ""},
      {"a fact NVML could not give",
       [](CheckpointFacts& f) { f.unknown = "nvmlDeviceGetMigMode failed: NVML error 999"; },
       CheckpointGate::kFactsUnknown, "could not be read: nvmlDeviceGetMigMode failed"},
      {"driver off the list", [](CheckpointFacts& f) { f.driver_version = "580.95.06"; },
       CheckpointGate::kDriverNotAllowed, "'580.95.06'"},
      {"a prefix is not a substring", [](CheckpointFacts& f) { f.driver_version = "5750.1"; },
       CheckpointGate::kDriverNotAllowed, "'5750.1'"},
      {"driver unknown", [](CheckpointFacts& f) { f.driver_version = ""; },
       CheckpointGate::kDriverNotAllowed, "allow-list"},
      {"persistence off", [](CheckpointFacts& f) { f.persistence_mode = false; },
       CheckpointGate::kNoPersistence, "persistence"},
      {"MIG", [](CheckpointFacts& f) { f.mig_enabled = true; }, CheckpointGate::kMig, "MIG"},
      {"MPS", [](CheckpointFacts& f) { f.mps_active = true; }, CheckpointGate::kMps, "MPS"},
      {"no process", [](CheckpointFacts& f) { f.process_uses.clear(); },
       CheckpointGate::kNoProcesses, "no CUDA process"},
      {"an old libvgpu's slot", [](CheckpointFacts& f) { f.process_uses[1] = 0; },
       CheckpointGate::kUsesUnknown, "process 1"},
      {"a use bit a newer libvgpu records",
       [](CheckpointFacts& f) { f.process_uses[0] |= 1u << 9; }, CheckpointGate::kUsesUnknown,
       "bits 512"},
      {"managed memory",
       [](CheckpointFacts& f) { f.process_uses[1] |= api::kSlotUsedManagedMemory; },
       CheckpointGate::kManagedMemory, "process 1 allocated managed memory"},
      {"IPC memory", [](CheckpointFacts& f) { f.process_uses[0] |= api::kSlotUsedIpcMemory; },
       CheckpointGate::kIpc, "process 0 used IPC memory handles"},
      {"IPC events", [](CheckpointFacts& f) { f.process_uses[0] |= api::kSlotUsedIpcEvent; },
       CheckpointGate::kIpc, "IPC event handles"},
      {"VMM handle", [](CheckpointFacts& f) { f.process_uses[1] |= api::kSlotSharedVmmHandle; },
       CheckpointGate::kSharedVmm, "VMM shareable handle"},
      {"shared pool", [](CheckpointFacts& f) { f.process_uses[0] |= api::kSlotSharedPool; },
       CheckpointGate::kSharedPool, "memory pool"},
      {"a driver function without a wake trampoline",
       [](CheckpointFacts& f) { f.process_uses[1] |= api::kSlotUnwakeable; },
       CheckpointGate::kUnwakeable, "process 1 holds a CUDA driver function without a wake"},
      {"one byte short for the host copy", [](CheckpointFacts& f) { f.host_used_bytes += 1; },
       CheckpointGate::kHostMemory, "memory limit of 8192 MiB cannot hold the 4096 MiB host copy"},
      {"a limit that could not be read is not no limit",
       [](CheckpointFacts& f) {
         f.host_limit_known = false;
         f.host_limit_bytes = 0;
       },
       CheckpointGate::kHostMemory, "could not be read"},
      {"already over the limit", [](CheckpointFacts& f) { f.host_used_bytes = 9000 * kMiB; },
       CheckpointGate::kHostMemory, "beside the 9000 MiB in use"},
      // Order: the earlier gate is named when several fail.
      {"persistence before managed memory",
       [](CheckpointFacts& f) {
         f.persistence_mode = false;
         f.process_uses[0] |= api::kSlotUsedManagedMemory;
       },
       CheckpointGate::kNoPersistence, "persistence"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    CheckpointFacts f = Eligible();
    row.change(f);
    CheckpointEligibility e = CheckpointEligible(f, allow);
    EXPECT_EQ(e.gate, row.gate);
    EXPECT_EQ(e.eligible(), row.gate == CheckpointGate::kEligible);
    if (row.gate == CheckpointGate::kEligible) {
      EXPECT_EQ(e.reason, "");
    } else {
      EXPECT_NE(e.reason.find(row.reason_part), std::string::npos) << e.reason;
    }
  }
}

TEST(CheckpointEligibility, AnEmptyAllowListAllowsNoDriver) {
  CheckpointFacts f = Eligible();
  EXPECT_EQ(CheckpointEligible(f, {}).gate, CheckpointGate::kDriverNotAllowed);
}

}  // namespace
}  // namespace fracgpu::node
