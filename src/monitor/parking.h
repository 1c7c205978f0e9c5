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
//   reclaim: a wake NVML has no room for evicts the GPU's borrowers (ParkHost::reclaim, once),
//          then waits, poll after poll, up to ParkingOptions::reclaim_timeout for the memory;
//          past it, it says so (reclaim_timeouts) and evicts again at the next poll.
//
// What the agent lends is the parked slices' released memory per GPU (LentFromParked), which
// RunParkingLoop (monitor/park_host.h) publishes on the node (docs/reclaim.md "Lending").
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/status.h"
#include "core/lent.h"
#include "enforce/enforce.h"
#include "k8s/client.h"
#include "monitor/container_dirs.h"
#include "monitor/pods.h"
#include "monitor/region_reader.h"
#include "node/park.h"

namespace fracgpu::monitor {

/// Pod annotation: "true" opts the pod's containers into parking when idle, "false" opts out
/// (over the namespace default).
inline constexpr char kParkAnnotation[] = "fracgpu.io/park";

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
  /// How long a wake waits, after evicting the GPU's borrowers, for NVML to show the memory
  /// free (the borrowers' graceful termination); past it the wake is counted as timed out and
  /// the borrowers still there are evicted again at the next poll (--park-reclaim-timeout).
  std::chrono::nanoseconds reclaim_timeout = std::chrono::seconds(60);
  /// The idle-lending fallback (issue 36 item 4, docs/reclaim.md "The fallback"): an opted-in
  /// slice idle for idle_after that this agent has not parked (the driver is not on the
  /// allow-list, the slice is ineligible, or no borrower is pending) lends its never-allocated
  /// part, grant − live bytes − this margin, bytes (the owner's next allocation of a CUDA pool
  /// chunk or a context's growth, without waiting for an eviction). Set it above any slice
  /// (e.g. UINT64_MAX) to lend nothing.
  uint64_t idle_lend_margin_bytes = uint64_t{256} << 20;
  /// How long after a one-GPU slice stops lending its never-allocated part (it launched again or
  /// opted out; a park stops the clock) the agent still answers its reclaim requests: borrowers
  /// placed on that part may still hold it, or start late and allocate. Region::reclaim_lending
  /// stays set meanwhile, so the owner's allocation the driver refuses waits for the eviction;
  /// past it, it fails at once as before (docs/reclaim.md "The fallback").
  std::chrono::nanoseconds reclaim_request_window = std::chrono::minutes(5);
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
  bool parked = false;  ///< this agent parked it (and has not woken it)
  /// a pending borrower could use this node and what parking lends on the slice's GPU
  bool borrower_pending = false;
  bool single_gpu = false;  ///< the container has one GPU (a process checkpoints all its GPUs)
  uint64_t used_bytes = 0;  ///< the slice's charged device memory, bytes
  int processes = 0;        ///< active region slots
  int processes_without_host_pid = 0;
  uint64_t idle_ns = 0;        ///< now − (last launch, or first seen when it never launched)
  uint64_t wake_requests = 0;  ///< the region's count now
  uint64_t wake_baseline = 0;  ///< the count read before park_state was written
};

/// A taint of the node that keeps a pod off it unless tolerated (spec.taints[] of effect
/// NoSchedule or NoExecute; PreferNoSchedule does not keep a pod off and is not kept).
struct NodeTaint {
  std::string key;
  std::string value;
  std::string effect;  ///< "NoSchedule" or "NoExecute"
};

/// What a pending pod's placement on this node is checked against (core/v1 Node).
struct NodeView {
  std::string name;                           ///< metadata.name
  std::map<std::string, std::string> labels;  ///< metadata.labels
  std::vector<NodeTaint> taints;              ///< spec.taints of effect NoSchedule/NoExecute
};

/// Reads a core/v1 Node object. Errors: kInvalidArgument naming the field and its JSON type
/// (metadata.name missing, a label value or a taint's key, value or effect not a string).
Result<NodeView> ParseNodeView(const nlohmann::json& node);

