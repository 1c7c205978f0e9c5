#pragma once
// The borrowers of a GPU, and their eviction when the GPU's parked owner wakes (issue 36 item 3,
// docs/reclaim.md "Evicting borrowers"): a parked notebook's memory is lent to pods annotated
// `fracgpu.io/borrower: "true"`; when the notebook makes its next CUDA call the agent must give
// the memory back before it restores, so it evicts borrowers holding memory of that GPU (newest
// first, until what they hold covers what is missing), each with a Warning Event saying why, and
// restores only once NVML shows the room (node::Parker::Wake).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "k8s/client.h"

namespace fracgpu::monitor {

/// A borrower pod holding memory of one GPU.
struct Borrower {
  std::string namespace_name;
  std::string name;
  std::string uid;
  std::string created;  ///< metadata.creationTimestamp (RFC 3339, sorts as time)
  int64_t mib = 0;      ///< MiB its allocation holds on the GPU, all containers together

  bool operator==(const Borrower&) const = default;
};

/// The borrowers of GPU `gpu_uuid` among `pods` (a core/v1 PodList, or its `items` array):
/// pods annotated `fracgpu.io/borrower: "true"`, neither terminating (deletionTimestamp) nor
/// finished (phase Succeeded or Failed), whose allocation (`hami.io/vgpu-devices-allocated`,
/// core/codec.h) names the GPU (UUIDs compared without case). A pod whose allocation does not
/// decode is skipped, as it holds nothing the books know of. Order: the list's.
std::vector<Borrower> BorrowersOf(const nlohmann::json& pods, const std::string& gpu_uuid);

/// Which borrowers to evict so that `need_mib` MiB come free: the newest first (a borrower that
/// has run longer has more work to lose), until what they hold reaches `need_mib`; none when
/// `need_mib` <= 0; all of them when together they hold less.
std::vector<Borrower> ChooseEvictions(std::vector<Borrower> borrowers, int64_t need_mib);

/// The grace period, in seconds, a borrower gets to stop when it is evicted or deleted for a
/// wake (DeleteOptions.gracePeriodSeconds): the woken owner waits for it, so a borrower's own
/// longer terminationGracePeriodSeconds does not apply (issue 36 review finding 5).
inline constexpr int64_t kBorrowerGraceSeconds = 30;

/// Evicts `b` through the Eviction API (policy/v1: POST
/// /api/v1/namespaces/<ns>/pods/<name>/eviction) with DeleteOptions gracePeriodSeconds
/// kBorrowerGraceSeconds and a precondition on its uid. A borrower is preemptible by contract,
/// so a PodDisruptionBudget does not keep it: when the Eviction API still answers HTTP 429
/// after the client's own retries (k8s::ClientOptions retries, with backoff), the pod is
/// deleted (DELETE ...?gracePeriodSeconds=kBorrowerGraceSeconds) once a GET shows the same uid.
/// Then records a Warning Event `GPUMemoryReclaimed` on it naming the GPU and `node` only, not
/// the owner, which is another tenant's pod (`owner` is for the agent's log). Errors: the
/// eviction's or the deletion's (a pod already gone is kNotFound, a recreated one kConflict);
/// the Event is best effort (its failure is logged, not returned).
Status EvictBorrower(k8s::Client& client, const Borrower& b, const std::string& owner,
                     const std::string& gpu_uuid, const std::string& node = "");

/// Evicts the borrowers of GPU `gpu_uuid` on node `node` so that `need_bytes` come free for the
/// wake of `owner`: lists the node's pods (fieldSelector spec.nodeName), BorrowersOf,
/// ChooseEvictions for the MiB rounded up (newest first; terminating borrowers are not counted
/// again), EvictBorrower each. A borrower already gone is skipped; another failure is logged and
/// the rest are still evicted. Returns how many were evicted (0: none there). Errors: the list's;
/// the first eviction's error when none succeeded.
Result<int> ReclaimFromBorrowers(k8s::Client& client, const std::string& node,
                                 const std::string& gpu_uuid, uint64_t need_bytes,
                                 const std::string& owner);

}  // namespace fracgpu::monitor
