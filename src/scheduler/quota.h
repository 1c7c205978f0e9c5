#pragma once
// Namespace GPU quotas: HAMi v2.10's extended ResourceQuota (pkg/device/quota.go; HAMi's
// "Using ResourceQuota" guide). A ResourceQuota whose spec.hard names
// `limits.<resourceMemoryName>` (MiB in units of memoryFactor, default nvidia.com/gpumem) or
// `limits.<resourceCoreName>` (percent of a card, nvidia.com/gpucores) caps what the namespace's
// GPU pods hold together, counted as HAMi counts it: per GPU × number of GPUs, with a memory
// percentage or a whole card resolved on the card the pod is placed on. Kubernetes' own quota
// admission counts the limits as written (gpumem once, not per GPU; nothing for a whole card),
// so the scheduler enforces these: at admission (what the spec alone determines), at /filter
// (reason ResourceQuotaNotFit, with the cards of that node) and at /bind.
//
// Thread-safe: the informer thread calls Upsert/Remove, request threads Check.

#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/request.h"
#include "scheduler/state.h"

namespace fracgpu::scheduler {

/// GPU memory (MiB) and cores (percent of a card, summed over GPUs) a pod holds or asks for.
struct QuotaAmount {
  int64_t mem_mib = 0;
  int64_t cores = 0;
};

/// The amount of a pod's grants (every container, init containers included, as HAMi's
/// countPodDevices sums them).
QuotaAmount AmountOfGrants(const core::PodGrants& grants);

/// The amount a request asks for where the spec alone determines it: per container
/// gpumem × GPUs (MiB, after memoryFactor) and gpucores × GPUs. A container whose memory is a
/// percentage or the whole card adds no memory here and sets *card_dependent (its memory is
/// known only on a node: /filter and /bind check it).
QuotaAmount AmountOfRequest(const core::PodRequest& request, bool* card_dependent);

/// What the pods of namespace `ns` hold now (the sum of their recorded grants), leaving out
/// the pod with UID `skip_uid` (a pod being filtered or bound again).
QuotaAmount UsedIn(const ClusterState& state, const std::string& ns,
                   const std::string& skip_uid = "");

/// The namespaces' GPU quotas, from the ResourceQuota objects an informer delivers.
class QuotaTracker {
 public:
  explicit QuotaTracker(core::ResourceNames names = {});

  /// A ResourceQuota added or changed: its spec.hard entries `limits.<gpumem name>` and
  /// `limits.<gpucores name>` (whole numbers; other entries and malformed values ignored, as
  /// HAMi's AddQuota ignores what AsInt64 refuses).
  void Upsert(const nlohmann::json& resource_quota);
  /// A ResourceQuota deleted.
  void Remove(const nlohmann::json& resource_quota);

  /// True when some ResourceQuota of `ns` limits GPU memory or cores.
  bool Limited(const std::string& ns) const;
  /// The first (by name) ResourceQuota of `ns` that limits GPU memory or cores and its first
  /// such entry, as "<ns>/<name> limits.<resource>" (e.g. "ml/gpu-quota
  /// limits.nvidia.com/gpumem"); "" when none does.
  std::string LimitingQuota(const std::string& ns) const;

  /// "" when `used` + `add` stays within every GPU quota of `ns`; otherwise the reason,
  /// starting with HAMi's "ResourceQuotaNotFit" and naming the quota, the limit, what is used
  /// and what is asked, e.g. `ResourceQuotaNotFit: ResourceQuota ml/gpu-quota
  /// limits.nvidia.com/gpumem is 8000 (MiB), 6000 used, 4096 asked`. A memory limit counts in
  /// gpumem units: limit × memoryFactor MiB (HAMi's FitQuota).
  std::string Check(const std::string& ns, const QuotaAmount& used, const QuotaAmount& add) const;

  /// One limit for the metrics: namespace, resource name (e.g. nvidia.com/gpumem), the
  /// smallest hard value among the namespace's quotas on it (as written, gpumem units).
  struct Limit {
    std::string ns;
    std::string resource;
    int64_t limit = 0;
  };
  std::vector<Limit> Limits() const;

  /// The resource names whose quotas this tracker reads.
  const core::ResourceNames& names() const { return names_; }

 private:
  core::ResourceNames names_;
  mutable std::mutex mu_;
  // "<namespace>/<name>" → resource name → hard limit.
  std::map<std::string, std::map<std::string, int64_t>> quotas_;
};

}  // namespace fracgpu::scheduler
