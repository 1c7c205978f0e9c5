#pragma once
// Issue 36's journey on a Cluster whose node parks (ClusterOptions::park_idle_s,
// docs/reclaim.md): a notebook opted in to parking writes known bytes to its GPU memory and goes
// idle; a borrower is pending because the GPU is full; the node's agent parks the notebook and
// publishes what it lends; the scheduler places the borrower on the lent memory and it
// allocates; the notebook's next CUDA call (an unhooked copy, the wake stub's path) waits while
// the agent evicts the borrower and restores it. Run by the journey test (which asserts each
// observation), bench_wake_latency (which times the wake) and the sandbox (which narrates it).
//
// The sizes: the notebook's slice is the whole GPU, it holds `hold_mib`; the borrower's slice
// `borrow_mib` fits only on the lent memory, and while the borrower holds it the notebook's
// memory does not fit back (gpu − borrow < hold), so the wake must evict.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cluster.h"

namespace fracgpu::e2e {

struct ParkJourneyOptions {
  std::string ns = "ml";
  std::string notebook = "nb";  ///< the notebook pod (one container, "main")
  std::string borrower = "borrower";
  std::string node;          ///< a node of the cluster that parks
  int gpu = 0;               ///< the node's GPU index (it must be empty)
  int64_t hold_mib = 192;    ///< what the notebook allocates
  int64_t borrow_mib = 128;  ///< the borrower's slice, all of it allocated
};

/// What the journey saw, step by step. Sizes in bytes unless named MiB; times in ms.
struct ParkJourney {
  /// "" when every step happened within its bounded wait (30 s each), else the first step that
  /// did not, with what was seen. The fields after it are left as they were.
  std::string failed;
  std::string uuid;                                                          ///< the GPU
  std::optional<NodeAgent::NvmlMemory> empty, held, parked, lending, awake;  ///< NVML per step
  std::vector<std::string> notebook_lines;  ///< vgpu_app's output, at the end
  uint64_t charged_before = 0;              ///< the notebook's slot `used` before it idled
  uint64_t charged_idle = 0;                ///< … just before its first call after idle
  uint64_t charged_after = 0;               ///< … after that call returned
  bool poked = false;                       ///< "poke 0": the pattern was written
  bool bytes_intact = false;                ///< "peek 0 1": read back intact after the wake
  std::string borrower_reason;  ///< the extender's FilteringFailed Event on it (nothing lent yet)
  std::string lent_record;      ///< fracgpu.io/lent-memory once the GPU lent
  int64_t lent_mib = 0;         ///< what the record lends on the GPU
  std::string borrower_gpu;     ///< the borrower's granted GPU
  int64_t borrower_granted_mib = 0;
  bool borrower_allocated = false;  ///< "alloc 0" in the borrower
  bool borrower_gone = false;       ///< deleted from the API server after the wake
  nlohmann::json reclaim_event;     ///< the GPUMemoryReclaimed Event (null when none)
  double wake_ms = 0;  ///< the first CUDA call after idle → its return (CLOCK_MONOTONIC)
};

/// Runs the journey (creates the two pods in `o.ns` as alice). Leaves the notebook running (it
/// sleeps) and the borrower evicted.
ParkJourney RunParkJourney(Cluster& cluster, const ParkJourneyOptions& o);

}  // namespace fracgpu::e2e
