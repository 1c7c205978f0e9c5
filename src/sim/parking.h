#pragma once
// Notebook parking in the simulator (issue 36 item 6; the model and its sources are in
// docs/simulate.md "Idle notebooks: parking and lending"). On the packing a policy reached at
// 100 % arrived, a share of the resident fractional pods are notebooks that alternate active
// and idle periods; the pods that arrive after 100 % are lower-priority borrowers that queue
// for GPU memory. Without parking they run only on memory no pod holds; with parking they may
// also run on the memory of notebooks idle longer than a threshold, which are parked (their
// device memory copied to the host) when a borrower needs it, and evicted when the owner's
// next active period begins; the owner then waits for its memory to be restored. Time is
// continuous (seconds), event-driven, single-threaded and deterministic.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "sim/cluster.h"
#include "sim/simulator.h"
#include "sim/workload.h"

namespace fracgpu::sim {

/// One GPU of the parking model.
struct ParkGpu {
  int64_t devmem_mib = 0;  ///< device memory, MiB (a pod's memory = its share × this)
  int32_t type = 0;        ///< index into SimCluster::type_table (a borrower's type_mask bit)
  int32_t held_milli = 0;  ///< milli-GPU held by resident pods (notebooks included), ≤ 1000
};

/// A resident notebook: its share of one GPU and its active periods.
struct ParkNotebook {
  int32_t gpu = 0;    ///< index into ParkInput::gpus
  int32_t milli = 0;  ///< share of the GPU, milli-GPU (memory and SMs: the trace asks both alike)
  /// Active periods [start, end) in seconds from 0, sorted, disjoint, within [0, horizon];
  /// idle between them.
  std::vector<std::pair<double, double>> active;
  /// When the idle period that holds t = 0 began (≤ 0, seconds); ignored when the first
  /// active period starts at 0.
  double idle_since = 0;
};

/// A borrower: a lower-priority single-GPU pod that queues for memory.
struct ParkBorrower {
  double arrival_s = 0;        ///< seconds from 0
  int32_t milli = 0;           ///< share of one GPU, milli-GPU (10..1000, a multiple of 10)
  double duration_s = 0;       ///< run time it needs without interruption, seconds (> 0)
  uint64_t type_mask = ~0ULL;  ///< GPU types it may use (bit i = ParkGpu::type i)
};

/// Everything one parking run reads.
struct ParkInput {
  std::vector<ParkGpu> gpus;
  std::vector<ParkNotebook> notebooks;
  std::vector<ParkBorrower> borrowers;  ///< sorted by arrival_s
  double horizon_s = 0;                 ///< the run covers [0, horizon_s), seconds
  /// Milli-GPU of the resident pods that are not notebooks: assumed busy for the whole
  /// horizon (the trace gives no utilisation), counted in work per GPU on both sides.
  int64_t other_busy_milli = 0;
};

/// One setting: without parking (park = false), or with parking at an idle threshold.
struct ParkSettings {
  bool park = false;
  double idle_threshold_s = 1800;  ///< a notebook idle this long may be parked, seconds
  /// Copy rate of a park and of a restore, GiB/s. Assumed, not measured: to be replaced by
  /// the fake driver's and a real GPU's figures (issue 36 items 5 and 7).
  double bandwidth_gib_s = 4;
  double fixed_s = 1;        ///< fixed cost of each park and each restore, seconds (assumed)
  bool keep_events = false;  ///< record every park, wake, start and eviction in events
};

/// One thing that happened (ParkSettings::keep_events), for tests and inspection.
struct ParkEvent {
  enum Kind { kPark, kWake, kStart, kEvict, kFinish };
  Kind kind = kPark;
  double t = 0;  ///< seconds
  int32_t gpu = 0;
  int32_t who = 0;  ///< notebook index (kPark, kWake) or borrower index (the others)
};

/// What one parking run measured.
struct ParkResult {
  /// GPU work done per GPU: Σ share × busy time of every pod (notebooks while active and
  /// not waiting for a restore, borrowers' progress not lost to an eviction, other residents
  /// throughout) / (GPUs × horizon). A fraction in [0, 1].
  double work_per_gpu = 0;
  double borrower_work_per_gpu = 0;     ///< the borrowers' part of work_per_gpu (fraction)
  double notebook_active_fraction = 0;  ///< Σ active time / (notebooks × horizon), fraction
  int64_t notebooks = 0;                ///< notebooks in the input
  int64_t borrowers = 0;                ///< borrowers that arrived
  int64_t started = 0;                  ///< borrowers that ran at least once
  int64_t completed = 0;                ///< borrowers that finished within the horizon
  /// Time each borrower spent queued (all its queued intervals; censored at the horizon for
  /// one still queued), seconds: mean and 95th percentile (nearest rank) over all borrowers.
  double wait_mean_s = 0;
  double wait_p95_s = 0;
  int64_t parks = 0;      ///< notebooks parked
  int64_t wakes = 0;      ///< owners woken from parked (each waited for its restore)
  double wake_p50_s = 0;  ///< owners' wake waits, 50th / 99th percentile (nearest rank), s
  double wake_p99_s = 0;
  int64_t evictions = 0;          ///< borrower runs cut short by an owner's wake
  double lost_gpu_hours = 0;      ///< Σ share × run time thrown away by evictions, GPU-hours
  double max_parked_gib = 0;      ///< most device memory parked at once, GiB
  std::vector<ParkEvent> events;  ///< only with keep_events
};

/// Runs one setting on `in`. The same input gives the same result. Invariant, checked after
/// every event: on every GPU, resident memory not parked + borrowed memory ≤ the GPU, and
/// an active notebook is never parked. Errors: kInvalidArgument for a malformed input (a
/// notebook or borrower on no GPU, shares outside 1..1000, unsorted or overlapping periods);
/// kInternal if the invariant ever breaks (a bug).
Result<ParkResult> SimulateParking(const ParkInput& in, const ParkSettings& settings);

/// The notebook idleness model (docs/simulate.md gives each figure's source and what is
/// assumed). Active periods are exponential with mean active_mean_s; an idle period is, with
/// probability think_prob, a "think time" gap (exponential, mean think_mean_s), otherwise an
/// absence (exponential, mean away_mean_s).
struct NotebookModel {
  double active_mean_s = 15 * 60;
  double think_prob = 0.7;
  double think_mean_s = 5 * 60;
  double away_mean_s = 7 * 3600;

