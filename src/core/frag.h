#pragma once
// The GPU fragmentation measure of Weng et al., "Beware of Fragmentation: Scheduling
// GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX ATC '23 (FGD), as the
// authors' simulator implements it (docs/design/fgd-evaluation.md §2.2 and §3 points 4–6).
//
// Units: CPU in millicores, host memory in MiB, GPU in milli-GPU (1000 = one whole card). A GPU's
// leftover is its unallocated share in milli-GPU; on a fracgpu node it is
// (devcore − used_cores) × 10, so a trace pod's gpu_milli maps to gpucores = gpu_milli / 10.
//
// Nodes are held in a compact fixed-size form (FragNode) because the measure is evaluated
// millions of times per simulation (every candidate GPU of every node for every pod); the
// scheduler converts its NodeState into this form (frag_scheduler.h).

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace fracgpu::core {

/// Most GPUs one FragNode can describe (NVIDIA HGX/DGX systems have at most 16).
inline constexpr int kMaxFragGpus = 16;
/// Most distinct GPU type ids a type mask can name.
inline constexpr int kMaxFragTypes = 64;
/// Milli-GPU in one whole card.
inline constexpr int32_t kMilliPerGpu = 1000;

/// A node as the fragmentation measure and the FGD-paper policies see it.
struct FragNode {
  int64_t cpu_left = 0;  ///< unallocated CPU, millicores
  int64_t mem_left = 0;  ///< unallocated host memory, MiB
  int32_t num_gpus = 0;  ///< GPUs in use of gpu_left / gpu_type (≤ kMaxFragGpus)
  std::array<int32_t, kMaxFragGpus> gpu_left{};  ///< leftover per GPU, milli-GPU, NVML index order
  std::array<uint8_t, kMaxFragGpus> gpu_type{};  ///< type id per GPU (< kMaxFragTypes)
  /// GpuClustering affinity tags of the GPU pods placed here: bit 0 = "share-gpu",
  /// bit n = "<n>-gpu" (whole-card pods with n GPUs, n ≤ 63).
  uint64_t gpu_tags = 0;

  /// Σ leftover over all GPUs, milli-GPU.
  int64_t TotalGpuLeft() const {
    int64_t t = 0;
    for (int g = 0; g < num_gpus; ++g) t += gpu_left[g];
    return t;
  }
};

/// What one pod (or one task shape of the target workload) asks for.
struct FragDemand {
  int64_t cpu_milli = 0;       ///< millicores
  int64_t mem_mib = 0;         ///< host memory, MiB (feasibility only; never in a score or in F)
  int32_t num_gpus = 0;        ///< distinct GPUs; 0 = CPU-only
  int32_t gpu_milli = 0;       ///< share per GPU, milli-GPU (1000 = whole card); 0 when CPU-only
  uint64_t type_mask = ~0ULL;  ///< bit t set = GPUs of type id t are allowed

  /// A GPU-sharing request: one GPU, less than a whole card.
  bool Sharing() const { return num_gpus == 1 && gpu_milli < kMilliPerGpu; }
  /// Total GPU request, milli-GPU.
  int64_t TotalGpuMilli() const { return static_cast<int64_t>(num_gpus) * gpu_milli; }
  /// True when GPU g of `node` has an allowed type.
  bool TypeAllowed(const FragNode& node, int g) const {
    return (type_mask >> node.gpu_type[g]) & 1;
  }
  /// True when GPU g of `node` can host one of this request's GPUs (type allowed, leftover ≥
  /// gpu_milli).
  bool GpuFits(const FragNode& node, int g) const {
    return TypeAllowed(node, g) && node.gpu_left[g] >= gpu_milli;
  }
};

/// A task shape m of the target workload as counted in a trace: (cpu, per-GPU milli, GPUs,
/// allowed GPU models). Memory is not part of it (docs/design/fgd-evaluation.md §3 point 4).
struct TaskShape {
  int64_t cpu_milli = 0;
  int32_t gpu_milli = 0;
  int32_t num_gpus = 0;
  std::string gpu_spec;  ///< allowed models separated by '|' ("" = any), as in the trace

  auto operator<=>(const TaskShape&) const = default;
  bool operator==(const TaskShape&) const = default;
};

/// A task shape with the number of pods of that shape in the trace.
struct ShapeCount {
  TaskShape shape;
  int64_t count = 0;
};

/// A task shape with its popularity p_m (Σ p_m = 1 over the workload).
struct WeightedShape {
  TaskShape shape;
  double popularity = 0;
};

/// Selects the target workload M from per-shape pod counts (docs/design/fgd-evaluation.md §3 point
/// 4): shapes ordered by count (descending; ties by the shape tuple, descending) are added one at a
/// time until they cover ≥ `coverage_percent` % of all pods; weights are count / total pods,
/// renormalised to sum to 1. Empty input gives an empty workload.
std::vector<WeightedShape> SelectTargetWorkload(std::vector<ShapeCount> counts,
                                                double coverage_percent);

/// Splits a '|'-separated model list ("V100M16|V100M32") into its non-empty entries.
std::vector<std::string> SplitGpuSpec(const std::string& gpu_spec);

/// Bit mask over `type_table` of the GPU types that the '|'-separated `gpu_spec` allows, using
/// the token rule of docs/design/CONTRACT.md §1 (GpuTypeAllowed); "" allows every type. Types past
/// kMaxFragTypes are never allowed.
uint64_t TypeMaskForSpec(const std::string& gpu_spec, const std::vector<std::string>& type_table);

/// The target workload compiled against a GPU type table, ready for fast evaluation.
struct FragWorkload {
  std::vector<FragDemand> shapes;  ///< cpu, gpu and type mask of each shape (mem 0)
  std::vector<double> popularity;  ///< p_m, same order

  /// Compiles `workload` against `type_table` (type id = index in the table).
  static FragWorkload Compile(const std::vector<WeightedShape>& workload,
                              const std::vector<std::string>& type_table);
};

/// F_n(m) in milli-GPU (docs/design/fgd-evaluation.md §3 point 5): all of the node's unallocated
/// GPU when m is CPU-only, the node lacks CPU for m, or fewer than m.num_gpus allowed GPUs have
/// leftover ≥ m.gpu_milli; otherwise the sum of the leftovers of the GPUs that cannot host m (too
/// small or of a type m does not allow; on single-type nodes this is "the leftovers < gpu_milli").
int64_t ShapeFragment(const FragNode& node, const FragDemand& shape);

/// F_n(M) = Σ_m p_m · F_n(m), milli-GPU (the expected fragment under the workload).
double NodeFragment(const FragNode& node, const FragWorkload& workload);

/// fracgpu's CPU-aware F_n(m), milli-GPU: ShapeFragment plus the GPU that m could use by type
/// and size but that m's CPU request cannot reach: with k = ⌊cpu_left / m.cpu_milli⌋ copies of m
/// fitting by CPU, the leftover of the GPUs that can host m beyond k · m.num_gpus · m.gpu_milli
/// is stranded for m. Equals ShapeFragment when m asks no CPU, or when the node has CPU for
/// enough copies of m to use all of that leftover. (FGD counts CPU only as a cliff: all or
/// nothing at cpu_left < m.cpu_milli; this adds the slope before the cliff.)
int64_t ShapeFragmentCpuAware(const FragNode& node, const FragDemand& shape);

/// Σ_m p_m · ShapeFragmentCpuAware(node, m), milli-GPU.
double NodeFragmentCpuAware(const FragNode& node, const FragWorkload& workload);

/// True when `demand` fits on `node` (§3 point 6): CPU ≤ left, memory ≤ left and, for a GPU
/// request, at least num_gpus allowed GPUs with leftover ≥ gpu_milli.
bool Fits(const FragNode& node, const FragDemand& demand);

/// The GPUs chosen for one pod on one node, in NVML index order of choice.
struct GpuPick {
  int32_t count = 0;
  std::array<int8_t, kMaxFragGpus> index{};
};

/// Places `demand` on `node` with the GPUs of `pick`: subtracts CPU, memory and gpu_milli from
/// each picked GPU, and records the GpuClustering tag. The caller has checked Fits().
void Apply(FragNode& node, const FragDemand& demand, const GpuPick& pick);

/// The `num_gpus` fitting GPUs with the smallest leftover (lowest index among equals); for a
/// whole-card request these are the lowest-indexed fully free GPUs. Empty pick when CPU-only.
GpuPick PickTightestGpus(const FragNode& node, const FragDemand& demand);

}  // namespace fracgpu::core
