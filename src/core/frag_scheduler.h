#pragma once
// The fragmentation-aware policy (FGD, Weng et al., USENIX ATC '23) for the real scheduler:
// GpuPolicy::kFragmentationAware (`hami.io/gpu-scheduler-policy: fragmentation-aware`).
// It works on the scheduler's NodeState and PodRequest and plugs into core fit through
// FitOptions::orderer, so every check of fit (health, cordon, type, UUID, slices, memory,
// cores, exclusivity, NUMA, distinct cards, several containers) still applies; FGD only decides
// the order in which fit tries the GPUs, and scores the node.
//
// A GPU's leftover is (devcore − used_cores) × 10 milli-GPU and a container's share is
// cores_percent × 10 (docs/design/fgd-evaluation.md; a devcore-100 card has 1000 milli). Memory is
// not a dimension of the measure (as in the paper); a container asking only for memory (cores 0)
// has no GPU share and leaves F unchanged. GPUs that cannot take any new slice (unhealthy,
// cordoned, split count exhausted) have no usable leftover: unhealthy and cordoned ones count
// as 0, an exhausted one's leftover counts as fragment for every task shape.

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "core/fgd_policies.h"
#include "core/fit.h"
#include "core/frag.h"
#include "core/node.h"
#include "core/request.h"

namespace fracgpu::core {

/// A node's FragNode view. `type_table` receives the node's distinct GPU type strings (type id
/// = index); `usage`, when not empty, overrides each GPU's usage (one entry per GPU). CPU left
/// is cpu_milli_total − cpu_milli_used, or "unlimited" (INT64_MAX / 2) when not tracked; the
/// same for memory. GPUs past kMaxFragGpus are ignored.
FragNode ToFragNode(const NodeState& node, std::vector<std::string>& type_table,
                    std::span<const GpuUsage> usage = {});

/// The target workload M and the FGD variant the scheduler uses. Thread-safe (immutable).
class FragmentationModel {
 public:
  /// `workload`: task shapes with popularity (e.g. SelectTargetWorkload over the pods the
  /// cluster has seen); `policy`: kFgd (the paper's FGD, the default) or one of fracgpu's FGD
  /// variants (UsesFragment(policy) must hold, otherwise kFgd is used).
  explicit FragmentationModel(std::vector<WeightedShape> workload,
                              PlacementPolicy policy = PlacementPolicy::kFgd);

  /// F_n(M) of the node as it is, milli-GPU.
  double NodeFragment(const NodeState& node) const;

  /// The outcome of scoring one node.
  struct Score {
    /// int(sigmoid(ΔF / 1000) × scale), scale = FgdScoreScale(policy) (100: 0..100, 50 = no
    /// change of F); for a RoutesCpu policy plus scale + 1 where CpuRouteFirst holds.
    int32_t score = 0;
    FitResult fit;  ///< core fit with the fragmentation-aware GPU order (grants, positions)
  };

  /// Fits `pod` on `node` with the FGD GPU order and scores the node by ΔF of the whole pod
  /// (pod_cpu_milli is the pod's CPU request, subtracted in the hypothetical as the paper does).
  /// Errors: kResourceExhausted with fit's summary when the pod does not fit.
  Result<Score> ScoreNode(const PodRequest& pod, int64_t pod_cpu_milli,
                          const NodeState& node) const;

  /// A GpuOrderer for FitOptions::orderer: for a sharing container (one GPU, cores < 100) the
  /// GPUs by FGD score (highest first, index order among equals); for other containers the
  /// GPUs with the smallest leftover first (lowest index among equals). GPUs too small for
  /// the container come last. Allocates (the node's type table, the compiled workload, the
  /// ranking), so Fits() with this orderer is not allocation-free. Valid while the model lives.
  class Orderer : public GpuOrderer {
   public:
    Orderer(const FragmentationModel& model, int64_t pod_cpu_milli)
        : model_(&model), pod_cpu_milli_(pod_cpu_milli) {}
    void Order(const ContainerRequest& container, const PodRequest& pod, const NodeState& node,
               std::span<const GpuUsage> usage, std::span<uint16_t> order) const override;

   private:
    const FragmentationModel* model_;
    int64_t pod_cpu_milli_;
  };

  const std::vector<WeightedShape>& workload() const { return workload_; }
  PlacementPolicy policy() const { return policy_; }

 private:
  // M compiled against the node's type table.
  FragWorkload Compile(const std::vector<std::string>& type_table) const;

  std::vector<WeightedShape> workload_;
  PlacementPolicy policy_;
};

}  // namespace fracgpu::core