  /// Long-run fraction of time active: A / (A + p·T + (1 − p)·W).
  double ActiveFraction() const {
    return active_mean_s /
           (active_mean_s + think_prob * think_mean_s + (1 - think_prob) * away_mean_s);
  }
};

/// How a ParkInput is drawn from one policy run.
struct ParkBuild {
  double notebook_share =
      0.5;  ///< fraction of resident single-GPU fractional pods that are notebooks
  double horizon_s = 24 * 3600;
  NotebookModel model;
};

/// Builds the parking input from a run with keep_placements: the residents are the pods the
/// policy placed among the arrivals up to 100 % of the GPU capacity (cumulative request);
/// each resident single-GPU pod with a share below 1000 is a notebook with probability
/// notebook_share (stream 3 of `seed`), its periods drawn from the model (same stream); the
/// single-GPU arrivals after 100 % are the borrowers (multi-GPU ones are left out), arriving
/// as a Poisson process over the horizon (stream 4), each needing its trace run time
/// (deletion_time − scheduled_time when both are known and positive, else a uniform draw
/// from those of the trace's GPU pods; stream 4). Errors: kInvalidArgument when the run kept
/// no placements or names a GPU the cluster lacks.
Result<ParkInput> BuildParkInput(const SimCluster& cluster, const SimWorkload& workload,
                                 const RunResult& run, const ParkBuild& build, uint64_t seed);

}  // namespace fracgpu::sim