/// Why pending pod `pod` (core/v1 Pod JSON) cannot be placed on `node`, as kube-scheduler's
/// node filters tell it: "" when it may be. Checked: spec.nodeName (when set, must be the node),
/// spec.nodeSelector (every entry an exact label match), spec.tolerations against every
/// NoSchedule/NoExecute taint (k8s.io/api core/v1 Toleration.ToleratesTaint: an effect, when
/// given, equal; a key, when given, equal; operator Exists, or Equal/empty with the value
/// equal), and spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution (its
/// nodeSelectorTerms ORed, each term's matchExpressions ANDed: In, NotIn, Exists,
/// DoesNotExist, Gt, Lt on the labels; matchFields metadata.name In/NotIn). What it cannot
/// evaluate counts as matching, so the agent may park for it (as before this check): a
/// toleration operator other than Exists/Equal, an affinity operator or field it does not know.
/// A field of the wrong JSON type does not match (the API server never serves one).
std::string BorrowerNodeMismatch(const nlohmann::json& pod, const NodeView& node);

/// A pending borrower that could use this node (BorrowerNodeMismatch "") and the device memory
/// it asks for on one GPU: the largest of its GPU containers' (core::ParsePodRequest, the
/// default resource names: nvidia.com/gpumem in MiB, nvidia.com/gpumem-percentage).
struct PendingBorrower {
  std::string name;         ///< "<namespace>/<name>", for the log
  int64_t mem_mib = 0;      ///< the largest explicit per-GPU request, MiB (0: none)
  int32_t mem_percent = 0;  ///< the largest per-GPU request by share of the card, % (0: none)
};

/// The bytes `b` needs on one GPU of `total_bytes` (NVML's total memory; 0 = unknown):
/// max(mem_mib MiB, mem_percent % of the card). A percentage with the card's size unknown
/// counts 0 (the borrower may use any room: the agent may park for it).
uint64_t BorrowerNeedBytes(const PendingBorrower& b, uint64_t total_bytes);

/// The decision, pure. Parked: kWake when the count passed the baseline or the pod no longer
/// opts in, else kNone. Running: kPark when opted in, a borrower is pending, it has one GPU,
/// holds memory, every process has a host pid, and idle_ns ≥ options.idle_after; else kNone.
ParkAction DecideParking(const ParkInput& in, const ParkingOptions& options);

/// A container slice's grant as the device plugin recorded it from the scheduler's signed
/// decision (its limits file, <hook>/vgpu/limits/<dir>.env, outside the tenant's reach): the one
/// GPU and the slice's memory. The agent takes the GPU and the byte counts it acts on from here,
/// never from the region, which the tenant writes.
struct SliceGrant {
  std::string uuid;    ///< NVIDIA_VISIBLE_DEVICES' one GPU
  uint64_t bytes = 0;  ///< the slice's memory limit on it, bytes (> 0)
};

