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

/// Evicts `b` through the Eviction API (policy/v1: POST
/// /api/v1/namespaces/<ns>/pods/<name>/eviction, which honours the pod's PodDisruptionBudgets
/// and its graceful termination), then records a Warning Event `GPUMemoryReclaimed` on it naming
/// `owner` ("<namespace>/<name>" of the woken pod) and the GPU. Errors: the eviction's (a
/// PodDisruptionBudget that forbids it is kUnavailable, HTTP 429; a pod already gone is
/// kNotFound); the Event is best effort (its failure is logged, not returned).
Status EvictBorrower(k8s::Client& client, const Borrower& b, const std::string& owner,
                     const std::string& gpu_uuid);

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
