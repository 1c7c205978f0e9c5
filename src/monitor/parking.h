#pragma once
// The node agent's parking of idle containers (issue 36 items 1 and 3, docs/reclaim.md
// "The agent's parking loop"): each poll decides, per container slice, whether to park it
// (opted in, idle for the configured time, a borrower pending) or to wake it (its processes
// asked through the region's wake_requests, or it opted out), and carries the decision out with
// node::Parker, writing the region's park_state around the driver's calls:
//
//   park:  read wake_requests (the baseline), write kParkParked, Parker::Park; on any outcome but
//          kParked write kParkRunning again. A call of the tenant that met kParkParked after
//          the baseline counts, so a call that waits in the driver is never missed (one that
//          met it before the Lock only causes an early wake).
//   wake:  Parker::Wake (never a Restore without NVML showing the memory), then kParkRunning.
//
// What this does not do yet (docs/reclaim.md): lend the parked memory (the extender does not
// place borrowers on it), evict borrowers when a wake lacks room (the wake waits for the memory
// and says so), wake on a CUDA call libvgpu.so does not hook.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "k8s/client.h"
#include "monitor/container_dirs.h"
#include "monitor/pods.h"
#include "monitor/region_reader.h"
#include "node/park.h"

namespace fracgpu::monitor {

/// Pod annotation: "true" opts the pod's containers into parking when idle, "false" opts out
/// (over the namespace default).
inline constexpr char kParkAnnotation[] = "fracgpu.io/park";
/// Pod annotation: "true" marks a pod as a borrower of parked memory (issue 36 item 2); a
/// pending unscheduled borrower is what makes the agent park.
inline constexpr char kBorrowerAnnotation[] = "fracgpu.io/borrower";

/// The agent's parking settings (the `fracgpu monitor` flags --park-*; docs/monitor.md).
struct ParkingOptions {
  /// No kernel launch on the GPU for this long (the region's last_launch_ns; a container that
  /// never launched counts from the first poll that saw it).
  std::chrono::nanoseconds idle_after = std::chrono::minutes(30);
  /// Namespaces whose pods park unless their annotation says "false"; elsewhere only pods
  /// annotated "true" park.
  std::set<std::string> default_namespaces;
  /// node::CheckpointEligible's driver allow-list (exact versions or prefixes ending in '.').
  std::vector<std::string> allowed_drivers;
  /// cuCheckpointProcessLock's timeout, ms: a Lock that waits longer means busy (retry later).
  unsigned lock_timeout_ms = 500;
};

/// Whether `pod` (null: unknown) is opted in under `options`: its annotation, else the
/// namespace default. An unknown pod never parks.
bool ParkOptedIn(const PodRef* pod, const ParkingOptions& options);

/// What one poll decides for one container slice.
enum class ParkAction {
  kNone = 0,
  kPark,
  kWake,
};

/// The facts of one container slice that the decision reads.
struct ParkInput {
  bool opted_in = false;
  bool parked = false;            ///< this agent parked it (and has not woken it)
  bool borrower_pending = false;  ///< a borrower waits for memory
  bool single_gpu = false;  ///< the container has one GPU (a process checkpoints all its GPUs)
  uint64_t used_bytes = 0;  ///< the slice's charged device memory, bytes
  int processes = 0;        ///< active region slots
  int processes_without_host_pid = 0;
  uint64_t idle_ns = 0;        ///< now − (last launch, or first seen when it never launched)
  uint64_t wake_requests = 0;  ///< the region's count now
  uint64_t wake_baseline = 0;  ///< the count read before park_state was written
};

/// The decision, pure. Parked: kWake when the count passed the baseline or the pod no longer
/// opts in, else kNone. Running: kPark when opted in, a borrower is pending, it has one GPU,
/// holds memory, every process has a host pid, and idle_ns ≥ options.idle_after; else kNone.
ParkAction DecideParking(const ParkInput& in, const ParkingOptions& options);

/// How the agent reaches the driver, NVML and the pod's cgroup (tests pass fakes).
struct ParkHost {
  node::CheckpointDriver driver;
  /// The facts of GPU `uuid` (driver version, persistence, MIG, MPS) and of the host memory of
  /// pod `pod_uid`'s container whose CUDA processes are `pids` (host pids; limit known, limit,
  /// use); the controller fills process_uses and device_bytes from the region.
  std::function<node::CheckpointFacts(const std::string& uuid, const std::string& pod_uid,
                                      const std::vector<int>& pids)>
      facts;
  /// NVML's free memory of GPU `uuid`, bytes.
  std::function<uint64_t(const std::string& uuid)> free_bytes;
};

/// A container slice this agent holds parked.
struct ParkedSlice {
  std::string dir;   ///< the region directory's name, "<pod UID>_<container>"
  std::string uuid;  ///< the GPU
  std::vector<int> pids;
  uint64_t released_bytes = 0;  ///< what Park released (what Wake must find free), bytes
  uint64_t wake_baseline = 0;
  bool waiting_for_room = false;  ///< a wake was asked and NVML lacks the memory
};

/// Parks and wakes the node's containers. Not thread-safe: one thread polls.
class ParkController {
 public:
  ParkController(ParkingOptions options, ParkHost host);

  /// One poll at CLOCK_MONOTONIC `now_ns` over the region directories `dirs` (under their
  /// regions' files <dir.path>/region.cache), `pods` by UID, and whether a borrower is pending.
  /// Never throws; a region it cannot read or write is skipped (and logged).
  void Poll(uint64_t now_ns, const std::vector<ContainerDir>& dirs,
            const std::map<std::string, PodRef>& pods, bool borrower_pending);

  /// The slices parked now, by directory name.
  const std::map<std::string, ParkedSlice>& parked() const { return parked_; }
  /// The last park or wake outcome per directory name (for the log and tests): a sentence.
  const std::map<std::string, std::string>& last_outcome() const { return last_outcome_; }

 private:
  void TryPark(const ContainerDir& dir, const RegionContents& region);
  void TryWake(ParkedSlice& slice, const std::string& path);
  node::ParkTarget Target(const std::string& path, const std::string& uuid,
                          const std::string& pod_uid, std::vector<int> pids) const;

  ParkingOptions options_;
  ParkHost host_;
  node::Parker parker_;
  std::map<std::string, ParkedSlice> parked_;
  std::map<std::string, uint64_t> first_seen_ns_;
  std::map<std::string, std::string> last_outcome_;
};

/// Writes RegionDevice::park_state of device `device` of the region file at `path`: opened
/// O_WRONLY|O_NOFOLLOW (the file lies in a directory the tenant writes), must be a regular file
/// of sizeof(api::Region) bytes, one 8-byte pwrite at the field's offset (never mapped: a tenant
/// could truncate a mapping under the agent). Errors: kUnavailable (open or write, errno text),
/// kInvalidArgument (not a regular file, wrong size, device out of range).
Status WriteParkState(const std::string& path, int device, uint64_t state);

/// Whether an unscheduled borrower is pending in the cluster: a Pending pod with no node whose
/// annotation kBorrowerAnnotation is "true" (GET /api/v1/pods, paged). Errors: the API
/// server's.
Result<bool> BorrowerPending(k8s::Client* client);

}  // namespace fracgpu::monitor