/// How the agent reaches the driver, NVML and the pod's cgroup (tests pass fakes). `grant`,
/// `verify_process` and `start_time` are required to park: without them (null) nothing parks
/// and no orphan is woken (fail closed).
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
  /// NVML's total memory of GPU `uuid`, bytes (0: unknown); sizes a borrower's request given
  /// as a share of the card (BorrowerNeedBytes). Null: unknown.
  std::function<uint64_t(const std::string& uuid)> total_bytes;
  /// Evicts borrowers of GPU `uuid` so that `need_bytes` more come free for the wake of
  /// `owner` ("<namespace>/<name>" of the parked pod, its UID when unknown); returns how many
  /// were evicted (monitor::ReclaimFromBorrowers). Null: a wake without room only waits.
  std::function<Result<int>(const std::string& uuid, uint64_t need_bytes, const std::string& owner)>
      reclaim;
  /// The grant of the container slice whose region directory is named `dir_name`
  /// (ReadSliceGrant). Errors: why it is unknown (the slice is then not parked).
  std::function<Result<SliceGrant>(const std::string& dir_name)> grant;
  /// Verifies that host pid `pid`, named by the region (the tenant's to write), is a process of
  /// container `dir` (its cgroup's pod UID and container, as the enforcement maps them, with
  /// `pod` naming the container: null = unknown, refused) and, when `on_gpu`, that NVML lists it
  /// as a compute process of GPU `uuid`; returns its start time (/proc/<pid>/stat field 22).
  /// Errors: why not (the slice is then not parked, nor an orphan touched).
  std::function<Result<uint64_t>(int pid, const ContainerDir& dir, const PodRef* pod,
                                 const std::string& uuid, bool on_gpu)>
      verify_process;
  /// The start time of `pid` now (/proc/<pid>/stat field 22). Errors: kNotFound (gone), others.
  std::function<Result<uint64_t>(int pid)> start_time;
  /// The driver's account of every GPU: its compute and graphics processes (host pids) with
  /// the device memory each holds (NVML's usedGpuMemory, bytes), as
  /// enforce::ProcessSource::Sample gives it to the bypass detection; a GPU whose processes
  /// NVML cannot list has processes_ok false. The idle-lending fallback counts the processes of
  /// a slice's container on its granted GPU (verify_process, its cgroup) in its live bytes,
  /// which the region alone (the tenant's to write) cannot prove. Errors: NVML cannot be read.
  /// Null, an error, or the GPU missing or unlisted: the fallback lends nothing (fail closed).
  std::function<Result<std::vector<enforce::GpuSample>>()> gpu_processes;
};

/// A container slice this agent holds parked.
struct ParkedSlice {
  std::string dir;   ///< the region directory's name, "<pod UID>_<container>"
  std::string uuid;  ///< the GPU, the grant's (SliceGrant::uuid)
  std::vector<int> pids;
  /// The start time of each of `pids` at the park (same order): a pid whose start time differs
  /// later is another process and is never restored nor unlocked.
  std::vector<uint64_t> start_times;
  uint64_t released_bytes = 0;  ///< what Park released (what Wake must find free), bytes
  /// What the slice lends: min(released_bytes, the bytes the region charged with every process
  /// locked, the grant's bytes). released_bytes is the rise of the whole GPU's free memory
  /// (another pod freeing memory meanwhile counts in it) and the charge is the tenant's to
  /// write: the grant bounds both.
  uint64_t lent_bytes = 0;
  uint64_t wake_baseline = 0;
  bool waiting_for_room = false;  ///< a wake was asked and NVML lacks the memory
  /// When (the poll's CLOCK_MONOTONIC, ns) this wake evicted the GPU's borrowers; 0: it has
  /// not (or the wait timed out and the next poll evicts again).
  uint64_t reclaim_since_ns = 0;
  /// The owner asked for its memory back (set at the first wake attempt, kept until the wake
  /// completes): from then on the GPU lends nothing (LentFromParked), so that no borrower is
  /// placed on memory the agent is reclaiming.
  bool wake_requested = false;
};

/// What one opted-in, idle, running (not parked) slice can lend on one GPU (IdleLendBytes).
/// The controller fills it from the grant and the driver, never from the region alone
/// (docs/reclaim.md "The fallback").
struct IdleSlice {
  std::string uuid;          ///< the GPU, the grant's (SliceGrant::uuid)
  uint64_t limit_bytes = 0;  ///< the grant's memory (SliceGrant::bytes); 0 lends nothing
  /// The live bytes: max(the region's charged bytes, NVML's of the container's processes)
  uint64_t used_bytes = 0;
};

/// The never-allocated part a slice lends: limit − used − margin, bytes, 0 when the slice is
/// unlimited, names no GPU, or the difference is not positive (saturating: the region is the
/// tenant's to write, a used total above the limit lends nothing).
uint64_t IdleLendBytes(const IdleSlice& slice, uint64_t margin_bytes);

/// What the parked slices `parked` lend, per GPU: their lent_bytes in MiB (rounded down;
/// a GPU lending 0 MiB, or whose UUID the record refuses, is left out), in UUID order, stamped
/// `at_unix` (Unix seconds). Only the released memory is lent, not the rest of the slices: what the
/// owner never allocated must still be there when it allocates after its wake. A GPU on which
/// a parked slice's wake was requested (ParkedSlice::wake_requested) is left out altogether.
core::LentMemory LentFromParked(const std::map<std::string, ParkedSlice>& parked, int64_t at_unix);

/// The node's one lent-memory record: per GPU, the parked slices' lent bytes plus
/// `idle_bytes` (bytes by UUID: what running idle slices lend, ParkController::idle_lent),
/// summed before the rounding down to MiB; the same refusals as LentFromParked, and nothing on
/// a GPU where a parked slice's wake was requested.
core::LentMemory LentFromSlices(const std::map<std::string, ParkedSlice>& parked,
                                const std::map<std::string, uint64_t>& idle_bytes, int64_t at_unix);

/// Parks and wakes the node's containers. Not thread-safe: one thread polls.
class ParkController {
 public:
  ParkController(ParkingOptions options, ParkHost host);

  /// One poll at CLOCK_MONOTONIC `now_ns` over the region directories `dirs` (under their
  /// regions' files <dir.path>/region.cache), `pods` by UID, and the pending borrowers that
  /// could use this node (PendingBorrowers). A slice parks only for a borrower whose request
  /// (BorrowerNeedBytes, the card's size from ParkHost::total_bytes) is at most what parking
  /// could lend on the slice's GPU: the lent bytes of the slices parked there (a wake not
  /// asked) plus, for each slice that would park at this poll (DecideParking with a borrower),
  /// its charged bytes bounded by its grant (ParkHost::grant, which must name the region's
  /// GPU; a slice without one adds nothing). Never throws; a region it cannot read or write is
  /// skipped (and logged).
  void Poll(uint64_t now_ns, const std::vector<ContainerDir>& dirs,
            const std::map<std::string, PodRef>& pods,
            const std::vector<PendingBorrower>& borrowers);
  /// The same with `borrower_pending` standing for one borrower that asks no memory (any slice
  /// that would park parks), or none.
  void Poll(uint64_t now_ns, const std::vector<ContainerDir>& dirs,
            const std::map<std::string, PodRef>& pods, bool borrower_pending);

  /// The slices parked now, by directory name.
  const std::map<std::string, ParkedSlice>& parked() const { return parked_; }
  /// The last park or wake outcome per directory name (for the log and tests): a sentence.
  const std::map<std::string, std::string>& last_outcome() const { return last_outcome_; }
  /// What the opted-in slices idle for idle_after and not parked lend at the last poll, bytes
  /// by GPU UUID (IdleLendBytes summed over grant − live − margin; nothing from a region that
  /// does not read or validate, a slice without a readable one-GPU grant or whose region names
  /// another GPU, or one whose GPU NVML cannot list: ParkHost::gpu_processes).
  const std::map<std::string, uint64_t>& idle_lent() const { return idle_lent_; }
  /// Borrowers evicted so far: for wakes, and for owners of lent never-allocated parts that
  /// came back (the weaker fallback of docs/reclaim.md "The fallback").
  uint64_t evictions() const { return evictions_; }
  /// Wakes whose borrowers' eviction did not free the memory within reclaim_timeout, so far.
  uint64_t reclaim_timeouts() const { return reclaim_timeouts_; }
  /// Parks refused so far because the slice's grant or a process could not be verified
  /// (ParkHost::grant, verify_process; the reason is in last_outcome and the log).
  uint64_t refusals() const { return refusals_; }
  /// Polls at which a lending slice's reclaim requests (libvgpu.so's RegionSlot::reclaim_*)
  /// grew and were answered, so far (docs/reclaim.md "The fallback").
  uint64_t reclaim_requests() const { return reclaim_requests_; }

 private:
  void TryPark(const ContainerDir& dir, const RegionContents& region, const PodRef* pod);
  // "" when every process of `slice` still has its start time of the park, else which not.
  std::string Changed(const ParkedSlice& slice) const;
  void TryWake(ParkedSlice& slice, const std::string& path, uint64_t now_ns,
               const std::string& owner);
  void Reclaim(ParkedSlice& slice, uint64_t now_ns, const std::string& owner);
  // Evicts the borrowers of `uuid` for what `need_bytes` lacks of NVML's free memory; returns
  // how many were evicted (0: none needed, none there, or the eviction failed).
  int ReclaimForOwner(const std::string& uuid, uint64_t need_bytes, const std::string& owner);
  /// The reclaim state of a one-GPU slice whose grant is verified and that lends (or lent
  /// within reclaim_request_window) its never-allocated part: Region::reclaim_lending bit 0 is
  /// set while it exists. Keyed by the region directory's name.
  struct Answering {
    std::string uuid;            ///< the grant's GPU
    uint64_t grant_bytes = 0;    ///< the grant's memory
    uint64_t lent_bytes = 0;     ///< the most it lent since the mark, at most grant_bytes
    uint64_t window_end_ns = 0;  ///< 0 while lending or parked; else when the mark goes
    /// Each active slot's (index, pid, start time) → its (reclaim_requests, reclaim_bytes) at
    /// the last poll.
    std::map<std::tuple<int, int32_t, uint64_t>, std::pair<uint64_t, uint64_t>> seen;
    /// The most bytes an eviction for this slice asked to have free, and until when its
    /// borrowers may still be terminating (reclaim_timeout): a request for no more is covered.
    uint64_t covered_bytes = 0;
    uint64_t covered_until_ns = 0;
    /// The slice lends nothing until then (its owner asked for memory back).
    uint64_t quiet_until_ns = 0;
  };
  /// What the fallback counts on for a running slice, none of it the region's word alone.
  struct FallbackFacts {
    SliceGrant grant;           ///< the GPU and the limit (ParkHost::grant)
    uint64_t driver_bytes = 0;  ///< NVML's usedGpuMemory of the container's processes there
    uint64_t live_bytes = 0;    ///< max(the region's live bytes, driver_bytes)
  };
  // The fallback's facts of slice `dir` (pod `pod`, null: unknown): its grant (whose GPU the
  // region's one device must name) and its live bytes on that GPU, the driver's counted over
  // the processes NVML lists there that verify_process says are the container's. `sample`
  // holds this poll's NVML process lists (read on first use). Errors: why it lends nothing
  // (no grant, another GPU or several, NVML unreadable, a process that cannot be told).
  Result<FallbackFacts> FallbackTruth(
      const ContainerDir& dir, const RegionContents& region, const PodRef* pod,
      std::optional<Result<std::vector<enforce::GpuSample>>>* sample);
  // Answers the reclaim requests of device 0 of `dir` (lending `lent_now` bytes at this poll,
  // region.devices[0]; `facts`: FallbackTruth's at this poll, null when not known): sets or
  // clears the mark (set only from known facts), evicts for new requests (bounded by the
  // grant). True when requests were answered at this poll (the after-the-fact path then
  // stands aside).
  bool AnswerReclaims(const ContainerDir& dir, const std::string& path,
                      const RegionContents& region, const FallbackFacts* facts, uint64_t lent_now,
                      bool parked, uint64_t now_ns, const std::string& owner);
  // Evicts for `need_bytes` free on the slice's GPU unless an eviction for at least as much is
  // still under way.
  void ReclaimForSlice(Answering& a, uint64_t need_bytes, const std::string& owner,
                       uint64_t now_ns);
  void MarkReclaimLending(const std::string& dir_name, const std::string& path, uint32_t devices);
  node::ParkTarget Target(const std::string& path, const std::string& uuid,
                          const std::string& pod_uid, std::vector<int> pids,
                          std::vector<uint64_t> start_times) const;

  ParkingOptions options_;
  ParkHost host_;
  node::Parker parker_;
  std::map<std::string, ParkedSlice> parked_;
  std::map<std::string, uint64_t> first_seen_ns_;
  std::map<std::string, uint64_t> idle_lent_;
  /// A running slice that lent its never-allocated part at the last poll, keyed by directory
  /// name: its grant's GPU and memory, and its live bytes then (FallbackFacts).
  struct Lending {
    std::string uuid;
    uint64_t grant_bytes = 0;
    uint64_t live_bytes = 0;
  };
  std::map<std::string, Lending> lending_;
  std::map<std::string, std::string> lend_errors_;  // directory → why it last did not lend
  std::map<std::string, Answering> answering_;
  std::map<std::string, std::string> mark_errors_;  // directory → the last mark write error
  std::map<std::string, std::string> last_outcome_;
  uint64_t reclaim_requests_ = 0;
  uint64_t evictions_ = 0;
  uint64_t reclaim_timeouts_ = 0;
  uint64_t refusals_ = 0;
};

/// The grant of container slice `dir_name` from its limits file `<limits_dir>/<dir_name>.env`
/// (written by the device plugin from the scheduler's signed decision; read as the enforcement
/// reads it: 64 KiB at most, no symlink, never blocking): exactly one GPU in
/// NVIDIA_VISIBLE_DEVICES and a memory limit on it (vgpu::EffectiveMemoryLimit). Errors:
/// kNotFound / kUnavailable (the file), kInvalidArgument (a parse error, not one GPU, no limit
/// or one that fails closed).
Result<SliceGrant> ReadSliceGrant(const std::string& limits_dir, const std::string& dir_name);

/// Writes RegionDevice::park_state of device `device` of the region file at `path`: opened
/// O_WRONLY|O_NOFOLLOW (the file lies in a directory the tenant writes), must be a regular file
/// of sizeof(api::Region) bytes, one 8-byte pwrite at the field's offset (never mapped: a tenant
/// could truncate a mapping under the agent). Errors: kUnavailable (open or write, errno text),
/// kInvalidArgument (not a regular file, wrong size, device out of range).
Status WriteParkState(const std::string& path, int device, uint64_t state);

/// Writes Region::reclaim_lending of the region file at `path` to `devices` (bit d: device d
/// lends and its reclaim requests are answered), as WriteParkState writes: O_NOFOLLOW, a
/// regular file of sizeof(api::Region) bytes, one 4-byte pwrite at the field's offset. Errors:
/// WriteParkState's.
Status WriteReclaimLending(const std::string& path, uint32_t devices);

/// The unscheduled borrowers pending in the cluster that could use node `node_name`: Pending
/// pods with no node (GET /api/v1/pods, fieldSelector status.phase=Pending,spec.nodeName=,
/// paged) whose annotation core::kAnnotationBorrower is "true", that BorrowerNodeMismatch
/// places on the node (GET the node only when there is such a pod) and that ask for a GPU
/// (core::ParsePodRequest; a request that does not parse, or no GPU container, is left out),
/// with what each asks per GPU. Errors: the API server's, or the node's (ParseNodeView).
Result<std::vector<PendingBorrower>> PendingBorrowers(k8s::Client* client,
                                                      const std::string& node_name);

/// Writes node `node`'s lent-memory record (core::kAnnotationLentMemory) to `value`
/// (core::FormatLentMemory's), or removes it when `value` is empty: one merge patch of the
/// node's annotations. Errors: the API server's.
Status PatchLentMemory(k8s::Client* client, const std::string& node, const std::string& value);

}  // namespace fracgpu::monitor
